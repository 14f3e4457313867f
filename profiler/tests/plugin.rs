//! The plugin as NCCL loads it: the built `libnccl_profiler_rnccl.so` opened with dlopen, its
//! `ncclProfiler_v5` table looked up and driven with the events NCCL 2.28 reports for a
//! collective on two channels; the process's counter page must show the rank, the operation
//! in flight and each channel's bytes, and go when the communicator is finalized.

use std::ffi::{CString, c_int, c_void};
use std::path::{Path, PathBuf};
use std::ptr::{null, null_mut};
use std::time::{Duration, Instant};

use nccl_profiler_rnccl::ProfilerV5;
use nccl_profiler_rnccl::abi::{
    ApiDescr, CollDescr, DescrUnion, EventDescr, KernelChDescr, NCCL_INVALID_ARGUMENT,
    NCCL_SUCCESS, event,
};
use rnccl::stats::page::{CommPage, PAGE_DIR, discover};
use rnccl::stats::{Direction, Path as LinkPath};

/// The shared library cargo built beside this test.
fn library() -> PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    let deps = exe.parent().expect("deps dir");
    [deps, deps.parent().unwrap_or(deps)]
        .iter()
        .map(|d| d.join("libnccl_profiler_rnccl.so"))
        .find(|p| p.exists())
        .expect("libnccl_profiler_rnccl.so is built with the package's tests")
}

/// The plugin's table, as NCCL finds it.
fn load() -> &'static ProfilerV5 {
    let path = CString::new(library().to_str().unwrap()).unwrap();
    // SAFETY: opens a library built from this workspace; it stays loaded for the process.
    let lib = unsafe { libc::dlopen(path.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
    assert!(!lib.is_null(), "dlopen {}", library().display());
    // SAFETY: looks up a symbol of the open library.
    let sym = unsafe { libc::dlsym(lib, c"ncclProfiler_v5".as_ptr()) };
    assert!(!sym.is_null(), "the library exports ncclProfiler_v5");
    // SAFETY: the symbol is a static ProfilerV5 of a library never closed.
    unsafe { &*sym.cast::<ProfilerV5>() }
}

/// This process's record of communicator `comm_id` once `ok` holds for it (5 s at most).
fn wait_for(comm_id: u64, ok: impl Fn(&CommPage) -> bool) -> CommPage {
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut last = None;
    while Instant::now() < deadline {
        let found = discover(Path::new(PAGE_DIR), false).unwrap_or_default();
        last = found
            .into_iter()
            .filter(|f| f.pid == std::process::id())
            .filter_map(|f| f.page.ok())
            .flat_map(|p| p.comms)
            .find(|c| c.comm_id == comm_id);
        if let Some(c) = last.as_ref().filter(|c| ok(c)) {
            return c.clone();
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("the page never showed what was expected; last seen: {last:?}");
}

fn descr(kind: u64, parent: *mut c_void, u: DescrUnion) -> EventDescr {
    EventDescr {
        kind,
        parent_obj: parent,
        rank: 0,
        u,
    }
}

#[test]
fn an_nccl_collective_shows_on_the_counter_page() {
    let p = load();
    let comm_id = 0x5eed_0000_0000_0000 | u64::from(std::process::id());
    let (mut ctx, mut mask): (*mut c_void, c_int) = (null_mut(), 0);
    // SAFETY: the table's functions with the arguments NCCL passes (no logger).
    unsafe {
        assert_eq!(
            (p.init)(
                &mut ctx,
                comm_id,
                &mut mask,
                c"test".as_ptr(),
                1,
                2,
                0,
                None
            ),
            NCCL_SUCCESS
        );
    }
    assert!(mask as u64 & event::KERNEL_CH != 0 && mask as u64 & event::COLL != 0);
    let page = wait_for(comm_id, |_| true);
    assert_eq!((page.rank, page.nranks, page.ops_completed), (0, 2, 0));

    // An all-reduce of 1 MiB float32 on two channels, as NCCL reports it.
    let coll = CollDescr {
        seq_number: 0,
        func: c"AllReduce".as_ptr(),
        send_buff: null(),
        recv_buff: null_mut(),
        count: 1 << 18,
        root: 0,
        datatype: c"ncclFloat32".as_ptr(),
        n_channels: 2,
        n_warps: 16,
        algo: c"RING".as_ptr(),
        proto: c"SIMPLE".as_ptr(),
        parent_group: null_mut(),
    };
    let mut task = null_mut();
    let mut d = descr(event::COLL, null_mut(), DescrUnion { coll });
    // SAFETY: as NCCL calls it: a live context, a writable handle, a filled descriptor.
    unsafe { assert_eq!((p.start_event)(ctx, &mut task, &mut d), NCCL_SUCCESS) };
    assert!(!task.is_null());
    let mut chans = [null_mut(); 2];
    for (c, h) in chans.iter_mut().enumerate() {
        let kernel_ch = KernelChDescr {
            channel_id: c as u8,
            p_timer: 1,
        };
        let mut d = descr(event::KERNEL_CH, task, DescrUnion { kernel_ch });
        // SAFETY: as above, the collective's handle as parent.
        unsafe { assert_eq!((p.start_event)(ctx, h, &mut d), NCCL_SUCCESS) };
        assert!(!h.is_null());
    }
    // NCCL stops the collective's event once it is enqueued, before its channels end.
    // SAFETY: handles this plugin returned, for a live context.
    unsafe {
        assert_eq!((p.stop_event)(task), NCCL_SUCCESS);
        assert_eq!((p.stop_event)(chans[0]), NCCL_SUCCESS);
    }
    let page = wait_for(comm_id, |c| c.links.len() == 2);
    let op = page
        .op
        .expect("the all-reduce is in flight until its last channel ends");
    assert_eq!(op.info.func, rnccl::Func::AllReduce);
    assert_eq!(
        (op.info.count, op.info.nchannels, op.info.algo),
        (1 << 18, 2, "Ring")
    );
    for l in &page.links {
        assert_eq!(
            (l.channel, l.peer, l.transport),
            (0, 1, LinkPath::NcclKernel),
            "{l:?}"
        );
        assert_eq!(
            l.bytes,
            1 << 19,
            "half of 2(n-1)/n × 1 MiB per direction: {l:?}"
        );
    }
    assert!(page.links.iter().any(|l| l.direction == Direction::Send));
    // SAFETY: as above.
    unsafe { assert_eq!((p.stop_event)(chans[1]), NCCL_SUCCESS) };
    let page = wait_for(comm_id, |c| c.ops_completed == 1);
    assert!(page.op.is_none());
    assert_eq!(page.links.iter().map(|l| l.bytes).sum::<u64>(), 2 << 20);

    // Events the plugin does not follow get a null handle; null handles are accepted.
    let mut h = null_mut();
    let api = ApiDescr {
        func: null(),
        count: 0,
        datatype: null(),
        rest: [0; 3],
    };
    let mut d = descr(1 << 9, null_mut(), DescrUnion { api });
    // SAFETY: as above; the descriptor of an API event.
    unsafe {
        assert_eq!((p.start_event)(ctx, &mut h, &mut d), NCCL_SUCCESS);
        assert!(h.is_null());
        assert_eq!((p.stop_event)(null_mut()), NCCL_SUCCESS);
        assert_eq!(
            (p.record_event_state)(null_mut(), 22, null_mut()),
            NCCL_SUCCESS
        );
        assert_eq!(
            (p.start_event)(ctx, &mut h, null_mut()),
            NCCL_INVALID_ARGUMENT
        );
    }

    // The last communicator's end removes the page.
    // SAFETY: the context from init, finalized once.
    unsafe { assert_eq!((p.finalize)(ctx), NCCL_SUCCESS) };
    let page = Path::new(PAGE_DIR).join(format!("rnccl-stats-{}", std::process::id()));
    assert!(!page.exists(), "{} is left behind", page.display());
}
