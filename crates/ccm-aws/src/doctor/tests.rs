#![allow(clippy::unwrap_used, clippy::expect_used)]

use ccm_testing::fixtures::ServiceBuilder;
use std::{
    collections::BTreeMap,
    time::{Duration, SystemTime},
};

use ccm_aws_api::{
    AwsError, ErrorKind, InstanceId, RouteTableId, SecurityGroupId, Tags, VpcId,
    ec2::{Instance, InstanceState, IpPermission, IpRange, Route, RouteTable, SecurityGroup, SourceGroup},
    elb::{ClassicLoadBalancer, MockElb},
    elbv2::{LoadBalancerV2, MockElbv2, TargetGroup},
};
use ccm_tagging::ClusterTags;
use k8s_openapi::api::core::v1::{Event, Node, Service};
use serde_json::json;

use super::{
    Kind, NodeLookup, Ports, Report, Scope, Snapshot, analyze, observe::Inventory, remove, remove::Outcome,
};

mod chosen_names;
mod guard;

const UID: &str = "11111111-2222-3333-4444-555555555555";
const LIVE_LB: &str = "a1111111122223333444455555555555";
const OLD_LB: &str = "a9999999988887777666655555555555";

fn scope() -> Scope {
    Scope::new(
        ClusterTags::new("c1", false).unwrap(),
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000),
    )
}

fn tags(pairs: &[(&str, &str)]) -> Tags {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

fn owned(service: &str) -> Tags {
    tags(&[
        ("kubernetes.io/cluster/c1", "owned"),
        ("kubernetes.io/service-name", service),
    ])
}

fn service(namespace: &str, name: &str, uid: &str, type_: &str, finalizers: &[&str]) -> Service {
    let svc = ServiceBuilder::new(namespace, name).uid(uid).type_(type_);
    finalizers.iter().fold(svc, |svc, f| svc.finalizer(f)).build()
}

fn classic(name: &str, groups: &[&str]) -> ClassicLoadBalancer {
    let mut lb = ClassicLoadBalancer::new(name, "dns");
    lb.security_groups = groups.iter().map(|g| SecurityGroupId::new(*g)).collect();
    lb.created_time = Some(SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000 - 3 * 86_400));
    lb
}

fn group(id: &str, name: &str, tags: Tags) -> SecurityGroup {
    SecurityGroup::new(SecurityGroupId::new(id), name, Some(VpcId::new("vpc-1")), tags)
}

fn ids(report: &[super::Finding]) -> Vec<(Kind, &str)> {
    report.iter().map(|f| (f.kind, f.id.as_str())).collect()
}

/// Planted leaks of a deleted Service are listed with their reasons; the live Service's load balancer and group,
/// a kops node group tagged owned, and foreign, shared and untagged resources are not.
#[test]
fn leaks_of_a_deleted_service_are_listed_and_nothing_else() {
    let live_key = "default/web";
    let gone = "default/gone";
    let mut node_group = group(
        "sg-node",
        "nodes.c1",
        tags(&[("kubernetes.io/cluster/c1", "owned")]),
    );
    let mut rule = IpPermission::all_from_group(SecurityGroupId::new("sg-leak"));
    rule.source_groups.push(SourceGroup {
        group_id: SecurityGroupId::new("sg-live"),
        description: None,
    });
    node_group.ingress.push(rule);
    let inventory = Inventory {
        classic: vec![
            (classic(LIVE_LB, &["sg-live"]), owned(live_key)),
            (classic(OLD_LB, &["sg-leak"]), owned(gone)),
            (
                classic("foreign", &[]),
                tags(&[
                    ("kubernetes.io/cluster/other", "owned"),
                    ("kubernetes.io/service-name", gone),
                ]),
            ),
            (
                classic("shared", &[]),
                tags(&[
                    ("kubernetes.io/cluster/c1", "shared"),
                    ("kubernetes.io/service-name", gone),
                ]),
            ),
            (
                classic("untagged", &[]),
                tags(&[("kubernetes.io/service-name", gone)]),
            ),
        ],
        target_groups: vec![
            (
                TargetGroup::new("arn:tg-leak", "k8s-default-gone-1", "TCP", 80),
                owned(gone),
            ),
            (
                TargetGroup::new("arn:tg-foreign", "k8s-default-gone-2", "TCP", 80),
                tags(&[
                    ("kubernetes.io/cluster/other", "owned"),
                    ("kubernetes.io/service-name", gone),
                ]),
            ),
        ],
        groups: vec![
            group("sg-live", &format!("k8s-elb-{LIVE_LB}"), owned(live_key)),
            group("sg-leak", &format!("k8s-elb-{OLD_LB}"), owned(gone)),
            group(
                "sg-shared",
                "k8s-elb-x",
                tags(&[
                    ("kubernetes.io/cluster/c1", "shared"),
                    ("kubernetes.io/service-name", gone),
                ]),
            ),
            group("sg-untagged", "k8s-elb-y", Tags::new()),
            node_group,
        ],
        ..Inventory::default()
    };
    let snapshot = Snapshot {
        services: vec![service("default", "web", UID, "LoadBalancer", &[])],
        ..Snapshot::default()
    };
    let found = analyze::findings(&scope(), &inventory, &snapshot, &BTreeMap::new());
    assert_eq!(
        ids(&found),
        [
            (Kind::ClassicLoadBalancer, OLD_LB),
            (Kind::TargetGroup, "arn:tg-leak"),
            (Kind::SecurityGroup, "sg-leak"),
            // Upstream's all-traffic rule from the live load balancer's group: reported, narrowed by its ensure.
            (Kind::NodeGroupRules, format!("sg-node {LIVE_LB}").as_str()),
        ]
    );
    let (leaks, wide) = found.split_at(3);
    assert!(
        leaks
            .iter()
            .all(|f| f.deletable && f.reason == "Service default/gone does not exist")
    );
    assert!(leaks.iter().all(|f| f.service.as_deref() == Some(gone)));
    assert!(
        !wide[0].deletable,
        "the controller narrows it; --delete does not touch it"
    );
    assert_eq!(found[0].age_seconds, Some(3 * 86_400));
    // The node group's rule that references the leaked group is part of its finding, reduced to that source.
    assert_eq!(found[2].details, ["rule of sg-node: all traffic from sg-leak"]);
}

#[test]
fn a_recreated_or_retyped_service_no_longer_owns_its_load_balancer() {
    let inventory = Inventory {
        classic: vec![
            (classic(OLD_LB, &[]), owned("default/web")),
            (
                classic("a7777777788887777666655555555555", &[]),
                owned("default/api"),
            ),
            (
                classic("a6666666688887777666655555555555", &[]),
                owned("default/db"),
            ),
        ],
        ..Inventory::default()
    };
    let snapshot = Snapshot {
        services: vec![
            service("default", "web", UID, "LoadBalancer", &[]),
            service(
                "default",
                "api",
                "77777777-8888-7777-6666-555555555555",
                "ClusterIP",
                &[],
            ),
            // Retyped, but the service controller has not cleaned up yet: still its owner.
            service(
                "default",
                "db",
                "66666666-8888-7777-6666-555555555555",
                "ClusterIP",
                &["service.kubernetes.io/load-balancer-cleanup"],
            ),
        ],
        ..Snapshot::default()
    };
    let found = analyze::findings(&scope(), &inventory, &snapshot, &BTreeMap::new());
    let reasons: Vec<&str> = found.iter().map(|f| f.reason.as_str()).collect();
    assert_eq!(
        reasons,
        [
            format!("Service default/web was recreated: its UID {UID} names load balancer {LIVE_LB}, not {OLD_LB}"),
            "Service default/api is of type ClusterIP and has no service.kubernetes.io/load-balancer-cleanup finalizer"
                .to_owned(),
        ]
    );
}

#[test]
fn target_groups_and_groups_used_by_live_load_balancers_are_kept() {
    let mut live = LoadBalancerV2::new("arn:lb-live", LIVE_LB, "dns");
    live.security_groups = vec![SecurityGroupId::new("sg-nlb")];
    let leaked = LoadBalancerV2::new("arn:lb-old", OLD_LB, "dns");
    let mut on_live = TargetGroup::new("arn:tg-live", "k8s-default-web-1", "TCP", 80);
    on_live.load_balancer_arns = vec!["arn:lb-live".into()];
    let mut on_leaked = TargetGroup::new("arn:tg-old", "k8s-default-web-2", "TCP", 80);
    on_leaked.load_balancer_arns = vec!["arn:lb-old".into()];
    // Unattached while its Service wants an NLB: the CCM's to handle, not a leak.
    let unattached = TargetGroup::new("arn:tg-new", "k8s-default-web-3", "TCP", 80);
    let inventory = Inventory {
        v2: vec![(live, owned("default/web")), (leaked, owned("default/web"))],
        target_groups: vec![
            (on_live, owned("default/web")),
            (on_leaked, owned("default/web")),
            (unattached, owned("default/web")),
        ],
        groups: vec![group("sg-nlb", "k8s-default-web-abc", owned("default/web"))],
        ..Inventory::default()
    };
    let snapshot = Snapshot {
        services: vec![service("default", "web", UID, "LoadBalancer", &[])],
        ..Snapshot::default()
    };
    let found = analyze::findings(&scope(), &inventory, &snapshot, &BTreeMap::new());
    assert_eq!(
        ids(&found),
        [
            (Kind::NetworkLoadBalancer, "arn:lb-old"),
            (Kind::TargetGroup, "arn:tg-old")
        ]
    );
    assert_eq!(found[1].reason, "only leaked load balancers forward to it");
}

#[test]
fn stale_nlb_rules_on_node_groups_are_listed() {
    let mut node_group = group(
        "sg-node",
        "nodes",
        tags(&[("kubernetes.io/cluster/c1", "shared")]),
    );
    let described = |d: &str| IpPermission {
        protocol: "tcp".into(),
        from_port: Some(30080),
        to_port: Some(30080),
        ip_ranges: vec![IpRange {
            cidr: "0.0.0.0/0".into(),
            description: Some(d.into()),
        }],
        ..IpPermission::default()
    };
    node_group.ingress = vec![
        described(&format!("kubernetes.io/rule/nlb/client={OLD_LB}")),
        described(&format!("kubernetes.io/rule/nlb/client={LIVE_LB}")),
        described("something else"),
    ];
    // The same rule on another cluster's group is not ours to report.
    let mut foreign = group(
        "sg-other",
        "nodes",
        tags(&[("kubernetes.io/cluster/other", "owned")]),
    );
    foreign.ingress = vec![described(&format!("kubernetes.io/rule/nlb/client={OLD_LB}"))];
    let inventory = Inventory {
        v2: vec![(
            LoadBalancerV2::new("arn:live", LIVE_LB, "dns"),
            owned("default/web"),
        )],
        groups: vec![node_group, foreign],
        ..Inventory::default()
    };
    let snapshot = Snapshot {
        services: vec![service("default", "web", UID, "LoadBalancer", &[])],
        ..Snapshot::default()
    };
    let found = analyze::findings(&scope(), &inventory, &snapshot, &BTreeMap::new());
    assert_eq!(
        ids(&found),
        [(Kind::NodeGroupRules, format!("sg-node {OLD_LB}").as_str())]
    );
    assert_eq!(
        found[0].reason,
        format!("rules for NLB {OLD_LB}, which does not exist")
    );
    assert!(found[0].deletable);
}

#[test]
fn routes_to_gone_instances_are_removable_only_in_owned_tables() {
    let routes = vec![
        Route::to_instance("10.1.0.0/24", InstanceId::new("i-gone")),
        Route::to_instance("10.1.1.0/24", InstanceId::new("i-dead")),
        Route::to_instance("10.1.2.0/24", InstanceId::new("i-node")),
        Route::to_instance("10.1.3.0/24", InstanceId::new("i-orphan")),
        Route::to_instance("10.1.4.0/24", InstanceId::new("i-nat")),
        Route::to_instance("0.0.0.0/0", InstanceId::new("i-gone")),
    ];
    let cluster_tag = tags(&[("kubernetes.io/cluster/c1", "owned")]);
    let mut instances = BTreeMap::new();
    for (id, state, t) in [
        ("i-dead", InstanceState::Terminated, cluster_tag.clone()),
        ("i-node", InstanceState::Running, cluster_tag.clone()),
        ("i-orphan", InstanceState::Running, cluster_tag.clone()),
        ("i-nat", InstanceState::Running, Tags::new()),
    ] {
        let mut i = Instance::new(InstanceId::new(id), state);
        i.tags = t;
        instances.insert(InstanceId::new(id), i);
    }
    let inventory = Inventory {
        route_tables: vec![
            RouteTable::new(
                RouteTableId::new("rtb-own"),
                VpcId::new("vpc-1"),
                routes.clone(),
                cluster_tag,
            ),
            RouteTable::new(
                RouteTableId::new("rtb-shared"),
                VpcId::new("vpc-1"),
                routes[..1].to_vec(),
                tags(&[("kubernetes.io/cluster/c1", "shared")]),
            ),
        ],
        instances,
        ..Inventory::default()
    };
    let node: Node = serde_json::from_value(
        json!({ "metadata": { "name": "n1" }, "spec": { "providerID": "aws:///us-east-1a/i-node" } }),
    )
    .unwrap();
    let snapshot = Snapshot {
        nodes: vec![node],
        ..Snapshot::default()
    };
    let found = analyze::findings(&scope(), &inventory, &snapshot, &BTreeMap::new());
    let summary: Vec<(&str, bool)> = found.iter().map(|f| (f.id.as_str(), f.deletable)).collect();
    assert_eq!(
        summary,
        [
            ("rtb-own 10.1.0.0/24", true),
            ("rtb-own 10.1.1.0/24", true),
            ("rtb-own 10.1.3.0/24", false),
            ("rtb-shared 10.1.0.0/24", false),
        ]
    );
    assert_eq!(found[0].reason, "instance i-gone does not exist");
    assert_eq!(found[1].reason, "instance i-dead is terminated");
}

#[test]
fn uninitialized_nodes_say_why() {
    let node = |name: &str| -> Node {
        serde_json::from_value(json!({
            "metadata": { "name": name },
            "spec": { "taints": [{ "key": "node.cloudprovider.kubernetes.io/uninitialized", "effect": "NoSchedule" }] },
        }))
        .unwrap()
    };
    let untagged = Instance::new(InstanceId::new("i-1"), InstanceState::Running);
    let lookups = BTreeMap::from([
        (
            "custom-name".to_owned(),
            NodeLookup {
                by: "Node name (a private DNS name)".into(),
                key: "custom-name".into(),
                found: Vec::new(),
                unparsable: false,
            },
        ),
        (
            "i-1".to_owned(),
            NodeLookup {
                by: "Node name (an instance ID)".into(),
                key: "i-1".into(),
                found: vec![untagged],
                unparsable: false,
            },
        ),
    ]);
    let event: Event = serde_json::from_value(json!({
        "metadata": { "name": "e1", "namespace": "default" },
        "involvedObject": { "kind": "Node", "name": "i-1" },
        "type": "Warning", "reason": "FailedToCreateRoute", "message": "boom", "count": 2,
        "lastTimestamp": "2026-01-01T00:00:00Z",
    }))
    .unwrap();
    let snapshot = Snapshot {
        nodes: vec![node("custom-name"), node("i-1")],
        events: vec![event],
        ..Snapshot::default()
    };
    let found = analyze::findings(&scope(), &Inventory::default(), &snapshot, &lookups);
    assert_eq!(found.len(), 2);
    assert!(
        found[0]
            .reason
            .starts_with("uninitialized: no instance has private DNS name custom-name"),
        "{}",
        found[0].reason
    );
    assert_eq!(
        found[1].reason,
        "uninitialized: instance i-1 lacks the cluster tag kubernetes.io/cluster/c1=owned (or shared)"
    );
    assert_eq!(
        found[1].details[1],
        "last Warning Event FailedToCreateRoute (2x, 2026-01-01T00:00:00Z): boom"
    );
    assert!(found.iter().all(|f| !f.deletable));
    // Narrowed by labels the Nodes lack: nothing to report.
    let selected = scope().with_node_labels(vec![("pool".into(), "a".into())]);
    assert!(analyze::findings(&selected, &Inventory::default(), &snapshot, &lookups).is_empty());
}

#[test]
fn a_service_whose_latest_event_is_a_warning_is_failing() {
    let event = |name: &str, type_: &str, reason: &str, at: &str| -> Event {
        serde_json::from_value(json!({
            "metadata": { "name": format!("{name}-{reason}"), "namespace": "default" },
            "involvedObject": { "kind": "Service", "namespace": "default", "name": name },
            "type": type_, "reason": reason, "message": "m", "lastTimestamp": at,
        }))
        .unwrap()
    };
    let mut healthy = service("default", "ok", "u1", "LoadBalancer", &[]);
    healthy.status =
        serde_json::from_value(json!({ "loadBalancer": { "ingress": [{ "hostname": "h" }] } })).unwrap();
    let snapshot = Snapshot {
        services: vec![service("default", "bad", "u2", "LoadBalancer", &[]), healthy],
        events: vec![
            event("bad", "Normal", "EnsuringLoadBalancer", "2026-01-01T00:00:00Z"),
            event("bad", "Warning", "SyncLoadBalancerFailed", "2026-01-01T00:01:00Z"),
            event("ok", "Warning", "SyncLoadBalancerFailed", "2026-01-01T00:00:00Z"),
            event("ok", "Normal", "EnsuredLoadBalancer", "2026-01-01T00:01:00Z"),
        ],
        ..Snapshot::default()
    };
    let found = analyze::findings(&scope(), &Inventory::default(), &snapshot, &BTreeMap::new());
    assert_eq!(ids(&found), [(Kind::Service, "default/bad")]);
    assert_eq!(found[0].reason, "load balancer failing: SyncLoadBalancerFailed");
    // Narrowed to another namespace: nothing to report.
    let other = scope().with_service_namespace(Some("other".into()));
    assert!(analyze::findings(&other, &Inventory::default(), &snapshot, &BTreeMap::new()).is_empty());
}

/// `--delete` goes in dependency order, skips what the fresh look no longer finds, and reports a group AWS still
/// holds as in use without failing the rest.
#[tokio::test]
async fn delete_goes_in_dependency_order_and_reports_groups_in_use() {
    let mut node_group = group("sg-node", "nodes", tags(&[("kubernetes.io/cluster/c1", "owned")]));
    node_group.ingress = vec![IpPermission::all_from_group(SecurityGroupId::new("sg-leak"))];
    let inventory = Inventory {
        classic: vec![
            (classic(OLD_LB, &["sg-leak"]), owned("default/gone")),
            (
                classic("a1212121288887777666655555555555", &[]),
                owned("default/back"),
            ),
        ],
        target_groups: vec![(
            TargetGroup::new("arn:tg", "k8s-default-gone-1", "TCP", 80),
            owned("default/gone"),
        )],
        groups: vec![
            group("sg-leak", &format!("k8s-elb-{OLD_LB}"), owned("default/gone")),
            node_group,
        ],
        ..Inventory::default()
    };
    let report = Report {
        cluster_id: "c1".into(),
        warnings: Vec::new(),
        findings: analyze::findings(&scope(), &inventory, &Snapshot::default(), &BTreeMap::new()),
    };
    assert_eq!(report.deletable().count(), 4);
    // Meanwhile Service default/back came back (same UID as its load balancer's name).
    let fresh = Snapshot {
        services: vec![service(
            "default",
            "back",
            "12121212-8888-7777-6666-555555555555",
            "LoadBalancer",
            &[],
        )],
        ..Snapshot::default()
    };
    let current = analyze::findings(&scope(), &inventory, &fresh, &BTreeMap::new());

    let mut seq = mockall::Sequence::new();
    let (mut ec2, mut elb, mut elbv2) = (ccm_aws_api::ec2::MockEc2::new(), MockElb::new(), MockElbv2::new());
    elb.expect_delete_load_balancer()
        .withf(|n| n == OLD_LB)
        .times(1)
        .in_sequence(&mut seq)
        .returning(|_| Box::pin(async { Ok(()) }));
    elbv2
        .expect_delete_target_group()
        .withf(|a| a == "arn:tg")
        .times(1)
        .in_sequence(&mut seq)
        .returning(|_| Box::pin(async { Ok(()) }));
    ec2.expect_revoke_ingress()
        .withf(|g, p| {
            g.as_str() == "sg-node" && p == [IpPermission::all_from_group(SecurityGroupId::new("sg-leak"))]
        })
        .times(1)
        .in_sequence(&mut seq)
        .returning(|_, _| Box::pin(async { Ok(()) }));
    ec2.expect_delete_security_group()
        .times(1)
        .in_sequence(&mut seq)
        .returning(|_| {
            Box::pin(async {
                Err(AwsError::new(ErrorKind::Conflict, "ec2", "DeleteSecurityGroup")
                    .with_code("DependencyViolation"))
            })
        });
    let ports = Ports {
        ec2: &ec2,
        elb: &elb,
        elbv2: &elbv2,
    };
    let outcome = remove::run(ports, &report, &current).await;
    let summary: Vec<(Kind, &str, Outcome)> = outcome
        .removals
        .iter()
        .map(|r| (r.kind, r.id.as_str(), r.outcome))
        .collect();
    assert_eq!(
        summary,
        [
            (
                Kind::ClassicLoadBalancer,
                "a1212121288887777666655555555555",
                Outcome::Skipped
            ),
            (Kind::ClassicLoadBalancer, OLD_LB, Outcome::Deleted),
            (Kind::TargetGroup, "arn:tg", Outcome::Deleted),
            (Kind::SecurityGroup, "sg-leak", Outcome::InUse),
        ]
    );
    assert!(!outcome.has_failures());
    assert!(outcome.has_leftovers());
    assert!(
        outcome.removals[3]
            .message
            .as_deref()
            .unwrap()
            .starts_with("still in use, run again later")
    );
}

#[test]
fn nodes_whose_instance_lacks_the_cluster_tag_are_listed() {
    let node = |name: &str, instance: &str| -> Node {
        serde_json::from_value(json!({
            "metadata": { "name": name },
            "spec": { "providerID": format!("aws:///us-east-1a/{instance}") },
        }))
        .unwrap()
    };
    let with = |id: &str, tags: Tags| {
        let mut i = Instance::new(InstanceId::new(id), InstanceState::Running);
        i.tags = tags;
        (i.id.clone(), i)
    };
    let mut inventory = Inventory::default();
    inventory
        .instances
        .extend([with("i-own", tags(&[("kubernetes.io/cluster/c1", "owned")]))]);
    inventory.node_instances.extend([
        with("i-db", tags(&[("Name", "database")])),
        with("i-other", tags(&[("kubernetes.io/cluster/c2", "owned")])),
    ]);
    let snapshot = Snapshot {
        nodes: vec![
            node("own", "i-own"),
            node("forged", "i-db"),
            node("theirs", "i-other"),
            node("gone", "i-gone"),
        ],
        ..Snapshot::default()
    };
    let found = analyze::findings(&scope(), &inventory, &snapshot, &BTreeMap::new());
    assert_eq!(ids(&found), [(Kind::Node, "forged"), (Kind::Node, "theirs")]);
    assert!(
        found[0]
            .reason
            .starts_with("its instance i-db carries neither the tag kubernetes.io/cluster/c1"),
        "{}",
        found[0].reason
    );
    assert!(
        found[1].reason.contains("(it is tagged for cluster c2)"),
        "{}",
        found[1].reason
    );
    assert!(found.iter().all(|f| !f.deletable));
}

/// Classic ELB rules on a node group: upstream's all-traffic rule from a live load balancer's group is reported
/// (not deletable: the next ensure narrows it); a narrow rule of a deleted load balancer is deletable unless a
/// live one of the same source needs its port.
#[test]
fn classic_node_rules_wide_and_stale_are_reported() {
    let rule = |protocol: &str, port: Option<i32>, source: &str, lb: Option<&str>| IpPermission {
        protocol: protocol.into(),
        from_port: port,
        to_port: port,
        source_groups: vec![SourceGroup {
            group_id: SecurityGroupId::new(source),
            description: lb.map(|lb| format!("kubernetes.io/rule/elb={lb}")),
        }],
        ..IpPermission::default()
    };
    let mut node_group = group("sg-node", "nodes", tags(&[("kubernetes.io/cluster/c1", "owned")]));
    node_group.ingress = vec![
        rule("-1", None, "sg-live", None),
        rule("tcp", Some(30080), "sg-shared", Some(OLD_LB)),
        rule("tcp", Some(10256), "sg-shared", Some(OLD_LB)),
    ];
    let mut live = classic(LIVE_LB, &["sg-live"]);
    let mut other = classic("b1111111122223333444455555555555", &["sg-shared"]);
    other.health_check = Some(ccm_aws_api::elb::ClassicHealthCheck {
        target: "HTTP:10256/healthz".into(),
        interval: 10,
        timeout: 5,
        healthy_threshold: 2,
        unhealthy_threshold: 6,
    });
    live.health_check.clone_from(&other.health_check);
    let inventory = Inventory {
        classic: vec![(live, owned("default/web")), (other, owned("default/other"))],
        groups: vec![node_group],
        ..Inventory::default()
    };
    let snapshot = Snapshot {
        services: vec![
            service("default", "web", UID, "LoadBalancer", &[]),
            service(
                "default",
                "other",
                "b1111111-2222-3333-4444-555555555555",
                "LoadBalancer",
                &[],
            ),
        ],
        ..Snapshot::default()
    };
    let found = analyze::findings(&scope(), &inventory, &snapshot, &BTreeMap::new());
    let rules: Vec<(&str, bool, &[String])> = found
        .iter()
        .filter(|f| f.kind == Kind::NodeGroupRules)
        .map(|f| (f.id.as_str(), f.deletable, f.details.as_slice()))
        .collect();
    assert_eq!(
        rules,
        [
            (
                format!("sg-node {LIVE_LB}").as_str(),
                false,
                ["rule: all traffic from sg-live".to_owned()].as_slice()
            ),
            (
                format!("sg-node {OLD_LB}").as_str(),
                true,
                ["rule: tcp 30080 from sg-shared".to_owned()].as_slice()
            ),
        ],
        "{found:#?}"
    );
}
