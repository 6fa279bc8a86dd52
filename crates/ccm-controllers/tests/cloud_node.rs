//! The cloud-node controller against the real kube-apiserver with the fake provider.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::too_many_lines)]

use std::{sync::Arc, time::Duration};

use ccm_cloud_provider::{InstanceMetadata, NodeAddress, NodeAddressType::*};
use ccm_controllers::{cloud_node, keys};
use ccm_testing::{
    TestEnv,
    provider::{FakeInstance, FakeProvider, Method},
    unique_name,
};
use k8s_openapi::api::core::v1::{Event, Node};
use kube::{
    Api, ResourceExt,
    api::{DeleteParams, ListParams, Patch, PostParams},
};
use serde_json::json;

async fn wait_for<T, F, Fut>(what: &str, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    for _ in 0..200 {
        if let Some(v) = f().await {
            return v;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("timed out waiting for {what}");
}

#[tokio::test]
async fn uninitialized_nodes_get_provider_id_addresses_labels_and_lose_the_taint() {
    let client = TestEnv::get().kube_client().await.unwrap();
    let nodes: Api<Node> = Api::all(client.clone());
    let group = unique_name("cn");
    let names: Vec<String> = (0..3).map(|i| format!("{group}-{i}")).collect();

    let cloud = FakeProvider::new();
    for (i, name) in names.iter().enumerate() {
        cloud.add_instance(
            FakeInstance::new(name, format!("fake://i-{i}"))
                .instance_type("m5.large")
                .zone("zone-a", "region-1")
                .label("example.com/pool", "blue")
                .addresses(vec![
                    NodeAddress::new(InternalIp, format!("10.0.0.{i}")),
                    NodeAddress::new(ExternalIp, format!("192.0.2.{i}")),
                ]),
        );
    }
    for name in &names {
        let node: Node = serde_json::from_value(json!({
            "metadata": { "name": name, "labels": { "ccm-test/group": group } },
            "spec": { "taints": [
                { "key": keys::TAINT_UNINITIALIZED, "value": "true", "effect": "NoSchedule" },
                { "key": "example.com/other", "effect": "NoSchedule" }
            ] },
        }))
        .unwrap();
        nodes.create(&PostParams::default(), &node).await.unwrap();
        // The kubelet reports its hostname; the cloud reports none, so it must be kept.
        let status = json!({ "status": { "addresses": [{ "type": "Hostname", "address": name }] } });
        nodes
            .patch_status(name, &Default::default(), &kube::api::Patch::Merge(&status))
            .await
            .unwrap();
    }

    let mut config = cloud_node::CloudNodeConfig::default();
    config.node_selector = Some(format!("ccm-test/group={group}"));
    config.batch_window = Duration::from_millis(200);
    let metrics = config.metrics.clone();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(cloud_node::run(
        client.clone(),
        Arc::new(cloud.clone()),
        config,
        async {
            stopped.await.ok();
        },
    ));

    for (i, name) in names.iter().enumerate() {
        let node = wait_for("initialization", || {
            let nodes = nodes.clone();
            async move {
                let n = nodes.get(name).await.ok()?;
                let addrs = n.status.as_ref()?.addresses.clone().unwrap_or_default();
                (addrs.len() == 3).then_some(n)
            }
        })
        .await;
        let spec = node.spec.clone().unwrap();
        assert_eq!(
            spec.provider_id.as_deref(),
            Some(format!("fake://i-{i}").as_str())
        );
        let taints: Vec<String> = spec
            .taints
            .unwrap_or_default()
            .into_iter()
            .map(|t| t.key)
            .collect();
        // (The apiserver's TaintNodesByCondition admission adds node.kubernetes.io/not-ready on create.)
        assert!(
            !taints.iter().any(|t| t == keys::TAINT_UNINITIALIZED),
            "{taints:?}"
        );
        assert!(
            taints.iter().any(|t| t == "example.com/other"),
            "other taints are kept: {taints:?}"
        );
        let labels = node.labels();
        assert_eq!(
            labels.get(keys::LABEL_INSTANCE_TYPE).map(String::as_str),
            Some("m5.large")
        );
        assert_eq!(
            labels.get(keys::LABEL_ZONE_BETA).map(String::as_str),
            Some("zone-a")
        );
        assert_eq!(
            labels.get(keys::LABEL_REGION).map(String::as_str),
            Some("region-1")
        );
        assert_eq!(labels.get("example.com/pool").map(String::as_str), Some("blue"));
        let addrs: Vec<(String, String)> = node
            .status
            .unwrap()
            .addresses
            .unwrap()
            .into_iter()
            .map(|a| (a.type_, a.address))
            .collect();
        assert_eq!(
            addrs,
            vec![
                ("InternalIP".to_owned(), format!("10.0.0.{i}")),
                ("ExternalIP".to_owned(), format!("192.0.2.{i}")),
                ("Hostname".to_owned(), name.clone()),
            ]
        );
    }
    // Pending together when the controller starts, the three nodes reach the provider in one batch call.
    assert_eq!(cloud.batch_sizes(Method::InstanceMetadataBatch), vec![3]);
    assert_eq!(cloud.count(Method::InstanceMetadata), 0, "no single-node calls");

    // A Synced Event per node, in namespace default.
    let events: Api<Event> = Api::namespaced(client.clone(), "default");
    let synced = wait_for("Synced events", || {
        let events = events.clone();
        let names = names.clone();
        async move {
            let list = events.list(&ListParams::default()).await.ok()?;
            let n = list
                .items
                .iter()
                .filter(|e| {
                    e.reason.as_deref() == Some("Synced")
                        && names.contains(e.involved_object.name.as_ref().unwrap())
                })
                .count();
            (n == 3).then_some(n)
        }
    })
    .await;
    assert_eq!(synced, 3);

    // Later events on initialized nodes cost no provider calls.
    let before = cloud.total_calls();
    nodes
        .patch(
            &names[0],
            &Default::default(),
            &kube::api::Patch::Merge(&json!({"metadata": {"labels": {"touch": "1"}}})),
        )
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(cloud.total_calls(), before);
    assert!(metrics.snapshot().reconciles >= 3);

    stop.send(()).unwrap();
    task.await.unwrap().unwrap();
    for name in &names {
        nodes.delete(name, &DeleteParams::default()).await.unwrap();
    }
}

#[tokio::test]
async fn cloud_errors_keep_the_taint_and_are_retried() {
    let client = TestEnv::get().kube_client().await.unwrap();
    let nodes: Api<Node> = Api::all(client.clone());
    let group = unique_name("cn-err");
    let name = format!("{group}-0");
    let cloud = FakeProvider::new();
    cloud.add_instance(FakeInstance::new(&name, "fake://i-err"));
    cloud.fail_for(Method::InstanceMetadata, &name, Some(2), || {
        ccm_cloud_provider::CloudError::other("throttled")
    });
    let node: Node = serde_json::from_value(json!({
        "metadata": { "name": name, "labels": { "ccm-test/group": group } },
        "spec": { "taints": [{ "key": keys::TAINT_UNINITIALIZED, "value": "true", "effect": "NoSchedule" }] },
    }))
    .unwrap();
    nodes.create(&PostParams::default(), &node).await.unwrap();
    let mut config = cloud_node::CloudNodeConfig::default();
    config.node_selector = Some(format!("ccm-test/group={group}"));
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(cloud_node::run(
        client.clone(),
        Arc::new(cloud.clone()),
        config,
        async {
            stopped.await.ok();
        },
    ));
    let node = wait_for("initialization after retries", || {
        let nodes = nodes.clone();
        let name = name.clone();
        async move {
            let n = nodes.get(&name).await.ok()?;
            n.spec.as_ref()?.provider_id.is_some().then_some(n)
        }
    })
    .await;
    assert!(
        !node
            .spec
            .unwrap()
            .taints
            .unwrap_or_default()
            .iter()
            .any(|t| t.key == keys::TAINT_UNINITIALIZED)
    );
    assert_eq!(
        cloud.count(Method::InstanceMetadataBatch),
        3,
        "two failures, then success"
    );
    stop.send(()).unwrap();
    task.await.unwrap().unwrap();
    nodes.delete(&name, &DeleteParams::default()).await.unwrap();
}

/// The initialization is a patch of what it changes under the read Node's resourceVersion. Against the real
/// apiserver: a patch made from a Node another writer has changed since (a taint added) is refused with 409
/// Conflict rather than dropping that taint with the list it carries; made from the Node read anew, it applies
/// and keeps it. (The controller reads the Node again on a conflict and decides the write again.)
#[tokio::test]
async fn an_initialization_patch_from_a_stale_node_is_refused() {
    let client = TestEnv::get().kube_client().await.unwrap();
    let nodes: Api<Node> = Api::all(client.clone());
    let name = unique_name("cn-stale");
    let uninitialized = json!({ "key": keys::TAINT_UNINITIALIZED, "value": "true", "effect": "NoSchedule" });
    let node: Node = serde_json::from_value(json!({
        "metadata": { "name": name },
        "spec": { "taints": [uninitialized] },
    }))
    .unwrap();
    let stale = nodes.create(&PostParams::default(), &node).await.unwrap();
    let added = json!({ "spec": { "taints": [uninitialized, { "key": "example.com/added", "effect": "NoSchedule" }] } });
    nodes
        .patch(&name, &Default::default(), &Patch::Merge(&added))
        .await
        .unwrap();

    let meta = InstanceMetadata {
        provider_id: "fake://i-stale".into(),
        instance_type: "m5.large".into(),
        ..InstanceMetadata::default()
    };
    let write = |base: &Node| {
        let base = ccm_cloud_provider::NodeView::from(base);
        let desired = cloud_node::initialize_node(&base, &meta).unwrap();
        cloud_node::initialization_patch(&base, &desired)
    };
    let refused = nodes
        .patch(&name, &Default::default(), &Patch::Merge(&write(&stale)))
        .await
        .unwrap_err();
    assert!(
        matches!(&refused, kube::Error::Api(e) if e.code == 409),
        "a stale initialization must be refused: {refused}"
    );

    let fresh = nodes.get(&name).await.unwrap();
    let node = nodes
        .patch(&name, &Default::default(), &Patch::Merge(&write(&fresh)))
        .await
        .unwrap();
    let taints: Vec<String> = node
        .spec
        .iter()
        .flat_map(|s| s.taints.iter().flatten())
        .map(|t| t.key.clone())
        .collect();
    assert!(
        taints.iter().any(|t| t == "example.com/added")
            && !taints.iter().any(|t| t == keys::TAINT_UNINITIALIZED),
        "{taints:?}"
    );
    assert_eq!(
        node.spec.as_ref().unwrap().provider_id.as_deref(),
        Some("fake://i-stale")
    );
    assert_eq!(
        node.labels().get(keys::LABEL_INSTANCE_TYPE).map(String::as_str),
        Some("m5.large")
    );
    nodes.delete(&name, &DeleteParams::default()).await.unwrap();
}

#[tokio::test]
async fn addresses_are_refreshed_periodically_in_batches() {
    let client = TestEnv::get().kube_client().await.unwrap();
    let nodes: Api<Node> = Api::all(client.clone());
    let group = unique_name("cn-refresh");
    let names: Vec<String> = (0..2).map(|i| format!("{group}-{i}")).collect();
    let cloud = FakeProvider::new();
    for (i, name) in names.iter().enumerate() {
        cloud.add_instance(
            FakeInstance::new(name, format!("fake://r-{i}"))
                .addresses(vec![NodeAddress::new(InternalIp, format!("10.1.0.{i}"))]),
        );
        // Already initialized: no taint, provider ID set.
        let node: Node = serde_json::from_value(json!({
            "metadata": { "name": name, "labels": { "ccm-test/group": group } },
            "spec": { "providerID": format!("fake://r-{i}") },
        }))
        .unwrap();
        nodes.create(&PostParams::default(), &node).await.unwrap();
    }
    let mut config = cloud_node::CloudNodeConfig::default();
    config.node_selector = Some(format!("ccm-test/group={group}"));
    config.node_status_update_frequency = Duration::from_millis(300);
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(cloud_node::run(
        client.clone(),
        Arc::new(cloud.clone()),
        config,
        async {
            stopped.await.ok();
        },
    ));
    let address_of = |n: Node| {
        n.status
            .and_then(|s| s.addresses)
            .unwrap_or_default()
            .first()
            .map(|a| a.address.clone())
    };
    wait_for("first refresh", || {
        let nodes = nodes.clone();
        let name = names[1].clone();
        async move { (address_of(nodes.get(&name).await.ok()?)? == "10.1.0.1").then_some(()) }
    })
    .await;
    cloud.set_addresses(&names[1], vec![NodeAddress::new(InternalIp, "10.1.9.9")]);
    wait_for("refresh after the cloud changed", || {
        let nodes = nodes.clone();
        let name = names[1].clone();
        async move { (address_of(nodes.get(&name).await.ok()?)? == "10.1.9.9").then_some(()) }
    })
    .await;
    stop.send(()).unwrap();
    task.await.unwrap().unwrap();
    // Every refresh pass asked for both nodes in one call; nothing was asked one node at a time.
    let batches = cloud.batch_sizes(Method::InstanceMetadataBatch);
    assert!(
        batches.len() >= 2 && batches.iter().all(|&n| n == 2),
        "{batches:?}"
    );
    assert_eq!(cloud.count(Method::InstanceMetadata), 0);
    assert_eq!(
        address_of(nodes.get(&names[0]).await.unwrap()).as_deref(),
        Some("10.1.0.0")
    );
    for name in &names {
        nodes.delete(name, &DeleteParams::default()).await.unwrap();
    }
}
