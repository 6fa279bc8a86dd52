//! End to end: Services with `aws-load-balancer-type: nlb` become Network Load Balancers, with the
//! `aws-cloud-controller-manager` binary against moto and the real kube-apiserver — the upstream NLB scenarios
//! (reference §10.2, cases 6 to 11) checked on the AWS state rather than by reachability:
//!
//! - `NLBSecurityGroupMode = Managed`: a default NLB (listener, target group on the node port, every instance a
//!   target, a managed security group, node rules, status hostname); `target-node-labels` (only labelled nodes are
//!   targets); internal with `preserve_client_ip.enabled=false` (exactly one target group with that attribute); a
//!   bring-your-own group (the NLB has exactly it); managed to BYO (the old managed group is deleted) and BYO to
//!   managed (the BYO group survives); a TCP port becoming TLS (one listener, no duplicate); a restart with nothing
//!   changed (0 mutating calls); a scheme change with `--allow-load-balancer-recreation` (the NLB is recreated,
//!   with a Warning Event); deletion (no owned
//!   load balancer, target group, security group or node rule left; BYO groups kept).
//! - Mode unset: NLBs without security groups; deletion leaves nothing.
//! - Deletion protection (`aws-load-balancer-attributes`): deleting the Service keeps it (its finalizer) and the
//!   NLB, with a Warning Event naming deletion protection, until the annotation turns protection off.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::too_many_lines)]

mod common;

use ccm_testing::unique_name;
use common::{
    Ccm, World, eventually,
    lb::{group_exists, security_group},
    nlb::{Nlb, certificate, key},
    nlb_world::{create, hostname, start_world},
};
use k8s_openapi::api::core::v1::Service;
use kube::{
    Api,
    api::{ListParams, Patch, PatchParams},
};
use serde_json::json;

async fn annotate(services: &Api<Service>, name: &str, suffix: &str, value: Option<&str>) {
    let patch = json!({ "metadata": { "annotations": { key(suffix): value } } });
    services
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
}

async fn node_port(services: &Api<Service>, name: &str) -> i32 {
    services.get(name).await.unwrap().spec.unwrap().ports.unwrap()[0]
        .node_port
        .unwrap()
}

/// The security groups of an NLB.
async fn groups_of(nlb: &Nlb, lb: &str) -> Vec<String> {
    nlb.describe(lb)
        .await
        .map(|l| l.security_groups().to_vec())
        .unwrap_or_default()
}

/// (description, protocol, from port, source CIDR or group) of every rule of the instances' groups whose
/// description starts with `kubernetes.io/rule/nlb/`.
async fn node_rules(world: &World, instances: &[String]) -> Vec<(String, String, i32, String)> {
    let out = world
        .raw
        .describe_instances()
        .set_instance_ids(Some(instances.to_vec()))
        .send()
        .await
        .unwrap();
    let mut ids: Vec<String> = out
        .reservations()
        .iter()
        .flat_map(|r| r.instances())
        .flat_map(|i| i.security_groups())
        .filter_map(|g| g.group_id().map(str::to_owned))
        .collect();
    ids.sort();
    ids.dedup();
    let groups = world
        .raw
        .describe_security_groups()
        .set_group_ids(Some(ids))
        .send()
        .await
        .unwrap();
    let mut rules = Vec::new();
    for g in groups.security_groups() {
        for p in g.ip_permissions() {
            let cidrs = p.ip_ranges().iter().map(|r| (r.description(), r.cidr_ip()));
            let groups = p
                .user_id_group_pairs()
                .iter()
                .map(|r| (r.description(), r.group_id()));
            for (description, source) in cidrs.chain(groups) {
                let description = description.unwrap_or_default();
                if description.starts_with("kubernetes.io/rule/nlb/") {
                    rules.push((
                        description.to_owned(),
                        p.ip_protocol().unwrap_or_default().to_owned(),
                        p.from_port().unwrap_or_default(),
                        source.unwrap_or_default().to_owned(),
                    ));
                }
            }
        }
    }
    rules.sort();
    rules
}

/// Security groups of the world's VPC tagged `<cluster key>=owned`.
async fn owned_groups(world: &World) -> Vec<String> {
    let out = world
        .raw
        .describe_security_groups()
        .filters(
            aws_sdk_ec2::types::Filter::builder()
                .name("vpc-id")
                .values(&world.network.vpc)
                .build(),
        )
        .filters(
            aws_sdk_ec2::types::Filter::builder()
                .name(format!("tag:{}", world.cluster_key()))
                .values("owned")
                .build(),
        )
        .send()
        .await
        .unwrap();
    out.security_groups()
        .iter()
        .filter_map(|g| g.group_id().map(str::to_owned))
        .collect()
}

#[tokio::test]
async fn e2e_nlbs_with_managed_security_groups() {
    let (world, instances, services, events, nlb, mut ccm) =
        start_world("NLBSecurityGroupMode = Managed", 3).await;
    let all = instances.clone();

    // Case 6: a default NLB.
    let default = unique_name("nlb");
    let default_lb = create(&services, &default, &[(80, "TCP")], &[]).await;
    eventually(&mut ccm, "the default NLB's hostname", 90, async || {
        hostname(&services, &default).await.is_some()
    })
    .await;
    let lb = nlb
        .describe(&default_lb)
        .await
        .expect("the NLB exists under the upstream name");
    assert_eq!(lb.r#type().map(|t| t.as_str()), Some("network"));
    assert_eq!(lb.scheme().map(|s| s.as_str()), Some("internet-facing"));
    assert_eq!(hostname(&services, &default).await.as_deref(), lb.dns_name());
    assert_eq!(nlb.listener_summary(&default_lb).await, [(80, "TCP".to_owned())]);
    let tgs = nlb.target_groups(lb.load_balancer_arn().unwrap()).await;
    assert_eq!(tgs.len(), 1, "one target group per port");
    let port = node_port(&services, &default).await;
    assert_eq!(
        tgs[0].port(),
        Some(port),
        "the target group forwards to the node port"
    );
    let tg = tgs[0].target_group_arn().unwrap().to_owned();
    eventually(&mut ccm, "every instance a target", 30, async || {
        nlb.targets(&tg).await == all
    })
    .await;
    let managed = groups_of(&nlb, &default_lb).await;
    assert_eq!(managed.len(), 1, "one managed group: {managed:?}");
    assert!(
        owned_groups(&world).await.contains(&managed[0]),
        "the managed group is owned by the cluster"
    );
    let rules = node_rules(&world, &instances).await;
    let client = format!("kubernetes.io/rule/nlb/client={default_lb}");
    assert_eq!(
        rules,
        [(client.clone(), "tcp".to_owned(), port, managed[0].clone())],
        "the node group admits the NLB's group on the node port, and nothing else: {rules:?}"
    );

    // Case 7: target-node-labels.
    for id in &instances[..2] {
        let patch = json!({ "metadata": { "labels": { "e2e-nlb-target": "yes" } } });
        world
            .nodes
            .patch(id, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .unwrap();
    }
    let labelled = unique_name("sg-nd");
    let labelled_lb = create(
        &services,
        &labelled,
        &[(80, "TCP")],
        &[("target-node-labels", "e2e-nlb-target=yes")],
    )
    .await;
    let mut two: Vec<String> = instances[..2].to_vec();
    two.sort();
    eventually(&mut ccm, "only the labelled nodes are targets", 90, async || {
        let Some(lb) = nlb.describe(&labelled_lb).await else {
            return false;
        };
        let tgs = nlb.target_groups(lb.load_balancer_arn().unwrap()).await;
        match tgs.first() {
            Some(tg) => nlb.targets(tg.target_group_arn().unwrap()).await == two,
            None => false,
        }
    })
    .await;

    // Case 8: internal, with client IP preservation off.
    let internal = unique_name("hp-nlb-int");
    let internal_lb = create(
        &services,
        &internal,
        &[(80, "TCP")],
        &[
            ("internal", "true"),
            (
                "target-group-attributes",
                "preserve_client_ip.enabled=false,deregistration_delay.timeout_seconds=30",
            ),
        ],
    )
    .await;
    eventually(&mut ccm, "the internal NLB's hostname", 90, async || {
        hostname(&services, &internal).await.is_some()
    })
    .await;
    let lb = nlb.describe(&internal_lb).await.unwrap();
    assert_eq!(lb.scheme().map(|s| s.as_str()), Some("internal"));
    let tgs = nlb.target_groups(lb.load_balancer_arn().unwrap()).await;
    assert_eq!(tgs.len(), 1, "exactly one target group");
    let attributes = nlb
        .target_group_attributes(tgs[0].target_group_arn().unwrap())
        .await;
    assert_eq!(
        attributes.get("preserve_client_ip.enabled").map(String::as_str),
        Some("false")
    );
    assert_eq!(
        attributes
            .get("deregistration_delay.timeout_seconds")
            .map(String::as_str),
        Some("30")
    );

    // Case 9: a bring-your-own group.
    let byo1 = security_group(&world, &unique_name("nlb-byo-sg"), None).await;
    let byo = unique_name("nlb-byo");
    let byo_lb = create(&services, &byo, &[(80, "TCP")], &[("security-groups", &byo1)]).await;
    eventually(&mut ccm, "the BYO NLB", 90, async || {
        hostname(&services, &byo).await.is_some()
    })
    .await;
    assert_eq!(groups_of(&nlb, &byo_lb).await, [byo1.as_str()]);

    // Case 10: managed to BYO on the default NLB: the old managed group goes.
    let byo2 = security_group(&world, &unique_name("nlb-m2b-sg"), None).await;
    annotate(&services, &default, "security-groups", Some(&byo2)).await;
    eventually(
        &mut ccm,
        "the default NLB has only the BYO group",
        90,
        async || groups_of(&nlb, &default_lb).await == [byo2.clone()],
    )
    .await;
    eventually(&mut ccm, "the old managed group deleted", 90, async || {
        !group_exists(&world, &managed[0]).await
    })
    .await;

    // Case 11: BYO to managed: a managed group replaces it, the BYO group survives.
    annotate(&services, &byo, "security-groups", None).await;
    eventually(&mut ccm, "the BYO NLB gets a managed group", 90, async || {
        groups_of(&nlb, &byo_lb).await.first().is_some_and(|g| *g != byo1)
    })
    .await;
    assert!(group_exists(&world, &byo1).await, "a BYO group is never deleted");

    // TCP to TLS on the same port: the listener is replaced, never duplicated.
    let cert = certificate(&format!("{}.example.com", unique_name("tls"))).await;
    annotate(&services, &labelled, "ssl-cert", Some(&cert)).await;
    eventually(&mut ccm, "the listener becomes TLS", 90, async || {
        nlb.listener_summary(&labelled_lb).await == [(80, "TLS".to_owned())]
    })
    .await;

    // A restart with nothing changed: 0 mutating calls. From now on every Service consents to recreation
    // (the cluster-wide flag).
    assert!(ccm.terminate().await.success());
    let mut ccm = Ccm::start(&world, &["--allow-load-balancer-recreation"]);
    let port_of_metrics = ccm.port;
    eventually(&mut ccm, "the restarted CCM's service sync", 60, async || {
        common::reconciles(port_of_metrics, "service-lb-controller").await >= 4.0
    })
    .await;
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    let steady = ccm.mutations().await;
    assert!(
        steady.values().all(|n| *n == 0.0),
        "steady NLBs cost no mutating call: {steady:?}"
    );

    // A scheme change needs a new NLB: recreated (the flag consents), and said so in a Warning Event.
    // (moto derives DNS names from the name alone, so only the ARN tells the new NLB from the old one.)
    let old = nlb
        .describe(&default_lb)
        .await
        .unwrap()
        .load_balancer_arn()
        .unwrap()
        .to_owned();
    annotate(&services, &default, "internal", Some("true")).await;
    eventually(&mut ccm, "the default NLB recreated internal", 120, async || {
        nlb.describe(&default_lb).await.is_some_and(|l| {
            l.scheme().map(|s| s.as_str()) == Some("internal") && l.load_balancer_arn() != Some(old.as_str())
        })
    })
    .await;
    // The Event is posted after the provider returns, so after the new NLB is visible in AWS.
    let lp = ListParams::default().fields(&format!("involvedObject.name={default}"));
    eventually(
        &mut ccm,
        "a Warning Event says the NLB was recreated",
        30,
        async || {
            events.list(&lp).await.unwrap().items.into_iter().any(|e| {
                e.type_.as_deref() == Some("Warning") && e.reason.as_deref() == Some("RecreatingLoadBalancer")
            })
        },
    )
    .await;
    assert_eq!(
        groups_of(&nlb, &default_lb).await,
        [byo2.as_str()],
        "the recreated NLB keeps the BYO group"
    );

    // Deletion: nothing owned is left; BYO groups stay.
    for name in [&default, &labelled, &internal, &byo] {
        services.delete(name, &Default::default()).await.unwrap();
    }
    eventually(
        &mut ccm,
        "every Service gone (finalizers removed)",
        120,
        async || {
            let mut gone = true;
            for name in [&default, &labelled, &internal, &byo] {
                gone &= services.get_opt(name).await.unwrap().is_none();
            }
            gone
        },
    )
    .await;
    assert_eq!(
        nlb.cluster_resources(&world.cluster_key()).await,
        Vec::<String>::new()
    );
    assert_eq!(
        owned_groups(&world).await,
        Vec::<String>::new(),
        "no owned security group left"
    );
    assert_eq!(
        node_rules(&world, &instances).await,
        [],
        "no NLB rule left on the nodes' groups"
    );
    assert!(group_exists(&world, &byo1).await && group_exists(&world, &byo2).await);
    assert!(ccm.terminate().await.success());
    world.cleanup().await;
}

#[tokio::test]
async fn e2e_nlbs_without_security_group_mode() {
    let (world, instances, services, _events, nlb, mut ccm) = start_world("", 2).await;
    let all = instances.clone();

    let default = unique_name("nlb");
    let default_lb = create(&services, &default, &[(80, "TCP")], &[]).await;
    let internal = unique_name("hp-nlb-int");
    let internal_lb = create(
        &services,
        &internal,
        &[(53, "UDP")],
        &[("internal", "true"), ("healthcheck-protocol", "tcp")],
    )
    .await;
    for (name, lb) in [(&default, &default_lb), (&internal, &internal_lb)] {
        eventually(&mut ccm, "the NLB's hostname", 90, async || {
            hostname(&services, name).await.is_some()
        })
        .await;
        assert_eq!(
            groups_of(&nlb, lb).await,
            Vec::<String>::new(),
            "no security group without the mode"
        );
        let arn = nlb
            .describe(lb)
            .await
            .unwrap()
            .load_balancer_arn()
            .unwrap()
            .to_owned();
        let tg = nlb.target_groups(&arn).await[0]
            .target_group_arn()
            .unwrap()
            .to_owned();
        eventually(&mut ccm, "every instance a target", 30, async || {
            nlb.targets(&tg).await == all
        })
        .await;
    }
    assert_eq!(nlb.listener_summary(&internal_lb).await, [(53, "UDP".to_owned())]);
    let rules = node_rules(&world, &instances).await;
    let port = node_port(&services, &internal).await;
    assert!(
        rules.iter().any(|r| r.1 == "udp" && r.2 == port),
        "UDP clients admitted on the node port: {rules:?}"
    );

    for name in [&default, &internal] {
        services.delete(name, &Default::default()).await.unwrap();
    }
    eventually(&mut ccm, "both Services gone", 120, async || {
        services.get_opt(&default).await.unwrap().is_none()
            && services.get_opt(&internal).await.unwrap().is_none()
    })
    .await;
    assert_eq!(
        nlb.cluster_resources(&world.cluster_key()).await,
        Vec::<String>::new()
    );
    assert_eq!(node_rules(&world, &instances).await, []);
    assert!(ccm.terminate().await.success());
    world.cleanup().await;
}

#[tokio::test]
async fn e2e_deletion_protection_keeps_the_nlb_and_the_service_until_turned_off() {
    let (world, instances, services, events, nlb, mut ccm) = start_world("", 1).await;
    let name = unique_name("nlb-dp");
    let lb = create(
        &services,
        &name,
        &[(80, "TCP")],
        &[("attributes", "deletion_protection.enabled=true")],
    )
    .await;
    eventually(&mut ccm, "the protected NLB's hostname", 90, async || {
        hostname(&services, &name).await.is_some()
    })
    .await;
    let rules = node_rules(&world, &instances).await;
    assert!(!rules.is_empty());
    services.delete(&name, &Default::default()).await.unwrap();
    let lp = ListParams::default().fields(&format!("involvedObject.name={name}"));
    eventually(&mut ccm, "a Warning naming deletion protection", 60, async || {
        events.list(&lp).await.unwrap().items.iter().any(|e| {
            e.type_.as_deref() == Some("Warning")
                && e.message
                    .as_deref()
                    .is_some_and(|m| m.contains("deletion protection"))
        })
    })
    .await;
    assert!(
        services.get_opt(&name).await.unwrap().is_some(),
        "the finalizer holds the Service"
    );
    assert!(nlb.describe(&lb).await.is_some(), "the NLB is kept");
    assert_eq!(
        node_rules(&world, &instances).await,
        rules,
        "and so are its nodes' rules"
    );

    annotate(
        &services,
        &name,
        "attributes",
        Some("deletion_protection.enabled=false"),
    )
    .await;
    eventually(&mut ccm, "the Service deleted", 90, async || {
        services.get_opt(&name).await.unwrap().is_none()
    })
    .await;
    assert!(nlb.describe(&lb).await.is_none(), "the NLB is gone");
    assert_eq!(node_rules(&world, &instances).await, []);
    assert!(ccm.terminate().await.success());
    world.cleanup().await;
}
