//! libibverbs loaded at run time: `dlopen` of `NCCL_IBVERBS_LIB`, else `libibverbs.so`, else
//! `libibverbs.so.1`, and every function looked up with `dlvsym` at version `IBVERBS_1.1` (NCCL
//! src/misc/ibvsymbols.cc `buildIbvSymbols`); `ibv_reg_dmabuf_mr` at `IBVERBS_1.12` when
//! present. The data-path verbs (`ibv_post_send`, `ibv_post_recv`, `ibv_poll_cq`) are inline
//! functions in verbs.h that call through the context's ops table, so they are called the same
//! way here (NCCL src/misc/ibvwrap.cc does too). Nothing links against libibverbs: a host
//! without rdma-core gets [`VerbsError::NotLoaded`] from [`DlVerbs::load`] and nothing else
//! changes.

mod abi;
mod qp;

use std::any::Any;
use std::collections::HashMap;
use std::ffi::{CStr, CString, c_char, c_int, c_void};
use std::sync::{Arc, Mutex, OnceLock};

use abi::*;

use super::{
    Completion, Cq, Device, DeviceAttr, Mr, Pd, PortAttr, Qp, QpCaps, Verbs, VerbsError, WcOpcode,
    WcStatus,
};
use crate::ib::gid::{Gid, GidType};
use crate::topo::detect::sysfs::Root;

type GetDeviceList = unsafe extern "C" fn(*mut c_int) -> *mut *mut c_void;
type FreeDeviceList = unsafe extern "C" fn(*mut *mut c_void);
type GetDeviceName = unsafe extern "C" fn(*mut c_void) -> *const c_char;
type OpenDevice = unsafe extern "C" fn(*mut c_void) -> *mut IbvContext;
type CloseDevice = unsafe extern "C" fn(*mut IbvContext) -> c_int;
type QueryDevice = unsafe extern "C" fn(*mut IbvContext, *mut IbvDeviceAttr) -> c_int;
type QueryPort = unsafe extern "C" fn(*mut IbvContext, u8, *mut IbvPortAttr) -> c_int;
type QueryGid = unsafe extern "C" fn(*mut IbvContext, u8, c_int, *mut IbvGid) -> c_int;
type AllocPd = unsafe extern "C" fn(*mut IbvContext) -> *mut c_void;
type DeallocPd = unsafe extern "C" fn(*mut c_void) -> c_int;
type RegMr = unsafe extern "C" fn(*mut c_void, *mut c_void, usize, c_int) -> *mut IbvMr;
type DeregMr = unsafe extern "C" fn(*mut IbvMr) -> c_int;
type CreateCq =
    unsafe extern "C" fn(*mut IbvContext, c_int, *mut c_void, *mut c_void, c_int) -> *mut IbvCq;
type DestroyCq = unsafe extern "C" fn(*mut IbvCq) -> c_int;
type CreateQp = unsafe extern "C" fn(*mut c_void, *mut IbvQpInitAttr) -> *mut IbvQp;
type ModifyQp = unsafe extern "C" fn(*mut IbvQp, *mut IbvQpAttr, c_int) -> c_int;
type DestroyQp = unsafe extern "C" fn(*mut IbvQp) -> c_int;

/// The functions rnccl calls.
struct Fns {
    get_device_list: GetDeviceList,
    free_device_list: FreeDeviceList,
    get_device_name: GetDeviceName,
    open_device: OpenDevice,
    close_device: CloseDevice,
    query_device: QueryDevice,
    query_port: QueryPort,
    query_gid: QueryGid,
    alloc_pd: AllocPd,
    dealloc_pd: DeallocPd,
    reg_mr: RegMr,
    dereg_mr: DeregMr,
    create_cq: CreateCq,
    destroy_cq: DestroyCq,
    create_qp: CreateQp,
    modify_qp: ModifyQp,
    destroy_qp: DestroyQp,
    has_dmabuf: bool,
}

/// libibverbs, loaded.
pub(crate) struct DlVerbs {
    lib: String,
    fns: Arc<Fns>,
}

fn errno() -> i32 {
    std::io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO)
}

fn dlerror() -> String {
    // SAFETY: dlerror returns NULL or a NUL-terminated string owned by the loader, valid until
    // the next dl* call on this thread; it is copied at once.
    unsafe {
        let e = libc::dlerror();
        if e.is_null() {
            "unknown error".into()
        } else {
            CStr::from_ptr(e).to_string_lossy().into_owned()
        }
    }
}

impl DlVerbs {
    /// Loads libibverbs (`lib`, else `libibverbs.so`, else `libibverbs.so.1`), once per name
    /// per process; the library stays loaded.
    ///
    /// Errors: [`VerbsError::NotLoaded`] when no name loads, [`VerbsError::MissingSymbol`] when
    /// the library lacks a function.
    pub(crate) fn load(lib: Option<&str>) -> Result<Arc<DlVerbs>, VerbsError> {
        type Cache = Mutex<HashMap<Option<String>, Result<Arc<DlVerbs>, VerbsError>>>;
        static LOADED: OnceLock<Cache> = OnceLock::new();
        let mut cache = LOADED
            .get_or_init(Default::default)
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        cache
            .entry(lib.map(str::to_string))
            .or_insert_with(|| DlVerbs::open_first(lib).map(Arc::new))
            .clone()
    }

    fn open_first(lib: Option<&str>) -> Result<DlVerbs, VerbsError> {
        let names: Vec<&str> = lib
            .into_iter()
            .chain(["libibverbs.so", "libibverbs.so.1"])
            .collect();
        let mut why = String::new();
        for name in &names {
            match DlVerbs::open_one(name) {
                Ok(v) => return Ok(v),
                Err(VerbsError::NotLoaded { why: w, .. }) => why = w,
                Err(e) => return Err(e),
            }
        }
        Err(VerbsError::NotLoaded {
            tried: names.join(", "),
            why,
        })
    }

    /// Loads the library `name` and binds its functions.
    ///
    /// Errors: [`VerbsError::NotLoaded`] or [`VerbsError::MissingSymbol`].
    fn open_one(name: &str) -> Result<DlVerbs, VerbsError> {
        let not_loaded = |why: String| VerbsError::NotLoaded {
            tried: name.to_string(),
            why,
        };
        let c = CString::new(name).map_err(|_| not_loaded("a NUL in the name".into()))?;
        // SAFETY: dlopen with a valid C string; loading runs the library's constructors, which
        // is what using libibverbs requires.
        let h = unsafe { libc::dlopen(c.as_ptr(), libc::RTLD_NOW) };
        if h.is_null() {
            return Err(not_loaded(dlerror()));
        }
        let bound = DlVerbs::bind(name, h);
        if bound.is_err() {
            // SAFETY: h came from dlopen above and nothing of it is kept.
            unsafe { libc::dlclose(h) };
        }
        bound
    }

    fn bind(lib: &str, h: *mut c_void) -> Result<DlVerbs, VerbsError> {
        let sym = |name: &'static str, version: &str| -> Option<*mut c_void> {
            let (n, v) = (CString::new(name).ok()?, CString::new(version).ok()?);
            // SAFETY: h is a live handle from dlopen; names are valid C strings.
            let p = unsafe { libc::dlvsym(h, n.as_ptr(), v.as_ptr()) };
            (!p.is_null()).then_some(p)
        };
        let need = |name: &'static str| {
            sym(name, "IBVERBS_1.1").ok_or(VerbsError::MissingSymbol {
                lib: lib.to_string(),
                symbol: name,
            })
        };
        macro_rules! f {
            ($name:literal, $ty:ty) => {
                // SAFETY: the symbol is libibverbs' function of that name at IBVERBS_1.1, whose C
                // signature the target type spells out (verbs.h).
                unsafe { std::mem::transmute::<*mut c_void, $ty>(need($name)?) }
            };
        }
        Ok(DlVerbs {
            lib: lib.to_string(),
            fns: Arc::new(Fns {
                get_device_list: f!("ibv_get_device_list", GetDeviceList),
                free_device_list: f!("ibv_free_device_list", FreeDeviceList),
                get_device_name: f!("ibv_get_device_name", GetDeviceName),
                open_device: f!("ibv_open_device", OpenDevice),
                close_device: f!("ibv_close_device", CloseDevice),
                query_device: f!("ibv_query_device", QueryDevice),
                query_port: f!("ibv_query_port", QueryPort),
                query_gid: f!("ibv_query_gid", QueryGid),
                alloc_pd: f!("ibv_alloc_pd", AllocPd),
                dealloc_pd: f!("ibv_dealloc_pd", DeallocPd),
                reg_mr: f!("ibv_reg_mr", RegMr),
                dereg_mr: f!("ibv_dereg_mr", DeregMr),
                create_cq: f!("ibv_create_cq", CreateCq),
                destroy_cq: f!("ibv_destroy_cq", DestroyCq),
                create_qp: f!("ibv_create_qp", CreateQp),
                modify_qp: f!("ibv_modify_qp", ModifyQp),
                destroy_qp: f!("ibv_destroy_qp", DestroyQp),
                has_dmabuf: sym("ibv_reg_dmabuf_mr", "IBVERBS_1.12").is_some(),
            }),
        })
    }

    /// Runs `f` over the device list (names and `struct ibv_device*`), then frees the list.
    /// No list (no kernel support, `ENOSYS`; no device, `ENODEV`) is an empty one.
    fn with_list<T>(&self, f: impl FnOnce(&[(String, *mut c_void)]) -> T) -> Result<T, VerbsError> {
        let mut n: c_int = 0;
        // SAFETY: ibv_get_device_list writes the count into n and returns NULL or an array of n
        // device pointers, valid until the list is freed below.
        let list = unsafe { (self.fns.get_device_list)(&mut n) };
        if list.is_null() {
            let e = errno();
            return if matches!(e, libc::ENOSYS | libc::ENODEV | libc::ENOENT | 0) {
                Ok(f(&[]))
            } else {
                Err(VerbsError::call("ibv_get_device_list", "this host", e))
            };
        }
        let devs: Vec<(String, *mut c_void)> = (0..n.max(0) as usize)
            .map(|i| {
                // SAFETY: i < n, so list[i] is a device pointer; its name is a NUL-terminated
                // string owned by the device.
                unsafe {
                    let dev = *list.add(i);
                    let name = CStr::from_ptr((self.fns.get_device_name)(dev))
                        .to_string_lossy()
                        .into_owned();
                    (name, dev)
                }
            })
            .collect();
        let out = f(&devs);
        // SAFETY: list came from ibv_get_device_list and is freed once; an opened context keeps
        // its device.
        unsafe { (self.fns.free_device_list)(list) };
        Ok(out)
    }
}

impl Verbs for DlVerbs {
    fn describe(&self) -> String {
        self.lib.clone()
    }

    fn device_names(&self) -> Result<Vec<String>, VerbsError> {
        self.with_list(|l| l.iter().map(|(n, _)| n.clone()).collect())
    }

    fn open(&self, name: &str) -> Result<Arc<dyn Device>, VerbsError> {
        let opened = self.with_list(|l| {
            let (_, dev) = l.iter().find(|(n, _)| n == name)?;
            // SAFETY: dev is a live device of the list.
            let ctx = unsafe { (self.fns.open_device)(*dev) };
            Some(if ctx.is_null() { Err(errno()) } else { Ok(ctx) })
        })?;
        match opened {
            None => Err(VerbsError::NoDevice(name.to_string())),
            Some(Err(e)) => Err(VerbsError::call("ibv_open_device", name, e)),
            Some(Ok(ctx)) => Ok(Arc::new(DlDevice {
                fns: self.fns.clone(),
                name: name.to_string(),
                ctx,
            })),
        }
    }

    fn dmabuf(&self) -> bool {
        self.fns.has_dmabuf
    }
}

/// An opened device (`struct ibv_context`).
struct DlDevice {
    fns: Arc<Fns>,
    name: String,
    ctx: *mut IbvContext,
}

// SAFETY: libibverbs contexts and the objects made from them may be used from any thread
// (rdma-core documents every verb as thread safe); rnccl never frees them while in use, as each
// object holds Arcs of what it was made from.
unsafe impl Send for DlDevice {}
// SAFETY: as above.
unsafe impl Sync for DlDevice {}

impl Drop for DlDevice {
    fn drop(&mut self) {
        // SAFETY: ctx came from ibv_open_device; every PD and CQ made from it holds an Arc of
        // this device, so none is left.
        unsafe { (self.fns.close_device)(self.ctx) };
    }
}

impl Device for DlDevice {
    fn name(&self) -> &str {
        &self.name
    }

    fn query_device(&self) -> Result<DeviceAttr, VerbsError> {
        // SAFETY: zeroed is a valid bit pattern for this plain-data struct.
        let mut a: IbvDeviceAttr = unsafe { std::mem::zeroed() };
        // SAFETY: ctx is open; a is a properly sized struct ibv_device_attr.
        let rc = unsafe { (self.fns.query_device)(self.ctx, &mut a) };
        if rc != 0 {
            return Err(VerbsError::call("ibv_query_device", &self.name, rc.abs()));
        }
        // SAFETY: fw_ver is NUL-terminated within its 64 bytes (zeroed first).
        let fw = unsafe { CStr::from_ptr(a.fw_ver.as_ptr()) }
            .to_string_lossy()
            .into_owned();
        Ok(DeviceAttr {
            fw_ver: fw,
            node_guid: u64::from_be(a.node_guid),
            sys_image_guid: u64::from_be(a.sys_image_guid),
            vendor_id: a.vendor_id,
            vendor_part_id: a.vendor_part_id,
            max_qp: a.max_qp,
            max_cqe: a.max_cqe,
            max_mr_size: a.max_mr_size,
            phys_port_cnt: a.phys_port_cnt,
        })
    }

    fn query_port(&self, port: u8) -> Result<PortAttr, VerbsError> {
        let mut a = IbvPortAttr::default();
        // SAFETY: ctx is open; a is the full struct ibv_port_attr providers fill.
        let rc = unsafe { (self.fns.query_port)(self.ctx, port, &mut a) };
        if rc != 0 {
            return Err(VerbsError::call("ibv_query_port", &self.name, rc.abs()));
        }
        Ok(PortAttr {
            state: a.state as u8,
            max_mtu: a.max_mtu as u8,
            active_mtu: a.active_mtu as u8,
            gid_tbl_len: a.gid_tbl_len,
            lid: a.lid,
            sm_lid: a.sm_lid,
            active_width: a.active_width,
            active_speed: a.active_speed,
            phys_state: a.phys_state,
            link_layer: a.link_layer,
        })
    }

    fn query_gid(&self, port: u8, index: usize) -> Result<Gid, VerbsError> {
        let mut g = IbvGid::default();
        // SAFETY: ctx is open; g is a 16-byte union ibv_gid.
        let rc = unsafe { (self.fns.query_gid)(self.ctx, port, index as c_int, &mut g) };
        if rc != 0 {
            return Err(VerbsError::call("ibv_query_gid", &self.name, errno()));
        }
        Ok(Gid(g.raw))
    }

    fn gid_type(&self, port: u8, index: usize) -> Option<GidType> {
        Root::new(std::path::Path::new("/"))
            .read(&format!(
                "/sys/class/infiniband/{}/ports/{port}/gid_attrs/types/{index}",
                self.name
            ))
            .and_then(|t| GidType::parse(&t))
    }

    fn alloc_pd(self: Arc<Self>) -> Result<Arc<dyn Pd>, VerbsError> {
        // SAFETY: ctx is open.
        let pd = unsafe { (self.fns.alloc_pd)(self.ctx) };
        if pd.is_null() {
            return Err(VerbsError::call("ibv_alloc_pd", &self.name, errno()));
        }
        Ok(Arc::new(DlPd(Arc::new(PdInner { dev: self, pd }))))
    }
}

/// A protection domain; its regions and queue pairs hold the inner part alive.
struct DlPd(Arc<PdInner>);

struct PdInner {
    dev: Arc<DlDevice>,
    pd: *mut c_void,
}

// SAFETY: see DlDevice.
unsafe impl Send for PdInner {}
// SAFETY: see DlDevice.
unsafe impl Sync for PdInner {}

impl Drop for PdInner {
    fn drop(&mut self) {
        // SAFETY: pd came from ibv_alloc_pd; its MRs and QPs hold Arcs of it, so none is left.
        unsafe { (self.dev.fns.dealloc_pd)(self.pd) };
    }
}

impl Pd for DlPd {
    unsafe fn reg_mr(&self, addr: *mut u8, len: usize) -> Result<Box<dyn Mr>, VerbsError> {
        let p = &self.0;
        // SAFETY: the caller keeps [addr, addr+len) valid while the region lives (trait
        // contract); pd is live.
        let mr = unsafe { (p.dev.fns.reg_mr)(p.pd, addr.cast(), len, ACCESS_RW) };
        if mr.is_null() {
            return Err(VerbsError::call("ibv_reg_mr", &p.dev.name, errno()));
        }
        Ok(Box::new(DlMr { pd: p.clone(), mr }))
    }

    fn create_cq(&self, depth: usize) -> Result<Arc<dyn Cq>, VerbsError> {
        let dev = &self.0.dev;
        let depth = depth.min(c_int::MAX as usize) as c_int;
        // SAFETY: ctx is live; no completion channel, vector 0.
        let cq = unsafe {
            (dev.fns.create_cq)(
                dev.ctx,
                depth,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                0,
            )
        };
        if cq.is_null() {
            return Err(VerbsError::call("ibv_create_cq", &dev.name, errno()));
        }
        Ok(Arc::new(DlCq {
            dev: dev.clone(),
            cq,
        }))
    }

    fn create_qp(&self, cq: &Arc<dyn Cq>, caps: QpCaps) -> Result<Box<dyn Qp>, VerbsError> {
        let p = &self.0;
        let raw_cq = cq
            .as_any()
            .downcast_ref::<DlCq>()
            .map(|c| c.cq)
            .ok_or_else(|| VerbsError::call("ibv_create_qp", &p.dev.name, libc::EINVAL))?;
        let mut init = IbvQpInitAttr {
            qp_context: std::ptr::null_mut(),
            send_cq: raw_cq,
            recv_cq: raw_cq,
            srq: std::ptr::null_mut(),
            cap: IbvQpCap {
                max_send_wr: caps.max_send_wr,
                max_recv_wr: caps.max_recv_wr,
                max_send_sge: 1,
                max_recv_sge: 1,
                max_inline_data: 0,
            },
            qp_type: QPT_RC,
            sq_sig_all: 0,
        };
        // SAFETY: pd and cq are live; init is a valid struct ibv_qp_init_attr.
        let qp = unsafe { (p.dev.fns.create_qp)(p.pd, &mut init) };
        if qp.is_null() {
            return Err(VerbsError::call("ibv_create_qp", &p.dev.name, errno()));
        }
        Ok(Box::new(qp::DlQp {
            qp,
            pd: p.clone(),
            _cq: cq.clone(),
        }))
    }
}

/// A memory region.
struct DlMr {
    pd: Arc<PdInner>,
    mr: *mut IbvMr,
}

// SAFETY: see DlDevice.
unsafe impl Send for DlMr {}
// SAFETY: see DlDevice.
unsafe impl Sync for DlMr {}

impl Drop for DlMr {
    fn drop(&mut self) {
        // SAFETY: mr came from ibv_reg_mr and is deregistered once, before its PD (held here).
        unsafe { (self.pd.dev.fns.dereg_mr)(self.mr) };
    }
}

impl Mr for DlMr {
    fn lkey(&self) -> u32 {
        // SAFETY: mr is live.
        unsafe { (*self.mr).lkey }
    }
    fn rkey(&self) -> u32 {
        // SAFETY: mr is live.
        unsafe { (*self.mr).rkey }
    }
    fn addr(&self) -> u64 {
        // SAFETY: mr is live.
        unsafe { (*self.mr).addr as u64 }
    }
}

/// A completion queue.
struct DlCq {
    dev: Arc<DlDevice>,
    cq: *mut IbvCq,
}

// SAFETY: see DlDevice.
unsafe impl Send for DlCq {}
// SAFETY: see DlDevice.
unsafe impl Sync for DlCq {}

impl Drop for DlCq {
    fn drop(&mut self) {
        // SAFETY: cq came from ibv_create_cq; QPs using it hold an Arc of it, so none is left.
        unsafe { (self.dev.fns.destroy_cq)(self.cq) };
    }
}

impl Cq for DlCq {
    fn poll(&self, out: &mut Vec<Completion>, max: usize) -> Result<usize, VerbsError> {
        let mut wc = [IbvWc::default(); 16];
        let want = max.min(wc.len()) as c_int;
        if want == 0 {
            return Ok(0);
        }
        // SAFETY: cq is live; its context's ops table is libibverbs' (poll_cq at the ABI's
        // position); wc holds `want` entries.
        let n = unsafe {
            let ctx = (*self.cq).context;
            ((*ctx).ops.poll_cq)(self.cq, want, wc.as_mut_ptr())
        };
        if n < 0 {
            return Err(VerbsError::call("ibv_poll_cq", &self.dev.name, libc::EIO));
        }
        for w in &wc[..n as usize] {
            out.push(Completion {
                wr_id: w.wr_id,
                status: WcStatus::from_raw(w.status),
                opcode: match w.opcode {
                    WC_RDMA_WRITE => WcOpcode::RdmaWrite,
                    WC_RECV_RDMA_WITH_IMM => WcOpcode::RecvWithImm,
                    o => WcOpcode::Other(o),
                },
                byte_len: w.byte_len,
                imm: (w.wc_flags & WC_WITH_IMM != 0).then(|| u32::from_be(w.imm_data)),
                qpn: w.qp_num,
            });
        }
        Ok(n as usize)
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_or_foreign_library_is_a_clear_error() {
        match DlVerbs::load(Some("/nonexistent/libibverbs.so.1")) {
            // Present on this host: the real library was found after the bad name.
            Ok(v) => assert!(v.describe().starts_with("libibverbs")),
            Err(e) => assert!(
                e.to_string().contains("/nonexistent/libibverbs.so.1"),
                "{e}"
            ),
        }
        // libc is loadable but is not libibverbs.
        let e = DlVerbs::open_one("libc.so.6").err().unwrap();
        assert!(e.to_string().contains("lacks ibv_get_device_list"), "{e}");
    }
}
