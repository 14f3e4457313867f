//! What the operating system gives every floor of the engine: POSIX shared-memory segments
//! ([`shm`]) and the names rnccl gives its files in `/dev/shm` ([`names`]), and this host's
//! processes ([`host`]: liveness, pid and `/dev/shm` namespaces, the host's name). The lowest
//! floor: it imports nothing of the crate but its errors.

pub(crate) mod host;
pub(crate) mod names;
pub(crate) mod shm;
