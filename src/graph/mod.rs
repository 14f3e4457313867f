//! Channels: NCCL's ring and tree search over a topology, connection across nodes, and the tuning
//! model (predicted time per algorithm and protocol). Pure functions of a [`crate::topo::System`]:
//! fast and deterministic.

pub mod search;
pub mod types;

pub use search::{SearchParams, compute};
pub use types::{Graph, MAXCHANNELS, Pattern};
