//! Finding and reading the counter pages of a host's processes.

use std::fs::{File, OpenOptions};
use std::io::Read;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Path as FsPath, PathBuf};

use super::format::{COMM_BYTES, HEADER_BYTES, LINK_BYTES, MAX_RECORDS};
use super::{PAGE_PREFIX, Page, PageError, decode};

/// Bytes read from a page at most (a page of [`MAX_RECORDS`] communicators and links): a
/// larger file is not a page, and is not read into memory.
const MAX_PAGE_BYTES: u64 = (HEADER_BYTES + MAX_RECORDS * (COMM_BYTES + LINK_BYTES)) as u64;

/// One page found in the folder.
#[derive(Debug)]
pub struct Found {
    /// The pid its name gives.
    pub pid: u32,
    /// Its path.
    pub path: PathBuf,
    /// Whether that process is gone (a killed writer); a stale page was removed when asked.
    pub stale: bool,
    /// What it holds, or why it could not be read.
    pub page: Result<Page, PageError>,
}

/// Every page in `dir` (named `rnccl-stats-<pid>`), in pid order. Pages of processes that are
/// gone are marked stale and, with `remove_stale`, deleted. A page whose name and content
/// disagree on the pid, or that is not a regular file, is reported malformed and left alone; a
/// file that is not a page never blocks or exhausts the reader (no FIFOs, no symlinks, no
/// files larger than the largest page).
///
/// Errors: the folder cannot be listed.
pub fn discover(dir: &FsPath, remove_stale: bool) -> std::io::Result<Vec<Found>> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir)? {
        let Ok(e) = e else { continue };
        let name = e.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix(PAGE_PREFIX))
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        let path = e.path();
        let stale = !crate::os::names::alive(pid);
        let page = read_page(&path).and_then(|p| {
            if p.pid == pid {
                Ok(p)
            } else {
                Err(PageError::Malformed(format!(
                    "it names pid {} in the file of pid {pid}",
                    p.pid
                )))
            }
        });
        if stale && remove_stale {
            let _ = std::fs::remove_file(&path);
        }
        out.push(Found {
            pid,
            path,
            stale,
            page,
        });
    }
    out.sort_by_key(|f| f.pid);
    Ok(out)
}

/// Reads and decodes one page file.
///
/// Errors: [`PageError::Malformed`] for what is not a readable regular file of at most
/// [`MAX_PAGE_BYTES`], else as [`decode`].
pub(super) fn read_page(path: &FsPath) -> Result<Page, PageError> {
    let io = |e: std::io::Error| PageError::Malformed(format!("{}: {e}", path.display()));
    let f: File = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOFOLLOW)
        .open(path)
        .map_err(io)?;
    let ft = f.metadata().map_err(io)?.file_type();
    if !ft.is_file() || ft.is_fifo() {
        return Err(PageError::Malformed(format!(
            "{} is not a regular file",
            path.display()
        )));
    }
    let mut bytes = Vec::new();
    f.take(MAX_PAGE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(io)?;
    if bytes.len() as u64 > MAX_PAGE_BYTES {
        return Err(PageError::Malformed(format!(
            "{} is larger than any page",
            path.display()
        )));
    }
    decode(&bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::page::{encode, page_path};

    fn page(pid: u32) -> Vec<u8> {
        encode(&Page {
            pid,
            written_unix_ns: 1,
            status: None,
            comms: vec![],
        })
    }

    #[test]
    fn live_stale_foreign_and_hostile_pages() {
        let dir = tempfile::tempdir().unwrap();
        let me = std::process::id();
        std::fs::write(page_path(dir.path(), me), page(me)).unwrap();
        // A pid that cannot exist (above the kernel's limit of 2^22).
        let dead = 4_000_000_000;
        std::fs::write(page_path(dir.path(), dead), page(dead)).unwrap();
        std::fs::write(page_path(dir.path(), 1), b"not a page").unwrap();
        std::fs::write(dir.path().join("unrelated"), b"x").unwrap();
        nix::unistd::mkfifo(
            &page_path(dir.path(), 2),
            nix::sys::stat::Mode::from_bits_truncate(0o600),
        )
        .unwrap();
        std::os::unix::fs::symlink("/etc/passwd", page_path(dir.path(), 3)).unwrap();
        // A file of pid 4 that says it is pid 5's.
        std::fs::write(page_path(dir.path(), 4), page(5)).unwrap();

        let found = discover(dir.path(), true).unwrap();
        let pids: Vec<u32> = found.iter().map(|f| f.pid).collect();
        assert_eq!(pids, [1, 2, 3, 4, me, dead]);
        assert_eq!(found[0].page.as_ref().unwrap_err(), &PageError::Foreign);
        for f in &found[1..4] {
            assert!(matches!(f.page, Err(PageError::Malformed(_))), "{f:?}");
        }
        let mine = &found[4];
        assert!(!mine.stale && mine.page.as_ref().unwrap().pid == me);
        assert!(found[5].stale && found[5].page.is_ok());
        assert!(
            !page_path(dir.path(), dead).exists(),
            "the stale page was removed"
        );
        assert!(page_path(dir.path(), me).exists());
    }
}
