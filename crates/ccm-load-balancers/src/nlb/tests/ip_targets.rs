//! IP targets (`aws-load-balancer-nlb-target-type: ip`): the pods' addresses on their target ports, only from
//! the endpoint-slice controller's slices, left alone when the endpoints are not known.

use std::net::IpAddr;

use ccm_cloud_provider::{Endpoint, EndpointPort, ServiceEndpoints};

use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::*;
use crate::flavour;

const IP: (Key, &str) = (Key::NlbTargetType, "ip");

/// A pod `10.0.1.<last>` serving the Service port `p80` on `port`.
fn pod(last: u8, port: u16) -> Endpoint {
    let ports = vec![EndpointPort::new("p80", port, "TCP")];
    Endpoint::ready(IpAddr::from([10, 0, 1, last]), Some("node-i-1"), ports)
}

/// An NLB Service with IP targets and a selector (as the endpoint-slice controller needs).
fn ip_service() -> Service {
    let mut svc = nlb_service(&[IP], &[(80, 30080)]);
    svc.spec.as_mut().unwrap().selector = Some([("app".to_owned(), "web".to_owned())].into());
    svc
}

fn spec_of(service: &Service, endpoints: Option<&ServiceEndpoints>) -> crate::ServiceSpec {
    parse_service(service).unwrap().with_endpoints(endpoints)
}

fn build_of(service: &Service, endpoints: Option<&ServiceEndpoints>, config: &LoadBalancerConfig) -> Desired {
    let n1 = node("i-1");
    let spec = spec_of(service, endpoints);
    build(&spec, &[&n1], config, "kubernetes", &[SubnetId::new("subnet-a")]).unwrap()
}

fn ip_desired(endpoints: &[Endpoint]) -> Desired {
    let mut c = config();
    c.manage_node_security_groups = false;
    let endpoints = ServiceEndpoints::new(endpoints.iter().cloned());
    build_of(&ip_service(), Some(&endpoints), &c)
}

fn targets(d: &Desired) -> Vec<(String, i32)> {
    let tg = &d.listeners[0].target_group;
    tg.ip_targets.iter().flatten().cloned().collect()
}

fn pair(last: u8, port: i32) -> (String, i32) {
    (format!("10.0.1.{last}"), port)
}

#[test]
fn ip_groups_target_the_ready_pods_of_the_slice_controller_on_their_ports() {
    let d = ip_desired(&[
        pod(1, 8080),
        pod(2, 8080).with_conditions(false, false, false),
        pod(3, 8080).with_conditions(false, true, true),
        pod(4, 8080).managed(false),
        pod(5, 8080),
    ]);
    let tg = &d.listeners[0].target_group;
    assert_eq!(tg.target_type, TargetType::Ip);
    assert_eq!(
        tg.port, 80,
        "the target port (the Service's port when none is given)"
    );
    assert_eq!(targets(&d), [pair(1, 8080), pair(5, 8080)]);
    // Without a selector no controller writes the slices: none is trusted, and a Warning says why.
    let mut selectorless = ip_service();
    selectorless.spec.as_mut().unwrap().selector = None;
    let spec = spec_of(&selectorless, Some(&ServiceEndpoints::new([pod(1, 8080)])));
    assert_eq!(spec.pod_endpoints, Some(Vec::new()));
    assert_eq!(spec.warnings[0].field, "spec.selector");
    // Another group than the instance one: a change of target type is a new group.
    let instance = desired(&[], &[(80, 30080)]);
    assert_ne!(tg.name, instance.listeners[0].target_group.name);
    // The pods are checked themselves, under Local too: not the health check node port.
    assert_eq!(d.health_check.protocol, "TCP");
    assert_eq!(d.health_check.port, "traffic-port");
    let mut local = ip_service();
    let spec = local.spec.as_mut().unwrap();
    spec.external_traffic_policy = Some("Local".into());
    spec.health_check_node_port = Some(32000);
    let local = build_of(&local, Some(&ServiceEndpoints::default()), &config());
    assert_eq!(local.health_check.port, "traffic-port");
}

#[test]
fn a_new_ip_group_registers_every_pod_and_a_rollout_only_what_changed() {
    let d = ip_desired(&[pod(1, 8080), pod(2, 8080)]);
    let fresh = plan(&d, &Observed::default());
    let registered: Vec<&Change> = fresh
        .iter()
        .filter(|c| {
            matches!(
                c,
                Change::RegisterIpTargets { .. } | Change::RegisterTargets { .. }
            )
        })
        .collect();
    let [Change::RegisterIpTargets { targets, .. }] = registered[..] else {
        panic!("{fresh:?}")
    };
    assert_eq!(targets, &[pair(1, 8080), pair(2, 8080)]);
    let Some(Change::CreateTargetGroup { target_group, .. }) = fresh
        .iter()
        .find(|c| matches!(c, Change::CreateTargetGroup { .. }))
    else {
        panic!()
    };
    assert_eq!(target_group.target_type, TargetType::Ip);
    assert_eq!(plan(&d, &converged(&d)), []);
    // Pod 1 replaced by pod 3, pod 2 terminating: one deregistration, one registration.
    let after = ip_desired(&[pod(2, 8080).with_conditions(false, true, true), pod(3, 8080)]);
    let tg = after.listeners[0].target_group.name.clone();
    assert_eq!(
        plan(&after, &converged(&d)),
        [
            Change::DeregisterTargets {
                name: tg.clone(),
                targets: vec![pair(1, 8080), pair(2, 8080)]
            },
            Change::RegisterIpTargets {
                name: tg,
                targets: vec![pair(3, 8080)]
            },
        ]
    );
}

#[test]
fn ip_targets_are_left_alone_when_the_endpoints_are_not_known() {
    let known = ip_desired(&[pod(1, 8080)]);
    let mut c = config();
    c.manage_node_security_groups = false;
    let unknown = build_of(&ip_service(), None, &c);
    assert_eq!(unknown.listeners[0].target_group.ip_targets, None);
    assert_eq!(
        unknown.listeners[0].target_group.name,
        known.listeners[0].target_group.name
    );
    // Drift repair and callers without endpoints: the registered pods stay.
    assert_eq!(plan(&unknown, &converged(&known)), []);
    // Known and empty: every pod goes.
    let none = ip_desired(&[]);
    assert_eq!(kinds(&plan(&none, &converged(&known))), ["deregister_targets"]);
}

#[test]
fn a_switch_between_instance_and_ip_targets_swaps_the_group_under_the_same_nlb() {
    let instance = desired(&[], &[(80, 30080)]);
    let ip = ip_desired(&[pod(1, 8080)]);
    let changes = plan(&ip, &converged(&instance));
    let kinds = kinds(&changes);
    assert_eq!(
        kinds,
        [
            "create_target_group",
            "register_ip_targets",
            "modify_listener",
            "delete_target_group"
        ],
        "{changes:?}"
    );
    assert!(flavour::recreation_reason(&changes).is_none());
    let back = plan(&instance, &converged(&ip));
    assert_eq!(
        super::kinds(&back)[..2],
        ["create_target_group", "register_targets"]
    );
}

#[test]
fn named_target_ports_resolve_per_pod_and_the_nodes_open_the_pods_ports() {
    let mut svc = ip_service();
    let port = &mut svc.spec.as_mut().unwrap().ports.as_mut().unwrap()[0];
    port.target_port = Some(IntOrString::String("web".into()));
    let endpoints = ServiceEndpoints::new([pod(1, 8080), pod(2, 9090)]);
    let d = build_of(&svc, Some(&endpoints), &config());
    assert_eq!(targets(&d), [pair(1, 8080), pair(2, 9090)]);
    let access = d.node_access.as_ref().unwrap();
    // From the NLB's subnets only (its own addresses: no client IP preservation), the pods' ports.
    assert!(access.client_ports.is_empty(), "{access:?}");
    assert_eq!(
        access.health_ports,
        BTreeSet::from([8080, 9090]),
        "the pods' ports, not the node port"
    );
    // With client IP preservation the clients' ranges reach the pods too.
    let mut preserving = svc.clone();
    let annotations = preserving.metadata.annotations.as_mut().unwrap();
    annotations.insert(
        Key::TargetGroupAttributes.name().into(),
        "preserve_client_ip.enabled=true".into(),
    );
    let access = build_of(&preserving, Some(&endpoints), &config())
        .node_access
        .unwrap();
    let tcp: Vec<i32> = access.client_ports.iter().map(|(_, p)| *p).collect();
    assert_eq!(tcp, [8080, 9090]);
    // Without endpoints a named port's numbers are not known: the nodes' rules are left as they are.
    assert!(build_of(&svc, None, &config()).node_access.is_none());
    // A numeric target port is opened with no pod ready too (as drift repair, knowing no endpoints, opens it).
    let mut numeric = ip_service();
    numeric.spec.as_mut().unwrap().ports.as_mut().unwrap()[0].target_port = Some(IntOrString::Int(8443));
    for endpoints in [None, Some(&ServiceEndpoints::default())] {
        let access = build_of(&numeric, endpoints, &config()).node_access.unwrap();
        assert_eq!(access.health_ports, BTreeSet::from([8443]));
    }
}

#[test]
fn ip_targets_are_refused_where_they_cannot_be_served() {
    let classic = service(&[IP], &[(80, 30080)]);
    let error = parse_service(&classic).unwrap_err();
    assert_eq!(error.problems[0].field, Key::NlbTargetType.name());
    assert!(error.problems[0].accepted.contains("Classic ELB"), "{error}");
    let mut both = nlb_service(&[IP, (Key::TargetNodesWithEndpoints, "true")], &[(80, 30080)]);
    both.spec.as_mut().unwrap().external_traffic_policy = Some("Local".into());
    let error = parse_service(&both).unwrap_err();
    assert_eq!(error.problems[0].field, Key::TargetNodesWithEndpoints.name());
    // Node labels choose no pod: served, with a Warning naming the key.
    let labelled = nlb_service(&[IP, (Key::TargetNodeLabels, "pool=web")], &[(80, 30080)]);
    let spec = parse_service(&labelled).unwrap();
    assert!(spec.ip_targets);
    assert_eq!(spec.warnings[0].field, Key::TargetNodeLabels.name());
    // `instance` is what an NLB has anyway, on either flavour.
    let instance = parse_service(&service(&[(Key::NlbTargetType, "instance")], &[(80, 30080)])).unwrap();
    assert!(!instance.ip_targets && instance.warnings.is_empty());
}

#[test]
fn ip_targets_need_no_node_port() {
    let mut svc = ip_service();
    svc.spec.as_mut().unwrap().ports.as_mut().unwrap()[0].node_port = None;
    let d = build_of(&svc, Some(&ServiceEndpoints::new([pod(1, 80)])), &config());
    let tg = &d.listeners[0].target_group;
    assert_eq!((tg.target_type, tg.port), (TargetType::Ip, 80));
    assert_eq!(targets(&d), [pair(1, 80)]);
    let access = d.node_access.unwrap();
    assert_eq!(
        access.health_ports,
        BTreeSet::from([80]),
        "no rule for a node port of 0"
    );
    assert!(access.client_ports.is_empty());
    // Instance targets do need one: the Service is refused until it has one.
    let mut instance = nlb_service(&[], &[(80, 30080)]);
    instance.spec.as_mut().unwrap().ports.as_mut().unwrap()[0].node_port = None;
    let error = parse_service(&instance).unwrap_err();
    assert_eq!(error.problems[0].field, "spec.ports[].nodePort");
}
