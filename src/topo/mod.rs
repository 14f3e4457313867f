//! Topology: detection (sysfs PCI tree, NVML, /sys/class/net, /sys/class/infiniband), the system
//! graph with NCCL's node and link types, paths and path types, NCCL topology XML in and out.
