//! NLB health rules from the NLB's own addresses against moto: one `/32` per network interface instead of the
//! subnets' CIDRs. moto 5.2.5 makes no network interface for an NLB (AWS makes one per subnet, described
//! `ELB net/<name>/<id>`, with a private IPv4 address fixed for the NLB's life), so the test makes them by hand
//! with `CreateNetworkInterface` and that description, the way AWS would. Until they exist the NLB is in the
//! state AWS shows right after `CreateLoadBalancer` (interfaces not visible yet): health rules from the subnets'
//! CIDRs, and drift detection asking for the ensure that narrows them. moto only: ministack ignores the NLB's
//! SubnetMappings and the filters of DescribeNetworkInterfaces, and gives interfaces addresses outside their
//! subnet.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::too_many_lines)]

use std::collections::BTreeMap;

use ccm_aws_api::Elbv2;
use ccm_aws_sdk::CallMetrics;
use ccm_cloud_provider::{LoadBalancer, NodeView};
use ccm_load_balancers::{
    annotations::Key,
    nlb::node_rules::{self, DescribedRule, RuleChange},
    shared::Rule,
};
use ccm_testing::lb_world::{Lbs, World, diff, mutation_counts, service, uid};
use k8s_openapi::api::core::v1::Service;

const CLUSTER_NAME: &str = "kubernetes";
const OCTET: u8 = 186;
/// kube-proxy's health port, allowed from the cloud config: health rules apart from the client rules.
const HEALTH_PORT: i32 = 10256;

/// Every read and write so far, by operation.
fn call_counts(metrics: &CallMetrics) -> BTreeMap<&'static str, u64> {
    let mut out = BTreeMap::new();
    for (k, s) in metrics.snapshot() {
        *out.entry(k.operation).or_default() += s.attempts;
    }
    out
}

/// The sources of the health rules of load balancer `name` on the nodes' group, sorted.
async fn health_sources(w: &World, name: &str) -> Vec<String> {
    let group = w.group(&w.node_group).await.unwrap();
    let mut sources: Vec<String> = node_rules::described_rules(&group)
        .into_iter()
        .filter(|r| r.description == format!("{}{name}", node_rules::HEALTH_RULE_PREFIX))
        .inspect(|r| assert_eq!(r.rule.from_port, HEALTH_PORT))
        .map(|r| r.rule.source)
        .collect();
    sources.sort();
    sources
}

/// Makes the NLB's interface in each of its subnets, as AWS does: `(id, address)` each.
async fn make_interfaces(w: &World, name: &str) -> Vec<(String, String)> {
    let lb = w.adapter.elbv2().load_balancer(name).await.unwrap().unwrap();
    let description = node_rules::interface_description(&lb.arn).unwrap();
    let mut made = Vec::new();
    for zone in &lb.availability_zones {
        let subnet = zone.subnet_id.as_ref().unwrap().to_string();
        let out = w
            .raw
            .create_network_interface()
            .subnet_id(&subnet)
            .description(&description)
            .send()
            .await
            .unwrap();
        let eni = out.network_interface.unwrap();
        made.push((eni.network_interface_id.unwrap(), eni.private_ip_address.unwrap()));
    }
    made
}

/// Replaces the health rules of `name` from `from` by rules from `to` (by hand, with the adapter).
async fn swap_rules(w: &World, name: &str, from: &[String], to: &[String]) {
    let rules = |sources: &[String]| -> Vec<DescribedRule> {
        sources
            .iter()
            .map(|source| DescribedRule {
                rule: Rule {
                    protocol: "tcp".to_owned(),
                    from_port: HEALTH_PORT,
                    to_port: HEALTH_PORT,
                    source: source.clone(),
                },
                description: format!("{}{name}", node_rules::HEALTH_RULE_PREFIX),
            })
            .collect()
    };
    let group = w.node_group.clone();
    let add = RuleChange::Authorize {
        group: group.clone(),
        rules: rules(to),
    };
    let remove = RuleChange::Revoke {
        group,
        rules: rules(from),
    };
    node_rules::apply(w.adapter.ec2(), &add).await.unwrap();
    node_rules::apply(w.adapter.ec2(), &remove).await.unwrap();
}

async fn ensure(lbs: &Lbs, svc: &Service, nodes: &[NodeView]) {
    let nodes: Vec<&NodeView> = nodes.iter().collect();
    lbs.ensure_load_balancer(CLUSTER_NAME, svc, &nodes).await.unwrap();
}

async fn drift(lbs: &Lbs, svc: &Service, nodes: &[NodeView]) -> Vec<String> {
    let nodes: Vec<&NodeView> = nodes.iter().collect();
    let drifts = lbs.drifted(CLUSTER_NAME, &[svc], &nodes).await.unwrap();
    drifts.into_iter().flat_map(|d| d.what).collect()
}

#[tokio::test]
async fn health_rules_narrow_to_the_nlbs_addresses_once_its_interfaces_are_seen() {
    let w = ccm_testing::lb_world::world(OCTET, "eni", true).await;
    let config = w
        .config
        .clone()
        .with_allowed_health_check_ports(vec![(HEALTH_PORT, HEALTH_PORT)]);
    let lbs = w.lbs(config.clone());
    let metrics = w.adapter.metrics().clone();
    let nodes = w.nodes();
    let port = HEALTH_PORT.to_string();
    let svc = service(
        &uid(),
        &[(80, 30080)],
        &[(Key::Type, "nlb"), (Key::HealthcheckPort, port.as_str())],
    );
    let name = lbs.load_balancer_name(CLUSTER_NAME, &svc);

    // Created: no interface is visible yet, so the subnets' CIDRs stand in (as upstream's rules are), and drift
    // detection asks for the ensure that narrows them.
    ensure(&lbs, &svc, &nodes).await;
    let cidrs = health_sources(&w, &name).await;
    assert_eq!(
        cidrs,
        [format!("10.{OCTET}.0.0/20"), format!("10.{OCTET}.16.0/20")]
    );
    let reported = drift(&lbs, &svc, &nodes).await;
    assert!(
        reported.iter().any(|d| d.contains("network interfaces")),
        "{reported:?}"
    );

    // AWS shows the interfaces: the re-ensure adds one /32 each, then revokes the CIDR rules.
    let made = make_interfaces(&w, &name).await;
    let mut addresses: Vec<String> = made.iter().map(|(_, ip)| format!("{ip}/32")).collect();
    addresses.sort();
    let before = mutation_counts(&metrics);
    ensure(&lbs, &svc, &nodes).await;
    assert_eq!(
        diff(&mutation_counts(&metrics), &before),
        BTreeMap::from([
            ("AuthorizeSecurityGroupIngress", 1),
            ("RevokeSecurityGroupIngress", 1)
        ])
    );
    assert_eq!(
        health_sources(&w, &name).await,
        addresses,
        "narrower, and no more rules"
    );
    assert_eq!(drift(&lbs, &svc, &nodes).await, Vec::<String>::new());

    // Steady: nothing to write; the interfaces are read instead of the subnets.
    let (before, mutations) = (call_counts(&metrics), mutation_counts(&metrics));
    ensure(&lbs, &svc, &nodes).await;
    assert_eq!(diff(&mutation_counts(&metrics), &mutations), BTreeMap::new());
    let reads = diff(&call_counts(&metrics), &before);
    eprintln!("steady ensure: {reads:?}");
    // (The one DescribeSubnets is the subnet discovery's: the health sources read none, so the total is as it was.)
    assert_eq!(reads.get("DescribeNetworkInterfaces"), Some(&1), "{reads:?}");
    assert_eq!(reads.get("DescribeSubnets"), Some(&1), "{reads:?}");

    // Taken over from upstream (or an earlier version): its rules from the subnets' CIDRs and none from the
    // addresses. A crash between the authorization and the revocation, then the next ensure finishes the job.
    swap_rules(&w, &name, &addresses, &cidrs).await;
    let faulty = w.faulty_lbs(config, 2);
    let refs: Vec<&NodeView> = nodes.iter().collect();
    faulty
        .ensure_load_balancer(CLUSTER_NAME, &svc, &refs)
        .await
        .unwrap_err();
    let mut both: Vec<String> = addresses.iter().chain(&cidrs).cloned().collect();
    both.sort();
    assert_eq!(health_sources(&w, &name).await, both, "the /32s first");
    ensure(&lbs, &svc, &nodes).await;
    assert_eq!(health_sources(&w, &name).await, addresses);

    lbs.ensure_load_balancer_deleted(CLUSTER_NAME, &svc)
        .await
        .unwrap();
    assert_eq!(health_sources(&w, &name).await, Vec::<String>::new());
    for (id, _) in made {
        w.raw
            .delete_network_interface()
            .network_interface_id(id)
            .send()
            .await
            .unwrap();
    }
}
