//! Node syncs: node changes collected for `node_sync_window` lead to one pass, which updates only the load
//! balancers whose host set changed (upstream `syncNodes` and `lockedUpdateLoadBalancerHosts`). A Service whose
//! last ensure failed gets a full sync instead. Upstream updates its hosts all the same, and so did this
//! controller: for a Service refused because the load balancer it names is another Service's, that rewrote the
//! other Service's targets.

use ccm_cloud_provider::NodeView;
use std::{collections::BTreeMap, sync::Arc};

use ccm_cloud_provider::{Backends, CloudError, CloudProvider, LoadBalancer, ServiceEndpoints};
use futures::{StreamExt, stream};
use k8s_openapi::api::core::v1::Service;

use super::{
    Ctx, drift, endpoints_for, key::ServiceKey, shared_host_set, stable_nodes, state::ServiceState,
    wants_load_balancer,
};
use crate::{
    ErrorChain,
    events::{EventType, service_reference},
};

pub(super) async fn node_sync_loop<P: CloudProvider>(ctx: &Ctx<P>) {
    loop {
        ctx.node_sync.notified().await;
        tokio::time::sleep(ctx.config.node_sync_window).await;
        sync_nodes(ctx).await;
    }
}

/// One node-sync pass over every processed Service (upstream `syncNodes`).
pub(super) async fn sync_nodes<P: CloudProvider>(ctx: &Ctx<P>) {
    let Some(lb) = ctx.provider.load_balancer() else {
        return;
    };
    let services: Vec<Arc<Service>> = ctx
        .states
        .cached()
        .into_iter()
        .map(|(_, svc, _)| svc)
        .filter(|s| wants_load_balancer(s))
        .collect();
    stream::iter(services)
        .for_each_concurrent(ctx.config.concurrent_service_syncs.max(1), |svc| async move {
            // The nodes as they are now, not when the pass began: a slow pass must not push an older host set
            // over a Service sync that ran meanwhile (upstream `TestSlowNodeSync`).
            let key = ServiceKey::of(&svc);
            // Never beside or after the deletion of this Service's load balancer: wait for its sync, then
            // skip a Service that is gone, re-created or being deleted (its sync owns it now).
            let held = ctx.states.lock_of(&key);
            let guard = held.lock().await;
            sync_hosts(ctx, lb, &key, &svc).await;
            drop(guard);
            ctx.states.release(&key, held);
        })
        .await;
}

/// The host update of `svc` (under its key's lock): only when its host set changed since its load balancer was
/// last given one, and only for a load balancer this process served (see [`step`]).
async fn sync_hosts<P: CloudProvider>(ctx: &Ctx<P>, lb: &P::LoadBalancer, key: &ServiceKey, svc: &Service) {
    if !still_served(ctx, key, svc) {
        return;
    }
    let nodes = stable_nodes(ctx);
    let refs: Vec<&NodeView> = nodes.iter().map(|n| n.view()).collect();
    let hosts = shared_host_set(ctx, &refs);
    match ctx.states.update(key, |s| step(s, &hosts)) {
        Step::Nothing => return,
        Step::FullSync => {
            ctx.queue.add(key);
            return;
        }
        Step::HostUpdate => {}
    }
    if ctx.config.plans.is_some() {
        // A dry run: a plan against the new host set, from the Service's own sync.
        ctx.queue.add(key);
        return;
    }
    // A host update that outlasts the deadline is abandoned; a full sync of that Service follows.
    drift::unsettle(ctx, key);
    // A load balancer that follows the Service's endpoints gets them with its hosts, never a host set alone.
    let update = async {
        let endpoints = match endpoints_for(ctx, lb, svc).await {
            Ok(endpoints) => endpoints,
            Err(error) => {
                // The full sync queued below reports it.
                tracing::warn!(service = %key, error = %crate::ErrorChain(&error), "no endpoints for a host update");
                return None;
            }
        };
        let updated = update_hosts(ctx, lb, svc, &refs, endpoints.as_deref()).await;
        updated.then_some(endpoints)
    };
    let updated = tokio::time::timeout(ctx.config.reconcile_deadline, update)
        .await
        .ok()
        .flatten();
    if let Some(endpoints) = updated {
        ctx.states.update(key, |s| s.remember_endpoints(endpoints));
        drift::settled(ctx, key);
    } else {
        ctx.queue.add(key);
    }
}

/// What a node sync does for one Service.
#[derive(Debug, PartialEq, Eq)]
enum Step {
    /// Its nodes did not change.
    Nothing,
    /// Its load balancer gets the new host set.
    HostUpdate,
    /// It gets a full sync, whose ensure decides again.
    FullSync,
}

/// The step for the Service whose state is `s`, now that its host set is `hosts`, recorded in `s`. The key's
/// lock is held, so no ensure of it is in flight.
fn step(s: &mut ServiceState, hosts: &Arc<BTreeMap<String, super::Host>>) -> Step {
    match s.hosts() {
        Some(old) if old == hosts => Step::Nothing,
        Some(_) => {
            s.remember_hosts(hosts.clone());
            Step::HostUpdate
        }
        // Not served by this process: its last ensure failed (refused, say, because the load balancer it names
        // is another Service's), so the host update of that load balancer is not its to ask for. The node
        // change is a reason to try the ensure again, and not before its nodes changed.
        None if s.tried(hosts) => Step::Nothing,
        None => {
            s.remember_tried(hosts.clone());
            Step::FullSync
        }
    }
}

/// Whether `svc`, taken from the cache when the pass began, is still the processed version of `key` and still
/// wants its load balancer (not deleted, not being deleted, still of type LoadBalancer).
pub(super) fn still_served<P: CloudProvider>(ctx: &Ctx<P>, key: &ServiceKey, svc: &Service) -> bool {
    let cached = ctx.states.read(key, ServiceState::cached);
    if cached.is_none_or(|c| c.metadata.uid != svc.metadata.uid) {
        return false;
    }
    ctx.services.get(&key.object_ref()).is_some_and(|current| {
        current.metadata.uid == svc.metadata.uid
            && current.metadata.deletion_timestamp.is_none()
            && wants_load_balancer(&current)
    })
}

/// Upstream `lockedUpdateLoadBalancerHosts`; `false` means "retry with a full sync".
async fn update_hosts<P: CloudProvider>(
    ctx: &Ctx<P>,
    lb: &P::LoadBalancer,
    svc: &Service,
    nodes: &[&NodeView],
    endpoints: Option<&ServiceEndpoints>,
) -> bool {
    let reference = service_reference(svc);
    let cluster = &ctx.config.cluster_name;
    let backends = Backends::new(nodes, endpoints);
    ctx.config.metrics.provider_call();
    let error = match lb.update_load_balancer_with(cluster, svc, backends).await {
        Ok(()) => None,
        Err(CloudError::ImplementedElsewhere) => return true,
        Err(e) => Some(e),
    };
    if let Some(error) = error {
        ctx.config.metrics.provider_call();
        if let Ok(None) = lb.get_load_balancer(cluster, svc).await {
            return true;
        }
        ctx.config.metrics.error();
        let mut names: Vec<&str> = nodes.iter().take(20).map(|n| n.name.as_str()).collect();
        let more = nodes.len().saturating_sub(20);
        let extra = if more > 0 {
            format!(" <{more} more>")
        } else {
            String::new()
        };
        names.sort_unstable();
        let message = format!(
            "Error updating load balancer with new hosts {names:?}{extra} [node names limited, total number of nodes: {}], error: {}",
            nodes.len(),
            ErrorChain(&error)
        );
        ctx.recorder
            .publish(
                &reference,
                EventType::Warning,
                "UpdateLoadBalancerFailed",
                &message,
            )
            .await;
        return false;
    }
    if nodes.is_empty() {
        let message = "There are no available nodes for LoadBalancer";
        ctx.recorder
            .publish(&reference, EventType::Warning, "UnAvailableLoadBalancer", message)
            .await;
    } else {
        let message = "Updated load balancer with new hosts";
        ctx.recorder
            .publish(&reference, EventType::Normal, "UpdatedLoadBalancer", message)
            .await;
    }
    true
}
