//! Endpoint syncs: for a Service whose load balancer follows its endpoints (see `endpoints`), EndpointSlice
//! changes collected for `node_sync_window` lead to one pass, which updates only the load balancers whose
//! endpoints differ from what they were last given, through [`LoadBalancer::update_load_balancer_with`]. As host
//! updates, only for a load balancer this process served; one whose ensure failed retries on its own, with the
//! endpoints of the moment.

use ccm_cloud_provider::NodeView;
use std::sync::Arc;

use ccm_cloud_provider::{Backends, CloudError, CloudProvider, LoadBalancer, ServiceEndpoints};
use futures::{StreamExt, stream};
use k8s_openapi::api::core::v1::Service;

use super::{
    Ctx, drift, key::ServiceKey, node_sync::still_served, shared_host_set, stable_nodes, state::ServiceState,
};
use crate::{
    ErrorChain,
    events::{EventType, service_reference},
};

pub(super) async fn endpoint_sync_loop<P: CloudProvider>(ctx: &Ctx<P>) {
    loop {
        ctx.endpoints.changes.notified().await;
        tokio::time::sleep(ctx.config.node_sync_window).await;
        sync_endpoints(ctx).await;
    }
}

/// One pass over the Services whose EndpointSlices changed.
async fn sync_endpoints<P: CloudProvider>(ctx: &Ctx<P>) {
    let Some(lb) = ctx.provider.load_balancer() else {
        return;
    };
    let changed = ctx.endpoints.take_changed();
    stream::iter(changed)
        .for_each_concurrent(
            ctx.config.concurrent_service_syncs.max(1),
            |(namespace, name)| async move {
                let key = ServiceKey::Service { namespace, name };
                // Never beside the Service's own sync or a host update of it, as node syncs.
                let held = ctx.states.lock_of(&key);
                let guard = held.lock().await;
                sync_service_endpoints(ctx, lb, &key).await;
                drop(guard);
                ctx.states.release(&key, held);
            },
        )
        .await;
}

/// The endpoint update of the Service of `key` (under its lock), if its load balancer follows them, was served
/// by this process and was given other endpoints than its EndpointSlices show now.
async fn sync_service_endpoints<P: CloudProvider>(ctx: &Ctx<P>, lb: &P::LoadBalancer, key: &ServiceKey) {
    let Some(svc) = ctx.states.read(key, ServiceState::cached) else {
        return;
    };
    if !lb.follows_endpoints(&svc) || !still_served(ctx, key, &svc) {
        return;
    }
    // `None`: not served (its ensure failed, or runs now): that sync reads the endpoints of its moment.
    let Some(given) = ctx.states.read(key, |s| s.endpoints().cloned()) else {
        return;
    };
    let (namespace, name) = (svc.metadata.namespace.as_deref(), svc.metadata.name.as_deref());
    // Listed already: a served Service that follows its endpoints had them listed for its ensure.
    let Ok(current) = ctx
        .endpoints
        .of(namespace.unwrap_or_default(), name.unwrap_or_default())
        .await
    else {
        return;
    };
    if *given == current {
        return;
    }
    if ctx.config.plans.is_some() {
        // A dry run writes nothing: a plan with the new endpoints, from the Service's own sync.
        ctx.queue.add(key);
        return;
    }
    let current = Arc::new(current);
    drift::unsettle(ctx, key);
    let nodes = stable_nodes(ctx);
    let refs: Vec<&NodeView> = nodes.iter().map(|n| n.view()).collect();
    let hosts = shared_host_set(ctx, &refs);
    let updated = tokio::time::timeout(
        ctx.config.reconcile_deadline,
        update_endpoints(ctx, lb, &svc, &refs, &current),
    )
    .await
    .unwrap_or(false);
    if updated {
        ctx.states.update(key, |s| {
            s.remember_hosts(hosts);
            s.remember_endpoints(Some(current));
        });
        drift::settled(ctx, key);
    } else {
        // A full sync ensures it again, with the endpoints of its moment.
        ctx.queue.add(key);
    }
}

/// The provider's update with `endpoints`; `false` means "retry with a full sync" (a Warning Event says why).
async fn update_endpoints<P: CloudProvider>(
    ctx: &Ctx<P>,
    lb: &P::LoadBalancer,
    svc: &Service,
    nodes: &[&NodeView],
    endpoints: &ServiceEndpoints,
) -> bool {
    ctx.config.metrics.provider_call();
    let backends = Backends::with_endpoints(nodes, endpoints);
    let error = match lb
        .update_load_balancer_with(&ctx.config.cluster_name, svc, backends)
        .await
    {
        Ok(()) | Err(CloudError::ImplementedElsewhere) => {
            tracing::debug!(
                service = %ServiceKey::of(svc),
                ready = endpoints.ready().count(),
                "load balancer follows the Service's endpoints"
            );
            return true;
        }
        Err(error) => error,
    };
    ctx.config.metrics.error();
    let message = format!(
        "Error updating load balancer with the Service's endpoints ({} ready), error: {}",
        endpoints.ready().count(),
        ErrorChain(&error)
    );
    ctx.recorder
        .publish(
            &service_reference(svc),
            EventType::Warning,
            "UpdateLoadBalancerFailed",
            &message,
        )
        .await;
    false
}
