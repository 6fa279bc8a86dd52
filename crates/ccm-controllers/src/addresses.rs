//! Node address rules of the cloud-node controller (upstream `node/helpers/address.go` and
//! `updateNodeAddress`).

use ccm_cloud_provider::NodeView;
use std::net::IpAddr;

use ccm_cloud_provider::{NodeAddress, NodeAddressType};

use crate::keys::ANNOTATION_PROVIDED_NODE_IP;

/// Why the `alpha.kubernetes.io/provided-node-ip` annotation cannot be honoured.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum NodeIpError {
    /// The annotation is not one IP or a dual-stack pair.
    #[error(
        "invalid {ANNOTATION_PROVIDED_NODE_IP} {value:?}: expected one IP or a comma-separated IPv4/IPv6 pair ({reason})"
    )]
    Invalid {
        /// The annotation's value.
        value: String,
        /// What is wrong.
        reason: String,
    },
    /// The cloud reports no address equal to a provided IP.
    #[error("failed to get node address from cloud provider that matches ip: {ip}")]
    NoMatch {
        /// The provided IP without a match.
        ip: IpAddr,
    },
}

/// Parses the annotation: one IP, or one IPv4 and one IPv6 (neither unspecified).
pub fn parse_node_ips(value: &str) -> Result<Vec<IpAddr>, NodeIpError> {
    let invalid = |reason: &str| NodeIpError::Invalid {
        value: value.to_owned(),
        reason: reason.to_owned(),
    };
    let ips = value
        .split(',')
        .map(|s| s.trim().parse::<IpAddr>())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|_| invalid("not an IP address"))?;
    match ips.as_slice() {
        [_] => Ok(ips),
        [a, b] => {
            if a.is_ipv4() == b.is_ipv4() {
                Err(invalid("a pair must be one IPv4 and one IPv6 address"))
            } else if a.is_unspecified() || b.is_unspecified() {
                Err(invalid(
                    "an unspecified address (0.0.0.0 or ::) is not allowed in a pair",
                ))
            } else {
                Ok(ips)
            }
        }
        _ => Err(invalid("more than two addresses")),
    }
}

/// Upstream `GetNodeAddressesFromNodeIP`: the cloud addresses equal (as IPs) to each provided IP, in the
/// provided order, then every cloud address of a type none of them had.
pub fn addresses_for_node_ip(provided: &str, cloud: &[NodeAddress]) -> Result<Vec<NodeAddress>, NodeIpError> {
    let ips = parse_node_ips(provided)?;
    let mut out = Vec::new();
    let mut matched_types = Vec::new();
    for ip in ips {
        let mut found = false;
        for a in cloud {
            if a.address.parse::<IpAddr>().is_ok_and(|x| x == ip) {
                found = true;
                if !out.contains(a) {
                    out.push(a.clone());
                }
                matched_types.push(a.type_);
            }
        }
        if !found {
            return Err(NodeIpError::NoMatch { ip });
        }
    }
    out.extend(
        cloud
            .iter()
            .filter(|a| !matched_types.contains(&a.type_))
            .cloned(),
    );
    Ok(out)
}

/// Upstream `nodeAddressesChangeDetected`: different lengths, or an entry of `new` that differs from the last
/// address of its type in `old`. Order alone is not a change.
pub fn addresses_changed(old: &[NodeAddress], new: &[NodeAddress]) -> bool {
    if old.len() != new.len() {
        return true;
    }
    let mut by_type = std::collections::HashMap::new();
    for a in old {
        by_type.insert(a.type_, a.address.as_str());
    }
    new.iter()
        .any(|a| by_type.get(&a.type_) != Some(&a.address.as_str()))
}

/// The node's current addresses (unknown types are left out).
pub fn node_addresses(node: &NodeView) -> Vec<NodeAddress> {
    node.addresses.iter().filter_map(NodeAddress::from_k8s).collect()
}

/// The addresses to write for an initialized node given the cloud's, or `None` if nothing is to be written:
/// the cloud reported none, the provided node IP cannot be honoured (logged), or nothing changed. A kubelet
/// `Hostname` is kept when the cloud reports none.
pub fn desired_addresses(node: &NodeView, cloud: &[NodeAddress]) -> Option<Vec<NodeAddress>> {
    if cloud.is_empty() {
        return None;
    }
    let old = node_addresses(node);
    let mut new = cloud.to_vec();
    if !new.iter().any(|a| a.type_ == NodeAddressType::Hostname) {
        new.extend(
            old.iter()
                .filter(|a| a.type_ == NodeAddressType::Hostname)
                .cloned(),
        );
    }
    if let Some(provided) = node.provided_node_ip.as_ref() {
        match addresses_for_node_ip(provided, &new) {
            Ok(a) => new = a,
            Err(error) => {
                tracing::error!(node = node.name.as_str(), %error, "not updating node addresses");
                return None;
            }
        }
    }
    addresses_changed(&old, &new).then_some(new)
}

#[cfg(test)]
mod tests;
