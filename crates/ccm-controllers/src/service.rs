//! The service (load balancer) controller: ensures a cloud load balancer for every Service of type
//! `LoadBalancer` without a `loadBalancerClass`, under the `service.kubernetes.io/load-balancer-cleanup`
//! finalizer protocol, writes `status.loadBalancer`, keeps back ends equal to the stable node set, and deletes
//! the load balancer before releasing the finalizer.
//!
//! Node changes are coalesced: node events arriving within `node_sync_window` (and during a pass) lead to one
//! pass, which calls `update_load_balancer` once per Service whose host set actually changed, among those whose
//! last ensure succeeded.

mod cleanup;
mod drift;
mod endpoint_sync;
mod endpoints;
mod ensure;
mod key;
mod left_alone;
mod node_sync;
mod patches;
mod plans;
mod predecessor;
mod predicates;
mod state;

use crate::CachedNode;
use ccm_cloud_provider::NodeView;
use std::{
    collections::{BTreeMap, HashMap},
    future::Future,
    sync::{Arc, Mutex, MutexGuard},
    time::Duration,
};

use ccm_cloud_provider::{CloudProvider, LoadBalancer, LoadBalancerStatus, ServiceEndpoints};
pub use endpoints::list_service_endpoints;
use k8s_openapi::api::core::v1::Service;
use key::ServiceKey;
use kube::{
    Client,
    runtime::{reflector::Store, watcher},
};
pub use patches::{finalizer_patch, status_patch, with_uid_precondition};
use patches::{patch_finalizer, patch_status};
pub use predicates::*;
use tokio::sync::Notify;

use crate::{
    Backoff, Bootstrap, Clock, ControllerMetrics, Error, ErrorChain, WorkQueue,
    events::{EventRecorder, EventType, service_reference},
    run_until,
};

/// Settings of the service controller.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ServiceConfig {
    /// Passed to every load balancer call (`--cluster-name`, default `kubernetes`).
    pub cluster_name: String,
    /// Services synced at once (`--concurrent-service-syncs`, default 1); also the fan-out of node syncs.
    pub concurrent_service_syncs: usize,
    /// First retry delay of a failed Service (default 5 s), doubled per failure.
    pub min_retry_delay: Duration,
    /// Longest retry delay (default 300 s).
    pub max_retry_delay: Duration,
    /// How long node changes are collected before one node-sync pass (default 1 s).
    pub node_sync_window: Duration,
    /// Only Services matching this label selector are handled (default: all).
    pub service_selector: Option<String>,
    /// Only Nodes matching this label selector are load balancer back ends (default: all).
    pub node_selector: Option<String>,
    /// Counters, shared with whoever exports them.
    pub metrics: ControllerMetrics,
    /// The process's shared watches (one Node and one Service watch for every controller); `None` (the
    /// default): this controller watches on its own.
    pub informers: Option<crate::Informers>,
    /// Wall-clock time for Event timestamps.
    pub clock: Clock,
    /// How long a load balancer's deletion may wait on the cloud (a deleted load balancer's network interfaces
    /// holding its security group) with Normal Events and retries at most a minute apart; after that a Warning
    /// Event is posted and it is retried every `max_retry_delay` (default 15 min).
    pub deletion_patience: Duration,
    /// How often the provider is asked which load balancers drifted from what was ensured (changed by hand in
    /// the cloud), to re-ensure only those (`--load-balancer-resync-period`, default 10 min; zero disables).
    pub load_balancer_resync_period: Duration,
    /// How long one Service sync or one load balancer's host update may take before it is abandoned and retried
    /// (default 5 min): a provider that stopped answering must not hold a worker, and with it every other
    /// Service, for good. Abandoning is safe: the provider's steps are idempotent, as after a crash.
    pub reconcile_deadline: Duration,
    /// A dry run's sink: with one, a Service that wants a load balancer is planned, not ensured (no finalizer,
    /// no Event, no status: the provider's [`LoadBalancer::plan_load_balancer`] goes here). Default: none.
    pub plans: Option<Arc<dyn crate::DryRunSink>>,
}

impl Default for ServiceConfig {
    fn default() -> Self {
        Self {
            cluster_name: "kubernetes".to_owned(),
            concurrent_service_syncs: 1,
            min_retry_delay: Duration::from_secs(5),
            max_retry_delay: Duration::from_secs(300),
            node_sync_window: Duration::from_secs(1),
            service_selector: None,
            node_selector: None,
            metrics: ControllerMetrics::default(),
            informers: None,
            clock: Clock::system(),
            deletion_patience: Duration::from_secs(15 * 60),
            load_balancer_resync_period: Duration::from_secs(10 * 60),
            reconcile_deadline: Duration::from_secs(5 * 60),
            plans: None,
        }
    }
}

/// Which branch a sync took.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Ensure,
    Delete,
}

struct Ctx<P: CloudProvider> {
    client: Client,
    provider: Arc<P>,
    config: ServiceConfig,
    services: Store<Service>,
    nodes: Store<CachedNode>,
    queue: WorkQueue<ServiceKey>,
    backoff: Backoff<ServiceKey>,
    recorder: EventRecorder,
    /// Everything kept about each Service (and each previous incarnation's cleanup), by work-queue key.
    states: state::ServiceStates,
    /// The host set last computed, which every Service given the same one shares.
    latest_hosts: Mutex<Arc<BTreeMap<String, Host>>>,
    /// The endpoints of the Services whose load balancer follows them (watched from the first such Service).
    endpoints: endpoints::EndpointSlices,
    /// Numbers the changes recorded in [`state::ServiceState::settled`].
    changes: std::sync::atomic::AtomicU64,
    node_sync: Notify,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Runs the service controller until `shutdown` completes.
///
/// Returns [`Error::Unsupported`] at once if the provider has no `LoadBalancer`.
pub async fn run<P: CloudProvider>(
    client: Client,
    provider: Arc<P>,
    config: ServiceConfig,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), Error> {
    if provider.load_balancer().is_none() {
        return Err(Error::Unsupported {
            capability: "external load balancers",
        });
    }
    let boot = Bootstrap::new(
        client,
        "service-controller",
        config.clock.clone(),
        config.metrics.clone(),
    )
    .with_informers(config.informers.clone());
    let service_informer = boot.informer::<Service>(config.service_selector.as_deref());
    let node_informer = boot.informer::<CachedNode>(config.node_selector.as_deref());
    let queue_with_depth = WorkQueue::with_metrics(config.metrics.clone());
    let ctx = Arc::new(Ctx {
        client: boot.client,
        provider,
        backoff: Backoff::new(config.min_retry_delay, config.max_retry_delay),
        config,
        services: service_informer.store(),
        nodes: node_informer.store(),
        queue: queue_with_depth,
        recorder: boot.recorder,
        states: state::ServiceStates::default(),
        latest_hosts: Mutex::default(),
        endpoints: endpoints::EndpointSlices::default(),
        changes: Default::default(),
        node_sync: Notify::new(),
    });

    let watch_services =
        service_informer.run(share_current(ctx.clone(), on_service_event(ctx.queue.clone())));
    let watch_nodes = node_informer.run(on_node_event(ctx.clone()));
    let work = async {
        if ctx.services.wait_until_ready().await.is_err() || ctx.nodes.wait_until_ready().await.is_err() {
            return;
        }
        let workers = (0..ctx.config.concurrent_service_syncs.max(1)).map(|_| service_worker(&ctx));
        tokio::join!(
            futures::future::join_all(workers),
            node_sync::node_sync_loop(&ctx),
            endpoint_sync::endpoint_sync_loop(&ctx),
            drift::resync_loop(&ctx)
        );
    };
    let watch_endpoints = ctx.endpoints.run(ctx.client.clone());
    let watches = async {
        tokio::join!(watch_services, watch_nodes, watch_endpoints);
    };
    run_until(shutdown, watches, work).await;
    ctx.queue.shut_down();
    Ok(())
}

/// What the Service watch does with each event: queues the Services whose load balancer has something to do.
fn on_service_event(queue: WorkQueue<ServiceKey>) -> impl FnMut(watcher::Event<Arc<Service>>) + Send {
    let mut seen_services: HashMap<ServiceKey, SeenService> = HashMap::new();
    move |event| match event {
        watcher::Event::Apply(svc) | watcher::Event::InitApply(svc) => {
            let key = ServiceKey::of(&svc);
            let seen = SeenService::of(&svc);
            let enqueue = match seen_services.get(&key) {
                None => seen.is_of_interest(),
                // A Service being cleaned up is queued once, when that starts: its deletion retries on its
                // own, and its later updates (our status patch) would only repeat the provider's delete.
                Some(old) => old.needs_update_to(&seen) || old.cleanup_starts(&seen),
            };
            seen_services.insert(key.clone(), seen);
            if enqueue {
                queue.add(&key);
            }
        }
        watcher::Event::Delete(svc) => {
            let key = ServiceKey::of(&svc);
            seen_services.remove(&key);
            queue.add(&key);
        }
        _ => {}
    }
}

/// `on_event`, then, for a Service added or changed: the watch cache's version replaces the one processed last
/// where nothing of the load balancer's differs (`ServiceState::share_current`).
fn share_current<P: CloudProvider>(
    ctx: Arc<Ctx<P>>,
    mut on_event: impl FnMut(watcher::Event<Arc<Service>>) + Send,
) -> impl FnMut(watcher::Event<Arc<Service>>) + Send {
    move |event| {
        let applied = match &event {
            watcher::Event::Apply(svc) | watcher::Event::InitApply(svc) => Some(ServiceKey::of(svc)),
            _ => None,
        };
        on_event(event);
        if let Some(key) = applied
            && let Some(current) = ctx.services.get(&key.object_ref())
        {
            ctx.states.update(&key, |s| s.share_current(&current));
        }
    }
}

/// What the Node watch does with each event: wakes the node sync when a change can move any load balancer's
/// hosts.
fn on_node_event<P: CloudProvider>(ctx: Arc<Ctx<P>>) -> impl FnMut(watcher::Event<Arc<CachedNode>>) + Send {
    let mut changes = NodeChanges::default();
    move |event| {
        if changes.observe(&event) {
            ctx.node_sync.notify_one();
        }
    }
}

/// The Nodes seen so far, each as its summary and its labels' fingerprint (a provider may select targets by
/// label, see `Host`): what tells a Node event that can move a load balancer's hosts from one that cannot.
#[derive(Default)]
struct NodeChanges {
    seen: HashMap<String, (NodeSummary, u64)>,
}

impl NodeChanges {
    /// Whether `event` can move any load balancer's hosts: a new or deleted Node, or a change of its summary
    /// or labels.
    fn observe(&mut self, event: &watcher::Event<Arc<CachedNode>>) -> bool {
        match event {
            watcher::Event::Apply(node) | watcher::Event::InitApply(node) => {
                let summary = NodeSummary::of(node);
                let labels = labels_fingerprint(node);
                let name = node.name.clone();
                self.seen
                    .insert(name, (summary.clone(), labels))
                    .is_none_or(|(old, old_labels)| {
                        should_sync_updated_node(&old, &summary) || old_labels != labels
                    })
            }
            watcher::Event::Delete(node) => {
                self.seen.remove(node.name.as_str());
                true
            }
            _ => false,
        }
    }
}

async fn service_worker<P: CloudProvider>(ctx: &Ctx<P>) {
    while let Some(batch) = ctx.queue.next_batch(1, Duration::ZERO).await {
        for key in batch {
            ctx.config.metrics.reconcile();
            match sync_within_deadline(ctx, &key).await {
                Ok(()) => ctx.backoff.forget(&key),
                // Not a failure: the deletion goes on after the delay it chose (and reported).
                Err(Error::Waiting { after, .. }) => ctx.queue.add_after(&key, after),
                Err(error) => {
                    ctx.config.metrics.error();
                    let delay = error.retry_delay(&ctx.backoff, &key);
                    tracing::warn!(service = %key, error = %ErrorChain(&error), ?delay, "failed to sync service; retrying");
                    ctx.queue.add_after(&key, delay);
                }
            }
            ctx.queue.done(&key);
        }
    }
}

/// [`sync_service`], abandoned (an error, retried with backoff) when it outlasts the reconcile deadline.
async fn sync_within_deadline<P: CloudProvider>(ctx: &Ctx<P>, key: &ServiceKey) -> Result<(), Error> {
    let deadline = ctx.config.reconcile_deadline;
    tokio::time::timeout(deadline, sync_service(ctx, key))
        .await
        .unwrap_or(Err(Error::DeadlineExceeded {
            what: "service sync",
            deadline,
        }))
}

async fn sync_service<P: CloudProvider>(ctx: &Ctx<P>, key: &ServiceKey) -> Result<(), Error> {
    if let ServiceKey::Predecessor { .. } = key {
        return predecessor::sync(ctx, key).await;
    }
    let held = ctx.states.lock_of(key);
    let guard = held.lock().await;
    drift::unsettle(ctx, key);
    let result = sync_service_locked(ctx, key).await;
    drop(guard);
    ctx.states.release(key, held);
    result
}

/// Forgets the processed version of `key` and the host set its load balancer was given: the load balancer is
/// gone, or no longer this controller's.
fn forget_service<P: CloudProvider>(ctx: &Ctx<P>, key: &ServiceKey) {
    ctx.states.update(key, state::ServiceState::forget_service);
}

async fn sync_service_locked<P: CloudProvider>(ctx: &Ctx<P>, key: &ServiceKey) -> Result<(), Error> {
    let Some(svc) = ctx.services.get(&key.object_ref()) else {
        return process_service_deletion(ctx, key).await;
    };
    let Some(lb) = ctx.provider.load_balancer() else {
        return Ok(());
    };
    let cached = ctx.states.read(key, state::ServiceState::cached);
    if let Some(cached) = cached
        && cached.metadata.uid != svc.metadata.uid
    {
        // Deleted and re-created (without our finalizer) while we were not looking: the old one's load balancer
        // is deleted under a key of its own, and never holds up the new one.
        predecessor::hand_over(ctx, key, cached);
    }
    ctx.states.update(key, |s| s.remember_processed(svc.clone()));
    match sync_load_balancer_if_needed(ctx, lb, &svc).await {
        Ok(Op::Delete) => {
            forget_service(ctx, key);
            Ok(())
        }
        Ok(Op::Ensure) => Ok(()),
        Err(e @ Error::Waiting { .. }) => Err(e),
        Err(e) => {
            let message = format!("Error syncing load balancer: {}", ErrorChain(&e));
            ctx.recorder
                .publish(
                    &service_reference(&svc),
                    EventType::Warning,
                    "SyncLoadBalancerFailed",
                    &message,
                )
                .await;
            Err(e)
        }
    }
}

/// The Service is gone from the cluster: delete the load balancer of the version we processed last (upstream
/// `processServiceDeletion`; with the finalizer this only happens for Services created before it existed).
async fn process_service_deletion<P: CloudProvider>(ctx: &Ctx<P>, key: &ServiceKey) -> Result<(), Error> {
    if let Some(sink) = &ctx.config.plans {
        // A dry run: the Service is gone, so nothing is pending for it any more.
        sink.load_balancer(&key.to_string(), None);
        forget_service(ctx, key);
        return Ok(());
    }
    let cached = ctx.states.read(key, state::ServiceState::cached);
    let Some(cached) = cached else { return Ok(()) };
    if ctx.config.service_selector.is_some() && left_alone::left_the_selection(ctx, &cached).await? {
        tracing::info!(
            service = %key,
            "the Service left the controller's selector: its load balancer is left alone"
        );
        forget_service(ctx, key);
        return Ok(());
    }
    if let Some(lb) = ctx.provider.load_balancer() {
        delete_cached_load_balancer(ctx, lb, &cached, None, key).await?;
    }
    forget_service(ctx, key);
    Ok(())
}

/// Deletes the load balancer of `svc`, a Service no longer in the cluster, under the work queue key `key`; for
/// a predecessor, leaving alone what its live `successor` wants.
async fn delete_cached_load_balancer<P: CloudProvider>(
    ctx: &Ctx<P>,
    lb: &P::LoadBalancer,
    svc: &Service,
    successor: Option<&Service>,
    key: &ServiceKey,
) -> Result<(), Error> {
    if !wants_load_balancer(svc) {
        return Ok(());
    }
    match cleanup::delete_load_balancer(ctx, lb, svc, successor, key).await {
        Err(e @ Error::Cloud { .. }) => {
            let message = format!("Error deleting load balancer: {}", ErrorChain(&e));
            ctx.recorder
                .publish(
                    &service_reference(svc),
                    EventType::Warning,
                    "DeleteLoadBalancerFailed",
                    &message,
                )
                .await;
            Err(e)
        }
        other => other,
    }
}

fn stable_nodes<P: CloudProvider>(ctx: &Ctx<P>) -> Vec<Arc<CachedNode>> {
    ctx.nodes
        .state()
        .into_iter()
        .filter(|n| in_stable_node_set(n))
        .collect()
}

/// The endpoints of `svc` when the provider's load balancer follows them, else `None`. The first call starts the
/// EndpointSlice watch and waits for its first listing (see `EndpointSlices::of`).
async fn endpoints_for<P: CloudProvider>(
    ctx: &Ctx<P>,
    lb: &P::LoadBalancer,
    svc: &Service,
) -> Result<Option<Arc<ServiceEndpoints>>, Error> {
    if !lb.follows_endpoints(svc) {
        return Ok(None);
    }
    let namespace = svc.metadata.namespace.as_deref().unwrap_or_default();
    let name = svc.metadata.name.as_deref().unwrap_or_default();
    Ok(Some(Arc::new(ctx.endpoints.of(namespace, name).await?)))
}

/// The host set of `nodes`, one allocation for every Service given the same set: the set of 5,000 Nodes is
/// about 650 KB, and one copy per Service made the record of 1,000 Services weigh 650 MB.
fn shared_host_set<P: CloudProvider>(ctx: &Ctx<P>, nodes: &[&NodeView]) -> Arc<BTreeMap<String, Host>> {
    let hosts = hosts_of(nodes);
    let mut latest = lock(&ctx.latest_hosts);
    if **latest != hosts {
        *latest = Arc::new(hosts);
    }
    latest.clone()
}

/// Upstream `syncLoadBalancerIfNeeded`: the load balancer of `svc` ensured, or deleted when the Service no
/// longer wants it; in a dry run, planned instead.
async fn sync_load_balancer_if_needed<P: CloudProvider>(
    ctx: &Ctx<P>,
    lb: &P::LoadBalancer,
    svc: &Service,
) -> Result<Op, Error> {
    let key = ServiceKey::of(svc);
    let goes = !wants_load_balancer(svc) || needs_cleanup(svc);
    match (&ctx.config.plans, goes) {
        // A dry run: planned, never applied.
        (Some(sink), true) => plans::deletion(ctx, lb, svc, &key, sink.as_ref()).await,
        (Some(sink), false) => plans::ensure(ctx, lb, svc, &key, sink.as_ref()).await,
        (None, true) => {
            release_load_balancer(ctx, lb, svc, &key).await?;
            Ok(Op::Delete)
        }
        (None, false) => {
            ensure_load_balancer(ctx, lb, svc, &key).await?;
            Ok(Op::Ensure)
        }
    }
}

/// The load balancer of `svc` ensured and its status written.
async fn ensure_load_balancer<P: CloudProvider>(
    ctx: &Ctx<P>,
    lb: &P::LoadBalancer,
    svc: &Service,
    key: &ServiceKey,
) -> Result<(), Error> {
    match ensure::ensure(ctx, lb, svc, key).await? {
        Some(status) => update_status(ctx, svc, &status).await,
        // Served by another controller: its status is not ours to write.
        None => Ok(()),
    }
}

/// The load balancer of `svc`, which no longer wants it, deleted if it is ours; then its status cleared and our
/// finalizer released.
async fn release_load_balancer<P: CloudProvider>(
    ctx: &Ctx<P>,
    lb: &P::LoadBalancer,
    svc: &Service,
    key: &ServiceKey,
) -> Result<(), Error> {
    if is_ours(ctx, lb, svc, key).await? {
        cleanup::delete_load_balancer(ctx, lb, svc, None, key).await?;
    }
    // The status first: once the finalizer is gone the object may be too, and a Service that stays (its type
    // changed) must not show an address that no longer exists.
    update_status(ctx, svc, &LoadBalancerStatus::default()).await?;
    if has_finalizer(svc) {
        patch_finalizer(ctx, svc, false).await?;
    }
    Ok(())
}

/// Whether the provider is asked to delete the load balancer of `svc`. With our finalizer it always is, even
/// when the load balancer is gone: its groups and target groups may not be (upstream asks only when
/// `GetLoadBalancer` finds it, and so leaks them). Without it (a Service from before finalizers, or never ours)
/// upstream's check decides.
async fn is_ours<P: CloudProvider>(
    ctx: &Ctx<P>,
    lb: &P::LoadBalancer,
    svc: &Service,
    key: &ServiceKey,
) -> Result<bool, Error> {
    if has_finalizer(svc) {
        return Ok(true);
    }
    ctx.config.metrics.provider_call();
    lb.get_load_balancer(&ctx.config.cluster_name, svc)
        .await
        .map(|found| found.is_some())
        .map_err(|e| Error::cloud("failed to check if load balancer exists before cleanup", key, e))
}

/// Writes `status` unless the Service shows it already.
async fn update_status<P: CloudProvider>(
    ctx: &Ctx<P>,
    svc: &Service,
    status: &LoadBalancerStatus,
) -> Result<(), Error> {
    let shown = svc
        .status
        .as_ref()
        .and_then(|s| s.load_balancer.as_ref())
        .and_then(|l| l.ingress.as_ref());
    if ingress_equal(shown, status.ingress.as_ref()) {
        return Ok(());
    }
    patch_status(ctx, svc, status).await
}

#[cfg(test)]
mod tests;
