//! A Service's IP families choose its NLB's address type (against moto, through the provider): a dual-stack
//! Service that prefers dual-stack gets an IPv4 NLB and a Warning while its subnets lack IPv6, one that requires
//! it an error naming them and nothing made; with IPv6 subnets the same Service's NLB becomes dual-stack in
//! place, and the `ip-address-type` annotation still wins.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::too_many_lines)]

use std::collections::BTreeMap;

use ccm_aws_api::Elbv2;
use ccm_cloud_provider::{LoadBalancer, NodeView};
use ccm_load_balancers::annotations::Key;
use ccm_testing::lb_world::{diff, mutation_counts, uid};
use k8s_openapi::api::core::v1::Service;

const CLUSTER_NAME: &str = "kubernetes";

fn service(uid: &str, policy: &str, annotations: &[(Key, &str)]) -> Service {
    let mut all = annotations.to_vec();
    all.push((Key::Type, "nlb"));
    let mut svc = ccm_testing::lb_world::service(uid, &[(80, 30080)], &all);
    let spec = svc.spec.as_mut().unwrap();
    spec.ip_families = Some(vec!["IPv4".to_owned(), "IPv6".to_owned()]);
    spec.ip_family_policy = Some(policy.to_owned());
    svc
}

#[tokio::test]
async fn a_dual_stack_service_gets_what_its_subnets_allow_and_what_it_requires() {
    let w = ccm_testing::lb_world::world(165, "fam", true).await;
    let lbs = w.lbs(w.config.clone());
    let metrics = w.adapter.metrics().clone();
    let nodes = w.nodes();
    let nodes: Vec<&NodeView> = nodes.iter().collect();
    let uid = uid();
    let name = lbs.load_balancer_name(CLUSTER_NAME, &service(&uid, "PreferDualStack", &[]));
    let lb = async || w.adapter.elbv2().load_balancer(&name).await.unwrap();

    // Required, in IPv4-only subnets: an error naming them, nothing made.
    let before = mutation_counts(&metrics);
    let e = lbs
        .ensure_load_balancer(CLUSTER_NAME, &service(&uid, "RequireDualStack", &[]), &nodes)
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains(&w.subnets[0]), "{e}");
    assert_eq!(diff(&mutation_counts(&metrics), &before), BTreeMap::new());

    // Preferred: IPv4, with a Warning saying why.
    let preferred = service(&uid, "PreferDualStack", &[]);
    let ensured = lbs
        .ensure_load_balancer_reporting(CLUSTER_NAME, &preferred, &nodes)
        .await
        .unwrap();
    assert_eq!(lb().await.unwrap().ip_address_type, "ipv4");
    let notice = ensured
        .notices
        .iter()
        .find(|n| n.reason == "LoadBalancerIPv4Only");
    assert!(
        notice.is_some_and(|n| n.warning && n.message.contains("no IPv6 CIDR block")),
        "{:?}",
        ensured.notices
    );

    // IPv6 subnets: the same Service's NLB becomes dual-stack in place; the annotation still wins.
    w.ipv6_subnets().await;
    let ensured = lbs
        .ensure_load_balancer_reporting(CLUSTER_NAME, &preferred, &nodes)
        .await
        .unwrap();
    assert_eq!(lb().await.unwrap().ip_address_type, "dualstack");
    assert!(ensured.notices.is_empty(), "{:?}", ensured.notices);
    let annotated = service(&uid, "PreferDualStack", &[(Key::IpAddressType, "ipv4")]);
    lbs.ensure_load_balancer(CLUSTER_NAME, &annotated, &nodes)
        .await
        .unwrap();
    assert_eq!(lb().await.unwrap().ip_address_type, "ipv4");
    lbs.ensure_load_balancer_deleted(CLUSTER_NAME, &annotated)
        .await
        .unwrap();
}

/// A Service of the IPv6 family only: a dual-stack NLB with an IPv6 target group, clients let in from `::/0`
/// and health checks from the subnets' IPv6 CIDRs; made dual-stack, its group is replaced by an IPv4 one under
/// another name (created and attached before the IPv6 one goes).
#[tokio::test]
async fn an_ipv6_only_service_gets_ipv6_target_groups_replaced_when_its_family_changes() {
    let w = ccm_testing::lb_world::world(197, "fam6", true).await;
    w.ipv6_subnets().await;
    let lbs = w.lbs(w.config.clone());
    let nodes = w.nodes();
    let nodes: Vec<&NodeView> = nodes.iter().collect();
    let uid = uid();
    let mut v6 = service(&uid, "SingleStack", &[]);
    v6.spec.as_mut().unwrap().ip_families = Some(vec!["IPv6".to_owned()]);
    let ensured = lbs
        .ensure_load_balancer_reporting(CLUSTER_NAME, &v6, &nodes)
        .await
        .unwrap();
    assert!(
        ensured
            .notices
            .iter()
            .any(|n| n.warning && n.message.contains("IPv6 target groups")),
        "{:?}",
        ensured.notices
    );
    let name = lbs.load_balancer_name(CLUSTER_NAME, &v6);
    let elbv2 = w.adapter.elbv2();
    let lb = elbv2.load_balancer(&name).await.unwrap().unwrap();
    assert_eq!(lb.ip_address_type, "dualstack");
    let listener = elbv2.listeners(&lb.arn).await.unwrap().remove(0);
    let group_name = |arn: &str| arn.split('/').nth(1).unwrap().to_owned();
    let v6_group = group_name(&listener.default_target_groups[0]);
    let group = elbv2.target_group(&v6_group).await.unwrap().unwrap();
    assert_eq!(group.ip_address_type, ccm_aws_api::elbv2::TargetIpFamily::Ipv6);
    let nodes_group = w.group(&w.node_group).await.unwrap();
    let sources: Vec<String> = nodes_group
        .ingress
        .iter()
        .filter(|p| p.from_port == Some(30080))
        .flat_map(|p| p.ipv6_ranges.iter().map(|r| r.cidr.clone()))
        .collect();
    assert!(sources.iter().any(|c| c == "::/0"), "{sources:?}");

    // Dual-stack now: an IPv4 group under another name replaces it.
    let both = service(&uid, "RequireDualStack", &[]);
    lbs.ensure_load_balancer(CLUSTER_NAME, &both, &nodes)
        .await
        .unwrap();
    let listener = elbv2.listeners(&lb.arn).await.unwrap().remove(0);
    let v4_group = group_name(&listener.default_target_groups[0]);
    assert_ne!(v4_group, v6_group);
    let group = elbv2.target_group(&v4_group).await.unwrap().unwrap();
    assert_eq!(group.ip_address_type, ccm_aws_api::elbv2::TargetIpFamily::Ipv4);
    assert_eq!(elbv2.target_group(&v6_group).await.unwrap(), None);
    lbs.ensure_load_balancer_deleted(CLUSTER_NAME, &both)
        .await
        .unwrap();
}
