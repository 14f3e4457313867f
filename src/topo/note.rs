//! [`TopoNote`]: what was noticed while reading a topology, whether NCCL itself would refuse
//! the file over it, and what was filled in or assumed where the file left things to the host.

use serde::Serialize;

/// What a [`TopoNote`] is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum NoteKind {
    /// Reading the file: something NCCL reads differently, drops or refuses.
    Read,
    /// A value the host gave where the file left it out, as NCCL fills it
    /// (`ncclTopoFillGpu`, `ncclTopoGetXmlFromCpu`, `ncclTopoFillNet`).
    Filled,
    /// Offline: what rnccl assumed about the host the file describes.
    Assumed,
    /// Where the file and the host it is applied to disagree (devices on one side only).
    Host,
}

/// A remark about a topology: something NCCL reads differently, drops or refuses, what was
/// filled from the host or assumed about it, or what detection had to guess.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TopoNote {
    /// What happens, starting with `line N:` when it is about a line of the file.
    pub message: String,
    /// NCCL would refuse the file over this (its XML parser fails, so communicator creation
    /// fails), where rnccl reads on.
    pub nccl_rejects: bool,
    /// What the note is about.
    pub kind: NoteKind,
}

impl TopoNote {
    fn new(message: impl Into<String>, kind: NoteKind) -> TopoNote {
        TopoNote {
            message: message.into(),
            nccl_rejects: false,
            kind,
        }
    }

    /// A remark NCCL does not fail over.
    pub fn note(message: impl Into<String>) -> TopoNote {
        TopoNote::new(message, NoteKind::Read)
    }

    /// Something that makes NCCL refuse the file.
    pub fn rejected(message: impl Into<String>) -> TopoNote {
        TopoNote {
            nccl_rejects: true,
            ..TopoNote::new(message, NoteKind::Read)
        }
    }

    /// A value filled in from the host (or the assumptions standing in for it).
    pub fn filled(message: impl Into<String>) -> TopoNote {
        TopoNote::new(message, NoteKind::Filled)
    }

    /// An assumption about the host a file describes.
    pub fn assumed(message: impl Into<String>) -> TopoNote {
        TopoNote::new(message, NoteKind::Assumed)
    }

    /// A disagreement between the file and the host it is applied to.
    pub fn host(message: impl Into<String>) -> TopoNote {
        TopoNote::new(message, NoteKind::Host)
    }
}

impl std::fmt::Display for TopoNote {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}
