//! GPU ranks or CPU ranks: on a host whose driver shows GPUs, `rnccl bench` runs one rank per
//! GPU on device memory; `--cpu`, or a host without GPUs (said in one line), keeps CPU ranks on
//! host memory. Flags that only make sense on one side are refused with the reason.

use super::Args;

/// Where the ranks run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// CPU ranks on host buffers.
    Cpu,
    /// GPU ranks on device buffers, on a host with this many GPUs.
    Gpu(usize),
}

/// The decision, and why there are no GPU ranks when GPUs were looked for and not found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Choice {
    /// Where the ranks run.
    pub backend: Backend,
    /// The driver's reason when there is no GPU here (`None` with `--cpu` or with GPUs).
    pub no_gpu: Option<String>,
}

impl Choice {
    /// `--cpu` (`cpu`) keeps CPU ranks without looking for GPUs; otherwise GPU ranks when
    /// `probe` (normally [`rnccl::gpus`]) lists GPUs, CPU ranks with its reason when not.
    pub fn new(cpu: bool, probe: impl FnOnce() -> rnccl::Result<Vec<rnccl::DeviceInfo>>) -> Choice {
        if cpu {
            return Choice {
                backend: Backend::Cpu,
                no_gpu: None,
            };
        }
        match probe() {
            Ok(g) if !g.is_empty() => Choice {
                backend: Backend::Gpu(g.len()),
                no_gpu: None,
            },
            Ok(_) => Choice {
                backend: Backend::Cpu,
                no_gpu: Some("the driver lists no GPU".into()),
            },
            Err(rnccl::Error::Cuda(why)) => Choice {
                backend: Backend::Cpu,
                no_gpu: Some(why),
            },
            Err(e) => Choice {
                backend: Backend::Cpu,
                no_gpu: Some(e.to_string()),
            },
        }
    }

    /// The one line (for standard error) saying that the ranks run on CPUs and why, when
    /// GPUs were looked for and not found.
    pub fn notice(&self) -> Option<String> {
        self.no_gpu
            .as_ref()
            .map(|why| format!("# no GPU: {why}; running on CPU ranks"))
    }

    /// Refuses flags that do not fit the backend: `-g` above 1, `-G` and `-R 1` need GPU ranks
    /// (`-R 2` registers windows on either).
    ///
    /// Errors: a message naming the flags, the reason and what to do.
    pub fn check_flags(&self, args: &Args) -> anyhow::Result<()> {
        match self.backend {
            Backend::Cpu => {
                let mut gpu_only = Vec::new();
                if args.ngpus > 1 {
                    gpu_only.push(format!("-g/--ngpus {}", args.ngpus));
                }
                if args.graph > 0 {
                    gpu_only.push(format!("-G/--cudagraph {}", args.graph));
                }
                if args.register == 1 {
                    gpu_only.push("-R/--local_register 1".to_string());
                }
                if gpu_only.is_empty() {
                    return Ok(());
                }
                let flags = gpu_only.join(" and ");
                let (need, them) = if gpu_only.len() > 1 {
                    ("need", "them")
                } else {
                    ("needs", "it")
                };
                match &self.no_gpu {
                    Some(why) => anyhow::bail!(
                        "{flags} {need} GPU ranks, and there is no GPU here ({why}): drop {them} \
                         to run on CPU ranks"
                    ),
                    None => anyhow::bail!(
                        "{flags} {need} GPU ranks, but --cpu asks for CPU ranks: drop one or the \
                         other"
                    ),
                }
            }
            Backend::Gpu(_) => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(clap::Parser)]
    struct Cli {
        #[command(flatten)]
        args: Args,
    }

    fn args(flags: &[&str]) -> Args {
        Cli::parse_from(std::iter::once("bench").chain(flags.iter().copied())).args
    }

    fn gpus(n: usize) -> impl FnOnce() -> rnccl::Result<Vec<rnccl::DeviceInfo>> {
        move || {
            Ok((0..n)
                .map(|i| rnccl::DeviceInfo {
                    ordinal: i,
                    name: "NVIDIA H200".into(),
                    bus_id: format!("0000:{:02x}:00.0", 0x19 + i),
                    cc: (9, 0),
                    sms: 132,
                })
                .collect())
        }
    }

    fn no_driver() -> rnccl::Result<Vec<rnccl::DeviceInfo>> {
        Err(rnccl::Error::Cuda(
            "no NVIDIA driver here (libcuda.so.1 not found)".into(),
        ))
    }

    #[test]
    fn gpus_are_used_unless_cpu_is_asked_for() {
        assert_eq!(Choice::new(false, gpus(8)).backend, Backend::Gpu(8));
        let c = Choice::new(true, || panic!("--cpu must not look for GPUs"));
        assert_eq!((c.backend, c.notice()), (Backend::Cpu, None));
        let c = Choice::new(false, no_driver);
        assert_eq!(c.backend, Backend::Cpu);
        assert_eq!(
            c.notice().unwrap(),
            "# no GPU: no NVIDIA driver here (libcuda.so.1 not found); running on CPU ranks"
        );
    }

    #[test]
    fn gpu_flags_need_gpus() {
        let cpu = Choice::new(true, gpus(2));
        let none = Choice::new(false, no_driver);
        let gpu = Choice::new(false, gpus(2));
        assert!(cpu.check_flags(&args(&["-t", "2"])).is_ok());
        let e = cpu
            .check_flags(&args(&["-g", "2"]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("-g/--ngpus 2") && e.contains("--cpu"), "{e}");
        let e = none
            .check_flags(&args(&["-g", "2", "-G", "5"]))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("-g/--ngpus 2 and -G/--cudagraph 5") && e.contains("libcuda.so.1"),
            "{e}"
        );
        assert!(gpu.check_flags(&args(&["-g", "2", "-G", "5"])).is_ok());
        assert!(gpu.check_flags(&args(&["-R", "2"])).is_ok());
        assert!(cpu.check_flags(&args(&["-R", "2"])).is_ok());
        assert!(gpu.check_flags(&args(&["-R", "1"])).is_ok());
        let e = cpu
            .check_flags(&args(&["-R", "1"]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("-R/--local_register 1"), "{e}");
    }

    #[test]
    fn threads_flags_conflict() {
        let r = Cli::try_parse_from(["bench", "--threads", "-t", "2"]);
        assert!(r.is_err());
    }
}
