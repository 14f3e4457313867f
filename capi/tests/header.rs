//! `include/nccl.h` against the Rust definitions and the built library: every enum value,
//! constant, struct size and field offset the header states is checked by the C compiler
//! against the Rust side's values, and the functions it declares are exactly the library's
//! exported `nccl*`/`pnccl*` functions, which include everything PyTorch 2.11 and nccl-tests 2.19
//! call.

mod common;

use std::collections::BTreeSet;
use std::fmt::Write;
use std::mem::{offset_of, size_of};
use std::process::Command;

use nccl::types::*;

/// The `nccl*` symbols `libtorch_cuda.so` 2.11 imports (all required: loaded with RTLD_NOW).
const PYTORCH: [&str; 38] = [
    "ncclAllGather",
    "ncclAllReduce",
    "ncclAlltoAll",
    "ncclBcast",
    "ncclBroadcast",
    "ncclCommAbort",
    "ncclCommCount",
    "ncclCommDeregister",
    "ncclCommDestroy",
    "ncclCommFinalize",
    "ncclCommGetAsyncError",
    "ncclCommInitAll",
    "ncclCommInitRank",
    "ncclCommInitRankConfig",
    "ncclCommInitRankScalable",
    "ncclCommRegister",
    "ncclCommShrink",
    "ncclCommSplit",
    "ncclCommUserRank",
    "ncclCommWindowDeregister",
    "ncclCommWindowRegister",
    "ncclDevCommCreate",
    "ncclDevCommDestroy",
    "ncclGetErrorString",
    "ncclGetLastError",
    "ncclGetUniqueId",
    "ncclGetVersion",
    "ncclGroupEnd",
    "ncclGroupSimulateEnd",
    "ncclGroupStart",
    "ncclMemAlloc",
    "ncclMemFree",
    "ncclRecv",
    "ncclRedOpCreatePreMulSum",
    "ncclRedOpDestroy",
    "ncclReduce",
    "ncclReduceScatter",
    "ncclSend",
];

/// What nccl-tests 2.19 calls (`src/*.cu`, built against 2.28 headers), plus
/// `ncclCommCuDevice`.
const NCCL_TESTS: [&str; 12] = [
    "ncclGather",
    "ncclScatter",
    "ncclCommCuDevice",
    "ncclCommInitRankConfig",
    "ncclCommAbort",
    "ncclCommGetAsyncError",
    "ncclMemAlloc",
    "ncclMemFree",
    "ncclCommRegister",
    "ncclCommDeregister",
    "ncclRedOpCreatePreMulSum",
    "ncclRedOpDestroy",
];

/// The functions `nccl.h` declares.
fn declared() -> BTreeSet<String> {
    let h = std::fs::read_to_string(common::include_dir().join("nccl.h")).unwrap();
    h.lines()
        .filter_map(|l| {
            let rest = l
                .strip_prefix("ncclResult_t ")
                .or_else(|| l.strip_prefix("const char* "))
                .or_else(|| l.strip_prefix("void "))?;
            let name = rest.trim_start().split('(').next()?.trim();
            (name.starts_with("nccl") || name.starts_with("pnccl")).then(|| name.to_string())
        })
        .collect()
}

#[test]
fn header_declares_exactly_the_exported_functions() {
    let lib = common::library();
    let exported: BTreeSet<String> = common::exported_functions(&lib)
        .into_iter()
        .filter(|n| n.starts_with("nccl") || n.starts_with("pnccl"))
        .collect();
    let declared = declared();
    assert_eq!(
        declared,
        exported,
        "nccl.h and {} disagree: only in the header {:?}, only in the library {:?}",
        lib.display(),
        declared.difference(&exported).collect::<Vec<_>>(),
        exported.difference(&declared).collect::<Vec<_>>()
    );
    let missing: Vec<_> = PYTORCH
        .iter()
        .chain(NCCL_TESTS.iter())
        .filter(|n| !exported.contains(**n))
        .collect();
    assert!(missing.is_empty(), "not exported: {missing:?}");
    // Every function has NCCL's profiling alias, and every alias a function.
    for n in &exported {
        let twin = match n.strip_prefix('p') {
            Some(base) => base.to_string(),
            None => format!("p{n}"),
        };
        assert!(
            exported.contains(&twin),
            "{n} is exported but {twin} is not"
        );
    }
}

#[test]
fn library_soname_is_libnccl_so_2() {
    let bytes = std::fs::read(common::library()).unwrap();
    let needle = b"libnccl.so.2\0";
    assert!(
        bytes.windows(needle.len()).any(|w| w == needle),
        "the library does not carry the soname libnccl.so.2"
    );
}

#[test]
fn header_values_match_the_rust_definitions() {
    let Some(cc) = common::cc() else {
        // CI installs a C compiler (.ci/run): there a missing one is a failure, not a pass.
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "no C compiler (cc) under CI"
        );
        eprintln!("SKIPPED: no C compiler (cc) on this host, nccl.h was not compiled");
        return;
    };
    let mut c = String::from("#include <stddef.h>\n#include \"nccl.h\"\n");
    let mut check = |expr: &str, value: i128| {
        writeln!(
            c,
            "_Static_assert(({expr}) == {value}LL, \"{expr} != {value}\");"
        )
        .unwrap();
    };
    for (name, v) in [
        ("ncclSuccess", ncclSuccess),
        ("ncclUnhandledCudaError", ncclUnhandledCudaError),
        ("ncclSystemError", ncclSystemError),
        ("ncclInternalError", ncclInternalError),
        ("ncclInvalidArgument", ncclInvalidArgument),
        ("ncclInvalidUsage", ncclInvalidUsage),
        ("ncclRemoteError", ncclRemoteError),
        ("ncclInProgress", ncclInProgress),
        ("ncclTimeout", ncclTimeout),
        ("ncclNumResults", ncclNumResults),
        ("ncclInt8", ncclInt8),
        ("ncclChar", ncclChar),
        ("ncclUint8", ncclUint8),
        ("ncclInt32", ncclInt32),
        ("ncclInt", ncclInt),
        ("ncclUint32", ncclUint32),
        ("ncclInt64", ncclInt64),
        ("ncclUint64", ncclUint64),
        ("ncclFloat16", ncclFloat16),
        ("ncclHalf", ncclHalf),
        ("ncclFloat32", ncclFloat32),
        ("ncclFloat", ncclFloat),
        ("ncclFloat64", ncclFloat64),
        ("ncclDouble", ncclDouble),
        ("ncclBfloat16", ncclBfloat16),
        ("ncclFloat8e4m3", ncclFloat8e4m3),
        ("ncclFloat8e5m2", ncclFloat8e5m2),
        ("ncclNumTypes", ncclNumTypes),
        ("ncclSum", ncclSum),
        ("ncclProd", ncclProd),
        ("ncclMax", ncclMax),
        ("ncclMin", ncclMin),
        ("ncclAvg", ncclAvg),
        ("ncclNumOps", ncclNumOps),
        ("ncclMaxRedOp", ncclMaxRedOp),
        ("ncclScalarDevice", ncclScalarDevice),
        ("ncclScalarHostImmediate", ncclScalarHostImmediate),
        ("NCCL_CONFIG_UNDEF_INT", NCCL_CONFIG_UNDEF_INT),
        ("NCCL_SPLIT_NOCOLOR", NCCL_SPLIT_NOCOLOR),
        ("NCCL_SHRINK_DEFAULT", NCCL_SHRINK_DEFAULT),
        ("NCCL_SHRINK_ABORT", NCCL_SHRINK_ABORT),
        ("NCCL_REVOKE_DEFAULT", NCCL_REVOKE_DEFAULT),
        ("NCCL_SUSPEND_MEM", NCCL_SUSPEND_MEM),
        ("ncclStatGpuMemSuspend", ncclStatGpuMemSuspend),
        ("ncclStatGpuMemSuspended", ncclStatGpuMemSuspended),
        ("ncclStatGpuMemPersist", ncclStatGpuMemPersist),
        ("ncclStatGpuMemTotal", ncclStatGpuMemTotal),
        ("NCCL_MAJOR", NCCL_MAJOR),
        ("NCCL_MINOR", NCCL_MINOR),
        ("NCCL_PATCH", NCCL_PATCH),
        ("NCCL_VERSION_CODE", NCCL_VERSION_CODE),
        ("NCCL_VERSION(2, 28, 9)", nccl_version(2, 28, 9)),
        ("NCCL_VERSION(2, 30, 7)", nccl_version(2, 30, 7)),
        ("NCCL_VERSION(2, 8, 4)", nccl_version(2, 8, 4)),
    ] {
        check(name, v.into());
    }
    check("NCCL_API_MAGIC", NCCL_API_MAGIC as i128);
    check("NCCL_UNIQUE_ID_BYTES", NCCL_UNIQUE_ID_BYTES as i128);
    check("sizeof(ncclUniqueId)", size_of::<ncclUniqueId>() as i128);
    check("sizeof(ncclRedOp_t)", size_of::<ncclRedOp_t>() as i128);
    check(
        "sizeof(ncclDataType_t)",
        size_of::<ncclDataType_t>() as i128,
    );
    check("sizeof(ncclResult_t)", size_of::<ncclResult_t>() as i128);
    check("sizeof(ncclConfig_t)", size_of::<ncclConfig_t>() as i128);
    check("sizeof(ncclSimInfo_t)", size_of::<ncclSimInfo_t>() as i128);
    check(
        "sizeof(ncclWaitSignalDesc_t)",
        size_of::<ncclWaitSignalDesc_t>() as i128,
    );
    macro_rules! offsets {
        ($t:ident: $($f:ident),*) => {
            $(check(
                &format!("offsetof({}, {})", stringify!($t), stringify!($f)),
                offset_of!($t, $f) as i128,
            );)*
        };
    }
    offsets!(ncclConfig_t: size, magic, version, blocking, cgaClusterSize, minCTAs, maxCTAs,
        netName, splitShare, trafficClass, commName, collnetEnable, CTAPolicy, shrinkShare,
        nvlsCTAs, nChannelsPerNetPeer, nvlinkCentricSched, graphUsageMode, numRmaCtx,
        maxP2pPeers, graphStreamOrdering);
    offsets!(ncclSimInfo_t: size, magic, version, estimatedTime);
    offsets!(ncclWaitSignalDesc_t: opCnt, peer, sigIdx, ctx);
    // NCCL_CONFIG_INITIALIZER writes what the Rust INITIALIZER holds.
    let i = ncclConfig_t::INITIALIZER;
    c.push_str("static const ncclConfig_t init = NCCL_CONFIG_INITIALIZER;\n");
    writeln!(
        c,
        "int main(void) {{ return !(init.size == {} && init.magic == {}u && init.version == {}u \
         && init.blocking == {} && init.nvlinkCentricSched == {} && init.netName == NULL \
         && init.graphStreamOrdering == {}); }}",
        i.size, i.magic, i.version, i.blocking, i.nvlinkCentricSched, i.graphStreamOrdering
    )
    .unwrap();
    let dir = tempdir();
    let src = dir.join("check.c");
    std::fs::write(&src, &c).unwrap();
    let exe = dir.join("check");
    common::run_ok(
        Command::new(&cc)
            .args(["-std=c11", "-Wall", "-Werror", "-I"])
            .arg(common::include_dir())
            .arg(&src)
            .arg("-o")
            .arg(&exe),
    );
    common::run_ok(&mut Command::new(&exe));
    // The header also compiles as C++ where a C++ compiler exists (PyTorch includes it so).
    if let Ok(o) = Command::new("c++").arg("--version").output()
        && o.status.success()
    {
        let cpp = dir.join("check.cc");
        std::fs::write(&cpp, "#include \"nccl.h\"\nint main() { ncclConfig_t c = NCCL_CONFIG_INITIALIZER; return c.magic != 0xcafebeef; }\n").unwrap();
        common::run_ok(
            Command::new("c++")
                .args(["-fsyntax-only", "-Wall", "-Werror", "-I"])
                .arg(common::include_dir())
                .arg(&cpp),
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A fresh directory under the target directory (cleaned by `cargo clean`).
fn tempdir() -> std::path::PathBuf {
    let d = common::library()
        .parent()
        .unwrap()
        .join(format!("capi-header-test-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}
