//! InfiniBand and RoCE: what NCCL's IB plugin sees on a host (`crate::ibcheck` judges it and
//! runs the RDMA tests; the IB transport connects over it).
//!
//! - [`sysfs`]: adapters, ports, GID tables, netdevs and counters from `/sys/class/infiniband`
//!   (any root, so captured trees can be studied);
//! - [`gid`]: GIDs and the GID index NCCL picks (`NCCL_IB_GID_INDEX` and friends);
//! - [`rate`]: port rates, adapter capabilities, PCIe bandwidth;
//! - [`counters`]: error and traffic counters, totals and deltas;
//! - [`params`]: the `NCCL_IB_*` knobs, read through the registry;
//! - `endpoint`: opening a port and connecting queue pairs (the transport and `ibcheck`'s tests
//!   share it);
//! - `verbs`: the verbs layer (libibverbs loaded at run time, or an in-process fake), inside
//!   the crate; [`Provider`] is its public handle and [`fake`] the fake fabric.

pub mod counters;
pub(crate) mod endpoint;
pub mod gid;
pub mod params;
pub mod rate;
pub mod sysfs;
pub(crate) mod verbs;

use std::sync::Arc;

pub use verbs::fake;
pub use verbs::{DeviceAttr, PortAttr, VerbsError, WcStatus, mtu_bytes};

/// A verbs library: libibverbs loaded at run time, or an in-process fake fabric ([`fake`]). It
/// is what `ibcheck`, its RDMA tests and the IB transport open adapters through; the verbs
/// themselves (registering memory, posting work requests) stay inside the crate.
#[derive(Clone)]
pub struct Provider(pub(crate) Arc<dyn verbs::Verbs>);

impl Provider {
    /// The provider this process uses: one installed with [`Provider::install`] (a fake fabric
    /// in tests), else libibverbs loaded with `dlopen` (`lib` is `NCCL_IBVERBS_LIB`), as NCCL's
    /// src/misc/ibvsymbols.cc does.
    ///
    /// Errors: [`VerbsError::NotLoaded`] or [`VerbsError::MissingSymbol`] when libibverbs is
    /// absent or unusable.
    pub fn load(lib: Option<&str>) -> Result<Provider, VerbsError> {
        verbs::provider(lib).map(Provider)
    }

    /// Makes `p` the provider [`Provider::load`] returns in this process (`None` goes back to
    /// libibverbs): for tests and embedders that bring their own fabric.
    pub fn install(p: Option<Provider>) {
        verbs::install(p.map(|p| p.0));
    }

    /// Where it comes from, in words (`libibverbs.so.1`, `in-process fake fabric`).
    pub fn describe(&self) -> String {
        self.0.describe()
    }

    /// The (adapter, port) pairs NCCL would use with `params` (`NCCL_IB_HCA`, ACTIVE ports
    /// with a link layer), in NCCL's order.
    ///
    /// Errors: [`VerbsError`] when the adapters cannot be listed.
    pub fn usable_ports(&self, params: &params::IbParams) -> Result<Vec<(String, u8)>, VerbsError> {
        endpoint::usable_ports(&*self.0, params)
    }
}

impl std::fmt::Debug for Provider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Provider").field(&self.describe()).finish()
    }
}
