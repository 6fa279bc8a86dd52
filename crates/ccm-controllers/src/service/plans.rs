//! The service controller's dry run (`ServiceConfig::plans`): what a sync would do goes to the sink, and
//! nothing is written (no finalizer, Event, status or load balancer).

use ccm_cloud_provider::NodeView;
use ccm_cloud_provider::{Backends, CloudError, CloudProvider, LoadBalancer, LoadBalancerPlan, object_key};
use k8s_openapi::api::core::v1::Service;

use super::{
    Ctx, Op, endpoints_for, has_finalizer, key::ServiceKey, shared_host_set, stable_nodes,
    wants_load_balancer,
};
use crate::{DryRunSink, Error};

/// The sync of a Service that wants a load balancer: the provider's plan goes to `sink`.
pub(super) async fn ensure<P: CloudProvider>(
    ctx: &Ctx<P>,
    lb: &P::LoadBalancer,
    svc: &Service,
    key: &ServiceKey,
    sink: &dyn DryRunSink,
) -> Result<Op, Error> {
    let nodes = stable_nodes(ctx);
    let refs: Vec<&NodeView> = nodes.iter().map(|n| n.view()).collect();
    // The host set planned with: a node sync that finds it changed plans again (see `node_sync`).
    let hosts = shared_host_set(ctx, &refs);
    // With the endpoints an ensure would be given; an endpoint sync that finds them changed plans again.
    let endpoints = endpoints_for(ctx, lb, svc).await?;
    let backends = Backends::new(&refs, endpoints.as_deref());
    ctx.states.update(key, |s| {
        s.remember_hosts(hosts);
        s.remember_endpoints(endpoints.clone());
    });
    ctx.config.metrics.provider_call();
    match lb
        .plan_load_balancer_with(&ctx.config.cluster_name, svc, backends)
        .await
    {
        Ok(plan) => sink.load_balancer(&key.to_string(), plan),
        // Another controller's now (type `external`): nothing is pending here, and the last plan is stale.
        Err(CloudError::ImplementedElsewhere) => sink.load_balancer(&key.to_string(), None),
        Err(e) => return Err(Error::cloud("failed to plan load balancer", key, e)),
    }
    Ok(Op::Ensure)
}

/// The sync of a Service whose load balancer goes: what the deletion would do goes to `sink`.
pub(super) async fn deletion<P: CloudProvider>(
    ctx: &Ctx<P>,
    lb: &P::LoadBalancer,
    svc: &Service,
    key: &ServiceKey,
    sink: &dyn DryRunSink,
) -> Result<Op, Error> {
    ctx.config.metrics.provider_call();
    let exists = lb
        .get_load_balancer(&ctx.config.cluster_name, svc)
        .await
        .map_err(|e| Error::cloud("failed to check if load balancer exists before cleanup", key, e))?
        .is_some();
    let mut changes = Vec::new();
    if exists {
        changes.push(format!("delete the load balancer of {key}"));
    }
    if has_finalizer(svc) {
        changes.push(format!(
            "remove the finalizer {} from {key}",
            crate::keys::FINALIZER_LB_CLEANUP
        ));
    }
    let plan = (!changes.is_empty()).then(|| LoadBalancerPlan::new(changes, false));
    sink.load_balancer(&key.to_string(), plan);
    Ok(Op::Delete)
}

/// The cleanup of `old`, a previous incarnation queued under `key` (see `predecessor`): what it would delete goes
/// to `sink` under that key. A real run asks the provider whether or not it still finds the load balancer (see
/// `cleanup`), so the plan does not ask either.
pub(super) fn predecessor(key: &ServiceKey, old: &Service, sink: &dyn DryRunSink) {
    let plan = wants_load_balancer(old).then(|| {
        let line = format!(
            "delete the load balancer of the previous incarnation {} (UID {})",
            object_key(&old.metadata),
            old.metadata.uid.as_deref().unwrap_or_default()
        );
        LoadBalancerPlan::new(vec![line], false)
    });
    sink.load_balancer(&key.to_string(), plan);
}
