//! The cache key of a CUBIN: a stable 64-bit hash of everything the compiler's output depends
//! on, so a changed kernel, option, architecture or NVRTC never reuses an old CUBIN.

use super::sources::Source;
use crate::hash::fnv1a;

/// Bumped when the key's contents or the cache file's layout change, so older files miss.
const SCHEMA: &[u8] = b"rnccl kernel cache 1";

/// What a CUBIN is a function of.
#[derive(Debug, Clone, Copy)]
pub(crate) struct KeyParts<'a> {
    /// The program compiled (a `*.cu` file of `kernels/`).
    pub(crate) program: &'a Source,
    /// Every file of `kernels/` (the program can include any header, so all count).
    pub(crate) sources: &'a [Source],
    /// The NVRTC options, in order (the include path among them).
    pub(crate) options: &'a [String],
    /// The architecture, as in `sm_<arch>`.
    pub(crate) arch: u32,
    /// The NVRTC version, (major, minor).
    pub(crate) nvrtc: (i32, i32),
}

impl KeyParts<'_> {
    /// The key: FNV-1a over every part, each length-prefixed so no two different lists of parts
    /// run together into the same bytes. Stable across processes, builds and hosts.
    pub(crate) fn key(&self) -> u64 {
        let mut bytes = Vec::new();
        let mut part = |b: &[u8]| {
            bytes.extend_from_slice(&(b.len() as u64).to_le_bytes());
            bytes.extend_from_slice(b);
        };
        part(SCHEMA);
        part(self.program.name.as_bytes());
        for s in self.sources {
            part(s.name.as_bytes());
            part(s.text.as_bytes());
        }
        part(b"options");
        for o in self.options {
            part(o.as_bytes());
        }
        part(&self.arch.to_le_bytes());
        part(&self.nvrtc.0.to_le_bytes());
        part(&self.nvrtc.1.to_le_bytes());
        fnv1a(&bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: Source = Source {
        name: "a.cu",
        text: "#include \"h.cuh\"\n",
    };
    const H: Source = Source {
        name: "h.cuh",
        text: "// header\n",
    };

    fn base<'a>(sources: &'a [Source], options: &'a [String]) -> KeyParts<'a> {
        KeyParts {
            program: &sources[0],
            sources,
            options,
            arch: 90,
            nvrtc: (13, 0),
        }
    }

    #[test]
    fn key_changes_with_every_part() {
        let sources = [A, H];
        let options = vec!["-std=c++17".to_string()];
        let k = base(&sources, &options).key();
        assert_eq!(
            k,
            base(&sources, &options).key(),
            "the key is deterministic"
        );

        let arch = KeyParts {
            arch: 80,
            ..base(&sources, &options)
        };
        assert_ne!(k, arch.key(), "architecture");

        let nvrtc = KeyParts {
            nvrtc: (13, 1),
            ..base(&sources, &options)
        };
        assert_ne!(k, nvrtc.key(), "NVRTC version");

        let edited = [
            A,
            Source {
                name: "h.cuh",
                text: "// header, edited\n",
            },
        ];
        assert_ne!(k, base(&edited, &options).key(), "a header's text");

        let more = [
            A,
            H,
            Source {
                name: "i.cuh",
                text: "",
            },
        ];
        assert_ne!(k, base(&more, &options).key(), "a new file");

        let fast = vec!["-std=c++17".to_string(), "--use_fast_math".to_string()];
        assert_ne!(k, base(&sources, &fast).key(), "options");

        let other = [Source { name: "b.cu", ..A }, H];
        assert_ne!(k, base(&other, &options).key(), "the program");
    }

    #[test]
    fn parts_do_not_run_together() {
        let split = ["-a".to_string(), "b".to_string()];
        let joined = ["-ab".to_string()];
        let sources = [A, H];
        assert_ne!(base(&sources, &split).key(), base(&sources, &joined).key());
    }

    #[test]
    fn key_is_stable_across_builds() {
        // Fixed arithmetic over fixed bytes: every build and host computes this key for these
        // parts, so an upgrade that changes nothing recompiles nothing. A deliberate change of
        // the key's contents changes it: bump SCHEMA and this value together. (The value was
        // checked against an independent FNV-1a in Python.)
        let sources = [A, H];
        let options = vec!["-std=c++17".to_string()];
        assert_eq!(base(&sources, &options).key(), 0x7751_a3b8_3fed_5aeb);
    }
}
