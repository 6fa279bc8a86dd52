//! The cloud node-lifecycle controller: every `node_monitor_period`, looks at NotReady nodes and deletes those
//! whose instance no longer exists, taints shut-down ones with `node.cloudprovider.kubernetes.io/shutdown`, and
//! removes that taint once a node is Ready again.
//!
//! Beyond upstream: the existence and shutdown lookups of all NotReady nodes of a pass are batched
//! ([`InstancesV2::instance_exists_batch`](ccm_cloud_provider::InstancesV2::instance_exists_batch) and
//! `instance_shutdown_batch`), so a pass costs two provider calls per `max_batch` NotReady nodes, not two per node.

use std::{future::Future, sync::Arc, time::Duration};

use ccm_cloud_provider::CloudProvider;
use futures::{StreamExt, stream};
use k8s_openapi::api::core::v1::{Node, Taint};
use kube::{
    Api, Client,
    api::{DeleteParams, Patch, PatchParams},
    runtime::{reflector, reflector::Store},
};
use serde_json::json;

use crate::{
    Clock, ControllerMetrics, Error,
    cloud_node::ErrorChain,
    error::{is_conflict, is_not_found},
    events::{EventRecorder, EventType, node_reference},
    instances::{InstanceSource, name_of},
    keys::TAINT_SHUTDOWN,
    watch::reflect,
};

/// Settings of the node-lifecycle controller.
#[derive(Debug, Clone)]
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
    /// Wall-clock time for Event timestamps.
    pub clock: Clock,
}

impl Default for NodeLifecycleConfig {
    fn default() -> Self {
        Self {
            node_monitor_period: Duration::from_secs(5),
            max_batch: 200,
            concurrency: 10,
            node_selector: None,
            metrics: ControllerMetrics::default(),
            clock: Clock::system(),
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
pub fn ready_status(node: &Node) -> &str {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == "Ready"))
        .map_or("Unknown", |c| c.status.as_str())
}

fn taints(node: &Node) -> Vec<Taint> {
    node.spec
        .as_ref()
        .and_then(|s| s.taints.clone())
        .unwrap_or_default()
}

fn is_shutdown_taint(t: &Taint) -> bool {
    t.key == TAINT_SHUTDOWN && t.effect == "NoSchedule"
}

/// For a Ready node: remove the shutdown taint if present.
pub fn ready_action(node: &Node) -> LifecycleAction {
    let current = taints(node);
    if current.iter().any(is_shutdown_taint) {
        LifecycleAction::SetTaints(current.into_iter().filter(|t| !is_shutdown_taint(t)).collect())
    } else {
        LifecycleAction::None
    }
}

/// For a NotReady node, given whether its instance exists and (if it does) whether it is shut down.
pub fn not_ready_action(node: &Node, exists: bool, shutdown: bool) -> LifecycleAction {
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
    store: Store<Node>,
    recorder: EventRecorder,
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
    let (store, writer) = reflector::store();
    let recorder = EventRecorder::new(
        client.clone(),
        "cloud-node-lifecycle-controller",
        config.clock.clone(),
        config.metrics.clone(),
    );
    let ctx = Ctx {
        client: client.clone(),
        provider,
        config,
        store,
        recorder,
    };
    let watch = reflect(
        Api::<Node>::all(client),
        ctx.config.node_selector.as_deref(),
        writer,
        |_| {},
    );
    let work = async {
        if ctx.store.wait_until_ready().await.is_err() {
            return;
        }
        loop {
            monitor_nodes(&ctx).await;
            tokio::time::sleep(ctx.config.node_monitor_period).await;
        }
    };
    tokio::select! {
        () = shutdown => {},
        () = watch => {},
        () = work => {},
    }
    Ok(())
}

/// One pass over all nodes.
async fn monitor_nodes<P: CloudProvider>(ctx: &Ctx<P>) {
    let Some(source) = InstanceSource::of(ctx.provider.as_ref()) else {
        return;
    };
    ctx.config.metrics.reconcile();
    let (ready, not_ready): (Vec<_>, Vec<_>) = ctx
        .store
        .state()
        .into_iter()
        .partition(|n| ready_status(n) == "True");
    let concurrency = ctx.config.concurrency.max(1);
    let mut actions: Vec<(Arc<Node>, LifecycleAction)> =
        ready.into_iter().map(|n| (n.clone(), ready_action(&n))).collect();
    for chunk in not_ready.chunks(ctx.config.max_batch.max(1)) {
        let refs: Vec<&Node> = chunk.iter().map(AsRef::as_ref).collect();
        let exists = source.exists(&refs, &ctx.config.metrics).await;
        let mut existing = Vec::new();
        for (node, exists) in chunk.iter().zip(exists) {
            match exists {
                Ok(true) => existing.push(node.clone()),
                Ok(false) => actions.push((node.clone(), LifecycleAction::Delete)),
                Err(error) => {
                    ctx.config.metrics.error();
                    tracing::warn!(node = name_of(node), error = %ErrorChain(&error), "error checking if node exists");
                }
            }
        }
        if existing.is_empty() {
            continue;
        }
        let refs: Vec<&Node> = existing.iter().map(AsRef::as_ref).collect();
        let shutdown = source.shutdown(&refs, &ctx.config.metrics).await;
        for (node, shutdown) in existing.iter().zip(shutdown) {
            match shutdown {
                Ok(shutdown) => actions.push((node.clone(), not_ready_action(node, true, shutdown))),
                Err(error) => {
                    ctx.config.metrics.error();
                    tracing::warn!(node = name_of(node), error = %ErrorChain(&error), "error checking if node is shut down");
                }
            }
        }
    }
    stream::iter(actions)
        .for_each_concurrent(concurrency, |(node, action)| async move {
            if let Err(error) = apply(ctx, &node, action).await {
                ctx.config.metrics.error();
                tracing::warn!(node = name_of(&node), error = %ErrorChain(&error), "node lifecycle action failed");
            }
        })
        .await;
}

async fn apply<P: CloudProvider>(ctx: &Ctx<P>, node: &Node, action: LifecycleAction) -> Result<(), Error> {
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
            match api.delete(name, &DeleteParams::default()).await {
                Ok(_) => Ok(()),
                Err(e) if is_not_found(&e) => Ok(()),
                Err(e) => {
                    let message = format!("Failed deleting node {name}: {e}");
                    ctx.recorder
                        .publish(&reference, EventType::Warning, "DeletingNodeFailed", &message)
                        .await;
                    Err(Error::kube("failed to delete node", name, e))
                }
            }
        }
        LifecycleAction::SetTaints(taints) => {
            let mut rv = node.metadata.resource_version.clone();
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
                        // Re-read and recompute: the node may have changed readiness or taints meanwhile.
                        let fresh = api
                            .get(name)
                            .await
                            .map_err(|e| Error::kube("failed to get node", name, e))?;
                        let had_shutdown_taint = node
                            .spec
                            .as_ref()
                            .and_then(|s| s.taints.as_ref())
                            .is_some_and(|t| t.iter().any(is_shutdown_taint));
                        let action = if had_shutdown_taint {
                            ready_action(&fresh)
                        } else {
                            not_ready_action(&fresh, true, true)
                        };
                        let LifecycleAction::SetTaints(t) = action else {
                            return Ok(());
                        };
                        taints = t;
                        rv = fresh.metadata.resource_version;
                    }
                    Err(e) => return Err(Error::kube("failed to update node taints", name, e)),
                }
            }
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{NodeCondition, NodeSpec, NodeStatus};

    use super::*;

    fn node(ready: Option<&str>, taints: Vec<Taint>) -> Node {
        let mut n = Node::default();
        n.metadata.name = Some("n".into());
        n.spec = Some(NodeSpec {
            taints: Some(taints),
            ..Default::default()
        });
        n.status = Some(NodeStatus {
            conditions: ready.map(|s| {
                vec![NodeCondition {
                    type_: "Ready".into(),
                    status: s.into(),
                    ..Default::default()
                }]
            }),
            ..Default::default()
        });
        n
    }

    fn shutdown_taint() -> Taint {
        Taint {
            key: TAINT_SHUTDOWN.into(),
            effect: "NoSchedule".into(),
            ..Default::default()
        }
    }

    #[test]
    fn readiness_defaults_to_unknown() {
        assert_eq!(ready_status(&node(None, vec![])), "Unknown");
        assert_eq!(ready_status(&node(Some("False"), vec![])), "False");
        assert_eq!(ready_status(&node(Some("True"), vec![])), "True");
    }

    #[test]
    fn nodes_deleted_only_when_the_instance_is_gone() {
        // Test_NodesDeleted: NotReady/Unknown and !exists -> deleted; exists -> kept.
        for ready in [Some("False"), None] {
            let n = node(ready, vec![]);
            assert_eq!(not_ready_action(&n, false, false), LifecycleAction::Delete);
            assert_eq!(not_ready_action(&n, true, false), LifecycleAction::None);
        }
    }

    #[test]
    fn shutdown_taint_added_once_and_removed_when_ready() {
        // Test_NodesShutdown: shutdown + exists -> taint; already tainted -> nothing.
        let other = Taint {
            key: "x".into(),
            effect: "NoExecute".into(),
            ..Default::default()
        };
        let n = node(Some("False"), vec![other.clone()]);
        assert_eq!(
            not_ready_action(&n, true, true),
            LifecycleAction::SetTaints(vec![other.clone(), shutdown_taint()])
        );
        let tainted = node(Some("False"), vec![other.clone(), shutdown_taint()]);
        assert_eq!(not_ready_action(&tainted, true, true), LifecycleAction::None);
        // Back to Ready: the taint goes, others stay. Ready without the taint: no call.
        let ready = node(Some("True"), vec![other.clone(), shutdown_taint()]);
        assert_eq!(ready_action(&ready), LifecycleAction::SetTaints(vec![other]));
        assert_eq!(ready_action(&node(Some("True"), vec![])), LifecycleAction::None);
    }
}
