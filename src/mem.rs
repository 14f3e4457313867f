//! Host memory other ranks of this host can map: [`mem_alloc`] (`ncclMemAlloc` for CPU buffers).
//!
//! A heap buffer is private to its process, so a collective on one must move every byte through
//! the shared-memory FIFOs (written by the sender, read by the receiver). Memory from
//! [`mem_alloc`] lives in an unnamed tmpfs file instead; once it is registered as a window on a
//! communicator ([`crate::comm::Communicator::window_register`], NCCL 2.27's
//! `ncclCommWindowRegister`), peers on the host map it and collectives read each other's buffers
//! directly (see [`crate::exec::host::direct`]).
//!
//! The file has no name in `/dev/shm` except for the moment of a registration: it is created
//! with `O_TMPFILE`, linked under a random name while peers open it, and unlinked as soon as
//! they have; a rank killed at any other time leaves nothing behind.

use std::fs::File;
use std::marker::PhantomData;
use std::os::fd::{AsRawFd, FromRawFd};
use std::sync::Arc;

use memmap2::MmapMut;

use crate::dtype::Element;
use crate::error::{Error, Result};
use crate::os::names::SHM_DIR;
use crate::os::shm::Mapping;

/// The mapped file behind a [`HostMem`]; shared with the windows registering it, so the mapping
/// (and its address) outlives every registration.
pub(crate) struct MemFile {
    file: File,
    map: MmapMut,
}

// SAFETY: plain shared memory; the collectives coordinate access through their own atomics.
unsafe impl Send for MemFile {}
// SAFETY: as above.
unsafe impl Sync for MemFile {}

// SAFETY: the mapping is page aligned and lives as long as the MemFile.
unsafe impl Mapping for MemFile {
    fn base(&self) -> *mut u8 {
        self.map.as_ptr().cast_mut()
    }

    fn len(&self) -> usize {
        self.map.len()
    }
}

impl MemFile {
    /// Gives the file a fresh name in `/dev/shm` (in `shm_open` form, leading `/`) for peers to
    /// open; the caller unlinks it with [`unlink_name`] once they have.
    ///
    /// Errors: [`Error::System`] when the link cannot be made.
    pub(crate) fn link_name(&self) -> Result<String> {
        let mut rnd = [0u8; 8];
        getrandom::fill(&mut rnd)
            .map_err(|e| Error::Internal(format!("random name for a window: {e}")))?;
        let name = crate::os::names::window(std::process::id(), u64::from_le_bytes(rnd));
        let from = std::ffi::CString::new(format!("/proc/self/fd/{}", self.file.as_raw_fd()))
            .expect("no NUL");
        let to = std::ffi::CString::new(format!("{SHM_DIR}{name}")).expect("no NUL");
        let linked = crate::os::names::make_name(|| {
            // SAFETY: both paths are NUL-terminated C strings that live across the call.
            let rc = unsafe {
                libc::linkat(
                    libc::AT_FDCWD,
                    from.as_ptr(),
                    libc::AT_FDCWD,
                    to.as_ptr(),
                    libc::AT_SYMLINK_FOLLOW,
                )
            };
            if rc == 0 {
                Ok(())
            } else {
                Err(std::io::Error::last_os_error())
            }
        })
        .unwrap_or_else(|| Err(crate::os::names::exiting()));
        linked
            .map_err(|e| Error::system(format!("naming host memory {name} for peers to map"), e))?;
        Ok(name)
    }
}

/// Removes a name made by [`MemFile::link_name`] (mappings stay valid). Errors are ignored: the
/// name may already be gone.
pub(crate) fn unlink_name(name: &str) {
    let _ = std::fs::remove_file(format!("{SHM_DIR}{name}"));
}

/// `count` elements of `T` in host memory that peers on this host can map once it is registered
/// as a window ([`crate::comm::Communicator::window_register`]). Zero-filled; dereferences to `[T]`.
/// Dropping it unmaps the memory once no window still registers it.
pub struct HostMem<T: Element> {
    file: Arc<MemFile>,
    count: usize,
    _t: PhantomData<T>,
}

/// Allocates `count` elements of `T` (`ncclMemAlloc`): `count × size_of::<T>()` bytes, rounded
/// up to whole pages, reserved at once so a full `/dev/shm` fails here and not with SIGBUS later.
///
/// Errors: [`Error::InvalidArgument`] when the size overflows; [`Error::System`] when `/dev/shm`
/// is missing, does not support unnamed files, or is too full (the message says how to raise it).
pub fn mem_alloc<T: Element>(count: usize) -> Result<HostMem<T>> {
    let bytes = count
        .checked_mul(std::mem::size_of::<T>())
        .ok_or_else(|| Error::invalid_arg(format!("mem_alloc of {count} elements overflows")))?;
    let len = bytes.max(1).next_multiple_of(4096);
    let dir = std::ffi::CString::new(SHM_DIR).expect("no NUL");
    // SAFETY: a NUL-terminated path; the returned descriptor is owned below.
    let fd = unsafe { libc::open(dir.as_ptr(), libc::O_TMPFILE | libc::O_RDWR, 0o600) };
    if fd < 0 {
        return Err(Error::system(
            format!("creating {len} bytes of shareable host memory in {SHM_DIR}"),
            std::io::Error::last_os_error(),
        ));
    }
    // SAFETY: fd is a fresh descriptor this function owns.
    let file = unsafe { File::from_raw_fd(fd) };
    let size = i64::try_from(len).unwrap_or(i64::MAX);
    nix::fcntl::posix_fallocate(&file, 0, size).map_err(|e| {
        let what = format!("reserving {len} bytes of shareable host memory in {SHM_DIR}");
        if matches!(e, nix::errno::Errno::ENOSPC | nix::errno::Errno::EFBIG) {
            Error::system(
                format!("{what}: {}", crate::os::shm::shm_space(len)),
                e.into(),
            )
        } else {
            Error::system(what, e.into())
        }
    })?;
    // SAFETY: the file is private to this process until registered; access goes through
    // HostMem's slices and the collectives' atomics.
    let map = unsafe { MmapMut::map_mut(&file) }
        .map_err(|e| Error::system(format!("mapping {len} bytes of host memory"), e))?;
    Ok(HostMem {
        file: Arc::new(MemFile { file, map }),
        count,
        _t: PhantomData,
    })
}

impl<T: Element> HostMem<T> {
    /// The file and mapping, for window registration.
    pub(crate) fn file(&self) -> &Arc<MemFile> {
        &self.file
    }
}

impl<T: Element> std::ops::Deref for HostMem<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        // SAFETY: the mapping holds at least count elements, page-aligned, zero-initialised, and
        // every bit pattern is a valid T (Element types are plain numbers).
        unsafe { std::slice::from_raw_parts(self.file.base().cast::<T>(), self.count) }
    }
}

impl<T: Element> std::ops::DerefMut for HostMem<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        // SAFETY: as Deref; &mut self gives exclusive access from this process.
        unsafe { std::slice::from_raw_parts_mut(self.file.base().cast::<T>(), self.count) }
    }
}

impl<T: Element> std::fmt::Debug for HostMem<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "HostMem<{:?}>[{}]", T::DTYPE, self.count)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zeroed_writable_and_unnamed() {
        let before = shm_names();
        let mut m = mem_alloc::<f32>(1000).unwrap();
        assert_eq!(m.len(), 1000);
        assert!(m.iter().all(|&x| x == 0.0));
        m[999] = 2.5;
        assert_eq!(m[999], 2.5);
        assert_eq!(shm_names(), before, "an allocation has no name in /dev/shm");
    }

    #[test]
    fn a_linked_name_maps_the_same_memory() {
        let mut m = mem_alloc::<u64>(512).unwrap();
        m[7] = 0xfeed;
        let name = m.file().link_name().unwrap();
        let peer = crate::os::shm::ShmSegment::open(&name).unwrap();
        unlink_name(&name);
        assert!(!std::path::Path::new(&format!("/dev/shm{name}")).exists());
        // SAFETY: the peer mapping is 4096 bytes long.
        let v = unsafe { *peer.base().cast::<u64>().add(7) };
        assert_eq!(v, 0xfeed);
        m[8] = 1;
        // SAFETY: as above.
        assert_eq!(unsafe { *peer.base().cast::<u64>().add(8) }, 1);
    }

    #[test]
    fn overflow_is_an_argument_error() {
        let e = mem_alloc::<u64>(usize::MAX / 2).unwrap_err();
        assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
    }

    fn shm_names() -> std::collections::BTreeSet<String> {
        std::fs::read_dir(SHM_DIR)
            .unwrap()
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with(&format!("rnccl-win-{}", std::process::id())))
            .collect()
    }
}
