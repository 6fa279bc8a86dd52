use std::{collections::BTreeMap, fmt, str::FromStr};

use k8s_openapi::api::core::v1 as core;

/// The type of a [`NodeAddress`], as in `status.addresses[].type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum NodeAddressType {
    /// `Hostname`.
    Hostname,
    /// `InternalIP`.
    InternalIp,
    /// `ExternalIP`.
    ExternalIp,
    /// `InternalDNS`.
    InternalDns,
    /// `ExternalDNS`.
    ExternalDns,
}

/// One address of a node, as the provider reports it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct NodeAddress {
    /// What kind of address this is.
    pub type_: NodeAddressType,
    /// The address: an IP or a DNS name.
    pub address: String,
}

/// Where an instance runs (upstream `cloudprovider.Zone`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Zone {
    /// The zone (`topology.kubernetes.io/zone`); empty if unknown.
    pub failure_domain: String,
    /// The region (`topology.kubernetes.io/region`); empty if unknown.
    pub region: String,
}

/// What the cloud-node controller writes onto a Node (upstream `InstanceMetadata`). Empty strings mean unknown.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InstanceMetadata {
    /// `<provider-name>://<instance>`; set as `spec.providerID` if the Node has none.
    pub provider_id: String,
    /// The instance type (`node.kubernetes.io/instance-type`).
    pub instance_type: String,
    /// The node's addresses; they replace those the kubelet reported (a kubelet `Hostname` is kept if the
    /// provider reports none).
    pub node_addresses: Vec<NodeAddress>,
    /// The zone (`topology.kubernetes.io/zone`).
    pub zone: String,
    /// The region (`topology.kubernetes.io/region`).
    pub region: String,
    /// Further labels to set on the Node at initialization. Keys under `kubernetes.io/` or `k8s.io/` (and
    /// their subdomains) are reserved and dropped by the controller; labels already present are never
    /// overwritten.
    pub additional_labels: BTreeMap<String, String>,
    /// Why the provider does not count the Node's instance as this cluster's (for AWS: the cluster tag it
    /// lacks); `None` for the cluster's own. Such a Node is still initialized (its metadata is only read), but
    /// the provider changes nothing on its behalf: no load balancer target, no security group rule, no route,
    /// no tags. The cloud-node controller records a Warning Event (`InstanceNotInCluster`) on the Node and
    /// counts such Nodes. A Node whose provider ID names an instance of another system (a forged Node) is the
    /// case this guards against.
    pub not_in_cluster: Option<String>,
}

/// A route that sends a node's pod CIDR to that node (upstream `cloudprovider.Route`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Route {
    /// The provider's name for the route; ignored by `create_route`.
    pub name: String,
    /// The Node this route points at; empty if the provider cannot tell (such routes are deleted when they are
    /// inside the cluster CIDR).
    pub target_node: String,
    /// Whether the provider tracks `target_node_addresses`; when false they are ignored when comparing routes.
    pub enable_node_addresses: bool,
    /// The target node's addresses when the route was made (only meaningful with `enable_node_addresses`).
    pub target_node_addresses: Vec<NodeAddress>,
    /// The destination, a CIDR such as `10.244.1.0/24` or `fd00:10:244:1::/64`.
    pub destination_cidr: String,
    /// The route's target is gone; the route controller deletes such routes.
    pub blackhole: bool,
}

// === impl NodeAddressType ===

impl NodeAddressType {
    /// The Kubernetes spelling (`InternalIP`, ...).
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Hostname => "Hostname",
            Self::InternalIp => "InternalIP",
            Self::ExternalIp => "ExternalIP",
            Self::InternalDns => "InternalDNS",
            Self::ExternalDns => "ExternalDNS",
        }
    }
}

impl fmt::Display for NodeAddressType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for NodeAddressType {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(match s {
            "Hostname" => Self::Hostname,
            "InternalIP" => Self::InternalIp,
            "ExternalIP" => Self::ExternalIp,
            "InternalDNS" => Self::InternalDns,
            "ExternalDNS" => Self::ExternalDns,
            other => {
                return Err(format!(
                    "unknown node address type {other:?}; accepted: Hostname, InternalIP, ExternalIP, \
                     InternalDNS, ExternalDNS"
                ));
            }
        })
    }
}

// === impl NodeAddress ===

impl NodeAddress {
    /// An address of the given type.
    pub fn new(type_: NodeAddressType, address: impl Into<String>) -> Self {
        Self {
            type_,
            address: address.into(),
        }
    }

    /// Converts a Node's `status.addresses` entry; `None` for a type this contract does not know.
    pub fn from_k8s(address: &core::NodeAddress) -> Option<Self> {
        Some(Self {
            type_: address.type_.parse().ok()?,
            address: address.address.clone(),
        })
    }

    /// The `status.addresses` entry.
    pub fn to_k8s(&self) -> core::NodeAddress {
        core::NodeAddress {
            type_: self.type_.as_str().to_owned(),
            address: self.address.clone(),
        }
    }
}

impl fmt::Display for NodeAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.type_, self.address)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn address_types_round_trip_and_unknown_is_named() {
        for t in [
            NodeAddressType::Hostname,
            NodeAddressType::InternalIp,
            NodeAddressType::ExternalIp,
            NodeAddressType::InternalDns,
            NodeAddressType::ExternalDns,
        ] {
            assert_eq!(t.as_str().parse::<NodeAddressType>(), Ok(t));
        }
        let err = "internalip".parse::<NodeAddressType>().unwrap_err();
        assert!(
            err.contains("\"internalip\"") && err.contains("InternalIP"),
            "{err}"
        );
    }

    #[test]
    fn k8s_conversion() {
        let a = NodeAddress::new(NodeAddressType::InternalIp, "10.0.0.1");
        let k = a.to_k8s();
        assert_eq!(k.type_, "InternalIP");
        assert_eq!(NodeAddress::from_k8s(&k), Some(a));
        let odd = core::NodeAddress {
            type_: "Other".into(),
            address: "x".into(),
        };
        assert_eq!(NodeAddress::from_k8s(&odd), None);
    }
}
