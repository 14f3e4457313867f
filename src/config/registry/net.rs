//! The network side: generic network transport (`src/transport/net.cc`, `src/graph/paths.cc`),
//! TCP sockets (`src/misc/socket.cc`, `src/transport/net_socket.cc`), bootstrap
//! (`src/bootstrap.cc`) and RAS (`src/ras/`).

use super::BASE;
use super::spec::{Category as C, Choice, KnobSpec, KnobType as T, Subsystem, Unit as U};

const NET: KnobSpec = KnobSpec {
    subsystem: Subsystem::Net,
    category: C::Tuning,
    ..BASE
};
const SOCKET: KnobSpec = KnobSpec {
    subsystem: Subsystem::Socket,
    category: C::System,
    ..BASE
};
const BOOTSTRAP: KnobSpec = KnobSpec {
    subsystem: Subsystem::Bootstrap,
    category: C::System,
    ..BASE
};
const RAS: KnobSpec = KnobSpec {
    subsystem: Subsystem::Ras,
    category: C::System,
    ..BASE
};

const OFF_ON: &[Choice] = &[
    Choice {
        value: "0",
        meaning: "off",
    },
    Choice {
        value: "1",
        meaning: "on",
    },
];

#[rustfmt::skip]
pub(super) const KNOBS: &[KnobSpec] = &[
    KnobSpec { name: "NCCL_ALLOC_P2P_NET_LL_BUFFERS", ty: T::Bool, default: "0", since: "2.14",
        related: &["NCCL_P2P_LL_THRESHOLD"], source: "src/init.cc:859",
        description: "Gives every send/receive network connection its own LL-protocol buffers, so small point-to-point messages (up to NCCL_P2P_LL_THRESHOLD) take the low-latency path. Memory grows with the number of peers.", ..NET },
    KnobSpec { name: "NCCL_DMABUF_ENABLE", ty: T::Bool, default: "1", category: C::System, since: "2.13", source: "src/init.cc:399",
        description: "Registers GPU memory with the NIC through Linux dma-buf when the kernel, CUDA and NIC driver support it, instead of the nvidia-peermem module.", ..NET },
    KnobSpec { name: "NCCL_GDRCOPY_ENABLE", ty: T::Bool, default: "0", since: "2.9.6",
        related: &["NCCL_GDRCOPY_FIFO_ENABLE", "NCCL_GDRCOPY_SYNC_ENABLE", "NCCL_GDRCOPY_FLUSH_ENABLE"], source: "src/init.cc:130",
        description: "Uses the GDRCopy library to map GPU memory into the CPU's address space, so the proxy thread can update GPU-side flags and queues directly.", ..NET },
    KnobSpec { name: "NCCL_GDRCOPY_FIFO_ENABLE", ty: T::Bool, default: "1", since: "2.9.6", related: &["NCCL_GDRCOPY_ENABLE"], source: "src/init.cc:393",
        description: "With GDRCopy on, keeps the host-to-GPU work queue in GDRCopy-mapped GPU memory.", ..NET },
    KnobSpec { name: "NCCL_GDRCOPY_FLUSH_ENABLE", ty: T::Bool, default: "0", since: "2.9.6",
        related: &["NCCL_GDRCOPY_ENABLE", "NCCL_GDR_FLUSH_DISABLE"], source: "src/transport/net.cc:341",
        description: "With GDRCopy on, makes received GPUDirect data visible with a read through the CPU mapping instead of an RDMA-read flush.", ..NET },
    KnobSpec { name: "NCCL_GDRCOPY_SYNC_ENABLE", ty: T::Bool, default: "1", since: "2.12.7", related: &["NCCL_GDRCOPY_ENABLE"], source: "src/transport/net.cc:339",
        description: "With GDRCopy on, keeps the step counters shared by proxy and kernel in GDRCopy-mapped GPU memory.", ..NET },
    KnobSpec { name: "NCCL_IGNORE_NET_MISMATCH", ty: T::Bool, default: "1", category: C::System, since: "2.30", source: "src/init.cc:131",
        description: "Lets initialisation go on when ranks see different numbers of network devices. With 0 such a mismatch fails the communicator.", ..NET },
    KnobSpec { name: "NCCL_NET", ty: T::Text, auto: "first network that initialises: plugins, then IB, then Socket", category: C::System, since: "2.10",
        related: &["NCCL_NET_PLUGIN", "NCCL_IB_DISABLE"], source: "src/init.cc:2117",
        description: "Forces the network by name, compared case-insensitively: 'IB', 'Socket' or the name a plugin reports. Initialisation fails if no network of that name loads. Overrides the communicator's netName setting.", ..NET },
    KnobSpec { name: "NCCL_NET_DISABLE_INTRA", ty: T::Bool, default: "0", since: "2.12.7", source: "src/graph/paths.cc:599",
        description: "Never routes traffic between GPUs of one node through the NIC, even where the topology says loopback through the network would be faster than PCIe.", ..NET },
    KnobSpec { name: "NCCL_NET_FORCE_FLUSH", ty: T::Bool, default: "0", since: "2.15.1", related: &["NCCL_GDR_FLUSH_DISABLE"], source: "src/graph/paths.cc:572",
        description: "Flushes every GPUDirect receive, including on GPUs (Hopper and later) where NCCL normally knows none is needed.", ..NET },
    KnobSpec { name: "NCCL_NET_FORCE_MERGE", ty: T::NicGroups, category: C::System, since: "2.24.3",
        related: &["NCCL_NET_MERGE_LEVEL", "NCCL_IB_MERGE_NICS"], source: "src/graph/topo.cc:1739",
        description: "Fuses the named NICs into virtual NICs: groups separated by ';', NIC names (optionally name:port) in a group by ','. Every name must exist or initialisation fails; at most 8 NICs per group.", ..NET },
    KnobSpec { name: "NCCL_NET_GDR_C2C", ty: T::Bool, default: "1", since: "2.26", related: &["NCCL_NET_GDR_LEVEL"], source: "src/graph/paths.cc:465",
        description: "Allows GPUDirect RDMA to NICs that the GPU reaches through a C2C-attached CPU (path type P2C, e.g. Grace Hopper).", ..NET },
    KnobSpec { name: "NCCL_NET_GDR_LEVEL", ty: T::PathLevel, auto: "P2C, or PXB when NCCL_NET_GDR_C2C=0", since: "2.4.2",
        related: &["NCCL_NET_GDR_READ", "NCCL_NET_GDR_C2C", "NCCL_IB_GDR_LEVEL"], source: "src/graph/paths.cc:512",
        description: "Farthest GPU-to-NIC path over which GPUDirect RDMA is used; farther apart, data is staged through host memory. Replaced NCCL_IB_GDR_LEVEL in 2.4.", ..NET },
    KnobSpec { name: "NCCL_NET_GDR_MLOPART", ty: T::Bool, default: "0", since: "2.30.7", source: "src/graph/paths.cc:466",
        description: "Allows GPUDirect RDMA for GPUs split into MLOPart partitions.", ..NET },
    KnobSpec { name: "NCCL_NET_GDR_READ", ty: T::Choice(OFF_ON), default: "-2", auto: "on for Ampere and later; before, only with NVLink peers", since: "2.3.5",
        related: &["NCCL_NET_GDR_LEVEL"], source: "src/graph/paths.cc:460",
        description: "Uses GPUDirect on the sending side too, letting the NIC read directly from GPU memory.", ..NET },
    KnobSpec { name: "NCCL_NET_MERGE_LEVEL", ty: T::MergeLevel, default: "PORT", since: "2.24.3",
        related: &["NCCL_NET_FORCE_MERGE", "NCCL_NET_MERGE_POLICY"], source: "src/graph/topo.cc:1740",
        description: "Farthest apart two physical NICs may be for NCCL to fuse them into one virtual NIC by itself. PORT fuses only the ports of one NIC.", ..NET },
    KnobSpec { name: "NCCL_NET_MERGE_POLICY", ty: T::Keyword(&[
            Choice { value: "ALL", meaning: "fuse NICs whatever their rail" },
            Choice { value: "RAIL", meaning: "fuse only NICs with the same rail id" },
        ]), default: "ALL", since: "2.30.5", related: &["NCCL_NET_MERGE_LEVEL"], source: "src/graph/topo.cc:1751",
        description: "Whether automatic NIC fusion respects rails.", ..NET },
    KnobSpec { name: "NCCL_NET_OPTIONAL_RECV_COMPLETION", ty: T::Bool, default: "1", since: "2.24.3", source: "src/transport/net.cc:187",
        description: "Tells the network plugin that single LL/LL128 receives need no completion event, since the data carries its own validity flags.", ..NET },
    KnobSpec { name: "NCCL_NET_SHARED_BUFFERS", ty: T::Choice(OFF_ON), default: "-2", auto: "1", since: "2.8", source: "src/transport/net.cc:171",
        description: "Uses one shared pool of receive buffers for the point-to-point network connections of a communicator instead of buffers per peer.", ..NET },
    KnobSpec { name: "NCCL_NET_SHARED_COMMS", ty: T::Bool, default: "1", since: "2.12", related: &["NCCL_PXN_DISABLE"], source: "src/transport/net.cc:172",
        description: "With PXN, reuses one network connection for traffic relayed for several GPUs (aggregation) rather than one each (more flows, more entropy).", ..NET },
    KnobSpec { name: "NCCL_P2P_PXN_LEVEL", ty: T::Choice(&[
            Choice { value: "0", meaning: "never relay send/receive through another GPU" },
            Choice { value: "1", meaning: "relay only when the peer's NIC is not reachable over PCI" },
            Choice { value: "2", meaning: "always relay to aggregate messages" },
        ]), default: "2", since: "2.12", related: &["NCCL_PXN_DISABLE"], source: "src/graph/search.cc:1398",
        description: "When send/receive traffic is relayed over NVLink to the GPU nearest the destination's NIC (PXN).", ..NET },
    KnobSpec { name: "NCCL_PXN_C2C", ty: T::Bool, default: "1", since: "2.27", related: &["NCCL_PXN_DISABLE"], source: "src/graph/paths.cc:719",
        description: "Allows PXN through a relay GPU that reaches the NIC over C2C and PCIe.", ..NET },
    KnobSpec { name: "NCCL_PXN_DISABLE", ty: T::Bool, default: "0", since: "2.12", related: &["NCCL_P2P_PXN_LEVEL", "NCCL_PXN_C2C"], source: "src/graph/paths.cc:668",
        description: "Turns PXN off: data for a remote node always leaves through a NIC near the sending GPU rather than being relayed over NVLink to the GPU next to the NIC the remote side prefers.", ..NET },
    KnobSpec { name: "NCCL_UNPACK_DOUBLE_NCHANNELS", ty: T::Bool, default: "1", since: "2.22.3", source: "src/graph/connect.cc:378",
        description: "Doubles the channel count (when below 16) for network plugins that unpack data on the device, on jobs with more than one node.", ..NET },

    KnobSpec { name: "NCCL_NSOCKS_PERTHREAD", default: "-2", auto: "1 (8 on AWS)", range: Some((1, 64)), unit: U::Count, category: C::Tuning, since: "2.4.8",
        related: &["NCCL_SOCKET_NTHREADS"], source: "src/transport/net_socket.cc:198",
        description: "TCP sockets each helper thread drives per connection of the Socket transport. Threads × sockets is capped at 64.", ..SOCKET },
    KnobSpec { name: "NCCL_SOCKET_FAMILY", ty: T::ExactKeyword(&[
            Choice { value: "AF_INET", meaning: "IPv4 only" },
            Choice { value: "AF_INET6", meaning: "IPv6 only" },
        ]), auto: "any family", since: "2.3.5", related: &["NCCL_SOCKET_IFNAME"], source: "src/misc/socket.cc:180",
        description: "Restricts the interfaces NCCL considers to addresses of one family. Any other value (including lower case) is ignored.", ..SOCKET },
    KnobSpec { name: "NCCL_SOCKET_IFNAME", ty: T::DeviceList, auto: "ib*, then an interface in NCCL_COMM_ID's subnet, then anything but docker*, lo, virbr*, then those", since: "2.3.5",
        related: &["NCCL_SOCKET_FAMILY", "NCCL_COMM_ID", "NCCL_IB_HCA"], source: "src/misc/socket.cc:196",
        description: "Interfaces for bootstrap and the Socket transport. Entries are name prefixes ('eth' selects eth0, eth1...) unless the list starts with '=' (exact names); a leading '^' excludes them instead. A value of one character or less is ignored. If nothing matches, initialisation fails.", ..SOCKET },
    KnobSpec { name: "NCCL_SOCKET_INLINE", default: "128", range: Some((0, i64::MAX)), unit: U::Bytes, category: C::Tuning, since: "2.27.3", source: "src/transport/net_socket.cc:196",
        description: "Messages up to this size travel inside the Socket transport's control message instead of separately.", ..SOCKET },
    KnobSpec { name: "NCCL_SOCKET_MAGIC", default: "0x564ab9f2fc4b9d6c", since: "2.30.7", source: "src/misc/socket.cc:30",
        description: "64-bit number exchanged when Socket-transport and IB-bootstrap TCP connections open; peers with different values refuse each other. It does not cover the communicator bootstrap.", ..SOCKET },
    KnobSpec { name: "NCCL_SOCKET_MIN_TASKSIZE", default: "65536", range: Some((1, i64::MAX)), unit: U::Bytes, category: C::Tuning, since: "2.27.3",
        related: &["NCCL_NSOCKS_PERTHREAD", "NCCL_SOCKET_NTHREADS"], source: "src/transport/net_socket.cc:197",
        description: "Smallest piece a message is cut into when spread over a connection's sockets.", ..SOCKET },
    KnobSpec { name: "NCCL_SOCKET_NTHREADS", default: "-2", auto: "0 (2 on AWS, 4 on GCP gVNIC)", range: Some((0, 16)), unit: U::Threads, category: C::Tuning, since: "2.4.8",
        related: &["NCCL_NSOCKS_PERTHREAD"], source: "src/transport/net_socket.cc:199",
        description: "Helper threads per Socket-transport connection (at most 16); 0 lets the proxy thread drive the sockets itself.", ..SOCKET },
    KnobSpec { name: "NCCL_SOCKET_POLL_TIMEOUT_MSEC", default: "0", range: Some((0, i64::MAX)), unit: U::Milliseconds, category: C::Tuning, since: "2.28", source: "src/misc/socket.cc:21",
        description: "How long a socket waits in poll() between progress attempts; 0 retries at once (busy polling).", ..SOCKET },
    KnobSpec { name: "NCCL_SOCKET_RCVBUF", default: "-1", auto: "the kernel's default", range: Some((0, i64::MAX)), unit: U::Bytes, category: C::Tuning, since: "2.27.3",
        related: &["NCCL_SOCKET_SNDBUF"], source: "src/misc/socket.cc:22",
        description: "Receive buffer size (SO_RCVBUF) of NCCL's TCP sockets.", ..SOCKET },
    KnobSpec { name: "NCCL_SOCKET_RETRY_CNT", default: "34", range: Some((0, i64::MAX)), unit: U::Count, since: "2.24",
        related: &["NCCL_SOCKET_RETRY_SLEEP_MSEC"], source: "src/misc/socket.cc:19",
        description: "Connection attempts retried after a refused, unreachable or timed-out connect before giving up.", ..SOCKET },
    KnobSpec { name: "NCCL_SOCKET_RETRY_SLEEP_MSEC", default: "100", range: Some((0, i64::MAX)), unit: U::Milliseconds, since: "2.24",
        related: &["NCCL_SOCKET_RETRY_CNT"], source: "src/misc/socket.cc:20",
        description: "Back-off step between connect retries: the k-th retry waits k times this, so N retries wait N(N+1)/2 steps in all (about 60 s by default).", ..SOCKET },
    KnobSpec { name: "NCCL_SOCKET_SNDBUF", default: "-1", auto: "the kernel's default", range: Some((0, i64::MAX)), unit: U::Bytes, category: C::Tuning, since: "2.27.3",
        related: &["NCCL_SOCKET_RCVBUF"], source: "src/misc/socket.cc:23",
        description: "Send buffer size (SO_SNDBUF) of NCCL's TCP sockets.", ..SOCKET },

    KnobSpec { name: "NCCL_COMM_ID", ty: T::HostPort, since: "2.3.5", related: &["NCCL_SOCKET_IFNAME"], source: "src/bootstrap.cc:433",
        description: "Fixed rendezvous address host:port (IPv6 as [addr]:port). Rank 0 listens there and the unique id no longer carries a random address; it also steers NCCL's choice of interface toward that subnet.", ..BOOTSTRAP },
    KnobSpec { name: "NCCL_OOB_NET_ENABLE", ty: T::Bool, default: "0", since: "2.23", related: &["NCCL_OOB_NET_IFNAME"], source: "src/bootstrap.cc:103",
        description: "Runs the bootstrap ring over the network plugin (e.g. IB) instead of TCP sockets.", ..BOOTSTRAP },
    KnobSpec { name: "NCCL_OOB_NET_IFNAME", ty: T::DeviceList, auto: "network device 0", since: "2.23", related: &["NCCL_OOB_NET_ENABLE"], source: "src/bootstrap.cc:551",
        description: "Which network-plugin device the bootstrap uses when NCCL_OOB_NET_ENABLE=1, in the same filter syntax as NCCL_IB_HCA; the first match wins.", ..BOOTSTRAP },
    KnobSpec { name: "NCCL_UID_STAGGER_RATE", default: "7000", range: Some((1, i64::MAX)), unit: U::PerSecond, category: C::Tuning, since: "2.23",
        related: &["NCCL_UID_STAGGER_THRESHOLD"], source: "src/bootstrap.cc:669",
        description: "Connections per second the root should receive when large jobs stagger their bootstrap connects.", ..BOOTSTRAP },
    KnobSpec { name: "NCCL_UID_STAGGER_THRESHOLD", default: "256", range: Some((0, i64::MAX)), unit: U::Count, category: C::Tuning, since: "2.23",
        related: &["NCCL_UID_STAGGER_RATE"], source: "src/bootstrap.cc:670",
        description: "Ranks per unique id above which connects to the bootstrap root are staggered.", ..BOOTSTRAP },

    KnobSpec { name: "NCCL_RAS_ADDR", ty: T::HostPort, default: "localhost:28028", since: "2.24", related: &["NCCL_RAS_ENABLE"], source: "src/ras/client_support.cc:170",
        description: "Address where the RAS service listens for queries from the ncclras client.", ..RAS },
    KnobSpec { name: "NCCL_RAS_ENABLE", ty: T::Bool, default: "1", since: "2.24", related: &["NCCL_RAS_ADDR"], source: "src/bootstrap.cc:672",
        description: "Runs the RAS subsystem: ranks keep each other alive and can report job health (dead or unresponsive ranks) on request.", ..RAS },
    KnobSpec { name: "NCCL_RAS_TIMEOUT_FACTOR", default: "1", range: Some((1, i64::MAX)), unit: U::Count, since: "2.24", source: "src/ras/ras.cc:80",
        description: "Multiplies every RAS timeout (5 to 60 s by default); raise it on slow or busy networks to avoid false alarms.", ..RAS },
];
