//! A Service parsed once into a typed [`ServiceSpec`]: the annotations of the table, the relevant Service fields,
//! and every problem collected (never only the first).

use std::collections::BTreeMap;

use ccm_aws_api::Tags;
use k8s_openapi::api::core::v1::Service;
use serde::Serialize;

use crate::annotations::{Annotations, Applies, Key, Problem, Warning};

/// Where the load balancer of a Service comes from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub enum Flavour {
    /// A Classic ELB (the default).
    Classic,
    /// An NLB with instance targets.
    Network,
    /// `nlb-ip` or `external`: the AWS Load Balancer Controller's business.
    External,
}

/// The IP address type of an NLB (`aws-load-balancer-ip-address-type`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum IpAddressType {
    /// IPv4 addresses only (the default).
    #[default]
    Ipv4,
    /// IPv4 and IPv6 addresses.
    Dualstack,
}

/// One Service port with a node port.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PortSpec {
    /// The port name (may be empty).
    pub name: String,
    /// `TCP` or `UDP`.
    pub protocol: String,
    /// The front-end port.
    pub port: i32,
    /// The node port (the back end).
    pub node_port: i32,
}

/// Access log settings.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct AccessLogSpec {
    /// Whether logs are written.
    pub enabled: bool,
    /// Minutes between files (Classic: 5 or 60).
    pub emit_interval: Option<i32>,
    /// The bucket.
    pub bucket: Option<String>,
    /// The key prefix.
    pub prefix: Option<String>,
}

/// The health check annotations (all optional: the builder applies the flavour's defaults).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct HealthCheckSpec {
    /// `TCP`, `SSL`, `HTTP`, `HTTPS`.
    pub protocol: Option<String>,
    /// `Some(None)` = `traffic-port`, `Some(Some(p))` = port `p`.
    pub port: Option<Option<i32>>,
    /// The path.
    pub path: Option<String>,
    /// Healthy threshold.
    pub healthy_threshold: Option<i32>,
    /// Unhealthy threshold.
    pub unhealthy_threshold: Option<i32>,
    /// Timeout in seconds.
    pub timeout: Option<i32>,
    /// Interval in seconds.
    pub interval: Option<i32>,
}

/// Everything about a Service that decides its load balancer, parsed and validated.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ServiceSpec {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// `metadata.uid`.
    pub uid: String,
    /// The flavour.
    pub flavour: Flavour,
    /// `internal` scheme.
    pub internal: bool,
    /// The ports with node ports, in spec order.
    pub ports: Vec<PortSpec>,
    /// Client CIDRs.
    pub source_ranges: Vec<String>,
    /// Whether `source_ranges` is the default (`0.0.0.0/0`), not given by the user.
    pub source_ranges_defaulted: bool,
    /// `externalTrafficPolicy: Local`.
    pub local_traffic: bool,
    /// `spec.healthCheckNodePort` (for `Local`).
    pub health_check_node_port: Option<i32>,
    /// Subnet IDs or names from the annotation.
    pub subnets: Option<Vec<String>>,
    /// BYO security groups.
    pub security_groups: Option<Vec<String>>,
    /// Extra security groups.
    pub extra_security_groups: Vec<String>,
    /// Additional tags.
    pub additional_tags: Tags,
    /// Node label filter (empty value = any value).
    pub target_node_labels: Vec<(String, String)>,
    /// `http`, `https`, `ssl`, `tcp`.
    pub backend_protocol: Option<String>,
    /// Certificate ARN.
    pub ssl_cert: Option<String>,
    /// Ports or names getting the certificate; empty = all.
    pub ssl_ports: Vec<String>,
    /// SSL negotiation policy name.
    pub ssl_negotiation_policy: Option<String>,
    /// Proxy protocol on the back ends.
    pub proxy_protocol: bool,
    /// Idle timeout in seconds.
    pub idle_timeout: i32,
    /// Connection draining.
    pub draining_enabled: bool,
    /// Draining timeout, if set.
    pub draining_timeout: Option<i32>,
    /// Cross-zone load balancing.
    pub cross_zone: bool,
    /// Access logs.
    pub access_log: AccessLogSpec,
    /// Health check annotations.
    pub health_check: HealthCheckSpec,
    /// NLB Elastic IP allocations.
    pub eip_allocations: Vec<String>,
    /// NLB private IPv4 addresses.
    pub private_ipv4_addresses: Vec<String>,
    /// NLB target group attributes (validated keys and values, as AWS takes them).
    pub target_group_attributes: BTreeMap<String, String>,
    /// NLB IP address type.
    pub ip_address_type: IpAddressType,
    /// Values served with the Go controller's surprising meaning (they never block the Service): logged at
    /// warning level by [`parse_service`], for the caller to post as Warning Events.
    pub warnings: Vec<Warning>,
}

/// A Service whose load balancer cannot be built: every problem found, each naming the field or annotation,
/// the value and what is accepted. Nothing in AWS is changed for such a Service.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid Service {namespace}/{name} for a load balancer: {}", problems.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
pub struct InvalidService {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// Every problem.
    pub problems: Vec<Problem>,
}

fn i32_of(annotations: &Annotations, key: Key) -> Option<i32> {
    annotations.int(key).and_then(|v| i32::try_from(v).ok())
}

/// The hostname suffixes of Classic ELBs (the China partition included, unlike upstream's check).
const CLB_SUFFIXES: &[&str] = &[".elb.amazonaws.com", ".elb.amazonaws.com.cn"];

/// What flavour the hostname of an existing load balancer says it is: `Some(true)` = Classic, `Some(false)` =
/// NLB, `None` = not an AWS ELB hostname.
pub fn existing_flavour(hostname: &str) -> Option<bool> {
    if CLB_SUFFIXES.iter().any(|s| hostname.ends_with(s)) {
        Some(true)
    } else if hostname.contains(".elb.")
        && (hostname.ends_with(".amazonaws.com") || hostname.ends_with(".amazonaws.com.cn"))
    {
        Some(false)
    } else {
        None
    }
}

/// Parses and validates a Service; every problem is collected.
pub fn parse_service(service: &Service) -> Result<ServiceSpec, InvalidService> {
    let meta = &service.metadata;
    let namespace = meta.namespace.clone().unwrap_or_else(|| "default".to_owned());
    let name = meta.name.clone().unwrap_or_default();
    let empty = BTreeMap::new();
    let raw = meta.annotations.as_ref().unwrap_or(&empty);
    let a = Annotations::parse(raw);
    let mut problems = a.problems.clone();
    let mut warnings = a.warnings.clone();
    // Source ranges: the field wins over the annotation, which Go then never read (even a bad value).
    if service
        .spec
        .as_ref()
        .and_then(|s| s.load_balancer_source_ranges.as_deref())
        .is_some_and(|r| !r.is_empty())
        && let Some(value) = raw.get(Key::SourceRanges.name())
        && problems.iter().any(|p| p.field == Key::SourceRanges.name())
    {
        problems.retain(|p| p.field != Key::SourceRanges.name());
        warnings.push(Warning {
            field: Key::SourceRanges.name().to_owned(),
            value: value.clone(),
            message:
                "not CIDRs, ignored: spec.loadBalancerSourceRanges is set and wins (as in the Go controller)"
                    .to_owned(),
        });
    }
    let mut problem = |field: &str, value: String, accepted: &str| {
        problems.push(Problem {
            field: field.to_owned(),
            value,
            accepted: accepted.to_owned(),
        });
    };

    let flavour = match a.text(Key::Type) {
        Some("nlb") => Flavour::Network,
        Some("nlb-ip" | "external") => Flavour::External,
        _ => Flavour::Classic,
    };
    let spec_default = Default::default();
    let spec = service.spec.as_ref().unwrap_or(&spec_default);

    if flavour != Flavour::External {
        // Annotations of the other flavour that are errors rather than ignored.
        for key in Key::ALL {
            let rejected = match key.def().applies {
                Applies::ClbRejectedOnNlb => flavour == Flavour::Network,
                Applies::NlbRejectedOnClb => flavour == Flavour::Classic,
                _ => false,
            };
            if rejected && let Some(v) = raw.get(key.name()) {
                let other = if flavour == Flavour::Network {
                    "not supported on NLB: remove the annotation"
                } else {
                    "only supported on NLB: remove the annotation"
                };
                problem(key.name(), v.clone(), other);
            }
        }

        // The flavour cannot change after creation.
        let hostname = service
            .status
            .as_ref()
            .and_then(|s| s.load_balancer.as_ref())
            .and_then(|lb| lb.ingress.as_ref())
            .and_then(|i| i.first())
            .and_then(|i| i.hostname.as_deref());
        // Only the unambiguous case: an NLB hostname on a Service that wants a Classic ELB (moto names NLBs like
        // Classic ELBs, so an NLB wanted over a Classic-looking hostname is checked against AWS by the provider).
        if let Some(existing) = hostname.and_then(existing_flavour) {
            let wants_classic = flavour == Flavour::Classic;
            if !existing && wants_classic {
                let (has, value) = if existing {
                    ("a Classic ELB", "nlb")
                } else {
                    ("an NLB", a.text(Key::Type).unwrap_or("(absent: classic)"))
                };
                problem(
                    Key::Type.name(),
                    value.to_owned(),
                    &format!(
                        "the Service already has {has}: the type cannot change after creation; delete and \
                         re-create the Service (or restore the annotation)"
                    ),
                );
            }
        }

        if let Some(affinity) = spec.session_affinity.as_deref()
            && affinity != "None"
        {
            problem("spec.sessionAffinity", affinity.to_owned(), "None");
        }
        if let Some(ip) = spec.load_balancer_ip.as_deref()
            && !ip.is_empty()
        {
            problem(
                "spec.loadBalancerIP",
                ip.to_owned(),
                "empty: AWS ELBs do not take a requested IP",
            );
        }
    }

    let mut ports = Vec::new();
    let service_ports = spec.ports.as_deref().unwrap_or_default();
    if service_ports.is_empty() && flavour != Flavour::External {
        problem("spec.ports", "[]".to_owned(), "at least one port");
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
            problem(
                &format!("spec.ports[{i}].protocol"),
                protocol.clone(),
                &format!("one of {} for this load balancer type", allowed.join(", ")),
            );
        }
        if !protocols.contains(&protocol) {
            protocols.push(protocol.clone());
        }
        match p.node_port {
            Some(node_port) if node_port > 0 => ports.push(PortSpec {
                name: p.name.clone().unwrap_or_default(),
                protocol,
                port: p.port,
                node_port,
            }),
            _ => tracing::debug!(port = p.port, "service port without node port skipped"),
        }
    }
    if !service_ports.is_empty() && ports.is_empty() && flavour != Flavour::External {
        problem(
            "spec.ports[].nodePort",
            "none".to_owned(),
            "at least one port with a node port (allocateLoadBalancerNodePorts must not be false)",
        );
    }
    if protocols.len() > 1 && flavour == Flavour::Classic {
        problem(
            "spec.ports",
            protocols.join(","),
            "one protocol for all ports (mixed protocols are not supported)",
        );
    }
    if flavour == Flavour::Network {
        // TCP and UDP on one port number become one TCP_UDP listener, which forwards to one node port.
        for (i, p) in ports.iter().enumerate() {
            if let Some(other) = ports[..i]
                .iter()
                .find(|o| o.port == p.port && o.protocol != p.protocol && o.node_port != p.node_port)
            {
                problem(
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

    let source_ranges_defaulted = spec
        .load_balancer_source_ranges
        .as_deref()
        .is_none_or(<[String]>::is_empty)
        && a.list(Key::SourceRanges).is_none();
    let source_ranges = match spec.load_balancer_source_ranges.as_deref() {
        Some(ranges) if !ranges.is_empty() => {
            let mut out = Vec::new();
            for (i, r) in ranges.iter().enumerate() {
                let r = r.trim();
                if crate::annotations::is_cidr(r) {
                    out.push(r.to_owned());
                } else {
                    problem(
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

    let health_check = HealthCheckSpec {
        protocol: a.text(Key::HealthcheckProtocol).map(str::to_owned),
        port: a.port(Key::HealthcheckPort),
        path: a.text(Key::HealthcheckPath).map(str::to_owned),
        healthy_threshold: i32_of(&a, Key::HealthcheckHealthyThreshold),
        unhealthy_threshold: i32_of(&a, Key::HealthcheckUnhealthyThreshold),
        timeout: i32_of(&a, Key::HealthcheckTimeout),
        interval: i32_of(&a, Key::HealthcheckInterval),
    };
    let access_log = AccessLogSpec {
        enabled: a.bool(Key::AccessLogEnabled).unwrap_or(false),
        emit_interval: i32_of(&a, Key::AccessLogEmitInterval),
        bucket: a.text(Key::AccessLogS3BucketName).map(str::to_owned),
        prefix: a.text(Key::AccessLogS3BucketPrefix).map(str::to_owned),
    };
    if access_log.enabled && access_log.bucket.is_none() {
        problem(
            Key::AccessLogS3BucketName.name(),
            String::new(),
            "a bucket name: access logs are enabled",
        );
    }
    if flavour == Flavour::Classic {
        let timeout = health_check.timeout.unwrap_or(5);
        let interval = health_check.interval.unwrap_or(10);
        if health_check.timeout.is_some() && timeout > 60 {
            problem(
                Key::HealthcheckTimeout.name(),
                timeout.to_string(),
                "at most 60 on a Classic ELB",
            );
        }
        if (health_check.timeout.is_some() || health_check.interval.is_some()) && timeout >= interval {
            problem(
                Key::HealthcheckTimeout.name(),
                timeout.to_string(),
                &format!("less than the interval ({interval})"),
            );
        }
    }
    if flavour == Flavour::Network && health_check.protocol.as_deref() == Some("SSL") {
        problem(
            Key::HealthcheckProtocol.name(),
            "SSL".to_owned(),
            "one of TCP, HTTP, HTTPS on NLB",
        );
    }
    let target_group_attributes: BTreeMap<String, String> = a
        .pairs(Key::TargetGroupAttributes)
        .unwrap_or_default()
        .iter()
        .cloned()
        .collect();
    if target_group_attributes
        .get("preserve_client_ip.enabled")
        .is_some_and(|v| v == "false")
        && protocols.iter().any(|p| p == "UDP")
    {
        problem(
            Key::TargetGroupAttributes.name(),
            "preserve_client_ip.enabled=false".to_owned(),
            "preserve_client_ip.enabled=true: client IP preservation cannot be disabled with UDP ports",
        );
    }

    let internal = matches!(a.text(Key::Internal), Some("true" | "0.0.0.0/0"));
    if flavour == Flavour::External {
        warnings.retain(|w| w.field == Key::Type.name());
    }
    let out = ServiceSpec {
        namespace,
        name,
        uid: meta.uid.clone().unwrap_or_default(),
        flavour,
        internal,
        ports,
        source_ranges,
        source_ranges_defaulted,
        local_traffic: spec.external_traffic_policy.as_deref() == Some("Local"),
        health_check_node_port: spec.health_check_node_port.filter(|p| *p > 0),
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
        backend_protocol: a.text(Key::BackendProtocol).map(str::to_owned),
        ssl_cert: a.text(Key::SslCert).map(str::to_owned),
        ssl_ports: a.list(Key::SslPorts).unwrap_or_default().to_vec(),
        ssl_negotiation_policy: a.text(Key::SslNegotiationPolicy).map(str::to_owned),
        proxy_protocol: a.text(Key::ProxyProtocol) == Some("*"),
        idle_timeout: i32_of(&a, Key::ConnectionIdleTimeout).unwrap_or(60),
        draining_enabled: a.bool(Key::ConnectionDrainingEnabled).unwrap_or(false),
        draining_timeout: i32_of(&a, Key::ConnectionDrainingTimeout),
        cross_zone: a.bool(Key::CrossZoneLoadBalancingEnabled).unwrap_or(false),
        access_log,
        health_check,
        eip_allocations: a.list(Key::EipAllocations).unwrap_or_default().to_vec(),
        private_ipv4_addresses: a.list(Key::PrivateIpv4Addresses).unwrap_or_default().to_vec(),
        target_group_attributes,
        ip_address_type: match a.text(Key::IpAddressType) {
            Some("dualstack") => IpAddressType::Dualstack,
            _ => IpAddressType::Ipv4,
        },
        warnings,
    };
    for w in &out.warnings {
        tracing::warn!(service = %out.key(), annotation = %w.field, value = %w.value, "{}", w.message);
    }
    if out.flavour == Flavour::External {
        // Only the type matters: the other controller validates the rest.
        problems.retain(|p| p.field == Key::Type.name());
    }
    // A bad value of an annotation the flavour ignores does not block the Service (it is only logged).
    let ignored = |field: &str| {
        Key::ALL.iter().any(|k| {
            k.name() == field
                && matches!(
                    (k.def().applies, &out.flavour),
                    (Applies::Clb, Flavour::Network) | (Applies::Nlb, Flavour::Classic)
                )
        })
    };
    problems.retain(|p| {
        let keep = !ignored(&p.field);
        if !keep {
            tracing::warn!(service = %out.key(), annotation = %p.field, value = %p.value, "invalid value of an annotation this load balancer type ignores");
        }
        keep
    });
    if problems.is_empty() {
        Ok(out)
    } else {
        Err(InvalidService {
            namespace: out.namespace,
            name: out.name,
            problems,
        })
    }
}

// === impl IpAddressType ===

impl IpAddressType {
    /// The value AWS takes (`ipv4`, `dualstack`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ipv4 => "ipv4",
            Self::Dualstack => "dualstack",
        }
    }
}

// === impl ServiceSpec ===

impl ServiceSpec {
    /// `<namespace>/<name>`.
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    /// Whether port `p` gets the certificate (Classic: names compared case-insensitively).
    pub fn is_ssl_port(&self, p: &PortSpec) -> bool {
        self.ssl_ports.is_empty()
            || self
                .ssl_ports
                .iter()
                .any(|s| s.parse::<i32>().is_ok_and(|n| n == p.port) || s.eq_ignore_ascii_case(&p.name))
    }
}

#[cfg(test)]
mod tests;
