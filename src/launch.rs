//! Recognising a launcher: when a process was started by mpirun, srun or torchrun, its rank, the
//! job size and the rendezvous address come from the launcher's environment.
//!
//! Rank and size: `OMPI_COMM_WORLD_RANK`/`_SIZE` (Open MPI), `PMI_RANK`/`PMI_SIZE` (MPICH, Intel
//! MPI), `SLURM_PROCID`/`SLURM_NTASKS` (Slurm), `RANK`/`WORLD_SIZE` (torchrun); the rank on its
//! host, when the launcher says, from `OMPI_COMM_WORLD_LOCAL_RANK`, `MPI_LOCALRANKID`,
//! `SLURM_LOCALID` or `LOCAL_RANK` respectively. Rendezvous:
//! `NCCL_COMM_ID`, else `MASTER_ADDR:MASTER_PORT`; when neither is set, every rank is on one
//! host (`OMPI_COMM_WORLD_LOCAL_SIZE`, `MPI_LOCALNRANKS`, `LOCAL_WORLD_SIZE` or `SLURM_NNODES=1`
//! says so) and the launcher names the job ([`LaunchEnv::job`]), a loopback address with a port
//! derived from the job's id; under srun across hosts, the first host of `SLURM_STEP_NODELIST`
//! (where Slurm places task 0 for block, cyclic and plane distributions) with that port. A
//! one-rank job needs no rendezvous. Without an address or a job id, ranks cannot tell their job
//! from another one started the same way, so [`LaunchEnv::unique_id`] refuses to guess.
//!
//! The job's id also travels in the unique id ([`UniqueId::for_job`]): the root rank 0 runs
//! refuses a rank of another job that reached the same address.

use std::collections::BTreeMap;

use crate::bootstrap::unique_id::UniqueId;
use crate::config::Config;
use crate::error::{Error, Result};

/// What a launcher told this process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LaunchEnv {
    /// Which launcher (for messages): "mpirun (Open MPI)", "srun", "torchrun", …
    pub launcher: &'static str,
    /// This process's rank.
    pub rank: usize,
    /// Number of ranks.
    pub size: usize,
    /// This process's index among the launcher's processes on its host (which GPU it takes),
    /// when the launcher says.
    pub local_rank: Option<usize>,
    /// `host:port` where rank 0 runs the bootstrap root: given, or derived from the job's id
    /// when every rank is on this host; `None` when neither (and for one rank, which needs none).
    pub root: Option<String>,
    /// The job's identity from the launcher's job and step ids (`SLURM_JOB_ID=812,
    /// SLURM_STEP_ID=0`, `PMIX_NAMESPACE=…`, `TORCHELASTIC_RUN_ID=…`), when it names one.
    pub job: Option<String>,
    /// The launcher says every rank runs on this host.
    pub one_host: bool,
}

impl LaunchEnv {
    /// The unique id every rank of this job builds alike: the rendezvous at [`LaunchEnv::root`],
    /// naming [`LaunchEnv::job`]; for a one-rank job without an address, a fresh id with `cfg`'s
    /// bootstrap interface.
    ///
    /// Errors: [`Error::InvalidUsage`] when there is no rendezvous address and the ranks could
    /// not tell their job from another (no job id), or are not known to share this host: the
    /// message says what to set; [`Error::InvalidArgument`] when the address does not resolve;
    /// as [`UniqueId::with_config`] for one rank.
    pub fn unique_id(&self, cfg: &Config) -> Result<UniqueId> {
        let (launcher, n) = (self.launcher, self.size);
        match &self.root {
            Some(root) => {
                let id = UniqueId::from_comm_id(root)?;
                Ok(match &self.job {
                    Some(job) => id.for_job(job.clone()),
                    None => id,
                })
            }
            None if n == 1 => UniqueId::with_config(cfg),
            None if self.one_host => Err(Error::invalid_usage(format!(
                "{launcher} started {n} ranks on this host but names neither a rendezvous address \
                 nor a job id, so another job started the same way would meet this one at the same \
                 port: set NCCL_COMM_ID=127.0.0.1:<free port> (or MASTER_ADDR=127.0.0.1 and \
                 MASTER_PORT=<free port>) for every rank of the job"
            ))),
            None => Err(Error::invalid_usage(format!(
                "{launcher} started {n} ranks but gave no rendezvous address, and nothing says \
                 they share this host: set NCCL_COMM_ID=<rank 0's host>:<free port> (or \
                 MASTER_ADDR and MASTER_PORT) for every rank"
            ))),
        }
    }
}

/// Reads the launcher variables from `env` (pass `std::env::vars().collect()` for the process).
/// Returns `Ok(None)` when no launcher variables are present.
///
/// Errors: [`Error::InvalidUsage`] when the variables are malformed or contradict each other.
pub fn detect(env: &BTreeMap<String, String>) -> Result<Option<LaunchEnv>> {
    const SOURCES: [(&str, &str, &str, &str); 4] = [
        (
            "mpirun (Open MPI)",
            "OMPI_COMM_WORLD_RANK",
            "OMPI_COMM_WORLD_SIZE",
            "OMPI_COMM_WORLD_LOCAL_RANK",
        ),
        (
            "PMI (MPICH / Intel MPI)",
            "PMI_RANK",
            "PMI_SIZE",
            "MPI_LOCALRANKID",
        ),
        (
            "srun (Slurm)",
            "SLURM_PROCID",
            "SLURM_NTASKS",
            "SLURM_LOCALID",
        ),
        ("torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK"),
    ];
    // As for NCCL's own variables, an empty value counts as unset.
    let env: BTreeMap<&str, &str> = env
        .iter()
        .filter(|(_, v)| !v.trim().is_empty())
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    let env = &env;
    let Some(&(launcher, rk, sz, local)) = SOURCES
        .iter()
        .find(|(_, r, s, _)| env.contains_key(*r) && env.contains_key(*s))
    else {
        return Ok(None);
    };
    let num = |k: &str| -> Result<usize> {
        env[k].trim().parse::<usize>().map_err(|_| {
            Error::invalid_usage(format!("{launcher}: {k}={:?} is not a number", env[k]))
        })
    };
    let (rank, size) = (num(rk)?, num(sz)?);
    let local_rank = env.contains_key(local).then(|| num(local)).transpose()?;
    if size == 0 || rank >= size {
        return Err(Error::invalid_usage(format!(
            "{launcher}: {rk}={rank} is not a rank of {sz}={size}"
        )));
    }
    let one_host = single_host(env, size);
    let job = job_id(env);
    let root = if let Some(id) = env.get("NCCL_COMM_ID") {
        Some(id.to_string())
    } else if let (Some(a), Some(p)) = (env.get("MASTER_ADDR"), env.get("MASTER_PORT")) {
        Some(if a.contains(':') && !a.starts_with('[') {
            format!("[{a}]:{p}")
        } else {
            format!("{a}:{p}")
        })
    } else if size == 1 {
        None
    } else if let Some(job) = &job {
        if one_host {
            Some(format!("127.0.0.1:{}", job_port(job)))
        } else {
            slurm_first_host(env)
                .filter(|_| rk == "SLURM_PROCID")
                .map(|host| format!("{host}:{}", job_port(job)))
        }
    } else {
        None
    };
    Ok(Some(LaunchEnv {
        launcher,
        rank,
        size,
        local_rank,
        root,
        job,
        one_host,
    }))
}

fn single_host(env: &BTreeMap<&str, &str>, size: usize) -> bool {
    let eq = |k: &str| env.get(k).and_then(|v| v.parse::<usize>().ok()) == Some(size);
    eq("OMPI_COMM_WORLD_LOCAL_SIZE")
        || eq("MPI_LOCALNRANKS")
        || env.get("SLURM_NNODES").copied() == Some("1")
        || eq("LOCAL_WORLD_SIZE")
}

/// The first host of the step's (else the job's) Slurm node list, a hostlist expression such as
/// `gpu[01-04,09],login1` or `rack[1-2]-n[3-4]`: each bracket group contributes its first value.
fn slurm_first_host(env: &BTreeMap<&str, &str>) -> Option<String> {
    let list = [
        "SLURM_STEP_NODELIST",
        "SLURM_JOB_NODELIST",
        "SLURM_NODELIST",
    ]
    .iter()
    .find_map(|k| env.get(k))?;
    let mut host = String::new();
    let mut chars = list.trim().chars();
    while let Some(c) = chars.next() {
        match c {
            ',' => break,
            '[' => {
                let group: String = chars.by_ref().take_while(|&c| c != ']').collect();
                let first = group.split([',', '-']).next().unwrap_or("");
                host.push_str(first);
            }
            c => host.push(c),
        }
    }
    (!host.is_empty()).then_some(host)
}

/// The job's identity from the launcher's job and step ids, the same in every rank of the job
/// and different between jobs: PMIx's namespace (Open MPI 5, PMIx launchers), Open MPI 4's
/// mpirun URI and job id, Slurm's job and step ids, torchrun's run id (`none`, its default,
/// names nothing).
fn job_id(env: &BTreeMap<&str, &str>) -> Option<String> {
    let keys = [
        "PMIX_NAMESPACE",
        "OMPI_MCA_orte_hnp_uri",
        "OMPI_MCA_ess_base_jobid",
        "SLURM_JOB_ID",
        "SLURM_STEP_ID",
        "TORCHELASTIC_RUN_ID",
    ];
    let parts: Vec<String> = keys
        .iter()
        .filter_map(|k| env.get(*k).map(|v| (k, v.trim())))
        .filter(|(k, v)| !(**k == "TORCHELASTIC_RUN_ID" && *v == "none"))
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    (!parts.is_empty()).then(|| parts.join(", "))
}

/// A port in 20000..60000 derived from the job's identity, the same in every rank of the job.
fn job_port(job: &str) -> u16 {
    20000 + (crate::hash::fnv1a(job.as_bytes()) % 40000) as u16
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn launchers_are_recognised() {
        assert_eq!(detect(&env(&[])).unwrap(), None);
        let l = detect(&env(&[
            ("OMPI_COMM_WORLD_RANK", "1"),
            ("OMPI_COMM_WORLD_SIZE", "4"),
            ("NCCL_COMM_ID", "10.0.0.1:29500"),
        ]))
        .unwrap()
        .unwrap();
        assert_eq!(
            (l.rank, l.size, l.root.as_deref(), l.local_rank),
            (1, 4, Some("10.0.0.1:29500"), None)
        );
        let l = detect(&env(&[
            ("RANK", "0"),
            ("WORLD_SIZE", "2"),
            ("MASTER_ADDR", "10.77.0.1"),
            ("MASTER_PORT", "29400"),
        ]))
        .unwrap()
        .unwrap();
        assert_eq!(
            (l.launcher, l.root.as_deref()),
            ("torchrun", Some("10.77.0.1:29400"))
        );
        let l = detect(&env(&[
            ("SLURM_PROCID", "3"),
            ("SLURM_NTASKS", "8"),
            ("SLURM_NNODES", "1"),
            ("SLURM_JOB_ID", "77"),
            ("SLURM_LOCALID", "3"),
        ]))
        .unwrap()
        .unwrap();
        assert_eq!(l.local_rank, Some(3));
        assert!(l.root.unwrap().starts_with("127.0.0.1:"));
        let l = detect(&env(&[
            ("SLURM_PROCID", "5"),
            ("SLURM_NTASKS", "16"),
            ("SLURM_NNODES", "2"),
            ("SLURM_JOB_ID", "77"),
            ("SLURM_STEP_NODELIST", "gpu[07-08,11]"),
        ]))
        .unwrap()
        .unwrap();
        assert!(l.root.unwrap().starts_with("gpu07:"));
        let l = detect(&env(&[("PMI_RANK", "0"), ("PMI_SIZE", "16")]))
            .unwrap()
            .unwrap();
        assert_eq!(
            l.root, None,
            "multi-host without an address: the caller must say what to set"
        );
        let cfg = Config::from_pairs(&[]).unwrap();
        let e = l.unique_id(&cfg).unwrap_err().to_string();
        assert!(e.contains("NCCL_COMM_ID=<rank 0's host>"), "{e}");
    }

    #[test]
    fn jobs_without_ids_are_not_guessed() {
        let cfg = Config::from_pairs(&[]).unwrap();
        let one_host = [
            ("RANK", "0"),
            ("WORLD_SIZE", "2"),
            ("LOCAL_WORLD_SIZE", "2"),
        ];
        let l = detect(&env(&one_host)).unwrap().unwrap();
        assert_eq!(
            (l.one_host, l.root.as_deref(), l.job.as_deref()),
            (true, None, None)
        );
        let e = l.unique_id(&cfg).unwrap_err().to_string();
        assert!(
            e.contains("neither a rendezvous address nor a job id"),
            "{e}"
        );
        assert!(e.contains("NCCL_COMM_ID=127.0.0.1:<free port>"), "{e}");
        let none = [&one_host[..], &[("TORCHELASTIC_RUN_ID", "none")]].concat();
        assert_eq!(
            detect(&env(&none)).unwrap().unwrap().root,
            None,
            "torchrun's default id names no job"
        );
        let a = [&one_host[..], &[("TORCHELASTIC_RUN_ID", "a")]].concat();
        let b = [&one_host[..], &[("TORCHELASTIC_RUN_ID", "b")]].concat();
        let (a, b) = (
            detect(&env(&a)).unwrap().unwrap(),
            detect(&env(&b)).unwrap().unwrap(),
        );
        assert_eq!(a.job.as_deref(), Some("TORCHELASTIC_RUN_ID=a"));
        assert_ne!(a.root, b.root, "jobs with ids get their own ports");
        let id = a.unique_id(&cfg).unwrap();
        assert_eq!(id.job(), Some("TORCHELASTIC_RUN_ID=a"));
        let given = [
            &one_host[..],
            &[
                ("MASTER_ADDR", "127.0.0.1"),
                ("MASTER_PORT", "29400"),
                ("SLURM_JOB_ID", "9"),
                ("SLURM_STEP_ID", "1"),
            ],
        ]
        .concat();
        let l = detect(&env(&given)).unwrap().unwrap();
        assert_eq!(
            l.unique_id(&cfg).unwrap().job(),
            Some("SLURM_JOB_ID=9, SLURM_STEP_ID=1")
        );
    }

    #[test]
    fn one_rank_needs_no_rendezvous() {
        let l = detect(&env(&[("RANK", "0"), ("WORLD_SIZE", "1")]))
            .unwrap()
            .unwrap();
        assert_eq!(l.root, None);
        let cfg = Config::from_pairs(&[("NCCL_SOCKET_IFNAME", "lo")]).unwrap();
        let id = l.unique_id(&cfg).unwrap();
        assert!(!id.root_by_rank0, "a fresh id with its own root: {id}");
    }

    #[test]
    fn slurm_hostlists_give_their_first_host() {
        let first = |v: &str| slurm_first_host(&BTreeMap::from([("SLURM_JOB_NODELIST", v)]));
        assert_eq!(first("n1").as_deref(), Some("n1"));
        assert_eq!(first("a01,b02").as_deref(), Some("a01"));
        assert_eq!(first("gpu[001-016]").as_deref(), Some("gpu001"));
        assert_eq!(first("gpu[3,5-9],x").as_deref(), Some("gpu3"));
        assert_eq!(first("rack[2-3]-n[07-09]").as_deref(), Some("rack2-n07"));
        assert_eq!(first("[]"), None);
    }

    #[test]
    fn bad_values_are_reported() {
        let e = detect(&env(&[("RANK", "x"), ("WORLD_SIZE", "2")]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("RANK=\"x\""), "{e}");
        let e = detect(&env(&[
            ("RANK", "1"),
            ("WORLD_SIZE", "2"),
            ("LOCAL_RANK", "one"),
        ]))
        .unwrap_err()
        .to_string();
        assert!(e.contains("LOCAL_RANK=\"one\""), "{e}");
        assert!(detect(&env(&[("RANK", "2"), ("WORLD_SIZE", "2")])).is_err());
    }
}
