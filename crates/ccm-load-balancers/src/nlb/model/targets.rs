//! The target groups of the desired NLB: instance targets on the node port, or IP targets (the pods' addresses
//! on their target ports), and the ports the nodes' rules open for them.

use std::collections::BTreeSet;

use ccm_aws_api::elbv2::TargetType;

use super::{HealthCheck, Listener, TargetGroupSpec};
use crate::{
    nlb::{ip_target_group_name, target_group_name},
    spec::{PortSpec, ServiceSpec},
};

pub(super) fn target_type_name<S: serde::Serializer>(t: &TargetType, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(t.as_str())
}

/// The target group of a listener serving the Service ports `group` (one, or TCP and UDP on one port).
pub(super) fn target_group(
    spec: &ServiceSpec,
    cluster_id: &str,
    health_check: &HealthCheck,
    group: &[&PortSpec],
    protocol: &str,
) -> TargetGroupSpec {
    let first = group[0];
    if !spec.ip_targets {
        return TargetGroupSpec {
            name: target_group_name(
                cluster_id,
                spec,
                first.port,
                first.node_port,
                protocol,
                health_check,
            ),
            protocol: protocol.to_owned(),
            port: first.node_port,
            target_type: TargetType::Instance,
            ip_targets: None,
            ipv6: spec.ipv6_targets,
        };
    }
    let target_port = first
        .target_port
        .map_or_else(|| first.name.clone(), |p| p.to_string());
    TargetGroupSpec {
        name: ip_target_group_name(cluster_id, spec, first.port, &target_port, protocol, health_check),
        protocol: protocol.to_owned(),
        port: first.target_port.unwrap_or(first.port),
        target_type: TargetType::Ip,
        ip_targets: spec
            .pod_endpoints
            .as_ref()
            .map(|e| pod_targets(e, group, spec.ipv6_targets)),
        ipv6: spec.ipv6_targets,
    }
}

/// The `(address, port)` targets of the Service ports `group`: each endpoint's port of the same name and
/// protocol (a named target port resolves per pod). Addresses of the group's family only (IPv6 for a Service of
/// the IPv6 family only, else IPv4): AWS refuses a target of the other family.
fn pod_targets(
    endpoints: &[ccm_cloud_provider::Endpoint],
    group: &[&PortSpec],
    ipv6: bool,
) -> BTreeSet<(String, i32)> {
    let mut targets = BTreeSet::new();
    for endpoint in endpoints.iter().filter(|e| e.address.is_ipv6() == ipv6) {
        for p in group {
            if let Some(port) = endpoint.port(&p.name).filter(|ep| ep.protocol == p.protocol) {
                targets.insert((endpoint.address.to_string(), i32::from(port.port)));
            }
        }
    }
    targets
}

/// The ports a listener's targets take traffic on: the node port of instance targets; the target port of IP
/// targets (the pods' ports, which with IP targets are reached through the nodes' groups: the pods share them
/// under the AWS VPC CNI), as each pod resolved it, and the Service's `numeric` target port whatever the pods
/// say (so a Service without ready pods keeps its rules, as drift repair, which knows no endpoints, builds them).
pub(super) fn back_ports(l: &Listener, numeric: Option<i32>) -> BTreeSet<i32> {
    let tg = &l.target_group;
    if tg.target_type == TargetType::Instance {
        return BTreeSet::from([tg.port]);
    }
    let resolved = tg.ip_targets.iter().flatten().map(|(_, port)| *port);
    resolved.chain(numeric).collect()
}
