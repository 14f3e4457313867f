//! The names rnccl gives its files in `/dev/shm`. Every one carries the pid of the process that
//! made it, so whoever outlives a killed rank (its launcher, or the rank itself on a signal) can
//! remove exactly what that process left: FIFO segments (`rnccl-<pid>-<random>`), host-memory
//! windows while they are being registered (`rnccl-win-<pid>-<random>`) and the counter page
//! (`rnccl-stats-<pid>`, and its `.tmp` while it is rewritten).

use std::path::Path;

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

/// Removes every file process `pid` made in `/dev/shm` and returns how many were removed.
///
/// For a launcher whose rank `pid` has exited (a killed rank cannot clean up after itself), or
/// for a rank about to exit on a signal (`pid` = its own). Mappings other processes hold stay
/// valid: only the names go. Never fails: a file that cannot be removed is left and not counted.
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
