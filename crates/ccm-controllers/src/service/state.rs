//! Everything the controller keeps about one Service, in one place: [`ServiceState`] per work-queue key, the
//! Service's or a previous incarnation's cleanup's (see `ServiceKey`). Its fields change only through the methods
//! here, each named for the step of the controller that calls it. A state is forgotten as soon as nothing is
//! left in it and nobody holds or waits for its lock, so the map holds the Services processed and the deletions
//! in progress, nothing more.

use std::{
    collections::{BTreeMap, HashMap},
    sync::{Arc, Mutex},
    time::Duration,
};

use ccm_cloud_provider::ServiceEndpoints;
use k8s_openapi::api::core::v1::Service;
use tokio::time::Instant;

use super::{key::ServiceKey, lock};

/// Node name to its provider ID and labels: the host set a load balancer is given (shared, see
/// `shared_host_set`).
type Hosts = Arc<BTreeMap<String, super::Host>>;

/// What the controller keeps under one work-queue key.
#[derive(Default)]
pub(super) struct ServiceState {
    /// Held by the key's sync (ensure or deletion) and by a node-sync host update of it, so that a host update
    /// never runs beside, or after, the deletion of the same load balancer (it would add back what the deletion
    /// removed: an NLB's node security-group rules).
    lock: Arc<tokio::sync::Mutex<()>>,
    /// The version processed last and not deleted (upstream's service cache): what node syncs and drift
    /// detection go over, and what a deletion deletes when the Service is gone.
    cached: Option<Arc<Service>>,
    /// For a previous incarnation's key: the old Service whose load balancer is being deleted.
    predecessor: Option<Arc<Service>>,
    /// The host set its load balancer was last given by an ensure that succeeded in this process, and by the
    /// host updates since: only such a load balancer gets host updates. `None` while it is being ensured (that
    /// sync uses the current nodes) and after an ensure failed: one refused because the load balancer is
    /// another Service's must not have its targets written either.
    hosts: Option<Hosts>,
    /// The endpoints its load balancer was last given with `hosts`, if the provider follows them (see
    /// `endpoint_sync`): an endpoint change updates it only when they differ.
    endpoints: Option<Arc<ServiceEndpoints>>,
    /// While `hosts` is `None`: the host set its last ensure was given, or the last node sync queued a full
    /// sync for, so that only a change of the nodes since queues another (see `node_sync`).
    tried_hosts: Option<Hosts>,
    /// The load balancer's deletion waiting on the cloud.
    wait: Option<Wait>,
    /// The number of the last change (ensure or host update) that left the load balancer as wanted, none of
    /// its own in flight: all that drift detection may judge (see `drift::settled`).
    settled: Option<u64>,
    /// What drifted, while the key is queued to repair it.
    drift: Option<String>,
}

/// A deletion that waits on the cloud.
#[derive(Debug, Clone)]
pub(super) struct Wait {
    /// When the first attempt was told to wait (this process's view: a new leader starts its own count).
    since: Instant,
    /// What the last Event said was waited for.
    reported: String,
}

// === impl ServiceState ===

impl ServiceState {
    fn is_empty(&self) -> bool {
        self.cached.is_none()
            && self.predecessor.is_none()
            && self.hosts.is_none()
            && self.endpoints.is_none()
            && self.tried_hosts.is_none()
            && self.wait.is_none()
            && self.settled.is_none()
            && self.drift.is_none()
            && Arc::strong_count(&self.lock) == 1
    }

    /// The version processed last and not deleted, if any.
    pub(super) fn cached(&self) -> Option<Arc<Service>> {
        self.cached.clone()
    }

    /// `svc` is the version being processed now.
    pub(super) fn remember_processed(&mut self, svc: Arc<Service>) {
        self.cached = Some(svc);
    }

    /// `current` is the watch cache's version of the Service: kept instead of the one processed last when it is
    /// the same Service and differs from it in nothing its load balancer depends on ([`needs_update`](super::needs_update)). So one
    /// copy is held, not two: our own status patch makes the processed version an old one at once.
    pub(super) fn share_current(&mut self, current: &Arc<Service>) {
        if let Some(cached) = &self.cached
            && !Arc::ptr_eq(cached, current)
            && cached.metadata.uid == current.metadata.uid
            && !super::needs_update(cached, current)
        {
            self.cached = Some(current.clone());
        }
    }

    /// The load balancer is gone, or no longer this controller's: nothing is kept of the version processed last
    /// nor of the host sets it was given.
    pub(super) fn forget_service(&mut self) {
        self.cached = None;
        self.hosts = None;
        self.endpoints = None;
        self.tried_hosts = None;
    }

    /// An ensure begins: no host update until it succeeded, and a deletion's wait is over (the Service wants
    /// its load balancer again).
    pub(super) fn start_ensure(&mut self) {
        self.wait = None;
        self.hosts = None;
        self.endpoints = None;
    }

    /// The ensure given `hosts` was served: its load balancer gets host updates from now on.
    pub(super) fn remember_ensured(&mut self, hosts: Hosts) {
        self.hosts = Some(hosts);
        self.tried_hosts = None;
    }

    /// The served load balancer was given `endpoints` (with the hosts last remembered).
    pub(super) fn remember_endpoints(&mut self, endpoints: Option<Arc<ServiceEndpoints>>) {
        self.endpoints = endpoints;
    }

    /// The endpoints the load balancer was last given, if it gets host updates and follows its endpoints.
    pub(super) fn endpoints(&self) -> Option<&Arc<ServiceEndpoints>> {
        self.hosts.as_ref().and(self.endpoints.as_ref())
    }

    /// An ensure given `hosts` failed, or a node sync queued a full sync for them: only other nodes queue
    /// another.
    pub(super) fn remember_tried(&mut self, hosts: Hosts) {
        self.tried_hosts = Some(hosts);
    }

    /// The host set the load balancer was given last (by a served ensure or a host update), if it gets host
    /// updates.
    pub(super) fn hosts(&self) -> Option<&Hosts> {
        self.hosts.as_ref()
    }

    /// Whether `hosts` is what the last failed ensure, or the last full sync a node sync queued, was given.
    pub(super) fn tried(&self, hosts: &Hosts) -> bool {
        self.tried_hosts.as_ref() == Some(hosts)
    }

    /// The load balancer was given `hosts` by a host update, or planned with them in a dry run.
    pub(super) fn remember_hosts(&mut self, hosts: Hosts) {
        self.hosts = Some(hosts);
    }

    /// The Service was replaced by a new incarnation: the old one's host sets are not the new one's, and the
    /// wait of its deletion, returned, goes on under the old one's own key (see [`Self::take_over`]).
    pub(super) fn hand_over(&mut self) -> Option<Wait> {
        self.hosts = None;
        self.endpoints = None;
        self.tried_hosts = None;
        self.wait.take()
    }

    /// For a predecessor's key: `old`, whose load balancer is to be deleted, with the wait its deletion had
    /// under the Service's key, if any.
    pub(super) fn take_over(&mut self, old: Arc<Service>, wait: Option<Wait>) {
        self.predecessor = Some(old);
        if wait.is_some() {
            self.wait = wait;
        }
    }

    /// For a predecessor's key: the old Service whose load balancer is being deleted.
    pub(super) fn predecessor(&self) -> Option<Arc<Service>> {
        self.predecessor.clone()
    }

    /// The predecessor's load balancer is deleted (or its deletion was reported by a dry run).
    pub(super) fn forget_predecessor(&mut self) {
        self.predecessor = None;
    }

    /// Whether the load balancer's deletion waits on the cloud.
    pub(super) fn is_waiting(&self) -> bool {
        self.wait.is_some()
    }

    /// The deletion was told to wait again at `now`: how long it has waited since it was first told to (zero,
    /// now that the wait starts, if it had not).
    pub(super) fn keep_waiting(&mut self, now: Instant) -> Duration {
        let wait = self.wait.get_or_insert_with(|| Wait {
            since: now,
            reported: String::new(),
        });
        now.saturating_duration_since(wait.since)
    }

    /// An Event says the deletion waits for `waiting_for`: whether the last one named something else.
    pub(super) fn report_wait(&mut self, waiting_for: &str) -> bool {
        let Some(wait) = &mut self.wait else { return false };
        let news = wait.reported != waiting_for;
        if news {
            waiting_for.clone_into(&mut wait.reported);
        }
        news
    }

    /// The deletion is done: nothing waits any more.
    pub(super) fn end_wait(&mut self) {
        self.wait = None;
    }

    /// A change of the load balancer begins: drift detection does not judge it until it is settled again.
    pub(super) fn unsettle(&mut self) {
        self.settled = None;
    }

    /// The change numbered `change` left the load balancer as wanted.
    pub(super) fn settle(&mut self, change: u64) {
        self.settled = Some(change);
    }

    /// The number of the change that settled the load balancer last, if it is settled.
    pub(super) fn settled(&self) -> Option<u64> {
        self.settled
    }

    /// The key is queued to repair `what` drifted.
    pub(super) fn remember_drift(&mut self, what: String) {
        self.drift = Some(what);
    }

    /// What drifted, once: the repair is told of one time.
    pub(super) fn take_drift(&mut self) -> Option<String> {
        self.drift.take()
    }

    /// Whether a drift repair is pending.
    #[cfg(test)]
    pub(super) fn has_drift(&self) -> bool {
        self.drift.is_some()
    }
}

/// The states of every key, behind one lock held only for short, synchronous reads and writes.
#[derive(Default)]
pub(super) struct ServiceStates(Mutex<HashMap<ServiceKey, ServiceState>>);

// === impl ServiceStates ===

impl ServiceStates {
    /// Runs `f` on the state of `key` (empty if there was none), then forgets the state if nothing is left in it.
    pub(super) fn update<R>(&self, key: &ServiceKey, f: impl FnOnce(&mut ServiceState) -> R) -> R {
        let mut states = lock(&self.0);
        let state = states.entry(key.clone()).or_default();
        let out = f(state);
        if state.is_empty() {
            states.remove(key);
        }
        out
    }

    /// Reads the state of `key`; `f` sees an empty state if there is none.
    pub(super) fn read<R>(&self, key: &ServiceKey, f: impl FnOnce(&ServiceState) -> R) -> R {
        match lock(&self.0).get(key) {
            Some(state) => f(state),
            None => f(&ServiceState::default()),
        }
    }

    /// The lock of `key`, to hold across its sync or host update. Call [`Self::release`] after dropping it.
    pub(super) fn lock_of(&self, key: &ServiceKey) -> Arc<tokio::sync::Mutex<()>> {
        self.update(key, |s| s.lock.clone())
    }

    /// After the lock of `key` was dropped: forgets the state if nothing is left in it.
    pub(super) fn release(&self, key: &ServiceKey, held: Arc<tokio::sync::Mutex<()>>) {
        drop(held);
        self.update(key, |_| ());
    }

    /// Every processed Service, each with its key and its `settled` number.
    pub(super) fn cached(&self) -> Vec<(ServiceKey, Arc<Service>, Option<u64>)> {
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
