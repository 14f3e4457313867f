//! Channels: NCCL's ring and tree search over a topology, connection across nodes, and the tuning
//! model (predicted time per algorithm and protocol).
