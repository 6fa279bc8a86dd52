//! Unit tests of the NLB model, plan and apply.

use super::*;
use crate::Error;
use crate::LoadBalancerConfig;
use crate::shared::HealthProbeMode;
use crate::shared::Rule;
use crate::{
    annotations::Key,
    classic::tests::{config, node, service},
    parse_service,
};
use ccm_aws_api::SecurityGroupId;
use ccm_aws_api::SubnetId;
use ccm_aws_api::ec2::SecurityGroup;
use ccm_aws_api::elbv2::ListenerV2;
use ccm_aws_api::elbv2::LoadBalancerV2;
use ccm_aws_api::elbv2::Target;
use ccm_aws_api::elbv2::TargetGroup;
use ccm_aws_api::elbv2::TargetHealth;
use ccm_aws_api::elbv2::{TargetId, TargetType};
use ccm_aws_api::{
    AwsError, ErrorKind,
    ec2::MockEc2,
    elbv2::{LoadBalancerZone, MockElbv2},
};
use k8s_openapi::api::core::v1::Service;
use std::collections::BTreeMap;
use std::collections::BTreeSet;

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
        listener.alpn_policy = l.alpn_policy.clone();
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
        tg.target_type = l.target_group.target_type.as_str().to_owned();
        tags.insert(tg_arn.clone(), desired.tags.clone());
        let targets: Vec<(String, i32)> = match &l.target_group.ip_targets {
            Some(ips) => ips.iter().cloned().collect(),
            None if l.target_group.target_type == TargetType::Ip => Vec::new(),
            None => desired
                .instances
                .iter()
                .map(|i| (i.clone(), l.target_group.port))
                .collect(),
        };
        target_groups.push(ObservedTargetGroup {
            group: tg,
            attributes: desired.target_group_attributes.clone(),
            targets: targets
                .into_iter()
                .map(|(id, port)| TargetHealth {
                    target: Target {
                        id: TargetId::parse(&id),
                        port,
                    },
                    state: "healthy".into(),
                    reason: None,
                })
                .collect(),
        });
    }
    let listener_attributes = desired
        .listeners
        .iter()
        .filter(|l| !l.attributes.is_empty())
        .map(|l| (format!("arn:listener/{}", l.port), l.attributes.clone()))
        .collect();
    // The lists read: those of the TLS listeners that want further certificates.
    let listener_certificates = desired
        .listeners
        .iter()
        .filter(|l| !l.extra_certificates.is_empty())
        .map(|l| (format!("arn:listener/{}", l.port), l.extra_certificates.clone()))
        .collect();
    Observed {
        load_balancer: Some(lb),
        attributes: desired.attributes.clone(),
        listeners,
        listener_attributes,
        listener_certificates,
        target_groups,
        renamed: BTreeMap::new(),
        tags,
        managed_group,
        references: Vec::new(),
        node_rules: None,
        node_rule_source: None,
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
            success_codes: None,
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
            success_codes: None,
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
    // A numeric health check port is the only health port of the node rules, once the operator allows it.
    let allowed = config().with_allowed_health_check_ports(vec![(8000, 8999)]);
    let d = build_with(&[(Key::HealthcheckPort, "8443")], &[(80, 30080)], &allowed).unwrap();
    assert_eq!(d.node_access.unwrap().health_ports, BTreeSet::from([8443]));
}

/// A Service author names which port is opened on every target node through the health-check port: only the
/// Service's own node ports, its `healthCheckNodePort`, the shared probe's port and the operator's ranges are
/// accepted; the kubelet's 10250 (or SSH, an exporter) is refused before anything is built, naming the key and
/// the ports allowed. Both flavours.
#[test]
fn a_health_check_port_outside_the_services_own_is_refused() {
    let refused = build_with(&[(Key::HealthcheckPort, "10250")], &[(80, 30080)], &config()).unwrap_err();
    let message = refused.to_string();
    assert!(
        matches!(refused, Error::HealthCheckPortRefused { port: 10250, .. }),
        "{message}"
    );
    assert!(
        message.contains("aws-load-balancer-healthcheck-port=10250"),
        "{message}"
    );
    assert!(message.contains("allowed here: 30080"), "{message}");
    let classic = crate::classic::build(
        &parse_service(&crate::classic::tests::service(
            &[(Key::HealthcheckPort, "22")],
            &[(80, 30080)],
        ))
        .unwrap(),
        &[],
        &config(),
        &[],
    )
    .unwrap_err();
    assert!(
        classic.to_string().contains("healthcheck-port=22 is refused"),
        "{classic}"
    );
    // Its own node port, the shared probe's port, the operator's range: accepted.
    assert!(build_with(&[(Key::HealthcheckPort, "30080")], &[(80, 30080)], &config()).is_ok());
    let shared = config().with_health_probe(HealthProbeMode::Shared {
        port: 10256,
        path: "/healthz".into(),
    });
    assert!(build_with(&[(Key::HealthcheckPort, "10256")], &[(80, 30080)], &shared).is_ok());
    let ranges = config().with_allowed_health_check_ports(vec![(9000, 9100), (10250, 10250)]);
    assert!(build_with(&[(Key::HealthcheckPort, "10250")], &[(80, 30080)], &ranges).is_ok());
    let e = build_with(&[(Key::HealthcheckPort, "9101")], &[(80, 30080)], &ranges).unwrap_err();
    assert!(
        e.to_string().contains("allowed here: 30080, 9000-9100, 10250"),
        "{e}"
    );
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

mod apply;
mod attributes;
mod certificates;
mod gate;
mod ip_targets;
mod ipv6_targets;
mod node_source;
mod plan;
mod prefix_lists;
mod release;
