//! `rnccl check` started by a launcher (srun, mpirun, torchrun): every process is one rank of
//! the world, with the launcher's rank, size and rendezvous ([`rnccl::launch`]); hosts are the
//! ranks' hosts (NCCL's host identity), each host's ranks measured together. Rank 0 prints the
//! report and ends with the check's exit status; the other ranks end with 0 unless they fail.

use std::process::ExitCode;
use std::sync::Arc;

use rnccl::check::{RankSetup, Rule, run_rank, world_timeout};
use rnccl::config::Config;
use rnccl::launch::LaunchEnv;
use rnccl::{CommConfig, Communicator, UniqueId};

use super::collect::Collector;
use super::plan::Plan;
use super::{Args, finish};
use crate::bench::backend::{Backend, Choice};

/// A launched rank, ready to run.
pub struct Launched {
    launch: LaunchEnv,
    id: UniqueId,
    plan: Plan,
    rule: Rule,
    knobs: Config,
    device: Option<usize>,
}

impl Launched {
    /// Checks what the launcher gave and picks this rank's GPU (its local rank's, modulo the
    /// host's GPUs) or a CPU rank.
    ///
    /// Errors: as [`LaunchEnv::unique_id`]: no rendezvous address the job can be told apart
    /// by, or a malformed one.
    pub fn new(
        launch: LaunchEnv,
        plan: Plan,
        rule: Rule,
        knobs: Config,
        cpu: bool,
    ) -> anyhow::Result<Launched> {
        let id = launch.unique_id(&knobs)?;
        let choice = Choice::new(cpu, rnccl::gpus);
        if let Some(line) = choice.notice().filter(|_| launch.rank == 0) {
            eprintln!("{line}");
        }
        let device = match choice.backend {
            Backend::Gpu(n) => Some(launch.local_rank.unwrap_or(launch.rank) % n),
            Backend::Cpu => None,
        };
        Ok(Launched {
            launch,
            id,
            plan,
            rule,
            knobs,
            device,
        })
    }

    /// Joins the world and runs the check.
    ///
    /// Errors: the world cannot be formed or breaks (a rank died or stalled: named).
    pub fn run(self, args: &Args) -> anyhow::Result<ExitCode> {
        let l = &self.launch;
        let config = CommConfig::with_knobs(Arc::new(self.knobs.clone()))
            .timeout(world_timeout(self.plan.timeout()));
        let world = Communicator::init_rank(l.size, &self.id, l.rank, config)?;
        let me = RankSetup::launched(&self.knobs, self.device);
        let mut collector = Collector::default();
        let bar = super::coordinator::progress(l.rank == 0);
        run_rank(&world, &me, &self.plan.options(), &self.knobs, |e| {
            collector.push(e);
            bar.set_message(format!("{} measured", collector.measured()));
        })?;
        bar.finish_and_clear();
        if l.rank != 0 {
            return Ok(ExitCode::SUCCESS);
        }
        finish(&collector.report(None, &self.plan, self.rule), args)
    }
}
