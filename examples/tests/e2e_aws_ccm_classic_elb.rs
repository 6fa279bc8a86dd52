//! End to end: Services of type LoadBalancer become Classic ELBs, with the `aws-cloud-controller-manager` binary
//! against moto and the real kube-apiserver. A default Service gets its CLB (listeners, health check, security
//! group, registered instances, status hostname); a restarted CCM with nothing changed makes 0 mutating AWS calls;
//! a node joining or leaving costs only register or deregister calls; a port change converges; a scheme change
//! keeps the CLB (a `LoadBalancerRecreationRequired` Warning, nothing written) until the Service consents with
//! `aws-load-balancer-allow-recreation`, then recreates it (a `RecreatingLoadBalancer` Warning); invalid
//! annotations (and the controller's own tag keys in `additional-resource-tags`) give a Warning Event and no
//! mutation; deleting the Service removes the CLB, its security group and
//! the finalizer, while a `shared`-tagged and an untagged group stay. Mutating calls are read from the CCM's
//! /metrics.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::too_many_lines)]

mod common;

use std::collections::BTreeMap;

use ccm_testing::{TestEnv, unique_name};
use common::{
    Ccm, World, eventually, has_warning, initialized,
    lb::{Elb, group_exists, managed_groups, public_subnet, security_group, service},
};
use k8s_openapi::api::core::v1::{Event, Service};
use kube::{
    Api,
    api::{ListParams, Patch, PatchParams, PostParams},
};
use serde_json::json;

#[tokio::test]
async fn e2e_a_service_gets_a_classic_elb_that_converges_and_goes() {
    let env = TestEnv::get();
    let world = World::new("").await;
    public_subnet(&world).await;
    let shared = security_group(
        &world,
        &unique_name("shared"),
        Some((world.cluster_key(), "shared")),
    )
    .await;
    let untagged = security_group(&world, &unique_name("untagged"), None).await;
    let launched = world.launch(3).await;
    for l in &launched[..2] {
        world.register_node(&l.id, None).await;
    }
    let client = env.kube_client().await.unwrap();
    let services: Api<Service> = Api::namespaced(client.clone(), "default");
    let events: Api<Event> = Api::namespaced(client, "default");
    let elb = Elb(aws_sdk_elasticloadbalancing::Client::new(&env.aws_config().await));
    let mut ccm = Ccm::start(&world, &[]);
    let nodes = world.nodes.clone();
    eventually(&mut ccm, "two nodes initialized", 60, async || {
        let mut all = true;
        for l in &launched[..2] {
            all &= nodes.get(&l.id).await.is_ok_and(|n| initialized(&n));
        }
        all
    })
    .await;

    // A default Service.
    let name = unique_name("web");
    let created = services
        .create(&PostParams::default(), &service(&name, &[80], &BTreeMap::new()))
        .await
        .unwrap();
    let uid = created.metadata.uid.clone().unwrap();
    let lb = format!("a{}", uid.replace('-', ""))[..32].to_owned();
    let svcs = services.clone();
    eventually(&mut ccm, "the status hostname", 60, async || {
        svcs.get(&name)
            .await
            .unwrap()
            .status
            .and_then(|s| s.load_balancer)
            .and_then(|l| l.ingress)
            .is_some()
    })
    .await;
    let described = elb
        .describe(&lb)
        .await
        .expect("the CLB exists under the upstream name");
    let hostname = services
        .get(&name)
        .await
        .unwrap()
        .status
        .unwrap()
        .load_balancer
        .unwrap()
        .ingress
        .unwrap()[0]
        .hostname
        .clone();
    assert_eq!(hostname.as_deref(), described.dns_name());
    assert_eq!(elb.listener_ports(&lb).await, [80]);
    let node_port = services.get(&name).await.unwrap().spec.unwrap().ports.unwrap()[0]
        .node_port
        .unwrap();
    let target = described
        .health_check()
        .map(|h| h.target().to_owned())
        .unwrap_or_default();
    assert_eq!(
        target,
        format!("TCP:{node_port}"),
        "health check on the traffic node port"
    );
    let mut expected: Vec<String> = launched[..2].iter().map(|l| l.id.clone()).collect();
    expected.sort();
    eventually(&mut ccm, "both instances registered", 30, async || {
        elb.instances(&lb).await == expected
    })
    .await;
    let groups = managed_groups(&world, &lb).await;
    assert_eq!(groups.len(), 1, "one managed security group: {groups:?}");
    assert_eq!(described.security_groups(), groups.as_slice());

    // A restart with nothing changed: the new process reconciles the Service and mutates nothing.
    assert!(ccm.terminate().await.success());
    let mut ccm = Ccm::start(&world, &[]);
    let port = ccm.port;
    eventually(&mut ccm, "the restarted CCM's service sync", 30, async || {
        common::reconciles(port, "service-lb-controller").await >= 1.0
    })
    .await;
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    let steady = ccm.mutations().await;
    assert!(
        steady.values().all(|n| *n == 0.0),
        "a steady Service costs no mutating call: {steady:?}"
    );

    // A node joins: only a registration.
    let before = ccm.mutations().await;
    world.register_node(&launched[2].id, None).await;
    expected.push(launched[2].id.clone());
    expected.sort();
    let port = ccm.port;
    eventually(&mut ccm, "the joining node registered", 60, async || {
        elb.instances(&lb).await == expected
            && common::mutated_since(port, &before, "RegisterInstancesWithLoadBalancer").await
    })
    .await;
    let delta = common::changed(&before, &ccm.mutations().await);
    assert_eq!(
        delta.keys().collect::<Vec<_>>(),
        ["RegisterInstancesWithLoadBalancer"],
        "{delta:?}"
    );

    // A node leaves: only a deregistration.
    let before = ccm.mutations().await;
    nodes.delete(&launched[2].id, &Default::default()).await.unwrap();
    expected.retain(|i| *i != launched[2].id);
    eventually(&mut ccm, "the leaving node deregistered", 60, async || {
        elb.instances(&lb).await == expected
            && common::mutated_since(port, &before, "DeregisterInstancesFromLoadBalancer").await
    })
    .await;
    let delta = common::changed(&before, &ccm.mutations().await);
    assert_eq!(
        delta.keys().collect::<Vec<_>>(),
        ["DeregisterInstancesFromLoadBalancer"],
        "{delta:?}"
    );

    // A port added converges: the listener, then the security group rules of the new port (an authorization,
    // then the revocation of what it replaces), all done before the next step counts writes.
    let before = ccm.mutations().await;
    let patch = json!({ "spec": { "ports": [
        { "name": "p80", "port": 80, "protocol": "TCP", "targetPort": 8080 },
        { "name": "p443", "port": 443, "protocol": "TCP", "targetPort": 8443 },
    ] } });
    services
        .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    eventually(&mut ccm, "the new listener and its rules", 60, async || {
        elb.listener_ports(&lb).await == [80, 443]
            && common::mutated_since(port, &before, "AuthorizeSecurityGroupIngress").await
            && common::mutated_since(port, &before, "RevokeSecurityGroupIngress").await
    })
    .await;

    // A scheme change without consent: the serving CLB is kept as it is, nothing is written, and a Warning
    // Event says what differs and how to allow it.
    let patch = json!({ "metadata": { "annotations": {
        "service.beta.kubernetes.io/aws-load-balancer-internal": "true"
    } } });
    let before = ccm.mutations().await;
    services
        .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    let reason = "LoadBalancerRecreationRequired";
    let texts = [
        "internet-facing -> internal",
        "aws-load-balancer-allow-recreation",
    ];
    eventually(
        &mut ccm,
        "a LoadBalancerRecreationRequired Warning Event",
        60,
        async || has_warning(&events, &name, reason, &texts).await,
    )
    .await;
    assert_eq!(
        elb.describe(&lb)
            .await
            .and_then(|l| l.scheme().map(str::to_owned))
            .as_deref(),
        Some("internet-facing"),
        "the CLB is kept"
    );
    assert_eq!(ccm.mutations().await, before, "nothing is written");

    // With the Service's consent the CLB is recreated internal under the same name, and a Warning Event says so.
    let patch = json!({ "metadata": { "annotations": {
        "service.beta.kubernetes.io/aws-load-balancer-allow-recreation": "true"
    } } });
    services
        .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    eventually(&mut ccm, "the CLB recreated internal", 60, async || {
        elb.describe(&lb)
            .await
            .is_some_and(|l| l.scheme() == Some("internal"))
            && elb.listener_ports(&lb).await == [80, 443]
            && elb.instances(&lb).await == expected
    })
    .await;
    let texts = ["internet-facing -> internal"];
    eventually(
        &mut ccm,
        "a RecreatingLoadBalancer Warning Event",
        30,
        async || has_warning(&events, &name, "RecreatingLoadBalancer", &texts).await,
    )
    .await;
    assert_eq!(
        managed_groups(&world, &lb).await,
        groups,
        "the recreated CLB keeps its security group"
    );

    // Invalid annotations: a Warning Event naming each, and no AWS mutation.
    let before = ccm.mutations().await;
    for (key, value) in [
        (
            "service.beta.kubernetes.io/aws-load-balancer-healthcheck-interval",
            "often",
        ),
        (
            "service.beta.kubernetes.io/aws-load-balancer-connection-idle-timeout",
            "-5",
        ),
        (
            "service.beta.kubernetes.io/aws-load-balancer-cross-zone-load-balancing-enabled",
            "maybe",
        ),
        // The controller's own tag keys would hand the load balancer to another cluster (docs/security.md).
        (
            "service.beta.kubernetes.io/aws-load-balancer-additional-resource-tags",
            "team=a,kubernetes.io/cluster/theirs=owned",
        ),
    ] {
        let bad = unique_name("bad");
        let annotations = BTreeMap::from([(key, value)]);
        services
            .create(&PostParams::default(), &service(&bad, &[80], &annotations))
            .await
            .unwrap();
        let ev = events.clone();
        eventually(
            &mut ccm,
            &format!("a Warning Event for {key}={value}"),
            30,
            async || {
                let lp = ListParams::default().fields(&format!("involvedObject.name={bad}"));
                ev.list(&lp).await.unwrap().items.iter().any(|e| {
                    e.type_.as_deref() == Some("Warning")
                        && e.message
                            .as_deref()
                            .is_some_and(|m| m.contains(key) && m.contains(value))
                })
            },
        )
        .await;
        services.delete(&bad, &Default::default()).await.unwrap();
    }
    let delta = common::changed(&before, &ccm.mutations().await);
    assert!(delta.is_empty(), "invalid Services cause no mutation: {delta:?}");

    // Deletion: the CLB, its group and the finalizer go; bystander groups stay.
    services.delete(&name, &Default::default()).await.unwrap();
    eventually(&mut ccm, "the Service gone (finalizer removed)", 60, async || {
        svcs.get_opt(&name).await.unwrap().is_none()
    })
    .await;
    assert!(elb.describe(&lb).await.is_none(), "the CLB is deleted");
    assert!(
        managed_groups(&world, &lb).await.is_empty(),
        "its security group is deleted"
    );
    assert!(group_exists(&world, &shared).await && group_exists(&world, &untagged).await);
    assert!(ccm.terminate().await.success());
    world.cleanup().await;
}
