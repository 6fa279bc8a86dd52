//! A Service's load balancer ensured (the branch of upstream `syncLoadBalancerIfNeeded` that keeps one): the
//! finalizer first, then the provider's ensure with the stable nodes, and what the provider has to tell as
//! Events.

use ccm_cloud_provider::NodeView;
use ccm_cloud_provider::{Backends, CloudError, CloudProvider, LoadBalancer, LoadBalancerStatus, Notice};
use k8s_openapi::api::core::v1::{ObjectReference, Service};
use kube::runtime::reflector::ObjectRef;

use super::{
    Ctx, cleanup, drift, endpoints_for, has_finalizer, key::ServiceKey, left_alone,
    patches::patch_before_ensure, shared_host_set, stable_nodes,
};
use crate::{
    Error,
    events::{EventType, service_reference},
};

/// Ensures the load balancer of `svc` (work-queue key `key`): the status to write, or `None` when another
/// controller serves the Service (`ImplementedElsewhere`).
pub(super) async fn ensure<P: CloudProvider>(
    ctx: &Ctx<P>,
    lb: &P::LoadBalancer,
    svc: &Service,
    key: &ServiceKey,
) -> Result<Option<LoadBalancerStatus>, Error> {
    let reference = &service_reference(svc);
    // No host update until this ensure succeeded (see `ServiceState::hosts`).
    ctx.states.update(key, |s| s.start_ensure());
    ctx.recorder
        .publish(
            reference,
            EventType::Normal,
            "EnsuringLoadBalancer",
            "Ensuring load balancer",
        )
        .await;
    // The provider's name for the load balancer is recorded before it may create under it (none for the default
    // name, which follows from the UID).
    let name = lb.load_balancer_name(&ctx.config.cluster_name, svc);
    let record = ccm_cloud_provider::load_balancer_names_with(svc, &name);
    if !has_finalizer(svc) || record.is_some() {
        patch_before_ensure(ctx, svc, record.as_deref()).await?;
    }
    let nodes = stable_nodes(ctx);
    if nodes.is_empty() {
        let message = "There are no available nodes for LoadBalancer";
        ctx.recorder
            .publish(reference, EventType::Warning, "UnAvailableLoadBalancer", message)
            .await;
    }
    let refs: Vec<&NodeView> = nodes.iter().map(|n| n.view()).collect();
    let hosts = shared_host_set(ctx, &refs);
    let endpoints = endpoints_for(ctx, lb, svc).await?;
    let backends = Backends::new(&refs, endpoints.as_deref());
    ctx.config.metrics.provider_call();
    let result = lb
        .ensure_load_balancer_with(&ctx.config.cluster_name, svc, backends)
        .await;
    // Host updates only for what was served. Those of a Service served elsewhere cost nothing (the provider
    // answers them with `ImplementedElsewhere` too): it keeps them, as before.
    let served = matches!(result, Ok(_) | Err(CloudError::ImplementedElsewhere));
    ctx.states.update(key, |s| {
        if served {
            s.remember_ensured(hosts);
            s.remember_endpoints(endpoints);
        } else {
            s.remember_tried(hosts);
        }
    });
    let ensured = match result {
        Ok(ensured) => ensured,
        Err(CloudError::ImplementedElsewhere) => {
            left_alone::left_behind(ctx, lb, svc, reference).await;
            return Ok(None);
        }
        Err(CloudError::Waiting { waiting_for, after }) => {
            return Err(waiting(ctx, key, reference, waiting_for, after).await);
        }
        Err(e) => return Err(Error::cloud("failed to ensure load balancer", key, e)),
    };
    drift::settled(ctx, key);
    publish_notices(ctx, reference, &ensured.notices).await;
    ctx.recorder
        .publish(
            reference,
            EventType::Normal,
            "EnsuredLoadBalancer",
            "Ensured load balancer",
        )
        .await;
    drift::repaired(ctx, key, svc).await;
    Ok(Some(ensured.status))
}

/// An ensure that waits on the cloud (a rename whose old load balancer's security group AWS still holds): not a
/// failure, so a Normal `LoadBalancerEnsurePending` Event (one, counted on every retry: its message names only
/// what is waited for) instead of a `SyncLoadBalancerFailed` Warning each time, and a retry after the
/// provider's delay grown by the key's backoff up to [`cleanup::PENDING_RETRY_CAP`].
async fn waiting<P: CloudProvider>(
    ctx: &Ctx<P>,
    key: &ServiceKey,
    reference: &ObjectReference,
    waiting_for: String,
    after: std::time::Duration,
) -> Error {
    let cap = cleanup::PENDING_RETRY_CAP.max(after);
    let delay = ctx.backoff.next(key).clamp(after, cap);
    tracing::info!(service = %key, %waiting_for, ?delay, "load balancer ensure waits on the cloud");
    let message = format!("Waiting for {waiting_for}; the load balancer is ensured once it is released");
    ctx.recorder
        .publish(
            reference,
            EventType::Normal,
            "LoadBalancerEnsurePending",
            &message,
        )
        .await;
    Error::Waiting {
        object: key.into(),
        waiting_for,
        after: delay,
    }
}

/// The provider's notices, each an Event on the Service (`reference`) or on the Node it is about.
async fn publish_notices<P: CloudProvider>(ctx: &Ctx<P>, reference: &ObjectReference, notices: &[Notice]) {
    for notice in notices {
        let kind = if notice.warning {
            EventType::Warning
        } else {
            EventType::Normal
        };
        // A notice about a Node (a target the provider skipped) goes on that Node, if it is still there.
        let about = match &notice.node {
            None => Some(reference.clone()),
            Some(node) => ctx
                .nodes
                .get(&ObjectRef::new(node))
                .map(|n| crate::events::node_reference(&n)),
        };
        if let Some(about) = about {
            ctx.recorder
                .publish(&about, kind, &notice.reason, &notice.message)
                .await;
        }
    }
}
