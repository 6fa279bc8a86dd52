//! Reading what the node rules of an NLB start from: the target instances' groups, the cluster's groups that
//! hold rules of the load balancer, and where its health checks come from: the addresses of its network
//! interfaces, or the CIDRs of its subnets where none is seen (see the parent module for the calls made).

use std::{
    collections::{BTreeMap, BTreeSet},
    net::Ipv4Addr,
    sync::Arc,
};

use ccm_aws_api::{
    AwsError, CatalogInstance, CatalogLookup, Ec2, ErrorKind, Filter, InstanceId, SecurityGroupId, SubnetId,
    ec2::{InstanceState, NetworkInterface, SecurityGroup, Subnet},
};
use ccm_tagging::LEGACY_CLUSTER_TAG;

use super::{NodeAccess, Observed};
use crate::{Error, LoadBalancerConfig, instance_reads, shared};

/// Reads the groups that matter for `access`: the target instances' groups and the cluster's groups that hold
/// rules of this load balancer; `lb_subnets` are the load balancer's subnets and `lb_arn` its ARN once it
/// exists (health checks come from its network interface in each subnet, else from the subnet's CIDR). See the
/// module documentation for the calls made.
pub async fn observe<E: CatalogLookup>(
    ec2: &E,
    config: &LoadBalancerConfig,
    access: &NodeAccess,
    lb_subnets: &[SubnetId],
    lb_arn: Option<&str>,
) -> Result<Observed, Error> {
    let context = "reading the nodes' security groups";
    let ids: Vec<InstanceId> = access
        .instances
        .iter()
        .collect::<BTreeSet<_>>()
        .into_iter()
        .map(|i| InstanceId::new(i.clone()))
        .collect();
    let vpc = Filter::new("vpc-id", [config.vpc_id.as_str()]);
    let subnet_ids: BTreeSet<&str> = lb_subnets.iter().map(SubnetId::as_str).collect();
    let cluster_filters = [Filter::tag_key(config.cluster.key()), vpc.clone()];
    let (instances, tagged, legacy, health) = tokio::join!(
        async {
            if ids.is_empty() {
                Ok(Vec::new())
            } else {
                ec2.lookup(&ids, instance_reads::FRESHNESS)
                    .await
                    .map(|lookup| lookup.found)
            }
        },
        ec2.security_groups(&cluster_filters),
        async {
            if config.cluster.legacy() {
                ec2.security_groups(&[
                    Filter::tag(LEGACY_CLUSTER_TAG, [config.cluster.id()]),
                    vpc.clone(),
                ])
                .await
            } else {
                Ok(Vec::new())
            }
        },
        health_sources(ec2, config, access, &subnet_ids, lb_arn),
    );
    let mut instances = instances.map_err(Error::aws(context))?;
    let not_running = not_running(&instances);
    instances.retain(|i| !matches!(i.state, InstanceState::Terminated));
    let mut groups: BTreeMap<SecurityGroupId, SecurityGroup> = BTreeMap::new();
    for g in tagged
        .map_err(Error::aws(context))?
        .into_iter()
        .chain(legacy.map_err(Error::aws(context))?)
        .filter(|g| config.cluster.is_tagged(&g.tags))
    {
        groups.insert(g.id.clone(), g);
    }

    let others = other_groups(ec2, &instances, &groups).await?;
    let mut skipped = BTreeMap::new();
    let instance_groups = instance_groups(config, access, &instances, &mut groups, &others, &mut skipped)?;
    let (health_sources, subnets_without_interfaces) = health?;

    Ok(Observed {
        groups: groups.into_values().collect(),
        instance_groups,
        health_sources,
        subnets_without_interfaces,
        // Not registered either: a target the nodes' groups do not let in would only fail its health checks.
        not_running: not_running.into_iter().chain(skipped.keys().cloned()).collect(),
        skipped,
        heirs: BTreeMap::new(),
    })
}

/// The instances that cannot pass a health check (stopping, stopped or gone): not registered.
fn not_running(instances: &[Arc<CatalogInstance>]) -> BTreeSet<String> {
    instances
        .iter()
        .filter(|i| {
            matches!(
                i.state,
                InstanceState::Stopping
                    | InstanceState::Stopped
                    | InstanceState::ShuttingDown
                    | InstanceState::Terminated
            )
        })
        .map(|i| i.id.to_string())
        .collect()
}

/// An instance with a cluster-tagged group gets the rules there (or is ambiguous) whatever its other groups are;
/// the groups of the other instances are read (in one call) to find their only untagged one.
async fn other_groups<E: Ec2>(
    ec2: &E,
    instances: &[Arc<CatalogInstance>],
    groups: &BTreeMap<SecurityGroupId, SecurityGroup>,
) -> Result<BTreeMap<SecurityGroupId, SecurityGroup>, Error> {
    let missing: BTreeSet<&str> = instances
        .iter()
        .filter(|i| !i.security_groups.iter().any(|g| groups.contains_key(g)))
        .flat_map(|i| &i.security_groups)
        .map(SecurityGroupId::as_str)
        .collect();
    if missing.is_empty() {
        return Ok(BTreeMap::new());
    }
    Ok(ec2
        .security_groups(&[Filter::new("group-id", missing.iter().copied())])
        .await
        .map_err(Error::aws("reading the nodes' security groups"))?
        .into_iter()
        .map(|g| (g.id.clone(), g))
        .collect())
}

/// The group of each instance that receives the rules (recorded among the groups when found among the others).
fn instance_groups(
    config: &LoadBalancerConfig,
    access: &NodeAccess,
    instances: &[Arc<CatalogInstance>],
    groups: &mut BTreeMap<SecurityGroupId, SecurityGroup>,
    others: &BTreeMap<SecurityGroupId, SecurityGroup>,
    skipped: &mut BTreeMap<String, String>,
) -> Result<BTreeMap<String, SecurityGroupId>, Error> {
    let mut instance_groups = BTreeMap::new();
    let mut without = Vec::new();
    for instance in instances {
        let candidates: Vec<&SecurityGroup> = instance
            .security_groups
            .iter()
            .filter_map(|id| groups.get(id).or_else(|| others.get(id)))
            .collect();
        match shared::instance_group(&instance.id, &candidates, &config.cluster) {
            // Several candidate groups: only this instance is skipped (with a Warning), not the load balancer.
            Err(e @ Error::AmbiguousInstanceGroups { .. }) => {
                skipped.insert(instance.id.to_string(), e.to_string());
            }
            Err(e) => return Err(e),
            Ok(Some(group)) => {
                if let Some(g) = others.get(&group) {
                    groups.entry(group.clone()).or_insert_with(|| g.clone());
                }
                instance_groups.insert(instance.id.to_string(), group);
            }
            Ok(None) => without.push(instance.id.as_str()),
        }
    }
    if !without.is_empty() {
        // One line per load balancer, not per instance: a cluster without node groups has thousands.
        const SHOWN: usize = 5;
        let more = without.len().saturating_sub(SHOWN);
        let mut listed = without[..without.len().min(SHOWN)].join(", ");
        if more > 0 {
            listed.push_str(&format!(" and {more} more"));
        }
        tracing::warn!(
            load_balancer = %access.load_balancer,
            count = without.len(),
            instances = %listed,
            "instances have no security group tagged for the cluster nor an untagged one; they get no NLB rules"
        );
    }
    Ok(instance_groups)
}

/// The description AWS gives an NLB's network interfaces, `ELB net/<name>/<id>`, from the NLB's ARN
/// (`...:loadbalancer/net/<name>/<id>`); `None` for an ARN not of that shape. The type segment is not checked
/// (only NLBs are asked about): moto writes `app/` in the ARN of every load balancer.
pub fn interface_description(lb_arn: &str) -> Option<String> {
    let (_, resource) = lb_arn.split_once(":loadbalancer/")?;
    let mut parts = resource.split('/');
    let (_kind, name, id) = (parts.next()?, parts.next()?, parts.next()?);
    (parts.next().is_none() && !name.is_empty() && !id.is_empty()).then(|| format!("ELB net/{name}/{id}"))
}

/// Where health checks come from, and the subnets among `subnet_ids` where that is the subnet's CIDR: the
/// address of the load balancer's network interface in each subnet (`<ip>/32`, one `DescribeNetworkInterfaces`),
/// and for a subnet without one (the load balancer is created by this run, or its interfaces are not visible yet:
/// AWS is eventually consistent) the subnet's IPv4 CIDR (one `DescribeSubnets`, only then). Nothing is read when
/// no health rule can be needed.
async fn health_sources<E: Ec2>(
    ec2: &E,
    config: &LoadBalancerConfig,
    access: &NodeAccess,
    subnet_ids: &BTreeSet<&str>,
    lb_arn: Option<&str>,
) -> Result<(Vec<String>, Vec<SubnetId>), Error> {
    if !access.needs_health_sources() || subnet_ids.is_empty() {
        return Ok((Vec::new(), Vec::new()));
    }
    let mut sources = BTreeSet::new();
    let mut uncovered = subnet_ids.clone();
    // IPv6 targets are health-checked from the NLB's IPv6 addresses, in its subnets' IPv6 CIDRs.
    if let Some(description) = lb_arn.and_then(interface_description).filter(|_| !access.ipv6) {
        let filters = [
            Filter::new("description", [description.as_str()]),
            Filter::new("vpc-id", [config.vpc_id.as_str()]),
        ];
        let interfaces = ec2
            .network_interfaces(&filters)
            .await
            .map_err(Error::aws("reading the load balancer's network interfaces"))?;
        for (subnet, address) in interface_addresses(config, &description, &interfaces) {
            if subnet_ids.contains(subnet) {
                uncovered.remove(subnet);
                sources.insert(format!("{address}/32"));
            }
        }
    }
    if !uncovered.is_empty() {
        let subnets = ec2
            .subnets(&[Filter::new("subnet-id", uncovered.iter().copied())])
            .await
            .map_err(Error::aws("reading the load balancer's subnets"))?;
        sources.extend(subnet_cidrs(access, &uncovered, subnets)?);
        if lb_arn.is_some() && !access.ipv6 {
            // Narrowed by a later full ensure (drift detection asks for one while this lasts).
            tracing::info!(
                load_balancer = %access.load_balancer,
                subnets = ?uncovered,
                "no network interface of the NLB seen in these subnets yet; health checks allowed from their CIDRs"
            );
        }
    }
    Ok((
        sources.into_iter().collect(),
        // IPv6 sources are the subnets' CIDRs for good: nothing to narrow later.
        uncovered
            .into_iter()
            .filter(|_| !access.ipv6)
            .map(SubnetId::new)
            .collect(),
    ))
}

/// (subnet, private IPv4 address) of each of the load balancer's interfaces: those described `description` in
/// the cluster's VPC, checked here too as an emulator may ignore the filters.
fn interface_addresses<'a>(
    config: &LoadBalancerConfig,
    description: &str,
    interfaces: &'a [NetworkInterface],
) -> impl Iterator<Item = (&'a str, Ipv4Addr)> {
    interfaces
        .iter()
        .filter(move |i| {
            i.description.as_deref() == Some(description)
                && i.vpc_id.as_ref().is_none_or(|v| *v == config.vpc_id)
        })
        .filter_map(|i| {
            let subnet = i.subnet_id.as_ref()?.as_str();
            // An NLB's interface has one private IPv4 address, fixed for the NLB's life.
            let address = i.private_ips.first()?.parse::<Ipv4Addr>().ok()?;
            Some((subnet, address))
        })
}

/// The IPv4 CIDRs of the subnets `subnet_ids`, all of which must be found.
fn subnet_cidrs(
    access: &NodeAccess,
    subnet_ids: &BTreeSet<&str>,
    subnets: Vec<Subnet>,
) -> Result<Vec<String>, Error> {
    let found: BTreeSet<&str> = subnets.iter().map(|s| s.id.as_str()).collect();
    let lost: Vec<&str> = subnet_ids.difference(&found).copied().collect();
    if !lost.is_empty() {
        // Without every source the health rules of the missing subnets would be revoked: change nothing.
        return Err(Error::aws("reading the load balancer's subnets")(
            AwsError::new(ErrorKind::NotFound, "ec2", "DescribeSubnets")
                .with_code("InvalidSubnetID.NotFound")
                .with_message(format!(
                    "subnets {lost:?} of load balancer {} not found; health check rules are left unchanged",
                    access.load_balancer
                )),
        ));
    }
    if access.ipv6 {
        return Ok(subnets.into_iter().flat_map(|s| s.ipv6_cidr_blocks).collect());
    }
    Ok(subnets.into_iter().filter_map(|s| s.cidr_block).collect())
}
