//! Proves the Kubernetes half of the test environment is a real apiserver: create, list, watch and patch
//! (merge and server-side apply, on the status subresource too) a Node, asserting what the server stored.

#![allow(clippy::too_many_lines)]

use std::time::Duration;

use ccm_testing::{TestEnv, unique_name};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Node;
use kube::{
    Api, ResourceExt,
    api::{DeleteParams, ListParams, Patch, PatchParams, PostParams},
};
use kube_runtime::{WatchStreamExt, watcher};
use serde_json::json;

#[tokio::test]
async fn node_create_list_watch_patch_against_the_real_apiserver() {
    let env = TestEnv::get();
    let client = env.kube_client().await.expect("kube client");
    let nodes: Api<Node> = Api::all(client);
    let name = unique_name("smoke-node");

    let node: Node = serde_json::from_value(json!({
        "metadata": { "name": name, "labels": { "ccm-test/smoke": name } },
        "spec": { "taints": [{ "key": "node.cloudprovider.kubernetes.io/uninitialized",
                               "value": "true", "effect": "NoSchedule" }] }
    }))
    .unwrap();
    let created = nodes
        .create(&PostParams::default(), &node)
        .await
        .expect("create node");
    assert!(created.uid().is_some(), "the server assigns a UID");

    let listed = nodes
        .list(&ListParams::default().labels(&format!("ccm-test/smoke={name}")))
        .await
        .expect("list nodes");
    assert_eq!(
        listed.items.iter().map(|n| n.name_any()).collect::<Vec<_>>(),
        vec![name.clone()]
    );

    // Watch the node, then change it: the watcher must deliver the change made by the merge patch.
    let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
    let mut events = watcher(nodes.clone(), config).applied_objects().boxed();
    let first = tokio::time::timeout(Duration::from_secs(10), events.try_next())
        .await
        .expect("initial watch event in time")
        .expect("watch ok")
        .expect("stream open");
    assert_eq!(first.name_any(), name);

    let merge = json!({ "metadata": { "labels": { "ccm-test/patched": "merge" } } });
    nodes
        .patch(&name, &PatchParams::default(), &Patch::Merge(&merge))
        .await
        .expect("merge patch");
    let seen = tokio::time::timeout(Duration::from_secs(10), async {
        while let Some(node) = events.try_next().await.expect("watch ok") {
            if node.labels().get("ccm-test/patched").map(String::as_str) == Some("merge") {
                return node;
            }
        }
        panic!("watch stream ended");
    })
    .await
    .expect("the watch delivers the patched node");
    assert_eq!(seen.name_any(), name);

    // Server-side apply on the status subresource, as the cloud-node controller does for addresses.
    let status = json!({
        "apiVersion": "v1", "kind": "Node", "metadata": { "name": name },
        "status": { "addresses": [{ "type": "InternalIP", "address": "10.0.0.7" }] }
    });
    nodes
        .patch_status(
            &name,
            &PatchParams::apply("ccm-smoke").force(),
            &Patch::Apply(&status),
        )
        .await
        .expect("server-side apply of status");
    // A merge patch on status too, as node-lifecycle does for conditions.
    let condition = json!({ "status": { "conditions": [{ "type": "NetworkUnavailable", "status": "False",
        "reason": "RouteCreated", "message": "smoke" }] } });
    nodes
        .patch_status(&name, &PatchParams::default(), &Patch::Merge(&condition))
        .await
        .expect("merge patch of status");

    let stored = nodes.get(&name).await.expect("get node");
    let stored_status = stored.status.clone().expect("status");
    let addresses = stored_status.addresses.expect("addresses");
    assert_eq!(addresses.len(), 1);
    assert_eq!(
        (addresses[0].type_.as_str(), addresses[0].address.as_str()),
        ("InternalIP", "10.0.0.7")
    );
    let conditions = stored_status.conditions.expect("conditions");
    assert!(
        conditions
            .iter()
            .any(|c| c.type_ == "NetworkUnavailable" && c.status == "False")
    );
    assert_eq!(
        stored.labels().get("ccm-test/patched").map(String::as_str),
        Some("merge")
    );
    assert!(
        stored
            .managed_fields()
            .iter()
            .any(|m| m.manager.as_deref() == Some("ccm-smoke")),
        "server-side apply recorded its field manager"
    );

    nodes
        .delete(&name, &DeleteParams::default())
        .await
        .expect("delete node");
    let gone = nodes.get_opt(&name).await.expect("get after delete");
    assert!(gone.is_none(), "node deleted");
}
