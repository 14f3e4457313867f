//! Which NCCL rnccl answers as: the API level of its nccl.h drop-in (what `ncclGetVersion`
//! reports) and the NCCL release its knob registry and file formats follow
//! ([`crate::config::NCCL_VERSION`]). The log banner and `rnccl --version` print both, so a
//! program that checks the version sees the level the library implements.

use crate::config::NCCL_VERSION;

/// The NCCL API level rnccl implements, `(major, minor, patch)`: `ncclGetVersion` reports its
/// `NCCL_VERSION_CODE` (2.30.7 = 23007) and capi/include/nccl.h declares it: every function,
/// type and `ncclConfig_t` field of NVIDIA's nccl.h 2.30.7. Programs built against an older
/// nccl.h keep working: NCCL's versioned structs are read as far as the caller's header goes,
/// and version checks such as PyTorch's (shrink needs ≥ 2.27) pass.
pub const NCCL_API_VERSION: (u32, u32, u32) = (2, 30, 7);

/// rnccl's version with the NCCL API level it implements and the NCCL release its knobs follow:
/// `0.1.0 (NCCL 2.30.7 API; knobs and formats of NCCL 2.30.7)`.
pub fn version_line() -> String {
    let (major, minor, patch) = NCCL_API_VERSION;
    format!(
        "{} (NCCL {major}.{minor}.{patch} API; knobs and formats of NCCL {NCCL_VERSION})",
        env!("CARGO_PKG_VERSION")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_line_names_the_api_level_and_the_knob_release() {
        let line = version_line();
        assert!(line.starts_with(env!("CARGO_PKG_VERSION")), "{line}");
        assert!(line.contains("(NCCL 2.30.7 API;"), "{line}");
        assert!(
            line.contains(&format!("knobs and formats of NCCL {NCCL_VERSION})")),
            "{line}"
        );
    }
}
