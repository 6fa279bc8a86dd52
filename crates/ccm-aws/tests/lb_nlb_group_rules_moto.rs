//! The nodes' rules of NLBs with security groups reference the NLB's group (against moto, through the provider):
//! one rule per port whatever the source ranges, no CIDR or MTU rule, a steady second ensure, the switch from
//! CIDR rules of an earlier version, NLBs without groups keeping CIDR rules, and deletion.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::too_many_lines)]

use std::collections::{BTreeMap, BTreeSet};

use ccm_aws_api::{
    Ec2,
    ec2::{IpPermission, IpRange},
};
use ccm_cloud_provider::{LoadBalancer, NodeView};
use ccm_load_balancers::{
    annotations::Key,
    nlb::node_rules::{CLIENT_RULE_PREFIX, HEALTH_RULE_PREFIX, MTU_RULE},
};
use ccm_testing::lb_world::{Lbs, World, diff, mutation_counts, uid};
use k8s_openapi::api::core::v1::Service;

const CLUSTER_NAME: &str = "kubernetes";

/// An NLB Service with three ports, four source ranges and health checks on their own port.
fn service(annotations: &[(Key, &str)]) -> Service {
    let mut all = annotations.to_vec();
    all.push((Key::Type, "nlb"));
    all.push((Key::HealthcheckPort, "32000"));
    let mut svc = ccm_testing::lb_world::service(&uid(), &[(80, 30080), (443, 30443), (8080, 30088)], &all);
    svc.spec.as_mut().unwrap().load_balancer_source_ranges = Some(
        ["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "203.0.113.0/24"]
            .map(str::to_owned)
            .to_vec(),
    );
    svc
}

/// The configuration with the Services' health check port (32000, not a node port) allowed, as an operator
/// allows one in `[Global] AllowedHealthCheckPorts`.
fn allowed(config: ccm_load_balancers::LoadBalancerConfig) -> ccm_load_balancers::LoadBalancerConfig {
    config.with_allowed_health_check_ports(vec![(32000, 32000)])
}

async fn ensure(lbs: &Lbs, svc: &Service, nodes: &[NodeView]) {
    let nodes: Vec<&NodeView> = nodes.iter().collect();
    lbs.ensure_load_balancer(CLUSTER_NAME, svc, &nodes).await.unwrap();
}

/// The rules of `group` as (protocol, port, source, description), sources being CIDRs or group IDs.
async fn rules(w: &World, group: &str) -> BTreeSet<(String, i32, String, String)> {
    let group = w.group(group).await.unwrap();
    let mut out = BTreeSet::new();
    for p in &group.ingress {
        let port = p.from_port.unwrap_or(-1);
        let cidrs = p
            .ip_ranges
            .iter()
            .chain(&p.ipv6_ranges)
            .map(|r| (r.cidr.clone(), &r.description));
        let sources = p
            .source_groups
            .iter()
            .map(|g| (g.group_id.to_string(), &g.description));
        for (source, description) in cidrs.chain(sources) {
            out.insert((
                p.protocol.clone(),
                port,
                source,
                description.clone().unwrap_or_default(),
            ));
        }
    }
    out
}

fn group_rules(group: &str, name: &str) -> BTreeSet<(String, i32, String, String)> {
    let client = format!("{CLIENT_RULE_PREFIX}{name}");
    let mut wanted: BTreeSet<_> = [30080, 30443, 30088]
        .map(|port| ("tcp".to_owned(), port, group.to_owned(), client.clone()))
        .into();
    wanted.insert((
        "tcp".to_owned(),
        32000,
        group.to_owned(),
        format!("{HEALTH_RULE_PREFIX}{name}"),
    ));
    wanted
}

#[tokio::test]
async fn node_rules_reference_the_managed_group_and_go_with_it() {
    let w = ccm_testing::lb_world::world(160, "grp", true).await;
    let lbs = w.lbs(allowed(w.config.clone()).with_nlb_managed_security_groups(true));
    let svc = service(&[]);
    let name = lbs.load_balancer_name(CLUSTER_NAME, &svc);
    ensure(&lbs, &svc, &w.nodes()).await;
    let [managed] = w.lb_groups(&name).await.try_into().unwrap();
    assert_eq!(
        rules(&w, &w.node_group).await,
        group_rules(&managed, &name),
        "4 rules instead of 15 and an MTU rule"
    );
    let metrics = w.adapter.metrics().clone();
    let before = mutation_counts(&metrics);
    ensure(&lbs, &svc, &w.nodes()).await;
    assert_eq!(
        diff(&mutation_counts(&metrics), &before),
        BTreeMap::new(),
        "steady"
    );

    lbs.ensure_load_balancer_deleted(CLUSTER_NAME, &svc)
        .await
        .unwrap();
    assert_eq!(rules(&w, &w.node_group).await, BTreeSet::new());
    assert!(!w.group_exists(&managed).await, "the managed group is deleted");
}

#[tokio::test]
async fn an_nlb_moves_from_cidr_rules_to_its_group_and_given_groups_are_referenced() {
    let w = ccm_testing::lb_world::world(161, "grp", true).await;
    // Without groups first (an NLB of the CIDR era): CIDR rules, 3 ports x 4 ranges + 1 x 2 subnets, MTU rules.
    let lbs = w.lbs(allowed(w.config.clone()));
    let given = w.byo_group().await;
    let svc = service(&[]);
    let name = lbs.load_balancer_name(CLUSTER_NAME, &svc);
    ensure(&lbs, &svc, &w.nodes()).await;
    let cidr_era = rules(&w, &w.node_group).await;
    assert_eq!(
        cidr_era.iter().filter(|r| r.3.ends_with(&name)).count(),
        14,
        "{cidr_era:#?}"
    );
    assert_eq!(cidr_era.iter().filter(|r| r.3 == MTU_RULE).count(), 4);
    // Managed mode now: an NLB created without groups never gets any, so its rules stay as they are.
    let managed = w.lbs(allowed(w.config.clone()).with_nlb_managed_security_groups(true));
    ensure(&managed, &svc, &w.nodes()).await;
    if ccm_testing::TestEnv::get().emulator == ccm_testing::Emulator::Ministack {
        // ministack 1.5.33 ignores CreateLoadBalancer's SubnetMappings (AWS documents them as the alternative
        // to Subnets): the NLB reads back without subnets, so no health rule has a source any more and those go.
        // The client and MTU rules must still stay.
        let health = format!("{HEALTH_RULE_PREFIX}{name}");
        let kept: BTreeSet<_> = cidr_era.iter().filter(|r| r.3 != health).cloned().collect();
        assert_eq!(rules(&w, &w.node_group).await, kept);
    } else {
        assert_eq!(rules(&w, &w.node_group).await, cidr_era);
    }
    managed
        .ensure_load_balancer_deleted(CLUSTER_NAME, &svc)
        .await
        .unwrap();

    // A Service given groups: its rules reference the first one given.
    let svc = service(&[(Key::SecurityGroups, &format!("{given},{}", w.node_group))]);
    let name = managed.load_balancer_name(CLUSTER_NAME, &svc);
    ensure(&managed, &svc, &w.nodes()).await;
    assert_eq!(rules(&w, &w.node_group).await, group_rules(&given, &name));
    // CIDR rules an earlier version left under this NLB's name go once the group's rules exist.
    let old = IpPermission {
        protocol: "tcp".into(),
        from_port: Some(30080),
        to_port: Some(30080),
        ip_ranges: vec![IpRange {
            cidr: "10.0.0.0/8".into(),
            description: Some(format!("{CLIENT_RULE_PREFIX}{name}")),
        }],
        ..IpPermission::default()
    };
    let node_group = ccm_aws_api::SecurityGroupId::new(w.node_group.clone());
    w.adapter
        .ec2()
        .authorize_ingress(&node_group, &[old])
        .await
        .unwrap();
    ensure(&managed, &svc, &w.nodes()).await;
    assert_eq!(rules(&w, &w.node_group).await, group_rules(&given, &name));
    managed
        .ensure_load_balancer_deleted(CLUSTER_NAME, &svc)
        .await
        .unwrap();
    assert_eq!(rules(&w, &w.node_group).await, BTreeSet::new());
    assert!(w.group_exists(&given).await, "a given group is never deleted");
}
