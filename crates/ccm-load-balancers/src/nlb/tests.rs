//! Unit tests of the NLB model, plan and apply.

use super::*;
use crate::{
    annotations::Key,
    classic::tests::{config, node, service},
    parse_service,
};
use ccm_aws_api::{
    AwsError, ErrorKind,
    ec2::MockEc2,
    elbv2::{LoadBalancerZone, MockElbv2},
};
use k8s_openapi::api::core::v1::Service;

const NAME: &str = "a0f1e2d3c4b5a69788796a5b4c3d2e1f";

fn nlb_service(annotations: &[(Key, &str)], ports: &[(i32, i32)]) -> Service {
    let mut all = annotations.to_vec();
    all.push((Key::Type, "nlb"));
    service(&all, ports)
}

fn build_with(
    annotations: &[(Key, &str)],
    ports: &[(i32, i32)],
    config: &LoadBalancerConfig,
) -> Result<Desired, Error> {
    let spec = parse_service(&nlb_service(annotations, ports)).unwrap();
    let n1 = node("i-1");
    let n2 = node("i-2");
    build(
        &spec,
        &[&n1, &n2],
        config,
        "kubernetes",
        &[SubnetId::new("subnet-b"), SubnetId::new("subnet-a")],
    )
}

pub(crate) fn desired(annotations: &[(Key, &str)], ports: &[(i32, i32)]) -> Desired {
    let mut c = config();
    c.manage_node_security_groups = false;
    build_with(annotations, ports, &c).unwrap()
}

/// A Service with the `subnets` annotation resolved to `subnets` (sorted, as `build` sorts them).
fn pinned(subnets: &[&str], more: &[(Key, &str)]) -> Desired {
    let annotations: Vec<(Key, &str)> = [(Key::Subnets, "pinned")]
        .into_iter()
        .chain(more.iter().copied())
        .collect();
    let mut d = desired(&annotations, &[(80, 30080)]);
    d.subnets = subnets.iter().map(|s| (*s).to_owned()).collect();
    d.subnets.sort();
    d
}

fn managed_config() -> LoadBalancerConfig {
    let mut c = config().with_nlb_managed_security_groups(true);
    c.manage_node_security_groups = false;
    c
}

/// The AWS state that `desired` leads to.
pub(crate) fn converged(desired: &Desired) -> Observed {
    let mut lb = LoadBalancerV2::new("arn:lb", &desired.name, "nlb.elb.us-east-1.amazonaws.com");
    lb.internal = desired.internal;
    lb.ip_address_type = desired.ip_address_type.as_str().to_owned();
    lb.availability_zones = desired
        .subnets
        .iter()
        .map(|s| LoadBalancerZone {
            zone_name: "us-east-1a".into(),
            subnet_id: Some(SubnetId::new(s.clone())),
            addresses: Vec::new(),
        })
        .collect();
    let mut tags = BTreeMap::from([("arn:lb".to_owned(), desired.tags.clone())]);
    let mut managed_group = None;
    match &desired.security {
        Security::Unmanaged => {}
        Security::Managed(m) => {
            let mut g = SecurityGroup::new(SecurityGroupId::new("sg-managed"), &m.name, None, m.tags.clone());
            g.ingress = m.ingress.iter().map(Rule::to_permission).collect();
            lb.security_groups = vec![g.id.clone()];
            managed_group = Some(g);
        }
        Security::Given(ids) => {
            lb.security_groups = ids.iter().map(|i| SecurityGroupId::new(i.clone())).collect();
        }
    }
    let mut listeners = Vec::new();
    let mut target_groups = Vec::new();
    for l in &desired.listeners {
        let tg_arn = format!("arn:tg/{}", l.target_group.name);
        let mut listener = ListenerV2::new(
            &format!("arn:listener/{}", l.port),
            "arn:lb",
            l.port,
            &l.protocol,
            &tg_arn,
        );
        listener.certificates = l.certificate.iter().cloned().collect();
        listener.ssl_policy = l.ssl_policy.clone();
        tags.insert(listener.arn.clone(), desired.tags.clone());
        listeners.push(listener);
        let mut tg = TargetGroup::new(
            &tg_arn,
            &l.target_group.name,
            &l.target_group.protocol,
            l.target_group.port,
        );
        tg.health_check = desired.health_check.to_aws();
        tg.load_balancer_arns = vec!["arn:lb".into()];
        tags.insert(tg_arn.clone(), desired.tags.clone());
        target_groups.push(ObservedTargetGroup {
            group: tg,
            attributes: desired.target_group_attributes.clone(),
            targets: desired
                .instances
                .iter()
                .map(|i| TargetHealth {
                    target: Target {
                        id: InstanceId::new(i.clone()),
                        port: l.target_group.port,
                    },
                    state: "healthy".into(),
                    reason: None,
                })
                .collect(),
        });
    }
    Observed {
        load_balancer: Some(lb),
        attributes: desired.attributes.clone(),
        listeners,
        target_groups,
        tags,
        managed_group,
        references: Vec::new(),
        node_rules: None,
    }
}

fn kinds(changes: &[Change]) -> Vec<String> {
    changes
        .iter()
        .map(|c| {
            serde_json::to_value(c).unwrap()["change"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect()
}

#[test]
fn desired_model_of_a_default_service() {
    let d = desired(&[], &[(80, 30080)]);
    assert_eq!(d.name, NAME);
    assert_eq!(d.subnets, ["subnet-a", "subnet-b"], "sorted");
    assert_eq!(d.security, Security::Unmanaged);
    assert_eq!(d.listeners.len(), 1);
    let l = &d.listeners[0];
    assert_eq!(
        (l.port, l.protocol.as_str(), l.certificate.as_ref()),
        (80, "TCP", None)
    );
    assert_eq!(
        (l.target_group.protocol.as_str(), l.target_group.port),
        ("TCP", 30080)
    );
    assert!(l.target_group.name.starts_with("k8s-prod-web-"));
    assert_eq!(l.target_group.name.len(), "k8s-prod-web-".len() + 10);
    assert_eq!(
        d.health_check,
        HealthCheck {
            protocol: "TCP".into(),
            port: "traffic-port".into(),
            path: None,
            interval: 30,
            timeout: 10,
            healthy_threshold: 3,
            unhealthy_threshold: 3,
        }
    );
    assert_eq!(d.instances, ["i-1", "i-2"]);
    assert_eq!(
        d.tags.get("kubernetes.io/service-name").map(String::as_str),
        Some("prod/web")
    );
    assert_eq!(
        d.tags.get("kubernetes.io/cluster/c1").map(String::as_str),
        Some("owned")
    );
    assert_eq!(
        d.attributes,
        BTreeMap::from([
            (ACCESS_LOGS_ATTRIBUTE.to_owned(), "false".to_owned()),
            (CROSS_ZONE_ATTRIBUTE.to_owned(), "false".to_owned()),
        ])
    );
    // Names are deterministic: the same Service gives the same target group name.
    assert_eq!(
        desired(&[], &[(80, 30080)]).listeners[0].target_group.name,
        l.target_group.name
    );
    // ... and another node port gives another one.
    assert_ne!(
        desired(&[], &[(80, 30081)]).listeners[0].target_group.name,
        l.target_group.name
    );
}

#[test]
fn tcp_and_udp_on_one_port_become_tcp_udp_and_differing_node_ports_are_refused() {
    let mut svc = nlb_service(&[], &[(53, 30053), (53, 30053), (80, 30080)]);
    let ports = svc.spec.as_mut().unwrap().ports.as_mut().unwrap();
    ports[1].protocol = Some("UDP".into());
    ports[1].name = Some("dns-udp".into());
    let spec = parse_service(&svc).unwrap();
    let c = config();
    let d = build(&spec, &[], &c, "k", &[SubnetId::new("subnet-a")]).unwrap();
    assert_eq!(
        d.listeners
            .iter()
            .map(|l| (l.port, l.protocol.as_str(), l.target_group.protocol.as_str()))
            .collect::<Vec<_>>(),
        [(53, "TCP_UDP", "TCP_UDP"), (80, "TCP", "TCP")]
    );
    let access = d.node_access.unwrap();
    assert_eq!(
        access.client_ports,
        BTreeSet::from([
            ("tcp".to_owned(), 30053),
            ("udp".to_owned(), 30053),
            ("tcp".to_owned(), 30080)
        ])
    );
    assert_eq!(access.health_ports, BTreeSet::from([30053, 30080]));

    let ports = svc.spec.as_mut().unwrap().ports.as_mut().unwrap();
    ports[1].node_port = Some(30054);
    let e = parse_service(&svc).unwrap_err();
    assert!(e.to_string().contains("the same nodePort for TCP and UDP"), "{e}");
    // Classic ELBs still take one protocol only.
    let mut classic = service(&[], &[(53, 30053), (54, 30054)]);
    classic.spec.as_mut().unwrap().ports.as_mut().unwrap()[1].protocol = Some("UDP".into());
    assert!(parse_service(&classic).is_err());
}

#[test]
fn tls_listeners_follow_certificate_ports_policy_and_backend_protocol() {
    let d = desired(
        &[
            (Key::SslCert, "arn:aws:acm:us-east-1:1:certificate/x"),
            (Key::SslPorts, "443"),
            (Key::SslNegotiationPolicy, "ELBSecurityPolicy-TLS13-1-2-2021-06"),
        ],
        &[(80, 30080), (443, 30443)],
    );
    let l = &d.listeners;
    assert_eq!((l[0].protocol.as_str(), l[0].certificate.as_ref()), ("TCP", None));
    assert_eq!(l[1].protocol, "TLS");
    assert_eq!(
        l[1].certificate.as_deref(),
        Some("arn:aws:acm:us-east-1:1:certificate/x")
    );
    assert_eq!(
        l[1].ssl_policy.as_deref(),
        Some("ELBSecurityPolicy-TLS13-1-2-2021-06")
    );
    assert_eq!(l[1].target_group.protocol, "TCP");
    let d = desired(
        &[(Key::SslCert, "arn:cert"), (Key::BackendProtocol, "ssl")],
        &[(443, 30443)],
    );
    assert_eq!(d.listeners[0].target_group.protocol, "TLS");
    assert_eq!(d.listeners[0].ssl_policy, None, "AWS's default policy, untouched");
}

#[test]
fn health_checks_follow_traffic_policy_probe_mode_and_annotations() {
    let mut svc = nlb_service(&[], &[(80, 30080)]);
    let spec_mut = svc.spec.as_mut().unwrap();
    spec_mut.external_traffic_policy = Some("Local".into());
    spec_mut.health_check_node_port = Some(32000);
    let spec = parse_service(&svc).unwrap();
    let hc = health_check(&spec, &config());
    assert_eq!(
        (hc.protocol.as_str(), hc.port.as_str(), hc.path.as_deref()),
        ("HTTP", "32000", Some("/healthz"))
    );
    assert_eq!(
        (
            hc.interval,
            hc.timeout,
            hc.healthy_threshold,
            hc.unhealthy_threshold
        ),
        (10, 10, 2, 2)
    );

    // Shared probe mode sets the default; the annotations still win (upstream lets the mode override them).
    let shared = config().with_health_probe(HealthProbeMode::Shared {
        port: 10256,
        path: "/healthz".into(),
    });
    let spec = parse_service(&nlb_service(&[], &[(80, 30080)])).unwrap();
    let hc = health_check(&spec, &shared);
    assert_eq!((hc.protocol.as_str(), hc.port.as_str()), ("HTTP", "10256"));
    let spec = parse_service(&nlb_service(
        &[
            (Key::HealthcheckProtocol, "tcp"),
            (Key::HealthcheckPort, "traffic-port"),
            (Key::HealthcheckTimeout, "6"),
            (Key::HealthcheckInterval, "10"),
            (Key::HealthcheckHealthyThreshold, "4"),
            (Key::HealthcheckUnhealthyThreshold, "5"),
        ],
        &[(80, 30080)],
    ))
    .unwrap();
    let hc = health_check(&spec, &shared);
    assert_eq!(
        hc,
        HealthCheck {
            protocol: "TCP".into(),
            port: "traffic-port".into(),
            path: None,
            interval: 10,
            timeout: 6,
            healthy_threshold: 4,
            unhealthy_threshold: 5,
        }
    );
    let spec = parse_service(&nlb_service(
        &[
            (Key::HealthcheckProtocol, "HTTPS"),
            (Key::HealthcheckPath, "/ready"),
            (Key::HealthcheckPort, "8443"),
        ],
        &[(80, 30080)],
    ))
    .unwrap();
    let hc = health_check(&spec, &config());
    assert_eq!(
        (hc.protocol.as_str(), hc.port.as_str(), hc.path.as_deref()),
        ("HTTPS", "8443", Some("/ready"))
    );
    // A numeric health check port is the only health port of the node rules.
    let d = build_with(&[(Key::HealthcheckPort, "8443")], &[(80, 30080)], &config()).unwrap();
    assert_eq!(d.node_access.unwrap().health_ports, BTreeSet::from([8443]));
}

#[test]
fn addresses_must_match_the_subnets_and_errors_name_the_annotation() {
    let e = build_with(
        &[
            (Key::EipAllocations, "eipalloc-1"),
            (Key::PrivateIpv4Addresses, "10.0.0.1,10.0.0.2,10.0.0.3"),
        ],
        &[(80, 30080)],
        &config(),
    )
    .unwrap_err();
    let m = e.to_string();
    assert!(m.contains("aws-load-balancer-eip-allocations"), "{m}");
    assert!(m.contains("1 given for 2 subnets"), "{m}");
    assert!(m.contains("aws-load-balancer-private-ipv4-addresses"), "{m}");
    assert!(m.contains("3 given for 2 subnets"), "{m}");
    let d = desired(&[(Key::EipAllocations, "eipalloc-1,eipalloc-2")], &[(80, 30080)]);
    let changes = plan(&d, &Observed::default());
    let Some(Change::CreateLoadBalancer { subnets, .. }) = changes
        .iter()
        .find(|c| matches!(c, Change::CreateLoadBalancer { .. }))
    else {
        panic!("{changes:?}")
    };
    assert_eq!(
        subnets,
        &[
            ("subnet-a".to_owned(), Some("eipalloc-1".to_owned()), None),
            ("subnet-b".to_owned(), Some("eipalloc-2".to_owned()), None)
        ],
        "index-mapped onto the sorted subnets"
    );
}

#[test]
fn security_groups_by_mode() {
    let d = build_with(&[], &[(80, 30080), (443, 30443)], &managed_config()).unwrap();
    let Security::Managed(m) = &d.security else {
        panic!("{:?}", d.security)
    };
    assert_eq!(
        m.name,
        managed_group_name(
            "kubernetes",
            "prod",
            "web",
            "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"
        )
    );
    assert!(m.name.starts_with("k8s-prod-web-"));
    assert_eq!(m.description, MANAGED_GROUP_DESCRIPTION);
    let ports: BTreeSet<(String, i32)> = m
        .ingress
        .iter()
        .map(|r| (r.protocol.clone(), r.from_port))
        .collect();
    assert_eq!(
        ports,
        BTreeSet::from([
            ("icmp".to_owned(), 3),
            ("tcp".to_owned(), 80),
            ("tcp".to_owned(), 443)
        ])
    );
    let d = build_with(
        &[(Key::SecurityGroups, "sg-byo")],
        &[(80, 30080)],
        &managed_config(),
    )
    .unwrap();
    assert_eq!(d.security, Security::Given(vec!["sg-byo".into()]));
    // Mode off: the annotation is ignored (as upstream).
    assert_eq!(
        desired(&[(Key::SecurityGroups, "sg-byo")], &[(80, 30080)]).security,
        Security::Unmanaged
    );
}

#[test]
fn plan_for_a_new_service_creates_everything_in_order() {
    let d = build_with(
        &[
            (Key::TargetGroupAttributes, "proxy_protocol_v2.enabled=true"),
            (Key::CrossZoneLoadBalancingEnabled, "true"),
        ],
        &[(80, 30080)],
        &managed_config(),
    )
    .unwrap();
    let changes = plan(&d, &Observed::default());
    assert_eq!(
        kinds(&changes),
        [
            "create_security_group",
            "authorize_ingress",
            "create_target_group",
            "modify_target_group_attributes",
            "register_targets",
            "create_load_balancer",
            "modify_attributes",
            "create_listener",
        ]
    );
    let Change::CreateLoadBalancer { security_groups, .. } = &changes[5] else {
        panic!()
    };
    assert_eq!(security_groups, &Some(vec![GroupRef::Managed]));
}

#[test]
fn a_steady_service_plans_nothing() {
    for d in [
        desired(&[], &[(80, 30080)]),
        desired(
            &[(Key::SslCert, "arn:c"), (Key::SslNegotiationPolicy, "p")],
            &[(443, 30443)],
        ),
        build_with(&[], &[(80, 30080)], &managed_config()).unwrap(),
        build_with(
            &[(Key::SecurityGroups, "sg-1")],
            &[(80, 30080)],
            &managed_config(),
        )
        .unwrap(),
        desired(
            &[
                (Key::HealthcheckProtocol, "HTTP"),
                (Key::TargetGroupAttributes, "preserve_client_ip.enabled=false"),
            ],
            &[(80, 30080)],
        ),
    ] {
        assert_eq!(plan(&d, &converged(&d)), [], "{d:?}");
    }
}

#[test]
fn health_check_changes_modify_in_place_and_only_when_different() {
    let d = desired(&[], &[(80, 30080)]);
    let mut o = converged(&d);
    // Only the unhealthy threshold differs (upstream misses this one).
    o.target_groups[0].group.health_check.unhealthy_threshold = Some(2);
    assert_eq!(kinds(&plan(&d, &o)), ["modify_target_group"]);
    // Only the timeout (upstream never sends it).
    let mut o = converged(&d);
    o.target_groups[0].group.health_check.timeout_seconds = Some(6);
    assert_eq!(kinds(&plan(&d, &o)), ["modify_target_group"]);
    // A path AWS reports for a TCP check does not matter.
    let mut o = converged(&d);
    o.target_groups[0].group.health_check.path = Some("/".into());
    assert_eq!(plan(&d, &o), []);
}

/// Target group names are the Go controller's, byte for byte (the value computed independently with Python's
/// hashlib), so the groups of an NLB it made are found by name after a migration and not replaced.
#[test]
fn target_group_names_are_the_go_controllers() {
    let mut spec = parse_service(&nlb_service(&[], &[(443, 31443)])).unwrap();
    spec.namespace = "kube-system".into();
    spec.name = "my-web.app".into();
    let hc = HealthCheck {
        protocol: "HTTP".into(),
        interval: 10,
        ..health_check(&spec, &config())
    };
    assert_eq!(
        target_group_name("e2e-cluster", &spec, 443, 31443, "TLS", &hc),
        "k8s-kubesyst-mywebapp-52a022e6af"
    );
}

/// The health check protocol and interval are part of the name (as upstream): changing them moves the listener
/// to a new target group; the other fields are modified in place (above).
#[test]
fn a_health_check_interval_change_moves_the_listener_to_a_new_target_group() {
    let before = desired(&[], &[(80, 30080)]);
    let after = desired(&[(Key::HealthcheckInterval, "10")], &[(80, 30080)]);
    assert_ne!(
        before.listeners[0].target_group.name,
        after.listeners[0].target_group.name
    );
    let changes = kinds(&plan(&after, &converged(&before)));
    assert!(changes.contains(&"create_target_group".to_owned()), "{changes:?}");
    assert!(changes.contains(&"delete_target_group".to_owned()), "{changes:?}");
}

#[test]
fn targets_are_diffed_and_draining_ones_left_alone() {
    let d = desired(&[], &[(80, 30080)]);
    let mut o = converged(&d);
    let targets = &mut o.target_groups[0].targets;
    targets.retain(|t| t.target.id.as_str() != "i-2");
    targets.push(TargetHealth {
        target: Target {
            id: InstanceId::new("i-9"),
            port: 30080,
        },
        state: "healthy".into(),
        reason: None,
    });
    targets.push(TargetHealth {
        target: Target {
            id: InstanceId::new("i-8"),
            port: 30080,
        },
        state: "draining".into(),
        reason: Some("Target.DeregistrationInProgress".into()),
    });
    let changes = plan(&d, &o);
    let tg = d.listeners[0].target_group.name.clone();
    assert_eq!(
        changes,
        [
            Change::DeregisterTargets {
                name: tg.clone(),
                targets: vec![("i-9".into(), 30080)],
            },
            Change::RegisterTargets {
                name: tg,
                port: 30080,
                instances: vec!["i-2".into()],
            },
        ]
    );
    assert!(changes.iter().all(is_host_change));
}

#[test]
fn a_protocol_change_replaces_the_listener_without_a_duplicate() {
    let tcp = desired(&[], &[(443, 30443)]);
    let tls = desired(&[(Key::SslCert, "arn:c")], &[(443, 30443)]);
    let changes = plan(&tls, &converged(&tcp));
    assert_eq!(kinds(&changes), ["delete_listener", "create_listener"]);
    let Change::CreateListener { listener, .. } = &changes[1] else {
        panic!()
    };
    assert_eq!((listener.port, listener.protocol.as_str()), (443, "TLS"));
    // Same target group (TCP behind TLS): nothing else.
    assert_eq!(tls.listeners[0].target_group, tcp.listeners[0].target_group);
    // A certificate or policy change modifies the TLS listener in place.
    let rotated = desired(
        &[(Key::SslCert, "arn:c2"), (Key::SslNegotiationPolicy, "p2")],
        &[(443, 30443)],
    );
    assert_eq!(
        plan(&rotated, &converged(&tls)),
        [Change::ModifyListener {
            arn: "arn:listener/443".into(),
            port: 443,
            protocol: None,
            certificate: Some("arn:c2".into()),
            ssl_policy: Some("p2".into()),
            target_group: None,
        }]
    );
}

#[test]
fn a_node_port_change_moves_the_listener_to_a_new_target_group() {
    let before = desired(&[], &[(80, 30080)]);
    let after = desired(&[], &[(80, 30081)]);
    let changes = plan(&after, &converged(&before));
    assert_eq!(
        kinds(&changes),
        [
            "create_target_group",
            "register_targets",
            "modify_listener",
            "delete_target_group"
        ]
    );
    let Change::ModifyListener {
        target_group,
        protocol,
        ..
    } = &changes[2]
    else {
        panic!()
    };
    assert_eq!(
        target_group.as_deref(),
        Some(after.listeners[0].target_group.name.as_str())
    );
    assert_eq!(protocol, &None);
    // A removed port: its listener, then its group.
    let two = desired(&[], &[(80, 30080), (81, 30081)]);
    assert_eq!(
        kinds(&plan(&before, &converged(&two))),
        ["delete_listener", "delete_target_group"]
    );
    // A group of another Service (or cluster) attached to the NLB is never deleted.
    let mut o = converged(&two);
    let foreign = o.target_groups[1].group.arn.clone();
    o.tags.insert(
        foreign,
        Tags::from([("kubernetes.io/service-name".into(), "other/svc".into())]),
    );
    assert_eq!(kinds(&plan(&before, &o)), ["delete_listener"]);
}

#[test]
fn tags_and_attributes_are_reconciled_without_removing_others() {
    let d = desired(&[(Key::AdditionalResourceTags, "team=a")], &[(80, 30080)]);
    let mut o = converged(&d);
    for tags in o.tags.values_mut() {
        tags.remove("team");
        tags.insert("foreign".into(), "kept".into());
    }
    o.attributes.insert(CROSS_ZONE_ATTRIBUTE.into(), "true".into());
    o.attributes
        .insert("deletion_protection.enabled".into(), "true".into());
    let changes = plan(&d, &o);
    assert_eq!(kinds(&changes), ["modify_attributes", "add_tags"]);
    let Change::ModifyAttributes { attributes } = &changes[0] else {
        panic!()
    };
    assert_eq!(
        attributes,
        &BTreeMap::from([(CROSS_ZONE_ATTRIBUTE.to_owned(), "false".to_owned())])
    );
    let Change::AddTags { arns, tags } = &changes[1] else {
        panic!()
    };
    assert_eq!(
        arns.len(),
        3,
        "the load balancer, its target group and its listener"
    );
    assert!(!tags.contains_key("foreign"));
    // Keys AWS does not report are taken as its defaults.
    let mut o = converged(&d);
    o.attributes.clear();
    assert_eq!(plan(&d, &o), []);
}

#[test]
fn transitions_between_managed_and_given_groups() {
    let managed = build_with(&[], &[(80, 30080)], &managed_config()).unwrap();
    let byo = build_with(
        &[(Key::SecurityGroups, "sg-byo")],
        &[(80, 30080)],
        &managed_config(),
    )
    .unwrap();
    // managed -> BYO: set the groups, revoke references to the managed group, delete it.
    let mut o = converged(&managed);
    o.references = vec![(
        SecurityGroupId::new("sg-node"),
        ReferencePermission {
            protocol: "-1".into(),
            from_port: None,
            to_port: None,
            source: "sg-managed".into(),
        },
    )];
    assert_eq!(
        kinds(&plan(&byo, &o)),
        ["set_security_groups", "revoke_reference", "delete_security_group"]
    );
    // Not owned (no cluster tag): never deleted.
    let mut o = converged(&managed);
    o.managed_group.as_mut().unwrap().tags.clear();
    assert_eq!(kinds(&plan(&byo, &o)), ["set_security_groups"]);
    // BYO -> managed: create the managed group, then set it; the BYO group is not touched.
    let o = converged(&byo);
    let changes = plan(&managed, &o);
    assert_eq!(
        kinds(&changes),
        [
            "create_security_group",
            "authorize_ingress",
            "set_security_groups"
        ]
    );
    assert_eq!(
        changes[2],
        Change::SetSecurityGroups {
            groups: vec![GroupRef::Managed]
        }
    );
    // Mode off: an existing NLB's groups are left alone.
    let off = desired(&[], &[(80, 30080)]);
    assert_eq!(plan(&off, &converged(&byo)), []);
    // Managed mode on an NLB created without groups: it stays without (AWS cannot add them).
    let mut o = converged(&off);
    o.managed_group = None;
    assert_eq!(plan(&managed, &o), []);
}

#[test]
fn changes_an_nlb_cannot_take_recreate_it_with_a_reason() {
    let public = desired(&[], &[(80, 30080)]);
    let internal = desired(&[(Key::Internal, "true")], &[(80, 30080)]);
    let changes = plan(&internal, &converged(&public));
    assert_eq!(
        kinds(&changes),
        ["delete_load_balancer", "create_load_balancer", "create_listener"],
        "the target group is kept"
    );
    let message = recreation(NAME, &changes).unwrap();
    assert!(
        message.contains("scheme internet-facing -> internal"),
        "{message}"
    );
    assert!(message.contains("DNS name changes"), "{message}");

    // Given groups on an NLB created without any.
    let byo = build_with(
        &[(Key::SecurityGroups, "sg-byo")],
        &[(80, 30080)],
        &managed_config(),
    )
    .unwrap();
    let message = recreation(NAME, &plan(&byo, &converged(&public))).unwrap();
    assert!(message.contains("created without security groups"), "{message}");

    // A pinned subnet removed or swapped recreates; discovered subnets never change an NLB.
    let mut one = pinned(&["subnet-a"], &[]);
    let mut o = converged(&pinned(&["subnet-a", "subnet-b"], &[]));
    assert!(
        recreation(NAME, &plan(&one, &o))
            .unwrap()
            .contains("subnets subnet-a,subnet-b -> subnet-a")
    );
    let swapped = pinned(&["subnet-a", "subnet-c"], &[]);
    assert!(recreation(NAME, &plan(&swapped, &o)).unwrap().contains("subnets"));
    one.subnets_pinned = false;
    o.load_balancer.as_mut().unwrap().availability_zones.pop();
    o.load_balancer.as_mut().unwrap().availability_zones[0].subnet_id = Some(SubnetId::new("subnet-z"));
    assert_eq!(plan(&one, &o), []);

    // EIPs.
    let eips = desired(&[(Key::EipAllocations, "eipalloc-1,eipalloc-2")], &[(80, 30080)]);
    assert!(
        recreation(NAME, &plan(&eips, &converged(&public)))
            .unwrap()
            .contains("EIP allocations")
    );
    // No recreation without a change.
    assert_eq!(recreation(NAME, &plan(&public, &converged(&public))), None);
}

#[test]
fn a_failed_nlb_is_an_error_and_others_report_their_dns_name() {
    let mut lb = LoadBalancerV2::new("arn", NAME, "x.elb.amazonaws.com");
    assert_eq!(
        status_hostname(&lb).unwrap().as_deref(),
        Some("x.elb.amazonaws.com")
    );
    lb.state = "provisioning".into();
    assert!(status_hostname(&lb).unwrap().is_some());
    lb.state = "failed".into();
    let e = status_hostname(&lb).unwrap_err();
    assert!(e.to_string().contains("state failed"), "{e}");
}

#[test]
fn deletion_plan_order() {
    let observed = DeleteObserved {
        load_balancer: Some(LoadBalancerV2::new("arn:lb", NAME, "x")),
        target_groups: vec![TargetGroup::new("arn:tg", "k8s-prod-web-x", "TCP", 30080)],
        managed_group: Some(SecurityGroupId::new("sg-m")),
        references: vec![(
            SecurityGroupId::new("sg-node"),
            ReferencePermission {
                protocol: "tcp".into(),
                from_port: Some(80),
                to_port: Some(80),
                source: "sg-m".into(),
            },
        )],
        node_rules: None,
    };
    assert_eq!(
        kinds(&plan_delete(NAME, &observed)),
        [
            "delete_load_balancer",
            "delete_target_group",
            "revoke_reference",
            "delete_security_group"
        ]
    );
    assert_eq!(plan_delete(NAME, &DeleteObserved::default()), []);
}

fn err(kind: ErrorKind) -> AwsError {
    AwsError::new(kind, "elasticloadbalancingv2", "Test")
}

#[tokio::test]
async fn apply_adopts_a_target_group_created_by_a_crashed_run_and_uses_created_arns() {
    let d = desired(&[], &[(80, 30080)]);
    let tg_name = d.listeners[0].target_group.name.clone();
    let mut elbv2 = MockElbv2::new();
    elbv2
        .expect_create_target_group()
        .times(1)
        .returning(|_| Box::pin(async { Err(err(ErrorKind::Conflict)) }));
    elbv2.expect_target_group().times(1).returning(|name| {
        let g = TargetGroup::new("arn:tg-adopted", name, "TCP", 30080);
        Box::pin(async move { Ok(Some(g)) })
    });
    elbv2
        .expect_register_targets()
        .withf(|arn, targets| arn == "arn:tg-adopted" && targets.len() == 2)
        .times(1)
        .returning(|_, _| Box::pin(async { Ok(()) }));
    elbv2.expect_create_load_balancer().times(1).returning(|lb| {
        let created = LoadBalancerV2::new("arn:lb-new", &lb.name, "new.elb.amazonaws.com");
        Box::pin(async move { Ok(created) })
    });
    elbv2
        .expect_create_listener()
        .withf(|l| l.load_balancer_arn == "arn:lb-new" && l.target_group_arn == "arn:tg-adopted")
        .times(1)
        .returning(|l| {
            let created = ListenerV2::new(
                "arn:l",
                &l.load_balancer_arn,
                l.port,
                &l.protocol,
                &l.target_group_arn,
            );
            Box::pin(async move { Ok(created) })
        });
    let changes = plan(&d, &Observed::default());
    assert!(changes.iter().any(
        |c| matches!(c, Change::CreateTargetGroup { target_group, .. } if target_group.name == tg_name)
    ));
    let applied = apply(
        &MockEc2::new(),
        &elbv2,
        &config(),
        NAME,
        &Observed::default(),
        &changes,
    )
    .await
    .unwrap();
    assert_eq!(applied.created.unwrap().dns_name, "new.elb.amazonaws.com");
    assert_eq!(applied.mutations, 4);
}

#[tokio::test]
async fn a_managed_group_still_in_use_is_retried_later() {
    let mut ec2 = MockEc2::new();
    ec2.expect_delete_security_group().times(1).returning(|_| {
        Box::pin(async { Err(AwsError::new(ErrorKind::Conflict, "ec2", "DeleteSecurityGroup")) })
    });
    let e = apply(
        &ec2,
        &MockElbv2::new(),
        &config(),
        NAME,
        &Observed::default(),
        &[Change::DeleteSecurityGroup { group: "sg-m".into() }],
    )
    .await
    .unwrap_err();
    assert!(matches!(e, Error::GroupInUse { .. }), "{e}");
    let cloud: ccm_cloud_provider::CloudError = e.into();
    let waiting = cloud.waiting_for().expect("a wait, not a failure");
    assert!(waiting.contains("sg-m"), "{waiting}");
}

#[tokio::test]
async fn a_target_group_still_in_use_is_waited_for() {
    let mut elbv2 = MockElbv2::new();
    elbv2.expect_delete_target_group().times(1).returning(|_| {
        Box::pin(async {
            Err(
                AwsError::new(ErrorKind::Conflict, "elasticloadbalancing", "DeleteTargetGroup")
                    .with_code("ResourceInUse"),
            )
        })
    });
    let e = apply(
        &MockEc2::new(),
        &elbv2,
        &config(),
        NAME,
        &Observed::default(),
        &[Change::DeleteTargetGroup {
            name: "k8s-tg".into(),
            arn: "arn:tg".into(),
        }],
    )
    .await
    .unwrap_err();
    assert!(matches!(e, Error::TargetGroupInUse { .. }), "{e}");
    let cloud: ccm_cloud_provider::CloudError = e.into();
    let waiting = cloud.waiting_for().expect("a wait, not a failure");
    assert!(waiting.contains("k8s-tg"), "{waiting}");
}

#[tokio::test]
async fn observe_of_a_steady_nlb_reads_once_per_item_and_refuses_a_failed_one() {
    let d = desired(&[], &[(80, 30080)]);
    let c = converged(&d);
    let mut elbv2 = MockElbv2::new();
    let lb = c.load_balancer.clone().unwrap();
    elbv2.expect_load_balancer().times(1).returning(move |_| {
        let lb = lb.clone();
        Box::pin(async move { Ok(Some(lb)) })
    });
    let groups: Vec<TargetGroup> = c.target_groups.iter().map(|g| g.group.clone()).collect();
    elbv2.expect_target_groups().times(1).returning(move |_| {
        let groups = groups.clone();
        Box::pin(async move { Ok(groups) })
    });
    let attributes = c.attributes.clone();
    elbv2
        .expect_load_balancer_attributes()
        .times(1)
        .returning(move |_| {
            let a = attributes.clone();
            Box::pin(async move { Ok(a) })
        });
    let listeners = c.listeners.clone();
    elbv2.expect_listeners().times(1).returning(move |_| {
        let l = listeners.clone();
        Box::pin(async move { Ok(l) })
    });
    let targets = c.target_groups[0].targets.clone();
    elbv2.expect_target_health().times(1).returning(move |_| {
        let t = targets.clone();
        Box::pin(async move { Ok(t) })
    });
    let tags = c.tags.clone();
    elbv2.expect_tags().times(1).returning(move |_| {
        let t = tags.clone();
        Box::pin(async move { Ok(t) })
    });
    // No target_group(name) lookup: the wanted group is attached. No EC2 call with groups unmanaged.
    let observed = observe(&MockEc2::new(), &elbv2, &config(), &d, Scope::Full)
        .await
        .unwrap();
    assert_eq!(plan(&d, &observed), []);

    let mut failed = LoadBalancerV2::new("arn", NAME, "x");
    failed.state = "failed".into();
    let mut elbv2 = MockElbv2::new();
    elbv2.expect_load_balancer().times(1).returning(move |_| {
        let lb = failed.clone();
        Box::pin(async move { Ok(Some(lb)) })
    });
    let e = observe(&MockEc2::new(), &elbv2, &config(), &d, Scope::Full)
        .await
        .unwrap_err();
    assert!(matches!(e, Error::LoadBalancerFailed(_)), "{e}");
}

#[test]
fn access_logs_cross_zone_and_target_group_attributes_come_from_annotations() {
    let d = desired(
        &[
            (Key::AccessLogEnabled, "true"),
            (Key::AccessLogS3BucketName, "logs"),
            (Key::AccessLogS3BucketPrefix, "nlb"),
            (Key::CrossZoneLoadBalancingEnabled, "true"),
            (
                Key::TargetGroupAttributes,
                "preserve_client_ip.enabled=false,proxy_protocol_v2.enabled=true",
            ),
            (Key::AdditionalResourceTags, "team=a,cost=b"),
        ],
        &[(80, 30080)],
    );
    assert_eq!(
        d.attributes,
        BTreeMap::from([
            (ACCESS_LOGS_ATTRIBUTE.to_owned(), "true".to_owned()),
            (ACCESS_LOGS_BUCKET_ATTRIBUTE.to_owned(), "logs".to_owned()),
            (ACCESS_LOGS_PREFIX_ATTRIBUTE.to_owned(), "nlb".to_owned()),
            (CROSS_ZONE_ATTRIBUTE.to_owned(), "true".to_owned()),
        ])
    );
    assert_eq!(
        d.target_group_attributes,
        BTreeMap::from([
            ("preserve_client_ip.enabled".to_owned(), "false".to_owned()),
            ("proxy_protocol_v2.enabled".to_owned(), "true".to_owned()),
        ])
    );
    assert_eq!(d.tags.get("team").map(String::as_str), Some("a"));
    // Only differing target group attributes are set.
    let mut o = converged(&d);
    o.target_groups[0]
        .attributes
        .insert("proxy_protocol_v2.enabled".into(), "false".into());
    let changes = plan(&d, &o);
    assert_eq!(
        changes,
        [Change::ModifyTargetGroupAttributes {
            name: d.listeners[0].target_group.name.clone(),
            attributes: BTreeMap::from([("proxy_protocol_v2.enabled".to_owned(), "true".to_owned())]),
        }]
    );
    // Every problem of an NLB Service at once.
    let e = parse_service(&nlb_service(
        &[
            (Key::TargetGroupAttributes, "preserve_client_ip.enabled=yes"),
            (Key::HealthcheckProtocol, "SSL"),
            (Key::ExtraSecurityGroups, "sg-1"),
        ],
        &[(80, 30080)],
    ))
    .unwrap_err();
    assert_eq!(e.problems.len(), 3, "{e}");
}

#[tokio::test]
async fn another_clusters_nlb_is_neither_adopted_nor_deleted() {
    let d = desired(&[], &[(80, 30080)]);
    let foreign = Tags::from([("kubernetes.io/cluster/other".to_owned(), "owned".to_owned())]);
    let mocks = || {
        let mut elbv2 = MockElbv2::new();
        elbv2.expect_load_balancer().returning(|n| {
            let lb = LoadBalancerV2::new("arn:lb", n, "x");
            Box::pin(async move { Ok(Some(lb)) })
        });
        elbv2
            .expect_target_groups()
            .returning(|_| Box::pin(async { Ok(vec![]) }));
        elbv2
            .expect_load_balancer_attributes()
            .returning(|_| Box::pin(async { Ok(BTreeMap::new()) }));
        elbv2
            .expect_listeners()
            .returning(|_| Box::pin(async { Ok(vec![]) }));
        elbv2
            .expect_target_group()
            .returning(|_| Box::pin(async { Ok(None) }));
        elbv2
            .expect_all_target_groups()
            .returning(|| Box::pin(async { Ok(vec![]) }));
        let tags = foreign.clone();
        elbv2.expect_tags().returning(move |_| {
            let t = BTreeMap::from([("arn:lb".to_owned(), tags.clone())]);
            Box::pin(async move { Ok(t) })
        });
        elbv2
    };
    let e = observe(&MockEc2::new(), &mocks(), &config(), &d, Scope::Full)
        .await
        .unwrap_err();
    assert!(matches!(e, Error::NotOurs(_)), "{e}");
    assert!(e.to_string().contains("kubernetes.io/cluster/other=owned"), "{e}");
    let mut c = config();
    c.manage_node_security_groups = false;
    let observed = observe_delete(
        &MockEc2::new(),
        &mocks(),
        &c,
        NAME,
        ("prod", "web"),
        &["k8s-prod-web-x".into()],
        None,
    )
    .await
    .unwrap();
    assert!(observed.load_balancer.is_none());
    assert_eq!(plan_delete(NAME, &observed), []);
}

#[test]
fn a_recreation_interrupted_after_the_deletion_completes_without_a_second_notice() {
    let internal = desired(&[(Key::Internal, "true")], &[(80, 30080)]);
    // The old NLB is gone; its target group is left, found by name and no longer attached.
    let mut o = converged(&internal);
    o.load_balancer = None;
    o.listeners.clear();
    o.attributes.clear();
    o.target_groups[0].group.load_balancer_arns.clear();
    let changes = plan(&internal, &o);
    assert_eq!(kinds(&changes), ["create_load_balancer", "create_listener"]);
    assert_eq!(recreation(NAME, &changes), None);
    let Change::CreateListener { listener, .. } = &changes[1] else {
        panic!()
    };
    assert_eq!(listener.target_group, internal.listeners[0].target_group);
}

fn managed_ingress(d: &Desired) -> BTreeSet<(String, i32, String)> {
    let Security::Managed(m) = &d.security else {
        panic!("{:?}", d.security)
    };
    m.ingress
        .iter()
        .map(|r| (r.protocol.clone(), r.from_port, r.cidr.clone()))
        .collect()
}

#[test]
fn ip_address_type_defaults_to_ipv4_and_dualstack_admits_ipv6_only_by_default() {
    let mut c = managed_config();
    c.manage_node_security_groups = true;
    let ipv4 = build_with(&[], &[(80, 30080)], &c).unwrap();
    assert_eq!(ipv4.ip_address_type, IpAddressType::Ipv4);
    let v4_rules = BTreeSet::from([
        ("icmp".to_owned(), 3, "0.0.0.0/0".to_owned()),
        ("tcp".to_owned(), 80, "0.0.0.0/0".to_owned()),
    ]);
    assert_eq!(managed_ingress(&ipv4), v4_rules);
    assert_eq!(ipv4.node_access.as_ref().unwrap().client_cidrs, ["0.0.0.0/0"]);

    let dual = build_with(&[(Key::IpAddressType, "DualStack")], &[(80, 30080)], &c).unwrap();
    assert_eq!(dual.ip_address_type, IpAddressType::Dualstack);
    let mut dual_rules = v4_rules;
    dual_rules.insert(("icmpv6".to_owned(), 2, "::/0".to_owned()));
    dual_rules.insert(("tcp".to_owned(), 80, "::/0".to_owned()));
    assert_eq!(managed_ingress(&dual), dual_rules);
    // The nodes see IPv4 sources only (an IPv4 target group): their client rules keep the IPv4 default.
    assert_eq!(
        dual.node_access.as_ref().unwrap().client_cidrs,
        ["0.0.0.0/0"],
        "node rules unchanged"
    );

    // Ranges the user gave are taken as they are, also an explicit 0.0.0.0/0.
    for ranges in ["10.0.0.0/8", "0.0.0.0/0"] {
        let d = build_with(
            &[(Key::IpAddressType, "dualstack"), (Key::SourceRanges, ranges)],
            &[(80, 30080)],
            &c,
        )
        .unwrap();
        assert!(
            managed_ingress(&d).iter().all(|(_, _, cidr)| cidr == ranges),
            "{ranges}: {:?}",
            managed_ingress(&d)
        );
    }
}

#[test]
fn an_invalid_ip_address_type_is_collected_and_ignored_on_classic() {
    let e = parse_service(&nlb_service(
        &[(Key::IpAddressType, "ipv6"), (Key::HealthcheckPort, "x")],
        &[(80, 30080)],
    ))
    .unwrap_err();
    let problem = e
        .problems
        .iter()
        .find(|p| p.field == Key::IpAddressType.name())
        .unwrap();
    assert_eq!(problem.value, "ipv6");
    assert_eq!(problem.accepted, "one of ipv4, dualstack");
    assert_eq!(e.problems.len(), 2, "every problem collected: {e}");
    assert!(
        e.to_string()
            .contains("service.beta.kubernetes.io/aws-load-balancer-ip-address-type=\"ipv6\""),
        "{e}"
    );
    // NLB only: a Classic ELB ignores the key, also a bad value of it (logged).
    for value in ["dualstack", "ipv6"] {
        let spec = parse_service(&service(&[(Key::IpAddressType, value)], &[(80, 30080)])).unwrap();
        assert_eq!(spec.flavour, crate::Flavour::Classic);
    }
}

#[test]
fn an_ip_address_type_change_is_one_set_call_and_steady_is_nothing() {
    let dual = desired(&[(Key::IpAddressType, "dualstack")], &[(80, 30080)]);
    let created = plan(&dual, &Observed::default());
    assert!(
        created.iter().any(|c| matches!(
            c,
            Change::CreateLoadBalancer {
                ip_address_type: IpAddressType::Dualstack,
                ..
            }
        )),
        "{created:?}"
    );
    assert_eq!(plan(&dual, &converged(&dual)), []);

    // ipv4 -> dualstack and back: one in-place change each, never a recreation.
    let ipv4 = desired(&[], &[(80, 30080)]);
    assert_eq!(
        plan(&dual, &converged(&ipv4)),
        [Change::SetIpAddressType {
            ip_address_type: IpAddressType::Dualstack
        }]
    );
    assert_eq!(
        plan(&ipv4, &converged(&dual)),
        [Change::SetIpAddressType {
            ip_address_type: IpAddressType::Ipv4
        }]
    );
    // A type AWS does not report is its default.
    let mut observed = converged(&ipv4);
    observed.load_balancer.as_mut().unwrap().ip_address_type = String::new();
    assert_eq!(plan(&ipv4, &observed), []);
}

#[tokio::test]
async fn apply_sets_the_ip_address_type_and_creates_with_it() {
    let dual = desired(&[(Key::IpAddressType, "dualstack")], &[(80, 30080)]);
    let observed = converged(&desired(&[], &[(80, 30080)]));
    let changes = plan(&dual, &observed);
    let mut elbv2 = MockElbv2::new();
    elbv2
        .expect_set_ip_address_type()
        .withf(|arn, t| arn == "arn:lb" && t == "dualstack")
        .times(1)
        .returning(|_, _| Box::pin(async { Ok(()) }));
    let applied = apply(&MockEc2::new(), &elbv2, &config(), NAME, &observed, &changes)
        .await
        .unwrap();
    assert_eq!(applied.mutations, 1);

    // Created with the type (and the AWS default left implicit).
    for (d, wanted) in [(dual, Some("dualstack")), (desired(&[], &[(80, 30080)]), None)] {
        let changes: Vec<Change> = plan(&d, &Observed::default())
            .into_iter()
            .filter(|c| matches!(c, Change::CreateLoadBalancer { .. }))
            .collect();
        let mut elbv2 = MockElbv2::new();
        elbv2
            .expect_create_load_balancer()
            .withf(move |lb| lb.ip_address_type.as_deref() == wanted)
            .times(1)
            .returning(|lb| {
                let created = LoadBalancerV2::new("arn:lb-new", &lb.name, "new.elb.amazonaws.com");
                Box::pin(async move { Ok(created) })
            });
        apply(
            &MockEc2::new(),
            &elbv2,
            &config(),
            NAME,
            &Observed::default(),
            &changes,
        )
        .await
        .unwrap();
    }
}

#[test]
fn pinned_subnets_in_added_zones_are_set_in_place() {
    let one = pinned(&["subnet-a"], &[]);
    let two = pinned(&["subnet-b", "subnet-a"], &[]);
    assert_eq!(
        plan(&two, &converged(&one)),
        [Change::SetSubnets {
            subnets: vec!["subnet-a".to_owned(), "subnet-b".to_owned()]
        }],
        "the whole sorted list, no recreation"
    );
    assert_eq!(plan(&two, &converged(&two)), []);

    // With pinned EIPs or private addresses the index mapping shifts: a new NLB.
    let eips = pinned(
        &["subnet-a", "subnet-b"],
        &[(Key::EipAllocations, "eipalloc-1,eipalloc-2")],
    );
    let mut o = converged(&one);
    o.load_balancer.as_mut().unwrap().availability_zones[0]
        .addresses
        .push(SubnetMapping {
            subnet_id: Some(SubnetId::new("subnet-a")),
            allocation_id: Some("eipalloc-1".to_owned()),
            private_ipv4_address: None,
        });
    let message = recreation(NAME, &plan(&eips, &o)).unwrap();
    assert!(
        message.contains("subnets subnet-a -> subnet-a,subnet-b"),
        "{message}"
    );
}

#[tokio::test]
async fn apply_sets_the_subnets() {
    let one = pinned(&["subnet-a"], &[]);
    let two = pinned(&["subnet-a", "subnet-b"], &[]);
    let observed = converged(&one);
    let changes = plan(&two, &observed);
    let mut elbv2 = MockElbv2::new();
    elbv2
        .expect_set_subnets()
        .withf(|arn, s| arn == "arn:lb" && s == [SubnetId::new("subnet-a"), SubnetId::new("subnet-b")])
        .times(1)
        .returning(|_, _| Box::pin(async { Ok(()) }));
    let applied = apply(&MockEc2::new(), &elbv2, &config(), NAME, &observed, &changes)
        .await
        .unwrap();
    assert_eq!(applied.mutations, 1);
}

#[tokio::test]
async fn deletion_sweeps_the_services_unattached_target_groups_and_nothing_else() {
    let owned = desired(&[], &[(80, 30080)]).tags;
    assert_eq!(
        owned.get("kubernetes.io/service-name").map(String::as_str),
        Some("prod/web")
    );
    let mut other_service = owned.clone();
    other_service.insert("kubernetes.io/service-name".into(), "prod/web-canary".into());
    let foreign = Tags::from([
        ("kubernetes.io/cluster/other".to_owned(), "owned".to_owned()),
        ("kubernetes.io/service-name".to_owned(), "prod/web".to_owned()),
    ]);
    let mut untagged_service = owned.clone();
    untagged_service.remove("kubernetes.io/service-name");
    let groups = [
        // (ARN, name, tags, deleted)
        (
            "arn:current",
            "k8s-prod-web-current",
            untagged_service.clone(),
            true,
        ),
        ("arn:orphan", "k8s-prod-web-0123456789", owned.clone(), true),
        ("arn:canary", "k8s-prod-web-abcdef0123", other_service, false),
        ("arn:foreign", "k8s-prod-web-fedcba9876", foreign, false),
        ("arn:unprefixed", "k8s-prod-api-0123456789", owned.clone(), false),
        (
            "arn:untagged-prefix",
            "k8s-prod-web-5555555555",
            untagged_service,
            false,
        ),
    ];
    let mut elbv2 = MockElbv2::new();
    elbv2
        .expect_load_balancer()
        .returning(|_| Box::pin(async { Ok(None) }));
    let listed: Vec<TargetGroup> = groups
        .iter()
        .map(|(arn, name, _, _)| TargetGroup::new(arn, name, "TCP", 30080))
        .collect();
    elbv2.expect_all_target_groups().times(1).returning(move || {
        let listed = listed.clone();
        Box::pin(async move { Ok(listed) })
    });
    let tags: BTreeMap<String, Tags> = groups
        .iter()
        .map(|(arn, _, tags, _)| ((*arn).to_owned(), tags.clone()))
        .collect();
    elbv2.expect_tags().times(1).returning(move |arns| {
        let t: BTreeMap<String, Tags> = tags
            .iter()
            .filter(|(arn, _)| arns.contains(arn))
            .map(|(a, t)| (a.clone(), t.clone()))
            .collect();
        Box::pin(async move { Ok(t) })
    });
    let mut c = config();
    c.manage_node_security_groups = false;
    let observed = observe_delete(
        &MockEc2::new(),
        &elbv2,
        &c,
        NAME,
        ("prod", "web"),
        &["k8s-prod-web-current".into()],
        None,
    )
    .await
    .unwrap();
    let deleted: Vec<&str> = observed.target_groups.iter().map(|g| g.arn.as_str()).collect();
    let wanted: Vec<&str> = groups.iter().filter(|g| g.3).map(|g| g.0).collect();
    assert_eq!(deleted, wanted);
}
