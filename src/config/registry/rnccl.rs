//! rnccl's own settings. They follow NCCL's rules (environment first, then conf files) and sit in
//! the same registry so `env-explain` treats them like any knob.

use super::BASE;
use super::spec::{Category as C, KnobSpec, KnobType as T, Origin, Subsystem, Unit as U};

const RNCCL: KnobSpec = KnobSpec {
    subsystem: Subsystem::Rnccl,
    category: C::System,
    origin: Origin::Rnccl,
    ..BASE
};

#[rustfmt::skip]
pub(super) const KNOBS: &[KnobSpec] = &[
    KnobSpec { name: "RNCCL_BENCH_GPU", ty: T::Bool, auto: "set by rnccl bench", category: C::Dangerous, related: &["RNCCL_BENCH_ID", "RNCCL_BENCH_PROC", "RNCCL_BENCH_NPROCS"], source: "rnccl: cli/src/bench/spawn.rs",
        description: "Set by `rnccl bench` for the rank processes it starts: 1 when the ranks run on GPUs (the parent found them), 0 for CPU ranks. Never set it by hand.", ..RNCCL },
    KnobSpec { name: "RNCCL_BENCH_ID", ty: T::Text, category: C::Dangerous, related: &["RNCCL_BENCH_PROC", "RNCCL_BENCH_NPROCS", "RNCCL_BENCH_GPU"], source: "rnccl: cli/src/bench/spawn.rs",
        description: "Set by `rnccl bench` for the rank processes it starts: the communicator's unique id (rnccl:<magic>@<host>:<port>). With RNCCL_BENCH_PROC and RNCCL_BENCH_NPROCS it makes the process join that job with its ranks (-t threads × -g GPUs each); never set it by hand.", ..RNCCL },
    KnobSpec { name: "RNCCL_BENCH_NPROCS", ty: T::Int, auto: "set by rnccl bench", category: C::Dangerous, range: Some((1, i64::MAX)), related: &["RNCCL_BENCH_ID", "RNCCL_BENCH_PROC"], source: "rnccl: cli/src/bench/spawn.rs",
        description: "Set by `rnccl bench` for the rank processes it starts: the number of processes. Never set it by hand.", ..RNCCL },
    KnobSpec { name: "RNCCL_BENCH_PARENT", ty: T::Int, auto: "set by rnccl bench", category: C::Dangerous, range: Some((1, i64::MAX)), related: &["RNCCL_BENCH_ID"], source: "rnccl: cli/src/bench/spawn.rs",
        description: "Set by `rnccl bench` for the rank processes it starts: its own pid, so a rank whose launcher is gone exits (and gets SIGTERM when it goes). Never set it by hand.", ..RNCCL },
    KnobSpec { name: "RNCCL_BENCH_PROC", ty: T::Int, auto: "set by rnccl bench", category: C::Dangerous, range: Some((0, i64::MAX)), related: &["RNCCL_BENCH_ID", "RNCCL_BENCH_NPROCS"], source: "rnccl: cli/src/bench/spawn.rs",
        description: "Set by `rnccl bench` for the rank processes it starts: this process's index (its ranks follow from -t and -g). Never set it by hand.", ..RNCCL },
    KnobSpec { name: "RNCCL_BENCH_REPORT_FD", ty: T::Int, auto: "set by rnccl bench", category: C::Dangerous, range: Some((3, i64::MAX)), related: &["RNCCL_BENCH_ID"], source: "rnccl: cli/src/bench/spawn.rs",
        description: "Set by `rnccl bench` for the rank processes it starts: the descriptor of the pipe on which a failing rank reports its error, so the launcher says each failure once. Never set it by hand.", ..RNCCL },
    KnobSpec { name: "RNCCL_BLESS", ty: T::Bool, default: "0", category: C::Debug, source: "rnccl: cli/src/docs.rs (tests)",
        description: "For rnccl's own test suite: set, `cargo test -p rnccl-cli generated` rewrites the shell completions in completions/ and the man pages in man/ from the clap definitions instead of failing when they are stale. The rnccl command never reads it.", ..RNCCL },
    KnobSpec { name: "RNCCL_CONFIG", ty: T::File, related: &["NCCL_CONF_FILE", "RNCCL_SYSTEM_CONF"], source: "rnccl: src/config/load.rs",
        description: "YAML config file with typed knob values and per-host sections (see docs/config.md); the --config option overrides it. Read from the environment only. Its values rank below the environment and above the conf files.", ..RNCCL },
    KnobSpec { name: "RNCCL_IB_FAKE", ty: T::Bool, default: "0", category: C::Dangerous, related: &["NCCL_IB_DISABLE", "NCCL_IB_HCA"], source: "rnccl: src/transport/ib/net.rs",
        description: "Runs the IB transport over an in-process simulated fabric with two InfiniBand ports (mlx5_0:1, mlx5_1:1) instead of libibverbs, so the transport can be exercised without RDMA hardware (rnccl bench -t N). Only ranks of one process share that fabric; ranks of other processes are reached over sockets. Never set it in production.", ..RNCCL },
    KnobSpec { name: "RNCCL_KERNEL_CACHE", ty: T::OutputFile, auto: "$XDG_CACHE_HOME/rnccl/kernels, else $HOME/.cache/rnccl/kernels", source: "rnccl: src/device/cuda/compile/cache.rs",
        description: "Folder where rnccl keeps the GPU kernels NVRTC compiled (one CUBIN per program, GPU architecture and NVRTC version), created when first written, so only the first process on a host after an upgrade compiles them; 0, off, none or an empty value turn it off (each process then compiles its own). A folder that cannot be written is warned about once and never fails a communicator.", ..RNCCL },
    KnobSpec { name: "RNCCL_REQUIRE_GPU", ty: T::Bool, default: "0", category: C::Debug, source: "rnccl: tests/common/gpu.rs, src/bench/gpu_check.rs (tests)",
        description: "For rnccl's own test suite: set, a test that needs a GPU and finds none fails instead of being reported as ignored (perf/gpu_suite.sh sets it on the device machine). The rnccl command never reads it.", ..RNCCL },
    KnobSpec { name: "RNCCL_SILENT_LINK", default: "30", range: Some((0, 86_400)), unit: U::Seconds, source: "rnccl: src/bootstrap/silence.rs",
        description: "How long a TCP connection (bootstrap or data) may go without its peer's host acknowledging anything before rnccl calls the link silent and fails with the peer's name and address (TCP keepalive and TCP_USER_TIMEOUT), instead of waiting for RNCCL_TIMEOUT. A host that answers keeps its connections however slow its process is; 0 leaves the kernel's defaults (about 15 minutes).", ..RNCCL },
    KnobSpec { name: "RNCCL_SOCKET_CC", ty: T::Text, default: "auto", auto: "cubic (reno where cubic may not be set) when the kernel's default is a BBR, which paces with a timer per burst; else the kernel's default", category: C::Tuning, related: &["NCCL_SOCKET_NTHREADS", "NCCL_NSOCKS_PERTHREAD"], source: "rnccl: src/bootstrap/congestion.rs",
        description: "TCP congestion control of rnccl's data sockets (TCP_CONGESTION, set before each connects): auto, system (the kernel's default, net.ipv4.tcp_congestion_control), or an algorithm the kernel has loaded and this process may set (net.ipv4.tcp_allowed_congestion_control, or CAP_NET_ADMIN). auto avoids BBR's pacing timers, which on links of microseconds cost more CPU than the bytes: over a veth pair on a 2-vCPU VM, a 256 MiB two-rank all_reduce moved 1.5-1.6 GB/s with BBR and 2.6-2.8 GB/s with CUBIC. NCCL has no such knob (its sockets keep the kernel's default).", ..RNCCL },
    KnobSpec { name: "RNCCL_STATS", ty: T::Bool, default: "1", source: "rnccl: src/stats/page/mod.rs",
        description: "Whether each process publishes its communicators' live counters (bytes and steps per rank, channel, peer and direction; the operation in flight) in /dev/shm/rnccl-stats-<pid> (mode 0600, rewritten every 100 ms, removed on exit) for `rnccl top`. 0 turns the page off; the counters themselves cost the same either way.", ..RNCCL },
    KnobSpec { name: "RNCCL_SYSTEM_CONF", ty: T::File, auto: "/etc/nccl.conf", related: &["NCCL_CONF_FILE", "RNCCL_CONFIG"], source: "rnccl: src/config/load.rs",
        description: "The system-wide conf file to read in place of /etc/nccl.conf, for containers and tests. Honoured from the environment and the YAML config.", ..RNCCL },
    KnobSpec { name: "RNCCL_TIMEOUT", default: "300", range: Some((1, i64::MAX)), unit: U::Seconds, source: "rnccl: communicator",
        description: "Longest rnccl waits in any blocking step (bootstrap, connection set-up, a collective) before failing with an error that names the ranks that did not answer.", ..RNCCL },
];
