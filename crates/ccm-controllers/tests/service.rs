//! The service controller against the real kube-apiserver with the fake provider.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::too_many_lines)]

use std::{sync::Arc, time::Duration};

use ccm_controllers::{keys, service};
use ccm_testing::{
    TestEnv,
    provider::{FakeProvider, Method},
    unique_name,
};
use k8s_openapi::api::core::v1::{Event, Node, Service};
use kube::{
    Api, ResourceExt,
    api::{DeleteParams, ListParams, Patch, PostParams},
};
use serde_json::json;

async fn eventually(what: &str, mut check: impl AsyncFnMut() -> bool) {
    for _ in 0..150 {
        if check().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("timed out waiting for {what}");
}

/// The service controller over `cloud`, handling the Services and Nodes labelled `ccm-test/group=<group>`, with
/// `tweak` applied to its configuration.
fn start(
    client: &kube::Client,
    cloud: &FakeProvider,
    group: &str,
    tweak: impl FnOnce(&mut service::ServiceConfig),
) -> (
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<Result<(), ccm_controllers::Error>>,
) {
    let mut config = service::ServiceConfig::default();
    config.service_selector = Some(format!("ccm-test/group={group}"));
    config.node_selector = Some(format!("ccm-test/group={group}"));
    tweak(&mut config);
    let (stop, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(service::run(
        client.clone(),
        Arc::new(cloud.clone()),
        config,
        async {
            stop_rx.await.ok();
        },
    ));
    (stop, task)
}

async fn reasons(events: &Api<Event>, name: &str) -> Vec<String> {
    let list = events
        .list(&ListParams::default().fields(&format!("involvedObject.name={name}")))
        .await
        .unwrap();
    let mut items = list.items;
    items.sort_by_key(|e| e.metadata.creation_timestamp.clone().map(|t| t.0));
    items.into_iter().filter_map(|e| e.reason).collect()
}

#[tokio::test]
async fn load_balancer_lifecycle_with_finalizer_status_events_and_node_changes() {
    let client = TestEnv::get().kube_client().await.unwrap();
    let ns = "default";
    let services: Api<Service> = Api::namespaced(client.clone(), ns);
    let nodes: Api<Node> = Api::all(client.clone());
    let events: Api<Event> = Api::namespaced(client.clone(), ns);
    let group = unique_name("svc");
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

    let cloud = FakeProvider::new();
    let (stop, task) = start(&client, &cloud, &group, |config| {
        config.cluster_name = "test-cluster".into();
        config.node_sync_window = Duration::from_millis(200);
    });

    let svc: Service = serde_json::from_value(json!({
        "metadata": { "name": name, "labels": { "ccm-test/group": group } },
        "spec": { "type": "LoadBalancer", "ports": [{ "port": 80, "protocol": "TCP" }] },
    }))
    .unwrap();
    services.create(&PostParams::default(), &svc).await.unwrap();

    let key = format!("{ns}/{name}");
    eventually("finalizer and ingress", async || {
        let s = services.get(&name).await.unwrap();
        let ip = s
            .status
            .and_then(|s| s.load_balancer)
            .and_then(|l| l.ingress)
            .and_then(|i| i.first().cloned())
            .and_then(|i| i.ip);
        s.metadata
            .finalizers
            .unwrap_or_default()
            .contains(&keys::FINALIZER_LB_CLEANUP.to_owned())
            && ip.as_deref() == Some("192.0.2.10")
    })
    .await;
    let lb = &cloud.load_balancers()[&key];
    let mut hosts = lb.hosts.clone();
    hosts.sort();
    assert_eq!(hosts, node_names);
    eventually("Ensuring/Ensured events", async || {
        let r = reasons(&events, &name).await;
        r.contains(&"EnsuringLoadBalancer".to_owned()) && r.contains(&"EnsuredLoadBalancer".to_owned())
    })
    .await;
    assert_eq!(cloud.count(Method::EnsureLoadBalancer), 1);

    // Node changes: excluding one node becomes one UpdateLoadBalancer; a change that no host carries (an
    // annotation) becomes none. (A label is host data since the target-node-labels fix: a label change made in
    // another coalescing window than the exclusion was a second update, so this test failed under load.)
    nodes
        .patch(
            &node_names[0],
            &Default::default(),
            &Patch::Merge(&json!({"metadata": {"labels": {keys::LABEL_EXCLUDE_FROM_LB: "true"}}})),
        )
        .await
        .unwrap();
    nodes
        .patch(
            &node_names[1],
            &Default::default(),
            &Patch::Merge(&json!({"metadata": {"annotations": {"unrelated": "x"}}})),
        )
        .await
        .unwrap();
    eventually("hosts updated", async || {
        cloud.load_balancers()[&key].hosts == vec![node_names[1].clone()]
    })
    .await;
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(cloud.count(Method::UpdateLoadBalancer), 1, "{:?}", cloud.calls());
    assert_eq!(
        cloud.count(Method::EnsureLoadBalancer),
        1,
        "node changes do not re-ensure"
    );

    // Delete: the provider's delete is called, then the finalizer goes and the Service with it.
    services.delete(&name, &DeleteParams::default()).await.unwrap();
    eventually("service gone", async || {
        services.get_opt(&name).await.unwrap().is_none()
    })
    .await;
    assert_eq!(cloud.count(Method::EnsureLoadBalancerDeleted), 1);
    assert!(!cloud.load_balancers().contains_key(&key));
    eventually("Deleting/Deleted events", async || {
        let r = reasons(&events, &name).await;
        r.contains(&"DeletingLoadBalancer".to_owned()) && r.contains(&"DeletedLoadBalancer".to_owned())
    })
    .await;

    stop.send(()).unwrap();
    task.await.unwrap().unwrap();
    for n in &node_names {
        nodes.delete(n, &DeleteParams::default()).await.unwrap();
    }
}

#[tokio::test]
async fn ensure_failures_emit_warning_events_and_retry_after_is_honoured() {
    let client = TestEnv::get().kube_client().await.unwrap();
    let services: Api<Service> = Api::namespaced(client.clone(), "default");
    let events: Api<Event> = Api::namespaced(client.clone(), "default");
    let group = unique_name("svc-err");
    let name = group.clone();
    let cloud = FakeProvider::new();
    cloud.fail(Method::EnsureLoadBalancer, Some(1), || {
        ccm_cloud_provider::CloudError::retry_after("provisioning", Duration::from_millis(300))
    });
    let (stop, task) = start(&client, &cloud, &group, |_| {});
    let svc: Service = serde_json::from_value(json!({
        "metadata": { "name": name, "labels": { "ccm-test/group": group } },
        "spec": { "type": "LoadBalancer", "ports": [{ "port": 443, "protocol": "TCP" }] },
    }))
    .unwrap();
    services.create(&PostParams::default(), &svc).await.unwrap();
    // The retry comes after 300 ms, well before the 5 s backoff would allow.
    eventually("ingress after the retry", async || {
        services
            .get(&name)
            .await
            .unwrap()
            .status
            .and_then(|s| s.load_balancer)
            .and_then(|l| l.ingress)
            .is_some_and(|i| !i.is_empty())
    })
    .await;
    assert_eq!(cloud.count(Method::EnsureLoadBalancer), 2);
    let r = reasons(&events, &name).await;
    assert!(r.contains(&"SyncLoadBalancerFailed".to_owned()), "{r:?}");
    assert!(
        r.contains(&"UnAvailableLoadBalancer".to_owned()),
        "no nodes in this group: {r:?}"
    );
    // Changing the type away from LoadBalancer deletes the load balancer and releases the finalizer.
    services
        .patch(&name, &Default::default(), &Patch::Merge(&json!({"spec": {"type": "ClusterIP", "ports": [{"port": 443, "protocol": "TCP", "nodePort": null}]}})))
        .await
        .unwrap();
    // As upstream, the finalizer is removed first and the status cleared right after.
    eventually("finalizer released and status cleared", async || {
        let s = services.get(&name).await.unwrap();
        s.finalizers().is_empty()
            && s.status
                .and_then(|s| s.load_balancer)
                .and_then(|l| l.ingress)
                .unwrap_or_default()
                .is_empty()
    })
    .await;
    assert_eq!(cloud.count(Method::EnsureLoadBalancerDeleted), 1);
    stop.send(()).unwrap();
    task.await.unwrap().unwrap();
    services.delete(&name, &DeleteParams::default()).await.unwrap();
}

#[tokio::test]
async fn a_service_that_leaves_the_selector_keeps_its_load_balancer() {
    let client = TestEnv::get().kube_client().await.unwrap();
    let services: Api<Service> = Api::namespaced(client.clone(), "default");
    let group = unique_name("sel");
    let cloud = FakeProvider::new();
    let (stop, task) = start(&client, &cloud, &group, |config| {
        config.cluster_name = "test-cluster".into();
    });
    let svc: Service = serde_json::from_value(json!({
        "metadata": { "name": group, "labels": { "ccm-test/group": group } },
        "spec": { "type": "LoadBalancer", "ports": [{ "port": 80, "protocol": "TCP" }] },
    }))
    .unwrap();
    services.create(&PostParams::default(), &svc).await.unwrap();
    let key = format!("default/{group}");
    eventually("the load balancer", async || {
        cloud.load_balancers().contains_key(&key)
    })
    .await;

    // The label goes: the Service leaves the selected watch, but it is not deleted.
    services
        .patch(
            &group,
            &Default::default(),
            &Patch::Merge(&json!({"metadata": {"labels": {"ccm-test/group": null}}})),
        )
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(cloud.count(Method::EnsureLoadBalancerDeleted), 0, "left alone");
    assert!(cloud.load_balancers().contains_key(&key));

    stop.send(()).unwrap();
    task.await.unwrap().unwrap();
    // Not ours any more: drop the finalizer by hand, as its new owner would.
    services
        .patch(
            &group,
            &Default::default(),
            &Patch::Merge(&json!({"metadata": {"finalizers": null}})),
        )
        .await
        .unwrap();
    services.delete(&group, &DeleteParams::default()).await.unwrap();
}

/// A Service deleted while its load balancer's deletion waits on the cloud, its finalizer stripped by hand and
/// the Service applied again (a new UID): the new one is served at once, the old one's deletion goes on beside
/// it until the cloud lets it finish, and it never touches the new load balancer.
#[tokio::test]
async fn a_recreated_service_is_served_while_its_predecessor_is_deleted() {
    let client = TestEnv::get().kube_client().await.unwrap();
    let services: Api<Service> = Api::namespaced(client.clone(), "default");
    let events: Api<Event> = Api::namespaced(client.clone(), "default");
    let group = unique_name("again");
    let cloud = FakeProvider::new();
    let (stop, task) = start(&client, &cloud, &group, |config| {
        config.cluster_name = "test-cluster".into();
        config.min_retry_delay = Duration::from_millis(100);
    });
    let manifest: Service = serde_json::from_value(json!({
        "metadata": { "name": group, "labels": { "ccm-test/group": group } },
        "spec": { "type": "LoadBalancer", "ports": [{ "port": 80, "protocol": "TCP" }] },
    }))
    .unwrap();
    let served = async |uid: &str| {
        let s = services.get_opt(&group).await.unwrap();
        s.is_some_and(|s| {
            s.metadata.uid.as_deref() == Some(uid)
                && s.status
                    .and_then(|s| s.load_balancer)
                    .and_then(|l| l.ingress)
                    .is_some_and(|i| !i.is_empty())
        })
    };
    let first = services.create(&PostParams::default(), &manifest).await.unwrap();
    let first_uid = first.uid().unwrap();
    eventually("the first Service served", async || served(&first_uid).await).await;

    // Its deletion waits on the cloud; the operator strips the finalizer and applies the manifest again.
    let key = format!("default/{group}");
    let waiting =
        || ccm_cloud_provider::CloudError::waiting("network interfaces of sg-1", Duration::from_millis(200));
    cloud.fail_for(Method::EnsureLoadBalancerDeleted, &key, None, waiting);
    // Once the Service is re-created, the predecessor's cleanup is told its successor.
    cloud.fail_for(Method::EnsurePredecessorLoadBalancerDeleted, &key, None, waiting);
    services.delete(&group, &DeleteParams::default()).await.unwrap();
    eventually("the deletion waiting", async || {
        reasons(&events, &group)
            .await
            .contains(&"LoadBalancerDeletionPending".to_owned())
    })
    .await;
    services
        .patch(
            &group,
            &Default::default(),
            &Patch::Merge(&json!({"metadata": {"finalizers": null}})),
        )
        .await
        .unwrap();
    eventually("the first Service gone", async || {
        services.get_opt(&group).await.unwrap().is_none()
    })
    .await;
    let second = services.create(&PostParams::default(), &manifest).await.unwrap();
    let second_uid = second.uid().unwrap();
    eventually("the re-created Service served at once", async || {
        served(&second_uid).await
    })
    .await;
    assert_eq!(cloud.load_balancers()[&key].service_uid, second_uid);
    let predecessor = Method::EnsurePredecessorLoadBalancerDeleted;
    let attempts = cloud.count(predecessor);
    eventually("the predecessor's deletion still retried", async || {
        cloud.count(predecessor) > attempts
    })
    .await;
    assert!(
        cloud
            .predecessor_deletions()
            .contains(&(first_uid.clone(), second_uid.clone())),
        "the predecessor's cleanup is told its successor: {:?}",
        cloud.predecessor_deletions()
    );

    // The cloud lets the old deletion finish: the new load balancer stays, and so does the new Service's status.
    cloud.clear_failures();
    let attempts = cloud.count(predecessor);
    eventually("the predecessor's deletion finished", async || {
        cloud.count(predecessor) > attempts
    })
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let deletions = cloud.count(predecessor);
    tokio::time::sleep(Duration::from_millis(1000)).await;
    assert_eq!(
        cloud.count(predecessor),
        deletions,
        "finished: not retried any more"
    );
    assert_eq!(cloud.load_balancers()[&key].service_uid, second_uid);
    assert!(served(&second_uid).await);

    stop.send(()).unwrap();
    task.await.unwrap().unwrap();
    services
        .patch(
            &group,
            &Default::default(),
            &Patch::Merge(&json!({"metadata": {"finalizers": null}})),
        )
        .await
        .unwrap();
    services.delete(&group, &DeleteParams::default()).await.unwrap();
}

/// The apiserver refuses a patch whose UID precondition names another object of the same name (what keeps a
/// sync of a replaced Service from writing onto its successor), as the immutable-field error the controller
/// recognises.
#[tokio::test]
async fn a_patch_for_a_replaced_service_is_refused() {
    let client = TestEnv::get().kube_client().await.unwrap();
    let services: Api<Service> = Api::namespaced(client.clone(), "default");
    let name = unique_name("uidpre");
    let manifest: Service = serde_json::from_value(json!({
        "metadata": { "name": name },
        "spec": { "type": "ClusterIP", "ports": [{ "port": 80, "protocol": "TCP" }] },
    }))
    .unwrap();
    services.create(&PostParams::default(), &manifest).await.unwrap();
    for (patch, what) in [
        (
            Patch::Merge(service::with_uid_precondition(
                service::status_patch(&Default::default()),
                Some("not-this-one"),
            )),
            "status",
        ),
        (
            Patch::Strategic(service::with_uid_precondition(
                service::finalizer_patch(true),
                Some("not-this-one"),
            )),
            "finalizer",
        ),
    ] {
        let err = services
            .patch_status(&name, &Default::default(), &patch)
            .await
            .expect_err(what);
        let kube::Error::Api(response) = err else {
            panic!("{what}: {err}")
        };
        assert_eq!(response.code, 422, "{what}: {response:?}");
        assert!(response.message.contains("metadata.uid"), "{what}: {response:?}");
    }
    let unchanged = services.get(&name).await.unwrap();
    assert!(unchanged.metadata.finalizers.is_none());
    services.delete(&name, &DeleteParams::default()).await.unwrap();
}
