//! The process's publisher: the communicators whose counters it publishes and the thread that
//! rewrites their page (see `super` for the protocol).

use std::fs::OpenOptions;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path as FsPath, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, Weak};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::{CommPage, PAGE_DIR, PUBLISH_INTERVAL, Page, encode, page_path};
use crate::config::Config;
use crate::stats::{LinkSnapshot, OpProgress};

/// A communicator rank as its page shows it, read at every publish (every
/// [`super::PUBLISH_INTERVAL`], on the publisher's thread). rnccl's communicators implement it;
/// so does rnccl's NCCL profiler plugin for NVIDIA NCCL's communicators.
pub trait Published: Send + Sync {
    /// Who it is.
    fn meta(&self) -> CommMeta;
    /// Every link's counters now (connections, window reads, GPU kernels' counts).
    fn links(&self) -> Vec<LinkSnapshot>;
    /// The operation in flight.
    fn op(&self) -> &OpProgress;
    /// Every rank of the communicator, for the status service (none by default: NVIDIA
    /// NCCL's communicators, seen through the profiler plugin, do not say).
    fn peers(&self) -> Vec<StatusPeer> {
        Vec::new()
    }
    /// The job's magic (from its unique id), which a rank of the job proves itself with when
    /// it sends a hang report to this process; `None` accepts no report.
    fn magic(&self) -> Option<u64> {
        None
    }
}

/// A rank of a communicator, as its peers know it: what the status service of any of its
/// processes tells a client about the others (`crate::status`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct StatusPeer {
    /// Its rank.
    pub rank: usize,
    /// Its host's short name.
    pub host: String,
    /// Its pid.
    pub pid: u32,
    /// Its process's status service, if it runs one.
    pub status: Option<std::net::SocketAddr>,
}

/// Where this process's status service answers, once one started ([`announce_status`]).
static STATUS_SERVICE: OnceLock<std::net::SocketAddr> = OnceLock::new();

/// Puts the address of this process's status service on its page (the service calls it once
/// it listens; later calls change nothing).
pub(crate) fn announce_status(addr: std::net::SocketAddr) {
    let _ = STATUS_SERVICE.set(addr);
}

/// What a page says about a communicator rank besides its counters.
#[derive(Debug, Clone, Copy)]
pub struct CommMeta {
    /// The same on every rank of the communicator.
    pub comm_id: u64,
    /// This rank.
    pub rank: usize,
    /// Ranks of the communicator.
    pub nranks: usize,
    /// CUDA device ordinal, `None` for host memory.
    pub device: Option<usize>,
}

struct Entry {
    key: u64,
    source: Weak<dyn Published>,
}

#[derive(Default)]
struct State {
    entries: Vec<Entry>,
    next_key: u64,
    /// Whether the publishing thread runs.
    running: bool,
    /// Set after a write failed (warned once): nothing more is written.
    broken: bool,
}

/// One publisher per page (the process's, or a test's in its own folder).
pub(crate) struct Publisher {
    page: PathBuf,
    tmp: PathBuf,
    interval: Duration,
    state: Mutex<State>,
    wake: Condvar,
}

/// A communicator's place on the page; dropping it takes the communicator off (and removes the
/// page with the last one).
pub struct Registration {
    publisher: Arc<Publisher>,
    key: u64,
}

impl Drop for Registration {
    fn drop(&mut self) {
        let mut st = self.publisher.lock();
        st.entries.retain(|e| e.key != self.key);
        if st.entries.is_empty() {
            self.publisher.remove_page();
        }
        self.publisher.wake.notify_all();
    }
}

/// The process's publisher, once a communicator registered.
static GLOBAL: OnceLock<Arc<Publisher>> = OnceLock::new();

/// The communicators this process publishes now (for the status service).
pub(crate) fn registered() -> Vec<Arc<dyn Published>> {
    GLOBAL.get().map_or_else(Vec::new, |p| {
        p.lock()
            .entries
            .iter()
            .filter_map(|e| e.source.upgrade())
            .collect()
    })
}

/// Puts `source` on this process's page (`/dev/shm/rnccl-stats-<pid>`), unless `RNCCL_STATS`
/// is off; the page drops it once it is gone. Publishing never fails a communicator: a page
/// that cannot be written is warned about once and given up. `None` when `RNCCL_STATS` is off.
pub fn register(cfg: &Config, source: Weak<dyn Published>) -> Option<Registration> {
    if !cfg.flag("RNCCL_STATS").unwrap_or(true) {
        return None;
    }
    let p = GLOBAL.get_or_init(|| {
        // SAFETY: `remove_at_exit` is an `extern "C" fn()` that only unlinks two paths; atexit
        // runs it once at normal process exit.
        unsafe { libc::atexit(remove_at_exit) };
        // Pages, FIFO segments and windows of processes that were killed (and could not
        // remove theirs) go now.
        let _ = super::discover(FsPath::new(PAGE_DIR), true);
        crate::os::names::remove_dead_processes_files_in(FsPath::new(PAGE_DIR));
        Publisher::new(FsPath::new(PAGE_DIR), std::process::id(), PUBLISH_INTERVAL)
    });
    Some(p.register(source))
}

/// Removes this process's page at normal exit (communicators in statics, or `exit()` while
/// they live, never drop).
extern "C" fn remove_at_exit() {
    let page = page_path(FsPath::new(PAGE_DIR), std::process::id());
    let _ = std::fs::remove_file(&page);
    let _ = std::fs::remove_file(page.with_extension("tmp"));
}

impl Publisher {
    /// A publisher writing the page of `pid` in `dir` every `interval`.
    pub(crate) fn new(dir: &FsPath, pid: u32, interval: Duration) -> Arc<Publisher> {
        let page = page_path(dir, pid);
        Arc::new(Publisher {
            tmp: page.with_extension("tmp"),
            page,
            interval,
            state: Mutex::new(State::default()),
            wake: Condvar::new(),
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Adds a communicator; starts the publishing thread if it is not running. The page is
    /// written at once, so a reader finds the communicator before its first operation.
    pub(crate) fn register(self: &Arc<Self>, source: Weak<dyn Published>) -> Registration {
        let mut st = self.lock();
        let key = st.next_key;
        st.next_key += 1;
        st.entries.push(Entry { key, source });
        self.publish(&mut st);
        if !st.running && !st.broken {
            st.running = true;
            let me = Arc::clone(self);
            let spawned = std::thread::Builder::new()
                .name("rnccl-stats".into())
                .spawn(move || me.run());
            if spawned.is_err() {
                st.running = false;
            }
        }
        Registration {
            publisher: Arc::clone(self),
            key,
        }
    }

    /// The publishing thread: rewrites the page every interval while communicators remain.
    fn run(&self) {
        let mut st = self.lock();
        loop {
            st = self
                .wake
                .wait_timeout(st, self.interval)
                .unwrap_or_else(|p| p.into_inner())
                .0;
            if st.entries.is_empty() || st.broken {
                st.running = false;
                return;
            }
            self.publish(&mut st);
        }
    }

    /// Writes the page of the registered communicators (called with the state locked, so a
    /// page is never written after the last communicator removed it).
    fn publish(&self, st: &mut State) {
        if st.broken {
            return;
        }
        let written_unix_ns = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        let comms = st
            .entries
            .iter()
            .filter_map(|e| {
                let s = e.source.upgrade()?;
                let meta = s.meta();
                Some(CommPage {
                    comm_id: meta.comm_id,
                    rank: meta.rank,
                    nranks: meta.nranks,
                    device: meta.device,
                    ops_completed: s.op().completed(),
                    op: s.op().snapshot(),
                    links: s.links(),
                })
            })
            .collect();
        let page = Page {
            pid: std::process::id(),
            written_unix_ns,
            status: STATUS_SERVICE.get().copied(),
            comms,
        };
        if let Err(e) = self.write(&encode(&page)) {
            st.broken = true;
            let _ = std::fs::remove_file(&self.tmp);
            // Interrupted: the process is exiting on a signal (see `write`), nothing to say.
            if e.kind() != std::io::ErrorKind::Interrupted {
                tracing::warn!(
                    target: "rnccl::stats",
                    "cannot write the counter page {}: {e}; `rnccl top` will not see this \
                     process (RNCCL_STATS=0 turns the page off)",
                    self.page.display()
                );
            }
        }
    }

    /// Writes `bytes` to the temporary file (mode 0600) and renames it over the page.
    /// Refused once this process has removed its files to exit on a signal.
    fn write(&self, bytes: &[u8]) -> std::io::Result<()> {
        crate::os::names::make_name(|| {
            let _ = std::fs::remove_file(&self.tmp);
            let mut f = OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&self.tmp)?;
            f.write_all(bytes)?;
            drop(f);
            std::fs::rename(&self.tmp, &self.page)
        })
        .unwrap_or_else(|| Err(crate::os::names::exiting()))
    }

    fn remove_page(&self) {
        let _ = std::fs::remove_file(&self.page);
        let _ = std::fs::remove_file(&self.tmp);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conn::ConnKey;
    use crate::stats::page::decode;
    use crate::stats::{CommStats, Direction, Path};

    /// A rank's counters as a communicator would publish them.
    struct Rank {
        meta: CommMeta,
        stats: CommStats,
    }

    impl Published for Rank {
        fn meta(&self) -> CommMeta {
            self.meta
        }
        fn links(&self) -> Vec<LinkSnapshot> {
            self.stats.links()
        }
        fn op(&self) -> &OpProgress {
            self.stats.op()
        }
    }

    fn rank(r: usize) -> Arc<Rank> {
        Arc::new(Rank {
            meta: meta(r),
            stats: CommStats::new(),
        })
    }

    fn weak(r: &Arc<Rank>) -> Weak<dyn Published> {
        let a: Arc<dyn Published> = r.clone();
        Arc::downgrade(&a)
    }
    use std::os::unix::fs::PermissionsExt;
    use std::time::Instant;

    fn read(p: &FsPath) -> Option<Page> {
        std::fs::read(p)
            .ok()
            .map(|b| decode(&b).expect("a whole page"))
    }

    fn eventually(what: &str, mut f: impl FnMut() -> bool) {
        let t0 = Instant::now();
        while !f() {
            assert!(
                t0.elapsed() < Duration::from_secs(10),
                "timed out waiting for {what}"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    fn meta(rank: usize) -> CommMeta {
        CommMeta {
            comm_id: 99,
            rank,
            nranks: 2,
            device: None,
        }
    }

    #[test]
    fn the_page_follows_the_counters_and_goes_with_the_last_communicator() {
        let dir = tempfile::tempdir().unwrap();
        let p = Publisher::new(dir.path(), 7, Duration::from_millis(10));
        let page = page_path(dir.path(), 7);
        let a = rank(0);
        let b = rank(1);
        let link = a
            .stats
            .add_link(ConnKey::p2p(1), Direction::Send, Path::Shm);
        let ra = p.register(weak(&a));
        let first = read(&page).expect("written at registration");
        assert_eq!(first.comms.len(), 1);
        let mode = std::fs::metadata(&page).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let rb = p.register(weak(&b));
        link.add(4096);
        eventually("the new bytes on the page", || {
            read(&page).is_some_and(|pg| pg.comms.len() == 2 && pg.comms[0].links[0].bytes == 4096)
        });
        drop(ra);
        eventually("one communicator left", || {
            read(&page).is_some_and(|p| p.comms.len() == 1)
        });
        drop(rb);
        assert!(!page.exists(), "removed with the last communicator");
        assert!(!page.with_extension("tmp").exists());
        // The thread stopped; a new registration starts it again.
        let _rc = p.register(weak(&a));
        link.add(1);
        eventually("publishing again", || {
            read(&page).is_some_and(|pg| pg.comms[0].links[0].bytes == 4097)
        });
    }

    #[test]
    fn readers_never_see_a_torn_page() {
        let dir = tempfile::tempdir().unwrap();
        let p = Publisher::new(dir.path(), 8, Duration::from_millis(1));
        let s = rank(0);
        let links: Vec<_> = (0..64)
            .map(|c| {
                s.stats
                    .add_link(ConnKey::collective(1, c), Direction::Recv, Path::Tcp)
            })
            .collect();
        let _r = p.register(weak(&s));
        let page = page_path(dir.path(), 8);
        let t0 = Instant::now();
        let mut reads = 0;
        while t0.elapsed() < Duration::from_millis(300) {
            for l in &links {
                l.add(8);
            }
            if let Ok(b) = std::fs::read(&page) {
                decode(&b).expect("every page read whole");
                reads += 1;
            }
        }
        assert!(reads > 10, "{reads}");
    }

    #[test]
    fn an_unwritable_folder_is_given_up_quietly() {
        let p = Publisher::new(
            FsPath::new("/nonexistent/rnccl"),
            9,
            Duration::from_millis(1),
        );
        let s = rank(0);
        let r = p.register(weak(&s));
        assert!(p.lock().broken);
        drop(r);
    }
}
