//! A Service's deletion under the AWS behaviour that makes the Go controller leak (kubernetes#79994,
//! cloud-provider-aws#566), with the generic service controller driving `AwsCloud` against the real apiserver and
//! moto behind a fault proxy: `DeleteSecurityGroup` answers `DependencyViolation` (a Classic ELB's network
//! interfaces still draining) and `DeleteTargetGroup` answers `ResourceInUse`, twice each, as real AWS does for
//! minutes and moto never does. The Service keeps its finalizer and gets a Normal `LoadBalancerDeletionPending`
//! Event naming what is waited for; it goes only once the group or target groups are gone from AWS. A name
//! change (`aws-load-balancer-name`, with consent) waits for the old load balancer's group the same way, and
//! serves under the new name once it is gone.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::too_many_lines)]

mod common;

use std::time::Duration;

use ccm_aws_api::{Ec2, Elbv2, Filter};
use ccm_controllers::{keys, service};
use ccm_testing::{Fault, FaultProxy, TestEnv};
use common::{Fixture, eventually, fixture_at};
use k8s_openapi::api::core::v1::{Event, Node, Service};
use kube::{
    Api,
    api::{DeleteParams, ListParams, Patch, PatchParams, PostParams},
};
use serde_json::json;

/// The Events of object `name` in `default`, as (reason, message).
async fn events(client: &kube::Client, name: &str) -> Vec<(String, String)> {
    let api: Api<Event> = Api::namespaced(client.clone(), "default");
    let list = api
        .list(&ListParams::default().fields(&format!("involvedObject.name={name}")))
        .await
        .unwrap();
    list.items
        .into_iter()
        .map(|e| (e.reason.unwrap_or_default(), e.message.unwrap_or_default()))
        .collect()
}

/// Two instances with Nodes of this test's group, the service controller running, and one LoadBalancer Service
/// with `annotations` ensured (its status has a hostname). Returns the Service's name and the controller's stop.
async fn ensured_service(
    f: &Fixture,
    client: &kube::Client,
    annotations: serde_json::Value,
) -> (String, tokio::sync::oneshot::Sender<()>) {
    let launched = f.launch(2).await;
    let nodes: Api<Node> = Api::all(client.clone());
    for l in &launched {
        let node: Node = serde_json::from_value(json!({
            "metadata": { "name": l.id, "labels": { "ccm-test/group": f.group } },
            "spec": { "providerID": format!("aws:///{}/{}", l.zone, l.id) },
        }))
        .unwrap();
        nodes.create(&PostParams::default(), &node).await.unwrap();
    }
    let mut config = service::ServiceConfig::default();
    config.cluster_name = "kubernetes".into();
    config.node_sync_window = Duration::from_millis(200);
    config.min_retry_delay = Duration::from_millis(200);
    config.service_selector = Some(f.selector());
    config.node_selector = Some(f.selector());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(service::run(client.clone(), f.cloud.clone(), config, async {
        stopped.await.ok();
    }));
    let services: Api<Service> = Api::namespaced(client.clone(), "default");
    let svc: Service = serde_json::from_value(json!({
        "metadata": { "name": f.group, "labels": { "ccm-test/group": f.group }, "annotations": annotations },
        "spec": { "type": "LoadBalancer", "ports": [{ "port": 80, "protocol": "TCP" }] },
    }))
    .unwrap();
    services.create(&PostParams::default(), &svc).await.unwrap();
    eventually("the load balancer's hostname in the status", 60, async || {
        let s = services.get(&f.group).await.unwrap();
        s.status
            .and_then(|s| s.load_balancer)
            .and_then(|l| l.ingress)
            .is_some_and(|i| i.iter().any(|i| i.hostname.is_some()))
    })
    .await;
    (f.group.clone(), stop)
}

/// A fault proxy in front of moto, a fixture whose AWS calls go through it, and a Kubernetes client.
async fn behind_a_proxy() -> (FaultProxy, Fixture, kube::Client) {
    let proxy = FaultProxy::start(&TestEnv::get().aws_endpoint).await.unwrap();
    let f = fixture_at(Some(&proxy.url())).await;
    (proxy, f, TestEnv::get().kube_client().await.unwrap())
}

/// The annotations of an internal Classic ELB.
fn internal() -> serde_json::Value {
    json!({ "service.beta.kubernetes.io/aws-load-balancer-internal": "true" })
}

/// Deletes the Service while `action` answers `code` twice; checks the finalizer holds and the Normal Event names
/// `waited`, then that the Service goes once `gone` says so.
async fn delete_through_faults(
    proxy: &FaultProxy,
    client: &kube::Client,
    name: &str,
    (action, code): (&str, &str),
    waited: &str,
    mut gone: impl AsyncFnMut() -> bool,
) {
    proxy.inject(action, Fault::error(400, code), 2);
    let services: Api<Service> = Api::namespaced(client.clone(), "default");
    services.delete(name, &DeleteParams::default()).await.unwrap();
    eventually(
        "a Normal Event saying what the deletion waits for",
        60,
        async || {
            events(client, name)
                .await
                .iter()
                .any(|(r, m)| r == "LoadBalancerDeletionPending" && m.contains(waited))
        },
    )
    .await;
    let svc = services.get_opt(name).await.unwrap();
    let finalizers = svc.and_then(|s| s.metadata.finalizers).unwrap_or_default();
    assert!(
        finalizers.contains(&keys::FINALIZER_LB_CLEANUP.to_owned()),
        "the finalizer stays while AWS holds the resource"
    );
    assert!(!gone().await, "{waited} still exists while its deletion waits");
    eventually("the Service gone", 90, async || {
        services.get_opt(name).await.unwrap().is_none()
    })
    .await;
    assert_eq!(
        proxy.requests(action),
        3,
        "two refusals, then the deletion that worked"
    );
    assert!(
        gone().await,
        "{waited} is gone from AWS before the finalizer went"
    );
    let reasons: Vec<String> = events(client, name).await.into_iter().map(|(r, _)| r).collect();
    assert!(reasons.contains(&"DeletedLoadBalancer".to_owned()), "{reasons:?}");
    assert!(
        !reasons.iter().any(|r| r.ends_with("Failed")),
        "waiting is not a failure: {reasons:?}"
    );
}

#[tokio::test]
async fn a_classic_elb_security_group_in_use_is_waited_for_not_leaked() {
    let (proxy, f, client) = behind_a_proxy().await;
    let (name, stop) = ensured_service(&f, &client, internal()).await;
    let services: Api<Service> = Api::namespaced(client.clone(), "default");
    let uid = services.get(&name).await.unwrap().metadata.uid.unwrap();
    let group_name = format!(
        "k8s-elb-a{}",
        uid.replace('-', "").chars().take(31).collect::<String>()
    );
    let group = f
        .adapter
        .ec2()
        .security_groups(&[Filter::new("group-name", [group_name.as_str()])])
        .await
        .unwrap()
        .pop()
        .expect("the managed group")
        .id;
    let ec2 = f.adapter.ec2().clone();
    let exists = async || {
        ec2.security_groups(&[Filter::new("group-id", [group.as_str()])])
            .await
            .map(|g| !g.is_empty())
            .unwrap_or(true)
    };
    delete_through_faults(
        &proxy,
        &client,
        &name,
        ("DeleteSecurityGroup", "DependencyViolation"),
        group.as_str(),
        async || !exists().await,
    )
    .await;
    stop.send(()).ok();
    f.cleanup().await;
}

#[tokio::test]
async fn nlb_target_groups_in_use_are_waited_for_not_leaked() {
    let (proxy, f, client) = behind_a_proxy().await;
    let annotations = json!({
        "service.beta.kubernetes.io/aws-load-balancer-type": "nlb",
        "service.beta.kubernetes.io/aws-load-balancer-internal": "true",
    });
    let (name, stop) = ensured_service(&f, &client, annotations).await;
    let key = format!("default/{name}");
    let elbv2 = f.adapter.elbv2().clone();
    let ours = async || {
        let groups = elbv2.all_target_groups().await.unwrap();
        let arns: Vec<String> = groups.iter().map(|g| g.arn.clone()).collect();
        if arns.is_empty() {
            return Vec::new();
        }
        let tags = elbv2.tags(&arns).await.unwrap();
        groups
            .into_iter()
            .filter(|g| tags.get(&g.arn).and_then(|t| t.get("kubernetes.io/service-name")) == Some(&key))
            .map(|g| g.name)
            .collect::<Vec<_>>()
    };
    let groups = ours().await;
    assert_eq!(groups.len(), 1, "one target group for one port: {groups:?}");
    delete_through_faults(
        &proxy,
        &client,
        &name,
        ("DeleteTargetGroup", "ResourceInUse"),
        groups[0].as_str(),
        async || ours().await.is_empty(),
    )
    .await;
    stop.send(()).ok();
    f.cleanup().await;
}

#[tokio::test]
async fn a_renamed_classic_elb_waits_for_its_old_group_then_serves_under_the_new_name() {
    let (proxy, f, client) = behind_a_proxy().await;
    let (name, stop) = ensured_service(&f, &client, internal()).await;
    let services: Api<Service> = Api::namespaced(client.clone(), "default");
    let uid = services.get(&name).await.unwrap().metadata.uid.unwrap();
    let old = format!("a{}", uid.replace('-', "").chars().take(31).collect::<String>());
    let ec2 = f.adapter.ec2().clone();
    let group = async |lb: &str| {
        let name = format!("k8s-elb-{lb}");
        ec2.security_groups(&[Filter::new("group-name", [name.as_str()])])
            .await
            .unwrap()
            .pop()
            .map(|g| g.id)
    };
    assert!(group(&old).await.is_some());

    let chosen = format!("renamed-{}", &uid[..8]);
    proxy.inject("DeleteSecurityGroup", Fault::error(400, "DependencyViolation"), 2);
    let patch = json!({ "metadata": { "annotations": {
        "service.beta.kubernetes.io/aws-load-balancer-name": chosen,
        "service.beta.kubernetes.io/aws-load-balancer-allow-recreation": "true",
    } } });
    services
        .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    eventually("the status naming the new load balancer", 90, async || {
        let s = services.get(&name).await.unwrap();
        s.status
            .and_then(|s| s.load_balancer)
            .and_then(|l| l.ingress)
            .is_some_and(|i| {
                i.iter()
                    .any(|i| i.hostname.as_deref().is_some_and(|h| h.contains(&chosen)))
            })
    })
    .await;
    assert_eq!(
        proxy.requests("DeleteSecurityGroup"),
        3,
        "two refusals, then the deletion that worked"
    );
    assert_eq!(group(&old).await, None, "the old group is gone, not leaked");
    assert!(group(&chosen).await.is_some());
    let elb = f.adapter.elb();
    assert!(
        ccm_aws_api::Elb::load_balancer(elb, &old)
            .await
            .unwrap()
            .is_none()
    );
    let reasons: Vec<String> = events(&client, &name).await.into_iter().map(|(r, _)| r).collect();
    assert!(
        reasons.contains(&"RecreatingLoadBalancer".to_owned()),
        "{reasons:?}"
    );

    services.delete(&name, &DeleteParams::default()).await.unwrap();
    eventually("the Service gone", 90, async || {
        services.get_opt(&name).await.unwrap().is_none()
    })
    .await;
    assert!(
        ccm_aws_api::Elb::load_balancer(elb, &chosen)
            .await
            .unwrap()
            .is_none()
    );
    assert_eq!(group(&chosen).await, None);
    stop.send(()).ok();
    f.cleanup().await;
}
