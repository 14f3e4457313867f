//! The names rnccl gives its files in `/dev/shm`. Every one carries the pid of the process that
//! made it, so whoever outlives a killed rank (its launcher, or the rank itself on a signal) can
//! remove exactly what that process left: FIFO segments (`rnccl-<pid>-<random>`), host-memory
//! windows while they are being registered (`rnccl-win-<pid>-<random>`) and the counter page
//! (`rnccl-stats-<pid>`, and its `.tmp` while it is rewritten).
//!
//! A process exiting on a signal removes its own files with [`remove_own_files_for_exit`]; every
//! name is made through [`make_name`], so a thread making one as the signal arrives either
//! finishes first (and the sweep removes it) or makes nothing.

use std::path::Path;
use std::sync::{PoisonError, RwLock};

/// The directory `shm_open` uses.
pub(crate) const SHM_DIR: &str = "/dev/shm";

/// The counter page of process `pid` is `<PAGE_PREFIX><pid>` in [`SHM_DIR`].
pub(crate) const PAGE_PREFIX: &str = "rnccl-stats-";

/// A fresh FIFO segment name in `shm_open` form (leading `/`) for process `pid`.
pub(crate) fn segment(pid: u32, random: u64) -> String {
    format!("/rnccl-{pid}-{random:016x}")
}

/// A fresh window name in `shm_open` form (leading `/`) for process `pid`.
pub(crate) fn window(pid: u32, random: u64) -> String {
    format!("/rnccl-win-{pid}-{random:016x}")
}

/// Whether `name` (a file name in `/dev/shm`, no leading `/`) is one process `pid` made.
fn made_by(name: &str, pid: u32) -> bool {
    let seg = format!("rnccl-{pid}-");
    let win = format!("rnccl-win-{pid}-");
    let page = format!("{PAGE_PREFIX}{pid}");
    name.starts_with(&seg)
        || name.starts_with(&win)
        || name == page
        || name == format!("{page}.tmp")
}

/// The pid in `name` (a file name in `/dev/shm`, no leading `/`) when rnccl made it: a FIFO
/// segment, a window or the counter page.
fn maker(name: &str) -> Option<u32> {
    let rest = name
        .strip_prefix(PAGE_PREFIX)
        .map(|p| p.strip_suffix(".tmp").unwrap_or(p))
        .or_else(|| name.strip_prefix("rnccl-win-"))
        .or_else(|| name.strip_prefix("rnccl-"))?;
    let pid = rest.split('-').next()?.parse::<u32>().ok()?;
    made_by(name, pid).then_some(pid)
}

/// Whether process `pid` exists (one of another user counts).
pub(crate) fn alive(pid: u32) -> bool {
    let Ok(p) = i32::try_from(pid) else {
        return false;
    };
    match nix::sys::signal::kill(nix::unistd::Pid::from_raw(p), None) {
        Ok(()) => true,
        Err(nix::errno::Errno::EPERM) => true,
        Err(_) => false,
    }
}

/// Removes from `dir` every file rnccl made (see [`made_by`]) whose process is gone — a rank
/// killed between creating a FIFO segment and its peer mapping it, or while registering a
/// window, cannot remove the name itself — and returns how many were removed. Run by each
/// process as it publishes its first communicator. Never fails.
pub(crate) fn remove_dead_processes_files_in(dir: &Path) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_str()
                .and_then(maker)
                .is_some_and(|pid| !alive(pid))
        })
        .filter(|e| std::fs::remove_file(e.path()).is_ok())
        .count()
}

/// Whether a process may still make names in `/dev/shm`: makers hold the read side while they
/// make one, the sweep before exit takes the write side and closes the gate for good.
struct NameGate(RwLock<bool>);

impl NameGate {
    const fn new() -> NameGate {
        NameGate(RwLock::new(false))
    }

    /// Runs `make` (which creates a name) unless the gate is closed; `None` when it is.
    fn make<T>(&self, make: impl FnOnce() -> T) -> Option<T> {
        let closed = self.0.read().unwrap_or_else(PoisonError::into_inner);
        (!*closed).then(make)
    }

    /// Closes the gate once no maker is inside, then runs `sweep`.
    fn close_then<T>(&self, sweep: impl FnOnce() -> T) -> T {
        let mut closed = self.0.write().unwrap_or_else(PoisonError::into_inner);
        *closed = true;
        sweep()
    }
}

/// This process's gate.
static GATE: NameGate = NameGate::new();

/// Runs `make`, which creates a name in `/dev/shm` for this process, unless the process has
/// removed its files to exit ([`remove_own_files_for_exit`]); `None` then, and nothing is made.
pub(crate) fn make_name<T>(make: impl FnOnce() -> T) -> Option<T> {
    GATE.make(make)
}

/// The error a maker returns when [`make_name`] refused: the process is exiting.
pub(crate) fn exiting() -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::Interrupted,
        "this process is exiting on a signal and has removed its files from /dev/shm",
    )
}

/// Removes every file this process made in `/dev/shm`, after any name being made now is
/// finished, and makes sure no thread makes another; returns how many were removed. For a
/// process about to exit on a signal: after this, every attempt to make a shared-memory segment,
/// a window's name or the counter page fails. Never fails.
pub fn remove_own_files_for_exit() -> usize {
    GATE.close_then(|| remove_process_files(std::process::id()))
}

/// Removes every file process `pid` made in `/dev/shm` and returns how many were removed.
///
/// For a launcher whose rank `pid` has exited (a killed rank cannot clean up after itself); a
/// rank about to exit on a signal uses [`remove_own_files_for_exit`]. Mappings other processes
/// hold stay valid: only the names go. Never fails: a file that cannot be removed is left and
/// not counted.
pub fn remove_process_files(pid: u32) -> usize {
    remove_process_files_in(Path::new(SHM_DIR), pid)
}

/// As [`remove_process_files`], in `dir` instead of `/dev/shm` (tests).
pub fn remove_process_files_in(dir: &Path, pid: u32) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .filter(|e| e.file_name().to_str().is_some_and(|n| made_by(n, pid)))
        .filter(|e| std::fs::remove_file(e.path()).is_ok())
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn removes_only_the_named_process_files() {
        let dir = tempfile::tempdir().unwrap();
        let mine = [
            segment(42, 7),
            window(42, 9),
            "/rnccl-stats-42".into(),
            "/rnccl-stats-42.tmp".into(),
        ];
        let others = [
            segment(421, 7),
            window(4, 9),
            "/rnccl-stats-420".into(),
            "/rnccl-42".into(),
            "/unrelated-42-1".into(),
        ];
        for n in mine.iter().chain(&others) {
            std::fs::write(dir.path().join(&n[1..]), b"x").unwrap();
        }
        assert_eq!(remove_process_files_in(dir.path(), 42), mine.len());
        let mut left: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| format!("/{}", e.unwrap().file_name().to_string_lossy()))
            .collect();
        left.sort();
        let mut want: Vec<String> = others.to_vec();
        want.sort();
        assert_eq!(left, want);
        assert_eq!(remove_process_files_in(dir.path(), 42), 0);
    }

    #[test]
    fn the_sweep_waits_for_a_name_being_made_and_then_refuses_more() {
        let gate = std::sync::Arc::new(NameGate::new());
        assert_eq!(gate.make(|| 1), Some(1));
        let (inside_tx, inside_rx) = std::sync::mpsc::channel();
        let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
        let maker = {
            let gate = gate.clone();
            std::thread::spawn(move || {
                gate.make(|| {
                    inside_tx.send(()).unwrap();
                    go_rx.recv().unwrap();
                    "made"
                })
            })
        };
        inside_rx.recv().unwrap();
        let made_before_sweep = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let sweeper = {
            let (gate, seen) = (gate.clone(), made_before_sweep.clone());
            std::thread::spawn(move || {
                gate.close_then(|| seen.load(std::sync::atomic::Ordering::SeqCst))
            })
        };
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert!(
            !sweeper.is_finished(),
            "the sweep ran while a name was being made"
        );
        made_before_sweep.store(true, std::sync::atomic::Ordering::SeqCst);
        go_tx.send(()).unwrap();
        assert_eq!(maker.join().unwrap(), Some("made"));
        assert!(sweeper.join().unwrap(), "the sweep must follow the maker");
        assert_eq!(gate.make(|| 2), None);
    }

    #[test]
    fn files_of_dead_processes_are_swept_and_the_living_keep_theirs() {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let dead = child.id();
        child.wait().unwrap();
        assert!(!alive(dead));
        let me = std::process::id();
        assert!(alive(me));
        let dir = tempfile::tempdir().unwrap();
        let gone = [
            segment(dead, 1),
            window(dead, 2),
            format!("/{PAGE_PREFIX}{dead}"),
        ];
        let kept = [
            segment(me, 1),
            window(me, 2),
            format!("/{PAGE_PREFIX}{me}.tmp"),
            format!("/rnccl-{dead}"),
            format!("/other-{dead}-1"),
        ];
        for n in gone.iter().chain(&kept) {
            std::fs::write(dir.path().join(&n[1..]), b"x").unwrap();
        }
        assert_eq!(maker(&segment(dead, 1)[1..]), Some(dead));
        assert_eq!(maker(&format!("{PAGE_PREFIX}{me}.tmp")), Some(me));
        assert_eq!(maker("rnccl-stats-x"), None);
        assert_eq!(remove_dead_processes_files_in(dir.path()), gone.len());
        let mut left: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| format!("/{}", e.unwrap().file_name().to_string_lossy()))
            .collect();
        left.sort();
        let mut want = kept.to_vec();
        want.sort();
        assert_eq!(left, want);
    }
}
