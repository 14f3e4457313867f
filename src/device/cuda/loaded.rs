//! Modules loaded once per process and key (a GPU, a data type and reduction), and never
//! unloaded while the process may still launch from them.
//!
//! Two threads that ask for the same module at once must not both load it: the one that lost
//! the race would drop its copy, and `cuModuleUnload` waits for every kernel of the context to
//! end. With two ranks on one GPU, the other rank's kernel may be waiting for this thread's next
//! launch, so that wait never ended (seen as a hang of two ranks of one process on one GPU, the
//! unload holding the driver lock the other rank's launch needed). So the first caller of a
//! key loads it while later callers of that key wait for it; other keys go on.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::{Arc, Mutex};

use crate::error::Result;

/// What a key's loader left: the module, once one call loaded it.
type Slot<V> = Arc<Mutex<Option<Arc<V>>>>;

/// Modules by key, each loaded by one call at most.
pub(crate) struct Loaded<K, V> {
    slots: Mutex<HashMap<K, Slot<V>>>,
}

impl<K, V> Default for Loaded<K, V> {
    fn default() -> Self {
        Loaded {
            slots: Mutex::new(HashMap::new()),
        }
    }
}

impl<K: Eq + Hash, V> Loaded<K, V> {
    /// The module of `key`: loaded before, or by `load` now while other callers of `key` wait.
    /// A failed load leaves the key unloaded, for a later call to try again.
    ///
    /// Errors: whatever `load` returns.
    pub(crate) fn get(&self, key: K, load: impl FnOnce() -> Result<V>) -> Result<Arc<V>> {
        let slot = self
            .slots
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(key)
            .or_default()
            .clone();
        let mut held = slot.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(v) = &*held {
            return Ok(v.clone());
        }
        let v = Arc::new(load()?);
        *held = Some(v.clone());
        Ok(v)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;
    use crate::error::Error;

    #[test]
    fn callers_of_one_key_at_once_load_it_once() {
        let loaded: Loaded<u32, usize> = Loaded::default();
        let loads = AtomicUsize::new(0);
        let got: Vec<Arc<usize>> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..8)
                .map(|_| {
                    s.spawn(|| {
                        loaded
                            .get(7, || {
                                std::thread::sleep(std::time::Duration::from_millis(20));
                                Ok(loads.fetch_add(1, Ordering::SeqCst))
                            })
                            .unwrap()
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert_eq!(loads.load(Ordering::SeqCst), 1);
        assert!(got.iter().all(|v| Arc::ptr_eq(v, &got[0])));
        // Another key loads on its own.
        assert_eq!(*loaded.get(8, || Ok(42)).unwrap(), 42);
    }

    #[test]
    fn a_failed_load_is_tried_again() {
        let loaded: Loaded<u32, u32> = Loaded::default();
        let e = loaded
            .get(1, || Err(Error::Cuda("no module".into())))
            .unwrap_err();
        assert!(e.to_string().contains("no module"), "{e}");
        assert_eq!(*loaded.get(1, || Ok(5)).unwrap(), 5);
        assert_eq!(*loaded.get(1, || Ok(6)).unwrap(), 5);
    }
}
