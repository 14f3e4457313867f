//! Backends: the data movers and reducers the executor calls. The CPU backend works on host
//! memory; the CUDA backend (a later issue) runs the same plans with device kernels.

pub mod cpu;
