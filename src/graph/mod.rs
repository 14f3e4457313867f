//! Channels: NCCL's ring and tree search over a topology, connection across nodes, and the tuning
//! model (predicted time per algorithm and protocol). Pure functions of a [`crate::topo::System`]:
//! fast and deterministic.

pub mod btree;
pub mod comm;
pub mod connect;
pub mod file;
pub mod info;
pub mod search;
pub mod tuning;
pub mod types;
pub mod xml;

pub use crate::conn::MAX_CHANNELS;
pub use comm::{
    ChannelBounds, ChannelPlan, Channels, PlanParams, plan_channels, search_and_connect,
    search_or_load,
};
pub use connect::TreeLinks;
pub use search::{SearchParams, compute};
pub use types::{Graph, Pattern};
