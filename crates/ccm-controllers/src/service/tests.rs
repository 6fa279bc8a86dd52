use std::time::Duration;

use k8s_openapi::{
    api::core::v1::{LoadBalancerIngress, NodeSpec, ServicePort, ServiceSpec, SessionAffinityConfig, Taint},
    apimachinery::pkg::{apis::meta::v1::Time, util::intstr::IntOrString},
    jiff::Timestamp,
};

use super::*;
use crate::keys::{LABEL_EXCLUDE_FROM_LB, TAINT_TO_BE_DELETED};

fn lb_service() -> Service {
    let mut s = Service::default();
    s.metadata.namespace = Some("ns".into());
    s.metadata.name = Some("svc".into());
    s.metadata.uid = Some("uid-1".into());
    s.spec = Some(ServiceSpec {
        type_: Some("LoadBalancer".into()),
        ports: Some(vec![ServicePort {
            port: 80,
            node_port: Some(30080),
            ..Default::default()
        }]),
        ..Default::default()
    });
    s
}

fn with(f: impl FnOnce(&mut Service)) -> Service {
    let mut s = lb_service();
    f(&mut s);
    s
}

fn spec(s: &mut Service) -> &mut ServiceSpec {
    s.spec.as_mut().unwrap()
}

#[test]
fn load_balancer_class_means_not_ours() {
    // spec.loadBalancerClass (1.21+) is pruned by the 1.20 test apiserver, so this is covered here.
    assert!(wants_load_balancer(&lb_service()));
    let classed = with(|s| spec(s).load_balancer_class = Some("example.com/other".into()));
    assert!(!wants_load_balancer(&classed));
    assert!(!needs_cleanup(&classed), "without our finalizer: never touched");
    let classed_with_finalizer = with(|s| {
        spec(s).load_balancer_class = Some("x".into());
        s.metadata.finalizers = Some(vec![FINALIZER_LB_CLEANUP.into()]);
    });
    assert!(!wants_load_balancer(&classed_with_finalizer));
    assert!(
        !needs_cleanup(&classed_with_finalizer),
        "still type LoadBalancer, not deleting"
    );
    assert!(!wants_load_balancer(&with(
        |s| spec(s).type_ = Some("ClusterIP".into())
    )));
}

#[test]
fn needs_cleanup_table() {
    let finalized = |f: &mut Service| f.metadata.finalizers = Some(vec![FINALIZER_LB_CLEANUP.into()]);
    let deleting = |f: &mut Service| f.metadata.deletion_timestamp = Some(Time(Timestamp::UNIX_EPOCH));
    let cluster_ip = |f: &mut Service| spec(f).type_ = Some("ClusterIP".into());
    assert!(!needs_cleanup(&lb_service()));
    assert!(!needs_cleanup(&with(finalized)));
    assert!(needs_cleanup(&with(|s| {
        finalized(s);
        deleting(s);
    })));
    assert!(needs_cleanup(&with(|s| {
        finalized(s);
        cluster_ip(s);
    })));
    assert!(!needs_cleanup(&with(deleting)), "no finalizer: not ours to clean");
}

#[test]
fn needs_update_table() {
    let base = lb_service();
    let cases: Vec<(&str, Service, Service, bool)> = vec![
        ("unchanged", base.clone(), base.clone(), false),
        (
            "both not LB",
            with(|s| spec(s).type_ = Some("ClusterIP".into())),
            with(|s| spec(s).type_ = Some("NodePort".into())),
            false,
        ),
        (
            "type to LB",
            with(|s| spec(s).type_ = Some("ClusterIP".into())),
            base.clone(),
            true,
        ),
        (
            "type from LB",
            base.clone(),
            with(|s| spec(s).type_ = Some("NodePort".into())),
            true,
        ),
        (
            "source ranges",
            base.clone(),
            with(|s| spec(s).load_balancer_source_ranges = Some(vec!["10.0.0.0/8".into()])),
            true,
        ),
        (
            "port added",
            base.clone(),
            with(|s| {
                spec(s).ports.as_mut().unwrap().push(ServicePort {
                    port: 443,
                    ..Default::default()
                })
            }),
            true,
        ),
        (
            "node port",
            base.clone(),
            with(|s| spec(s).ports.as_mut().unwrap()[0].node_port = Some(30081)),
            true,
        ),
        (
            "target port",
            base.clone(),
            with(|s| spec(s).ports.as_mut().unwrap()[0].target_port = Some(IntOrString::Int(8080))),
            true,
        ),
        (
            "app protocol",
            base.clone(),
            with(|s| spec(s).ports.as_mut().unwrap()[0].app_protocol = Some("http".into())),
            true,
        ),
        (
            "session affinity",
            base.clone(),
            with(|s| spec(s).session_affinity = Some("ClientIP".into())),
            true,
        ),
        (
            "session affinity config",
            base.clone(),
            with(|s| spec(s).session_affinity_config = Some(SessionAffinityConfig::default())),
            true,
        ),
        (
            "load balancer IP",
            base.clone(),
            with(|s| spec(s).load_balancer_ip = Some("1.2.3.4".into())),
            true,
        ),
        (
            "external IPs",
            base.clone(),
            with(|s| spec(s).external_ips = Some(vec!["1.1.1.1".into()])),
            true,
        ),
        (
            "annotations",
            base.clone(),
            with(|s| s.metadata.annotations = Some([("a".to_owned(), "b".to_owned())].into())),
            true,
        ),
        (
            "UID",
            base.clone(),
            with(|s| s.metadata.uid = Some("uid-2".into())),
            true,
        ),
        (
            "traffic policy",
            base.clone(),
            with(|s| spec(s).external_traffic_policy = Some("Local".into())),
            true,
        ),
        (
            "health check node port",
            base.clone(),
            with(|s| spec(s).health_check_node_port = Some(31000)),
            true,
        ),
        (
            "ip families count",
            base.clone(),
            with(|s| spec(s).ip_families = Some(vec!["IPv4".into(), "IPv6".into()])),
            true,
        ),
        (
            "labels only",
            base.clone(),
            with(|s| s.metadata.labels = Some([("a".to_owned(), "b".to_owned())].into())),
            false,
        ),
        (
            "finalizers only",
            base.clone(),
            with(|s| s.metadata.finalizers = Some(vec!["x".into()])),
            false,
        ),
        (
            "selector only",
            base.clone(),
            with(|s| spec(s).selector = Some([("app".to_owned(), "x".to_owned())].into())),
            false,
        ),
        (
            "ip family policy",
            base,
            with(|s| spec(s).ip_family_policy = Some("PreferDualStack".into())),
            false,
        ),
    ];
    for (name, old, new, want) in cases {
        assert_eq!(needs_update(&old, &new), want, "{name}");
    }
}

fn node(f: impl FnOnce(&mut Node)) -> Node {
    let mut n = Node::default();
    n.metadata.name = Some("n".into());
    n.spec = Some(NodeSpec {
        provider_id: Some("fake://1".into()),
        ..Default::default()
    });
    f(&mut n);
    n
}

fn label(n: &mut Node, v: &str) {
    n.metadata.labels = Some([(LABEL_EXCLUDE_FROM_LB.to_owned(), v.to_owned())].into());
}

#[test]
fn node_predicates_table() {
    let cases: Vec<(&str, Node, bool)> = vec![
        ("plain", node(|_| {}), true),
        ("exclusion true", node(|n| label(n, "true")), false),
        ("exclusion T", node(|n| label(n, "T")), false),
        ("exclusion false", node(|n| label(n, "false")), true),
        ("exclusion 0", node(|n| label(n, "0")), true),
        ("exclusion empty", node(|n| label(n, "")), false),
        ("exclusion garbage", node(|n| label(n, "yes")), false),
        (
            "deleting",
            node(|n| n.metadata.deletion_timestamp = Some(Time(Timestamp::UNIX_EPOCH))),
            false,
        ),
        (
            "autoscaler taint",
            node(|n| {
                n.spec.as_mut().unwrap().taints = Some(vec![Taint {
                    key: TAINT_TO_BE_DELETED.into(),
                    effect: "NoSchedule".into(),
                    ..Default::default()
                }])
            }),
            false,
        ),
        ("no provider ID", node(|n| n.spec = None), true),
        (
            "not ready",
            node(|n| {
                n.status = Some(k8s_openapi::api::core::v1::NodeStatus {
                    conditions: Some(vec![k8s_openapi::api::core::v1::NodeCondition {
                        type_: "Ready".into(),
                        status: "False".into(),
                        ..Default::default()
                    }]),
                    ..Default::default()
                })
            }),
            true,
        ),
        (
            "unschedulable",
            node(|n| n.spec.as_mut().unwrap().unschedulable = Some(true)),
            true,
        ),
    ];
    for (name, n, want) in cases {
        assert_eq!(in_stable_node_set(&n), want, "{name}");
    }
}

#[test]
fn only_membership_and_provider_id_changes_sync_nodes() {
    let base = NodeSummary::of(&node(|_| {}));
    let changes: Vec<(&str, Node, bool)> = vec![
        ("spurious", node(|_| {}), false),
        (
            "readiness",
            node(|n| n.metadata.labels = Some([("other".to_owned(), "x".to_owned())].into())),
            false,
        ),
        ("exclusion", node(|n| label(n, "true")), true),
        (
            "provider ID",
            node(|n| n.spec.as_mut().unwrap().provider_id = Some("fake://2".into())),
            true,
        ),
        (
            "deleting",
            node(|n| n.metadata.deletion_timestamp = Some(Time(Timestamp::UNIX_EPOCH))),
            true,
        ),
    ];
    for (name, new, want) in changes {
        assert_eq!(
            should_sync_updated_node(&base, &NodeSummary::of(&new)),
            want,
            "{name}"
        );
    }
}

#[test]
fn host_sets_compare_names_and_provider_ids() {
    let a = node(|_| {});
    let b = node(|n| n.spec.as_mut().unwrap().provider_id = Some("fake://2".into()));
    assert_ne!(
        host_set(&[&a]),
        host_set(&[&b]),
        "TestNodesNotEqual: providerID differs"
    );
    assert_eq!(host_set(&[&a]), host_set(&[&node(|_| {})]));
}

#[test]
fn ingress_comparison_treats_absent_as_empty() {
    let ip = |ip: &str| {
        vec![LoadBalancerIngress {
            ip: Some(ip.into()),
            ..Default::default()
        }]
    };
    assert!(ingress_equal(None, Some(&vec![])));
    assert!(ingress_equal(Some(&ip("1.1.1.1")), Some(&ip("1.1.1.1"))));
    assert!(!ingress_equal(None, Some(&ip("1.1.1.1"))));
    // ipMode (1.29+, pruned by the 1.20 test apiserver) is part of the comparison.
    let mut vip = ip("1.1.1.1");
    vip[0].ip_mode = Some("VIP".into());
    assert!(!ingress_equal(Some(&ip("1.1.1.1")), Some(&vip)));
}

#[test]
fn patches_touch_only_our_finalizer_and_the_status() {
    assert_eq!(
        finalizer_patch(true),
        json!({ "metadata": { "finalizers": [FINALIZER_LB_CLEANUP] } })
    );
    assert_eq!(
        finalizer_patch(false),
        json!({ "metadata": { "$deleteFromPrimitiveList/finalizers": [FINALIZER_LB_CLEANUP] } })
    );
    assert_eq!(
        status_patch(&LoadBalancerStatus::default()),
        json!({ "status": { "loadBalancer": { "ingress": null } } })
    );
    let status = LoadBalancerStatus {
        ingress: Some(vec![LoadBalancerIngress {
            ip: Some("1.2.3.4".into()),
            ip_mode: Some("VIP".into()),
            ..Default::default()
        }]),
    };
    assert_eq!(
        status_patch(&status),
        json!({ "status": { "loadBalancer": { "ingress": [{ "ip": "1.2.3.4", "ipMode": "VIP" }] } } })
    );
}

#[test]
fn retry_after_is_honoured_exactly_and_not_counted() {
    // TestServiceQueueDelay: a RetryError requeues after exactly its delay; a plain error backs off.
    let backoff = Backoff::new(Duration::from_secs(5), Duration::from_secs(300));
    let retry = Error::cloud(
        "failed to ensure load balancer",
        "ns/svc",
        CloudError::retry_after("creating", Duration::from_secs(42)),
    );
    assert_eq!(retry_delay(&retry, &backoff, "ns/svc"), Duration::from_secs(42));
    assert_eq!(backoff.failures("ns/svc"), 0);
    let plain = Error::cloud(
        "failed to ensure load balancer",
        "ns/svc",
        CloudError::other("boom"),
    );
    assert_eq!(retry_delay(&plain, &backoff, "ns/svc"), Duration::from_secs(5));
    assert_eq!(retry_delay(&plain, &backoff, "ns/svc"), Duration::from_secs(10));
    assert_eq!(backoff.failures("ns/svc"), 2);
}
