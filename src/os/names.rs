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
}
