//! The cloud node-lifecycle controller: every `node_monitor_period`, looks at NotReady nodes and deletes those
//! whose instance no longer exists, taints shut-down ones with `node.cloudprovider.kubernetes.io/shutdown`, and
//! removes that taint once a node is Ready again.
//!
//! Beyond upstream: the existence and shutdown lookups of all NotReady nodes of a pass are batched
//! ([`InstancesV2::instance_exists_batch`](ccm_cloud_provider::InstancesV2::instance_exists_batch) and
//! `instance_shutdown_batch`), so a pass costs two provider calls per `max_batch` NotReady nodes, not two per node.
//!
//! Deleting a Node is never done on thin evidence (upstream deletes at the first "not found"):
//! - the instance must have been seen gone on two passes at least one monitor period apart, unless the Node is
//!   older than `deletion_grace_period` (EC2 reads are eventually consistent right after `RunInstances`, so a
//!   young instance can briefly read as missing);
//! - a pass deletes at most `max_deletion_percent` of the Nodes (at least one); the rest wait for later passes
//!   and a Warning Event `NodeDeletionCapped` says so (a provider answering "gone" for everything must not
//!   empty the cluster at once);
//! - the DELETE carries the UID and resourceVersion that were read, so a Node re-registered under the same name
//!   (or changed) in between is not removed;
//! - a provider error (a malformed provider ID included) is an error, never "gone".

use crate::CachedNode;
use ccm_cloud_provider::NodeView;
use std::{
    collections::HashMap,
    future::Future,
    sync::{Arc, Mutex, PoisonError},
    time::Duration,
};

use ccm_cloud_provider::CloudProvider;
use futures::{StreamExt, stream};
use k8s_openapi::api::core::v1::{Node, Taint};
use kube::{
    Api, Client,
    api::{DeleteParams, Patch, PatchParams, Preconditions},
    runtime::reflector::Store,
};
use serde_json::json;
use tokio::time::Instant;

use crate::{
    Bootstrap, Clock, ControllerMetrics, Error, ErrorChain,
    error::{is_conflict, is_not_found},
    events::{EventRecorder, EventType, node_reference},
    instances::{InstanceSource, name_of},
    keys::TAINT_SHUTDOWN,
    run_until,
};

/// Settings of the node-lifecycle controller.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct NodeLifecycleConfig {
    /// Time between the end of one pass and the start of the next (`--node-monitor-period`, default 5 s).
    pub node_monitor_period: Duration,
    /// The most nodes in one provider batch call (default 200).
    pub max_batch: usize,
    /// How many node writes run at once (default 10).
    pub concurrency: usize,
    /// Only Nodes matching this label selector are handled (default: all).
    pub node_selector: Option<String>,
    /// Counters, shared with whoever exports them.
    pub metrics: ControllerMetrics,
    /// The process's shared watches (one Node and one Service watch for every controller); `None` (the
    /// default): this controller watches on its own.
    pub informers: Option<crate::Informers>,
    /// Wall-clock time for Event timestamps and Node ages.
    pub clock: Clock,
    /// A Node at least this old (by `creationTimestamp`) is deleted on the first pass that finds its instance
    /// gone; a younger one only once a second pass, at least one monitor period later, finds it gone too
    /// (default 5 minutes).
    pub deletion_grace_period: Duration,
    /// The most Nodes one pass deletes, in percent of the Nodes handled; at least one (default 10).
    pub max_deletion_percent: u32,
    /// The longest one pass may take; a pass still running then is abandoned (its provider and API calls
    /// cancelled) and the next one starts after the monitor period (default 5 minutes).
    pub pass_deadline: Duration,
}

impl Default for NodeLifecycleConfig {
    fn default() -> Self {
        Self {
            node_monitor_period: Duration::from_secs(5),
            max_batch: 200,
            concurrency: 10,
            node_selector: None,
            metrics: ControllerMetrics::default(),
            informers: None,
            clock: Clock::system(),
            deletion_grace_period: Duration::from_secs(300),
            max_deletion_percent: 10,
            pass_deadline: Duration::from_secs(300),
        }
    }
}

/// What a pass does to one node, given its readiness and the provider's answers.
#[derive(Debug, Clone, PartialEq)]
pub enum LifecycleAction {
    /// Nothing.
    None,
    /// Delete the Node: it is not Ready and its instance is gone.
    Delete,
    /// Set these taints (the shutdown taint added or removed).
    SetTaints(Vec<Taint>),
}

/// The status of the node's Ready condition; `Unknown` when it has none.
pub fn ready_status(node: &NodeView) -> &str {
    node.condition("Ready").unwrap_or("Unknown")
}

fn taints(node: &NodeView) -> Vec<Taint> {
    node.taints.clone()
}

fn is_shutdown_taint(t: &Taint) -> bool {
    t.key == TAINT_SHUTDOWN && t.effect == "NoSchedule"
}

/// For a Ready node: remove the shutdown taint if present.
pub fn ready_action(node: &NodeView) -> LifecycleAction {
    let current = taints(node);
    if current.iter().any(is_shutdown_taint) {
        LifecycleAction::SetTaints(current.into_iter().filter(|t| !is_shutdown_taint(t)).collect())
    } else {
        LifecycleAction::None
    }
}

/// For a NotReady node, given whether its instance exists and (if it does) whether it is shut down.
pub fn not_ready_action(node: &NodeView, exists: bool, shutdown: bool) -> LifecycleAction {
    if !exists {
        return LifecycleAction::Delete;
    }
    let current = taints(node);
    if shutdown && !current.iter().any(is_shutdown_taint) {
        let mut new = current;
        new.push(Taint {
            key: TAINT_SHUTDOWN.to_owned(),
            effect: "NoSchedule".to_owned(),
            ..Default::default()
        });
        LifecycleAction::SetTaints(new)
    } else {
        LifecycleAction::None
    }
}

struct Ctx<P: CloudProvider> {
    client: Client,
    provider: Arc<P>,
    config: NodeLifecycleConfig,
    store: Store<CachedNode>,
    recorder: EventRecorder,
    /// When each Node (by UID) was first found gone, for Nodes found gone on every pass since.
    gone_since: Mutex<HashMap<String, Instant>>,
}

/// What a pass does about the Nodes whose instances are gone.
#[derive(Debug, Default)]
pub(crate) struct DeletionPlan {
    /// Confirmed gone, within the cap: deleted now.
    pub(crate) delete: Vec<Arc<CachedNode>>,
    /// Confirmed gone, over the cap: left for later passes.
    pub(crate) deferred: Vec<Arc<CachedNode>>,
    /// The most deletions of this pass.
    pub(crate) cap: usize,
}

/// The key a Node's first "gone" sighting is kept under: its UID, so that a Node re-registered under the same
/// name starts over.
fn key_of(node: &NodeView) -> String {
    node.uid.clone().unwrap_or_else(|| name_of(node).to_owned())
}

/// Whether the Node was created at least `grace` before `now` (a Node without a creation time is young).
fn older_than(
    node: &NodeView,
    now: &k8s_openapi::apimachinery::pkg::apis::meta::v1::Time,
    grace: Duration,
) -> bool {
    node.creation_timestamp
        .as_ref()
        .and_then(|created| Duration::try_from(now.0.duration_since(created.0)).ok())
        .is_some_and(|age| age >= grace)
}

/// The most Nodes one pass may delete: `percent` of `total`, at least one.
pub(crate) fn deletion_cap(total: usize, percent: u32) -> usize {
    let percent = usize::try_from(percent).unwrap_or(usize::MAX);
    (total.saturating_mul(percent) / 100).max(1)
}

/// Decides which of the Nodes found `gone` in this pass are deleted. `since` (first sighting per Node) is
/// rewritten to hold the Nodes gone now, plus those whose lookup failed this pass (`unknown`): an error
/// neither confirms nor clears a sighting. `total` is the number of Nodes handled, for the cap.
pub(crate) fn plan_deletions(
    gone: Vec<Arc<CachedNode>>,
    unknown: &[String],
    since: &mut HashMap<String, Instant>,
    now: Instant,
    config: &NodeLifecycleConfig,
    total: usize,
) -> DeletionPlan {
    let mut next: HashMap<String, Instant> = unknown
        .iter()
        .filter_map(|k| since.get(k).map(|at| (k.clone(), *at)))
        .collect();
    let wall = config.clock.now();
    let mut confirmed = Vec::new();
    for node in gone {
        let key = key_of(&node);
        let first = since.get(&key).copied();
        next.insert(key, first.unwrap_or(now));
        let seen_twice = first.is_some_and(|at| now.duration_since(at) >= config.node_monitor_period);
        if seen_twice || older_than(&node, &wall, config.deletion_grace_period) {
            confirmed.push(node);
        }
    }
    *since = next;
    confirmed.sort_by(|a, b| name_of(a).cmp(name_of(b)));
    let cap = deletion_cap(total, config.max_deletion_percent);
    let deferred = confirmed.split_off(cap.min(confirmed.len()));
    DeletionPlan {
        delete: confirmed,
        deferred,
        cap,
    }
}

/// Runs the node-lifecycle controller until `shutdown` completes.
///
/// Returns [`Error::Unsupported`] at once if the provider has neither `InstancesV2` nor `Instances`.
pub async fn run<P: CloudProvider>(
    client: Client,
    provider: Arc<P>,
    config: NodeLifecycleConfig,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), Error> {
    if InstanceSource::of(provider.as_ref()).is_none() {
        return Err(Error::Unsupported {
            capability: "instances",
        });
    }
    let boot = Bootstrap::new(
        client,
        "cloud-node-lifecycle-controller",
        config.clock.clone(),
        config.metrics.clone(),
    )
    .with_informers(config.informers.clone());
    let nodes = boot.informer::<CachedNode>(config.node_selector.as_deref());
    let ctx = Ctx {
        client: boot.client,
        provider,
        config,
        store: nodes.store(),
        recorder: boot.recorder,
        gone_since: Mutex::default(),
    };
    let work = async {
        if ctx.store.wait_until_ready().await.is_err() {
            return;
        }
        loop {
            monitor_within_deadline(&ctx).await;
            tokio::time::sleep(ctx.config.node_monitor_period).await;
        }
    };
    run_until(shutdown, nodes.run(|_| {}), work).await;
    Ok(())
}

/// One pass, abandoned if it outlasts `pass_deadline` (a provider or apiserver that stopped answering must not
/// stop every later pass); `false` when it was.
async fn monitor_within_deadline<P: CloudProvider>(ctx: &Ctx<P>) -> bool {
    let deadline = ctx.config.pass_deadline;
    if tokio::time::timeout(deadline, monitor_nodes(ctx)).await.is_ok() {
        return true;
    }
    ctx.config.metrics.error();
    tracing::warn!(?deadline, "node lifecycle pass exceeded its deadline; abandoned");
    false
}

/// One pass over all nodes.
async fn monitor_nodes<P: CloudProvider>(ctx: &Ctx<P>) {
    let Some(source) = InstanceSource::of(ctx.provider.as_ref()) else {
        return;
    };
    ctx.config.metrics.reconcile();
    let nodes = ctx.store.state();
    let total = nodes.len();
    let (ready, not_ready): (Vec<_>, Vec<_>) = nodes.into_iter().partition(|n| ready_status(n) == "True");
    let mut pass = Pass {
        actions: ready.into_iter().map(|n| (n.clone(), ready_action(&n))).collect(),
        ..Pass::default()
    };
    for chunk in not_ready.chunks(ctx.config.max_batch.max(1)) {
        check_not_ready(ctx, &source, chunk, &mut pass).await;
    }
    let plan = {
        let mut since = ctx.gone_since.lock().unwrap_or_else(PoisonError::into_inner);
        plan_deletions(
            pass.gone,
            &pass.unknown,
            &mut since,
            Instant::now(),
            &ctx.config,
            total,
        )
    };
    if let Some(first) = plan.deferred.first() {
        report_capped(ctx, first, plan.deferred.len(), plan.cap, total).await;
    }
    let mut actions = pass.actions;
    actions.extend(plan.delete.into_iter().map(|n| (n, LifecycleAction::Delete)));
    stream::iter(actions)
        .for_each_concurrent(ctx.config.concurrency.max(1), |(node, action)| async move {
            if let Err(error) = apply(ctx, &node, action).await {
                ctx.config.metrics.error();
                tracing::warn!(node = name_of(&node), error = %ErrorChain(&error), "node lifecycle action failed");
            }
        })
        .await;
}

/// What the lookups of one pass found.
#[derive(Default)]
struct Pass {
    /// Taint changes (and nothing-to-dos) per Node.
    actions: Vec<(Arc<CachedNode>, LifecycleAction)>,
    /// Nodes whose instance is gone: deletion candidates.
    gone: Vec<Arc<CachedNode>>,
    /// Keys of the Nodes whose existence could not be told.
    unknown: Vec<String>,
}

/// Asks the provider whether the instances of one batch of NotReady Nodes exist and, for those that do, whether
/// they are shut down.
async fn check_not_ready<P: CloudProvider>(
    ctx: &Ctx<P>,
    source: &InstanceSource<'_, P>,
    chunk: &[Arc<CachedNode>],
    pass: &mut Pass,
) {
    let refs: Vec<&NodeView> = chunk.iter().map(|n| n.view()).collect();
    let exists = source.exists(&refs, &ctx.config.metrics).await;
    let mut existing = Vec::new();
    for (node, exists) in chunk.iter().zip(exists) {
        match exists {
            Ok(true) => existing.push(node.clone()),
            Ok(false) => pass.gone.push(node.clone()),
            Err(error) => {
                ctx.config.metrics.error();
                pass.unknown.push(key_of(node));
                tracing::warn!(node = name_of(node), error = %ErrorChain(&error), "error checking if node exists");
            }
        }
    }
    if existing.is_empty() {
        return;
    }
    let refs: Vec<&NodeView> = existing.iter().map(|n| n.view()).collect();
    let shutdown = source.shutdown(&refs, &ctx.config.metrics).await;
    for (node, shutdown) in existing.iter().zip(shutdown) {
        match shutdown {
            Ok(shutdown) => pass
                .actions
                .push((node.clone(), not_ready_action(node, true, shutdown))),
            Err(error) => {
                ctx.config.metrics.error();
                tracing::warn!(node = name_of(node), error = %ErrorChain(&error), "error checking if node is shut down");
            }
        }
    }
}

/// Says that deletions were held back by the cap: a log line and a Warning Event on the first deferred Node.
async fn report_capped<P: CloudProvider>(
    ctx: &Ctx<P>,
    first: &NodeView,
    deferred: usize,
    cap: usize,
    total: usize,
) {
    let percent = ctx.config.max_deletion_percent;
    tracing::warn!(
        deferred,
        cap,
        nodes = total,
        "more nodes have gone instances than one pass may delete; deferring the rest"
    );
    let message = format!(
        "Deferred the deletion of {deferred} nodes whose instances do not exist in the cloud provider: at most \
         {cap} nodes ({percent}% of {total}, at least one) are deleted per pass"
    );
    ctx.recorder
        .publish(
            &node_reference(first),
            EventType::Warning,
            "NodeDeletionCapped",
            &message,
        )
        .await;
}

async fn apply<P: CloudProvider>(
    ctx: &Ctx<P>,
    node: &NodeView,
    action: LifecycleAction,
) -> Result<(), Error> {
    let name = name_of(node);
    let api = Api::<Node>::all(ctx.client.clone());
    match action {
        LifecycleAction::None => Ok(()),
        LifecycleAction::Delete => {
            let reference = node_reference(node);
            let message = format!("Deleting node {name} because it does not exist in the cloud provider");
            tracing::info!(
                node = name,
                "deleting node: its instance does not exist in the cloud provider"
            );
            ctx.recorder
                .publish(&reference, EventType::Normal, "DeletingNode", &message)
                .await;
            ctx.config.metrics.api_write();
            // The UID and resourceVersion that were judged: a Node re-registered under this name, or changed
            // since, is left for the next pass to judge again.
            let params = DeleteParams {
                preconditions: Some(Preconditions {
                    uid: node.uid.clone(),
                    resource_version: node.resource_version.clone(),
                }),
                ..DeleteParams::default()
            };
            match api.delete(name, &params).await {
                Ok(_) => Ok(()),
                Err(e) if is_not_found(&e) => Ok(()),
                Err(e) if is_conflict(&e) => {
                    tracing::info!(node = name, error = %e, "node changed since it was read; not deleted");
                    Ok(())
                }
                Err(e) => {
                    let message = format!("Failed deleting node {name}: {e}");
                    ctx.recorder
                        .publish(&reference, EventType::Warning, "DeletingNodeFailed", &message)
                        .await;
                    Err(Error::kube("failed to delete node", name, e))
                }
            }
        }
        LifecycleAction::SetTaints(taints) => set_taints(ctx, &api, node, taints).await,
    }
}

/// Writes `taints` onto `node`, guarded by the resourceVersion read. On a conflict the Node is read again and
/// the write decided again from what was read ([`retry_action`]).
async fn set_taints<P: CloudProvider>(
    ctx: &Ctx<P>,
    api: &Api<Node>,
    node: &NodeView,
    taints: Vec<Taint>,
) -> Result<(), Error> {
    let name = name_of(node);
    let mut rv = node.resource_version.clone();
    let mut taints = taints;
    for attempt in 0..5 {
        let patch = json!({ "metadata": { "resourceVersion": rv }, "spec": { "taints": taints } });
        ctx.config.metrics.api_write();
        match api
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => return Ok(()),
            Err(e) if is_conflict(&e) && attempt < 4 => {
                let fresh = api
                    .get(name)
                    .await
                    .map(NodeView::from)
                    .map_err(|e| Error::kube("failed to get node", name, e))?;
                let LifecycleAction::SetTaints(t) = retry_action(node, &fresh) else {
                    return Ok(());
                };
                taints = t;
                rv = fresh.resource_version;
            }
            Err(e) => return Err(Error::kube("failed to update node taints", name, e)),
        }
    }
    Ok(())
}

/// What a taint write on `judged` that met a conflict becomes, given `fresh`, the Node read back: its readiness
/// may have changed meanwhile (a Node Ready again must not get the shutdown taint). A Ready Node only loses the
/// taint, as on any pass. A NotReady one is tainted only if `judged` was NotReady too: a taint write for a
/// NotReady Node means the provider answered "shut down", which still holds; for a Node judged Ready the
/// provider was never asked, so it is left to the next pass.
fn retry_action(judged: &NodeView, fresh: &NodeView) -> LifecycleAction {
    if ready_status(fresh) == "True" {
        ready_action(fresh)
    } else if ready_status(judged) == "True" {
        LifecycleAction::None
    } else {
        not_ready_action(fresh, true, true)
    }
}

#[cfg(test)]
mod tests;
