//! `libnccl.so.2`: nccl.h 2.30's C API over the rnccl library, so programs built against NCCL
//! (PyTorch, nccl-tests) run on rnccl unchanged, through `LD_PRELOAD` or the library path,
//! including NCCL 2.29-2.30's additions: the parameter API ([`param`]), revoke and shrink
//! ([`lifecycle`]), growth ([`grow`]), suspension and memory statistics ([`suspend`]),
//! one-sided puts and signals ([`rma`]), window user pointers and group simulation.
//!
//! Every exported function has nccl.h's exact C signature (`include/nccl.h` declares them; a
//! test checks it against these definitions and the built library's symbol table). Every entry
//! point runs its body under `catch_unwind`, so nothing panics across the C boundary and nothing
//! aborts the host process; a failure returns an `ncclResult_t` whose message
//! `ncclGetLastError` gives back (per thread, as in NCCL) and rnccl's NCCL_DEBUG log shows as a
//! `WARN` line.
//!
//! Functions rnccl cannot honour yet (device communicators, device-resident PreMulSum
//! scalars) return
//! `ncclInvalidUsage` naming the function; none pretends to work.
//!
//! The library loads on a host without CUDA (the driver is opened at run time); creating a
//! communicator there returns `ncclSystemError` saying why no GPU can be used.

#![allow(non_camel_case_types, non_upper_case_globals, non_snake_case)]

pub mod coll;
pub mod comm;
pub mod config;
pub mod errors;
pub mod group;
pub mod grow;
pub mod init;
pub mod lifecycle;
pub mod mem;
pub mod param;
pub mod profiling;
pub mod query;
pub mod register;
pub mod rma;
pub mod suspend;
pub mod types;
