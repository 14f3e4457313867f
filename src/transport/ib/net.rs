//! [`IbNet`]: the IB devices a communicator may use, found once at init as NCCL's
//! `ncclIbInitDevices` finds them, with each port opened once and shared by its connections.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::config::Config;
use crate::error::Result;
use crate::ib::endpoint::{PortHandle, usable_ports};
use crate::ib::gid::LinkLayer;
use crate::ib::params::IbParams;
use crate::ib::verbs::fake::{FakeFabric, FakePort};
use crate::ib::verbs::{self, Verbs, VerbsError};

/// `RNCCL_IB_FAKE`'s fabric: one per process, two InfiniBand ports.
fn simulated() -> Arc<dyn Verbs> {
    static FABRIC: std::sync::OnceLock<Arc<dyn Verbs>> = std::sync::OnceLock::new();
    FABRIC
        .get_or_init(|| {
            let f = FakeFabric::new();
            f.add_device("mlx5_0", vec![FakePort::infiniband(0x11)]);
            f.add_device("mlx5_1", vec![FakePort::infiniband(0x12)]);
            f.host(&["mlx5_0", "mlx5_1"]).0
        })
        .clone()
}

type Opened = Mutex<HashMap<(String, u8), Arc<PortHandle>>>;

/// The usable IB ports of this process and the knobs to drive them with.
pub(crate) struct IbNet {
    /// The fabric: 0 for libibverbs' devices, a process-private id for the simulated one.
    pub(crate) fabric: u64,
    verbs: Arc<dyn Verbs>,
    ports: Vec<(String, u8)>,
    /// The `NCCL_IB_*` knobs.
    pub(crate) params: IbParams,
    opened: Opened,
}

impl std::fmt::Debug for IbNet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IbNet")
            .field("verbs", &self.verbs.describe())
            .field("ports", &self.ports)
            .finish()
    }
}

impl IbNet {
    /// The IB devices this process may use: none with `NCCL_IB_DISABLE=1`, without libibverbs,
    /// or without an ACTIVE InfiniBand/RoCE port that `NCCL_IB_HCA` selects (NCCL then falls
    /// back to sockets, and so does rnccl). Logs NCCL's `NET/IB` line either way.
    ///
    /// Errors: a bad `NCCL_IB_*` value ([`crate::error::Error::InvalidUsage`]).
    pub(crate) fn probe(cfg: &Config) -> Result<Option<IbNet>> {
        let params = IbParams::from_config(cfg)?;
        if params.disable {
            tracing::info!(target: "rnccl::init", "NET/IB : disabled by NCCL_IB_DISABLE=1; using sockets");
            return Ok(None);
        }
        let (fabric, provider) = if cfg.flag("RNCCL_IB_FAKE")? {
            let id = 1 + (u64::from(std::process::id()) << 16);
            (id, Ok(simulated()))
        } else {
            (0, verbs::provider(params.verbs_lib.as_deref()))
        };
        let v = match provider {
            Ok(v) => v,
            Err(e) => {
                tracing::info!(target: "rnccl::init", "NET/IB : No device found ({e})");
                return Ok(None);
            }
        };
        let ports = match usable_ports(&*v, &params) {
            Ok(p) if !p.is_empty() => p,
            Ok(_) => {
                tracing::info!(target: "rnccl::init", "NET/IB : No device found.");
                return Ok(None);
            }
            Err(e) => {
                tracing::info!(target: "rnccl::init", "NET/IB : No device found ({e})");
                return Ok(None);
            }
        };
        let net = IbNet {
            fabric,
            verbs: v,
            ports,
            params,
            opened: Mutex::new(HashMap::new()),
        };
        tracing::info!(target: "rnccl::init", "NET/IB : Using {}", net.describe());
        Ok(Some(net))
    }

    /// NCCL's device list line: `[0]mlx5_0:1/IB [1]mlx5_1:1/RoCE`.
    pub(crate) fn describe(&self) -> String {
        self.ports
            .iter()
            .enumerate()
            .map(|(i, (h, p))| {
                let ll = self
                    .verbs
                    .open(h)
                    .and_then(|d| d.query_port(*p))
                    .ok()
                    .and_then(|a| a.link())
                    .map_or("?", LinkLayer::nccl_name);
                format!("[{i}]{h}:{p}/{ll}")
            })
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// The port connections of `channel` use (NCCL spreads channels over its devices), opened
    /// on first use.
    ///
    /// Errors: [`VerbsError`] when the port cannot be opened.
    pub(crate) fn port_for(
        &self,
        channel: usize,
    ) -> std::result::Result<Arc<PortHandle>, VerbsError> {
        let (h, p) = &self.ports[channel % self.ports.len()];
        let mut opened = self.opened.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(ph) = opened.get(&(h.clone(), *p)) {
            return Ok(ph.clone());
        }
        let ph = Arc::new(PortHandle::open(&*self.verbs, h, *p, &self.params.gid)?);
        opened.insert((h.clone(), *p), ph.clone());
        Ok(ph)
    }
}
