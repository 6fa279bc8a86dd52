//! Subnets: those the annotation names, else discovery in the cluster's VPC (role tags, public route, one per
//! zone), else the fallback subnet; a dual-stack NLB's subnets checked for IPv6.

use std::collections::BTreeMap;

use ccm_aws_api::{
    Ec2, Filter, SubnetId,
    ec2::{AvailabilityZone, RouteTable, Subnet},
};
use ccm_tagging::{ClusterTags, Ownership};

use crate::{Error, LoadBalancerConfig, spec::ServiceSpec};

/// The subnet role tag for internet-facing load balancers.
pub const ROLE_ELB_TAG: &str = "kubernetes.io/role/elb";

/// The subnet role tag for internal load balancers.
pub const ROLE_INTERNAL_ELB_TAG: &str = "kubernetes.io/role/internal-elb";

/// Whether a subnet is public: its route table (the explicitly associated one, else the VPC's main table) has a
/// route to an internet gateway.
pub fn is_public(subnet: &SubnetId, route_tables: &[RouteTable]) -> bool {
    let explicit = route_tables.iter().find(|t| {
        t.associations
            .iter()
            .any(|a| a.subnet_id.as_ref() == Some(subnet))
    });
    let table = explicit.or_else(|| {
        route_tables
            .iter()
            .find(|t| t.associations.iter().any(|a| a.main))
    });
    table.is_some_and(|t| {
        t.routes
            .iter()
            .any(|r| r.gateway_id.as_deref().is_some_and(|g| g.starts_with("igw")))
    })
}

/// Subnet discovery (pure): subnets tagged for this cluster or for no cluster; internet-facing load balancers
/// only public ones; one per zone (preferring the role tag, then the cluster tag, then the smallest ID); zones
/// that are not `availability-zone`s (local, wavelength) dropped; sorted by zone name.
pub fn select_subnets(
    subnets: &[Subnet],
    route_tables: &[RouteTable],
    zones: &[AvailabilityZone],
    cluster: &ClusterTags,
    internal: bool,
) -> Vec<SubnetId> {
    let zone_types: BTreeMap<&str, &str> = zones
        .iter()
        .map(|z| (z.name.as_str(), z.zone_type.as_str()))
        .collect();
    let role = if internal {
        ROLE_INTERNAL_ELB_TAG
    } else {
        ROLE_ELB_TAG
    };
    let mut best: BTreeMap<&str, &Subnet> = BTreeMap::new();
    for subnet in subnets {
        if cluster.ownership(&subnet.tags) == Ownership::Foreign {
            continue;
        }
        if !internal && !is_public(&subnet.id, route_tables) {
            continue;
        }
        if zone_types
            .get(subnet.availability_zone.as_str())
            .is_some_and(|t| *t != "availability-zone")
        {
            continue;
        }
        let rank = |s: &Subnet| {
            (
                !s.tags.contains_key(role),
                !cluster.is_tagged(&s.tags),
                s.id.as_str().to_owned(),
            )
        };
        match best.get(subnet.availability_zone.as_str()) {
            Some(current) if rank(current) <= rank(subnet) => {}
            _ => {
                best.insert(subnet.availability_zone.as_str(), subnet);
            }
        }
    }
    best.values().map(|s| s.id.clone()).collect()
}

/// The subnets of a load balancer: the annotation's (IDs or `Name` tags, all must resolve), else discovery in
/// the cluster's VPC, else the fallback subnet. A dual-stack NLB's subnets must all have an IPv6 CIDR block
/// ([`Error::SubnetsWithoutIpv6`], checked from the same reads; the fallback subnet costs one more).
pub async fn resolve_subnets<E: Ec2>(
    ec2: &E,
    config: &LoadBalancerConfig,
    spec: &ServiceSpec,
    zones: &[AvailabilityZone],
) -> Result<Vec<SubnetId>, Error> {
    let (ids, lacking) = resolve_subnets_and_ipv6(ec2, config, spec, zones).await?;
    if !lacking.is_empty() {
        return Err(Error::SubnetsWithoutIpv6 { subnets: lacking });
    }
    Ok(ids)
}

/// [`resolve_subnets`] without the refusal: the subnets, and those of them without an IPv6 CIDR block when the
/// Service wants a dual-stack NLB (else none), so that one that only prefers it can fall back to IPv4 from the
/// same reads.
pub async fn resolve_subnets_and_ipv6<E: Ec2>(
    ec2: &E,
    config: &LoadBalancerConfig,
    spec: &ServiceSpec,
    zones: &[AvailabilityZone],
) -> Result<(Vec<SubnetId>, Vec<String>), Error> {
    let needs_ipv6 = spec.flavour == crate::Flavour::Network
        && spec.ip_address_type == crate::spec::IpAddressType::Dualstack;
    let (ids, details) = resolve_subnet_details(ec2, config, spec, zones, needs_ipv6).await?;
    let lacking = if needs_ipv6 {
        ids.iter()
            .filter(|id| {
                !details
                    .iter()
                    .any(|s| s.id == **id && !s.ipv6_cidr_blocks.is_empty())
            })
            .map(ToString::to_string)
            .collect()
    } else {
        Vec::new()
    };
    Ok((ids, lacking))
}

/// The chosen subnets, and the subnets read on the way (their details).
async fn resolve_subnet_details<E: Ec2>(
    ec2: &E,
    config: &LoadBalancerConfig,
    spec: &ServiceSpec,
    zones: &[AvailabilityZone],
    needs_details: bool,
) -> Result<(Vec<SubnetId>, Vec<Subnet>), Error> {
    let vpc = Filter::new("vpc-id", [config.vpc_id.as_str()]);
    if let Some(wanted) = &spec.subnets {
        let (ids, names): (Vec<&String>, Vec<&String>) =
            wanted.iter().partition(|s| s.starts_with("subnet-"));
        let mut found = Vec::new();
        if !ids.is_empty() {
            found.extend(
                ec2.subnets(&[
                    Filter::new("subnet-id", ids.iter().map(|s| s.as_str())),
                    vpc.clone(),
                ])
                .await
                .map_err(Error::aws("resolving the subnets annotation"))?,
            );
        }
        if !names.is_empty() {
            found.extend(
                ec2.subnets(&[Filter::tag("Name", names.iter().map(|s| s.as_str())), vpc.clone()])
                    .await
                    .map_err(Error::aws("resolving the subnets annotation"))?,
            );
        }
        let mut out: Vec<SubnetId> = found.iter().map(|s| s.id.clone()).collect();
        out.sort();
        out.dedup();
        let unmatched = unmatched_entries(wanted, &found);
        if !unmatched.is_empty() {
            return Err(Error::SubnetsNotFound {
                wanted: wanted.clone(),
                unmatched,
                found: out.iter().map(ToString::to_string).collect(),
            });
        }
        return Ok((out, found));
    }
    // Both reads at once; internal load balancers take private subnets too and need no route tables.
    let (subnets, tables) = tokio::join!(ec2.subnets(std::slice::from_ref(&vpc)), async {
        if spec.internal {
            Ok(Vec::new())
        } else {
            ec2.route_tables(std::slice::from_ref(&vpc)).await
        }
    });
    let subnets = subnets.map_err(Error::aws("discovering subnets"))?;
    let tables = tables.map_err(Error::aws("discovering subnets"))?;
    let selected = select_subnets(&subnets, &tables, zones, &config.cluster, spec.internal);
    if !selected.is_empty() {
        return Ok((selected, subnets));
    }
    match &config.fallback_subnet {
        Some(subnet) => {
            tracing::warn!(service = %spec.key(), %subnet, "no suitable tagged subnets; falling back to the configured subnet");
            let details = if needs_details {
                ec2.subnets(&[Filter::new("subnet-id", [subnet.as_str()])])
                    .await
                    .map_err(Error::aws("reading the fallback subnet"))?
            } else {
                Vec::new()
            };
            Ok((vec![subnet.clone()], details))
        }
        None => Err(Error::NoSubnets {
            vpc: config.vpc_id.to_string(),
            internal: spec.internal,
        }),
    }
}

/// The entries of the subnets annotation that name no single subnet of `found`: an ID that is not there, a Name
/// tag on no subnet or on several (comparing counts alone let a name matching two subnets hide a missing ID).
fn unmatched_entries(wanted: &[String], found: &[Subnet]) -> Vec<String> {
    // A subnet named both ways was read twice.
    let unique: BTreeMap<&SubnetId, &Subnet> = found.iter().map(|s| (&s.id, s)).collect();
    wanted
        .iter()
        .filter(|entry| {
            let matches = if entry.starts_with("subnet-") {
                unique.keys().filter(|id| id.as_str() == entry.as_str()).count()
            } else {
                unique
                    .values()
                    .filter(|s| s.tags.get("Name").is_some_and(|n| n == *entry))
                    .count()
            };
            matches != 1
        })
        .cloned()
        .collect()
}
