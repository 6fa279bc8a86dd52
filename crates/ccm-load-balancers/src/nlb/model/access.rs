//! What the nodes' groups must let in for the desired NLB: client traffic on the back ports, from the Service's
//! source ranges of the targets' family, and health checks on the checked ports.

use std::collections::BTreeSet;

use ccm_aws_api::elbv2::TargetType;

use super::{HealthCheck, Listener, PRESERVE_CLIENT_IP, targets};
use crate::{nlb::node_rules::NodeAccess, spec::ServiceSpec};

/// The rules the nodes need: client traffic on the back ports, health checks on the checked ports. With IP
/// targets the NLB's own addresses (client IP preservation is off by default for them) are in its subnets,
/// whose CIDRs the health rules allow: the back ports are health ports too.
pub(super) fn node_access(
    spec: &ServiceSpec,
    name: &str,
    listeners: &[Listener],
    health_check: &HealthCheck,
    instances: &[String],
) -> NodeAccess {
    let mut client_ports = BTreeSet::new();
    let mut health_ports = BTreeSet::new();
    // IP targets see TCP clients' own addresses only with client IP preservation, off by default for them; else
    // the NLB's addresses, which the health rules (from its subnets) allow. UDP always keeps them.
    let preserved = (spec.target_group_attributes.get(PRESERVE_CLIENT_IP)).is_some_and(|v| v == "true");
    for l in listeners {
        let ip = l.target_group.target_type == TargetType::Ip;
        let numeric = spec
            .ports
            .iter()
            .find(|p| p.port == l.port)
            .and_then(|p| p.target_port);
        for port in targets::back_ports(l, numeric) {
            if matches!(l.protocol.as_str(), "UDP" | "TCP_UDP") {
                client_ports.insert(("udp".to_owned(), port));
            }
            if l.protocol != "UDP" && (!ip || preserved) {
                client_ports.insert(("tcp".to_owned(), port));
            }
            if ip && l.protocol != "UDP" {
                health_ports.insert(port);
            }
            match health_check.port.parse::<i32>() {
                Ok(p) => health_ports.insert(p),
                Err(_) => health_ports.insert(port),
            };
        }
    }
    NodeAccess {
        load_balancer: name.to_owned(),
        client_ports,
        client_cidrs: client_cidrs(spec),
        health_ports,
        instances: instances.to_vec(),
        source_group: None,
        ipv6: spec.ipv6_targets,
    }
}

/// Where clients reach the targets from: the Service's source ranges of the targets' family (the other family's
/// clients arrive from the NLB's own addresses, which the health rules allow). IPv6 targets without IPv6 ranges
/// given: everyone (`::/0`), as `0.0.0.0/0` is for IPv4 targets.
fn client_cidrs(spec: &ServiceSpec) -> Vec<String> {
    if !spec.ipv6_targets {
        return spec.source_ranges.clone();
    }
    let ipv6: Vec<String> = spec
        .source_ranges
        .iter()
        .filter(|c| c.contains(':'))
        .cloned()
        .collect();
    if ipv6.is_empty() && spec.source_ranges_defaulted {
        return vec!["::/0".to_owned()];
    }
    ipv6
}
