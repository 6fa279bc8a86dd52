//! What the catalog keeps of an instance: the fields its readers use, nothing else.

use std::mem::size_of;

use super::{CLUSTER_TAG_PREFIX, LEGACY_CLUSTER_TAG};
use crate::{
    InstanceId, SecurityGroupId, Tags,
    ec2::{Instance, InstanceState},
};

/// What the catalog keeps of an instance. Its readers: node initialization and the address refresh (type, zone,
/// addresses, DNS names), the cluster membership guard (cluster tags), the load balancers (state, security
/// groups), the routes (private DNS name). Tags other than the cluster's, subnets, VPCs and secondary addresses
/// are not kept.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct CatalogInstance {
    /// The instance ID.
    pub id: InstanceId,
    /// Its lifecycle state.
    pub state: InstanceState,
    /// `m5.large`, ...; empty when AWS did not say.
    pub instance_type: String,
    /// `Placement.AvailabilityZone` (`us-east-1a`).
    pub availability_zone: Option<String>,
    /// The primary private IPv4 address.
    pub private_ip: Option<String>,
    /// The public IPv4 address, if any.
    pub public_ip: Option<String>,
    /// `ip-10-0-0-1.ec2.internal`.
    pub private_dns_name: Option<String>,
    /// The public DNS name, if any.
    pub public_dns_name: Option<String>,
    /// The addresses of its in-use network interfaces, in device order (interfaces without an index last).
    pub interfaces: Vec<InterfaceAddresses>,
    /// The security groups of its primary interface.
    pub security_groups: Vec<SecurityGroupId>,
    /// Its tags that name a cluster ([`CLUSTER_TAG_PREFIX`], [`LEGACY_CLUSTER_TAG`]), sorted by key; the others
    /// are not kept. A slice, not a map: a map of one tag costs a node of eleven (about 500 bytes an instance).
    pub cluster_tags: Box<[(String, String)]>,
}

/// The node addresses of one in-use network interface.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct InterfaceAddresses {
    /// Its primary private IPv4 address (secondaries are pod addresses under the VPC CNI: not kept).
    pub private_ip: Option<String>,
    /// Its first IPv6 address.
    pub ipv6: Option<String>,
}

impl CatalogInstance {
    /// What the catalog keeps of `instance`.
    pub fn of(instance: &Instance) -> Self {
        let mut in_use: Vec<_> = instance
            .network_interfaces
            .iter()
            .filter(|eni| eni.is_in_use())
            .collect();
        // Stable: interfaces without an index keep AWS's order, last.
        in_use.sort_by_key(|eni| (eni.device_index.is_none(), eni.device_index));
        Self {
            id: instance.id.clone(),
            state: instance.state.clone(),
            instance_type: instance.instance_type.clone(),
            availability_zone: instance.availability_zone.clone(),
            private_ip: instance.private_ip.clone(),
            public_ip: instance.public_ip.clone(),
            private_dns_name: instance.private_dns_name.clone(),
            public_dns_name: instance.public_dns_name.clone(),
            interfaces: in_use
                .into_iter()
                .map(|eni| InterfaceAddresses {
                    private_ip: eni.private_ips.first().cloned(),
                    ipv6: eni.ipv6_addresses.first().cloned(),
                })
                .collect(),
            security_groups: instance.security_groups.clone(),
            cluster_tags: instance
                .tags
                .iter()
                .filter(|(k, _)| k.starts_with(CLUSTER_TAG_PREFIX) || k.as_str() == LEGACY_CLUSTER_TAG)
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        }
    }

    /// Its cluster tags as a map, as the cluster's membership rules read tags.
    pub fn cluster_tags(&self) -> Tags {
        self.cluster_tags.iter().cloned().collect()
    }

    /// The bytes it holds, its own and on the heap (an estimate: allocator overhead is not counted).
    pub fn bytes(&self) -> usize {
        let text = |s: &Option<String>| s.as_ref().map_or(0, String::capacity);
        let tags: usize = self
            .cluster_tags
            .iter()
            .map(|(k, v)| k.capacity() + v.capacity() + 2 * size_of::<String>())
            .sum();
        let interfaces: usize = self
            .interfaces
            .iter()
            .map(|a| size_of::<InterfaceAddresses>() + text(&a.private_ip) + text(&a.ipv6))
            .sum();
        let groups: usize = self
            .security_groups
            .iter()
            .map(|g| size_of::<SecurityGroupId>() + g.as_str().len())
            .sum();
        size_of::<Self>()
            + self.id.as_str().len()
            + self.instance_type.capacity()
            + [
                &self.availability_zone,
                &self.private_ip,
                &self.public_ip,
                &self.private_dns_name,
                &self.public_dns_name,
            ]
            .into_iter()
            .map(text)
            .sum::<usize>()
            + interfaces
            + groups
            + tags
    }
}
