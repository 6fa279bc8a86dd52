//! The fields of a [`ServiceSpec`] besides its flavour: ports, source ranges, health check, access logs,
//! target group attributes and the plain annotations, each validated with every problem collected.

use std::collections::BTreeMap;

use k8s_openapi::{
    api::core::v1::{Service, ServiceSpec as K8sServiceSpec},
    apimachinery::pkg::util::intstr::IntOrString,
};

use super::{AccessLogSpec, Findings, Flavour, HealthCheckSpec, PortSpec, ServiceSpec};
use crate::annotations::{Annotations, Key, Warning};

fn i32_of(annotations: &Annotations, key: Key) -> Option<i32> {
    annotations.int(key).and_then(|v| i32::try_from(v).ok())
}

/// Source ranges: the field wins over the annotation, which Go then never read (even a bad value): the
/// annotation's problem becomes a warning.
pub(crate) fn source_ranges_field_wins(
    k8s: &K8sServiceSpec,
    raw: &BTreeMap<String, String>,
    found: &mut Findings,
) {
    if k8s
        .load_balancer_source_ranges
        .as_deref()
        .is_some_and(|r| !r.is_empty())
        && let Some(value) = raw.get(Key::SourceRanges.name())
        && found.problems.iter().any(|p| p.field == Key::SourceRanges.name())
    {
        found.problems.retain(|p| p.field != Key::SourceRanges.name());
        found.warnings.push(Warning {
            field: Key::SourceRanges.name().to_owned(),
            value: value.clone(),
            message:
                "not CIDRs, ignored: spec.loadBalancerSourceRanges is set and wins (as in the Go controller)"
                    .to_owned(),
        });
    }
}

/// Service fields AWS ELBs do not serve.
pub(crate) fn check_unsupported(k8s: &K8sServiceSpec, found: &mut Findings) {
    if let Some(affinity) = k8s.session_affinity.as_deref()
        && affinity != "None"
    {
        found.problem("spec.sessionAffinity", affinity.to_owned(), "None");
    }
    if let Some(ip) = k8s.load_balancer_ip.as_deref()
        && !ip.is_empty()
    {
        found.problem(
            "spec.loadBalancerIP",
            ip.to_owned(),
            "empty: AWS ELBs do not take a requested IP",
        );
    }
}

/// The spec of a Service whose flavour is known (its `warnings` are left for [`Findings`] to fill).
pub(crate) fn spec(
    service: &Service,
    k8s: &K8sServiceSpec,
    a: &Annotations,
    flavour: Flavour,
    found: &mut Findings,
) -> ServiceSpec {
    let meta = &service.metadata;
    // IP targets need no node port (`allocateLoadBalancerNodePorts: false`): the pods are reached directly.
    let pods_targeted = flavour == Flavour::Network && a.text(Key::NlbTargetType) == Some("ip");
    let (ports, protocols) = ports(k8s, &flavour, pods_targeted, found);
    let (source_ranges, source_ranges_defaulted) = source_ranges(k8s, a, found);
    let access_log = access_log(a, found);
    let health_check = health_check(a, &flavour, &ports, found);
    let mut target_group_attributes = target_group_attributes(a, &protocols, found);
    super::nlb_options::proxy_protocol_v2(a, &flavour, &mut target_group_attributes, found);
    let (ssl_cert, extra_ssl_certs) = super::nlb_options::certificates(a, &flavour, found);
    let health_check_success_codes = super::nlb_options::success_codes(a, found);
    let load_balancer_attributes = load_balancer_attributes(a, found);
    let (ip_address_type, dual_stack_preferred) = super::families::address_type(k8s, a, &flavour, found);
    let ipv6_targets = super::families::ipv6_targets(k8s, a, &flavour, found);
    let cross_zone = a.bool(Key::CrossZoneLoadBalancingEnabled).unwrap_or_else(|| {
        load_balancer_attributes
            .get(CROSS_ZONE_ATTRIBUTE)
            .is_some_and(|v| v == "true")
    });
    let endpoint_nodes_only = endpoint_nodes_only(k8s, a, &flavour, found);
    let has_selector = k8s.selector.as_ref().is_some_and(|s| !s.is_empty());
    let ip_targets = ip_targets(a, &flavour, (endpoint_nodes_only, has_selector), found);
    let (namespace, name) = super::namespace_and_name(service);
    ServiceSpec {
        namespace: namespace.to_owned(),
        name: name.to_owned(),
        uid: meta.uid.clone().unwrap_or_default(),
        flavour,
        internal: internal(a, found),
        ports,
        source_ranges,
        source_ranges_defaulted,
        prefix_lists: a.list(Key::SecurityGroupPrefixLists).unwrap_or_default().to_vec(),
        local_traffic: k8s.external_traffic_policy.as_deref() == Some("Local"),
        health_check_node_port: k8s.health_check_node_port.filter(|p| *p > 0),
        subnets: a.list(Key::Subnets).map(<[String]>::to_vec),
        security_groups: a.list(Key::SecurityGroups).map(<[String]>::to_vec),
        extra_security_groups: a.list(Key::ExtraSecurityGroups).unwrap_or_default().to_vec(),
        additional_tags: a
            .pairs(Key::AdditionalResourceTags)
            .unwrap_or_default()
            .iter()
            .cloned()
            .collect(),
        target_node_labels: a.pairs(Key::TargetNodeLabels).unwrap_or_default().to_vec(),
        endpoint_nodes_only,
        ip_targets,
        has_selector,
        pod_endpoints: None,
        backend_protocol: a.text(Key::BackendProtocol).map(str::to_owned),
        ssl_cert,
        extra_ssl_certs,
        ssl_ports: a.list(Key::SslPorts).unwrap_or_default().to_vec(),
        ssl_negotiation_policy: a.text(Key::SslNegotiationPolicy).map(str::to_owned),
        alpn_policy: a.text(Key::AlpnPolicy).map(str::to_owned),
        proxy_protocol: a.text(Key::ProxyProtocol) == Some("*"),
        idle_timeout: i32_of(a, Key::ConnectionIdleTimeout).unwrap_or(60),
        draining_enabled: a.bool(Key::ConnectionDrainingEnabled).unwrap_or(false),
        draining_timeout: i32_of(a, Key::ConnectionDrainingTimeout),
        cross_zone,
        access_log,
        health_check,
        health_check_success_codes,
        eip_allocations: a.list(Key::EipAllocations).unwrap_or_default().to_vec(),
        private_ipv4_addresses: a.list(Key::PrivateIpv4Addresses).unwrap_or_default().to_vec(),
        target_group_attributes,
        load_balancer_attributes,
        listener_attributes: a.listener_attributes().to_vec(),
        allow_recreation: a.bool(Key::AllowRecreation).unwrap_or(false),
        adopt: a.bool(Key::Adopt).unwrap_or(false),
        release_on_deletion: a.bool(Key::ReleaseOnDeletion),
        load_balancer_name: a.text(Key::LoadBalancerName).map(str::to_owned),
        ip_address_type,
        ipv6_targets,
        dual_stack_preferred,
        warnings: Vec::new(),
    }
}

/// Whether the scheme is `internal`: from `aws-load-balancer-scheme` (the AWS Load Balancer Controller's key) or
/// Go's `aws-load-balancer-internal`. Both set and disagreeing is a problem naming both keys: either reading could
/// expose the Service more than its author meant, so it is not served until one of them changes.
fn internal(a: &Annotations, found: &mut Findings) -> bool {
    let by_internal = a.text(Key::Internal).map(|v| matches!(v, "true" | "0.0.0.0/0"));
    let Some(scheme) = a.text(Key::Scheme) else {
        return by_internal.unwrap_or(false);
    };
    let by_scheme = scheme == "internal";
    if by_internal.is_some_and(|by_internal| by_internal != by_scheme) {
        let other = if by_scheme { "internet-facing" } else { "internal" };
        found.problem(
            Key::Scheme.name(),
            scheme.to_owned(),
            &format!(
                "{other}, as {} says, or only one of the two annotations",
                Key::Internal.name()
            ),
        );
    }
    by_scheme
}

/// Whether only the nodes with a ready endpoint are targets: asked for on an NLB under
/// `externalTrafficPolicy: Local`. Asked for under `Cluster` it is a problem: there every node forwards to the
/// endpoints, and a user who wrote it expects fewer targets than that would give.
fn endpoint_nodes_only(
    k8s: &K8sServiceSpec,
    a: &Annotations,
    flavour: &Flavour,
    found: &mut Findings,
) -> bool {
    // On a Classic ELB the key is refused with the other NLB-only keys (`reject_other_flavours_annotations`).
    if *flavour != Flavour::Network || a.bool(Key::TargetNodesWithEndpoints) != Some(true) {
        return false;
    }
    if k8s.external_traffic_policy.as_deref() != Some("Local") {
        found.problem(
            Key::TargetNodesWithEndpoints.name(),
            "true".to_owned(),
            "false, or true with spec.externalTrafficPolicy: Local (under Cluster every node forwards to the endpoints)",
        );
        return false;
    }
    true
}

/// Whether the NLB's targets are the pods' addresses (`aws-load-balancer-nlb-target-type: ip`). On a Classic
/// ELB `ip` is a problem (it has instances only); beside `target-nodes-with-endpoints` too (nodes are no targets
/// then: the author wants one or the other); `target-node-labels` then chooses no target, and a Service without a
/// selector gets none (its slices are nobody's to trust): a Warning says each.
fn ip_targets(
    a: &Annotations,
    flavour: &Flavour,
    (endpoint_nodes_only, has_selector): (bool, bool),
    found: &mut Findings,
) -> bool {
    if a.text(Key::NlbTargetType) != Some("ip") {
        return false;
    }
    match flavour {
        Flavour::Network => {}
        Flavour::Classic => {
            found.problem(
                Key::NlbTargetType.name(),
                "ip".to_owned(),
                "instance, or ip with aws-load-balancer-type: nlb (a Classic ELB has instance targets only)",
            );
            return false;
        }
        Flavour::External => return false,
    }
    if endpoint_nodes_only {
        found.problem(
            Key::TargetNodesWithEndpoints.name(),
            "true".to_owned(),
            &format!(
                "false with {}: ip (the pods are the targets, not their nodes)",
                Key::NlbTargetType.name()
            ),
        );
    }
    if let Some(labels) = a.pairs(Key::TargetNodeLabels).filter(|l| !l.is_empty()) {
        let value = labels
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(",");
        found.warn(Warning {
            field: Key::TargetNodeLabels.name().to_owned(),
            value,
            message: format!(
                "no effect on the targets with {}: ip (the pods are the targets, wherever they run)",
                Key::NlbTargetType.name()
            ),
        });
    }
    if !has_selector {
        found.warn(Warning {
            field: "spec.selector".to_owned(),
            value: String::new(),
            message: format!(
                "none: with {}: ip the targets are the pods the selector chooses (slices written for a Service \
                 without one are not trusted), so this NLB has no targets",
                Key::NlbTargetType.name()
            ),
        });
    }
    true
}

/// The ports with node ports (every port when `pods_targeted`: IP targets need none, a missing one is 0), and
/// the protocols used (in order of appearance).
fn ports(
    k8s: &K8sServiceSpec,
    flavour: &Flavour,
    pods_targeted: bool,
    found: &mut Findings,
) -> (Vec<PortSpec>, Vec<String>) {
    let mut ports = Vec::new();
    let service_ports = k8s.ports.as_deref().unwrap_or_default();
    if service_ports.is_empty() && *flavour != Flavour::External {
        found.problem("spec.ports", "[]".to_owned(), "at least one port");
    }
    let mut protocols = Vec::new();
    for (i, p) in service_ports.iter().enumerate() {
        let protocol = p.protocol.clone().unwrap_or_else(|| "TCP".to_owned());
        let allowed: &[&str] = match flavour {
            Flavour::Classic => &["TCP"],
            Flavour::Network => &["TCP", "UDP"],
            Flavour::External => &["TCP", "UDP", "SCTP"],
        };
        if !allowed.contains(&protocol.as_str()) {
            found.problem(
                &format!("spec.ports[{i}].protocol"),
                protocol.clone(),
                &format!("one of {} for this load balancer type", allowed.join(", ")),
            );
        }
        if !protocols.contains(&protocol) {
            protocols.push(protocol.clone());
        }
        match p.node_port.filter(|n| *n > 0).or(pods_targeted.then_some(0)) {
            Some(node_port) => ports.push(PortSpec {
                name: p.name.clone().unwrap_or_default(),
                protocol,
                port: p.port,
                node_port,
                target_port: match &p.target_port {
                    None => Some(p.port),
                    Some(IntOrString::Int(port)) => Some(*port),
                    Some(IntOrString::String(_)) => None,
                },
            }),
            _ => tracing::debug!(port = p.port, "service port without node port skipped"),
        }
    }
    if !service_ports.is_empty() && ports.is_empty() && *flavour != Flavour::External {
        found.problem(
            "spec.ports[].nodePort",
            "none".to_owned(),
            "at least one port with a node port (allocateLoadBalancerNodePorts must not be false)",
        );
    }
    if protocols.len() > 1 && *flavour == Flavour::Classic {
        found.problem(
            "spec.ports",
            protocols.join(","),
            "one protocol for all ports (mixed protocols are not supported)",
        );
    }
    if *flavour == Flavour::Network {
        check_tcp_udp_node_ports(&ports, found);
    }
    (ports, protocols)
}

/// TCP and UDP on one port number become one TCP_UDP listener, which forwards to one node port.
fn check_tcp_udp_node_ports(ports: &[PortSpec], found: &mut Findings) {
    for (i, p) in ports.iter().enumerate() {
        if let Some(other) = ports[..i]
            .iter()
            .find(|o| o.port == p.port && o.protocol != p.protocol && o.node_port != p.node_port)
        {
            found.problem(
                "spec.ports",
                format!(
                    "port {} {}->{} and {}->{}",
                    p.port, other.protocol, other.node_port, p.protocol, p.node_port
                ),
                "the same nodePort for TCP and UDP on one port (an NLB serves both with one TCP_UDP listener \
                 and target group)",
            );
        }
    }
}

/// The client CIDRs (the field, else the annotation, else everyone), and whether they are that default. As in
/// the AWS Load Balancer Controller, managed prefix lists without ranges replace the default: only the lists are
/// let in.
fn source_ranges(k8s: &K8sServiceSpec, a: &Annotations, found: &mut Findings) -> (Vec<String>, bool) {
    let none_given = k8s
        .load_balancer_source_ranges
        .as_deref()
        .is_none_or(<[String]>::is_empty)
        && a.list(Key::SourceRanges).is_none();
    if none_given && a.has(Key::SecurityGroupPrefixLists) {
        return (Vec::new(), false);
    }
    let defaulted = none_given;
    let ranges = match k8s.load_balancer_source_ranges.as_deref() {
        Some(ranges) if !ranges.is_empty() => {
            let mut out = Vec::new();
            for (i, r) in ranges.iter().enumerate() {
                let r = r.trim();
                if crate::annotations::is_cidr(r) {
                    out.push(r.to_owned());
                } else {
                    found.problem(
                        &format!("spec.loadBalancerSourceRanges[{i}]"),
                        r.to_owned(),
                        "a CIDR (10.0.0.0/8, 2001:db8::/32)",
                    );
                }
            }
            out
        }
        _ => a
            .list(Key::SourceRanges)
            .map_or_else(|| vec!["0.0.0.0/0".to_owned()], <[String]>::to_vec),
    };
    (ranges, defaulted)
}

fn access_log(a: &Annotations, found: &mut Findings) -> AccessLogSpec {
    let access_log = AccessLogSpec {
        enabled: a.bool(Key::AccessLogEnabled).unwrap_or(false),
        emit_interval: i32_of(a, Key::AccessLogEmitInterval),
        bucket: a.text(Key::AccessLogS3BucketName).map(str::to_owned),
        prefix: a.text(Key::AccessLogS3BucketPrefix).map(str::to_owned),
    };
    if access_log.enabled && access_log.bucket.is_none() {
        found.problem(
            Key::AccessLogS3BucketName.name(),
            String::new(),
            "a bucket name: access logs are enabled",
        );
    }
    access_log
}

/// The health check port: `traffic-port`, a number, or the name of one of the Service's ports, which stands for
/// that port's node port (the targets are instances), as the AWS Load Balancer Controller reads it.
fn health_check_port(a: &Annotations, ports: &[PortSpec], found: &mut Findings) -> Option<Option<i32>> {
    let Some(name) = a.port_name(Key::HealthcheckPort) else {
        return a.port(Key::HealthcheckPort);
    };
    if let Some(port) = ports.iter().find(|p| p.name == name) {
        return Some(Some(port.node_port));
    }
    let names: Vec<&str> = ports
        .iter()
        .map(|p| p.name.as_str())
        .filter(|n| !n.is_empty())
        .collect();
    let named = if names.is_empty() {
        "none of the Service's ports with a node port has a name".to_owned()
    } else {
        format!("the Service's named ports with a node port: {}", names.join(", "))
    };
    found.problem(
        Key::HealthcheckPort.name(),
        name.to_owned(),
        &format!("traffic-port, a port number, or a port name ({named})"),
    );
    None
}

/// The health check annotations, with the flavour's limits.
fn health_check(
    a: &Annotations,
    flavour: &Flavour,
    ports: &[PortSpec],
    found: &mut Findings,
) -> HealthCheckSpec {
    let health_check = HealthCheckSpec {
        protocol: a.text(Key::HealthcheckProtocol).map(str::to_owned),
        port: health_check_port(a, ports, found),
        path: a.text(Key::HealthcheckPath).map(str::to_owned),
        healthy_threshold: i32_of(a, Key::HealthcheckHealthyThreshold),
        unhealthy_threshold: i32_of(a, Key::HealthcheckUnhealthyThreshold),
        timeout: i32_of(a, Key::HealthcheckTimeout),
        interval: i32_of(a, Key::HealthcheckInterval),
    };
    if *flavour == Flavour::Classic {
        let timeout = health_check.timeout.unwrap_or(5);
        let interval = health_check.interval.unwrap_or(10);
        if health_check.timeout.is_some() && timeout > 60 {
            found.problem(
                Key::HealthcheckTimeout.name(),
                timeout.to_string(),
                "at most 60 on a Classic ELB",
            );
        }
        if (health_check.timeout.is_some() || health_check.interval.is_some()) && timeout >= interval {
            found.problem(
                Key::HealthcheckTimeout.name(),
                timeout.to_string(),
                &format!("less than the interval ({interval})"),
            );
        }
    }
    if *flavour == Flavour::Network && health_check.protocol.as_deref() == Some("SSL") {
        found.problem(
            Key::HealthcheckProtocol.name(),
            "SSL".to_owned(),
            "one of TCP, HTTP, HTTPS on NLB",
        );
    }
    health_check
}

/// NLB target group attributes (validated keys and values, as AWS takes them).
fn target_group_attributes(
    a: &Annotations,
    protocols: &[String],
    found: &mut Findings,
) -> BTreeMap<String, String> {
    let attributes: BTreeMap<String, String> = a
        .pairs(Key::TargetGroupAttributes)
        .unwrap_or_default()
        .iter()
        .cloned()
        .collect();
    if attributes
        .get("preserve_client_ip.enabled")
        .is_some_and(|v| v == "false")
        && protocols.iter().any(|p| p == "UDP")
    {
        found.problem(
            Key::TargetGroupAttributes.name(),
            "preserve_client_ip.enabled=false".to_owned(),
            "preserve_client_ip.enabled=true: client IP preservation cannot be disabled with UDP ports",
        );
    }
    attributes
}

/// The NLB attribute of cross-zone load balancing.
const CROSS_ZONE_ATTRIBUTE: &str = "load_balancing.cross_zone.enabled";

/// NLB attributes from `aws-load-balancer-attributes`: an attribute that another annotation also sets must
/// agree with it (cross zone), or be left to it (access logs).
fn load_balancer_attributes(a: &Annotations, found: &mut Findings) -> BTreeMap<String, String> {
    let attributes: BTreeMap<String, String> = a
        .pairs(Key::LoadBalancerAttributes)
        .unwrap_or_default()
        .iter()
        .cloned()
        .collect();
    let field = Key::LoadBalancerAttributes.name();
    if let (Some(annotation), Some(attribute)) = (
        a.bool(Key::CrossZoneLoadBalancingEnabled),
        attributes.get(CROSS_ZONE_ATTRIBUTE),
    ) && annotation.to_string() != *attribute
    {
        found.problem(
            field,
            format!("{CROSS_ZONE_ATTRIBUTE}={attribute}"),
            &format!(
                "{CROSS_ZONE_ATTRIBUTE}={annotation} as {} says, or one of the two annotations only",
                Key::CrossZoneLoadBalancingEnabled.name()
            ),
        );
    }
    let access_log_keys = [
        Key::AccessLogEnabled,
        Key::AccessLogEmitInterval,
        Key::AccessLogS3BucketName,
        Key::AccessLogS3BucketPrefix,
    ];
    if let Some(given) = access_log_keys.iter().find(|k| a.has(**k))
        && let Some((key, value)) = attributes.iter().find(|(k, _)| k.starts_with("access_logs."))
    {
        found.problem(
            field,
            format!("{key}={value}"),
            &format!(
                "no access_logs.* attribute beside {}: set access logs with one of the two",
                given.name()
            ),
        );
    }
    attributes
}
