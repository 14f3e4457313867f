//! The CUDA sources of `kernels/`, embedded in the library so a compile needs no files on disk:
//! each `*.cu` file is a program NVRTC compiles, each `*.cuh` file a header those programs
//! `#include "..."` by name, handed to NVRTC with the program.

/// One file of `kernels/`: its name there and its text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Source {
    /// The file name in `kernels/` (e.g. `interp.cu`); NVRTC reports errors against it and
    /// programs `#include` headers by it.
    pub(crate) name: &'static str,
    /// The file's text.
    pub(crate) text: &'static str,
}

impl Source {
    /// Whether this file is a program NVRTC compiles (`*.cu`) rather than a header (`*.cuh`).
    pub(crate) fn is_program(&self) -> bool {
        self.name.ends_with(".cu")
    }
}

/// Embeds `kernels/<name>`.
macro_rules! kernel_file {
    ($name:literal) => {
        Source {
            name: $name,
            text: include_str!(concat!("../../../../kernels/", $name)),
        }
    };
}

/// Every file of `kernels/`, sorted by name. A test checks this against the directory, so a
/// file added there and forgotten here fails the build's tests.
pub(crate) const SOURCES: &[Source] = &[
    kernel_file!("check.cu"),
    kernel_file!("direct.cuh"),
    kernel_file!("interp.cu"),
    kernel_file!("ll.cuh"),
    kernel_file!("program.cuh"),
    kernel_file!("reduce.cuh"),
    kernel_file!("registered.cuh"),
    kernel_file!("rma.cuh"),
    kernel_file!("symmetric.cuh"),
];

/// The programs of `kernels/` (`*.cu`), each compiled on its own.
pub(crate) fn programs() -> impl Iterator<Item = &'static Source> {
    SOURCES.iter().filter(|s| s.is_program())
}

/// The headers of `kernels/` (`*.cuh`), given to every program's compile by name.
pub(crate) fn headers() -> impl Iterator<Item = &'static Source> {
    SOURCES.iter().filter(|s| !s.is_program())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn embedded_files_are_the_kernels_directory() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("kernels");
        let mut on_disk: Vec<(String, String)> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| {
                let e = e.unwrap();
                let name = e.file_name().into_string().unwrap();
                (name, std::fs::read_to_string(e.path()).unwrap())
            })
            .collect();
        on_disk.sort();
        let embedded: Vec<(String, String)> = SOURCES
            .iter()
            .map(|s| (s.name.to_string(), s.text.to_string()))
            .collect();
        let names = |v: &[(String, String)]| v.iter().map(|f| f.0.clone()).collect::<Vec<_>>();
        assert_eq!(
            names(&embedded),
            names(&on_disk),
            "SOURCES in src/device/cuda/compile/sources.rs must list every file of kernels/, sorted"
        );
        assert_eq!(embedded, on_disk);
    }

    #[test]
    fn every_file_is_a_program_or_a_header() {
        for s in SOURCES {
            assert!(
                s.name.ends_with(".cu") || s.name.ends_with(".cuh"),
                "kernels/{} is neither a .cu program nor a .cuh header",
                s.name
            );
        }
        assert!(programs().count() >= 1);
        assert!(programs().all(|s| s.name.ends_with(".cu")));
        assert!(headers().all(|s| s.name.ends_with(".cuh")));
        assert_eq!(programs().count() + headers().count(), SOURCES.len());
    }
}
