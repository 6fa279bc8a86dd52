//! The route controller against the real kube-apiserver with the fake provider.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::too_many_lines)]

use std::{sync::Arc, time::Duration};

use ccm_cloud_provider::{CloudError, Route};
use ccm_controllers::{keys, route};
use ccm_testing::{
    TestEnv,
    provider::{FakeProvider, Method},
    unique_name,
};
use k8s_openapi::api::core::v1::Node;
use kube::{
    Api,
    api::{DeleteParams, PostParams},
};
use serde_json::json;

async fn eventually(what: &str, mut check: impl AsyncFnMut() -> bool) {
    for _ in 0..100 {
        if check().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("timed out waiting for {what}");
}

fn network_unavailable(n: &Node) -> Option<(String, String)> {
    n.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == keys::CONDITION_NETWORK_UNAVAILABLE)
        .map(|c| (c.status.clone(), c.reason.clone().unwrap_or_default()))
}

#[tokio::test]
async fn routes_follow_pod_cidrs_and_network_unavailable_is_false() {
    let client = TestEnv::get().kube_client().await.unwrap();
    let nodes: Api<Node> = Api::all(client.clone());
    let group = unique_name("rt");
    let cluster = group.clone();
    let a = format!("{group}-a");
    let b = format!("{group}-b");
    // The 1.20 test apiserver (IPv6DualStack off) keeps only the first pod CIDR, so dual stack is covered by
    // the unit tests of `route::plan`.
    for (name, cidrs) in [(&a, vec!["10.200.1.0/24"]), (&b, vec!["10.200.2.0/24"])] {
        let node: Node = serde_json::from_value(json!({
            "metadata": { "name": name, "labels": { "ccm-test/group": group } },
            "spec": { "podCIDR": cidrs[0], "podCIDRs": cidrs },
        }))
        .unwrap();
        nodes.create(&PostParams::default(), &node).await.unwrap();
    }
    let cloud = FakeProvider::new();
    // A stale route of a node that is gone, and one outside the cluster CIDR that is not ours.
    cloud.add_route(
        &cluster,
        Route {
            name: "stale".into(),
            target_node: "gone".into(),
            destination_cidr: "10.200.9.0/24".into(),
            ..Default::default()
        },
    );
    cloud.add_route(
        &cluster,
        Route {
            name: "foreign".into(),
            target_node: "x".into(),
            destination_cidr: "172.16.0.0/24".into(),
            ..Default::default()
        },
    );
    // node b's route fails once: its condition is True/NoRouteCreated until the next pass.
    cloud.fail_for(Method::CreateRoute, "10.200.2.0/24", Some(1), || {
        CloudError::other("quota")
    });

    let mut config = route::RouteConfig::new(&cluster, "10.200.0.0/16,fd00:10:200::/48").unwrap();
    config.route_reconciliation_period = Duration::from_millis(500);
    config.node_selector = Some(format!("ccm-test/group={group}"));
    let (stop, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(route::run(
        client.clone(),
        Arc::new(cloud.clone()),
        config,
        async {
            stop_rx.await.ok();
        },
    ));

    eventually("node a NetworkUnavailable=False", async || {
        network_unavailable(&nodes.get(&a).await.unwrap()) == Some(("False".into(), "RouteCreated".into()))
    })
    .await;
    eventually("node b NetworkUnavailable=False after the retry", async || {
        network_unavailable(&nodes.get(&b).await.unwrap()) == Some(("False".into(), "RouteCreated".into()))
    })
    .await;
    let mut routes: Vec<(String, String)> = cloud
        .route_list()
        .into_iter()
        .map(|(_, r)| (r.target_node, r.destination_cidr))
        .collect();
    routes.sort();
    assert_eq!(
        routes,
        vec![
            ("gone".to_owned(), "10.200.9.0/24".to_owned()),
            (a.clone(), "10.200.1.0/24".to_owned()),
            (b.clone(), "10.200.2.0/24".to_owned()),
            ("x".to_owned(), "172.16.0.0/24".to_owned()),
        ],
        "with a node selector, routes of Nodes never seen selected are left alone; foreign ones always"
    );
    assert_eq!(cloud.count(Method::CreateRoute), 3, "two routes, one retried");
    assert_eq!(cloud.count(Method::DeleteRoute), 0);

    // Further passes change nothing: no route calls, no condition writes.
    let creates = cloud.count(Method::CreateRoute);
    let rv = nodes.get(&a).await.unwrap().metadata.resource_version;
    tokio::time::sleep(Duration::from_millis(1200)).await;
    assert!(cloud.count(Method::ListRoutes) >= 3);
    assert_eq!(cloud.count(Method::CreateRoute), creates);
    assert_eq!(
        nodes.get(&a).await.unwrap().metadata.resource_version,
        rv,
        "no status write when unchanged"
    );

    // Node a leaves the selection: its route is left alone. Node b is deleted: its route goes.
    nodes
        .patch(
            &a,
            &Default::default(),
            &kube::api::Patch::Merge(&json!({"metadata": {"labels": {"ccm-test/group": null}}})),
        )
        .await
        .unwrap();
    nodes.delete(&b, &DeleteParams::default()).await.unwrap();
    eventually("node b's route deleted", async || {
        cloud.route_list().iter().all(|(_, r)| r.target_node != b)
    })
    .await;
    tokio::time::sleep(Duration::from_millis(1200)).await;
    assert!(
        cloud.route_list().iter().any(|(_, r)| r.target_node == a),
        "a Node that left the selection keeps its route"
    );
    assert_eq!(cloud.count(Method::DeleteRoute), 1);

    stop.send(()).unwrap();
    task.await.unwrap().unwrap();
    nodes.delete(&a, &DeleteParams::default()).await.unwrap();
}
