//! POSIX shared-memory segments: created under a fresh name (`shm_open` with
//! `O_CREAT|O_EXCL`, mode 0600, pages reserved at once), opened by name from another process,
//! mapped, and unlinked as soon as every user has mapped them, so nothing is left in `/dev/shm`
//! even if a process is killed later. FIFOs between processes, windows' control blocks and GPU
//! FIFOs staged through host memory live in them.

use std::fs::File;
use std::os::fd::OwnedFd;

use memmap2::MmapMut;
use nix::fcntl::OFlag;
use nix::sys::mman::{shm_open, shm_unlink};
use nix::sys::stat::Mode;

use crate::error::{Error, Result};

/// Memory mapped into this process that other processes may map too: a shared-memory segment
/// or the file behind a [`crate::mem::HostMem`].
///
/// # Safety
/// Implementors guarantee that [`base`](Mapping::base) is page aligned and valid for reads and
/// writes of [`len`](Mapping::len) bytes for the value's whole life. Other processes may access
/// the same memory concurrently, so it is only accessed through atomics or copies that the
/// protocol using it orders.
pub(crate) unsafe trait Mapping: Send + Sync {
    /// Start of the mapping.
    fn base(&self) -> *mut u8;
    /// Length in bytes.
    fn len(&self) -> usize;
}

/// A mapped shared-memory segment.
pub(crate) struct ShmSegment {
    name: String,
    map: MmapMut,
    base: *mut u8,
    linked: bool,
}

// SAFETY: the mapping is plain shared memory accessed through the FIFO protocol's atomics.
unsafe impl Send for ShmSegment {}
// SAFETY: as above.
unsafe impl Sync for ShmSegment {}

impl ShmSegment {
    /// Creates and maps a new zero-filled segment of `len` bytes with a fresh unique name.
    ///
    /// Errors: [`Error::System`] naming the segment when `/dev/shm` refuses it (missing, or too
    /// full to reserve `len` bytes: the pages are reserved here, not on first touch).
    pub(crate) fn create(len: usize) -> Result<ShmSegment> {
        let mut rnd = [0u8; 8];
        getrandom::fill(&mut rnd).map_err(|e| {
            Error::Internal(format!("random name for a shared-memory segment: {e}"))
        })?;
        let name = super::names::segment(std::process::id(), u64::from_le_bytes(rnd));
        super::names::make_name(|| {
            let fd = shm_open(
                name.as_str(),
                OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_RDWR,
                Mode::S_IRUSR | Mode::S_IWUSR,
            )
            .map_err(|e| {
                Error::system(format!("creating shared-memory segment {name}"), e.into())
            })?;
            Self::map(name.clone(), fd, len, true).inspect_err(|_| {
                let _ = shm_unlink(name.as_str());
            })
        })
        .unwrap_or_else(|| {
            Err(Error::system(
                format!("creating shared-memory segment {name}"),
                super::names::exiting(),
            ))
        })
    }

    /// Opens and maps an existing segment by name; its length is read from the segment.
    ///
    /// Errors: [`Error::System`] naming the segment when it does not exist or cannot be mapped.
    pub(crate) fn open(name: &str) -> Result<ShmSegment> {
        let fd = shm_open(name, OFlag::O_RDWR, Mode::empty()).map_err(|e| {
            Error::system(format!("opening shared-memory segment {name}"), e.into())
        })?;
        let len = nix::sys::stat::fstat(&fd)
            .map_err(|e| Error::system(format!("sizing shared-memory segment {name}"), e.into()))?
            .st_size as usize;
        Self::map(name.to_string(), fd, len, false)
    }

    fn map(name: String, fd: OwnedFd, len: usize, create: bool) -> Result<ShmSegment> {
        let file = File::from(fd);
        if create {
            // Reserve the pages now: a tmpfs that runs out later would kill the rank with SIGBUS
            // on first touch (the "Bus error" of containers with a small /dev/shm).
            let size = i64::try_from(len).unwrap_or(i64::MAX);
            nix::fcntl::posix_fallocate(&file, 0, size).map_err(|e| {
                let what = format!("reserving {len} bytes for shared-memory segment {name}");
                if matches!(e, nix::errno::Errno::ENOSPC | nix::errno::Errno::EFBIG) {
                    Error::system(format!("{what}: {}", shm_space(len)), e.into())
                } else {
                    Error::system(what, e.into())
                }
            })?;
        }
        // SAFETY: the segment is private to rnccl ranks, which access it through atomics.
        let mut map = unsafe { MmapMut::map_mut(&file) }.map_err(|e| {
            Error::system(
                format!("mapping shared-memory segment {name} ({len} bytes)"),
                e,
            )
        })?;
        let base = map.as_mut_ptr();
        Ok(ShmSegment {
            name,
            map,
            base,
            linked: create,
        })
    }

    /// The segment's name in `/dev/shm` terms (leading `/`).
    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// Removes the name from `/dev/shm` (mappings stay valid). Idempotent.
    pub(crate) fn unlink(&mut self) {
        if self.linked {
            let _ = shm_unlink(self.name.as_str());
            self.linked = false;
        }
    }
}

impl Drop for ShmSegment {
    fn drop(&mut self) {
        self.unlink();
    }
}

// SAFETY: the mapping is page aligned and stays mapped for the segment's whole life (unlinking
// the name does not unmap it).
unsafe impl Mapping for ShmSegment {
    fn base(&self) -> *mut u8 {
        self.base
    }

    fn len(&self) -> usize {
        self.map.len()
    }
}

/// Why `/dev/shm` could not hold `asked` bytes, with its free and total space, and what to do.
pub(crate) fn shm_space(asked: usize) -> String {
    let (free, total) = match nix::sys::statvfs::statvfs("/dev/shm") {
        Ok(v) => {
            let frag = v.fragment_size();
            (v.blocks_available() * frag, v.blocks() * frag)
        }
        Err(_) => (0, 0),
    };
    let advice = "raise it (containers often give it 64 MiB: `docker run --shm-size=1g`), lower \
                  NCCL_BUFFSIZE, or set NCCL_SHM_DISABLE=1 to use sockets";
    if asked as u64 > total {
        format!(
            "{asked} bytes were asked for but /dev/shm holds only {total} bytes in all ({free} \
             free): {advice}"
        )
    } else {
        format!(
            "{asked} bytes were asked for but /dev/shm has only {free} bytes free of {total}: \
             {advice}"
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn create_open_unlink() {
        let mut a = ShmSegment::create(8192).unwrap();
        let path = format!("/dev/shm{}", a.name());
        assert!(std::path::Path::new(&path).exists());
        let meta = std::fs::metadata(&path).unwrap();
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(meta.permissions().mode() & 0o777, 0o600);
        // SAFETY: both mappings are 8192 bytes long and map the same segment.
        unsafe { *a.base() = 42 };
        let b = ShmSegment::open(a.name()).unwrap();
        assert_eq!(b.len(), 8192);
        // SAFETY: both mappings are 8192 bytes long and map the same segment.
        assert_eq!(unsafe { *b.base() }, 42);
        a.unlink();
        assert!(!std::path::Path::new(&path).exists());
        drop(b);
        drop(a);
    }

    #[test]
    fn dropping_creator_removes_name() {
        let a = ShmSegment::create(4096).unwrap();
        let path = format!("/dev/shm{}", a.name());
        drop(a);
        assert!(!std::path::Path::new(&path).exists());
        let e = ShmSegment::open("/rnccl-does-not-exist")
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("/rnccl-does-not-exist"), "{e}");
    }
}
