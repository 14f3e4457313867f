//! Where CUDA's own headers are (`cuda_fp16.h`, `cuda_bf16.h`), which the kernels include and
//! NVRTC does not carry: the include folder handed to every compile. Looked for once per process.

use std::ffi::{CStr, OsStr, c_void};
use std::mem::MaybeUninit;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use cudarc::nvrtc::sys;

use super::nvrtc;
use crate::error::{Error, Result};

/// The header whose presence marks a folder as CUDA's include folder.
const MARKER: &str = "cuda_fp16.h";

/// One place searched, as the error names it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Place {
    /// How the place was derived, e.g. `$CUDA_HOME/include`.
    what: &'static str,
    /// The folder, or `None` when what it derives from is unset.
    dir: Option<PathBuf>,
}

/// CUDA's include folder: the first of `$CUDA_HOME/include`, `$CUDA_PATH/include`,
/// `/usr/local/cuda/include` and the `include` folder beside the loaded libnvrtc (where the
/// `nvidia-cuda-runtime` wheel puts them, next to `nvidia-cuda-nvrtc`'s `lib`) that holds
/// `cuda_fp16.h`. Searched once; later calls return the first answer.
///
/// Errors: [`Error::Cuda`] when libnvrtc is not found (see [`nvrtc::require`]) or when no place
/// holds the headers, naming every place searched and what to install.
pub(crate) fn cuda_include_dir() -> Result<PathBuf> {
    static FOUND: OnceLock<std::result::Result<PathBuf, String>> = OnceLock::new();
    nvrtc::require()?;
    FOUND
        .get_or_init(|| pick(&places()))
        .clone()
        .map_err(Error::Cuda)
}

/// The places searched, in order.
fn places() -> Vec<Place> {
    let under = |var: &str| std::env::var_os(var).map(|v| PathBuf::from(v).join("include"));
    vec![
        Place {
            what: "$CUDA_HOME/include",
            dir: under("CUDA_HOME"),
        },
        Place {
            what: "$CUDA_PATH/include",
            dir: under("CUDA_PATH"),
        },
        Place {
            what: "/usr/local/cuda/include",
            dir: Some(PathBuf::from("/usr/local/cuda/include")),
        },
        Place {
            what: "the include folder beside the loaded libnvrtc",
            dir: loaded_nvrtc()
                .as_deref()
                .and_then(Path::parent)
                .and_then(Path::parent)
                .map(|root| root.join("include")),
        },
    ]
}

/// The first place holding [`MARKER`].
///
/// Errors: every place and why it did not fit, with what to install (the message of an
/// [`Error::Cuda`]).
fn pick(places: &[Place]) -> std::result::Result<PathBuf, String> {
    if let Some(dir) = places
        .iter()
        .filter_map(|p| p.dir.as_ref())
        .find(|d| d.join(MARKER).is_file())
    {
        return Ok(dir.clone());
    }
    let searched: Vec<String> = places
        .iter()
        .map(|p| match &p.dir {
            None => format!("{} (unset)", p.what),
            Some(_) if p.what.starts_with('/') => p.what.to_string(),
            Some(d) => format!("{} ({})", p.what, d.display()),
        })
        .collect();
    Err(format!(
        "CUDA's headers ({MARKER}, cuda_bf16.h), which the kernels include, were not found; searched {}. \
         Install a CUDA 13 toolkit and set CUDA_HOME to it, or `pip install nvidia-cuda-runtime==13.0.*` \
         beside nvidia-cuda-nvrtc (or set CUDA_HOME to the wheel's nvidia/cu13 folder)",
        searched.join(", ")
    ))
}

/// The path libnvrtc was loaded from, as the dynamic loader reports it for one of its symbols
/// (`dladdr`); `None` when the loader cannot say. Only called once [`nvrtc::require`] succeeded.
fn loaded_nvrtc() -> Option<PathBuf> {
    // SAFETY: `nvrtc::require` found the library, so `culib` loads it rather than panicking;
    // loading runs libnvrtc's initialisers, which take no arguments and have no preconditions.
    let lib = unsafe { sys::culib() };
    // SAFETY: the symbol is taken as a plain address (a pointer-typed symbol), never called or
    // dereferenced, so its real type does not matter.
    let symbol = unsafe { lib.get::<*const c_void>(b"nvrtcVersion") }.ok()?;
    let address: *const c_void = *symbol;
    let mut info = MaybeUninit::<libc::Dl_info>::zeroed();
    // SAFETY: `address` lies in a library the loader holds (culib keeps it loaded for the
    // process) and `info` points to writable memory the size of a `Dl_info`.
    if unsafe { libc::dladdr(address, info.as_mut_ptr()) } == 0 {
        return None;
    }
    // SAFETY: the memory was zeroed (a valid `Dl_info`: null pointers) and dladdr, which
    // succeeded, filled it in.
    let info = unsafe { info.assume_init() };
    if info.dli_fname.is_null() {
        return None;
    }
    // SAFETY: a non-null `dli_fname` is the loader's NUL-terminated path of the object, valid
    // while the object stays loaded, which it does for the process; it is copied at once.
    let name = unsafe { CStr::from_ptr(info.dli_fname) };
    Some(PathBuf::from(OsStr::from_bytes(name.to_bytes())))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn place(what: &'static str, dir: Option<&Path>) -> Place {
        Place {
            what,
            dir: dir.map(Path::to_path_buf),
        }
    }

    #[test]
    fn first_place_with_the_headers_wins() {
        let empty = tempfile::tempdir().unwrap();
        let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        std::fs::write(a.path().join(MARKER), "").unwrap();
        std::fs::write(b.path().join(MARKER), "").unwrap();
        let found = pick(&[
            place("$CUDA_HOME/include", None),
            place("$CUDA_PATH/include", Some(empty.path())),
            place("/usr/local/cuda/include", Some(a.path())),
            place("beside", Some(b.path())),
        ]);
        assert_eq!(found.unwrap(), a.path());
    }

    #[test]
    fn nothing_found_names_every_place_and_the_fix() {
        let empty = tempfile::tempdir().unwrap();
        let err = pick(&[
            place("$CUDA_HOME/include", None),
            place("$CUDA_PATH/include", Some(empty.path())),
            place(
                "/nonexistent/include",
                Some(Path::new("/nonexistent/include")),
            ),
        ])
        .unwrap_err();
        assert!(err.contains("$CUDA_HOME/include (unset)"), "{err}");
        assert!(
            err.contains(&format!("$CUDA_PATH/include ({})", empty.path().display())),
            "{err}"
        );
        assert!(err.contains("/nonexistent/include"), "{err}");
        assert!(err.contains("pip install nvidia-cuda-runtime"), "{err}");
        assert!(err.contains("CUDA_HOME"), "{err}");
    }
}
