//! [`TopoNote`]: what was noticed while reading a topology, and whether NCCL itself would refuse
//! the file over it.

use serde::Serialize;

/// A remark about a topology: something NCCL reads differently, drops or refuses, or what
/// detection had to guess.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TopoNote {
    /// What happens, starting with `line N:` when it is about a line of the file.
    pub message: String,
    /// NCCL would refuse the file over this (its XML parser fails, so communicator creation
    /// fails), where rnccl reads on.
    pub nccl_rejects: bool,
}

impl TopoNote {
    /// A remark NCCL does not fail over.
    pub fn note(message: impl Into<String>) -> TopoNote {
        TopoNote {
            message: message.into(),
            nccl_rejects: false,
        }
    }

    /// Something that makes NCCL refuse the file.
    pub fn rejected(message: impl Into<String>) -> TopoNote {
        TopoNote {
            message: message.into(),
            nccl_rejects: true,
        }
    }
}

impl std::fmt::Display for TopoNote {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}
