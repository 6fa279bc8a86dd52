//! Conversions between aws-sdk-ec2's types and the port's.

use aws_sdk_ec2::types as sdk;
use ccm_aws_api::{
    Filter, InstanceId, RouteTableId, SecurityGroupId, SubnetId, Tags, VpcId,
    ec2::{
        Instance, InstanceNetworkInterface, InstanceState, IpPermission, IpRange, NetworkInterface,
        PrefixListSource, Route, RouteState, RouteTable, RouteTableAssociation, SecurityGroup, SourceGroup,
        Subnet,
    },
};

pub(super) fn next(token: Option<&str>) -> Option<String> {
    token.filter(|t| !t.is_empty()).map(str::to_owned)
}

pub(super) fn non_empty(s: Option<&str>) -> Option<String> {
    s.filter(|s| !s.is_empty()).map(str::to_owned)
}

pub(super) fn sdk_filters(filters: &[Filter]) -> Option<Vec<sdk::Filter>> {
    (!filters.is_empty()).then(|| {
        filters
            .iter()
            .map(|f| {
                sdk::Filter::builder()
                    .name(&f.name)
                    .set_values(Some(f.values.clone()))
                    .build()
            })
            .collect()
    })
}

pub(crate) fn sdk_tags(tags: &Tags) -> Vec<sdk::Tag> {
    tags.iter()
        .map(|(k, v)| sdk::Tag::builder().key(k).value(v).build())
        .collect()
}

pub(super) fn tags(tags: &[sdk::Tag]) -> Tags {
    tags.iter()
        .filter_map(|t| Some((t.key()?.to_owned(), t.value().unwrap_or_default().to_owned())))
        .collect()
}

pub(super) fn instance(i: &sdk::Instance) -> Option<Instance> {
    let id = InstanceId::new(i.instance_id()?);
    let state = InstanceState::from_aws(i.state().and_then(|s| s.name()).map_or("", |n| n.as_str()));
    let mut out = Instance::new(id, state);
    out.instance_type = i
        .instance_type()
        .map(|t| t.as_str().to_owned())
        .unwrap_or_default();
    out.availability_zone = non_empty(i.placement().and_then(|p| p.availability_zone()));
    out.vpc_id = non_empty(i.vpc_id()).map(VpcId::new);
    out.subnet_id = non_empty(i.subnet_id()).map(SubnetId::new);
    out.private_ip = non_empty(i.private_ip_address());
    out.public_ip = non_empty(i.public_ip_address());
    out.private_dns_name = non_empty(i.private_dns_name());
    out.public_dns_name = non_empty(i.public_dns_name());
    out.security_groups = i
        .security_groups()
        .iter()
        .filter_map(|g| g.group_id())
        .map(SecurityGroupId::new)
        .collect();
    out.source_dest_check = i.source_dest_check();
    out.tags = tags(i.tags());
    let mut interfaces: Vec<InstanceNetworkInterface> = i
        .network_interfaces()
        .iter()
        .filter_map(|n| {
            let mut eni = InstanceNetworkInterface::new(
                n.network_interface_id()?.into(),
                n.attachment().and_then(|a| a.device_index()),
            );
            eni.status = n.status().map(|s| s.as_str().to_owned()).unwrap_or_default();
            let mut ips: Vec<(bool, String)> = n
                .private_ip_addresses()
                .iter()
                .filter_map(|p| Some((p.primary().unwrap_or(false), p.private_ip_address()?.to_owned())))
                .collect();
            if ips.is_empty()
                && let Some(ip) = non_empty(n.private_ip_address())
            {
                ips.push((true, ip));
            }
            // Primary first; the sort is stable, so secondaries keep AWS's order.
            ips.sort_by_key(|(primary, _)| !primary);
            eni.private_ips = ips.into_iter().map(|(_, ip)| ip).collect();
            eni.ipv6_addresses = n
                .ipv6_addresses()
                .iter()
                .filter_map(|a| a.ipv6_address())
                .map(str::to_owned)
                .collect();
            eni.private_dns_name = non_empty(n.private_dns_name());
            eni.public_ip = non_empty(n.association().and_then(|a| a.public_ip()));
            eni.subnet_id = non_empty(n.subnet_id()).map(SubnetId::new);
            eni.vpc_id = non_empty(n.vpc_id()).map(VpcId::new);
            eni.security_groups = n
                .groups()
                .iter()
                .filter_map(|g| g.group_id())
                .map(SecurityGroupId::new)
                .collect();
            Some(eni)
        })
        .collect();
    // Device order; interfaces without an index last (stable, so AWS's order among those is kept).
    interfaces.sort_by_key(|n| (n.device_index.is_none(), n.device_index));
    out.network_interfaces = interfaces;
    Some(out)
}

pub(super) fn network_interface(n: &sdk::NetworkInterface) -> Option<NetworkInterface> {
    let mut out = NetworkInterface::new(n.network_interface_id()?.into());
    out.status = n.status().map(|s| s.as_str().to_owned()).unwrap_or_default();
    out.availability_zone = non_empty(n.availability_zone());
    out.vpc_id = non_empty(n.vpc_id()).map(VpcId::new);
    out.subnet_id = non_empty(n.subnet_id()).map(SubnetId::new);
    let mut ips: Vec<(bool, String)> = n
        .private_ip_addresses()
        .iter()
        .filter_map(|p| Some((p.primary().unwrap_or(false), p.private_ip_address()?.to_owned())))
        .collect();
    if ips.is_empty()
        && let Some(ip) = non_empty(n.private_ip_address())
    {
        ips.push((true, ip));
    }
    ips.sort_by_key(|(primary, _)| !primary);
    out.private_ips = ips.into_iter().map(|(_, ip)| ip).collect();
    out.ipv6_addresses = n
        .ipv6_addresses()
        .iter()
        .filter_map(|a| a.ipv6_address())
        .map(str::to_owned)
        .collect();
    out.private_dns_name = non_empty(n.private_dns_name());
    out.description = non_empty(n.description());
    out.attached_instance = n
        .attachment()
        .and_then(|a| non_empty(a.instance_id()))
        .map(InstanceId::new);
    out.attachment_status = n
        .attachment()
        .and_then(|a| a.status())
        .map(|s| s.as_str().to_owned());
    out.tags = tags(n.tag_set());
    Some(out)
}

pub(super) fn security_group(g: &sdk::SecurityGroup) -> Option<SecurityGroup> {
    let mut out = SecurityGroup::new(
        SecurityGroupId::new(g.group_id()?),
        g.group_name().unwrap_or_default(),
        non_empty(g.vpc_id()).map(VpcId::new),
        tags(g.tags()),
    );
    out.description = g.description().unwrap_or_default().to_owned();
    out.ingress = g.ip_permissions().iter().map(permission).collect();
    Some(out)
}

pub(super) fn permission(p: &sdk::IpPermission) -> IpPermission {
    IpPermission {
        protocol: p.ip_protocol().unwrap_or("-1").to_owned(),
        from_port: p.from_port(),
        to_port: p.to_port(),
        ip_ranges: p
            .ip_ranges()
            .iter()
            .filter_map(|r| {
                Some(IpRange {
                    cidr: r.cidr_ip()?.to_owned(),
                    description: non_empty(r.description()),
                })
            })
            .collect(),
        ipv6_ranges: p
            .ipv6_ranges()
            .iter()
            .filter_map(|r| {
                Some(IpRange {
                    cidr: r.cidr_ipv6()?.to_owned(),
                    description: non_empty(r.description()),
                })
            })
            .collect(),
        source_groups: p
            .user_id_group_pairs()
            .iter()
            .filter_map(|g| {
                Some(SourceGroup {
                    group_id: SecurityGroupId::new(g.group_id()?),
                    description: non_empty(g.description()),
                })
            })
            .collect(),
        prefix_lists: p
            .prefix_list_ids()
            .iter()
            .filter_map(|l| {
                Some(PrefixListSource {
                    id: l.prefix_list_id()?.to_owned(),
                    description: non_empty(l.description()),
                })
            })
            .collect(),
    }
}

pub(super) fn sdk_permission(p: &IpPermission) -> sdk::IpPermission {
    let all = p.protocol == "-1";
    sdk::IpPermission::builder()
        .ip_protocol(&p.protocol)
        .set_from_port(if all { None } else { p.from_port })
        .set_to_port(if all { None } else { p.to_port })
        .set_ip_ranges(Some(
            p.ip_ranges
                .iter()
                .map(|r| {
                    sdk::IpRange::builder()
                        .cidr_ip(&r.cidr)
                        .set_description(r.description.clone())
                        .build()
                })
                .collect(),
        ))
        .set_ipv6_ranges(Some(
            p.ipv6_ranges
                .iter()
                .map(|r| {
                    sdk::Ipv6Range::builder()
                        .cidr_ipv6(&r.cidr)
                        .set_description(r.description.clone())
                        .build()
                })
                .collect(),
        ))
        .set_user_id_group_pairs(Some(
            p.source_groups
                .iter()
                .map(|g| {
                    sdk::UserIdGroupPair::builder()
                        .group_id(g.group_id.as_str())
                        .set_description(g.description.clone())
                        .build()
                })
                .collect(),
        ))
        .set_prefix_list_ids(Some(
            p.prefix_lists
                .iter()
                .map(|l| {
                    sdk::PrefixListId::builder()
                        .prefix_list_id(&l.id)
                        .set_description(l.description.clone())
                        .build()
                })
                .collect(),
        ))
        .build()
}

pub(super) fn subnet(s: &sdk::Subnet) -> Option<Subnet> {
    let mut out = Subnet::new(
        SubnetId::new(s.subnet_id()?),
        VpcId::new(s.vpc_id().unwrap_or_default()),
        s.availability_zone().unwrap_or_default(),
        tags(s.tags()),
    );
    out.availability_zone_id = non_empty(s.availability_zone_id());
    out.cidr_block = non_empty(s.cidr_block());
    out.ipv6_cidr_blocks = s
        .ipv6_cidr_block_association_set()
        .iter()
        .filter_map(|a| a.ipv6_cidr_block())
        .map(str::to_owned)
        .collect();
    Some(out)
}

/// `cidr` when it is an IPv4 CIDR: AWS takes IPv4 and IPv6 destinations in different fields.
pub(super) fn ipv4_cidr(cidr: &str) -> Option<String> {
    (!cidr.contains(':')).then(|| cidr.to_owned())
}

/// `cidr` when it is an IPv6 CIDR.
pub(super) fn ipv6_cidr(cidr: &str) -> Option<String> {
    cidr.contains(':').then(|| cidr.to_owned())
}

pub(super) fn route_table(t: &sdk::RouteTable) -> Option<RouteTable> {
    let routes = t
        .routes()
        .iter()
        .map(|r| {
            let mut route = Route::to_gateway("", "");
            route.destination_cidr = non_empty(r.destination_cidr_block());
            route.destination_ipv6_cidr = non_empty(r.destination_ipv6_cidr_block());
            route.gateway_id = non_empty(r.gateway_id());
            route.instance_id = non_empty(r.instance_id()).map(InstanceId::new);
            route.network_interface_id = non_empty(r.network_interface_id()).map(Into::into);
            route.state = RouteState::from_aws(r.state().map_or("", |s| s.as_str()));
            route
        })
        .collect();
    let mut out = RouteTable::new(
        RouteTableId::new(t.route_table_id()?),
        VpcId::new(t.vpc_id().unwrap_or_default()),
        routes,
        tags(t.tags()),
    );
    out.associations = t
        .associations()
        .iter()
        .map(|a| {
            RouteTableAssociation::new(
                non_empty(a.subnet_id()).map(SubnetId::new),
                a.main().unwrap_or(false),
            )
        })
        .collect();
    Some(out)
}
