//! The node-lifecycle controller against the real kube-apiserver with the fake provider. No kubelet runs, so
//! the tests set the Ready condition themselves.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::too_many_lines)]

use std::{sync::Arc, time::Duration};

use ccm_controllers::{keys, node_lifecycle};
use ccm_testing::{
    TestEnv,
    provider::{FakeInstance, FakeProvider, Method},
    unique_name,
};
use k8s_openapi::api::core::v1::Node;
use kube::{
    Api,
    api::{DeleteParams, Patch, PostParams},
};
use serde_json::json;

async fn create(nodes: &Api<Node>, name: &str, group: &str, provider_id: &str, ready: &str) {
    let node: Node = serde_json::from_value(json!({
        "metadata": { "name": name, "labels": { "ccm-test/group": group } },
        "spec": { "providerID": provider_id },
    }))
    .unwrap();
    nodes.create(&PostParams::default(), &node).await.unwrap();
    set_ready(nodes, name, ready).await;
}

async fn set_ready(nodes: &Api<Node>, name: &str, ready: &str) {
    let status =
        json!({ "status": { "conditions": [{ "type": "Ready", "status": ready, "reason": "Test" }] } });
    nodes
        .patch_status(name, &Default::default(), &Patch::Strategic(&status))
        .await
        .unwrap();
}

fn has_shutdown_taint(n: &Node) -> bool {
    n.spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .is_some_and(|t| t.iter().any(|t| t.key == keys::TAINT_SHUTDOWN))
}

async fn eventually(what: &str, mut check: impl AsyncFnMut() -> bool) {
    for _ in 0..100 {
        if check().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("timed out waiting for {what}");
}

#[tokio::test]
async fn gone_instances_are_deleted_and_shut_down_ones_tainted() {
    let client = TestEnv::get().kube_client().await.unwrap();
    let nodes: Api<Node> = Api::all(client.clone());
    let group = unique_name("lc");
    let gone = format!("{group}-gone");
    let stopped = format!("{group}-stopped");
    let ready_gone = format!("{group}-ready-gone");
    let running = format!("{group}-running");

    let cloud = FakeProvider::new();
    cloud.add_instance(FakeInstance::new(&stopped, "fake://stopped").shut_down());
    cloud.add_instance(FakeInstance::new(&running, "fake://running"));
    create(&nodes, &gone, &group, "fake://gone", "False").await;
    create(&nodes, &stopped, &group, "fake://stopped", "Unknown").await;
    create(&nodes, &ready_gone, &group, "fake://ready-gone", "True").await;
    create(&nodes, &running, &group, "fake://running", "False").await;

    let mut config = node_lifecycle::NodeLifecycleConfig::default();
    config.node_monitor_period = Duration::from_millis(200);
    config.node_selector = Some(format!("ccm-test/group={group}"));
    let (stop, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(node_lifecycle::run(
        client.clone(),
        Arc::new(cloud.clone()),
        config,
        async {
            stop_rx.await.ok();
        },
    ));

    eventually("the node of the gone instance to be deleted", async || {
        nodes.get_opt(&gone).await.unwrap().is_none()
    })
    .await;
    eventually("the shut-down node to be tainted", async || {
        has_shutdown_taint(&nodes.get(&stopped).await.unwrap())
    })
    .await;
    // Several passes later: a Ready node is never deleted, a running NotReady one never tainted.
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert!(
        nodes.get_opt(&ready_gone).await.unwrap().is_some(),
        "Ready nodes are never deleted"
    );
    assert!(!has_shutdown_taint(&nodes.get(&running).await.unwrap()));
    // Batched: every pass made at most one exists and one shutdown call, never single ones.
    assert_eq!(cloud.count(Method::InstanceExists), 0);
    assert_eq!(cloud.count(Method::InstanceShutdown), 0);
    assert!(
        cloud
            .batch_sizes(Method::InstanceExistsBatch)
            .iter()
            .all(|&n| n <= 3)
    );

    // The instance starts and the node becomes Ready: the taint goes.
    cloud.set_shutdown(&stopped, false);
    set_ready(&nodes, &stopped, "True").await;
    eventually("the shutdown taint to be removed", async || {
        !has_shutdown_taint(&nodes.get(&stopped).await.unwrap())
    })
    .await;

    stop.send(()).unwrap();
    task.await.unwrap().unwrap();
    for name in [&stopped, &ready_gone, &running] {
        nodes.delete(name, &DeleteParams::default()).await.unwrap();
    }
}
