//! CUBINs of `kernels/` for a GPU architecture, compiled at most once per process and kept on
//! disk across processes, so only the first process on a host after an upgrade pays for NVRTC
//! (seconds per program): an in-process table first, then the disk cache
//! ([`DiskCache`], folder from [`cache_dir`]), then [`nvrtc::compile`].
//!
//! The disk cache is a convenience, never a reason to fail: a folder that cannot be written is
//! warned about once and the process goes on with what it compiled; a damaged file is compiled
//! again and replaced.

use std::collections::HashMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::Instant;

use super::disk::{DiskCache, Miss};
use super::key::KeyParts;
use super::nvrtc;
use super::sources::{SOURCES, Source};
use crate::config::Config;
use crate::error::Result;

/// The knob naming the disk cache folder.
const KNOB: &str = "RNCCL_KERNEL_CACHE";

/// Where [`cubin`] found what it returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Found {
    /// Built earlier in this process.
    Memory,
    /// Read from the disk cache.
    Disk,
    /// Compiled by NVRTC just now.
    Compiled,
}

/// The disk cache folder `cfg` asks for: `RNCCL_KERNEL_CACHE` when set to a path; by default
/// `$XDG_CACHE_HOME/rnccl/kernels`, else `$HOME/.cache/rnccl/kernels`. `None` (no disk cache)
/// when the knob is `0`, `off`, `none` (any case) or empty, or by default with neither
/// variable set.
///
/// Errors: [`crate::error::Error::InvalidUsage`] for a value `env-explain` calls an error (a path
/// starting with `~`, which is not expanded).
pub(crate) fn cache_dir(cfg: &Config) -> Result<Option<PathBuf>> {
    cache_dir_with(
        cfg,
        std::env::var_os("XDG_CACHE_HOME"),
        std::env::var_os("HOME"),
    )
}

/// [`cache_dir`] with the two variables of the default given.
fn cache_dir_with(
    cfg: &Config,
    xdg_cache_home: Option<OsString>,
    home: Option<OsString>,
) -> Result<Option<PathBuf>> {
    let nonempty = |v: Option<OsString>| v.filter(|v| !v.is_empty()).map(PathBuf::from);
    Ok(match cfg.text(KNOB)? {
        Some(v)
            if ["0", "off", "none"]
                .iter()
                .any(|w| v.eq_ignore_ascii_case(w)) =>
        {
            None
        }
        Some(v) => Some(PathBuf::from(v)),
        // Set, to nothing: off, as documented for the knob.
        None if cfg.setting(KNOB).is_some() => None,
        // XDG: a relative $XDG_CACHE_HOME is invalid and is ignored.
        None => match nonempty(xdg_cache_home).filter(|d| d.is_absolute()) {
            Some(xdg) => Some(xdg.join("rnccl/kernels")),
            None => nonempty(home).map(|h| h.join(".cache/rnccl/kernels")),
        },
    })
}

/// The CUBIN of `program` (a `*.cu` file of [`SOURCES`]) built with `defines` (see
/// [`nvrtc::options`]) for `sm_<arch>` (e.g. 90 for H100):
/// from this process's table when built before, else from the disk cache in `dir` (`None`: no
/// disk cache; see [`cache_dir`]), else compiled by NVRTC (and stored in `dir`). Concurrent
/// callers asking for the same CUBIN wait for one compile. Logs (INIT) whether it compiled, with
/// the time taken, or read the disk cache.
///
/// Errors: [`crate::error::Error::Cuda`] when libnvrtc or CUDA's headers are missing, or when NVRTC
/// refuses the program (with its full log). A disk cache that cannot be read or written is not
/// an error.
pub(crate) fn cubin(
    program: &Source,
    arch: u32,
    defines: &[String],
    dir: Option<&Path>,
) -> Result<Vec<u8>> {
    let key = key_of(program, arch, defines)?;
    let disk = dir.map(|d| DiskCache::new(d.to_path_buf()));
    let start = Instant::now();
    let (cubin, found) = memoized(key, || {
        lookup_or_build(disk.as_ref(), program.name, arch, key, || {
            nvrtc::compile(program, arch, defines)
        })
    })?;
    let ms = start.elapsed().as_millis();
    let what = format!("kernels/{} for sm_{arch}", program.name);
    match (found, &disk) {
        (Found::Memory, _) => {
            tracing::debug!(target: "rnccl::init", "{what}: built earlier in this process");
        }
        (Found::Disk, Some(d)) => tracing::info!(
            target: "rnccl::init",
            "{what}: read from the kernel cache ({}) in {ms} ms",
            d.path(program.name, arch, key).display()
        ),
        (Found::Compiled, Some(d)) => tracing::info!(
            target: "rnccl::init",
            "{what}: compiled by NVRTC in {ms} ms (kernel cache: {})",
            d.path(program.name, arch, key).display()
        ),
        (_, None) => tracing::info!(
            target: "rnccl::init",
            "{what}: compiled by NVRTC in {ms} ms ({KNOB} turns the disk cache off)"
        ),
    }
    Ok(cubin)
}

/// The cache key of `program`'s CUBIN for `sm_<arch>` with the loaded NVRTC and the options
/// [`nvrtc::compile`] uses.
///
/// Errors: [`crate::error::Error::Cuda`] when libnvrtc or CUDA's headers are missing.
pub(crate) fn key_of(program: &Source, arch: u32, defines: &[String]) -> Result<u64> {
    Ok(KeyParts {
        program,
        sources: SOURCES,
        options: &nvrtc::options(arch, defines)?,
        arch,
        nvrtc: nvrtc::version()?,
    }
    .key())
}

/// One CUBIN of the in-process table; `None` until built (or after a failed build).
type Slot = Arc<Mutex<Option<Vec<u8>>>>;

/// The table's slot for `key`.
fn slot(key: u64) -> Slot {
    static TABLE: OnceLock<Mutex<HashMap<u64, Slot>>> = OnceLock::new();
    let mut table = TABLE
        .get_or_init(Mutex::default)
        .lock()
        .unwrap_or_else(PoisonError::into_inner);
    table.entry(key).or_default().clone()
}

/// The CUBIN under `key` from the in-process table, or `build`'s (kept in the table when it
/// succeeds). Holding the slot while building makes concurrent callers for one key wait for
/// one build; different keys build side by side.
///
/// Errors: `build`'s, which is not kept (the next caller tries again).
fn memoized(
    key: u64,
    build: impl FnOnce() -> Result<(Vec<u8>, Found)>,
) -> Result<(Vec<u8>, Found)> {
    let slot = slot(key);
    let mut cubin = slot.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(c) = cubin.as_ref() {
        return Ok((c.clone(), Found::Memory));
    }
    let (built, found) = build()?;
    *cubin = Some(built.clone());
    Ok((built, found))
}

/// The CUBIN of `program` for `sm_<arch>` under `key` from `disk`, else `compile`'s, stored in
/// `disk`. `None` for `disk` compiles every time.
///
/// Errors: `compile`'s. A file that cannot be used is compiled again (and logged); a store that
/// fails is warned about once per process and otherwise ignored.
pub(super) fn lookup_or_build(
    disk: Option<&DiskCache>,
    program: &str,
    arch: u32,
    key: u64,
    compile: impl FnOnce() -> Result<Vec<u8>>,
) -> Result<(Vec<u8>, Found)> {
    let Some(disk) = disk else {
        return Ok((compile()?, Found::Compiled));
    };
    match disk.load(program, arch, key) {
        Ok(cubin) => return Ok((cubin, Found::Disk)),
        Err(Miss::Absent) => {}
        Err(Miss::Unusable(why)) => tracing::info!(
            target: "rnccl::init",
            "kernel cache: {} is unusable ({why}); compiling again",
            disk.path(program, arch, key).display()
        ),
    }
    let cubin = compile()?;
    if let Err(e) = disk.store(program, arch, key, &cubin) {
        static WARNED: AtomicBool = AtomicBool::new(false);
        let path = disk.path(program, arch, key);
        if !WARNED.swap(true, Ordering::Relaxed) {
            tracing::warn!(
                target: "rnccl::init",
                "kernel cache: cannot write {}: {e}; every process compiles the kernels again \
                 until {KNOB} names a writable folder (or is set to off)",
                path.display()
            );
        } else {
            tracing::debug!(target: "rnccl::init", "kernel cache: cannot write {}: {e}", path.display());
        }
    }
    Ok((cubin, Found::Compiled))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{LoadOptions, Source as From};
    use crate::error::Error;
    use std::cell::Cell;
    use std::collections::BTreeMap;

    fn config(value: Option<&str>) -> Config {
        let env: BTreeMap<String, String> = value
            .map(|v| (KNOB.to_string(), v.to_string()))
            .into_iter()
            .collect();
        let dir = tempfile::tempdir().unwrap();
        Config::load(&LoadOptions {
            env: Some(env),
            home: Some(dir.path().to_path_buf()),
            system_conf: Some(dir.path().join("nccl.conf")),
            ..LoadOptions::default()
        })
        .unwrap()
    }

    fn dir(cfg: &Config, xdg: Option<&str>, home: Option<&str>) -> Option<PathBuf> {
        cache_dir_with(cfg, xdg.map(OsString::from), home.map(OsString::from)).unwrap()
    }

    #[test]
    fn folder_from_the_knob_or_the_xdg_default() {
        let unset = config(None);
        assert_eq!(
            dir(&unset, Some("/xdg"), Some("/home/u")),
            Some(PathBuf::from("/xdg/rnccl/kernels"))
        );
        assert_eq!(
            dir(&unset, None, Some("/home/u")),
            Some(PathBuf::from("/home/u/.cache/rnccl/kernels"))
        );
        assert_eq!(
            dir(&unset, Some("relative"), Some("/home/u")),
            Some(PathBuf::from("/home/u/.cache/rnccl/kernels")),
            "a relative XDG_CACHE_HOME is ignored"
        );
        assert_eq!(dir(&unset, Some(""), Some("")), None);
        assert_eq!(dir(&unset, None, None), None);
        assert_eq!(
            dir(&config(Some("/scratch/k")), Some("/xdg"), Some("/home/u")),
            Some(PathBuf::from("/scratch/k"))
        );
    }

    #[test]
    fn knob_wins_over_the_environment() {
        let cfg = config(Some("/scratch/k"));
        assert_eq!(cache_dir(&cfg).unwrap(), Some(PathBuf::from("/scratch/k")));
        assert_eq!(cache_dir(&config(Some("off"))).unwrap(), None);
    }

    #[test]
    fn knob_turns_the_disk_cache_off() {
        for off in ["0", "off", "OFF", "none", "None", ""] {
            assert_eq!(
                dir(&config(Some(off)), Some("/xdg"), Some("/home/u")),
                None,
                "{KNOB}={off:?}"
            );
        }
        let mut set_by_program = Config::defaults();
        set_by_program.set(KNOB, "off", From::Program("test".into()));
        assert_eq!(dir(&set_by_program, Some("/xdg"), None), None);
    }

    #[test]
    fn tilde_is_refused_as_env_explain_refuses_it() {
        let err =
            cache_dir_with(&config(Some("~/kernels")), None, Some("/home/u".into())).unwrap_err();
        assert!(matches!(err, Error::InvalidUsage(_)), "{err:?}");
        assert!(err.to_string().contains(KNOB), "{err}");
    }

    /// A compiler that counts its calls and returns `cubin`.
    fn counting(calls: &Cell<usize>, cubin: &[u8]) -> Result<Vec<u8>> {
        calls.set(calls.get() + 1);
        Ok(cubin.to_vec())
    }

    #[test]
    fn miss_compiles_and_stores_then_hit_reads_the_disk() {
        let tmp = tempfile::tempdir().unwrap();
        let disk = DiskCache::new(tmp.path().join("k"));
        let calls = Cell::new(0);
        let first = lookup_or_build(Some(&disk), "interp.cu", 90, 1, || {
            counting(&calls, b"cubin-1")
        })
        .unwrap();
        assert_eq!(first, (b"cubin-1".to_vec(), Found::Compiled));
        assert!(disk.path("interp.cu", 90, 1).is_file());
        // Another process (no in-process table here) finds it on disk.
        let second = lookup_or_build(Some(&disk), "interp.cu", 90, 1, || {
            counting(&calls, b"other")
        })
        .unwrap();
        assert_eq!(second, (b"cubin-1".to_vec(), Found::Disk));
        assert_eq!(calls.get(), 1);
        // Another key (new sources, NVRTC, options) or architecture misses.
        let other = lookup_or_build(Some(&disk), "interp.cu", 80, 1, || {
            counting(&calls, b"cubin-80")
        })
        .unwrap();
        assert_eq!(other.1, Found::Compiled);
        assert_eq!(calls.get(), 2);
    }

    #[test]
    fn damaged_file_is_compiled_again_and_replaced() {
        let tmp = tempfile::tempdir().unwrap();
        let disk = DiskCache::new(tmp.path().to_path_buf());
        let calls = Cell::new(0);
        let build = || counting(&calls, b"0123456789");
        lookup_or_build(Some(&disk), "interp.cu", 90, 5, build).unwrap();
        let path = disk.path("interp.cu", 90, 5);
        let whole = std::fs::read(&path).unwrap();
        std::fs::write(&path, &whole[..whole.len() - 4]).unwrap();
        let again = lookup_or_build(Some(&disk), "interp.cu", 90, 5, build).unwrap();
        assert_eq!(again, (b"0123456789".to_vec(), Found::Compiled));
        assert_eq!(
            std::fs::read(&path).unwrap(),
            whole,
            "the file was replaced whole"
        );
        let hit = lookup_or_build(Some(&disk), "interp.cu", 90, 5, build).unwrap();
        assert_eq!(hit.1, Found::Disk);
        assert_eq!(calls.get(), 2);
    }

    #[test]
    fn unwritable_folder_still_returns_the_cubin() {
        let tmp = tempfile::tempdir().unwrap();
        let file = tmp.path().join("a-file");
        std::fs::write(&file, "").unwrap();
        let disk = DiskCache::new(file.join("kernels"));
        let calls = Cell::new(0);
        for _ in 0..2 {
            let got = lookup_or_build(Some(&disk), "interp.cu", 90, 9, || counting(&calls, b"c"))
                .unwrap();
            assert_eq!(got, (b"c".to_vec(), Found::Compiled));
        }
        assert_eq!(calls.get(), 2);
    }

    #[test]
    fn without_disk_cache_every_call_compiles() {
        let calls = Cell::new(0);
        for _ in 0..2 {
            let got = lookup_or_build(None, "interp.cu", 90, 3, || counting(&calls, b"c")).unwrap();
            assert_eq!(got.1, Found::Compiled);
        }
        assert_eq!(calls.get(), 2);
    }

    #[test]
    fn compile_errors_pass_through_and_store_nothing() {
        let tmp = tempfile::tempdir().unwrap();
        let disk = DiskCache::new(tmp.path().to_path_buf());
        let err = lookup_or_build(Some(&disk), "interp.cu", 90, 4, || {
            Err(Error::Cuda("NVRTC log".into()))
        })
        .unwrap_err();
        assert!(err.to_string().contains("NVRTC log"));
        assert!(!disk.path("interp.cu", 90, 4).exists());
    }

    // Keys far from any real FNV-1a key, one per test: the table is process-wide.
    #[test]
    fn process_builds_each_key_once() {
        let key = 0x7e57_0000_0000_0001;
        let calls = Cell::new(0);
        let build = || Ok((counting(&calls, b"built")?, Found::Compiled));
        assert_eq!(
            memoized(key, build).unwrap(),
            (b"built".to_vec(), Found::Compiled)
        );
        assert_eq!(
            memoized(key, build).unwrap(),
            (b"built".to_vec(), Found::Memory)
        );
        assert_eq!(calls.get(), 1);
    }

    #[test]
    fn failed_build_is_not_remembered() {
        let key = 0x7e57_0000_0000_0002;
        let failed = memoized(key, || Err(Error::Cuda("no".into())));
        assert!(failed.is_err());
        let built = memoized(key, || Ok((b"ok".to_vec(), Found::Compiled))).unwrap();
        assert_eq!(built.1, Found::Compiled);
    }

    #[test]
    fn concurrent_callers_wait_for_one_build() {
        let key = 0x7e57_0000_0000_0003;
        let builds = std::sync::atomic::AtomicUsize::new(0);
        let found: Vec<Found> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..8)
                .map(|_| {
                    s.spawn(|| {
                        memoized(key, || {
                            builds.fetch_add(1, Ordering::SeqCst);
                            std::thread::sleep(std::time::Duration::from_millis(20));
                            Ok((b"once".to_vec(), Found::Compiled))
                        })
                        .unwrap()
                        .1
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert_eq!(builds.load(Ordering::SeqCst), 1);
        assert_eq!(found.iter().filter(|f| **f == Found::Compiled).count(), 1);
        assert_eq!(found.iter().filter(|f| **f == Found::Memory).count(), 7);
    }
}
