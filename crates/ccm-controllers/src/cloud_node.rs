//! The cloud-node controller: initializes Nodes that carry the `node.cloudprovider.kubernetes.io/uninitialized`
//! taint with what the provider knows (provider ID, addresses, instance type, zone, region, extra labels),
//! removes the taint once a provider ID is known, keeps zone/region/instance-type labels in step, and refreshes
//! addresses periodically.
//!
//! Beyond upstream: nodes that become pending together are collected for a short window and looked up with one
//! [`InstancesV2::instance_metadata_batch`](ccm_cloud_provider::InstancesV2::instance_metadata_batch) call, and
//! their API writes run concurrently, so a burst of N new nodes costs about N / `max_batch` provider calls.

use crate::CachedNode;
use std::{
    collections::{BTreeMap, HashMap, HashSet},
    future::Future,
    sync::{Arc, Mutex},
    time::Duration,
};

use ccm_cloud_provider::{CloudProvider, InstanceMetadata, Labels, NodeAddress, NodeView};
use futures::{StreamExt, stream};
use k8s_openapi::api::core::v1::Node;
use kube::{
    Api, Client,
    api::{Patch, PatchParams},
    runtime::{reflector::ObjectRef, reflector::Store, watcher},
};
use serde_json::json;

use labels::reconcile_labels;
pub use labels::{is_reserved_label, label_fixes};
pub use patch::initialization_patch;

use crate::{
    Backoff, Bootstrap, Clock, ControllerMetrics, Error, ErrorChain, WorkQueue,
    addresses::{addresses_for_node_ip, desired_addresses},
    error::is_conflict,
    events::{EventRecorder, EventType, node_reference},
    instances::{InstanceSource, name_of, provider_id_of},
    keys::*,
    run_until,
};

/// Settings of the cloud-node controller.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct CloudNodeConfig {
    /// How often initialized nodes' addresses are refreshed from the provider, counted from the end of the
    /// previous pass (`--node-status-update-frequency`, default 5 minutes).
    pub node_status_update_frequency: Duration,
    /// How many node writes (updates, status patches) run at once (`--concurrent-node-syncs`; default 1
    /// upstream, where it also bounds provider calls; here provider calls are batched, so the default is 10).
    pub concurrent_node_syncs: usize,
    /// How many nodes the periodic address refresh patches at once (`--concurrent-node-status-updates`;
    /// 0 means `concurrent_node_syncs`).
    pub concurrent_node_status_updates: usize,
    /// How long pending nodes are collected before one batch call (default 50 ms).
    pub batch_window: Duration,
    /// The most nodes in one provider batch call (default 1,000: one EC2 DescribeInstances takes 1,000 IDs, so a
    /// burst of 1,000 uninitialized nodes, as after a fail-over, costs one or two lookups).
    pub max_batch: usize,
    /// Only Nodes matching this label selector are handled (default: all). For tests that share a cluster and
    /// for staged roll-outs.
    pub node_selector: Option<String>,
    /// Counters, shared with whoever exports them.
    pub metrics: ControllerMetrics,
    /// The process's shared watches (one Node and one Service watch for every controller); `None` (the
    /// default): this controller watches on its own.
    pub informers: Option<crate::Informers>,
    /// Wall-clock time for Event timestamps.
    pub clock: Clock,
    /// The longest the sync of one batch may take; a batch still syncing then is abandoned (its provider and
    /// API calls cancelled) and its nodes retried with backoff (default 5 minutes).
    pub sync_deadline: Duration,
}

impl Default for CloudNodeConfig {
    fn default() -> Self {
        Self {
            node_status_update_frequency: Duration::from_secs(300),
            concurrent_node_syncs: 10,
            concurrent_node_status_updates: 0,
            batch_window: Duration::from_millis(50),
            max_batch: 1000,
            node_selector: None,
            metrics: ControllerMetrics::default(),
            informers: None,
            clock: Clock::system(),
            sync_deadline: Duration::from_secs(300),
        }
    }
}

struct Ctx<P: CloudProvider> {
    client: Client,
    provider: Arc<P>,
    config: CloudNodeConfig,
    store: Store<CachedNode>,
    queue: WorkQueue,
    backoff: Backoff,
    recorder: EventRecorder,
    /// Resource versions of tainted nodes this controller already replaced: a store that still shows one of
    /// them lags behind, and the newer version's event is on its way.
    superseded: Mutex<HashMap<String, HashSet<String>>>,
    /// Nodes whose instance the provider does not count as the cluster's, with the provider's reason.
    not_in_cluster: Mutex<BTreeMap<String, String>>,
}

/// Runs the cloud-node controller until `shutdown` completes.
///
/// Returns [`Error::Unsupported`] at once if the provider has neither `InstancesV2` nor `Instances`.
pub async fn run<P: CloudProvider>(
    client: Client,
    provider: Arc<P>,
    config: CloudNodeConfig,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), Error> {
    if InstanceSource::of(provider.as_ref()).is_none() {
        return Err(Error::Unsupported {
            capability: "instances",
        });
    }
    let boot = Bootstrap::new(
        client,
        "cloud-node-controller",
        config.clock.clone(),
        config.metrics.clone(),
    )
    .with_informers(config.informers.clone());
    let nodes = boot.informer::<CachedNode>(config.node_selector.as_deref());
    let queue_with_depth = WorkQueue::with_metrics(config.metrics.clone());
    let ctx = Arc::new(Ctx {
        client: boot.client,
        provider,
        config,
        store: nodes.store(),
        queue: queue_with_depth,
        backoff: Backoff::new(Duration::from_millis(5), Duration::from_secs(1000)),
        recorder: boot.recorder,
        superseded: Mutex::default(),
        not_in_cluster: Mutex::default(),
    });
    let queue = ctx.queue.clone();
    let watch = nodes.run(move |event| match event {
        watcher::Event::Apply(node) | watcher::Event::InitApply(node) => queue.add(name_of(&node)),
        // A deleted Node leaves the store: its sync forgets what was known of it.
        watcher::Event::Delete(node) => queue.add(name_of(&node)),
        _ => {}
    });
    let work = async {
        if ctx.store.wait_until_ready().await.is_err() {
            return;
        }
        tokio::join!(worker(&ctx), status_loop(&ctx));
    };
    run_until(shutdown, watch, work).await;
    ctx.queue.shut_down();
    Ok(())
}

/// Takes batches off the queue in two stages: the provider lookup of a batch runs while the Kubernetes writes of
/// the batch before it do. The writes are a burst's floor; a lookup that waits (a page of a cluster listing
/// takes seconds) would otherwise hold them, batch after batch. At most one batch waits between the stages.
async fn worker<P: CloudProvider>(ctx: &Ctx<P>) {
    let (looked_up, mut to_write) = tokio::sync::mpsc::channel::<(Vec<String>, LookedUp)>(1);
    let lookups = async move {
        while let Some(batch) = ctx
            .queue
            .next_batch(ctx.config.max_batch, ctx.config.batch_window)
            .await
        {
            // Boxed: a provider's lookup may be a large future; this task's stack holds both stages.
            match within_deadline(ctx, &batch, Box::pin(look_up(ctx, &batch))).await {
                Some(found) => {
                    if let Err(returned) = looked_up.send((batch, found)).await {
                        done(ctx, &returned.0.0);
                    }
                }
                None => done(ctx, &batch),
            }
        }
    };
    let writes = async {
        while let Some((batch, found)) = to_write.recv().await {
            within_deadline(ctx, &batch, Box::pin(write(ctx, found))).await;
            done(ctx, &batch);
        }
    };
    tokio::join!(lookups, writes);
}

fn done<P: CloudProvider>(ctx: &Ctx<P>, batch: &[String]) {
    for name in batch {
        ctx.queue.done(name);
    }
}

/// Runs one stage of a batch, abandoned if it outlasts `sync_deadline` (a provider or apiserver that stopped
/// answering must not hold the worker): its nodes are then retried with backoff, and `None` returned.
async fn within_deadline<P: CloudProvider, T>(
    ctx: &Ctx<P>,
    batch: &[String],
    stage: impl Future<Output = T>,
) -> Option<T> {
    let deadline = ctx.config.sync_deadline;
    if let Ok(out) = tokio::time::timeout(deadline, stage).await {
        return Some(out);
    }
    ctx.config.metrics.error();
    tracing::warn!(
        ?deadline,
        nodes = batch.len(),
        "node sync exceeded its deadline; abandoned, retrying"
    );
    for name in batch {
        ctx.queue.add_after(name, ctx.backoff.next(name));
    }
    None
}

fn has_cloud_taint(node: &NodeView) -> bool {
    node.taints.iter().any(|t| t.key == TAINT_UNINITIALIZED)
}

fn superseded<P: CloudProvider>(ctx: &Ctx<P>, node: &NodeView) -> bool {
    let mut map = ctx
        .superseded
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if !has_cloud_taint(node) {
        map.remove(name_of(node));
        return false;
    }
    let rv = node.resource_version.as_deref().unwrap_or_default();
    map.get(name_of(node)).is_some_and(|set| set.contains(rv))
}

/// The provider's answer for one uninitialized node.
type Answer = Result<Option<InstanceMetadata>, ccm_cloud_provider::CloudError>;

/// What the lookup stage of a batch found: its initialized nodes (their labels only are reconciled) and its
/// uninitialized ones with the provider's answers.
#[derive(Default)]
struct LookedUp {
    initialized: Vec<Arc<CachedNode>>,
    pending: Vec<(Arc<CachedNode>, Answer)>,
    require_provider_id: bool,
}

/// The lookup stage: sorts a batch's nodes and makes one batched provider lookup for the uninitialized ones.
async fn look_up<P: CloudProvider>(ctx: &Ctx<P>, names: &[String]) -> LookedUp {
    let mut out = LookedUp::default();
    let mut pending = Vec::new();
    for name in names {
        let Some(node) = ctx.store.get(&ObjectRef::new(name)) else {
            ctx.backoff.forget(name);
            forget_membership(ctx, name);
            continue;
        };
        if !has_cloud_taint(&node) {
            superseded(ctx, &node);
            out.initialized.push(node);
        } else if !superseded(ctx, &node) {
            pending.push(node);
        }
    }
    let Some(source) = InstanceSource::of(ctx.provider.as_ref()) else {
        return out;
    };
    out.require_provider_id = source.is_v2();
    for chunk in pending.chunks(ctx.config.max_batch.max(1)) {
        let refs: Vec<&NodeView> = chunk.iter().map(|n| n.view()).collect();
        let results = source.metadata(&refs, &ctx.config.metrics).await;
        out.pending.extend(chunk.iter().cloned().zip(results));
    }
    out
}

/// The write stage: label reconciliation for initialized nodes, concurrent updates for uninitialized ones.
async fn write<P: CloudProvider>(ctx: &Ctx<P>, found: LookedUp) {
    let concurrency = ctx.config.concurrent_node_syncs.max(1);
    stream::iter(found.initialized)
        .for_each_concurrent(concurrency, |node| async move {
            let result = reconcile_labels(ctx, &node).await;
            finish(ctx, name_of(&node), result);
        })
        .await;
    let require_provider_id = found.require_provider_id;
    stream::iter(found.pending)
        .for_each_concurrent(concurrency, |(node, result)| async move {
            let result = match result {
                Err(e) => Err(Error::cloud("failed to get instance metadata", name_of(&node), e)),
                Ok(None) => {
                    tracing::info!(
                        node = name_of(&node),
                        "skip sync node: the provider returned nil metadata"
                    );
                    Ok(())
                }
                Ok(Some(meta)) => initialize(ctx, &node, meta, require_provider_id).await,
            };
            finish(ctx, name_of(&node), result);
        })
        .await;
}

fn finish<P: CloudProvider>(ctx: &Ctx<P>, name: &str, result: Result<(), Error>) {
    ctx.config.metrics.reconcile();
    match result {
        Ok(()) => ctx.backoff.forget(name),
        Err(error) => {
            ctx.config.metrics.error();
            let delay = error.retry_delay(&ctx.backoff, name);
            tracing::warn!(node = name, error = %ErrorChain(&error), ?delay, "failed to sync node; retrying");
            ctx.queue.add_after(name, delay);
        }
    }
}

/// The Node with the provider's metadata applied and the uninitialized taint removed (upstream `syncNode`'s
/// modifiers). `meta.provider_id` must already be resolved. Fails, leaving the taint, when the provided node
/// IP does not fit the cloud's addresses.
pub fn initialize_node(node: &NodeView, meta: &InstanceMetadata) -> Result<NodeView, Error> {
    let name = name_of(node).to_owned();
    let mut new = node.clone();
    if new.provider_id.as_deref().unwrap_or_default().is_empty() && !meta.provider_id.is_empty() {
        new.provider_id = Some(meta.provider_id.clone());
    }
    if let Some(provided) = node.provided_node_ip.as_ref() {
        addresses_for_node_ip(provided, &meta.node_addresses).map_err(|source| Error::NodeIp {
            node: name.clone(),
            source,
        })?;
    }
    let mut labels = node.labels.to_map();
    let mut set = |keys: [&str; 2], value: &str| {
        if !value.is_empty() {
            for k in keys {
                labels.insert(k.to_owned(), value.to_owned());
            }
        }
    };
    set(
        [LABEL_INSTANCE_TYPE, LABEL_INSTANCE_TYPE_BETA],
        &meta.instance_type,
    );
    set([LABEL_ZONE, LABEL_ZONE_BETA], &meta.zone);
    set([LABEL_REGION, LABEL_REGION_BETA], &meta.region);
    for (k, v) in &meta.additional_labels {
        if is_reserved_label(k) {
            tracing::warn!(
                node = name,
                label = k,
                "discarding additional label in a reserved namespace"
            );
        } else if let Some(existing) = labels.get(k) {
            if existing != v {
                tracing::warn!(
                    node = name,
                    label = k,
                    "keeping the node's value of an additional label"
                );
            }
        } else {
            labels.insert(k.clone(), v.clone());
        }
    }
    new.labels = Labels::from(&labels);
    new.taints.retain(|t| t.key != TAINT_UNINITIALIZED);
    Ok(new)
}

/// Resolves the provider ID to write: the metadata's, else the node's; with InstancesV2 one is required.
pub fn resolve_provider_id(node: &NodeView, meta: &mut InstanceMetadata, require: bool) -> Result<(), Error> {
    if meta.provider_id.is_empty() {
        let existing = provider_id_of(node);
        if existing.is_empty() {
            if require {
                return Err(Error::MissingProviderId {
                    node: name_of(node).to_owned(),
                });
            }
        } else {
            meta.provider_id = existing.to_owned();
        }
    }
    Ok(())
}

async fn initialize<P: CloudProvider>(
    ctx: &Ctx<P>,
    node: &NodeView,
    mut meta: InstanceMetadata,
    require_provider_id: bool,
) -> Result<(), Error> {
    let name = name_of(node);
    resolve_provider_id(node, &mut meta, require_provider_id)?;
    let api = Api::<Node>::all(ctx.client.clone());
    let mut base = node.clone();
    let mut attempt = 0;
    let updated = loop {
        let patch = initialization_patch(&base, &initialize_node(&base, &meta)?);
        ctx.config.metrics.api_write();
        match api
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(updated) => break NodeView::from(updated),
            Err(e) if is_conflict(&e) && attempt < 20 => {
                attempt += 1;
                base = api
                    .get(name)
                    .await
                    .map(NodeView::from)
                    .map_err(|e| Error::kube("failed to get node", name, e))?;
                if !has_cloud_taint(&base) {
                    break base.clone();
                }
            }
            Err(e) => return Err(Error::kube("failed to update node", name, e)),
        }
    };
    {
        let mut map = ctx
            .superseded
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let set = map.entry(name.to_owned()).or_default();
        set.extend(node.resource_version.clone());
        set.extend(base.resource_version.clone());
    }
    update_addresses(ctx, &updated, &meta.node_addresses).await;
    note_membership(ctx, &updated, &meta).await;
    tracing::info!(node = name, "successfully initialized node with cloud provider");
    ctx.recorder
        .publish(
            &node_reference(&updated),
            EventType::Normal,
            "Synced",
            "Node synced successfully",
        )
        .await;
    Ok(())
}

/// Writes the node's addresses if they changed; errors are logged (upstream `updateNodeAddress`).
async fn update_addresses<P: CloudProvider>(ctx: &Ctx<P>, node: &NodeView, cloud: &[NodeAddress]) {
    if has_cloud_taint(node) {
        return;
    }
    let Some(addresses) = desired_addresses(node, cloud) else {
        return;
    };
    let addresses: Vec<_> = addresses.iter().map(NodeAddress::to_k8s).collect();
    let patch = json!({ "status": { "addresses": addresses } });
    ctx.config.metrics.api_write();
    if let Err(error) = Api::<Node>::all(ctx.client.clone())
        .patch_status(name_of(node), &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        tracing::warn!(node = name_of(node), %error, "failed to update node addresses");
    }
}

/// Notes whether `node`'s instance is the cluster's: a Warning Event (`InstanceNotInCluster`, the provider's
/// reason) the first time it is not and when the reason changes, and the count behind the
/// `nodes_not_in_cluster` gauge. Beyond upstream: a Node forged with another system's provider ID is visible.
async fn note_membership<P: CloudProvider>(ctx: &Ctx<P>, node: &NodeView, meta: &InstanceMetadata) {
    let name = name_of(node);
    let news = {
        let mut outside = ctx
            .not_in_cluster
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let news = match &meta.not_in_cluster {
            Some(why) => outside.insert(name.to_owned(), why.clone()).as_ref() != Some(why),
            None => {
                outside.remove(name);
                false
            }
        };
        ctx.config.metrics.set_nodes_not_in_cluster(outside.len());
        news
    };
    if let Some(why) = meta.not_in_cluster.as_deref().filter(|_| news) {
        tracing::warn!(
            node = name,
            reason = why,
            "the node's instance is not the cluster's: nothing is changed for it"
        );
        ctx.recorder
            .publish(
                &node_reference(node),
                EventType::Warning,
                "InstanceNotInCluster",
                why,
            )
            .await;
    }
}

/// Drops a deleted Node from the count of Nodes outside the cluster.
fn forget_membership<P: CloudProvider>(ctx: &Ctx<P>, name: &str) {
    let mut outside = ctx
        .not_in_cluster
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if outside.remove(name).is_some() {
        ctx.config.metrics.set_nodes_not_in_cluster(outside.len());
    }
}

/// The periodic address refresh: a first pass at once (as upstream's `wait.Until`), then one every
/// `node_status_update_frequency` after the last. The first pass shows the provider every initialized Node right
/// after a start or a fail-over, those that no other controller hands it included (a Node excluded from load
/// balancers): a provider that refuses a Node naming an older Node's instance must know the older one.
async fn status_loop<P: CloudProvider>(ctx: &Ctx<P>) {
    loop {
        update_node_status(ctx).await;
        tokio::time::sleep(ctx.config.node_status_update_frequency).await;
    }
}

/// One pass of the periodic address refresh over the initialized nodes, in batches.
async fn update_node_status<P: CloudProvider>(ctx: &Ctx<P>) {
    let Some(source) = InstanceSource::of(ctx.provider.as_ref()) else {
        return;
    };
    let nodes: Vec<Arc<CachedNode>> = ctx
        .store
        .state()
        .into_iter()
        .filter(|n| !has_cloud_taint(n))
        .collect();
    {
        // Nodes deleted since: no longer counted.
        let mut outside = ctx
            .not_in_cluster
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        outside.retain(|name, _| ctx.store.get(&ObjectRef::new(name)).is_some());
        ctx.config.metrics.set_nodes_not_in_cluster(outside.len());
    }
    let workers = match ctx.config.concurrent_node_status_updates {
        0 => ctx.config.concurrent_node_syncs.max(1),
        n => n,
    };
    for chunk in nodes.chunks(ctx.config.max_batch.max(1)) {
        let refs: Vec<&NodeView> = chunk.iter().map(|n| n.view()).collect();
        let results = source.addresses(&refs, &ctx.config.metrics).await;
        stream::iter(chunk.iter().zip(results))
            .for_each_concurrent(workers, |(node, result)| async move {
                match result {
                    Ok(Some(meta)) => {
                        update_addresses(ctx, node, &meta.node_addresses).await;
                        note_membership(ctx, node, &meta).await;
                    }
                    Ok(None) => {}
                    Err(error) => {
                        tracing::warn!(node = name_of(node), %error, "failed to get node addresses")
                    }
                }
            })
            .await;
    }
    tracing::debug!(nodes = nodes.len(), "updated node addresses");
}

mod labels;
mod patch;
#[cfg(test)]
mod tests;
