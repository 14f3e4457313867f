//! Recognising a launcher: when a process was started by mpirun, srun or torchrun, its rank, the
//! job size and the rendezvous address come from the launcher's environment.
//!
//! Rank and size: `OMPI_COMM_WORLD_RANK`/`_SIZE` (Open MPI), `PMI_RANK`/`PMI_SIZE` (MPICH, Intel
//! MPI), `SLURM_PROCID`/`SLURM_NTASKS` (Slurm), `RANK`/`WORLD_SIZE` (torchrun). Rendezvous:
//! `NCCL_COMM_ID`, else `MASTER_ADDR:MASTER_PORT`; when neither is set and every rank is on one
//! host (`OMPI_COMM_WORLD_LOCAL_SIZE`, `MPI_LOCALNRANKS` or `SLURM_NNODES=1` says so), a loopback
//! address with a port derived from the job's id.

use std::collections::BTreeMap;

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
    /// `host:port` where rank 0 runs the bootstrap root, when known.
    pub root: Option<String>,
}

/// Reads the launcher variables from `env` (pass `std::env::vars().collect()` for the process).
/// Returns `Ok(None)` when no launcher variables are present.
///
/// Errors: [`Error::InvalidUsage`] when the variables are malformed or contradict each other.
pub fn detect(env: &BTreeMap<String, String>) -> Result<Option<LaunchEnv>> {
    const SOURCES: [(&str, &str, &str); 4] = [
        (
            "mpirun (Open MPI)",
            "OMPI_COMM_WORLD_RANK",
            "OMPI_COMM_WORLD_SIZE",
        ),
        ("PMI (MPICH / Intel MPI)", "PMI_RANK", "PMI_SIZE"),
        ("srun (Slurm)", "SLURM_PROCID", "SLURM_NTASKS"),
        ("torchrun", "RANK", "WORLD_SIZE"),
    ];
    let Some(&(launcher, rk, sz)) = SOURCES
        .iter()
        .find(|(_, r, s)| env.contains_key(*r) && env.contains_key(*s))
    else {
        return Ok(None);
    };
    let num = |k: &str| -> Result<usize> {
        env[k].trim().parse::<usize>().map_err(|_| {
            Error::invalid_usage(format!("{launcher}: {k}={:?} is not a number", env[k]))
        })
    };
    let (rank, size) = (num(rk)?, num(sz)?);
    if size == 0 || rank >= size {
        return Err(Error::invalid_usage(format!(
            "{launcher}: {rk}={rank} is not a rank of {sz}={size}"
        )));
    }
    let root = if let Some(id) = env.get("NCCL_COMM_ID").filter(|v| !v.is_empty()) {
        Some(id.clone())
    } else if let (Some(a), Some(p)) = (env.get("MASTER_ADDR"), env.get("MASTER_PORT")) {
        Some(if a.contains(':') && !a.starts_with('[') {
            format!("[{a}]:{p}")
        } else {
            format!("{a}:{p}")
        })
    } else if single_host(env, size) {
        Some(format!("127.0.0.1:{}", job_port(env)))
    } else {
        None
    };
    Ok(Some(LaunchEnv {
        launcher,
        rank,
        size,
        root,
    }))
}

fn single_host(env: &BTreeMap<String, String>, size: usize) -> bool {
    let eq = |k: &str| env.get(k).and_then(|v| v.parse::<usize>().ok()) == Some(size);
    eq("OMPI_COMM_WORLD_LOCAL_SIZE")
        || eq("MPI_LOCALNRANKS")
        || env.get("SLURM_NNODES").map(String::as_str) == Some("1")
        || eq("LOCAL_WORLD_SIZE")
}

/// A port in 20000..60000 derived from the job's identity, the same in every rank of the job.
fn job_port(env: &BTreeMap<String, String>) -> u16 {
    let keys = [
        "PMIX_NAMESPACE",
        "OMPI_MCA_orte_hnp_uri",
        "OMPI_MCA_ess_base_jobid",
        "PMI_ID",
        "SLURM_JOB_ID",
        "SLURM_STEP_ID",
        "TORCHELASTIC_RUN_ID",
    ];
    let id: String = keys
        .iter()
        .filter_map(|k| env.get(*k))
        .cloned()
        .collect::<Vec<_>>()
        .join("/");
    20000 + (crate::bootstrap::host::fnv1a(id.as_bytes()) % 40000) as u16
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
            (l.rank, l.size, l.root.as_deref()),
            (1, 4, Some("10.0.0.1:29500"))
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
        ]))
        .unwrap()
        .unwrap();
        assert!(l.root.unwrap().starts_with("127.0.0.1:"));
        let l = detect(&env(&[("PMI_RANK", "0"), ("PMI_SIZE", "16")]))
            .unwrap()
            .unwrap();
        assert_eq!(
            l.root, None,
            "multi-host without an address: the caller must say what to set"
        );
    }

    #[test]
    fn bad_values_are_reported() {
        let e = detect(&env(&[("RANK", "x"), ("WORLD_SIZE", "2")]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("RANK=\"x\""), "{e}");
        assert!(detect(&env(&[("RANK", "2"), ("WORLD_SIZE", "2")])).is_err());
    }
}
