//! The EC2 port's types: instances and their interfaces, zones, topology, security groups and rules,
//! subnets, route tables and routes.

use crate::{InstanceId, NetworkInterfaceId, RouteTableId, SecurityGroupId, SubnetId, Tags, VpcId};

/// The lifecycle state of an instance (`Instance.State.Name`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum InstanceState {
    /// `pending`
    Pending,
    /// `running`
    Running,
    /// `shutting-down`
    ShuttingDown,
    /// `terminated`: the instance is gone; AWS keeps describing it for about an hour.
    Terminated,
    /// `stopping`
    Stopping,
    /// `stopped`
    Stopped,
    /// A state this version does not know, or no state at all (empty string).
    Unknown(String),
}

/// An EC2 instance, as `DescribeInstances` reports it, reduced to what the controllers use.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Instance {
    /// The instance ID.
    pub id: InstanceId,
    /// Its lifecycle state.
    pub state: InstanceState,
    /// `m5.large`, ...; empty when AWS did not say.
    pub instance_type: String,
    /// `Placement.AvailabilityZone` (`us-east-1a`).
    pub availability_zone: Option<String>,
    /// The VPC, for instances in one.
    pub vpc_id: Option<VpcId>,
    /// The primary subnet.
    pub subnet_id: Option<SubnetId>,
    /// The primary private IPv4 address.
    pub private_ip: Option<String>,
    /// The public IPv4 address, if any.
    pub public_ip: Option<String>,
    /// `ip-10-0-0-1.ec2.internal`; empty strings from AWS are reported as `None`.
    pub private_dns_name: Option<String>,
    /// The public DNS name, if any.
    pub public_dns_name: Option<String>,
    /// Network interfaces in device order (`Attachment.DeviceIndex` ascending, interfaces without one last).
    pub network_interfaces: Vec<InstanceNetworkInterface>,
    /// The security groups of the instance (of its primary interface).
    pub security_groups: Vec<SecurityGroupId>,
    /// `SourceDestCheck`, when reported.
    pub source_dest_check: Option<bool>,
    /// The instance's tags.
    pub tags: Tags,
}

/// A network interface attached to an instance.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct InstanceNetworkInterface {
    /// The interface ID.
    pub id: NetworkInterfaceId,
    /// `Attachment.DeviceIndex` (0 is the primary interface).
    pub device_index: Option<i32>,
    /// `in-use`, `available`, `attaching`, `detaching`; see [`Self::is_in_use`].
    pub status: String,
    /// Private IPv4 addresses, the primary first, then the secondaries in AWS's order.
    pub private_ips: Vec<String>,
    /// IPv6 addresses in AWS's order.
    pub ipv6_addresses: Vec<String>,
    /// The interface's private DNS name, if any.
    pub private_dns_name: Option<String>,
    /// The public IPv4 address associated with the primary private address, if any.
    pub public_ip: Option<String>,
    /// The subnet of the interface.
    pub subnet_id: Option<SubnetId>,
    /// The VPC of the interface.
    pub vpc_id: Option<VpcId>,
    /// The security groups of this interface.
    pub security_groups: Vec<SecurityGroupId>,
}

/// A network interface as `DescribeNetworkInterfaces` reports it (Fargate pods are found this way).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct NetworkInterface {
    /// The interface ID.
    pub id: NetworkInterfaceId,
    /// `in-use`, `available`, ...
    pub status: String,
    /// Its availability zone.
    pub availability_zone: Option<String>,
    /// Its VPC.
    pub vpc_id: Option<VpcId>,
    /// Its subnet.
    pub subnet_id: Option<SubnetId>,
    /// Private IPv4 addresses, the primary first.
    pub private_ips: Vec<String>,
    /// IPv6 addresses in AWS's order.
    pub ipv6_addresses: Vec<String>,
    /// The interface's private DNS name, if any.
    pub private_dns_name: Option<String>,
    /// Its description (an NLB's interfaces are described `ELB net/<name>/<id>`), if any.
    pub description: Option<String>,
    /// The instance it is attached to, if any.
    pub attached_instance: Option<InstanceId>,
    /// `Attachment.Status` (`attached`, ...), when attached.
    pub attachment_status: Option<String>,
    /// The interface's tags.
    pub tags: Tags,
}

/// An availability zone (or local zone, wavelength zone) of the region.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct AvailabilityZone {
    /// `us-east-1a`.
    pub name: String,
    /// `use1-az1`.
    pub zone_id: String,
    /// `availability-zone`, `local-zone` or `wavelength-zone`.
    pub zone_type: String,
    /// The zone's region.
    pub region: String,
}

/// The network topology of an instance (`DescribeInstanceTopology`).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct InstanceTopology {
    /// The instance.
    pub instance_id: InstanceId,
    /// Its type.
    pub instance_type: String,
    /// The network nodes from the top layer down.
    pub network_nodes: Vec<String>,
    /// Its availability zone.
    pub availability_zone: Option<String>,
    /// Its zone ID.
    pub zone_id: Option<String>,
}

/// A security group with its ingress rules.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SecurityGroup {
    /// The group ID.
    pub id: SecurityGroupId,
    /// The group name (unique per VPC).
    pub name: String,
    /// The description.
    pub description: String,
    /// The VPC.
    pub vpc_id: Option<VpcId>,
    /// Ingress rules, as AWS groups them.
    pub ingress: Vec<IpPermission>,
    /// The group's tags.
    pub tags: Tags,
}

/// One ingress (or egress) permission: a protocol and port range open to CIDRs and groups.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default, PartialOrd, Ord)]
pub struct IpPermission {
    /// `tcp`, `udp`, `icmp`, `icmpv6` or `-1` (all); AWS also reports numbers.
    pub protocol: String,
    /// The first port (the ICMP type for ICMP); `None` for all.
    pub from_port: Option<i32>,
    /// The last port (the ICMP code for ICMP); `None` for all.
    pub to_port: Option<i32>,
    /// IPv4 sources.
    pub ip_ranges: Vec<IpRange>,
    /// IPv6 sources.
    pub ipv6_ranges: Vec<IpRange>,
    /// Security group sources.
    pub source_groups: Vec<SourceGroup>,
    /// Managed prefix list sources (`PrefixListIds`).
    pub prefix_lists: Vec<PrefixListSource>,
}

/// A CIDR source of a rule.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default, PartialOrd, Ord)]
pub struct IpRange {
    /// `10.0.0.0/16` or `::/0`.
    pub cidr: String,
    /// The rule description.
    pub description: Option<String>,
}

/// A security group source of a rule (`UserIdGroupPair`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SourceGroup {
    /// The source group.
    pub group_id: SecurityGroupId,
    /// The rule description.
    pub description: Option<String>,
}

/// A managed prefix list source of a rule (`PrefixListId`): the rule admits every CIDR of the list.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PrefixListSource {
    /// The prefix list ID (`pl-…`).
    pub id: String,
    /// The rule description.
    pub description: Option<String>,
}

/// What to create with [`Ec2::create_security_group`](crate::Ec2::create_security_group).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewSecurityGroup {
    /// The name (unique per VPC).
    pub name: String,
    /// The description (required by AWS, immutable).
    pub description: String,
    /// The VPC.
    pub vpc_id: VpcId,
    /// Tags applied at creation (TagSpecifications), so the group is never visible untagged.
    pub tags: Tags,
}

/// A subnet.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Subnet {
    /// The subnet ID.
    pub id: SubnetId,
    /// The VPC.
    pub vpc_id: VpcId,
    /// The availability zone name.
    pub availability_zone: String,
    /// The availability zone ID.
    pub availability_zone_id: Option<String>,
    /// The IPv4 CIDR.
    pub cidr_block: Option<String>,
    /// The IPv6 CIDRs.
    pub ipv6_cidr_blocks: Vec<String>,
    /// The subnet's tags.
    pub tags: Tags,
}

/// A route table with its routes and subnet associations.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RouteTable {
    /// The table ID.
    pub id: RouteTableId,
    /// The VPC.
    pub vpc_id: VpcId,
    /// The routes.
    pub routes: Vec<Route>,
    /// Subnet associations; the main table has one with `main: true`.
    pub associations: Vec<RouteTableAssociation>,
    /// The table's tags.
    pub tags: Tags,
}

/// A route of a route table.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Route {
    /// The IPv4 destination.
    pub destination_cidr: Option<String>,
    /// The IPv6 destination.
    pub destination_ipv6_cidr: Option<String>,
    /// The gateway target (`igw-...`, `local`, ...).
    pub gateway_id: Option<String>,
    /// The instance target.
    pub instance_id: Option<InstanceId>,
    /// The network interface target.
    pub network_interface_id: Option<NetworkInterfaceId>,
    /// `active` or `blackhole` (target gone).
    pub state: RouteState,
}

/// Whether a route's target exists.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RouteState {
    /// The target is there.
    Active,
    /// The target was deleted.
    Blackhole,
    /// A state this version does not know, or none.
    Unknown(String),
}

/// A route table's association with a subnet (or the VPC's main association).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RouteTableAssociation {
    /// The associated subnet; `None` for the main association.
    pub subnet_id: Option<SubnetId>,
    /// Whether this is the VPC's main route table.
    pub main: bool,
}

// === impl InstanceState ===

impl InstanceState {
    /// Parses AWS's state name.
    pub fn from_aws(name: &str) -> Self {
        match name {
            "pending" => Self::Pending,
            "running" => Self::Running,
            "shutting-down" => Self::ShuttingDown,
            "terminated" => Self::Terminated,
            "stopping" => Self::Stopping,
            "stopped" => Self::Stopped,
            other => Self::Unknown(other.to_owned()),
        }
    }

    /// AWS's name of the state.
    pub fn as_str(&self) -> &str {
        match self {
            Self::Pending => "pending",
            Self::Running => "running",
            Self::ShuttingDown => "shutting-down",
            Self::Terminated => "terminated",
            Self::Stopping => "stopping",
            Self::Stopped => "stopped",
            Self::Unknown(other) => other,
        }
    }
}

// === impl Instance ===

impl Instance {
    /// A minimal instance (for fakes and tests): the given ID and state, everything else empty.
    pub fn new(id: InstanceId, state: InstanceState) -> Self {
        Self {
            id,
            state,
            instance_type: String::new(),
            availability_zone: None,
            vpc_id: None,
            subnet_id: None,
            private_ip: None,
            public_ip: None,
            private_dns_name: None,
            public_dns_name: None,
            network_interfaces: Vec::new(),
            security_groups: Vec::new(),
            source_dest_check: None,
            tags: Tags::new(),
        }
    }
}

// === impl InstanceNetworkInterface ===

impl InstanceNetworkInterface {
    /// An interface with the given ID and device index, status `in-use`, no addresses (for fakes and tests).
    pub fn new(id: NetworkInterfaceId, device_index: Option<i32>) -> Self {
        Self {
            id,
            device_index,
            status: "in-use".to_owned(),
            private_ips: Vec::new(),
            ipv6_addresses: Vec::new(),
            private_dns_name: None,
            public_ip: None,
            subnet_id: None,
            vpc_id: None,
            security_groups: Vec::new(),
        }
    }

    /// Whether the interface is attached and usable (`in-use`): only those contribute node addresses.
    pub fn is_in_use(&self) -> bool {
        self.status == "in-use"
    }
}

// === impl NetworkInterface ===

impl NetworkInterface {
    /// An interface with the given ID, status `in-use`, nothing else (for fakes and tests).
    pub fn new(id: NetworkInterfaceId) -> Self {
        Self {
            id,
            status: "in-use".to_owned(),
            availability_zone: None,
            vpc_id: None,
            subnet_id: None,
            private_ips: Vec::new(),
            ipv6_addresses: Vec::new(),
            private_dns_name: None,
            description: None,
            attached_instance: None,
            attachment_status: None,
            tags: Tags::new(),
        }
    }
}

// === impl AvailabilityZone ===

impl AvailabilityZone {
    /// A zone (for fakes and tests).
    pub fn new(name: &str, zone_id: &str, zone_type: &str, region: &str) -> Self {
        Self {
            name: name.to_owned(),
            zone_id: zone_id.to_owned(),
            zone_type: zone_type.to_owned(),
            region: region.to_owned(),
        }
    }
}

// === impl InstanceTopology ===

impl InstanceTopology {
    /// A topology entry (for fakes and tests).
    pub fn new(instance_id: InstanceId, instance_type: &str, network_nodes: Vec<String>) -> Self {
        Self {
            instance_id,
            instance_type: instance_type.to_owned(),
            network_nodes,
            availability_zone: None,
            zone_id: None,
        }
    }
}

// === impl SecurityGroup ===

impl SecurityGroup {
    /// A group without rules (for fakes and tests).
    pub fn new(id: SecurityGroupId, name: &str, vpc_id: Option<VpcId>, tags: Tags) -> Self {
        Self {
            id,
            name: name.to_owned(),
            description: String::new(),
            vpc_id,
            ingress: Vec::new(),
            tags,
        }
    }
}

// === impl Subnet ===

impl Subnet {
    /// A subnet (for fakes and tests).
    pub fn new(id: SubnetId, vpc_id: VpcId, availability_zone: &str, tags: Tags) -> Self {
        Self {
            id,
            vpc_id,
            availability_zone: availability_zone.to_owned(),
            availability_zone_id: None,
            cidr_block: None,
            ipv6_cidr_blocks: Vec::new(),
            tags,
        }
    }
}

// === impl RouteTable ===

impl RouteTable {
    /// A table (for fakes and tests).
    pub fn new(id: RouteTableId, vpc_id: VpcId, routes: Vec<Route>, tags: Tags) -> Self {
        Self {
            id,
            vpc_id,
            routes,
            associations: Vec::new(),
            tags,
        }
    }
}

// === impl Route ===

impl Route {
    /// An active IPv4 route to an instance (for fakes and tests).
    pub fn to_instance(destination_cidr: &str, instance: InstanceId) -> Self {
        Self {
            destination_cidr: Some(destination_cidr.to_owned()),
            destination_ipv6_cidr: None,
            gateway_id: None,
            instance_id: Some(instance),
            network_interface_id: None,
            state: RouteState::Active,
        }
    }

    /// An active IPv4 route to a gateway (for fakes and tests).
    pub fn to_gateway(destination_cidr: &str, gateway: &str) -> Self {
        Self {
            destination_cidr: Some(destination_cidr.to_owned()),
            destination_ipv6_cidr: None,
            gateway_id: Some(gateway.to_owned()),
            instance_id: None,
            network_interface_id: None,
            state: RouteState::Active,
        }
    }
}

// === impl RouteState ===

impl RouteState {
    /// Parses AWS's route state.
    pub fn from_aws(state: &str) -> Self {
        match state {
            "active" => Self::Active,
            "blackhole" => Self::Blackhole,
            other => Self::Unknown(other.to_owned()),
        }
    }
}

// === impl RouteTableAssociation ===

impl RouteTableAssociation {
    /// An association (for fakes and tests).
    pub fn new(subnet_id: Option<SubnetId>, main: bool) -> Self {
        Self { subnet_id, main }
    }
}

// === impl IpPermission ===

impl IpPermission {
    /// A rule for `protocol` on `from..=to` from IPv4 `cidrs`, without descriptions.
    pub fn cidrs<S: Into<String>>(
        protocol: &str,
        from: i32,
        to: i32,
        cidrs: impl IntoIterator<Item = S>,
    ) -> Self {
        Self {
            protocol: protocol.to_owned(),
            from_port: Some(from),
            to_port: Some(to),
            ip_ranges: cidrs
                .into_iter()
                .map(|c| IpRange {
                    cidr: c.into(),
                    description: None,
                })
                .collect(),
            ..Self::default()
        }
    }

    /// A rule for all traffic from a security group.
    pub fn all_from_group(group: SecurityGroupId) -> Self {
        Self {
            protocol: "-1".to_owned(),
            source_groups: vec![SourceGroup {
                group_id: group,
                description: None,
            }],
            ..Self::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instance_states_round_trip() {
        for name in [
            "pending",
            "running",
            "shutting-down",
            "terminated",
            "stopping",
            "stopped",
            "weird",
        ] {
            assert_eq!(InstanceState::from_aws(name).as_str(), name);
        }
        assert_eq!(
            InstanceState::from_aws("weird"),
            InstanceState::Unknown("weird".into())
        );
    }

    #[test]
    fn in_use_and_route_states() {
        let mut eni = InstanceNetworkInterface::new("eni-1".into(), Some(0));
        assert!(eni.is_in_use());
        eni.status = "detaching".into();
        assert!(!eni.is_in_use());
        assert_eq!(RouteState::from_aws("blackhole"), RouteState::Blackhole);
        assert_eq!(RouteState::from_aws("active"), RouteState::Active);
    }
}
