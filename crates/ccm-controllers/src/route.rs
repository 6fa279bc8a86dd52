//! The route controller: makes the provider's routes match the nodes' pod CIDRs (dual-stack: one route per
//! CIDR), deletes routes inside the cluster CIDRs that no node claims (and blackholes), and sets each node's
//! `NetworkUnavailable` condition (`RouteCreated` / `NoRouteCreated`).

use crate::CachedNode;
use ccm_cloud_provider::NodeView;
use std::{collections::BTreeSet, future::Future, sync::Arc, time::Duration};

use ccm_cloud_provider::{CloudProvider, Route, Routes};
use futures::{StreamExt, stream};
use k8s_openapi::api::core::v1::Node;
use kube::{
    Api, Client,
    api::{Patch, PatchParams},
    runtime::reflector::Store,
};
use serde_json::json;

use crate::{
    Bootstrap, Clock, ControllerMetrics, Error, ErrorChain,
    events::{EventRecorder, EventType, node_reference},
    run_until,
};

mod planning;

pub use planning::{Cidr, PlannedRoute, RoutePlan, network_condition};

/// Settings of the route controller.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct RouteConfig {
    /// Passed to every route call (`--cluster-name`, default `kubernetes`).
    pub cluster_name: String,
    /// The cluster CIDRs (`--cluster-cidr`): only routes inside them are deleted. Build with
    /// [`RouteConfig::new`] to validate them.
    pub cluster_cidrs: Vec<Cidr>,
    /// Time between the starts of two passes (`--route-reconciliation-period`, default 10 s, fixed rate).
    pub route_reconciliation_period: Duration,
    /// Route creations and deletions in flight at once (default 200, as upstream).
    pub max_concurrent_operations: usize,
    /// Only Nodes matching this label selector are handled (default: all).
    pub node_selector: Option<String>,
    /// Counters, shared with whoever exports them.
    pub metrics: ControllerMetrics,
    /// The process's shared watches (one Node and one Service watch for every controller); `None` (the
    /// default): this controller watches on its own.
    pub informers: Option<crate::Informers>,
    /// Wall-clock time for condition and Event timestamps.
    pub clock: Clock,
    /// The longest one pass may take; a pass still running then is abandoned (its provider and API calls
    /// cancelled) and the next starts on the following tick (default 5 minutes).
    pub pass_deadline: Duration,
    /// A dry run's sink: with one, each pass's plan goes there and nothing is changed (no route, no
    /// `NetworkUnavailable` condition). Default: none.
    pub plans: Option<Arc<dyn crate::DryRunSink>>,
}

// === impl RouteConfig ===

impl RouteConfig {
    /// A config for `cluster_name` with the comma-separated `cluster_cidr`: one CIDR, or one IPv4 and one IPv6
    /// CIDR (dual stack). Empty or unparsable values are errors (upstream exits).
    pub fn new(cluster_name: impl Into<String>, cluster_cidr: &str) -> Result<Self, Error> {
        let err = |reason: String| Error::Config {
            setting: "cluster-cidr",
            reason,
        };
        let cidrs = cluster_cidr
            .split(',')
            .map(str::parse::<Cidr>)
            .collect::<Result<Vec<_>, _>>()
            .map_err(err)?;
        match cidrs.as_slice() {
            [_] => {}
            [a, b] if a.is_ipv4() != b.is_ipv4() => {}
            [_, _] => {
                return Err(err(format!(
                    "{cluster_cidr:?}: two CIDRs must be one IPv4 and one IPv6 (dual stack)"
                )));
            }
            _ => {
                return Err(err(format!(
                    "{cluster_cidr:?}: at most two CIDRs (one per IP family) are accepted"
                )));
            }
        }
        Ok(Self {
            cluster_name: cluster_name.into(),
            cluster_cidrs: cidrs,
            route_reconciliation_period: Duration::from_secs(10),
            max_concurrent_operations: 200,
            node_selector: None,
            metrics: ControllerMetrics::default(),
            informers: None,
            clock: Clock::system(),
            pass_deadline: Duration::from_secs(300),
            plans: None,
        })
    }

    /// Whether this controller manages `route`: its network or last address lies in a cluster CIDR.
    pub fn is_responsible_for(&self, route: &Route) -> bool {
        planning::responsible(&self.cluster_cidrs, route)
    }
}

/// Upstream `reconcile`'s decisions, without side effects.
pub fn plan(config: &RouteConfig, nodes: &[&NodeView], routes: &[Route]) -> RoutePlan {
    planning::plan(&config.cluster_cidrs, nodes, routes)
}

struct Ctx<P: CloudProvider> {
    client: Client,
    provider: Arc<P>,
    config: RouteConfig,
    store: Store<CachedNode>,
    recorder: EventRecorder,
    /// With a node selector: the destinations of routes this process has seen serve a selected Node, which it
    /// may delete.
    selected: std::sync::Mutex<BTreeSet<String>>,
}

/// Runs the route controller until `shutdown` completes.
///
/// Returns [`Error::Unsupported`] at once if the provider has no `Routes`.
pub async fn run<P: CloudProvider>(
    client: Client,
    provider: Arc<P>,
    config: RouteConfig,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), Error> {
    if provider.routes().is_none() {
        return Err(Error::Unsupported { capability: "routes" });
    }
    if config.cluster_cidrs.is_empty() {
        return Err(Error::Config {
            setting: "cluster-cidr",
            reason: "no cluster CIDR given".to_owned(),
        });
    }
    let boot = Bootstrap::new(
        client,
        "route_controller",
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
        selected: std::sync::Mutex::new(BTreeSet::new()),
    };
    let work = async {
        if ctx.store.wait_until_ready().await.is_err() {
            return;
        }
        let mut ticker = tokio::time::interval(ctx.config.route_reconciliation_period);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticker.tick().await;
            if let Err(error) = reconcile_within_deadline(&ctx).await {
                ctx.config.metrics.error();
                tracing::warn!(error = %ErrorChain(&error), "route reconciliation failed");
            }
        }
    };
    run_until(shutdown, nodes.run(|_| {}), work).await;
    Ok(())
}

/// One pass, abandoned if it outlasts `pass_deadline`: a provider or apiserver that stopped answering must not
/// stop every later pass.
async fn reconcile_within_deadline<P: CloudProvider>(ctx: &Ctx<P>) -> Result<(), Error> {
    let deadline = ctx.config.pass_deadline;
    tokio::time::timeout(deadline, reconcile_routes(ctx))
        .await
        .unwrap_or(Err(Error::DeadlineExceeded {
            what: "route reconciliation pass",
            deadline,
        }))
}

/// With a node selector, the routes of Nodes outside it are someone else's: only routes this process has seen
/// serve a selected Node (remembered by destination, since a route's target is named after its instance once
/// the Node is gone) are deleted, and of those whose target is no selected Node now, only the ones whose Node
/// is gone (one that merely left the selection keeps its route; so does a selected Node deleted while the
/// process was down). Destinations are remembered while a route still has them.
async fn leave_the_rest_alone<P: CloudProvider>(
    ctx: &Ctx<P>,
    nodes: &[&NodeView],
    routes: &[Route],
    plan: &mut RoutePlan,
) {
    let current: BTreeSet<&str> = nodes.iter().map(|n| n.name.as_str()).collect();
    let candidates: BTreeSet<String> = {
        let mut selected = ctx
            .selected
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let routed: BTreeSet<&str> = routes.iter().map(|r| r.destination_cidr.as_str()).collect();
        selected.retain(|cidr| routed.contains(cidr.as_str()));
        selected.extend(
            routes
                .iter()
                .filter(|r| current.contains(r.target_node.as_str()))
                .map(|r| r.destination_cidr.clone()),
        );
        plan.delete.retain(|r| selected.contains(&r.destination_cidr));
        plan.delete
            .iter()
            .filter(|r| !current.contains(r.target_node.as_str()))
            .map(|r| r.target_node.clone())
            .collect()
    };
    let api: Api<Node> = Api::all(ctx.client.clone());
    for name in candidates {
        // Left the selection (still there, or unknown after an error): not ours any more.
        if !matches!(api.get_opt(&name).await, Ok(None)) {
            let gone: Vec<String> = plan
                .delete
                .iter()
                .filter(|r| r.target_node == name)
                .map(|r| r.destination_cidr.clone())
                .collect();
            let mut selected = ctx
                .selected
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            for cidr in &gone {
                selected.remove(cidr);
            }
            plan.delete.retain(|r| r.target_node != name);
        }
    }
}

/// One pass.
async fn reconcile_routes<P: CloudProvider>(ctx: &Ctx<P>) -> Result<(), Error> {
    let Some(routes_api) = ctx.provider.routes() else {
        return Ok(());
    };
    ctx.config.metrics.reconcile();
    let cluster = &ctx.config.cluster_name;
    let nodes = ctx.store.state();
    let refs: Vec<&NodeView> = nodes.iter().map(|n| n.view()).collect();
    routes_api.observe_nodes(&refs);
    ctx.config.metrics.provider_call();
    let routes = routes_api
        .list_routes(cluster)
        .await
        .map_err(|e| Error::cloud("failed to list routes", cluster, e))?;
    let mut plan = plan(&ctx.config, &refs, &routes);
    if ctx.config.node_selector.is_some() {
        leave_the_rest_alone(ctx, &refs, &routes, &mut plan).await;
    }
    if let Some(sink) = &ctx.config.plans {
        sink.routes(planning::route_changes(&plan, &refs, &ctx.config.clock));
        return Ok(());
    }
    let limit = ctx.config.max_concurrent_operations.max(1);
    let deletes = stream::iter(plan.delete.into_iter().map(|r| delete_route(ctx, routes_api, r)))
        .buffer_unordered(limit)
        .collect::<Vec<()>>();
    let creates = stream::iter(
        plan.create
            .into_iter()
            .map(|p| create_route(ctx, routes_api, &nodes, p)),
    )
    .buffer_unordered(limit)
    .collect::<Vec<Option<String>>>();
    let failed = if plan.deletes_first {
        deletes.await;
        creates.await
    } else {
        tokio::join!(deletes, creates).1
    };
    let failed: BTreeSet<String> = failed.into_iter().flatten().collect();
    let statuses: Vec<(Arc<CachedNode>, bool)> = nodes
        .iter()
        .filter_map(|n| {
            let name = n.name.as_str();
            plan.nodes
                .get(name)
                .map(|ok| (n.clone(), *ok && !failed.contains(name)))
        })
        .collect();
    stream::iter(statuses)
        .for_each_concurrent(limit, |(node, created)| async move {
            let Some(condition) = network_condition(&node, created, &ctx.config.clock) else {
                return;
            };
            let patch = json!({ "status": { "conditions": [condition] } });
            ctx.config.metrics.api_write();
            let name = node.name.as_str();
            if let Err(error) = Api::<Node>::all(ctx.client.clone())
                .patch_status(name, &PatchParams::default(), &Patch::Strategic(&patch))
                .await
            {
                ctx.config.metrics.error();
                tracing::warn!(node = name, %error, "could not update the NetworkUnavailable condition");
            }
        })
        .await;
    Ok(())
}

async fn delete_route<P: CloudProvider>(ctx: &Ctx<P>, routes: &P::Routes, route: Route) {
    ctx.config.metrics.provider_call();
    match routes.delete_route(&ctx.config.cluster_name, &route).await {
        Ok(()) => tracing::info!(
            cidr = route.destination_cidr,
            node = route.target_node,
            "deleted route"
        ),
        Err(error) => {
            ctx.config.metrics.error();
            tracing::warn!(cidr = route.destination_cidr, error = %ErrorChain(&error), "could not delete route");
        }
    }
}

/// Creates one route; on failure posts `FailedToCreateRoute` and returns the node's name.
async fn create_route<P: CloudProvider>(
    ctx: &Ctx<P>,
    routes: &P::Routes,
    nodes: &[Arc<CachedNode>],
    planned: PlannedRoute,
) -> Option<String> {
    ctx.config.metrics.provider_call();
    let r = &planned.route;
    let error = routes
        .create_route(&ctx.config.cluster_name, &planned.name_hint, r)
        .await
        .err()?;
    ctx.config.metrics.error();
    tracing::warn!(cidr = r.destination_cidr, node = r.target_node, error = %ErrorChain(&error), "could not create route");
    if let Some(node) = nodes.iter().find(|n| n.name == r.target_node) {
        let message = format!(
            "Could not create route {} {} for node {}: {}",
            planned.name_hint,
            r.destination_cidr,
            r.target_node,
            ErrorChain(&error)
        );
        ctx.recorder
            .publish(
                &node_reference(node),
                EventType::Warning,
                "FailedToCreateRoute",
                &message,
            )
            .await;
    }
    Some(r.target_node.clone())
}

#[cfg(test)]
mod tests;
