//! Creating communicators: one rank joining through a unique id (`ncclCommInitRank`), every
//! rank in this process at once (`ncclCommInitAll`), and the assembly both end in.

use std::cell::RefCell;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use super::{CommConfig, Communicator, layout};
use crate::bootstrap::unique_id::UniqueId;
use crate::bootstrap::{Announce, BootstrapNet, Deadline};
use crate::coll::{Geometry, Rings};
use crate::config::Config;
use crate::config::syntax::{ALGORITHMS, AlgoProtoList, PROTOCOLS};
use crate::error::{Error, Result};
use crate::exec::gpu::GpuEngine;
use crate::exec::host::{WaitPolicy, spin_cores};
use crate::exec::{Core, Engine, State, Watch, plans};
use crate::stats::CommStats;
use crate::transport::tcp::listener::DataListener;
use crate::transport::{TransportParams, slot_size};

impl Communicator {
    /// Joins the communicator `id` as `rank` of `nranks` (`ncclCommInitRankConfig`). Blocks until
    /// every rank has joined or the timeout passes.
    ///
    /// Errors: [`Error::InvalidArgument`] for a bad rank/nranks; [`Error::Timeout`] naming the
    /// ranks that never arrived; [`Error::InvalidUsage`] for bad knob values;
    /// [`Error::Remote`] / [`Error::System`] for network failures.
    pub fn init_rank(
        nranks: usize,
        id: &UniqueId,
        rank: usize,
        config: CommConfig,
    ) -> Result<Communicator> {
        if nranks == 0 {
            return Err(Error::invalid_arg("nranks must be at least 1"));
        }
        if rank >= nranks {
            return Err(Error::invalid_arg(format!(
                "rank {rank} is out of range for nranks={nranks} (ranks are 0..{})",
                nranks - 1
            )));
        }
        let (knobs, timeout) = config.resolve()?;
        let params = TransportParams::from_config(&knobs)?;
        // Fail fast on a bad NCCL_BUFFSIZE before meeting the other ranks.
        slot_size::slot_bytes(&knobs, 1, config.device.is_some())?;
        // The process's status service answers on the bootstrap's interface; every rank learns
        // where through the check-in.
        let iface = BootstrapNet::interface(id, &knobs)?;
        let announce = Announce {
            ib_fabric: params.ib.as_ref().map(|ib| ib.fabric),
            status: crate::status::start(iface.addr),
            gpu_bus: config.device.and_then(gpu_bus),
        };
        let net = BootstrapNet::init(id, rank, nranks, &knobs, timeout, &iface, announce)?;
        let tag = crate::hash::fnv1a(&id.magic.to_le_bytes());
        let net_rank: Vec<usize> = (0..nranks).collect();
        let deadline = Deadline::after(timeout);
        let made = (|| {
            let mine =
                (rank == 0).then(|| layout::decide(&knobs, net.peers(), config.device.is_some()));
            let lay = layout::share(&net, tag, rank, &net_rank, mine, deadline)?;
            layout::dump_graph(&knobs, rank, net.peers())?;
            Communicator::assemble(
                net.clone(),
                tag,
                rank,
                net_rank.clone(),
                lay,
                knobs.clone(),
                params,
                timeout,
                config.device,
            )
        })();
        if let Err(e) = &made {
            // Every other rank is waiting on this one somewhere in its init: tell them all.
            let others: Vec<usize> = (0..nranks).filter(|&r| r != rank).collect();
            net.notify_failure(tag, &others, &format!("rank {rank}'s init failed: {e}"));
        }
        made
    }

    /// Joins a communicator from several unique ids (`ncclCommInitRankScalable`): every rank
    /// passes the same `ids` in the same order. rnccl runs the rendezvous on the first id
    /// (one root serves every rank: the communicator is the same, the check-in load is not
    /// spread); once joined, rank 0 tells the other ids' roots to stand down, so they close
    /// within seconds instead of waiting out their timeout.
    ///
    /// Errors: [`Error::InvalidArgument`] for no id or more ids than ranks; as
    /// [`Communicator::init_rank`].
    pub fn init_rank_scalable(
        nranks: usize,
        ids: &[UniqueId],
        rank: usize,
        config: CommConfig,
    ) -> Result<Communicator> {
        let Some(first) = ids.first().filter(|_| ids.len() <= nranks.max(1)) else {
            return Err(Error::invalid_arg(format!(
                "{} unique ids for {nranks} ranks: pass 1 to nranks ids",
                ids.len()
            )));
        };
        let comm = Communicator::init_rank(nranks, first, rank, config)?;
        if rank == 0 {
            for id in ids[1..].iter().filter(|id| *id != first) {
                // Best effort: a root already gone (its process exited) needs no notice.
                let _ = id.abort_rendezvous(&format!(
                    "not used: the communicator's rendezvous ran on the first of its {} ids ({first})",
                    ids.len()
                ));
            }
        }
        Ok(comm)
    }

    /// Creates `nranks` communicators whose ranks are threads of this process
    /// (`ncclCommInitAll`). Rank `i` is element `i`; move each into the thread that drives it,
    /// or drive them all from one thread through a [`Group`](super::Group).
    ///
    /// Errors: as [`Communicator::init_rank`].
    pub fn init_all(nranks: usize) -> Result<Vec<Communicator>> {
        Communicator::init_all_with(nranks, CommConfig::default())
    }

    /// [`Communicator::init_all`] with explicit settings.
    ///
    /// Errors: as [`Communicator::init_rank`].
    pub fn init_all_with(nranks: usize, config: CommConfig) -> Result<Vec<Communicator>> {
        let devices = config.device.map(|d| vec![d; nranks]);
        Communicator::init_threads(nranks, config, devices)
    }

    /// Creates one communicator per entry of `devices`, rank `i` on CUDA device `devices[i]`,
    /// all driven by this process (`ncclCommInitAll` over a device list): collectives then
    /// take device buffers, several GPUs' operations go in one [`Group`](super::Group), and the GPUs move
    /// data between each other directly (NVLink or PCIe peer access) or through pinned host
    /// memory (`NCCL_P2P_DISABLE=1`).
    ///
    /// Errors: [`Error::Cuda`] when there is no usable GPU (the message says why in one line)
    /// or an ordinal does not exist; otherwise as [`Communicator::init_rank`].
    pub fn init_all_devices(devices: &[usize], config: CommConfig) -> Result<Vec<Communicator>> {
        Communicator::init_threads(devices.len(), config, Some(devices.to_vec()))
    }

    fn init_threads(
        nranks: usize,
        config: CommConfig,
        devices: Option<Vec<usize>>,
    ) -> Result<Vec<Communicator>> {
        if nranks == 0 {
            return Err(Error::invalid_arg("nranks must be at least 1"));
        }
        if devices.is_some() {
            crate::device::cuda::probe()?;
        }
        let (knobs, timeout) = config.resolve()?;
        let id = UniqueId::with_config(&knobs)?;
        let config = CommConfig {
            knobs: Some(knobs),
            timeout: Some(timeout),
            device: None,
        };
        let handles: Vec<_> = (0..nranks)
            .map(|r| {
                let (id, mut config) = (id.clone(), config.clone());
                config.device = devices.as_ref().map(|d| d[r]);
                std::thread::Builder::new()
                    .name(format!("rnccl-init-{r}"))
                    .spawn(move || Communicator::init_rank(nranks, &id, r, config))
                    .map_err(|e| Error::system("starting a rank's init thread", e))
            })
            .collect::<Result<_>>()?;
        let mut comms = Vec::with_capacity(nranks);
        let mut first_err = None;
        for h in handles {
            match h.join() {
                Ok(Ok(c)) => comms.push(c),
                Ok(Err(e)) => {
                    first_err.get_or_insert(e);
                }
                Err(_) => {
                    first_err
                        .get_or_insert(Error::Internal("a rank's init thread panicked".into()));
                }
            }
        }
        match first_err {
            Some(e) => Err(e),
            None => Ok(comms),
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn assemble(
        net: Arc<BootstrapNet>,
        tag: u64,
        rank: usize,
        net_rank: Vec<usize>,
        lay: layout::Layout,
        knobs: Arc<Config>,
        params: TransportParams,
        timeout: Duration,
        device: Option<usize>,
    ) -> Result<Communicator> {
        let nranks = net_rank.len();
        let algo = match &lay.algo {
            Some(raw) => Some(AlgoProtoList::parse(raw, &ALGORITHMS).map_err(|e| {
                Error::invalid_usage(format!("NCCL_ALGO={raw:?} (rank 0's value): {e}"))
            })?),
            None => None,
        };
        let proto = match &lay.proto {
            Some(raw) => Some(AlgoProtoList::parse(raw, &PROTOCOLS).map_err(|e| {
                Error::invalid_usage(format!("NCCL_PROTO={raw:?} (rank 0's value): {e}"))
            })?),
            None => None,
        };
        let me = &net.peers()[net_rank[rank]];
        let local = net_rank
            .iter()
            .filter(|&&r| net.peers()[r].host_hash == me.host_hash)
            .count();
        let cores = spin_cores();
        let rings = Rings::new(lay.rings, nranks)
            .map_err(|e| Error::Remote(format!("rank 0's channel layout: {e}")))?;
        let over_sockets = net_rank
            .iter()
            .any(|&r| params.select(me, &net.peers()[r]) == crate::transport::TransportKind::Tcp);
        if over_sockets {
            tracing::info!(
                target: "rnccl::init",
                "NET/Socket: {}; {}; {} channels, one connection per channel and direction to \
                 each ring neighbour on another host",
                params.sockets_why,
                params.congestion.why,
                rings.nchannels()
            );
        }
        let slot_bytes = slot_size::check_slot_bytes(lay.slot_bytes)
            .map_err(|e| Error::Remote(format!("rank 0's channel layout: {e}")))?;
        tracing::info!(
            target: "rnccl::init",
            "comm rank {rank} nRanks {nranks} localRanks {local} nChannels {} slot {slot_bytes} B rings from {}",
            rings.nchannels(),
            lay.source
        );
        let listener = DataListener::bind(me.bootstrap.ip(), net.magic())?;
        let geo = Geometry { slot_bytes };
        let tuning = plans::cpu_model(&net, &net_rank, rings.nchannels(), geo, algo);
        let core = Core {
            listener: Arc::new(listener),
            net,
            tag,
            rank,
            nranks,
            net_rank,
            rings,
            geo,
            params,
            algo_knob: lay.algo,
            proto,
            tuning,
            timeout,
            policy: WaitPolicy::new(local, cores, timeout),
            abort: Arc::new(AtomicBool::new(false)),
            knobs,
            stats: Arc::new(CommStats::new()),
            watch: Watch::Host,
        };
        Communicator::with_engine(core, device)
    }

    /// A communicator over `core` with its engine: on GPU `device` (connecting to its peers'
    /// GPUs; every rank does so at the same time, during init or split), or on host memory.
    ///
    /// Errors: as [`GpuEngine::new`].
    pub(super) fn with_engine(mut core: Core, device: Option<usize>) -> Result<Communicator> {
        let engine = match device {
            Some(ordinal) => {
                let (engine, watch) = GpuEngine::new(&core, ordinal)?;
                core.watch = watch;
                Engine::Gpu(Box::new(engine))
            }
            None => Engine::Host(Box::default()),
        };
        Ok(Communicator::new(core, engine))
    }

    /// A communicator over `core`, published on the process's counter page.
    fn new(core: Core, engine: Engine) -> Communicator {
        let core = Arc::new(core);
        let published: Arc<dyn crate::stats::page::Published> = core.clone();
        let page = crate::stats::page::register(&core.knobs, Arc::downgrade(&published));
        Communicator {
            core,
            state: RefCell::new(State::new(engine)),
            splits: std::cell::Cell::new(0),
            revoked: std::cell::Cell::new(false),
            grow_id: RefCell::new(None),
            device_windows: std::cell::Cell::new(0),
            _page: page,
        }
    }
}

/// The PCI bus id of CUDA device `ordinal` (as this process numbers devices), if the driver
/// reports it.
fn gpu_bus(ordinal: usize) -> Option<String> {
    crate::device::cuda::gpus()
        .ok()?
        .into_iter()
        .find(|g| g.ordinal == ordinal)
        .map(|g| g.bus_id)
}
