//! EndpointSlices written as the endpoint-slice controller of Kubernetes 1.20 writes them (the test apiserver runs
//! no controller-manager): `discovery.k8s.io/v1beta1` where only that is served, the node in `topology`, the
//! controller's `managed-by` label; `serving` and `terminating` with the `EndpointSliceTerminatingCondition` gate
//! the test apiserver turns on.
#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

use kube::{
    Api,
    api::{ApiResource, DynamicObject, GroupVersionKind, PostParams},
};
use serde_json::json;

/// The label and value of the endpoint-slice controller's slices.
pub const MANAGED_BY: (&str, &str) = (
    "endpointslice.kubernetes.io/managed-by",
    "endpointslice-controller.k8s.io",
);

/// The EndpointSlice API the apiserver serves (`v1`, else `v1beta1`), in `default`.
pub async fn slices_api(client: &kube::Client) -> (Api<DynamicObject>, ApiResource) {
    let version = match client.list_api_group_resources("discovery.k8s.io/v1").await {
        Ok(list) if list.resources.iter().any(|r| r.name == "endpointslices") => "v1",
        _ => "v1beta1",
    };
    let gvk = GroupVersionKind::gvk("discovery.k8s.io", version, "EndpointSlice");
    let resource = ApiResource::from_gvk_with_plural(&gvk, "endpointslices");
    (
        Api::namespaced_with(client.clone(), "default", &resource),
        resource,
    )
}

/// The endpoints of a slice: (address, node, ready, terminating) each.
pub fn endpoints(of: &[(&str, &str, bool, bool)]) -> serde_json::Value {
    of.iter()
        .map(|(ip, node, ready, terminating)| {
            json!({
                "addresses": [ip],
                "conditions": { "ready": ready, "serving": *ready || *terminating, "terminating": terminating },
                "topology": { "kubernetes.io/hostname": node },
            })
        })
        .collect()
}

/// Creates slice `name` of Service `service` with `endpoints` ([`endpoints`]) on port `port_name`/8080, managed
/// by `managed_by` (the endpoint-slice controller's value, or another writer's; `None`: no label).
pub async fn create(
    (slices, resource): &(Api<DynamicObject>, ApiResource),
    name: &str,
    service: &str,
    managed_by: Option<&str>,
    port_name: &str,
    endpoints: serde_json::Value,
) {
    let mut labels = json!({ "kubernetes.io/service-name": service });
    if let Some(by) = managed_by {
        labels[MANAGED_BY.0] = json!(by);
    }
    let slice: DynamicObject = serde_json::from_value(json!({
        "apiVersion": resource.api_version,
        "kind": "EndpointSlice",
        "metadata": { "name": name, "labels": labels },
        "addressType": "IPv4",
        "endpoints": endpoints,
        "ports": [{ "name": port_name, "port": 8080, "protocol": "TCP" }],
    }))
    .unwrap();
    slices.create(&PostParams::default(), &slice).await.unwrap();
}
