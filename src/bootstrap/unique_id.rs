//! The unique id: where the bootstrap root listens, and the job's random magic number.

use std::fmt;
use std::net::{SocketAddr, TcpListener, ToSocketAddrs};
use std::str::FromStr;
use std::time::Duration;

use super::root;
use crate::config::Config;
use crate::error::{Error, Result};
use crate::topo::ifaces::bootstrap_interface;

/// The magic NCCL uses for ids made from `NCCL_COMM_ID` (`NCCL_MAGIC`, internals §6.1).
pub(crate) const FIXED_MAGIC: u64 = 0x0280_0280_0280_0280;

/// Identifies one communicator's rendezvous: the root's address and a random 64-bit magic that
/// every connection of the job presents. Printable and parsable as `rnccl:<magic hex>@<addr>`
/// (e.g. `rnccl:5d1c0a9e33f2b7c4@10.0.0.1:40123`, `rnccl:…@[2001:db8::1]:40123`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct UniqueId {
    pub(crate) magic: u64,
    pub(crate) root: SocketAddr,
    /// The root is not running yet: rank 0 starts it at `root` (the `NCCL_COMM_ID` flow).
    pub(crate) root_by_rank0: bool,
    /// The job the ranks of this id belong to (the launcher's job and step ids), when known:
    /// with a fixed address every job shares [`FIXED_MAGIC`], so this is what tells them apart.
    /// Not part of the printed id nor of `ncclUniqueId`'s bytes.
    pub(crate) job: Option<String>,
}

impl UniqueId {
    /// Creates an id as `ncclGetUniqueId` does, with knobs from the environment and conf files:
    /// with `NCCL_COMM_ID` set, the fixed id for that address (rank 0 will run the root);
    /// otherwise a fresh random magic and a root started now on this host's bootstrap interface,
    /// which serves one rendezvous and exits after it (or after `RNCCL_TIMEOUT` seconds).
    ///
    /// Errors: bad knob values, no usable interface, or the root's socket cannot be opened.
    pub fn new() -> Result<UniqueId> {
        let cfg = Config::from_env()?;
        UniqueId::with_config(&cfg)
    }

    /// As [`UniqueId::new`], with an explicit configuration.
    ///
    /// Errors: as [`UniqueId::new`].
    pub fn with_config(cfg: &Config) -> Result<UniqueId> {
        if let Some(addr) = cfg.string("NCCL_COMM_ID") {
            return UniqueId::from_comm_id(addr);
        }
        UniqueId::fresh(cfg)
    }

    /// A fresh random id whose root starts now on this host's bootstrap interface, whatever
    /// `NCCL_COMM_ID` says: the id `ncclCommGetUniqueId` makes for a communicator's growth
    /// (its job's fixed address is taken by the job's own rendezvous).
    ///
    /// Errors: as [`UniqueId::new`].
    pub fn fresh(cfg: &Config) -> Result<UniqueId> {
        let timeout = Duration::from_secs(cfg.int("RNCCL_TIMEOUT")?.max(1) as u64);
        let iface = bootstrap_interface(cfg, None)?;
        let listener = TcpListener::bind(SocketAddr::new(iface.addr, 0)).map_err(|e| {
            Error::system(
                format!(
                    "opening the bootstrap root socket on {} ({})",
                    iface.name, iface.addr
                ),
                e,
            )
        })?;
        let root = listener
            .local_addr()
            .map_err(|e| Error::system("reading the bootstrap root address", e))?;
        let magic = random_magic()?;
        // This root serves whoever uses the id; nothing waits for it.
        drop(root::spawn(listener, magic, timeout, None)?);
        Ok(UniqueId {
            magic,
            root,
            root_by_rank0: false,
            job: None,
        })
    }

    /// Tells the bootstrap root of this id that the job failed before its rendezvous
    /// completed (a launcher saw a rank die): every rank waiting in the rendezvous, and any that
    /// checks in during the root's last 3 s, fails at once with `why`. Harmless once the
    /// rendezvous is over (the root is gone, and nothing listens).
    ///
    /// Errors: [`Error::Remote`] when the root cannot be reached within a second.
    pub fn abort_rendezvous(&self, why: &str) -> Result<()> {
        let mut s = std::net::TcpStream::connect_timeout(&self.root, Duration::from_secs(1))
            .map_err(|e| Error::Remote(format!("the bootstrap root at {}: {e}", self.root)))?;
        let _ = s.set_write_timeout(Some(Duration::from_secs(1)));
        super::wire::write_hello(
            &mut s,
            self.magic,
            super::wire::HelloKind::RootCheckIn,
            &root::ToRoot::Abort(why.to_string()),
        )
        .map_err(|e| Error::Remote(format!("telling the bootstrap root at {}: {e}", self.root)))
    }

    /// The id for a fixed rendezvous address, as `NCCL_COMM_ID=<host>:<port>` gives
    /// (`[ipv6]:port` accepted). Rank 0 starts the root there during its init.
    ///
    /// Errors: [`Error::InvalidArgument`] when the address does not parse or resolve.
    pub fn from_comm_id(addr: &str) -> Result<UniqueId> {
        let root = resolve(addr)?;
        Ok(UniqueId {
            magic: FIXED_MAGIC,
            root,
            root_by_rank0: true,
            job: None,
        })
    }

    /// This id, naming the job whose ranks use it (e.g. `SLURM_JOB_ID=812.0`, from
    /// [`crate::launch::LaunchEnv::job`]). When rank 0 runs the root (the `NCCL_COMM_ID`
    /// flow), the root refuses a check-in that names another job, and tells that rank which two
    /// jobs met at the address; the rendezvous of its own job goes on.
    pub fn for_job(mut self, job: impl Into<String>) -> UniqueId {
        self.job = Some(job.into());
        self
    }

    /// The job this id names, if any (see [`UniqueId::for_job`]).
    pub fn job(&self) -> Option<&str> {
        self.job.as_deref()
    }
}

/// Resolves `host:port` (or `[v6]:port`) to one socket address.
///
/// Errors: [`Error::InvalidArgument`] naming the address.
pub(crate) fn resolve(addr: &str) -> Result<SocketAddr> {
    addr.to_socket_addrs()
        .map_err(|e| {
            Error::invalid_arg(format!(
                "bootstrap address '{addr}' does not resolve ({e}); write host:port or [ipv6]:port"
            ))
        })?
        .next()
        .ok_or_else(|| {
            Error::invalid_arg(format!("bootstrap address '{addr}' resolves to nothing"))
        })
}

/// A random non-zero magic.
pub(crate) fn random_magic() -> Result<u64> {
    let mut b = [0u8; 8];
    getrandom::fill(&mut b).map_err(|e| Error::Internal(format!("random magic: {e}")))?;
    Ok(u64::from_le_bytes(b) | 1)
}

impl fmt::Display for UniqueId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "rnccl:{:016x}@{}", self.magic, self.root)
    }
}

impl FromStr for UniqueId {
    type Err = Error;

    /// Parses `rnccl:<16 hex digits>@<addr>:<port>`.
    fn from_str(s: &str) -> Result<UniqueId> {
        let bad = |why: &str| {
            Error::invalid_arg(format!(
                "'{s}' is not an rnccl unique id ({why}); expected rnccl:<16 hex digits>@<host>:<port>"
            ))
        };
        let rest = s
            .strip_prefix("rnccl:")
            .ok_or_else(|| bad("missing 'rnccl:' prefix"))?;
        let (magic, addr) = rest.split_once('@').ok_or_else(|| bad("missing '@'"))?;
        if magic.len() != 16 {
            return Err(bad("the magic must be 16 hex digits"));
        }
        let magic =
            u64::from_str_radix(magic, 16).map_err(|_| bad("the magic is not hexadecimal"))?;
        let root: SocketAddr = addr.parse().map_err(|_| bad("bad root address"))?;
        Ok(UniqueId {
            magic,
            root,
            root_by_rank0: magic == FIXED_MAGIC,
            job: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_parse_round_trip() {
        let id = UniqueId {
            magic: 0x5d1c_0a9e_33f2_b7c4,
            root: "10.0.0.1:40123".parse().unwrap(),
            root_by_rank0: false,
            job: None,
        };
        let s = id.to_string();
        assert_eq!(s, "rnccl:5d1c0a9e33f2b7c4@10.0.0.1:40123");
        assert_eq!(s.parse::<UniqueId>().unwrap(), id);
        let v6: UniqueId = "rnccl:0000000000000001@[2001:db8::1]:7".parse().unwrap();
        assert_eq!(v6.root.port(), 7);
        for bad in [
            "",
            "rnccl:12@1.2.3.4:5",
            "nccl:5d1c0a9e33f2b7c4@1.2.3.4:5",
            "rnccl:5d1c0a9e33f2b7cz@1.2.3.4:5",
            "rnccl:5d1c0a9e33f2b7c4@nowhere",
        ] {
            let e = bad.parse::<UniqueId>().unwrap_err().to_string();
            assert!(e.contains("not an rnccl unique id"), "{bad}: {e}");
        }
    }

    #[test]
    fn comm_id_gives_fixed_magic() {
        let id = UniqueId::from_comm_id("127.0.0.1:29500").unwrap();
        assert_eq!(id.magic, FIXED_MAGIC);
        assert!(id.root_by_rank0);
        assert!(UniqueId::from_comm_id("no-port").is_err());
    }
}
