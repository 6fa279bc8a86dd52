use super::*;

fn global(body: &str) -> GlobalConfig {
    CloudConfig::parse(&format!("[Global]\n{body}\n")).unwrap().global
}

fn errors(text: &str) -> Vec<ConfigError> {
    CloudConfig::parse(text).unwrap_err().0
}

#[test]
fn defaults_match_the_reference() {
    let g = CloudConfig::parse("").unwrap().global;
    assert_eq!(g, GlobalConfig::default());
    assert_eq!(g.node_ip_families, [IpFamily::Ipv4]);
    assert_eq!(g.shared_health_probe_port, 10256);
    assert_eq!(g.shared_health_probe_path, "/healthz");
    assert_eq!(
        g.supported_topology_instance_type_pattern,
        DEFAULT_TOPOLOGY_PATTERN
    );
    assert_eq!(g.health_probe_mode, HealthProbeMode::ServiceNodePort);
    assert_eq!(g.nlb_security_group_mode, NlbSecurityGroupMode::Off);
    assert_eq!(
        g.node_zone_label,
        NodeZoneLabel::ZoneName,
        "zone names, as upstream"
    );
    assert!(!g.disable_security_group_ingress);
    assert!(
        !g.adopt_untagged_load_balancers,
        "untagged load balancers are refused by default"
    );
    assert_eq!(g.configured_region(), None);
    assert_eq!(g.cluster_id(), None);
}

#[test]
fn every_global_field() {
    type Check = fn(&GlobalConfig) -> bool;
    let table: &[(&str, Check)] = &[
        ("Zone = us-west-2b", |g| {
            g.zone.as_deref() == Some("us-west-2b") && g.configured_region().as_deref() == Some("us-west-2")
        }),
        ("Region = eu-central-1", |g| {
            g.region.as_deref() == Some("eu-central-1")
                && g.configured_region().as_deref() == Some("eu-central-1")
        }),
        ("VPC = vpc-1", |g| g.vpc.as_deref() == Some("vpc-1")),
        ("SubnetID = subnet-1", |g| {
            g.subnet_id.as_deref() == Some("subnet-1")
        }),
        ("RouteTableID = rtb-1", |g| {
            g.route_table_id.as_deref() == Some("rtb-1")
        }),
        ("RoleARN = arn:aws:iam::123456789012:role/ccm", |g| {
            g.role_arn.as_deref() == Some("arn:aws:iam::123456789012:role/ccm")
        }),
        ("KubernetesClusterTag = legacy", |g| {
            g.kubernetes_cluster_tag.as_deref() == Some("legacy") && g.cluster_id() == Some(("legacy", true))
        }),
        ("KubernetesClusterID = prod", |g| {
            g.kubernetes_cluster_id.as_deref() == Some("prod") && g.cluster_id() == Some(("prod", false))
        }),
        ("DisableSecurityGroupIngress = true", |g| {
            g.disable_security_group_ingress
        }),
        ("DisableSecurityGroupIngress", |g| {
            g.disable_security_group_ingress
        }),
        ("DisableSecurityGroupIngress = off", |g| {
            !g.disable_security_group_ingress
        }),
        ("AdoptUntaggedLoadBalancers = true", |g| {
            g.adopt_untagged_load_balancers && !g.disable_security_group_ingress
        }),
        ("AdoptUntaggedLoadBalancers = no", |g| {
            !g.adopt_untagged_load_balancers
        }),
        ("AllowedHealthCheckPorts = 8080, 9000-9100", |g| {
            g.allowed_health_check_ports == [(8080, 8080), (9000, 9100)]
        }),
        ("AllowedHealthCheckPorts =", |g| {
            g.allowed_health_check_ports.is_empty()
        }),
        ("ElbSecurityGroup = sg-1", |g| {
            g.elb_security_group.as_deref() == Some("sg-1")
        }),
        ("NodeIPFamilies = ipv6\nNodeIPFamilies = ipv4", |g| {
            g.node_ip_families == [IpFamily::Ipv6, IpFamily::Ipv4]
        }),
        ("NodeIPFamilies = IPv6", |g| {
            g.node_ip_families == [IpFamily::Ipv6]
        }),
        ("ClusterServiceLoadBalancerHealthProbeMode = Shared", |g| {
            g.health_probe_mode == HealthProbeMode::Shared
        }),
        (
            "ClusterServiceLoadBalancerHealthProbeMode = ServiceNodePort",
            |g| g.health_probe_mode == HealthProbeMode::ServiceNodePort,
        ),
        ("ClusterServiceSharedLoadBalancerHealthProbePort = 10999", |g| {
            g.shared_health_probe_port == 10999
        }),
        ("ClusterServiceSharedLoadBalancerHealthProbePort = 0", |g| {
            g.shared_health_probe_port == 10256
        }),
        ("ClusterServiceSharedLoadBalancerHealthProbePath = /livez", |g| {
            g.shared_health_probe_path == "/livez"
        }),
        ("SupportedTopologyInstanceTypePattern = ^p5\\\\..*$", |g| {
            g.supported_topology_instance_type_pattern == "^p5\\..*$"
        }),
        ("SupportedTopologyInstanceTypePattern = \"^p5\\\\..*$\"", |g| {
            g.supported_topology_instance_type_pattern == "^p5\\..*$"
        }),
        (
            "ExtraLoadBalancerAttributeKeys = new.key.enabled, other_key.seconds",
            |g| g.extra_load_balancer_attribute_keys == ["new.key.enabled", "other_key.seconds"],
        ),
        ("ExtraLoadBalancerAttributeKeys =", |g| {
            g.extra_load_balancer_attribute_keys.is_empty()
        }),
        ("NLBSecurityGroupMode = Managed", |g| {
            g.nlb_security_group_mode == NlbSecurityGroupMode::Managed
        }),
        ("NodeZoneLabel = ZoneID", |g| {
            g.node_zone_label == NodeZoneLabel::ZoneId
        }),
        ("NodeZoneLabel = zoneid", |g| {
            g.node_zone_label == NodeZoneLabel::ZoneId
        }),
        ("NodeZoneLabel = ZoneName", |g| {
            g.node_zone_label == NodeZoneLabel::ZoneName
        }),
        ("NodeZoneLabel =", |g| {
            g.node_zone_label == NodeZoneLabel::ZoneName
        }),
        // Case-insensitive keys, quoted values, comments.
        ("kubernetesclusterid = \"a b\" ; trailing comment", |g| {
            g.kubernetes_cluster_id.as_deref() == Some("a b")
        }),
        ("REGION=us-east-2 # comment", |g| {
            g.region.as_deref() == Some("us-east-2")
        }),
        ("Region = \"with;semicolon\"", |g| {
            g.region.as_deref() == Some("with;semicolon")
        }),
    ];
    for (body, check) in table {
        let g = global(body);
        assert!(check(&g), "{body}: {g:?}");
    }
}

#[test]
fn zone_wins_over_region_and_the_source_arn_is_read() {
    let g = global(
        "Zone = us-west-2b\nRegion = eu-central-1\nRoleARN = arn:aws:iam::1:role/r\nSourceARN = arn:aws:eks:us-west-2:1:cluster/c",
    );
    assert_eq!(g.configured_region().as_deref(), Some("us-west-2"));
    assert_eq!(g.source_arn.as_deref(), Some("arn:aws:eks:us-west-2:1:cluster/c"));
}

#[test]
fn external_control_plane_needs_vpc_subnet_or_role_and_cluster_id() {
    assert!(global("VPC = vpc-1\nSubnetID = subnet-1\nKubernetesClusterID = c").is_external_control_plane());
    assert!(
        global("VPC = vpc-1\nRoleARN = arn:aws:iam::1:role/r\nKubernetesClusterTag = c")
            .is_external_control_plane()
    );
    assert!(!global("VPC = vpc-1\nSubnetID = subnet-1").is_external_control_plane());
    assert!(!global("SubnetID = subnet-1\nKubernetesClusterID = c").is_external_control_plane());
}

#[test]
fn bad_values_name_the_field_and_the_accepted_values() {
    let table: &[(&str, &str, Option<&str>)] = &[
        ("Zone = nonsense", "Global.Zone", Some("an availability zone")),
        (
            "DisableSecurityGroupIngress = maybe",
            "Global.DisableSecurityGroupIngress",
            Some("true, false"),
        ),
        (
            "NodeIPFamilies = ipv5",
            "Global.NodeIPFamilies",
            Some("ipv4, ipv6"),
        ),
        (
            "AllowedHealthCheckPorts = 9100-9000",
            "Global.AllowedHealthCheckPorts",
            Some("comma-separated ports from 1 to 65535 and ranges such as 9000-9100"),
        ),
        (
            "AllowedHealthCheckPorts = ssh",
            "Global.AllowedHealthCheckPorts",
            Some("comma-separated ports from 1 to 65535 and ranges such as 9000-9100"),
        ),
        (
            "ClusterServiceLoadBalancerHealthProbeMode = shared",
            "Global.ClusterServiceLoadBalancerHealthProbeMode",
            Some("ServiceNodePort (or empty), Shared"),
        ),
        (
            "ClusterServiceSharedLoadBalancerHealthProbePort = 70000",
            "Global.ClusterServiceSharedLoadBalancerHealthProbePort",
            Some("1 to 65535"),
        ),
        (
            "ClusterServiceSharedLoadBalancerHealthProbePath = healthz",
            "Global.ClusterServiceSharedLoadBalancerHealthProbePath",
            Some("a path starting with '/'"),
        ),
        (
            "SupportedTopologyInstanceTypePattern = ^(p",
            "Global.SupportedTopologyInstanceTypePattern",
            Some("a regular expression"),
        ),
        (
            "NLBSecurityGroupMode = managed",
            "Global.NLBSecurityGroupMode",
            Some("Managed, or empty"),
        ),
        (
            "NodeZoneLabel = use1-az1",
            "Global.NodeZoneLabel",
            Some("ZoneName (or empty) for us-east-1a, ZoneID for use1-az1"),
        ),
        (
            "ExtraLoadBalancerAttributeKeys = Idle Timeout",
            "Global.ExtraLoadBalancerAttributeKeys",
            Some("comma-separated ELBv2 attribute keys"),
        ),
        ("RoleARN = my-role", "Global.RoleARN", Some("arn:<partition>")),
        (
            "KubernetesClusterID = a\nKubernetesClusterTag = b",
            "Global.KubernetesClusterID",
            Some("the same value"),
        ),
        (
            "SourceARN = arn:aws:eks:us-west-2:1:cluster/c",
            "Global.SourceARN",
            Some("set RoleARN too"),
        ),
        (
            "Region = \"unterminated",
            "Global.Region",
            Some("a value with balanced quotes"),
        ),
        (
            "SupportedTopologyInstanceTypePattern = ^p5\\..*$",
            "Global.SupportedTopologyInstanceTypePattern",
            Some("a value with balanced quotes"),
        ),
        ("VPC", "Global.VPC", None),
    ];
    for (body, field, accepted) in table {
        let errs = errors(&format!("[Global]\n{body}\n"));
        assert_eq!(errs.len(), 1, "{body}: {errs:?}");
        assert_eq!(errs[0].field, *field, "{body}");
        match accepted {
            Some(a) => assert!(
                errs[0].accepted.as_deref().is_some_and(|x| x.starts_with(a)),
                "{body}: {:?}",
                errs[0]
            ),
            None => assert_eq!(errs[0].accepted, None),
        }
        let shown = CloudConfigErrors(errs.clone()).to_string();
        assert!(shown.contains(field), "{shown}");
    }
}

#[test]
fn every_error_is_collected_with_its_line() {
    let errs = errors("[Global]\nZone = x\nNodeIPFamilies = ipv9\nNLBSecurityGroupMode = yes\n");
    let fields: Vec<&str> = errs.iter().map(|e| e.field.as_str()).collect();
    assert_eq!(
        fields,
        [
            "Global.NodeIPFamilies",
            "Global.NLBSecurityGroupMode",
            "Global.Zone"
        ]
    );
    assert_eq!(errs[0].line, Some(3));
    assert_eq!(errs[1].line, Some(4));
    let shown = CloudConfigErrors(errs).to_string();
    assert!(
        shown.starts_with("invalid cloud config (3 problems); line 3: Global.NodeIPFamilies"),
        "{shown}"
    );
}

#[test]
fn unknown_keys_and_sections_are_warnings() {
    let config = CloudConfig::parse("[Global]\nFoo = bar\nRegion = a\nregion = b\n[Other]\nx = y\n").unwrap();
    assert_eq!(config.global.region.as_deref(), Some("b"), "the last value wins");
    assert_eq!(config.warnings.len(), 3, "{:?}", config.warnings);
    let has = |text: &str| config.warnings.iter().any(|w| w.contains(text));
    assert!(
        has("unknown key Global.Foo ignored (known keys: Zone, Region"),
        "{:?}",
        config.warnings
    );
    assert!(has("Global.Region is set more than once; the last value wins"));
    assert!(has("unknown section [Other] ignored"));
    let errs = errors("Region = x\n");
    assert_eq!(errs[0].message, "key outside of any section");
}

#[test]
fn service_overrides() {
    let config = CloudConfig::parse(
        r#"
[global]
region = us-east-1
[ServiceOverride "1"]
Service = EC2
Region = us-east-1
URL = https://ec2.example.com
SigningRegion = us-east-1
SigningName = ec2
SigningMethod = v4
[serviceoverride "elb"]
service = elasticloadbalancing
region = us-east-1
url = http://127.0.0.1:4566
signingregion = us-east-1
[ServiceOverride "imds"]
Service = ec2imds
Region = any
URL = http://127.0.0.1:1338
SigningRegion = any
"#,
    )
    .unwrap();
    assert_eq!(config.service_overrides.len(), 3);
    let ec2 = &config.service_overrides[0];
    assert_eq!(
        (ec2.name.as_str(), ec2.service.as_str(), ec2.url.as_str()),
        ("1", "EC2", "https://ec2.example.com")
    );
    assert_eq!(
        (ec2.signing_name.as_str(), ec2.signing_method.as_str()),
        ("ec2", "v4")
    );
    assert_eq!(ec2.service_kind(), Some(OverrideService::Ec2));
    assert_eq!(
        config
            .service_override(OverrideService::Elb, "us-east-1")
            .map(|o| o.name.as_str()),
        Some("elb")
    );
    assert_eq!(config.service_override(OverrideService::Elb, "eu-west-1"), None);
    assert_eq!(
        config
            .service_override(OverrideService::Imds, "eu-west-1")
            .map(|o| o.name.as_str()),
        Some("imds")
    );
    assert_eq!(
        config
            .service_override(OverrideService::Elbv2, "us-east-1")
            .map(|o| o.name.as_str()),
        Some("elb"),
        "the legacy v1 name reaches ELBv2 too"
    );
    assert_eq!(
        config
            .service_override(OverrideService::Imds, "")
            .map(|o| o.url.as_str()),
        Some("http://127.0.0.1:1338")
    );
}

#[test]
fn service_override_errors() {
    let errs = errors("[ServiceOverride \"x\"]\nService = EC2\n");
    let messages: Vec<String> = errs.iter().map(ToString::to_string).collect();
    assert_eq!(
        messages,
        [
            "ServiceOverride \"x\".Region: service region is missing",
            "ServiceOverride \"x\".URL: url is missing",
            "ServiceOverride \"x\".SigningRegion: signingRegion is missing",
        ]
    );
    let full = |name: &str, service: &str| {
        format!(
            "[ServiceOverride \"{name}\"]\nService = {service}\nRegion = r\nURL = https://u\nSigningRegion = r\n"
        )
    };
    let errs = errors(&format!("{}{}", full("a", "EC2"), full("b", "ec2")));
    assert_eq!(errs.len(), 1);
    assert_eq!(errs[0].field, "ServiceOverride \"b\"");
    assert!(
        errs[0]
            .message
            .contains("duplicate entry found for service override"),
        "{}",
        errs[0]
    );
    let errs = errors(&full("c", "S3"));
    assert_eq!(errs[0].field, "ServiceOverride \"c\".Service");
    assert!(
        errs[0]
            .accepted
            .as_deref()
            .unwrap()
            .contains("Elastic Load Balancing v2")
    );
    let errs = errors("[ServiceOverride]\n");
    assert_eq!(errs[0].field, "ServiceOverride");
    let errs =
        errors("[ServiceOverride \"d\"]\nService = EC2\nRegion = r\nURL = ftp://x\nSigningRegion = r\n");
    assert_eq!(errs[0].field, "ServiceOverride \"d\".URL");
}

#[test]
fn zones_to_regions() {
    assert_eq!(region_of_zone("us-east-1a").as_deref(), Some("us-east-1"));
    assert_eq!(region_of_zone("us-gov-west-1b").as_deref(), Some("us-gov-west-1"));
    assert_eq!(
        region_of_zone("cn-northwest-1c").as_deref(),
        Some("cn-northwest-1")
    );
    assert_eq!(region_of_zone("nonsense"), None);
}
