//! The service controller hands a provider that follows a Service's endpoints what its EndpointSlices say,
//! against the real kube-apiserver (1.20: `discovery.k8s.io/v1beta1` only). The test apiserver runs no
//! controller-manager, so the slices are written here as the EndpointSlice controller of 1.20 writes them: the
//! node in `topology`, readiness and (with the `EndpointSliceTerminatingCondition` gate) `serving` and
//! `terminating` in `conditions`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::too_many_lines)]

use std::{sync::Arc, time::Duration};

use ccm_controllers::service;
use ccm_testing::{
    TestEnv,
    provider::{FOLLOW_ENDPOINTS_ANNOTATION, FakeProvider, Method},
    unique_name,
};
use k8s_openapi::api::core::v1::{Node, Service};
use kube::{
    Api,
    api::{ApiResource, DeleteParams, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams},
};
use serde_json::json;

async fn eventually(what: &str, mut check: impl FnMut() -> bool) {
    for _ in 0..150 {
        if check() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("timed out waiting for {what}");
}

/// The EndpointSlice API the apiserver serves (`v1`, else `v1beta1`), as the controller picks it.
async fn slices_api(client: &kube::Client, ns: &str) -> (Api<DynamicObject>, ApiResource) {
    let version = match client.list_api_group_resources("discovery.k8s.io/v1").await {
        Ok(list) if list.resources.iter().any(|r| r.name == "endpointslices") => "v1",
        _ => "v1beta1",
    };
    let gvk = GroupVersionKind::gvk("discovery.k8s.io", version, "EndpointSlice");
    let resource = ApiResource::from_gvk_with_plural(&gvk, "endpointslices");
    (Api::namespaced_with(client.clone(), ns, &resource), resource)
}

/// One endpoint as the 1.20 EndpointSlice controller writes it.
fn endpoint(ip: &str, node: &str, ready: bool, terminating: bool) -> serde_json::Value {
    json!({
        "addresses": [ip],
        "conditions": { "ready": ready, "serving": ready || terminating, "terminating": terminating },
        "topology": { "kubernetes.io/hostname": node },
    })
}

fn slice(resource: &ApiResource, name: &str, service: &str, endpoints: serde_json::Value) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": resource.api_version,
        "kind": "EndpointSlice",
        "metadata": { "name": name, "labels": {
            "kubernetes.io/service-name": service,
            "endpointslice.kubernetes.io/managed-by": "endpointslice-controller.k8s.io",
        } },
        "addressType": "IPv4",
        "endpoints": endpoints,
        "ports": [{ "name": "http", "port": 8080, "protocol": "TCP" }],
    }))
    .unwrap()
}

/// The addresses of the endpoints the fake load balancer of `key` was given that are ready, not terminating.
fn ready_given(cloud: &FakeProvider, key: &str) -> Option<Vec<String>> {
    let lbs = cloud.load_balancers();
    let endpoints = lbs.get(key)?.endpoints.as_ref()?;
    Some(endpoints.ready().map(|e| e.address.to_string()).collect())
}

#[tokio::test]
async fn a_load_balancer_that_follows_endpoints_gets_them_and_their_changes() {
    let client = TestEnv::get().kube_client().await.unwrap();
    let ns = "default";
    let services: Api<Service> = Api::namespaced(client.clone(), ns);
    let nodes: Api<Node> = Api::all(client.clone());
    let (slices, resource) = slices_api(&client, ns).await;
    let group = unique_name("eps");
    let name = group.clone();
    let node_names: Vec<String> = (0..2).map(|i| format!("{group}-n{i}")).collect();
    for n in &node_names {
        let node: Node = serde_json::from_value(json!({
            "metadata": { "name": n, "labels": { "ccm-test/group": group } },
            "spec": { "providerID": format!("fake://{n}") },
        }))
        .unwrap();
        nodes.create(&PostParams::default(), &node).await.unwrap();
    }
    // A pod ready on the first node, one starting on the second; and a slice of another Service.
    let first = slice(
        &resource,
        &format!("{name}-a"),
        &name,
        json!([
            endpoint("10.1.0.1", &node_names[0], true, false),
            endpoint("10.1.0.2", &node_names[1], false, false)
        ]),
    );
    slices.create(&PostParams::default(), &first).await.unwrap();
    let other = format!("{name}-other");
    let unrelated = slice(
        &resource,
        &other,
        &other,
        json!([endpoint("10.9.0.1", &node_names[0], true, false)]),
    );
    slices.create(&PostParams::default(), &unrelated).await.unwrap();

    let cloud = FakeProvider::new();
    let mut config = service::ServiceConfig::default();
    config.service_selector = Some(format!("ccm-test/group={group}"));
    config.node_selector = Some(format!("ccm-test/group={group}"));
    config.node_sync_window = Duration::from_millis(200);
    let (stop, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(service::run(
        client.clone(),
        Arc::new(cloud.clone()),
        config,
        async {
            stop_rx.await.ok();
        },
    ));

    let svc: Service = serde_json::from_value(json!({
        "metadata": { "name": name, "labels": { "ccm-test/group": group },
                      "annotations": { FOLLOW_ENDPOINTS_ANNOTATION: "true" } },
        "spec": { "type": "LoadBalancer", "ports": [{ "name": "http", "port": 80, "targetPort": 8080 }] },
    }))
    .unwrap();
    services.create(&PostParams::default(), &svc).await.unwrap();
    let key = format!("{ns}/{name}");

    // The ensure is given the endpoints of the Service's slices, and only those.
    eventually("the ensure with endpoints", || {
        ready_given(&cloud, &key).is_some()
    })
    .await;
    let given = cloud.load_balancers()[&key].endpoints.clone().unwrap();
    let addresses: Vec<String> = given.endpoints.iter().map(|e| e.address.to_string()).collect();
    assert_eq!(addresses, ["10.1.0.1", "10.1.0.2"]);
    assert_eq!(
        given.endpoints[0].node_name.as_deref(),
        Some(node_names[0].as_str())
    );
    assert_eq!(given.endpoints[0].port("http").map(|p| p.port), Some(8080));
    assert_eq!(given.nodes_with_ready_endpoints(), [node_names[0].as_str()]);

    // The second pod becomes ready, and then the first one terminates: each change an update with the
    // endpoints, never a new ensure.
    let two_ready = json!({ "endpoints": [
        endpoint("10.1.0.1", &node_names[0], true, false),
        endpoint("10.1.0.2", &node_names[1], true, false),
    ] });
    let first_name = format!("{name}-a");
    let params = PatchParams::default();
    slices
        .patch(&first_name, &params, &Patch::Merge(&two_ready))
        .await
        .unwrap();
    eventually("both endpoints ready", || {
        ready_given(&cloud, &key) == Some(vec!["10.1.0.1".into(), "10.1.0.2".into()])
    })
    .await;
    let terminating = json!({ "endpoints": [
        endpoint("10.1.0.1", &node_names[0], false, true),
        endpoint("10.1.0.2", &node_names[1], true, false),
    ] });
    slices
        .patch(&first_name, &params, &Patch::Merge(&terminating))
        .await
        .unwrap();
    eventually("the first endpoint terminating", || {
        ready_given(&cloud, &key) == Some(vec!["10.1.0.2".into()])
    })
    .await;
    let given = cloud.load_balancers()[&key].endpoints.clone().unwrap();
    let gone = &given.endpoints[0];
    assert!(gone.terminating && gone.serving && !gone.ready, "{gone:?}");
    assert_eq!(cloud.count(Method::EnsureLoadBalancer), 1, "{:?}", cloud.calls());
    assert_eq!(cloud.count(Method::UpdateLoadBalancer), 2, "{:?}", cloud.calls());

    // A change to another Service's slice updates nothing.
    let moved = json!({ "endpoints": [endpoint("10.9.0.2", &node_names[1], true, false)] });
    slices
        .patch(&other, &params, &Patch::Merge(&moved))
        .await
        .unwrap();
    // The slice deleted: an update with no endpoints.
    slices
        .delete(&first_name, &DeleteParams::default())
        .await
        .unwrap();
    eventually("no endpoints", || {
        cloud.load_balancers()[&key]
            .endpoints
            .as_ref()
            .is_some_and(|e| e.endpoints.is_empty())
    })
    .await;
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(cloud.count(Method::UpdateLoadBalancer), 3, "{:?}", cloud.calls());

    services.delete(&name, &DeleteParams::default()).await.unwrap();
    eventually("the load balancer deleted", || {
        !cloud.load_balancers().contains_key(&key)
    })
    .await;
    stop.send(()).unwrap();
    task.await.unwrap().unwrap();
    slices.delete(&other, &DeleteParams::default()).await.unwrap();
    for n in &node_names {
        nodes.delete(n, &DeleteParams::default()).await.unwrap();
    }
}

#[tokio::test]
async fn a_load_balancer_that_does_not_follow_endpoints_is_never_given_them() {
    let client = TestEnv::get().kube_client().await.unwrap();
    let services: Api<Service> = Api::namespaced(client.clone(), "default");
    let (slices, resource) = slices_api(&client, "default").await;
    let group = unique_name("noeps");
    let cloud = FakeProvider::new();
    let mut config = service::ServiceConfig::default();
    config.service_selector = Some(format!("ccm-test/group={group}"));
    // No Nodes of its own: other tests' Nodes coming and going must not update this load balancer.
    config.node_selector = Some(format!("ccm-test/group={group}"));
    config.node_sync_window = Duration::from_millis(200);
    let (stop, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(service::run(
        client.clone(),
        Arc::new(cloud.clone()),
        config,
        async {
            stop_rx.await.ok();
        },
    ));
    let svc: Service = serde_json::from_value(json!({
        "metadata": { "name": group, "labels": { "ccm-test/group": group } },
        "spec": { "type": "LoadBalancer", "ports": [{ "port": 80 }] },
    }))
    .unwrap();
    services.create(&PostParams::default(), &svc).await.unwrap();
    let key = format!("default/{group}");
    eventually("the ensure", || cloud.load_balancers().contains_key(&key)).await;
    let slice = slice(
        &resource,
        &group,
        &group,
        json!([endpoint("10.2.0.1", "n", true, false)]),
    );
    slices.create(&PostParams::default(), &slice).await.unwrap();
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert_eq!(cloud.load_balancers()[&key].endpoints, None);
    assert_eq!(cloud.count(Method::UpdateLoadBalancer), 0, "{:?}", cloud.calls());
    services.delete(&group, &DeleteParams::default()).await.unwrap();
    eventually("the load balancer deleted", || {
        !cloud.load_balancers().contains_key(&key)
    })
    .await;
    stop.send(()).unwrap();
    task.await.unwrap().unwrap();
    slices.delete(&group, &DeleteParams::default()).await.unwrap();
}

/// The plans a dry run reported, by key.
#[derive(Debug, Default)]
struct Plans(std::sync::Mutex<std::collections::BTreeMap<String, Vec<String>>>);

impl ccm_controllers::DryRunSink for Plans {
    fn load_balancer(&self, key: &str, plan: Option<ccm_cloud_provider::LoadBalancerPlan>) {
        let mut plans = self.0.lock().unwrap();
        match plan {
            Some(plan) => plans.insert(key.to_owned(), plan.changes),
            None => plans.remove(key),
        };
    }
    fn routes(&self, _: std::collections::BTreeMap<String, Vec<String>>) {}
    fn changes(&self, _: &str, _: &str, _: Vec<String>) {}
}

/// A dry run plans a Service that follows its endpoints with them (what its ensure would be given), plans again
/// when they change, and writes nothing: no ensure, no update.
#[tokio::test]
async fn a_dry_run_plans_with_the_endpoints_and_again_when_they_change() {
    let client = TestEnv::get().kube_client().await.unwrap();
    let services: Api<Service> = Api::namespaced(client.clone(), "default");
    let (slices, resource) = slices_api(&client, "default").await;
    let group = unique_name("dryeps");
    let slice_of = |ready: bool| {
        slice(
            &resource,
            &group,
            &group,
            json!([
                endpoint("10.3.0.1", "n", true, false),
                endpoint("10.3.0.2", "n", ready, false)
            ]),
        )
    };
    slices
        .create(&PostParams::default(), &slice_of(false))
        .await
        .unwrap();
    let cloud = FakeProvider::new();
    let plans = Arc::new(Plans::default());
    let mut config = service::ServiceConfig::default();
    config.service_selector = Some(format!("ccm-test/group={group}"));
    config.node_selector = Some(format!("ccm-test/group={group}"));
    config.node_sync_window = Duration::from_millis(200);
    config.plans = Some(plans.clone());
    let (stop, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(service::run(
        client.clone(),
        Arc::new(cloud.clone()),
        config,
        async {
            stop_rx.await.ok();
        },
    ));
    let svc: Service = serde_json::from_value(json!({
        "metadata": { "name": group, "labels": { "ccm-test/group": group },
                      "annotations": { FOLLOW_ENDPOINTS_ANNOTATION: "true" } },
        "spec": { "type": "LoadBalancer", "ports": [{ "name": "http", "port": 80, "targetPort": 8080 }] },
    }))
    .unwrap();
    services.create(&PostParams::default(), &svc).await.unwrap();
    let key = format!("default/{group}");
    let planned = |ready: &str| {
        let plans = plans.0.lock().unwrap();
        plans
            .get(&key)
            .is_some_and(|lines| lines.iter().any(|l| l.ends_with(ready)))
    };
    eventually("a plan with one ready endpoint", || {
        planned("1 ready endpoints [10.3.0.1]")
    })
    .await;
    // The second pod becomes ready: planned again, with both.
    let both = json!({ "endpoints": [
        endpoint("10.3.0.1", "n", true, false),
        endpoint("10.3.0.2", "n", true, false),
    ] });
    slices
        .patch(&group, &PatchParams::default(), &Patch::Merge(&both))
        .await
        .unwrap();
    eventually("a plan with both endpoints", || {
        planned("2 ready endpoints [10.3.0.1,10.3.0.2]")
    })
    .await;
    // Nothing was written: a dry run only plans.
    assert!(cloud.load_balancers().is_empty());
    assert_eq!(cloud.count(Method::EnsureLoadBalancer), 0, "{:?}", cloud.calls());
    assert_eq!(cloud.count(Method::UpdateLoadBalancer), 0, "{:?}", cloud.calls());
    assert!(cloud.count(Method::PlanLoadBalancer) >= 2, "{:?}", cloud.calls());
    stop.send(()).unwrap();
    task.await.unwrap().unwrap();
    services.delete(&group, &DeleteParams::default()).await.unwrap();
    slices.delete(&group, &DeleteParams::default()).await.unwrap();
}
