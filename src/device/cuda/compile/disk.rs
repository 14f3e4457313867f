//! The on-disk CUBIN cache: one file per (program, architecture, key) in one folder, written
//! whole or not at all (a temporary file renamed into place, so ranks compiling at once never see
//! half a file), and checked when read (a short header with the key, the length and a hash of the
//! CUBIN), so a truncated or damaged file is a miss, never a bad module.
//!
//! File layout, integers little-endian: `MAGIC` (8 bytes), key (u64), CUBIN length in bytes
//! (u64), FNV-1a of the CUBIN (u64), the CUBIN.

use std::fs::{self, OpenOptions};
use std::io::{self, Write};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::hash::fnv1a;

/// The first bytes of every cache file (format 1).
const MAGIC: &[u8; 8] = b"rncclKC\x01";
/// Header bytes before the CUBIN.
const HEADER: usize = 32;

/// A cache folder. Nothing is created until the first [`DiskCache::store`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DiskCache {
    dir: PathBuf,
}

/// Why a cache file was not used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Miss {
    /// No file for this key (the usual first run).
    Absent,
    /// A file is there but unusable: truncated, damaged, another key, or unreadable; says what.
    Unusable(String),
}

impl DiskCache {
    /// A cache kept in `dir` (created when first written).
    pub(crate) fn new(dir: PathBuf) -> DiskCache {
        DiskCache { dir }
    }

    /// The file holding the CUBIN of `program` (a file name of `kernels/`) for `sm_<arch>` under
    /// `key`, e.g. `interp.sm90.0123456789abcdef.cubin`.
    pub(crate) fn path(&self, program: &str, arch: u32, key: u64) -> PathBuf {
        let stem = program.strip_suffix(".cu").unwrap_or(program);
        self.dir.join(format!("{stem}.sm{arch}.{key:016x}.cubin"))
    }

    /// The cached CUBIN of `program` for `sm_<arch>` if its file is whole and was stored under
    /// `key`.
    ///
    /// Errors: [`Miss::Absent`] when there is no file, [`Miss::Unusable`] (with the reason) when
    /// it cannot be read or fails a check; either way the caller compiles.
    pub(crate) fn load(&self, program: &str, arch: u32, key: u64) -> Result<Vec<u8>, Miss> {
        let mut bytes = match fs::read(self.path(program, arch, key)) {
            Ok(b) => b,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Err(Miss::Absent),
            Err(e) => return Err(Miss::Unusable(format!("cannot read it: {e}"))),
        };
        let field = |i: usize| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&bytes[8 * i..8 * (i + 1)]);
            u64::from_le_bytes(b)
        };
        if bytes.len() < HEADER || &bytes[..8] != MAGIC {
            return Err(Miss::Unusable("not an rnccl kernel cache file".into()));
        }
        let (stored_key, len, hash) = (field(1), field(2), field(3));
        if stored_key != key {
            return Err(Miss::Unusable(format!(
                "stored under key {stored_key:016x}, not {key:016x}"
            )));
        }
        let body = bytes.len() - HEADER;
        if len != body as u64 {
            return Err(Miss::Unusable(format!(
                "truncated: {body} of {len} CUBIN bytes"
            )));
        }
        if fnv1a(&bytes[HEADER..]) != hash {
            return Err(Miss::Unusable("the CUBIN's hash does not match".into()));
        }
        bytes.drain(..HEADER);
        Ok(bytes)
    }

    /// Stores `cubin`, the CUBIN of `program` for `sm_<arch>`, under `key`, creating the folder:
    /// written to a temporary file in the same folder, then renamed over its
    /// [`path`](DiskCache::path), so readers see the old file, the new one, or none.
    ///
    /// Errors: the I/O error of creating the folder or writing or renaming the file (the
    /// temporary file is removed).
    pub(crate) fn store(&self, program: &str, arch: u32, key: u64, cubin: &[u8]) -> io::Result<()> {
        static SERIAL: AtomicU64 = AtomicU64::new(0);
        fs::create_dir_all(&self.dir)?;
        let path = self.path(program, arch, key);
        let name = path
            .file_name()
            .map_or_else(|| "cubin".into(), |n| n.to_string_lossy().into_owned());
        let tmp = self.dir.join(format!(
            ".{name}.{}.{}.tmp",
            std::process::id(),
            SERIAL.fetch_add(1, Ordering::Relaxed)
        ));
        let written = (|| {
            let mut f = OpenOptions::new().write(true).create_new(true).open(&tmp)?;
            f.write_all(MAGIC)?;
            f.write_all(&key.to_le_bytes())?;
            f.write_all(&(cubin.len() as u64).to_le_bytes())?;
            f.write_all(&fnv1a(cubin).to_le_bytes())?;
            f.write_all(cubin)?;
            f.sync_all()?;
            fs::rename(&tmp, &path)
        })();
        if written.is_err() {
            let _ = fs::remove_file(&tmp);
        }
        written
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cache() -> (tempfile::TempDir, DiskCache) {
        let dir = tempfile::tempdir().unwrap();
        let cache = DiskCache::new(dir.path().join("kernels"));
        (dir, cache)
    }

    #[test]
    fn stored_cubin_reads_back() {
        let (_dir, cache) = cache();
        let path = cache.path("interp.cu", 90, 0xabc);
        assert!(path.ends_with("kernels/interp.sm90.0000000000000abc.cubin"));
        assert_eq!(cache.load("interp.cu", 90, 0xabc), Err(Miss::Absent));
        cache
            .store("interp.cu", 90, 0xabc, b"\x7fELF cubin")
            .unwrap();
        assert!(path.is_file());
        assert_eq!(
            cache.load("interp.cu", 90, 0xabc).unwrap(),
            b"\x7fELF cubin"
        );
        assert_eq!(cache.load("interp.cu", 80, 0xabc), Err(Miss::Absent));
        let left: Vec<_> = fs::read_dir(path.parent().unwrap()).unwrap().collect();
        assert_eq!(left.len(), 1, "no temporary file is left behind");
        cache.store("interp.cu", 90, 0xabc, b"replaced").unwrap();
        assert_eq!(cache.load("interp.cu", 90, 0xabc).unwrap(), b"replaced");
    }

    #[test]
    fn damaged_files_are_misses() {
        let (_dir, cache) = cache();
        let path = cache.path("interp.cu", 80, 7);
        cache.store("interp.cu", 80, 7, b"0123456789").unwrap();
        let whole = fs::read(&path).unwrap();
        let damaged = |why: &str, bytes: &[u8]| {
            fs::write(&path, bytes).unwrap();
            match cache.load("interp.cu", 80, 7) {
                Err(Miss::Unusable(reason)) => reason,
                other => panic!("{why}: expected a damaged miss, got {other:?}"),
            }
        };
        assert!(damaged("truncated", &whole[..whole.len() - 3]).contains("truncated: 7 of 10"));
        assert!(damaged("header only, cut", &whole[..20]).contains("not an rnccl"));
        assert!(damaged("empty", b"").contains("not an rnccl"));
        let mut flipped = whole.clone();
        *flipped.last_mut().unwrap() ^= 1;
        assert!(damaged("a flipped bit", &flipped).contains("hash"));
        // A file renamed by hand (or a 64-bit collision) is refused for its stored key.
        fs::write(cache.path("interp.cu", 80, 8), &whole).unwrap();
        assert!(
            matches!(cache.load("interp.cu", 80, 8), Err(Miss::Unusable(r)) if r.contains("key"))
        );
        fs::write(&path, &whole).unwrap();
        assert_eq!(cache.load("interp.cu", 80, 7).unwrap(), b"0123456789");
    }

    #[test]
    fn unwritable_folder_is_an_error_not_a_panic() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("a-file");
        fs::write(&file, "").unwrap();
        // A folder below a regular file can never be created, even by root.
        let cache = DiskCache::new(file.join("kernels"));
        assert!(cache.store("interp.cu", 90, 1, b"x").is_err());
        assert!(matches!(
            cache.load("interp.cu", 90, 1),
            Err(Miss::Unusable(r)) if r.contains("cannot read")
        ));
    }
}
