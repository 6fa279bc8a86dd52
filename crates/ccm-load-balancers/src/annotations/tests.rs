use super::*;
use std::collections::BTreeMap;

#[test]
fn the_table_is_in_key_order_and_declares_each_key_once() {
    assert_eq!(ANNOTATIONS.len(), Key::ALL.len());
    for (i, key) in Key::ALL.iter().enumerate() {
        assert_eq!(ANNOTATIONS[i].key, *key, "entry {i} is out of order");
    }
    let mut names: Vec<&str> = ANNOTATIONS.iter().map(|d| d.name).collect();
    names.sort_unstable();
    names.dedup();
    assert_eq!(
        names.len(),
        ANNOTATIONS.len(),
        "an annotation name is declared twice"
    );
    for def in ANNOTATIONS {
        assert!(
            def.name.starts_with(PREFIX) || def.key == Key::SourceRanges,
            "{} lacks the prefix",
            def.name
        );
        assert!(
            !def.doc.is_empty() && !def.default.is_empty(),
            "{} is undocumented",
            def.name
        );
    }
}

#[test]
fn every_annotation_of_the_reference_is_in_the_table() {
    // Section 1.3 of the reference, NLB keys included.
    let reference = [
        "type",
        "internal",
        "proxy-protocol",
        "access-log-emit-interval",
        "access-log-enabled",
        "access-log-s3-bucket-name",
        "access-log-s3-bucket-prefix",
        "connection-draining-enabled",
        "connection-draining-timeout",
        "connection-idle-timeout",
        "cross-zone-load-balancing-enabled",
        "security-groups",
        "extra-security-groups",
        "ssl-cert",
        "ssl-ports",
        "ssl-negotiation-policy",
        "backend-protocol",
        "additional-resource-tags",
        "healthcheck-healthy-threshold",
        "healthcheck-unhealthy-threshold",
        "healthcheck-timeout",
        "healthcheck-interval",
        "healthcheck-protocol",
        "healthcheck-port",
        "healthcheck-path",
        "eip-allocations",
        "private-ipv4-addresses",
        "subnets",
        "target-node-labels",
        "target-group-attributes",
    ];
    for suffix in reference {
        let name = format!("{PREFIX}{suffix}");
        assert!(ANNOTATIONS.iter().any(|d| d.name == name), "{name} missing");
    }
    // Plus Kubernetes's load-balancer-source-ranges, the AWS Load Balancer Controller's keys and this
    // controller's own, each marked with its origin.
    let others: Vec<&str> = ANNOTATIONS
        .iter()
        .filter(|d| d.key.origin() != Origin::Go)
        .map(|d| d.name)
        .collect();
    assert_eq!(
        others,
        [
            format!("{PREFIX}scheme"),
            format!("{PREFIX}security-group-prefix-lists"),
            format!("{PREFIX}target-nodes-with-endpoints"),
            format!("{PREFIX}nlb-target-type"),
            format!("{PREFIX}allow-proxy-protocol"),
            format!("{PREFIX}healthcheck-success-codes"),
            format!("{PREFIX}ip-address-type"),
            format!("{PREFIX}allow-recreation"),
            format!("{PREFIX}alpn-policy"),
            format!("{PREFIX}attributes"),
            format!("{PREFIX}listener-attributes.<PROTOCOL>-<port>"),
            format!("{PREFIX}name"),
            format!("{PREFIX}adopt"),
            format!("{PREFIX}release-on-deletion"),
        ]
    );
    assert_eq!(
        ANNOTATIONS.len(),
        reference.len() + 1 + others.len(),
        "plus load-balancer-source-ranges"
    );
}

/// (key, value, expected parse) for accepted values.
#[test]
fn good_values() {
    let s = |v: &str| Value::Text(v.to_owned());
    let l = |v: &[&str]| Value::List(v.iter().map(|s| (*s).to_owned()).collect());
    let p = |v: &[(&str, &str)]| {
        Value::Pairs(
            v.iter()
                .map(|(a, b)| ((*a).to_owned(), (*b).to_owned()))
                .collect(),
        )
    };
    let table: Vec<(Key, &str, Value)> = vec![
        (Key::Type, "nlb", s("nlb")),
        (Key::Type, "NLB", s("nlb")),
        (Key::Type, "nlb-ip", s("nlb-ip")),
        (Key::Type, "external", s("external")),
        (Key::Type, "classic", s("classic")),
        (Key::Internal, "true", s("true")),
        (Key::Internal, "0.0.0.0/0", s("0.0.0.0/0")),
        (Key::Internal, "false", s("false")),
        (Key::Scheme, "internet-facing", s("internet-facing")),
        (Key::Scheme, "INTERNAL", s("internal")),
        (Key::ProxyProtocol, "*", s("*")),
        (Key::AccessLogEmitInterval, "5", Value::Int(5)),
        (Key::AccessLogEmitInterval, "60", Value::Int(60)),
        (Key::AccessLogEnabled, "True", Value::Bool(true)),
        (Key::AccessLogEnabled, "0", Value::Bool(false)),
        (Key::ConnectionIdleTimeout, " 120 ", Value::Int(120)),
        (Key::ConnectionDrainingTimeout, "3600", Value::Int(3600)),
        (Key::SecurityGroups, "sg-1, sg-2", l(&["sg-1", "sg-2"])),
        (Key::ExtraSecurityGroups, "sg-3", l(&["sg-3"])),
        (
            Key::SslCert,
            "arn:aws:acm:us-east-1:1:certificate/x",
            s("arn:aws:acm:us-east-1:1:certificate/x"),
        ),
        (Key::SslPorts, "443, https", l(&["443", "https"])),
        (Key::SslPorts, "*", l(&[])),
        (Key::SslPorts, "", l(&[])),
        (
            Key::SslNegotiationPolicy,
            "ELBSecurityPolicy-2016-08",
            s("ELBSecurityPolicy-2016-08"),
        ),
        (Key::BackendProtocol, "HTTP", s("http")),
        (
            Key::AdditionalResourceTags,
            "a=1, b=, c, d=x=y",
            p(&[("a", "1"), ("b", ""), ("c", ""), ("d", "x=y")]),
        ),
        (Key::HealthcheckHealthyThreshold, "2", Value::Int(2)),
        (Key::HealthcheckUnhealthyThreshold, "10", Value::Int(10)),
        (Key::HealthcheckTimeout, "5", Value::Int(5)),
        (Key::HealthcheckInterval, "300", Value::Int(300)),
        (Key::HealthcheckProtocol, "https", s("HTTPS")),
        (Key::HealthcheckPort, "traffic-port", Value::Port(None)),
        (Key::HealthcheckPort, "8080", Value::Port(Some(8080))),
        (
            Key::HealthcheckPort,
            "health",
            Value::PortName("health".to_owned()),
        ),
        (Key::HealthcheckPort, "h2c-9", Value::PortName("h2c-9".to_owned())),
        (Key::HealthcheckPath, "/ready", s("/ready")),
        (
            Key::EipAllocations,
            "eipalloc-1,eipalloc-2",
            l(&["eipalloc-1", "eipalloc-2"]),
        ),
        (
            Key::PrivateIpv4Addresses,
            "10.0.0.5, 10.0.1.5",
            l(&["10.0.0.5", "10.0.1.5"]),
        ),
        (Key::Subnets, "subnet-1, public-a", l(&["subnet-1", "public-a"])),
        (
            Key::TargetNodeLabels,
            "role=web,zone",
            p(&[("role", "web"), ("zone", "")]),
        ),
        (
            Key::TargetGroupAttributes,
            "preserve_client_ip.enabled=false,proxy_protocol_v2.enabled=true",
            p(&[
                ("preserve_client_ip.enabled", "false"),
                ("proxy_protocol_v2.enabled", "true"),
            ]),
        ),
        (
            Key::TargetGroupAttributes,
            "deregistration_delay.timeout_seconds=30",
            p(&[("deregistration_delay.timeout_seconds", "30")]),
        ),
        (
            Key::SourceRanges,
            "10.0.0.0/8, 2001:db8::/32",
            l(&["10.0.0.0/8", "2001:db8::/32"]),
        ),
        (Key::CrossZoneLoadBalancingEnabled, "false", Value::Bool(false)),
        (
            Key::LoadBalancerAttributes,
            "deletion_protection.enabled=true, dns_record.client_routing_policy=any_availability_zone",
            p(&[
                ("deletion_protection.enabled", "true"),
                ("dns_record.client_routing_policy", "any_availability_zone"),
            ]),
        ),
        (
            Key::LoadBalancerAttributes,
            "secondary_ips.auto_assigned.per_subnet=2",
            p(&[("secondary_ips.auto_assigned.per_subnet", "2")]),
        ),
        (Key::ConnectionDrainingEnabled, "t", Value::Bool(true)),
        (Key::AccessLogS3BucketName, "logs", s("logs")),
        (Key::AccessLogS3BucketPrefix, "a/b", s("a/b")),
    ];
    for (key, raw, want) in table {
        assert_eq!(parse_value(key, raw), Ok(want), "{}={raw:?}", key.name());
    }
}

/// (key, bad value, a word of the accepted-values text) for refused values.
#[test]
fn bad_values_name_what_is_accepted() {
    let table: &[(Key, &str, &str)] = &[
        (Key::Type, "alb", "one of classic, clb, nlb, nlb-ip, external"),
        (Key::Internal, "yes", "one of true, false, 0.0.0.0/0"),
        (Key::Scheme, "private", "one of internal, internet-facing"),
        (Key::ProxyProtocol, "true", "one of *"),
        (Key::AccessLogEmitInterval, "10", "one of 5, 60"),
        (Key::AccessLogEnabled, "yes", "true or false"),
        (Key::ConnectionIdleTimeout, "0", "an integer from 1 to 4000"),
        (Key::ConnectionIdleTimeout, "abc", "an integer from 1 to 4000"),
        (Key::ConnectionDrainingTimeout, "3601", "from 1 to 3600"),
        (Key::CrossZoneLoadBalancingEnabled, "", "true or false"),
        (Key::SecurityGroups, "group-1", "starting with sg-"),
        (Key::SecurityGroups, "", "starting with sg-"),
        (Key::ExtraSecurityGroups, "sg-", "starting with sg-"),
        (Key::SslCert, "my-cert", "arn:"),
        (Key::SslPorts, "443,99999", "port numbers or port names"),
        (Key::SslPorts, "https port", "port numbers or port names"),
        (Key::SslNegotiationPolicy, " ", "non-empty"),
        (Key::BackendProtocol, "grpc", "one of http, https, ssl, tcp"),
        (Key::AdditionalResourceTags, "=v", "key=value"),
        (Key::AdditionalResourceTags, "aws:x=1", "not aws:"),
        (
            Key::AdditionalResourceTags,
            "team=web,kubernetes.io/cluster/other=owned",
            "the key \"kubernetes.io/cluster/other\" is refused",
        ),
        (
            Key::AdditionalResourceTags,
            "KubernetesCluster=other",
            "\"KubernetesCluster\" is refused",
        ),
        (
            Key::AdditionalResourceTags,
            "Kubernetes.io/Cluster/x=shared",
            "is refused",
        ),
        (
            Key::AdditionalResourceTags,
            "kubernetes.io/service-name=other/web",
            "\"kubernetes.io/service-name\" is refused",
        ),
        (Key::HealthcheckHealthyThreshold, "1", "from 2 to 10"),
        (Key::HealthcheckUnhealthyThreshold, "11", "from 2 to 10"),
        (Key::HealthcheckTimeout, "1", "from 2 to 120"),
        (Key::HealthcheckInterval, "4", "from 5 to 300"),
        (Key::HealthcheckProtocol, "UDP", "one of TCP, SSL, HTTP, HTTPS"),
        (Key::HealthcheckPort, "0", "traffic-port, a port number"),
        (Key::HealthcheckPort, "HTTP", "or the name of a Service port"),
        (Key::HealthcheckPort, "-http", "or the name of a Service port"),
        (
            Key::HealthcheckPort,
            "a-very-long-port-name",
            "or the name of a Service port",
        ),
        (Key::HealthcheckPath, "healthz", "starting with /"),
        (Key::EipAllocations, "eip-1", "starting with eipalloc-"),
        (Key::PrivateIpv4Addresses, "10.0.0.300", "IPv4 addresses"),
        (Key::Subnets, " , ", "subnet IDs"),
        (Key::TargetNodeLabels, "=x", "node labels"),
        (
            Key::TargetGroupAttributes,
            "deregistration_delay.timeout_seconds=3601",
            "deregistration_delay.timeout_seconds=0..3600",
        ),
        (
            Key::TargetGroupAttributes,
            "Bogus Attribute=true",
            "preserve_client_ip.enabled",
        ),
        (
            Key::TargetGroupAttributes,
            "stickiness.enabled=",
            "attribute of NLB target groups",
        ),
        (
            Key::TargetGroupAttributes,
            "preserve_client_ip.enabled=",
            "true|false",
        ),
        (
            Key::TargetGroupAttributes,
            "proxy_protocol_v2.enabled=yes",
            "true|false",
        ),
        (
            Key::TargetGroupAttributes,
            "proxy_protocol_v2.enabled=true,proxy_protocol_v2.enabled=false",
            "each key once",
        ),
        (
            Key::LoadBalancerAttributes,
            "deletion_protection.enabled=yes",
            "deletion_protection.enabled=true|false",
        ),
        (
            Key::LoadBalancerAttributes,
            "dns_record.client_routing_policy=nearest",
            "availability_zone_affinity|partial_availability_zone_affinity|any_availability_zone",
        ),
        (
            Key::LoadBalancerAttributes,
            "deletion_protection.enabled=true,deletion_protection.enabled=false",
            "each key once",
        ),
        (
            Key::LoadBalancerAttributes,
            "Deletion Protection=true",
            "NLB attributes",
        ),
        (
            Key::LoadBalancerAttributes,
            "idle_timeout.timeout_seconds=",
            "NLB attributes",
        ),
        (Key::SourceRanges, "10.0.0.0", "CIDRs"),
        (Key::SourceRanges, "10.0.0.0/33", "CIDRs"),
        (Key::AccessLogS3BucketName, "", "non-empty"),
    ];
    for (key, raw, accepted) in table {
        let err = parse_value(*key, raw).expect_err(&format!("{}={raw:?} must be refused", key.name()));
        assert!(
            err.contains(accepted),
            "{}={raw:?}: {err:?} lacks {accepted:?}",
            key.name()
        );
    }
}

#[test]
fn parse_collects_every_bad_annotation() {
    let raw: BTreeMap<String, String> = [
        (Key::ConnectionIdleTimeout.name(), "soon"),
        (Key::ProxyProtocol.name(), "yes"),
        (Key::CrossZoneLoadBalancingEnabled.name(), "true"),
        ("unrelated.example.com/x", "whatever"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect();
    let parsed = Annotations::parse(&raw);
    let fields: Vec<&str> = parsed.problems.iter().map(|p| p.field.as_str()).collect();
    assert_eq!(
        fields,
        [Key::ProxyProtocol.name(), Key::ConnectionIdleTimeout.name()]
    );
    assert_eq!(parsed.problems[1].value, "soon");
    assert_eq!(parsed.bool(Key::CrossZoneLoadBalancingEnabled), Some(true));
    assert!(!parsed.has(Key::ProxyProtocol));
}

#[test]
fn markdown_has_a_row_per_annotation() {
    let md = render_markdown();
    for def in ANNOTATIONS {
        assert_eq!(
            md.matches(&format!("| `{}` |", def.name)).count(),
            1,
            "{}",
            def.name
        );
    }
}

/// Attribute keys are checked against the keys AWS documents for NLBs, their listeners and target groups (and
/// the operator's extra keys), with the other annotation values: an unknown key is a problem naming it and the
/// accepted keys; an unknown target group key is skipped with a warning, as the Go controller did.
#[test]
fn attribute_keys_are_those_aws_documents_for_nlbs_or_the_operators() {
    let raw: BTreeMap<String, String> = [
        (
            Key::LoadBalancerAttributes.name().to_owned(),
            "deletion_protection.enabled=true,routing.http2.enabled=true".to_owned(),
        ),
        (
            format!("{LISTENER_ATTRIBUTES_PREFIX}TCP-80"),
            "tcp.idle_timeout.seconds=600,future.key=1".to_owned(),
        ),
        (
            Key::TargetGroupAttributes.name().to_owned(),
            "stickiness.enabled=true,future.key=1".to_owned(),
        ),
    ]
    .into();
    let parsed = Annotations::parse(&raw);
    let problems: Vec<(&str, &str)> = parsed
        .problems
        .iter()
        .map(|p| (p.field.as_str(), p.value.as_str()))
        .collect();
    let listener = format!("{LISTENER_ATTRIBUTES_PREFIX}TCP-80");
    assert_eq!(
        problems,
        [
            (Key::LoadBalancerAttributes.name(), "routing.http2.enabled=true"),
            (listener.as_str(), "future.key=1"),
        ]
    );
    assert!(
        parsed.problems[0]
            .accepted
            .contains("the key \"routing.http2.enabled\" is unknown")
            && parsed.problems[0]
                .accepted
                .contains(&NLB_ATTRIBUTE_KEYS.join(", ")),
        "{}",
        parsed.problems[0]
    );
    assert!(
        parsed.warnings[0].message.contains("ignored future.key=1"),
        "{:?}",
        parsed.warnings
    );
    assert_eq!(
        parsed.pairs(Key::TargetGroupAttributes),
        Some(&[("stickiness.enabled".to_owned(), "true".to_owned())][..])
    );

    // The operator's extra keys are accepted in all three.
    let keys = AttributeKeys::with_extra([" future.key ", "routing.http2.enabled", ""]);
    let parsed = Annotations::parse_with(&raw, &keys);
    assert_eq!(parsed.problems, []);
    assert_eq!(parsed.warnings, []);
    assert_eq!(parsed.pairs(Key::TargetGroupAttributes).map(<[_]>::len), Some(2));
}

#[test]
fn the_checked_attribute_values_are_of_documented_keys() {
    for (key, _) in NLB_ATTRIBUTES {
        assert!(NLB_ATTRIBUTE_KEYS.contains(key), "{key}");
    }
    assert!(NLB_LISTENER_ATTRIBUTE_KEYS.contains(&TCP_IDLE_TIMEOUT.0));
    for key in [
        "preserve_client_ip.enabled",
        "proxy_protocol_v2.enabled",
        "deregistration_delay.timeout_seconds",
    ] {
        assert!(NLB_TARGET_GROUP_ATTRIBUTE_KEYS.contains(&key), "{key}");
    }
}
