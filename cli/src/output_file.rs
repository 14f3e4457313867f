//! The files a user names (`--output-file`, `--plot`, `rnccl tune`'s results, man pages):
//! checked before a run that they can be written ([`check_writable`]), then written whole or not
//! at all ([`write_whole`]).

use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// Checks before a run that `path` (given as `flag`) can be written at its end: opens it for
/// writing without truncating it (an existing file keeps its contents until the run succeeds)
/// and removes it again if it did not exist.
///
/// Errors: the path, the flag and the system's reason (a missing folder, no permission, a
/// folder in the way).
pub fn check_writable(path: &Path, flag: &str) -> anyhow::Result<()> {
    let existed = path.exists();
    std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(path)
        .map_err(|e| {
            anyhow::anyhow!(
                "{flag} {}: cannot be written ({e}); give a path in a folder you can write, \
                 before the run rather than after it",
                path.display()
            )
        })?;
    if !existed {
        let _ = std::fs::remove_file(path);
    }
    Ok(())
}

/// Writes `bytes` to `path` whole or not at all: into a temporary file in the same folder, then
/// renamed over `path` (tempfile's `persist`). A write that fails or is interrupted (a full
/// disk, Ctrl-C) leaves an existing file as it was and no partial file, where `std::fs::write`
/// would have truncated it first. The file keeps an existing file's permissions, else gets
/// 0666 less the umask (what `std::fs::write` gives a new file); a symbolic link at `path` is
/// followed, so the file it points to is replaced, not the link.
///
/// Errors: the system's reason: a missing folder, no permission, a full disk, a folder at
/// `path`, a link that points nowhere.
pub fn write_whole(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let path: PathBuf = if path.is_symlink() {
        std::fs::canonicalize(path)?
    } else {
        path.to_path_buf()
    };
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let permissions = std::fs::metadata(&path)
        .map(|m| m.permissions())
        .unwrap_or_else(|_| std::fs::Permissions::from_mode(0o666));
    let mut file = tempfile::Builder::new()
        .prefix(".rnccl-")
        .permissions(permissions)
        .tempfile_in(dir)?;
    file.write_all(bytes)?;
    file.flush()?;
    // rename(2) refuses a folder at `path` (EISDIR); the temporary file is removed on failure.
    file.persist(&path).map_err(|e| e.error)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mode(p: &Path) -> u32 {
        std::fs::metadata(p).unwrap().permissions().mode() & 0o777
    }

    fn names(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn a_new_file_is_written_with_the_mode_std_gives() {
        let dir = tempfile::tempdir().unwrap();
        let (ours, theirs) = (dir.path().join("a.json"), dir.path().join("b.json"));
        write_whole(&ours, b"{}\n").unwrap();
        std::fs::write(&theirs, b"{}\n").unwrap();
        assert_eq!(std::fs::read(&ours).unwrap(), b"{}\n");
        assert_eq!(mode(&ours), mode(&theirs));
        assert_eq!(
            names(dir.path()),
            ["a.json", "b.json"],
            "no temporary file is left"
        );
    }

    #[test]
    fn an_existing_file_is_replaced_and_keeps_its_mode() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("rnccl-tune.yaml");
        std::fs::write(&p, b"old contents, longer than the new\n").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o640)).unwrap();
        write_whole(&p, b"new\n").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"new\n");
        assert_eq!(mode(&p), 0o640);
        assert_eq!(names(dir.path()), ["rnccl-tune.yaml"]);
    }

    #[test]
    fn a_link_is_followed() {
        let dir = tempfile::tempdir().unwrap();
        let (target, link) = (dir.path().join("target"), dir.path().join("link"));
        std::fs::write(&target, b"old").unwrap();
        std::os::unix::fs::symlink(&target, &link).unwrap();
        write_whole(&link, b"new").unwrap();
        assert!(link.is_symlink());
        assert_eq!(std::fs::read(&target).unwrap(), b"new");
    }

    #[test]
    fn a_failed_write_leaves_nothing_behind() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("no/such/folder/out.json");
        assert!(write_whole(&missing, b"x").is_err());
        let folder = dir.path().join("folder");
        std::fs::create_dir(&folder).unwrap();
        let e = write_whole(&folder, b"x").unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::IsADirectory);
        assert!(folder.is_dir());
        assert_eq!(names(dir.path()), ["folder"], "no temporary file is left");
    }
}
