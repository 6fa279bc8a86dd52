//! NLBs through `AwsLoadBalancers` and the real adapter against moto: the upstream e2e scenarios at library level
//! (default, target-node-labels, internal with target group attributes, BYO group, managed -> BYO, BYO ->
//! managed), the AWS Load Balancer Controller's scheme key, a TCP -> TLS change, a steady second ensure (0
//! mutating calls), node changes (targets only) and deletion (no owned resource left, a BYO group kept). Each test
//! has its own VPC, instances and cluster ID.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::too_many_lines)]

use std::collections::{BTreeMap, BTreeSet};

use ccm_aws_api::{
    Ec2, Elb, Elbv2, Filter, Tags, VpcId,
    elbv2::{LoadBalancerV2, NewTargetGroup, TargetGroupHealthCheck},
};
use ccm_cloud_provider::{LoadBalancer, NodeView};
use ccm_load_balancers::annotations::Key;
use ccm_testing::lb_world::{Lbs, World, acm_certificate, diff, mutation_counts, node, uid};
use ccm_testing::unique_name;
use k8s_openapi::api::core::v1::Service;

const CLUSTER_NAME: &str = "kubernetes";

async fn world(octet: u8) -> World {
    ccm_testing::lb_world::world(octet, "nlb", true).await
}

/// An NLB Service: [`ccm_testing::lb_world::service`] with `aws-load-balancer-type: nlb`.
fn service(uid: &str, ports: &[(i32, i32)], annotations: &[(Key, &str)]) -> Service {
    let mut all = annotations.to_vec();
    all.push((Key::Type, "nlb"));
    ccm_testing::lb_world::service(uid, ports, &all)
}

async fn ensure(lbs: &Lbs, svc: &Service, nodes: &[NodeView]) -> String {
    let nodes: Vec<&NodeView> = nodes.iter().collect();
    let status = lbs.ensure_load_balancer(CLUSTER_NAME, svc, &nodes).await.unwrap();
    status.ingress.unwrap()[0].hostname.clone().unwrap()
}

#[tokio::test]
async fn default_nlb_is_created_steady_updated_and_deleted() {
    let w = world(121).await;
    let lbs = w.lbs(w.config.clone());
    let metrics = w.adapter.metrics().clone();
    let elbv2 = w.adapter.elbv2();
    let uid = uid();
    let svc = service(&uid, &[(80, 30080)], &[]);
    let name = lbs.load_balancer_name(CLUSTER_NAME, &svc);
    let nodes = w.nodes();

    let before = mutation_counts(&metrics);
    let calls = metrics.total_attempts();
    let hostname = ensure(&lbs, &svc, &nodes).await;
    let created = diff(&mutation_counts(&metrics), &before);
    eprintln!(
        "create: {} calls, mutating {created:?}",
        metrics.total_attempts() - calls
    );
    let lb = elbv2.load_balancer(&name).await.unwrap().unwrap();
    assert_eq!(hostname, lb.dns_name);
    assert!(!lb.internal);
    assert!(lb.security_groups.is_empty(), "mode off: no groups");
    let listeners = elbv2.listeners(&lb.arn).await.unwrap();
    assert_eq!(
        listeners
            .iter()
            .map(|l| (l.port, l.protocol.as_str()))
            .collect::<Vec<_>>(),
        [(80, "TCP")]
    );
    let tgs = elbv2.target_groups(&lb.arn).await.unwrap();
    assert_eq!(tgs.len(), 1);
    assert_eq!((tgs[0].protocol.as_str(), tgs[0].port), ("TCP", 30080));
    assert!(tgs[0].name.starts_with("k8s-moto-web-"), "{}", tgs[0].name);
    let hc = &tgs[0].health_check;
    assert_eq!(
        (
            hc.protocol.as_deref(),
            hc.port.as_deref(),
            hc.interval_seconds,
            hc.timeout_seconds,
            hc.healthy_threshold,
            hc.unhealthy_threshold
        ),
        (
            Some("TCP"),
            Some("traffic-port"),
            Some(30),
            Some(10),
            Some(3),
            Some(3)
        )
    );
    let mut targets: Vec<String> = elbv2
        .target_health(&tgs[0].arn)
        .await
        .unwrap()
        .iter()
        .map(|t| t.target.id.to_string())
        .collect();
    targets.sort();
    assert_eq!(targets, w.instances);
    // The load balancer's own calls, and one for the nodes' rules (client and MTU rules in one call).
    assert_eq!(
        created,
        BTreeMap::from([
            ("AuthorizeSecurityGroupIngress", 1),
            ("CreateLoadBalancer", 1),
            ("CreateTargetGroup", 1),
            ("RegisterTargets", 1),
            ("CreateListener", 1),
        ])
    );

    // Steady: nothing but reads.
    let before = mutation_counts(&metrics);
    let calls = metrics.total_attempts();
    assert_eq!(ensure(&lbs, &svc, &nodes).await, hostname);
    eprintln!("steady: {} calls", metrics.total_attempts() - calls);
    assert_eq!(diff(&mutation_counts(&metrics), &before), BTreeMap::new());
    assert_eq!(
        lbs.get_load_balancer(CLUSTER_NAME, &svc)
            .await
            .unwrap()
            .unwrap()
            .ingress
            .unwrap()[0]
            .hostname
            .as_deref(),
        Some(hostname.as_str())
    );

    // A node goes: only its deregistration.
    let before = mutation_counts(&metrics);
    let calls = metrics.total_attempts();
    let fewer: Vec<&NodeView> = nodes[..2].iter().collect();
    lbs.update_load_balancer(CLUSTER_NAME, &svc, &fewer)
        .await
        .unwrap();
    eprintln!("update (a node gone): {} calls", metrics.total_attempts() - calls);
    assert_eq!(
        diff(&mutation_counts(&metrics), &before),
        BTreeMap::from([("DeregisterTargets", 1)])
    );
    assert_eq!(elbv2.target_health(&tgs[0].arn).await.unwrap().len(), 2);

    // Health check annotations: one modification, then steady again (the timeout and unhealthy threshold
    // included, which upstream never applies).
    let svc = service(
        &uid,
        &[(80, 30080)],
        &[
            (Key::HealthcheckTimeout, "6"),
            (Key::HealthcheckUnhealthyThreshold, "5"),
        ],
    );
    let before = mutation_counts(&metrics);
    ensure(&lbs, &svc, &nodes).await;
    assert_eq!(
        diff(&mutation_counts(&metrics), &before),
        BTreeMap::from([("ModifyTargetGroup", 1), ("RegisterTargets", 1)])
    );
    let tg = elbv2.target_group(&tgs[0].name).await.unwrap().unwrap();
    assert_eq!(
        (
            tg.health_check.timeout_seconds,
            tg.health_check.unhealthy_threshold
        ),
        (Some(6), Some(5))
    );
    let before = mutation_counts(&metrics);
    ensure(&lbs, &svc, &nodes).await;
    assert_eq!(diff(&mutation_counts(&metrics), &before), BTreeMap::new());

    // A second port, and the node port of the first changed: new target groups, the old one deleted.
    let svc = service(&uid, &[(80, 30081), (8080, 30090)], &[]);
    ensure(&lbs, &svc, &nodes).await;
    // (Through the listeners: moto does not move a target group to the load balancer on ModifyListener.)
    let mut tgs2 = Vec::new();
    for l in elbv2.listeners(&lb.arn).await.unwrap() {
        let arn = &l.default_target_groups[0];
        let g = elbv2
            .target_groups(&lb.arn)
            .await
            .unwrap()
            .into_iter()
            .find(|g| g.arn == *arn);
        let g = match g {
            Some(g) => g,
            None => {
                let name = arn.split('/').nth(1).unwrap();
                elbv2.target_group(name).await.unwrap().unwrap()
            }
        };
        tgs2.push((l.port, g));
    }
    tgs2.sort_by_key(|(port, _)| *port);
    assert_eq!(
        tgs2.iter().map(|(p, g)| (*p, g.port)).collect::<Vec<_>>(),
        [(80, 30081), (8080, 30090)]
    );
    let tgs2: Vec<_> = tgs2.into_iter().map(|(_, g)| g).collect();
    assert_eq!(elbv2.target_group(&tgs[0].name).await.unwrap(), None);
    let before = mutation_counts(&metrics);
    ensure(&lbs, &svc, &nodes).await;
    assert_eq!(diff(&mutation_counts(&metrics), &before), BTreeMap::new());

    // A node goes again: one deregistration per target group (found by name where moto did not attach it).
    let before = mutation_counts(&metrics);
    lbs.update_load_balancer(CLUSTER_NAME, &svc, &fewer)
        .await
        .unwrap();
    assert_eq!(
        diff(&mutation_counts(&metrics), &before),
        BTreeMap::from([("DeregisterTargets", 2)])
    );

    // Deletion leaves nothing of ours; repeating it is harmless.
    let before = mutation_counts(&metrics);
    let calls = metrics.total_attempts();
    lbs.ensure_load_balancer_deleted(CLUSTER_NAME, &svc)
        .await
        .unwrap();
    eprintln!(
        "delete (2 ports): {} calls, mutating {:?}",
        metrics.total_attempts() - calls,
        diff(&mutation_counts(&metrics), &before)
    );
    assert_eq!(elbv2.load_balancer(&name).await.unwrap(), None);
    for g in &tgs2 {
        assert_eq!(elbv2.target_group(&g.name).await.unwrap(), None);
    }
    lbs.ensure_load_balancer_deleted(CLUSTER_NAME, &svc)
        .await
        .unwrap();
    assert_eq!(lbs.get_load_balancer(CLUSTER_NAME, &svc).await.unwrap(), None);
}

#[tokio::test]
async fn target_node_labels_select_the_targets() {
    let w = world(122).await;
    let lbs = w.lbs(w.config.clone());
    let elbv2 = w.adapter.elbv2();
    let svc = service(&uid(), &[(80, 30080)], &[(Key::TargetNodeLabels, "role=edge")]);
    let nodes: Vec<NodeView> = w
        .instances
        .iter()
        .enumerate()
        .map(|(i, id)| {
            if i < 2 {
                node(id, &[("role", "edge")])
            } else {
                node(id, &[("role", "other")])
            }
        })
        .collect();
    ensure(&lbs, &svc, &nodes).await;
    let lb = elbv2
        .load_balancer(&lbs.load_balancer_name(CLUSTER_NAME, &svc))
        .await
        .unwrap()
        .unwrap();
    let listeners = elbv2.listeners(&lb.arn).await.unwrap();
    let tg = &listeners[0].default_target_groups[0];
    assert_eq!(elbv2.target_health(tg).await.unwrap().len(), 2);
    lbs.ensure_load_balancer_deleted(CLUSTER_NAME, &svc)
        .await
        .unwrap();
}

#[tokio::test]
async fn internal_nlb_with_target_group_attributes() {
    let w = world(123).await;
    let lbs = w.lbs(w.config.clone());
    let metrics = w.adapter.metrics().clone();
    let elbv2 = w.adapter.elbv2();
    let svc = service(
        &uid(),
        &[(80, 30080)],
        &[
            (Key::Internal, "true"),
            (Key::TargetGroupAttributes, "preserve_client_ip.enabled=false"),
            (Key::CrossZoneLoadBalancingEnabled, "true"),
        ],
    );
    ensure(&lbs, &svc, &w.nodes()).await;
    let lb = elbv2
        .load_balancer(&lbs.load_balancer_name(CLUSTER_NAME, &svc))
        .await
        .unwrap()
        .unwrap();
    assert!(lb.internal);
    let tgs = elbv2.target_groups(&lb.arn).await.unwrap();
    assert_eq!(tgs.len(), 1);
    let attributes = elbv2.target_group_attributes(&tgs[0].arn).await.unwrap();
    assert_eq!(
        attributes.get("preserve_client_ip.enabled").map(String::as_str),
        Some("false")
    );
    let lb_attributes = elbv2.load_balancer_attributes(&lb.arn).await.unwrap();
    assert_eq!(
        lb_attributes
            .get("load_balancing.cross_zone.enabled")
            .map(String::as_str),
        Some("true")
    );
    let before = mutation_counts(&metrics);
    ensure(&lbs, &svc, &w.nodes()).await;
    assert_eq!(diff(&mutation_counts(&metrics), &before), BTreeMap::new());

    // internet-facing now, without consent: the NLB is kept as it is (nothing written), with a Warning notice
    // naming the change and how to allow it.
    let mut public = svc.clone();
    let annotations = public.metadata.annotations.as_mut().unwrap();
    annotations.remove(Key::Internal.name());
    let nodes: Vec<NodeView> = w.nodes();
    let refs: Vec<&NodeView> = nodes.iter().collect();
    let before = mutation_counts(&metrics);
    let ensured = lbs
        .ensure_load_balancer_reporting(CLUSTER_NAME, &public, &refs)
        .await
        .unwrap();
    assert_eq!(diff(&mutation_counts(&metrics), &before), BTreeMap::new());
    assert_eq!(ensured.notices.len(), 1);
    assert!(ensured.notices[0].warning);
    assert_eq!(ensured.notices[0].reason, "LoadBalancerRecreationRequired");
    let message = &ensured.notices[0].message;
    assert!(message.contains("internal -> internet-facing"), "{message}");
    assert!(
        message.contains("aws-load-balancer-allow-recreation"),
        "{message}"
    );
    let name = lbs.load_balancer_name(CLUSTER_NAME, &svc);
    let kept = elbv2.load_balancer(&name).await.unwrap().unwrap();
    assert_eq!((kept.arn.as_str(), kept.internal), (lb.arn.as_str(), true));

    // With the Service's consent: the NLB is recreated, with a Warning notice naming the change.
    let annotations = public.metadata.annotations.as_mut().unwrap();
    annotations.insert(Key::AllowRecreation.name().to_owned(), "true".to_owned());
    let ensured = lbs
        .ensure_load_balancer_reporting(CLUSTER_NAME, &public, &refs)
        .await
        .unwrap();
    assert_eq!(ensured.notices.len(), 1);
    assert!(ensured.notices[0].warning);
    assert_eq!(ensured.notices[0].reason, "RecreatingLoadBalancer");
    assert!(
        ensured.notices[0].message.contains("internal -> internet-facing"),
        "{}",
        ensured.notices[0].message
    );
    let recreated = elbv2
        .load_balancer(&lbs.load_balancer_name(CLUSTER_NAME, &svc))
        .await
        .unwrap()
        .unwrap();
    assert!(!recreated.internal);
    assert_ne!(recreated.arn, lb.arn);
    // The target group was kept and moved to the new NLB.
    let tgs_after = elbv2.target_groups(&recreated.arn).await.unwrap();
    assert_eq!(
        tgs_after.iter().map(|g| &g.name).collect::<Vec<_>>(),
        [&tgs[0].name]
    );
    let before = mutation_counts(&metrics);
    ensure(&lbs, &public, &w.nodes()).await;
    assert_eq!(diff(&mutation_counts(&metrics), &before), BTreeMap::new());
    lbs.ensure_load_balancer_deleted(CLUSTER_NAME, &public)
        .await
        .unwrap();
    assert_eq!(elbv2.target_group(&tgs[0].name).await.unwrap(), None);
}

/// The AWS Load Balancer Controller's `aws-load-balancer-scheme: internal` alone gives an internal NLB (it once
/// gave an internet-facing one); contradicted by `aws-load-balancer-internal`, the Service is refused naming both
/// keys and nothing in AWS changes.
#[tokio::test]
async fn the_albc_scheme_key_makes_an_internal_nlb_and_a_contradiction_changes_nothing() {
    let w = world(135).await;
    let lbs = w.lbs(w.config.clone());
    let metrics = w.adapter.metrics().clone();
    let svc = service(&uid(), &[(80, 30080)], &[(Key::Scheme, "internal")]);
    ensure(&lbs, &svc, &w.nodes()).await;
    let name = lbs.load_balancer_name(CLUSTER_NAME, &svc);
    let lb = w.adapter.elbv2().load_balancer(&name).await.unwrap().unwrap();
    assert!(lb.internal);

    let mut contradicted = svc.clone();
    let annotations = contradicted.metadata.annotations.as_mut().unwrap();
    annotations.insert(Key::Internal.name().to_owned(), "false".to_owned());
    annotations.insert(Key::AllowRecreation.name().to_owned(), "true".to_owned());
    let nodes = w.nodes();
    let refs: Vec<&NodeView> = nodes.iter().collect();
    let before = mutation_counts(&metrics);
    let error = lbs
        .ensure_load_balancer(CLUSTER_NAME, &contradicted, &refs)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        error.contains(Key::Scheme.name()) && error.contains(Key::Internal.name()),
        "{error}"
    );
    assert_eq!(diff(&mutation_counts(&metrics), &before), BTreeMap::new());
    let kept = w.adapter.elbv2().load_balancer(&name).await.unwrap().unwrap();
    assert_eq!((kept.arn.as_str(), kept.internal), (lb.arn.as_str(), true));

    lbs.ensure_load_balancer_deleted(CLUSTER_NAME, &svc)
        .await
        .unwrap();
    assert_eq!(w.adapter.elbv2().load_balancer(&name).await.unwrap(), None);
}

#[tokio::test]
async fn byo_security_group_is_used_as_is_and_survives() {
    let w = world(124).await;
    let lbs = w.lbs(w.config.clone().with_nlb_managed_security_groups(true));
    let byo = w.byo_group().await;
    let svc = service(&uid(), &[(80, 30080)], &[(Key::SecurityGroups, &byo)]);
    let name = lbs.load_balancer_name(CLUSTER_NAME, &svc);
    ensure(&lbs, &svc, &w.nodes()).await;
    assert_eq!(w.lb_groups(&name).await, std::slice::from_ref(&byo));
    lbs.ensure_load_balancer_deleted(CLUSTER_NAME, &svc)
        .await
        .unwrap();
    assert!(w.group_exists(&byo).await);
}

#[tokio::test]
async fn managed_to_byo_and_back() {
    let w = world(125).await;
    let lbs = w.lbs(w.config.clone().with_nlb_managed_security_groups(true));
    let metrics = w.adapter.metrics().clone();
    let byo = w.byo_group().await;
    let uid = uid();
    let managed_svc = service(&uid, &[(80, 30080)], &[]);
    let name = lbs.load_balancer_name(CLUSTER_NAME, &managed_svc);
    ensure(&lbs, &managed_svc, &w.nodes()).await;
    let groups = w.lb_groups(&name).await;
    assert_eq!(groups.len(), 1);
    let managed = groups[0].clone();
    assert_ne!(managed, byo);
    let group = &w.group(&managed).await.unwrap();
    assert_eq!(group.description, "[k8s] Managed SecurityGroup for LoadBalancer");
    assert!(group.name.starts_with("k8s-moto-web-"), "{}", group.name);
    let before = mutation_counts(&metrics);
    ensure(&lbs, &managed_svc, &w.nodes()).await;
    assert_eq!(diff(&mutation_counts(&metrics), &before), BTreeMap::new());

    // managed -> BYO: exactly [BYO], the managed group deleted.
    let byo_svc = service(&uid, &[(80, 30080)], &[(Key::SecurityGroups, &byo)]);
    ensure(&lbs, &byo_svc, &w.nodes()).await;
    assert_eq!(w.lb_groups(&name).await, std::slice::from_ref(&byo));
    assert!(!w.group_exists(&managed).await);
    let before = mutation_counts(&metrics);
    ensure(&lbs, &byo_svc, &w.nodes()).await;
    assert_eq!(diff(&mutation_counts(&metrics), &before), BTreeMap::new());

    // BYO -> managed: a new managed group first, the BYO group untouched.
    ensure(&lbs, &managed_svc, &w.nodes()).await;
    let groups = w.lb_groups(&name).await;
    assert_eq!(groups.len(), 1);
    assert_ne!(groups[0], byo);
    assert!(w.group_exists(&byo).await);

    lbs.ensure_load_balancer_deleted(CLUSTER_NAME, &managed_svc)
        .await
        .unwrap();
    assert!(!w.group_exists(&groups[0]).await, "the managed group is deleted");
    assert!(w.group_exists(&byo).await, "the BYO group survives");
}

#[tokio::test]
async fn tcp_to_tls_replaces_the_listener() {
    let w = world(126).await;
    let lbs = w.lbs(w.config.clone());
    let metrics = w.adapter.metrics().clone();
    let elbv2 = w.adapter.elbv2();
    let uid = uid();
    let svc = service(&uid, &[(443, 30443)], &[]);
    ensure(&lbs, &svc, &w.nodes()).await;
    let cert = acm_certificate(&format!("{}.example.com", unique_name("tls"))).await;
    let tls = service(
        &uid,
        &[(443, 30443)],
        &[
            (Key::SslCert, &cert),
            (Key::SslNegotiationPolicy, "ELBSecurityPolicy-TLS13-1-2-2021-06"),
        ],
    );
    let before = mutation_counts(&metrics);
    ensure(&lbs, &tls, &w.nodes()).await;
    assert_eq!(
        diff(&mutation_counts(&metrics), &before),
        BTreeMap::from([("CreateListener", 1), ("DeleteListener", 1)])
    );
    let lb = elbv2
        .load_balancer(&lbs.load_balancer_name(CLUSTER_NAME, &svc))
        .await
        .unwrap()
        .unwrap();
    let listeners = elbv2.listeners(&lb.arn).await.unwrap();
    assert_eq!(listeners.len(), 1);
    assert_eq!(listeners[0].protocol, "TLS");
    assert_eq!(listeners[0].certificates, std::slice::from_ref(&cert));
    let before = mutation_counts(&metrics);
    ensure(&lbs, &tls, &w.nodes()).await;
    assert_eq!(diff(&mutation_counts(&metrics), &before), BTreeMap::new());

    // An ALPN policy: changed in place, and reset to `None` when the annotation goes.
    let policy = (Key::SslNegotiationPolicy, "ELBSecurityPolicy-TLS13-1-2-2021-06");
    let h2 = service(
        &uid,
        &[(443, 30443)],
        &[(Key::SslCert, &cert), policy, (Key::AlpnPolicy, "HTTP2Preferred")],
    );
    for (svc, alpn) in [(&h2, "HTTP2Preferred"), (&tls, "None")] {
        let before = mutation_counts(&metrics);
        ensure(&lbs, svc, &w.nodes()).await;
        assert_eq!(
            diff(&mutation_counts(&metrics), &before),
            BTreeMap::from([("ModifyListener", 1)])
        );
        let listeners = elbv2.listeners(&lb.arn).await.unwrap();
        assert_eq!(listeners[0].alpn_policy.as_deref(), Some(alpn));
        let before = mutation_counts(&metrics);
        ensure(&lbs, svc, &w.nodes()).await;
        assert_eq!(diff(&mutation_counts(&metrics), &before), BTreeMap::new());
    }

    // Back to TCP: the listener is replaced.
    ensure(&lbs, &svc, &w.nodes()).await;
    let listeners = elbv2.listeners(&lb.arn).await.unwrap();
    assert_eq!(
        listeners
            .iter()
            .map(|l| (l.port, l.protocol.as_str()))
            .collect::<Vec<_>>(),
        [(443, "TCP")]
    );
    lbs.ensure_load_balancer_deleted(CLUSTER_NAME, &svc)
        .await
        .unwrap();
}

#[tokio::test]
async fn a_crash_before_any_mutating_call_converges_on_the_next_run() {
    let w = world(127).await;
    let config = w.config.clone().with_nlb_managed_security_groups(true);
    let healthy = w.lbs(config.clone());
    let metrics = w.adapter.metrics().clone();
    let elbv2 = w.adapter.elbv2();
    let nodes = w.nodes();
    let annotations = [
        (Key::TargetGroupAttributes, "proxy_protocol_v2.enabled=true"),
        (Key::CrossZoneLoadBalancingEnabled, "true"),
    ];
    let faulty = |k: usize| w.faulty_lbs(config.clone(), k);
    let (mut crashed_creations, mut crashed_deletions) = (0, 0);
    for k in 1.. {
        let svc = service(&uid(), &[(80, 30080), (443, 30443)], &annotations);
        let name = healthy.load_balancer_name(CLUSTER_NAME, &svc);
        let refs: Vec<&NodeView> = nodes.iter().collect();
        let crashed = faulty(k).ensure_load_balancer(CLUSTER_NAME, &svc, &refs).await;
        let done = crashed.is_ok();
        if !done {
            crashed_creations += 1;
            assert!(
                ccm_controllers::ErrorChain(&crashed.unwrap_err())
                    .to_string()
                    .contains("injected crash")
            );
        }
        ensure(&healthy, &svc, &nodes).await;
        let lb = elbv2.load_balancer(&name).await.unwrap().unwrap();
        assert_eq!(lb.security_groups.len(), 1, "crash before mutation {k}");
        let managed = lb.security_groups[0].to_string();
        let group = &w.group(&managed).await.unwrap();
        let same_name = w
            .adapter
            .ec2()
            .security_groups(&[
                Filter::new("group-name", [group.name.as_str()]),
                Filter::new("vpc-id", [w.vpc.as_str()]),
            ])
            .await
            .unwrap();
        assert_eq!(same_name.len(), 1, "crash before mutation {k}");
        let listeners = elbv2.listeners(&lb.arn).await.unwrap();
        assert_eq!(listeners.len(), 2, "crash before mutation {k}");
        let mut tg_names = Vec::new();
        for l in &listeners {
            let tg_name = l.default_target_groups[0].split('/').nth(1).unwrap().to_owned();
            let tg = elbv2.target_group(&tg_name).await.unwrap().unwrap();
            assert_eq!(
                elbv2.target_health(&tg.arn).await.unwrap().len(),
                3,
                "crash before mutation {k}"
            );
            let attributes = elbv2.target_group_attributes(&tg.arn).await.unwrap();
            assert_eq!(
                attributes.get("proxy_protocol_v2.enabled").map(String::as_str),
                Some("true"),
                "crash before mutation {k}"
            );
            tg_names.push(tg_name);
        }
        let before = mutation_counts(&metrics);
        ensure(&healthy, &svc, &nodes).await;
        assert_eq!(
            diff(&mutation_counts(&metrics), &before),
            BTreeMap::new(),
            "crash before mutation {k}: not converged"
        );

        // Deletion crashes at the same point, and the next deletion (which the service controller always asks
        // for, even when the NLB is gone) completes it.
        if faulty(k)
            .ensure_load_balancer_deleted(CLUSTER_NAME, &svc)
            .await
            .is_err()
        {
            crashed_deletions += 1;
        }
        healthy
            .ensure_load_balancer_deleted(CLUSTER_NAME, &svc)
            .await
            .unwrap();
        assert_eq!(
            elbv2.load_balancer(&name).await.unwrap(),
            None,
            "crash in deletion at {k}"
        );
        for tg in &tg_names {
            assert_eq!(
                elbv2.target_group(tg).await.unwrap(),
                None,
                "crash in deletion at {k}"
            );
        }
        assert!(!w.group_exists(&managed).await, "crash in deletion at {k}");
        let described = format!("={name}");
        let node_group = w.group(&w.node_group).await.unwrap();
        let left: Vec<String> = node_group
            .ingress
            .iter()
            .flat_map(|p| p.ip_ranges.iter().chain(&p.ipv6_ranges))
            .filter_map(|r| r.description.clone())
            .filter(|d| d.ends_with(&described))
            .collect();
        assert!(
            left.is_empty(),
            "crash in deletion at {k}: the NLB's node rules are revoked: {left:?}"
        );
        if done {
            break;
        }
    }
    eprintln!("creation crashed and recovered before each of its {crashed_creations} mutating calls");
    assert!(crashed_creations >= 10, "{crashed_creations}");
    eprintln!("deletion crashed and recovered before each of its {crashed_deletions} mutating calls");
    assert!(crashed_deletions >= 5, "{crashed_deletions}");
}

#[tokio::test]
async fn the_dry_run_plans_an_nlb_and_reads_only() {
    let w = world(128).await;
    let lbs = w.lbs(w.config.clone());
    let metrics = w.adapter.metrics().clone();
    let svc = service(&uid(), &[(80, 30080)], &[]);
    let name = lbs.load_balancer_name(CLUSTER_NAME, &svc);
    let nodes = w.nodes();
    let manifest = serde_json::to_string(&svc).unwrap();
    let before = mutation_counts(&metrics);
    let dry = Box::pin(ccm_load_balancers::plan_for(
        &lbs,
        CLUSTER_NAME,
        &manifest,
        &nodes,
    ))
    .await
    .unwrap();
    assert_eq!(diff(&mutation_counts(&metrics), &before), BTreeMap::new());
    let printed = dry.to_string();
    assert!(
        printed.starts_with(&format!("Service moto/web -> NLB {name}\n")),
        "{printed}"
    );
    assert!(
        printed.contains("\"change\":\"create_load_balancer\""),
        "{printed}"
    );
    ensure(&lbs, &svc, &nodes).await;
    let printed = Box::pin(ccm_load_balancers::plan_for(
        &lbs,
        CLUSTER_NAME,
        &manifest,
        &nodes,
    ))
    .await
    .unwrap()
    .to_string();
    assert!(printed.ends_with("up to date: no change\n"), "{printed}");
    lbs.ensure_load_balancer_deleted(CLUSTER_NAME, &svc)
        .await
        .unwrap();
}

/// The dry run takes the controller's cluster name, as ensure does: it names the managed security group, so a
/// dry run under another name (the default one, before) planned a second group for a converged NLB.
#[tokio::test]
async fn the_dry_run_plans_with_the_cluster_name_ensure_used() {
    const OTHER_CLUSTER_NAME: &str = "prod-eu";
    let w = world(134).await;
    let lbs = w.lbs(w.config.clone().with_nlb_managed_security_groups(true));
    let svc = service(&uid(), &[(80, 30080)], &[]);
    let nodes = w.nodes();
    let refs: Vec<&NodeView> = nodes.iter().collect();
    lbs.ensure_load_balancer(OTHER_CLUSTER_NAME, &svc, &refs)
        .await
        .unwrap();
    let manifest = serde_json::to_string(&svc).unwrap();
    let dry = Box::pin(ccm_load_balancers::plan_for(
        &lbs,
        OTHER_CLUSTER_NAME,
        &manifest,
        &nodes,
    ))
    .await
    .unwrap();
    let printed = dry.to_string();
    assert!(printed.ends_with("up to date: no change\n"), "{printed}");
    lbs.ensure_load_balancer_deleted(OTHER_CLUSTER_NAME, &svc)
        .await
        .unwrap();
}

#[tokio::test]
async fn the_flavour_cannot_change_after_creation() {
    let w = world(129).await;
    let lbs = w.lbs(w.config.clone());
    let nodes = w.nodes();
    let refs: Vec<&NodeView> = nodes.iter().collect();
    let first = uid();
    let nlb = service(&first, &[(80, 30080)], &[]);
    ensure(&lbs, &nlb, &nodes).await;
    // The same Service as Classic (moto's NLB hostnames look Classic: the check asks AWS, not the hostname).
    let mut classic = nlb.clone();
    classic
        .metadata
        .annotations
        .as_mut()
        .unwrap()
        .remove(Key::Type.name());
    let e = lbs
        .ensure_load_balancer(CLUSTER_NAME, &classic, &refs)
        .await
        .unwrap_err();
    assert!(e.to_string().contains("already has an NLB"), "{e}");
    assert!(
        w.adapter
            .elb()
            .load_balancer(&lbs.load_balancer_name(CLUSTER_NAME, &nlb))
            .await
            .unwrap()
            .is_none(),
        "no Classic ELB made"
    );
    // Deleting the Classic-annotated Service deletes its NLB.
    lbs.ensure_load_balancer_deleted(CLUSTER_NAME, &classic)
        .await
        .unwrap();
    assert_eq!(lbs.get_load_balancer(CLUSTER_NAME, &nlb).await.unwrap(), None);

    // A Classic ELB first, then the Service says NLB.
    let second = uid();
    let mut classic = service(&second, &[(80, 30080)], &[]);
    classic
        .metadata
        .annotations
        .as_mut()
        .unwrap()
        .remove(Key::Type.name());
    lbs.ensure_load_balancer(CLUSTER_NAME, &classic, &refs)
        .await
        .unwrap();
    let nlb = service(&second, &[(80, 30080)], &[]);
    let e = lbs
        .ensure_load_balancer(CLUSTER_NAME, &nlb, &refs)
        .await
        .unwrap_err();
    assert!(e.to_string().contains("already has a Classic ELB"), "{e}");
    assert_eq!(
        w.adapter
            .elbv2()
            .load_balancer(&lbs.load_balancer_name(CLUSTER_NAME, &nlb))
            .await
            .unwrap(),
        None,
        "no NLB made"
    );
    lbs.ensure_load_balancer_deleted(CLUSTER_NAME, &nlb)
        .await
        .unwrap();
    assert_eq!(lbs.get_load_balancer(CLUSTER_NAME, &nlb).await.unwrap(), None);
}

#[tokio::test]
async fn a_recreation_crashed_at_any_call_converges() {
    let w = world(130).await;
    let healthy = w.lbs(w.config.clone());
    let metrics = w.adapter.metrics().clone();
    let elbv2 = w.adapter.elbv2();
    let nodes = w.nodes();
    let refs: Vec<&NodeView> = nodes.iter().collect();
    let mut crashed = 0;
    for k in 1.. {
        let uid = uid();
        let public = service(&uid, &[(80, 30080)], &[]);
        let consent = [(Key::Internal, "true"), (Key::AllowRecreation, "true")];
        let internal = service(&uid, &[(80, 30080)], &consent);
        let name = healthy.load_balancer_name(CLUSTER_NAME, &public);
        ensure(&healthy, &public, &nodes).await;
        let faulty = w.faulty_lbs(w.config.clone(), k);
        let result = faulty.ensure_load_balancer(CLUSTER_NAME, &internal, &refs).await;
        let done = result.is_ok();
        if let Err(e) = result {
            // The failure says what was being done: the Service's Event explains why its NLB is gone.
            let message = e.to_string();
            assert!(
                message.starts_with("recreating the NLB (") && message.contains("internal"),
                "crash before mutation {k}: {message}"
            );
            crashed += 1;
        }
        ensure(&healthy, &internal, &nodes).await;
        let lb = elbv2.load_balancer(&name).await.unwrap().unwrap();
        assert!(lb.internal, "crash before mutation {k}");
        let listeners = elbv2.listeners(&lb.arn).await.unwrap();
        assert_eq!(listeners.len(), 1, "crash before mutation {k}");
        let tg = &listeners[0].default_target_groups[0];
        assert_eq!(
            elbv2.target_health(tg).await.unwrap().len(),
            3,
            "crash before mutation {k}"
        );
        let before = mutation_counts(&metrics);
        ensure(&healthy, &internal, &nodes).await;
        assert_eq!(
            diff(&mutation_counts(&metrics), &before),
            BTreeMap::new(),
            "crash before mutation {k}: not converged"
        );
        healthy
            .ensure_load_balancer_deleted(CLUSTER_NAME, &internal)
            .await
            .unwrap();
        if done {
            break;
        }
    }
    eprintln!("recreation crashed and recovered before each of its {crashed} mutating calls");
    assert!(crashed >= 3, "{crashed}");
}

/// A group's CIDR rules as sorted (protocol, from port, CIDR).
async fn cidr_rules(w: &World, group: &str) -> Vec<(String, i32, String)> {
    let found = w.group(group).await.unwrap();
    let mut rules: Vec<(String, i32, String)> = found
        .ingress
        .iter()
        .flat_map(|p| {
            p.ip_ranges
                .iter()
                .chain(&p.ipv6_ranges)
                .map(|r| (p.protocol.clone(), p.from_port.unwrap_or(-1), r.cidr.clone()))
        })
        .collect();
    rules.sort();
    rules
}

#[tokio::test]
async fn dualstack_is_created_steady_and_switched_back_in_place() {
    let w = world(131).await;
    let lbs = w.lbs(w.config.clone().with_nlb_managed_security_groups(true));
    let metrics = w.adapter.metrics().clone();
    let elbv2 = w.adapter.elbv2();
    let uid = uid();
    let dual = service(&uid, &[(80, 30080)], &[(Key::IpAddressType, "dualstack")]);
    let name = lbs.load_balancer_name(CLUSTER_NAME, &dual);
    let nodes = w.nodes();

    // IPv4-only subnets: refused before anything is made (AWS would refuse the NLB after the group).
    let refs: Vec<&NodeView> = nodes.iter().collect();
    let before = mutation_counts(&metrics);
    let e = lbs
        .ensure_load_balancer(CLUSTER_NAME, &dual, &refs)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("ip-address-type=dualstack needs subnets with IPv6 CIDR blocks")
            && e.contains(&w.subnets[0]),
        "{e}"
    );
    assert_eq!(diff(&mutation_counts(&metrics), &before), BTreeMap::new());
    assert_eq!(elbv2.load_balancer(&name).await.unwrap(), None);

    // With IPv6 CIDR blocks on the VPC and its subnets.
    w.ipv6_subnets().await;
    let hostname = ensure(&lbs, &dual, &nodes).await;
    let lb = elbv2.load_balancer(&name).await.unwrap().unwrap();
    assert_eq!(lb.ip_address_type, "dualstack");
    let groups = w.lb_groups(&name).await;
    assert_eq!(groups.len(), 1);
    let rule = |p: &str, port: i32, cidr: &str| (p.to_owned(), port, cidr.to_owned());
    assert_eq!(
        cidr_rules(&w, &groups[0]).await,
        [
            rule("icmp", 3, "0.0.0.0/0"),
            rule("icmpv6", 2, "::/0"),
            rule("tcp", 80, "0.0.0.0/0"),
            rule("tcp", 80, "::/0"),
        ],
        "the default source ranges include ::/0 on a dualstack NLB"
    );

    // Steady: nothing but reads.
    let before = mutation_counts(&metrics);
    assert_eq!(ensure(&lbs, &dual, &nodes).await, hostname);
    assert_eq!(diff(&mutation_counts(&metrics), &before), BTreeMap::new());

    // Back to ipv4: changed in place (same ARN and hostname), the IPv6 rules revoked.
    let ipv4 = service(&uid, &[(80, 30080)], &[]);
    let before = mutation_counts(&metrics);
    assert_eq!(ensure(&lbs, &ipv4, &nodes).await, hostname);
    assert_eq!(
        diff(&mutation_counts(&metrics), &before),
        BTreeMap::from([("RevokeSecurityGroupIngress", 1), ("SetIpAddressType", 1)])
    );
    let after = elbv2.load_balancer(&name).await.unwrap().unwrap();
    assert_eq!(
        (after.arn.as_str(), after.ip_address_type.as_str()),
        (lb.arn.as_str(), "ipv4")
    );
    assert_eq!(
        cidr_rules(&w, &groups[0]).await,
        [rule("icmp", 3, "0.0.0.0/0"), rule("tcp", 80, "0.0.0.0/0")]
    );
    let before = mutation_counts(&metrics);
    ensure(&lbs, &ipv4, &nodes).await;
    assert_eq!(diff(&mutation_counts(&metrics), &before), BTreeMap::new());

    lbs.ensure_load_balancer_deleted(CLUSTER_NAME, &ipv4)
        .await
        .unwrap();
    assert_eq!(elbv2.load_balancer(&name).await.unwrap(), None);
    assert!(!w.group_exists(&groups[0]).await);
}

#[tokio::test]
async fn a_pinned_subnet_in_a_new_zone_is_added_in_place() {
    let w = world(132).await;
    // kube-proxy's health port, as the controller allows it from the cloud config.
    let lbs = w.lbs(
        w.config
            .clone()
            .with_allowed_health_check_ports(vec![(10256, 10256)]),
    );
    let metrics = w.adapter.metrics().clone();
    let elbv2 = w.adapter.elbv2();
    let uid = uid();
    let nodes = w.nodes();
    // A health check port other than the node port, so that the nodes get health rules from the NLB's subnets.
    let annotated = |subnets: &str| {
        service(
            &uid,
            &[(80, 30080)],
            &[(Key::Subnets, subnets), (Key::HealthcheckPort, "10256")],
        )
    };
    let one = annotated(&w.subnets[0]);
    let name = lbs.load_balancer_name(CLUSTER_NAME, &one);
    let hostname = ensure(&lbs, &one, &nodes).await;
    let lb = elbv2.load_balancer(&name).await.unwrap().unwrap();
    let subnets_of = |lb: &LoadBalancerV2| -> Vec<String> {
        let mut s: Vec<String> = lb
            .availability_zones
            .iter()
            .filter_map(|z| z.subnet_id.as_ref().map(ToString::to_string))
            .collect();
        s.sort();
        s
    };
    assert_eq!(subnets_of(&lb), [w.subnets[0].clone()]);
    let health_sources = async || -> Vec<String> {
        let mut cidrs: Vec<String> = cidr_rules(&w, &w.node_group)
            .await
            .into_iter()
            .filter(|(_, port, _)| *port == 10256)
            .map(|(_, _, cidr)| cidr)
            .collect();
        cidrs.sort();
        cidrs
    };
    assert_eq!(health_sources().await, ["10.132.0.0/20"]);

    // The second zone's subnet added: one SetSubnets on the same NLB, and the health rule follows at once.
    let both = annotated(&format!("{},{}", w.subnets[1], w.subnets[0]));
    let before = mutation_counts(&metrics);
    assert_eq!(ensure(&lbs, &both, &nodes).await, hostname, "the DNS name stays");
    let calls = diff(&mutation_counts(&metrics), &before);
    assert_eq!(calls.get("SetSubnets"), Some(&1), "{calls:?}");
    assert!(
        !calls.contains_key("DeleteLoadBalancer") && !calls.contains_key("CreateLoadBalancer"),
        "{calls:?}"
    );
    let after = elbv2.load_balancer(&name).await.unwrap().unwrap();
    assert_eq!(after.arn, lb.arn);
    let mut wanted = w.subnets.clone();
    wanted.sort();
    assert_eq!(subnets_of(&after), wanted);
    assert_eq!(health_sources().await, ["10.132.0.0/20", "10.132.16.0/20"]);

    // Steady.
    let before = mutation_counts(&metrics);
    ensure(&lbs, &both, &nodes).await;
    assert_eq!(diff(&mutation_counts(&metrics), &before), BTreeMap::new());

    lbs.ensure_load_balancer_deleted(CLUSTER_NAME, &both)
        .await
        .unwrap();
    assert_eq!(elbv2.load_balancer(&name).await.unwrap(), None);
    assert_eq!(health_sources().await, Vec::<String>::new());
}

#[tokio::test]
async fn deletion_sweeps_an_unattached_target_group_of_the_service() {
    // A run that crashed between moving a listener to a new target group and deleting the old one leaves the old
    // group attached to nothing, named for ports the Service no longer has. moto never detaches a group from a
    // load balancer (its listing by load balancer keeps old groups), so the leftover is made here directly.
    let w = world(133).await;
    let lbs = w.lbs(w.config.clone());
    let elbv2 = w.adapter.elbv2();
    let nodes = w.nodes();
    let svc = service(&uid(), &[(80, 30080)], &[]);
    let name = lbs.load_balancer_name(CLUSTER_NAME, &svc);
    ensure(&lbs, &svc, &nodes).await;
    let tags_of_service = |service: &str, owned: bool| -> Tags {
        let mut t = Tags::from([("kubernetes.io/service-name".to_owned(), service.to_owned())]);
        if owned {
            t.insert(w.config.cluster.key(), "owned".to_owned());
        }
        t
    };
    let leftover = async |tags: Tags| -> String {
        let suffix: String = uid().chars().filter(char::is_ascii_hexdigit).take(10).collect();
        elbv2
            .create_target_group(&NewTargetGroup {
                name: format!("k8s-moto-web-{suffix}"),
                protocol: "TCP".into(),
                port: 30079,
                vpc_id: VpcId::new(w.vpc.clone()),
                target_type: ccm_aws_api::elbv2::TargetType::Instance,
                ip_address_type: ccm_aws_api::elbv2::TargetIpFamily::Ipv4,
                health_check: TargetGroupHealthCheck::default(),
                tags,
            })
            .await
            .unwrap()
            .arn
    };
    let orphan = leftover(tags_of_service("moto/web", true)).await;
    // Same name prefix, but another Service's, or not this cluster's: never touched.
    let other_service = leftover(tags_of_service("moto/web-canary", true)).await;
    let not_owned = leftover(tags_of_service("moto/web", false)).await;

    lbs.ensure_load_balancer_deleted(CLUSTER_NAME, &svc)
        .await
        .unwrap();
    assert_eq!(elbv2.load_balancer(&name).await.unwrap(), None);
    let left: Vec<String> = elbv2
        .all_target_groups()
        .await
        .unwrap()
        .into_iter()
        .map(|g| g.arn)
        .filter(|arn| [&orphan, &other_service, &not_owned].contains(&arn))
        .collect();
    let left: BTreeSet<String> = left.into_iter().collect();
    assert_eq!(left, BTreeSet::from([other_service.clone(), not_owned.clone()]));
    let owned_left: Vec<String> = {
        let all = elbv2.all_target_groups().await.unwrap();
        let arns: Vec<String> = all.iter().map(|g| g.arn.clone()).collect();
        let tags = elbv2.tags(&arns).await.unwrap();
        all.into_iter()
            .filter(|g| {
                tags.get(&g.arn).is_some_and(|t| {
                    w.config.cluster.is_owned(t)
                        && t.get("kubernetes.io/service-name").map(String::as_str) == Some("moto/web")
                })
            })
            .map(|g| g.name)
            .collect()
    };
    assert_eq!(
        owned_left,
        Vec::<String>::new(),
        "no target group of the Service is left"
    );
    for arn in [other_service, not_owned] {
        elbv2.delete_target_group(&arn).await.unwrap();
    }
}
