//! This host and its processes: its short name, whether a process still exists, and the
//! namespaces that decide which processes can share memory and compare pids.

use std::os::unix::fs::MetadataExt;

/// This host's name up to the first `.`, as NCCL prints it.
pub(crate) fn short_hostname() -> String {
    let full = nix::unistd::gethostname()
        .map(|h| h.to_string_lossy().into_owned())
        .unwrap_or_else(|_| "unknown".into());
    full.split('.').next().unwrap_or("unknown").to_string()
}

/// Device number of `/dev/shm` (ranks with different ones cannot share segments); 0 if absent.
pub(crate) fn shm_dev() -> u64 {
    std::fs::metadata("/dev/shm").map(|m| m.dev()).unwrap_or(0)
}

/// Inode of this process's pid namespace (pids are comparable only within one).
pub(crate) fn pid_namespace() -> u64 {
    std::fs::metadata("/proc/self/ns/pid")
        .map(|m| m.ino())
        .unwrap_or(0)
}

/// Whether process `pid` of this pid namespace still exists (this process, and pid 0 meaning
/// "unknown", count as alive).
pub(crate) fn process_alive(pid: u32) -> bool {
    if pid == 0 || pid == std::process::id() {
        return true;
    }
    // SAFETY: kill with signal 0 only checks for existence and permission.
    let r = unsafe { libc::kill(pid as libc::pid_t, 0) };
    let exists = r == 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH);
    exists && !zombie(pid)
}

/// Whether `pid` has exited and waits for its parent to reap it (state `Z` or `X` in
/// `/proc/<pid>/stat`, proc(5)): signal 0 still finds such a process, but it will never run
/// again. A launcher that reaps its children late (one blocked waiting on another rank) leaves
/// a killed rank in this state.
fn zombie(pid: u32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    // "pid (comm) S ...": the command may hold spaces and parentheses; the state follows the
    // last ')'.
    stat.rfind(')')
        .and_then(|i| stat[i + 1..].trim_start().chars().next())
        .is_some_and(|state| state == 'Z' || state == 'X')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_is_alive_and_an_exited_one_is_not() {
        assert!(process_alive(std::process::id()));
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        assert!(!process_alive(pid));
        assert!(!short_hostname().contains('.'));
    }

    #[test]
    fn a_zombie_is_not_alive() {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        // Not reaped yet: it turns into a zombie once it exits.
        let start = std::time::Instant::now();
        while !zombie(pid) {
            assert!(start.elapsed().as_secs() < 10, "`true` did not exit");
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert!(!process_alive(pid));
        child.wait().unwrap();
    }
}
