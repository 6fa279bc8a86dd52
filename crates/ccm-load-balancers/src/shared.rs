//! Pieces shared by both flavours: names, tags, the cluster configuration, subnet discovery, security group
//! rules and target instances.

use std::collections::{BTreeMap, BTreeSet};

use ccm_aws_api::{
    Ec2, ErrorKind, Filter, InstanceId, SecurityGroupId, SubnetId, Tags, VpcId,
    ec2::{AvailabilityZone, IpPermission, NewSecurityGroup, RouteTable, SecurityGroup, Subnet},
};
use ccm_tagging::{ClusterTags, Ownership};
use k8s_openapi::api::core::v1::Node;
use serde::Serialize;

use crate::{Error, spec::ServiceSpec};

/// The tag naming the Service of a load balancer.
pub const SERVICE_NAME_TAG: &str = "kubernetes.io/service-name";
/// The subnet role tag for internet-facing load balancers.
pub const ROLE_ELB_TAG: &str = "kubernetes.io/role/elb";
/// The subnet role tag for internal load balancers.
pub const ROLE_INTERNAL_ELB_TAG: &str = "kubernetes.io/role/internal-elb";

/// How health checks of `externalTrafficPolicy: Cluster` Services probe the nodes
/// (`ClusterServiceLoadBalancerHealthProbeMode`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum HealthProbeMode {
    /// The traffic node port (upstream default `ServiceNodePort`).
    #[default]
    ServiceNodePort,
    /// kube-proxy's health endpoint (`Shared`): HTTP on `port` (10256) at `path` (`/healthz`).
    Shared {
        /// The port.
        port: i32,
        /// The path.
        path: String,
    },
}

/// What the load balancers need from the cloud config and the cluster. Start from [`LoadBalancerConfig::new`]
/// and set the rest with the `with_*` methods.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct LoadBalancerConfig {
    /// The cluster's ownership tags (`KubernetesClusterID`, legacy mode).
    pub cluster: ClusterTags,
    /// The cluster's VPC (`[Global] VPC`, else the VPC of the CCM's own instance).
    pub vpc_id: VpcId,
    /// The subnet used when discovery finds no tagged subnet (`[Global] SubnetID`, else the CCM's own subnet).
    pub fallback_subnet: Option<SubnetId>,
    /// `[Global] ElbSecurityGroup`: one group for every Classic ELB instead of a managed group per load
    /// balancer; never modified or deleted.
    pub elb_security_group: Option<SecurityGroupId>,
    /// `![Global] DisableSecurityGroupIngress`: whether rules on the nodes' groups are managed.
    pub manage_node_security_groups: bool,
    /// `ClusterServiceLoadBalancerHealthProbeMode` and its port and path.
    pub health_probe: HealthProbeMode,
    /// `[Global] NLBSecurityGroupMode = Managed`: new NLBs get a managed security group (or the groups of the
    /// `security-groups` annotation).
    pub nlb_managed_security_groups: bool,
    /// `[Global] AdoptUntaggedLoadBalancers`: a load balancer under a Service's name that carries no cluster tag
    /// at all is adopted (tagged `owned`, then managed and deleted) instead of refused. Off by default: this
    /// controller tags everything it creates, so an untagged one was most likely made by someone else.
    pub adopt_untagged: bool,
}

/// One atomic ingress rule from a CIDR: protocol, port range, source.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct Rule {
    /// `tcp`, `udp`, `icmp`, `icmpv6`.
    pub protocol: String,
    /// First port (ICMP type).
    pub from_port: i32,
    /// Last port (ICMP code).
    pub to_port: i32,
    /// The source CIDR (IPv4 or IPv6).
    pub cidr: String,
}

// === impl LoadBalancerConfig ===

impl LoadBalancerConfig {
    /// A configuration with the defaults of the reference implementation: node rules managed, probes on the
    /// node port, no fallback subnet, no shared ELB group.
    pub fn new(cluster: ClusterTags, vpc_id: VpcId) -> Self {
        Self {
            cluster,
            vpc_id,
            fallback_subnet: None,
            elb_security_group: None,
            manage_node_security_groups: true,
            health_probe: HealthProbeMode::ServiceNodePort,
            nlb_managed_security_groups: false,
            adopt_untagged: false,
        }
    }

    /// Sets the subnet used when discovery finds none (`[Global] SubnetID`, else the CCM's own subnet).
    #[must_use]
    pub fn with_fallback_subnet(mut self, subnet: Option<SubnetId>) -> Self {
        self.fallback_subnet = subnet;
        self
    }

    /// Sets `[Global] ElbSecurityGroup`.
    #[must_use]
    pub fn with_elb_security_group(mut self, group: Option<SecurityGroupId>) -> Self {
        self.elb_security_group = group;
        self
    }

    /// Sets whether the nodes' groups get rules (`false` for `[Global] DisableSecurityGroupIngress = true`).
    #[must_use]
    pub fn with_node_security_group_rules(mut self, manage: bool) -> Self {
        self.manage_node_security_groups = manage;
        self
    }

    /// Sets `[Global] NLBSecurityGroupMode = Managed` (true) or unset (false).
    #[must_use]
    pub fn with_nlb_managed_security_groups(mut self, managed: bool) -> Self {
        self.nlb_managed_security_groups = managed;
        self
    }

    /// Sets `[Global] AdoptUntaggedLoadBalancers`: adopt load balancers under a Service's name that carry no
    /// cluster tag (see [`crate::ownership`]).
    #[must_use]
    pub fn with_adopt_untagged(mut self, adopt: bool) -> Self {
        self.adopt_untagged = adopt;
        self
    }

    /// Sets the health probe mode of `externalTrafficPolicy: Cluster` Services.
    #[must_use]
    pub fn with_health_probe(mut self, mode: HealthProbeMode) -> Self {
        self.health_probe = mode;
        self
    }
}

// === impl Rule ===

impl Rule {
    /// The rule as an EC2 permission.
    pub fn to_permission(&self) -> ccm_aws_api::ec2::IpPermission {
        let range = ccm_aws_api::ec2::IpRange {
            cidr: self.cidr.clone(),
            description: None,
        };
        let v6 = self.cidr.contains(':');
        ccm_aws_api::ec2::IpPermission {
            protocol: self.protocol.clone(),
            from_port: Some(self.from_port),
            to_port: Some(self.to_port),
            ip_ranges: if v6 { Vec::new() } else { vec![range.clone()] },
            ipv6_ranges: if v6 { vec![range] } else { Vec::new() },
            source_groups: Vec::new(),
        }
    }
}

/// The load balancer name of a Service, as upstream's `DefaultLoadBalancerName`: `a` followed by the UID without
/// dashes, cut to 32 characters. Stable for the Service's lifetime, so lookups by name are idempotent. Only ASCII
/// alphanumerics are kept (a UUID loses only its dashes, as upstream): a UID of any other shape must neither make a
/// name AWS refuses nor cut a multi-byte character in half (a panic).
pub fn load_balancer_name(uid: &str) -> Result<String, Error> {
    if uid.is_empty() {
        return Err(Error::MissingUid);
    }
    Ok(std::iter::once('a')
        .chain(uid.chars().filter(char::is_ascii_alphanumeric))
        .take(32)
        .collect())
}

/// The managed security group's name for load balancer `lb_name` (`k8s-elb-<name>`).
pub fn security_group_name(lb_name: &str) -> String {
    format!("k8s-elb-{lb_name}")
}

/// The managed security group's description.
pub fn security_group_description(lb_name: &str, spec: &ServiceSpec) -> String {
    format!("Security group for Kubernetes ELB {lb_name} ({})", spec.key())
}

/// The tags of a load balancer: the additional tags, the Service name and the cluster ownership tags (which win).
pub fn load_balancer_tags(cluster: &ClusterTags, spec: &ServiceSpec) -> Tags {
    let mut additional = spec.additional_tags.clone();
    additional.insert(SERVICE_NAME_TAG.to_owned(), spec.key());
    cluster.creation_tags(&additional)
}

/// The tags of the managed security group: the additional tags and the ownership tags.
pub fn security_group_tags(cluster: &ClusterTags, spec: &ServiceSpec) -> Tags {
    let mut additional = spec.additional_tags.clone();
    additional.insert(SERVICE_NAME_TAG.to_owned(), spec.key());
    cluster.creation_tags(&additional)
}

/// The ingress rules of a load balancer's own group: each listener port from each source range, plus ICMP
/// "fragmentation needed" (type 3 code 4; ICMPv6 "packet too big", type 2 code 0, for IPv6 sources) for path
/// MTU discovery.
pub fn load_balancer_ingress(protocol: &str, ports: &[i32], source_ranges: &[String]) -> BTreeSet<Rule> {
    let mut rules = BTreeSet::new();
    let protocol = protocol.to_ascii_lowercase();
    for cidr in source_ranges {
        for port in ports {
            rules.insert(Rule {
                protocol: protocol.clone(),
                from_port: *port,
                to_port: *port,
                cidr: cidr.clone(),
            });
        }
        let (icmp, ty, code) = if cidr.contains(':') {
            ("icmpv6", 2, 0)
        } else {
            ("icmp", 3, 4)
        };
        rules.insert(Rule {
            protocol: icmp.to_owned(),
            from_port: ty,
            to_port: code,
            cidr: cidr.clone(),
        });
    }
    rules
}

/// The atomic CIDR rules of a group's ingress (rules from groups are not listed).
pub fn observed_rules(group: &SecurityGroup) -> BTreeSet<Rule> {
    let mut rules = BTreeSet::new();
    for p in &group.ingress {
        let (Some(from), Some(to)) = (p.from_port, p.to_port) else {
            continue;
        };
        for r in p.ip_ranges.iter().chain(&p.ipv6_ranges) {
            rules.insert(Rule {
                protocol: p.protocol.to_ascii_lowercase(),
                from_port: from,
                to_port: to,
                cidr: r.cidr.clone(),
            });
        }
    }
    rules
}

/// The security group named `name` in the cluster's VPC (a load balancer's managed group), if any.
pub async fn find_group<E: Ec2>(
    ec2: &E,
    config: &LoadBalancerConfig,
    name: &str,
) -> Result<Option<SecurityGroup>, Error> {
    let groups = ec2
        .security_groups(&[
            Filter::new("group-name", [name]),
            Filter::new("vpc-id", [config.vpc_id.as_str()]),
        ])
        .await
        .map_err(Error::aws("looking up the load balancer's security group"))?;
    Ok(groups.into_iter().find(|g| g.name == name))
}

/// Creates the managed group `name` in the cluster's VPC; one that already exists (created concurrently, or by a
/// run that crashed before recording it) is adopted by name.
pub async fn create_or_adopt_group<E: Ec2>(
    ec2: &E,
    config: &LoadBalancerConfig,
    name: &str,
    description: &str,
    tags: &Tags,
) -> Result<SecurityGroupId, Error> {
    let context = "creating the load balancer's security group";
    let created = ec2
        .create_security_group(&NewSecurityGroup {
            name: name.to_owned(),
            description: description.to_owned(),
            vpc_id: config.vpc_id.clone(),
            tags: tags.clone(),
        })
        .await;
    match created {
        Ok(id) => Ok(id),
        Err(e) if e.kind() == ErrorKind::Conflict => find_group(ec2, config, name)
            .await?
            .map(|g| g.id)
            .ok_or_else(|| Error::aws(context)(e)),
        Err(e) => Err(Error::aws(context)(e)),
    }
}

/// Adds `permissions` to `group` in one call; when some exist already (a crashed run), adds them one by one,
/// skipping the duplicates, so repeating it is harmless.
pub async fn authorize_idempotent<E: Ec2>(
    ec2: &E,
    group: &SecurityGroupId,
    permissions: &[IpPermission],
    context: &'static str,
) -> Result<(), Error> {
    match ec2.authorize_ingress(group, permissions).await {
        Err(e) if e.kind() == ErrorKind::Conflict => {
            for p in permissions {
                match ec2.authorize_ingress(group, std::slice::from_ref(p)).await {
                    Err(e) if e.kind() != ErrorKind::Conflict => return Err(Error::aws(context)(e)),
                    _ => {}
                }
            }
            Ok(())
        }
        other => other.map_err(Error::aws(context)),
    }
}

/// Removes `permissions` from `group` in one call; when some are gone already (AWS then removes none), removes
/// them one by one, skipping the missing ones, so repeating it is harmless.
pub async fn revoke_idempotent<E: Ec2>(
    ec2: &E,
    group: &SecurityGroupId,
    permissions: &[IpPermission],
    context: &'static str,
) -> Result<(), Error> {
    match ec2.revoke_ingress(group, permissions).await {
        Err(e) if e.is_not_found() => {
            for p in permissions {
                match ec2.revoke_ingress(group, std::slice::from_ref(p)).await {
                    Err(e) if !e.is_not_found() => return Err(Error::aws(context)(e)),
                    _ => {}
                }
            }
            Ok(())
        }
        other => other.map_err(Error::aws(context)),
    }
}

/// Whether `group` allows all traffic from `source`.
pub fn allows_all_from(group: &SecurityGroup, source: &SecurityGroupId) -> bool {
    group
        .ingress
        .iter()
        .any(|p| p.protocol == "-1" && p.source_groups.iter().any(|g| g.group_id == *source))
}

/// The group of an instance that receives the load balancer's rule: the only group tagged for the cluster, else
/// the only untagged group; several candidates are an error naming them.
pub fn instance_group(
    instance: &InstanceId,
    groups: &[&SecurityGroup],
    cluster: &ClusterTags,
) -> Result<Option<SecurityGroupId>, Error> {
    let tagged: Vec<&SecurityGroup> = groups
        .iter()
        .copied()
        .filter(|g| cluster.is_tagged(&g.tags))
        .collect();
    let untagged: Vec<&SecurityGroup> = groups
        .iter()
        .copied()
        .filter(|g| cluster.ownership(&g.tags) == Ownership::Untagged)
        .collect();
    let ids = |gs: &[&SecurityGroup]| gs.iter().map(|g| g.id.to_string()).collect::<Vec<_>>();
    match (tagged.as_slice(), untagged.as_slice()) {
        ([one], _) => Ok(Some(one.id.clone())),
        ([], [one]) => Ok(Some(one.id.clone())),
        ([], []) => Ok(None),
        ([], many) => Err(Error::AmbiguousInstanceGroups {
            instance: instance.to_string(),
            groups: ids(many),
            what: "untagged",
        }),
        (many, _) => Err(Error::AmbiguousInstanceGroups {
            instance: instance.to_string(),
            groups: ids(many),
            what: "cluster-tagged",
        }),
    }
}

/// The instance ID of a node, from its provider ID (`aws:///us-east-1a/i-0123...`); Fargate and malformed
/// provider IDs give `None`.
pub fn node_instance_id(node: &Node) -> Option<InstanceId> {
    let provider_id = node.spec.as_ref()?.provider_id.as_deref()?;
    let rest = provider_id.strip_prefix("aws://")?;
    let last = rest.rsplit('/').next()?;
    (last.starts_with("i-") && last.len() > 2).then(|| InstanceId::new(last))
}

/// The target instances: nodes with every label of `labels` (an empty value matches any value), by instance ID,
/// sorted and deduplicated.
pub fn target_instances(nodes: &[&Node], labels: &[(String, String)]) -> Vec<InstanceId> {
    let mut out: BTreeSet<InstanceId> = BTreeSet::new();
    for node in nodes {
        let node_labels = node.metadata.labels.as_ref();
        let matches = labels.iter().all(|(k, v)| {
            node_labels
                .and_then(|l| l.get(k))
                .is_some_and(|actual| v.is_empty() || actual == v)
        });
        if !matches {
            continue;
        }
        match node_instance_id(node) {
            Some(id) => {
                out.insert(id);
            }
            None => tracing::debug!(
                node = node.metadata.name.as_deref().unwrap_or_default(),
                "node without an EC2 instance provider ID is not a target"
            ),
        }
    }
    out.into_iter().collect()
}

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

/// A load balancer scheme's AWS name.
pub fn scheme(internal: bool) -> &'static str {
    if internal { "internal" } else { "internet-facing" }
}

/// The Warning notice of a recreation: what is recreated, why, and what that costs its users.
pub fn recreation_notice(kind: &str, name: &str, reason: &str) -> String {
    format!(
        "recreating {kind} {name}: {reason}; its DNS name changes and traffic is interrupted until the new load \
         balancer is in service"
    )
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
    let needs_ipv6 = spec.flavour == crate::Flavour::Network
        && spec.ip_address_type == crate::spec::IpAddressType::Dualstack;
    let (ids, details) = resolve_subnet_details(ec2, config, spec, zones, needs_ipv6).await?;
    if needs_ipv6 {
        let lacking: Vec<String> = ids
            .iter()
            .filter(|id| {
                !details
                    .iter()
                    .any(|s| s.id == **id && !s.ipv6_cidr_blocks.is_empty())
            })
            .map(ToString::to_string)
            .collect();
        if !lacking.is_empty() {
            return Err(Error::SubnetsWithoutIpv6 { subnets: lacking });
        }
    }
    Ok(ids)
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
        if out.len() != wanted.len() {
            return Err(Error::SubnetsNotFound {
                wanted: wanted.clone(),
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

#[cfg(test)]
mod tests;
