//! `aws-load-balancer-security-group-prefix-lists` against moto, through the provider: the lists reach the
//! load balancer's own managed group only (one rule per list and listener port, without the default 0.0.0.0/0),
//! never the nodes' group; a second ensure writes nothing; a list dropped from the annotation is revoked; a
//! crash at any mutating call converges on the next run; and an NLB without a group of its own is refused
//! before anything is written.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::too_many_lines)]

use std::collections::{BTreeMap, BTreeSet};

use ccm_aws_api::{elb::Elb, elbv2::Elbv2};
use ccm_cloud_provider::{LoadBalancer, NodeView};
use ccm_load_balancers::annotations::Key;
use ccm_testing::lb_world::{Lbs, World, diff, mutation_counts, uid};
use k8s_openapi::api::core::v1::Service;

const CLUSTER_NAME: &str = "kubernetes";

/// A managed prefix list of the account, as a Service author names one.
async fn prefix_list(w: &World, name: &str) -> String {
    w.raw
        .create_managed_prefix_list()
        .prefix_list_name(format!("{name}-{}", &uid()[..8]))
        .address_family("IPv4")
        .max_entries(5)
        .entries(
            aws_sdk_ec2::types::AddPrefixListEntry::builder()
                .cidr("198.51.100.0/24")
                .build(),
        )
        .send()
        .await
        .unwrap()
        .prefix_list()
        .and_then(|l| l.prefix_list_id())
        .unwrap()
        .to_owned()
}

fn service(flavour: &str, uid: &str, lists: &str) -> Service {
    ccm_testing::lb_world::service(
        uid,
        &[(80, 30080), (443, 30443)],
        &[(Key::Type, flavour), (Key::SecurityGroupPrefixLists, lists)],
    )
}

async fn ensure(lbs: &Lbs, svc: &Service, nodes: &[NodeView]) {
    let nodes: Vec<&NodeView> = nodes.iter().collect();
    lbs.ensure_load_balancer(CLUSTER_NAME, svc, &nodes).await.unwrap();
}

/// The rules of `group` as (protocol, port, source): CIDRs, group IDs and prefix list IDs.
async fn rules(w: &World, group: &str) -> BTreeSet<(String, i32, String)> {
    let group = w.group(group).await.unwrap();
    let mut out = BTreeSet::new();
    for p in &group.ingress {
        let port = p.from_port.unwrap_or(-1);
        let cidrs = p.ip_ranges.iter().chain(&p.ipv6_ranges).map(|r| r.cidr.clone());
        let groups = p.source_groups.iter().map(|g| g.group_id.to_string());
        for source in cidrs
            .chain(groups)
            .chain(p.prefix_lists.iter().map(|l| l.id.clone()))
        {
            out.insert((p.protocol.clone(), port, source));
        }
    }
    out
}

fn list_rules(lists: &[&str]) -> BTreeSet<(String, i32, String)> {
    let mut out = BTreeSet::new();
    for list in lists {
        for port in [80, 443] {
            out.insert(("tcp".to_owned(), port, (*list).to_owned()));
        }
    }
    out
}

/// The one security group of the load balancer `name`.
async fn lb_group(w: &World, flavour: &str, name: &str) -> String {
    if flavour == "nlb" {
        let [g] = w.lb_groups(name).await.try_into().unwrap();
        return g;
    }
    let lb = w.adapter.elb().load_balancer(name).await.unwrap().unwrap();
    let [g] = lb.security_groups.try_into().unwrap();
    g.to_string()
}

/// Ensures `svc` with `lists`, checks its managed group holds exactly their rules and the nodes' group none,
/// then that a second ensure writes nothing. Returns the managed group.
async fn converge(w: &World, lbs: &Lbs, svc: &Service, flavour: &str, lists: &[&str]) -> String {
    ensure(lbs, svc, &w.nodes()).await;
    let managed = lb_group(w, flavour, &lbs.load_balancer_name(CLUSTER_NAME, svc)).await;
    assert_eq!(
        rules(w, &managed).await,
        list_rules(lists),
        "only the lists, no 0.0.0.0/0"
    );
    let node_rules = rules(w, &w.node_group).await;
    assert!(
        !node_rules.iter().any(|r| r.2.starts_with("pl-")),
        "the nodes' group pays no quota for the lists: {node_rules:?}"
    );
    let metrics = w.adapter.metrics().clone();
    let before = mutation_counts(&metrics);
    ensure(lbs, svc, &w.nodes()).await;
    assert_eq!(
        diff(&mutation_counts(&metrics), &before),
        BTreeMap::new(),
        "steady"
    );
    managed
}

#[tokio::test]
async fn an_nlbs_managed_group_takes_the_lists_and_drops_them_with_the_annotation() {
    let w = ccm_testing::lb_world::world(193, "pl", true).await;
    let lbs = w.lbs(w.config.clone().with_nlb_managed_security_groups(true));
    let (a, b) = (prefix_list(&w, "a").await, prefix_list(&w, "b").await);
    let id = uid();
    let svc = service("nlb", &id, &format!("{a}, {b}"));
    let managed = converge(&w, &lbs, &svc, "nlb", &[&a, &b]).await;
    // One list dropped: only its rules go.
    converge(&w, &lbs, &service("nlb", &id, &b), "nlb", &[&b]).await;
    lbs.ensure_load_balancer_deleted(CLUSTER_NAME, &svc)
        .await
        .unwrap();
    assert!(!w.group_exists(&managed).await, "the managed group is deleted");
}

#[tokio::test]
async fn a_classic_elbs_managed_group_takes_the_lists_and_a_crash_anywhere_converges() {
    let w = ccm_testing::lb_world::world(194, "pl", false).await;
    let lbs = w.lbs(w.config.clone());
    let (a, b) = (prefix_list(&w, "a").await, prefix_list(&w, "b").await);
    let id = uid();
    let svc = service("classic", &id, &format!("{a},{b}"));
    converge(&w, &lbs, &svc, "classic", &[&a, &b]).await;
    converge(&w, &lbs, &service("classic", &id, &b), "classic", &[&b]).await;
    lbs.ensure_load_balancer_deleted(CLUSTER_NAME, &svc)
        .await
        .unwrap();
    // A crash before each mutating call of a creation with lists: the next run converges.
    let nodes = w.nodes();
    let refs: Vec<&NodeView> = nodes.iter().collect();
    for k in 1.. {
        let svc = service("classic", &uid(), &a);
        let crashed = w
            .faulty_lbs(w.config.clone(), k)
            .ensure_load_balancer(CLUSTER_NAME, &svc, &refs)
            .await;
        converge(&w, &lbs, &svc, "classic", &[&a]).await;
        lbs.ensure_load_balancer_deleted(CLUSTER_NAME, &svc)
            .await
            .unwrap();
        if crashed.is_ok() {
            assert!(k > 3, "every step had its crash: {k}");
            break;
        }
    }
}

#[tokio::test]
async fn an_nlb_without_a_group_of_its_own_is_refused_before_any_write() {
    let w = ccm_testing::lb_world::world(195, "pl", true).await;
    let lbs = w.lbs(w.config.clone());
    let svc = service("nlb", &uid(), "pl-0123456789abcdef0");
    let name = lbs.load_balancer_name(CLUSTER_NAME, &svc);
    let metrics = w.adapter.metrics().clone();
    let before = mutation_counts(&metrics);
    let nodes = w.nodes();
    let refs: Vec<&NodeView> = nodes.iter().collect();
    let err = lbs
        .ensure_load_balancer(CLUSTER_NAME, &svc, &refs)
        .await
        .unwrap_err();
    let message = ccm_controllers::ErrorChain(&err).to_string();
    assert!(
        message.contains(Key::SecurityGroupPrefixLists.name()),
        "{message}"
    );
    assert!(message.contains("NLBSecurityGroupMode"), "{message}");
    assert_eq!(
        diff(&mutation_counts(&metrics), &before),
        BTreeMap::new(),
        "nothing written"
    );
    assert!(w.adapter.elbv2().load_balancer(&name).await.unwrap().is_none());
}
