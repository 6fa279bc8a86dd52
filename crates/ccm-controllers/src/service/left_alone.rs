//! What the service controller leaves alone: the load balancer of a Service now served by another controller,
//! left behind with a Warning Event saying so ([`left_behind`]), and a Service that left the controller's
//! selector, whose load balancer is not deleted when it drops out of the watch ([`left_the_selection`]).

use ccm_cloud_provider::{CloudProvider, LoadBalancer};
use k8s_openapi::api::core::v1::Service;
use kube::Api;

use super::Ctx;
use crate::{Error, events::EventType};

/// A Service now served by another controller (the provider answers `ImplementedElsewhere`, e.g. its type
/// annotation says `external`) while its status still shows this provider's load balancer: that load balancer
/// is left as it is, serving its last targets with no more updates, until the Service is deleted or switched
/// back. Say so with a Warning (one provider read, only for a Service whose status has an address).
pub(super) async fn left_behind<P: CloudProvider>(
    ctx: &Ctx<P>,
    lb: &P::LoadBalancer,
    svc: &Service,
    reference: &k8s_openapi::api::core::v1::ObjectReference,
) {
    let shown = svc
        .status
        .as_ref()
        .and_then(|s| s.load_balancer.as_ref())
        .and_then(|l| l.ingress.clone())
        .unwrap_or_default();
    if shown.is_empty() {
        return;
    }
    ctx.config.metrics.provider_call();
    let Ok(Some(ours)) = lb.get_load_balancer(&ctx.config.cluster_name, svc).await else {
        return;
    };
    let address = |i: &k8s_openapi::api::core::v1::LoadBalancerIngress| i.hostname.clone().or(i.ip.clone());
    let ours: Vec<String> = ours.ingress.iter().flatten().filter_map(address).collect();
    if !ours.is_empty() && shown.iter().filter_map(address).all(|a| ours.contains(&a)) {
        let message = format!(
            "the load balancer of this Service is now implemented by another controller; the one made here ({}) \
             is left as it is, serving its last targets without updates, until the Service is deleted or \
             switched back",
            ours.join(", ")
        );
        ctx.recorder
            .publish(reference, EventType::Warning, "LoadBalancerLeftBehind", &message)
            .await;
    }
}

/// Whether a Service gone from the selected watch still exists: it lost the selector's labels, and is not this
/// controller's to clean up any more (with selectors, the rest is left alone).
pub(super) async fn left_the_selection<P: CloudProvider>(
    ctx: &Ctx<P>,
    cached: &Service,
) -> Result<bool, Error> {
    let namespace = cached.metadata.namespace.as_deref().unwrap_or_default();
    let name = cached.metadata.name.as_deref().unwrap_or_default();
    let api: Api<Service> = Api::namespaced(ctx.client.clone(), namespace);
    let live = api.get_opt(name).await.map_err(|e| {
        Error::kube(
            "reading a Service that left the watch",
            ccm_cloud_provider::object_key(&cached.metadata),
            e,
        )
    })?;
    Ok(live.is_some_and(|live| live.metadata.uid == cached.metadata.uid))
}
