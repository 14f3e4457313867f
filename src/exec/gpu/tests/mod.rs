//! Device programs checked without a GPU: real plans encoded by [`super::program::encode`]
//! and run on the kernel model ([`super::emulate`]) over a simulated fabric ([`fabric`]).

mod agreement;
mod case;
mod collectives;
mod counters;
mod fabric;
mod failures;
mod ll;
mod p2p;
mod reference;
mod registered;
mod send_recv;
mod sym;
