use super::*;
use crate::classic::tests::service;
use k8s_openapi::api::core::v1::{LoadBalancerIngress, LoadBalancerStatus, ServiceStatus};

fn fields(e: &InvalidService) -> Vec<&str> {
    e.problems.iter().map(|p| p.field.as_str()).collect()
}

#[test]
fn an_invalid_service_reports_every_problem_at_once() {
    let mut svc = service(
        &[
            (Key::ConnectionIdleTimeout, "forever"),
            (Key::HealthcheckPort, "0"),
            (Key::TargetGroupAttributes, "proxy_protocol_v2.enabled=true"),
            (Key::AccessLogEnabled, "true"),
        ],
        &[(80, 30080), (81, 30081)],
    );
    let spec = svc.spec.as_mut().unwrap();
    spec.session_affinity = Some("ClientIP".into());
    spec.load_balancer_ip = Some("1.2.3.4".into());
    spec.load_balancer_source_ranges = Some(vec!["10.0.0.0/8".into(), "bogus".into()]);
    spec.ports.as_mut().unwrap()[1].protocol = Some("UDP".into());
    let e = parse_service(&svc).unwrap_err();
    assert_eq!(
        fields(&e),
        [
            Key::ConnectionIdleTimeout.name(),
            Key::HealthcheckPort.name(),
            Key::TargetGroupAttributes.name(),
            "spec.sessionAffinity",
            "spec.loadBalancerIP",
            "spec.ports[1].protocol",
            "spec.ports",
            "spec.loadBalancerSourceRanges[1]",
            Key::AccessLogS3BucketName.name(),
        ]
    );
    let message = e.to_string();
    assert!(
        message.starts_with("invalid Service prod/web for a load balancer: "),
        "{message}"
    );
    assert!(
        message.contains("service.beta.kubernetes.io/aws-load-balancer-connection-idle-timeout=\"forever\": an integer from 1 to 4000"),
        "{message}"
    );
    assert!(message.contains("only supported on NLB"), "{message}");
}

#[test]
fn nlb_rejects_classic_only_keys_and_ssl_health_checks() {
    let svc = service(
        &[
            (Key::Type, "nlb"),
            (Key::ExtraSecurityGroups, "sg-1"),
            (Key::HealthcheckProtocol, "ssl"),
            (Key::ProxyProtocol, "*"),
        ],
        &[(80, 30080)],
    );
    let e = parse_service(&svc).unwrap_err();
    assert_eq!(
        fields(&e),
        [Key::ExtraSecurityGroups.name(), Key::HealthcheckProtocol.name()]
    );
}

#[test]
fn external_types_ignore_everything_but_the_type() {
    for t in ["nlb-ip", "external"] {
        let svc = service(
            &[(Key::Type, t), (Key::ConnectionIdleTimeout, "x")],
            &[(80, 30080)],
        );
        assert_eq!(parse_service(&svc).unwrap().flavour, Flavour::External);
    }
}

#[test]
fn the_flavour_cannot_change_after_creation() {
    let with_hostname = |annotations: &[(Key, &str)], hostname: &str| {
        let mut svc = service(annotations, &[(80, 30080)]);
        svc.status = Some(ServiceStatus {
            load_balancer: Some(LoadBalancerStatus {
                ingress: Some(vec![LoadBalancerIngress {
                    hostname: Some(hostname.into()),
                    ..Default::default()
                }]),
            }),
            ..Default::default()
        });
        parse_service(&svc)
    };
    let clb = "a1-123.us-east-1.elb.amazonaws.com";
    let clb_cn = "a1-123.cn-north-1.elb.amazonaws.com.cn";
    let nlb = "a1-123.elb.us-east-1.amazonaws.com";
    assert!(with_hostname(&[], clb).is_ok());
    assert!(
        with_hostname(&[], clb_cn).is_ok(),
        "China hostnames are Classic too"
    );
    assert!(with_hostname(&[(Key::Type, "nlb")], nlb).is_ok());
    // A Classic-looking hostname is not proof (moto names NLBs that way): the provider asks AWS.
    assert!(with_hostname(&[(Key::Type, "nlb")], clb).is_ok());
    let e = with_hostname(&[], nlb).unwrap_err();
    assert_eq!(fields(&e), [Key::Type.name()]);
    assert!(e.problems[0].accepted.contains("already has an NLB"), "{e}");
    assert!(
        with_hostname(&[], "lb.example.com").is_ok(),
        "not an ELB hostname: no opinion"
    );
}

#[test]
fn defaults_and_typed_values() {
    let svc = service(
        &[
            (Key::Internal, "0.0.0.0/0"),
            (Key::SslPorts, "443, HTTPS"),
            (Key::AdditionalResourceTags, "a=b=c"),
            (Key::SourceRanges, "10.0.0.0/8"),
        ],
        &[(80, 30080), (443, 30443)],
    );
    let spec = parse_service(&svc).unwrap();
    assert!(spec.internal);
    assert_eq!(spec.idle_timeout, 60);
    assert_eq!(spec.source_ranges, ["10.0.0.0/8"]);
    assert_eq!(spec.additional_tags.get("a").map(String::as_str), Some("b=c"));
    let p = |port, name: &str| PortSpec::new(name, "TCP", port, 1, Some(port));
    assert!(spec.is_ssl_port(&p(443, "x")));
    assert!(
        spec.is_ssl_port(&p(8443, "https")),
        "names compare case-insensitively"
    );
    assert!(!spec.is_ssl_port(&p(80, "http")));
    // The field wins over the annotation.
    let mut svc = svc;
    svc.spec.as_mut().unwrap().load_balancer_source_ranges = Some(vec!["192.168.0.0/16".into()]);
    assert_eq!(parse_service(&svc).unwrap().source_ranges, ["192.168.0.0/16"]);
}

#[test]
fn bad_values_of_annotations_the_flavour_ignores_do_not_block() {
    // Proxy protocol is served on NLBs now, but Go ignored it there whatever its value: a warning, no refusal.
    let nlb = service(
        &[(Key::Type, "nlb"), (Key::ProxyProtocol, "true")],
        &[(80, 30080)],
    );
    let spec = parse_service(&nlb).unwrap();
    assert_eq!(spec.flavour, Flavour::Network);
    assert_eq!(spec.warnings.len(), 1, "{:?}", spec.warnings);
    assert_eq!(spec.warnings[0].field, Key::ProxyProtocol.name());
    assert!(spec.target_group_attributes.is_empty());
    let clb = service(&[(Key::EipAllocations, "not-an-eip")], &[(80, 30080)]);
    assert_eq!(parse_service(&clb).unwrap().flavour, Flavour::Classic);
    let clb = service(&[(Key::ProxyProtocol, "true")], &[(80, 30080)]);
    assert_eq!(
        fields(&parse_service(&clb).unwrap_err()),
        [Key::ProxyProtocol.name()]
    );
}

#[test]
fn go_era_values_are_served_with_gos_meaning_and_warnings() {
    let mut svc = service(
        &[
            (Key::Internal, "False"),
            (Key::Type, "NLB"),
            (Key::SourceRanges, "bogus"),
            (Key::AccessLogEnabled, ""),
            (Key::SecurityGroups, ""),
            (Key::AdditionalResourceTags, "team=a,=x"),
        ],
        &[(80, 30080)],
    );
    svc.spec.as_mut().unwrap().load_balancer_source_ranges = Some(vec!["10.0.0.0/8".into()]);
    let spec = parse_service(&svc).unwrap();
    assert!(spec.internal, "Go: any value but \"false\" is internal");
    assert_eq!(spec.flavour, Flavour::Classic, "Go: only \"nlb\" is an NLB");
    assert_eq!(spec.source_ranges, ["10.0.0.0/8"]);
    assert!(!spec.access_log.enabled);
    assert_eq!(spec.security_groups, None, "an empty list is the managed group");
    assert_eq!(spec.additional_tags.get("team").map(String::as_str), Some("a"));
    let warned: Vec<&str> = spec.warnings.iter().map(|w| w.field.as_str()).collect();
    assert_eq!(
        warned,
        [
            Key::Type.name(),
            Key::Internal.name(),
            Key::AdditionalResourceTags.name(),
            Key::SourceRanges.name(),
        ]
    );
    assert!(
        spec.warnings[1].to_string().contains("served as internal"),
        "{}",
        spec.warnings[1]
    );
}

#[test]
fn an_empty_bucket_name_with_access_logs_is_refused() {
    let svc = service(
        &[(Key::AccessLogEnabled, "true"), (Key::AccessLogS3BucketName, "")],
        &[(80, 30080)],
    );
    let e = parse_service(&svc).unwrap_err();
    assert_eq!(fields(&e), [Key::AccessLogS3BucketName.name()]);
}

#[test]
fn load_balancer_attributes_agree_with_the_cross_zone_and_access_log_annotations() {
    let nlb = |annotations: &[(Key, &str)]| {
        let mut all = annotations.to_vec();
        all.push((Key::Type, "nlb"));
        parse_service(&service(&all, &[(80, 30080)]))
    };
    let attributes = (
        Key::LoadBalancerAttributes,
        "load_balancing.cross_zone.enabled=true",
    );
    // The attribute alone sets cross zone; with the annotation it must agree.
    assert!(nlb(&[attributes]).unwrap().cross_zone);
    assert!(nlb(&[attributes, (Key::CrossZoneLoadBalancingEnabled, "true")]).is_ok());
    let e = nlb(&[attributes, (Key::CrossZoneLoadBalancingEnabled, "false")]).unwrap_err();
    assert_eq!(fields(&e), [Key::LoadBalancerAttributes.name()]);
    let message = e.to_string();
    assert!(
        message.contains(Key::CrossZoneLoadBalancingEnabled.name())
            && message.contains("cross_zone.enabled=false"),
        "names both annotations: {message}"
    );
    // Access logs: one of the two ways.
    let logs = (
        Key::LoadBalancerAttributes,
        "access_logs.s3.enabled=true,access_logs.s3.bucket=b",
    );
    assert_eq!(nlb(&[logs]).unwrap().load_balancer_attributes.len(), 2);
    let e = nlb(&[logs, (Key::AccessLogS3BucketPrefix, "p")]).unwrap_err();
    assert!(e.to_string().contains(Key::AccessLogS3BucketPrefix.name()), "{e}");
    // An error on a Classic ELB.
    let e = parse_service(&service(&[attributes], &[(80, 30080)])).unwrap_err();
    assert_eq!(fields(&e), [Key::LoadBalancerAttributes.name()]);
}

#[test]
fn ip_families_choose_the_address_type_and_the_annotation_wins() {
    let parse = |annotations: &[(Key, &str)], families: &[&str], policy: &str| {
        let mut svc = service(annotations, &[(80, 30080)]);
        let spec = svc.spec.as_mut().unwrap();
        spec.ip_families = Some(families.iter().map(|f| (*f).to_owned()).collect());
        spec.ip_family_policy = Some(policy.to_owned());
        parse_service(&svc)
    };
    let nlb = [(Key::Type, "nlb")];
    let both = ["IPv4", "IPv6"];
    // NLB: dual-stack when the cluster made the Service so, or it is required; preferred only falls back.
    let s = parse(&nlb, &both, "PreferDualStack").unwrap();
    assert_eq!(
        (s.ip_address_type, s.dual_stack_preferred),
        (IpAddressType::Dualstack, true)
    );
    let s = parse(&nlb, &both, "RequireDualStack").unwrap();
    assert_eq!(
        (s.ip_address_type, s.dual_stack_preferred),
        (IpAddressType::Dualstack, false)
    );
    let s = parse(&nlb, &["IPv4"], "PreferDualStack").unwrap();
    assert_eq!(s.ip_address_type, IpAddressType::Ipv4, "an IPv4-only cluster");
    let s = parse(&nlb, &["IPv4"], "SingleStack").unwrap();
    assert_eq!(s.ip_address_type, IpAddressType::Ipv4);
    let s = parse(&[nlb[0], (Key::IpAddressType, "ipv4")], &both, "RequireDualStack").unwrap();
    assert_eq!(s.ip_address_type, IpAddressType::Ipv4, "the annotation wins");
    // Classic: IPv4, with a Warning when preferred, an error when required or IPv6 only.
    let s = parse(&[], &both, "PreferDualStack").unwrap();
    assert_eq!(s.ip_address_type, IpAddressType::Ipv4);
    assert_eq!(s.warnings.len(), 1);
    assert_eq!(s.warnings[0].field, "spec.ipFamilyPolicy");
    assert!(s.warnings[0].message.contains("IPv4 only"), "{}", s.warnings[0]);
    let e = parse(&[], &both, "RequireDualStack").unwrap_err();
    assert_eq!(fields(&e), ["spec.ipFamilyPolicy"]);
    assert!(e.to_string().contains("a Classic ELB serves IPv4 only"), "{e}");
    let e = parse(&[], &["IPv6"], "SingleStack").unwrap_err();
    assert_eq!(fields(&e), ["spec.ipFamilies"]);
    assert!(parse(&[], &["IPv4"], "SingleStack").unwrap().warnings.is_empty());
}

#[test]
fn a_chosen_name_is_checked_against_awss_limits() {
    let named = |name: &str| parse_service(&service(&[(Key::LoadBalancerName, name)], &[(80, 30080)]));
    assert_eq!(
        named("web-prod-1").unwrap().load_balancer_name.as_deref(),
        Some("web-prod-1")
    );
    assert_eq!(
        named(&"a".repeat(32)).unwrap().load_balancer_name.unwrap().len(),
        32
    );
    for bad in [&"a".repeat(33), "-web", "web-", "web_prod", "internal-web", "wéb"] {
        let e = named(bad).expect_err(bad);
        assert_eq!(fields(&e), [Key::LoadBalancerName.name()], "{bad:?}");
        assert!(
            e.problems[0]
                .accepted
                .contains("1 to 32 letters, digits and hyphens"),
            "{e}"
        );
    }
    let unnamed = parse_service(&service(&[], &[(80, 30080)])).unwrap();
    assert_eq!(unnamed.load_balancer_name, None);
    // As with every annotation, an empty value is no value: the UID name.
    assert_eq!(named("").unwrap().load_balancer_name, None);
}

#[test]
fn the_albc_scheme_key_decides_and_must_agree_with_internal() {
    let internal = |annotations: &[(Key, &str)]| {
        let mut with_type = vec![(Key::Type, "nlb")];
        with_type.extend_from_slice(annotations);
        parse_service(&service(&with_type, &[(80, 30080)])).map(|s| s.internal)
    };
    // The trap: the AWS Load Balancer Controller's key alone once gave an internet-facing NLB.
    assert!(internal(&[(Key::Scheme, "internal")]).unwrap());
    assert!(internal(&[(Key::Scheme, "Internal")]).unwrap());
    assert!(!internal(&[(Key::Scheme, "internet-facing")]).unwrap());
    assert!(!internal(&[(Key::Scheme, "")]).unwrap());
    assert!(!internal(&[]).unwrap(), "Go's default, not the ALBC's");
    assert!(internal(&[(Key::Scheme, "internal"), (Key::Internal, "true")]).unwrap());
    assert!(!internal(&[(Key::Scheme, "internet-facing"), (Key::Internal, "false")]).unwrap());
    for (scheme, flag, other) in [
        ("internal", "false", "internet-facing"),
        ("internet-facing", "true", "internal"),
    ] {
        let e = internal(&[(Key::Scheme, scheme), (Key::Internal, flag)]).unwrap_err();
        assert_eq!(fields(&e), [Key::Scheme.name()]);
        let message = e.to_string();
        assert!(
            message.contains(Key::Internal.name()) && message.contains(other),
            "{message}"
        );
    }
    let e = internal(&[(Key::Scheme, "private")]).unwrap_err();
    assert!(e.to_string().contains("internal, internet-facing"), "{e}");
    // A Classic ELB reads it too.
    let classic = service(&[(Key::Scheme, "internal")], &[(80, 30080)]);
    assert!(parse_service(&classic).unwrap().internal);
}

#[test]
fn a_named_health_check_port_is_that_ports_node_port() {
    let mut svc = service(&[(Key::HealthcheckPort, "health")], &[(80, 30080), (8081, 30081)]);
    let ports = svc.spec.as_mut().unwrap().ports.as_mut().unwrap();
    ports[0].name = Some("web".into());
    ports[1].name = Some("health".into());
    assert_eq!(parse_service(&svc).unwrap().health_check.port, Some(Some(30081)));

    let mut unknown = svc.clone();
    unknown
        .metadata
        .annotations
        .as_mut()
        .unwrap()
        .insert(Key::HealthcheckPort.name().to_owned(), "metrics".to_owned());
    let e = parse_service(&unknown).unwrap_err();
    assert_eq!(fields(&e), [Key::HealthcheckPort.name()]);
    let message = e.to_string();
    assert!(message.contains("web, health"), "{message}");
}

#[test]
fn targets_follow_endpoints_only_on_an_nlb_under_local_traffic() {
    let endpoint_nodes_only = |annotations: &[(Key, &str)], policy: &str| {
        let mut svc = service(annotations, &[(80, 30080)]);
        svc.spec.as_mut().unwrap().external_traffic_policy = Some(policy.to_owned());
        parse_service(&svc).map(|s| s.endpoint_nodes_only)
    };
    let nlb = |value| vec![(Key::Type, "nlb"), (Key::TargetNodesWithEndpoints, value)];
    assert!(endpoint_nodes_only(&nlb("true"), "Local").unwrap());
    assert!(!endpoint_nodes_only(&nlb("false"), "Local").unwrap());
    assert!(!endpoint_nodes_only(&[(Key::Type, "nlb")], "Local").unwrap());
    // Under Cluster every node forwards: the annotation would not do what its author expects.
    let e = endpoint_nodes_only(&nlb("true"), "Cluster").unwrap_err();
    assert_eq!(fields(&e), [Key::TargetNodesWithEndpoints.name()]);
    assert!(e.to_string().contains("externalTrafficPolicy: Local"), "{e}");
    let e = endpoint_nodes_only(&nlb("yes"), "Local").unwrap_err();
    assert_eq!(fields(&e), [Key::TargetNodesWithEndpoints.name()]);
    // On a Classic ELB it is refused: it would not do what it says there.
    let e = endpoint_nodes_only(&[(Key::TargetNodesWithEndpoints, "true")], "Local").unwrap_err();
    assert_eq!(fields(&e), [Key::TargetNodesWithEndpoints.name()]);
    assert!(e.to_string().contains("only supported on NLB"), "{e}");
}
