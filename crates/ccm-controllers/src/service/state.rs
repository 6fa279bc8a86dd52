//! Everything the controller keeps about one Service, in one place: [`ServiceState`] per work-queue key, the
//! Service's (`<namespace>/<name>`) or a previous incarnation's cleanup's (`<namespace>/<name>@<uid>`, see
//! `predecessor`). A state is forgotten as soon as nothing is left in it and nobody holds or waits for its lock,
//! so the map holds the Services processed and the deletions in progress, nothing more.

use std::{
    collections::{BTreeMap, HashMap},
    sync::{Arc, Mutex},
};

use k8s_openapi::api::core::v1::Service;

use super::{cleanup::Wait, lock};

/// What the controller keeps under one work-queue key.
#[derive(Default)]
pub(super) struct ServiceState {
    /// Held by the key's sync (ensure or deletion) and by a node-sync host update of it, so that a host update
    /// never runs beside, or after, the deletion of the same load balancer (it would add back what the deletion
    /// removed: an NLB's node security-group rules).
    lock: Arc<tokio::sync::Mutex<()>>,
    /// The version processed last and not deleted (upstream's service cache): what node syncs and drift
    /// detection go over, and what a deletion deletes when the Service is gone.
    pub(super) cached: Option<Arc<Service>>,
    /// For a previous incarnation's key: the old Service whose load balancer is being deleted.
    pub(super) predecessor: Option<Arc<Service>>,
    /// The host set its load balancer was last given (shared, see `shared_host_set`) by an ensure that
    /// succeeded in this process, and by the host updates since: only such a load balancer gets host updates.
    /// `None` while it is being ensured (that sync uses the current nodes) and after an ensure failed: one
    /// refused because the load balancer is another Service's must not have its targets written either.
    pub(super) hosts: Option<Arc<BTreeMap<String, String>>>,
    /// While `hosts` is `None`: the host set its last ensure was given, or the last node sync queued a full
    /// sync for, so that only a change of the nodes since queues another (see `node_sync`).
    pub(super) tried_hosts: Option<Arc<BTreeMap<String, String>>>,
    /// The load balancer's deletion waiting on the cloud.
    pub(super) wait: Option<Wait>,
    /// The number of the last change (ensure or host update) that left the load balancer as wanted, none of
    /// its own in flight: all that drift detection may judge (see `drift::settled`).
    pub(super) settled: Option<u64>,
    /// What drifted, while the key is queued to repair it.
    pub(super) drift: Option<String>,
}

impl ServiceState {
    fn is_empty(&self) -> bool {
        self.cached.is_none()
            && self.predecessor.is_none()
            && self.hosts.is_none()
            && self.tried_hosts.is_none()
            && self.wait.is_none()
            && self.settled.is_none()
            && self.drift.is_none()
            && Arc::strong_count(&self.lock) == 1
    }
}

/// The states of every key, behind one lock held only for short, synchronous reads and writes.
#[derive(Default)]
pub(super) struct ServiceStates(Mutex<HashMap<String, ServiceState>>);

impl ServiceStates {
    /// Runs `f` on the state of `key` (empty if there was none), then forgets the state if nothing is left in it.
    pub(super) fn update<R>(&self, key: &str, f: impl FnOnce(&mut ServiceState) -> R) -> R {
        let mut states = lock(&self.0);
        let state = states.entry(key.to_owned()).or_default();
        let out = f(state);
        if state.is_empty() {
            states.remove(key);
        }
        out
    }

    /// Reads the state of `key`; `f` sees an empty state if there is none.
    pub(super) fn read<R>(&self, key: &str, f: impl FnOnce(&ServiceState) -> R) -> R {
        match lock(&self.0).get(key) {
            Some(state) => f(state),
            None => f(&ServiceState::default()),
        }
    }

    /// The lock of `key`, to hold across its sync or host update. Call [`Self::release`] after dropping it.
    pub(super) fn lock_of(&self, key: &str) -> Arc<tokio::sync::Mutex<()>> {
        self.update(key, |s| s.lock.clone())
    }

    /// After the lock of `key` was dropped: forgets the state if nothing is left in it.
    pub(super) fn release(&self, key: &str, held: Arc<tokio::sync::Mutex<()>>) {
        drop(held);
        self.update(key, |_| ());
    }

    /// Every processed Service, each with its key and its `settled` number.
    pub(super) fn cached(&self) -> Vec<(String, Arc<Service>, Option<u64>)> {
        lock(&self.0)
            .iter()
            .filter_map(|(key, s)| Some((key.clone(), s.cached.clone()?, s.settled)))
            .collect()
    }

    /// Whether any key's state satisfies `f`.
    #[cfg(test)]
    pub(super) fn any(&self, f: impl Fn(&ServiceState) -> bool) -> bool {
        lock(&self.0).values().any(f)
    }
}
