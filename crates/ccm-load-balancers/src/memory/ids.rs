//! Instance IDs held once by the host memory, however many load balancers target the instance.
//!
//! At 5,000 Nodes in pools of 100 with 1,000 load balancers, the host memory remembers 100,000 targets of 5,000
//! instances. As a `String` each, an ID costs 24 bytes and a heap block of about 32; as a shared `Arc<str>`, 16
//! bytes a target and one block an instance.

use std::{
    collections::HashSet,
    sync::{Arc, Mutex, PoisonError},
};

/// The interned instance IDs (see the module documentation).
#[derive(Debug, Default)]
pub(crate) struct Ids {
    table: Mutex<HashSet<Arc<str>>>,
}

impl Ids {
    /// The one shared copy of `id`.
    pub(crate) fn intern(&self, id: &str) -> Arc<str> {
        let mut table = self.table.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(held) = table.get(id) {
            return held.clone();
        }
        let held: Arc<str> = Arc::from(id);
        table.insert(held.clone());
        held
    }

    /// Drops the IDs no remembered load balancer holds any more.
    pub(crate) fn prune(&self) {
        self.table
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .retain(|id| Arc::strong_count(id) > 1);
    }

    /// How many IDs are held.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.table.lock().unwrap_or_else(PoisonError::into_inner).len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_id_is_held_once_and_dropped_once_nobody_holds_it() {
        let ids = Ids::default();
        let a = ids.intern("i-0123456789abcdef0");
        let b = ids.intern("i-0123456789abcdef0");
        assert!(Arc::ptr_eq(&a, &b));
        let c = ids.intern("i-0fedcba9876543210");
        assert_eq!(ids.len(), 2);
        drop((a, b));
        ids.prune();
        assert_eq!(ids.len(), 1);
        assert_eq!(&*c, "i-0fedcba9876543210");
    }
}
