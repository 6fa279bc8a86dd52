//! Security groups: the load balancer's own ingress rules, a managed group found, created or adopted by name,
//! idempotent rule changes, and the node group of an instance that receives the load balancer's rule.

use std::collections::BTreeSet;

use ccm_aws_api::{
    Ec2, Filter, InstanceId, SecurityGroupId, Tags,
    ec2::{IpPermission, IpRange, NewSecurityGroup, PrefixListSource, SecurityGroup, SourceGroup},
};
use ccm_tagging::{ClusterTags, Ownership};
use serde::Serialize;

use crate::{
    Error, InvalidService, LoadBalancerConfig, ServiceSpec,
    annotations::{Key, Problem},
};

/// One atomic ingress rule: protocol, port range, source (a CIDR, a security group or a managed prefix list).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct Rule {
    /// `tcp`, `udp`, `icmp`, `icmpv6`.
    pub protocol: String,
    /// First port (ICMP type).
    pub from_port: i32,
    /// Last port (ICMP code).
    pub to_port: i32,
    /// The source: a CIDR (IPv4 or IPv6), a security group ID (`sg-…`) for the nodes' rules that reference
    /// an NLB's own group ([`is_group_source`]), or a managed prefix list ID (`pl-…`,
    /// [`is_prefix_list_source`]) on a load balancer's own group.
    pub source: String,
}

// === impl Rule ===

impl Rule {
    /// The rule as an EC2 permission.
    pub fn to_permission(&self) -> ccm_aws_api::ec2::IpPermission {
        let mut permission = ccm_aws_api::ec2::IpPermission {
            protocol: self.protocol.clone(),
            from_port: Some(self.from_port),
            to_port: Some(self.to_port),
            ..ccm_aws_api::ec2::IpPermission::default()
        };
        add_source(&mut permission, &self.source, None);
        permission
    }
}

/// Whether a rule's source is a security group (an ID, `sg-…`) rather than a CIDR.
pub fn is_group_source(source: &str) -> bool {
    source.starts_with("sg-")
}

/// Whether a rule's source is a managed prefix list (an ID, `pl-…`) rather than a CIDR.
pub fn is_prefix_list_source(source: &str) -> bool {
    source.starts_with("pl-")
}

/// Adds `source` (a CIDR, a group ID or a prefix list ID) with its description to the matching list of
/// `permission`.
pub fn add_source(permission: &mut IpPermission, source: &str, description: Option<String>) {
    if is_prefix_list_source(source) {
        permission.prefix_lists.push(PrefixListSource {
            id: source.to_owned(),
            description,
        });
        return;
    }
    if is_group_source(source) {
        permission.source_groups.push(SourceGroup {
            group_id: SecurityGroupId::new(source.to_owned()),
            description,
        });
        return;
    }
    let range = IpRange {
        cidr: source.to_owned(),
        description,
    };
    if source.contains(':') {
        permission.ipv6_ranges.push(range);
    } else {
        permission.ip_ranges.push(range);
    }
}

/// The ingress rules of a load balancer's own group: each listener port from each source range, plus ICMP
/// "fragmentation needed" (type 3 code 4; ICMPv6 "packet too big", type 2 code 0, for IPv6 sources) for path
/// MTU discovery; and each listener port from each managed prefix list (without ICMP, as the AWS Load Balancer
/// Controller: a prefix list's weight counts against the group's rule quota once per rule).
pub fn load_balancer_ingress(
    protocol: &str,
    ports: &[i32],
    source_ranges: &[String],
    prefix_lists: &[String],
) -> BTreeSet<Rule> {
    let mut rules = BTreeSet::new();
    let protocol = protocol.to_ascii_lowercase();
    for list in prefix_lists {
        for port in ports {
            rules.insert(Rule {
                protocol: protocol.clone(),
                from_port: *port,
                to_port: *port,
                source: list.clone(),
            });
        }
    }
    for cidr in source_ranges {
        for port in ports {
            rules.insert(Rule {
                protocol: protocol.clone(),
                from_port: *port,
                to_port: *port,
                source: cidr.clone(),
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
            source: cidr.clone(),
        });
    }
    rules
}

/// Refuses the Service's managed prefix lists when its load balancer has no security group of its own that this
/// controller manages: the Service gives its own groups, or the configuration gives none (`config_gives_none`
/// says why). Their rules would then land on groups that are not ours, and each list's entries would count
/// against those groups' rule quota (the nodes' among them). Checked while building the model, so before
/// anything is written.
pub fn check_prefix_lists(spec: &ServiceSpec, config_gives_none: Option<&str>) -> Result<(), Error> {
    let given = "the Service gives its own groups (aws-load-balancer-security-groups)";
    let no_own_group = spec.security_groups.as_ref().map(|_| given).or(config_gives_none);
    let Some(why) = no_own_group.filter(|_| !spec.prefix_lists.is_empty()) else {
        return Ok(());
    };
    let problem = Problem {
        field: Key::SecurityGroupPrefixLists.name().to_owned(),
        value: spec.prefix_lists.join(","),
        accepted: format!(
            "absent here: {why}, so the load balancer has no security group of its own that this controller \
             manages, and the lists' rules go only there (never to other groups, whose rule quota, the nodes' \
             included, would pay for the lists' entries)"
        ),
    };
    Ok(InvalidService::check(spec, vec![problem])?)
}

/// The atomic CIDR and prefix list rules of a group's ingress (rules from groups are not listed). Prefix list
/// rules are listed so that a managed group holds exactly the annotation's: one dropped from it is revoked.
pub fn observed_rules(group: &SecurityGroup) -> BTreeSet<Rule> {
    let mut rules = BTreeSet::new();
    for p in &group.ingress {
        let (Some(from), Some(to)) = (p.from_port, p.to_port) else {
            continue;
        };
        let cidrs = p.ip_ranges.iter().chain(&p.ipv6_ranges).map(|r| &r.cidr);
        for source in cidrs.chain(p.prefix_lists.iter().map(|l| &l.id)) {
            rules.insert(Rule {
                protocol: p.protocol.to_ascii_lowercase(),
                from_port: from,
                to_port: to,
                source: source.clone(),
            });
        }
    }
    rules
}

/// Removes the tag keys `remove`, then adds `add`, on group `id` (removal first: a crash in between leaves the
/// record of the annotation's keys naming those removed, which are then absent and skipped).
pub async fn retag_group<E: Ec2>(
    ec2: &E,
    id: &SecurityGroupId,
    add: &Tags,
    remove: &[String],
) -> Result<(), Error> {
    let resources = [id.to_string()];
    if !remove.is_empty() {
        let keys = remove.iter().map(|k| (k.clone(), None)).collect();
        ec2.delete_tags(&resources, &keys).await.map_err(Error::aws(
            "removing tags dropped from the annotation from a security group",
        ))?;
    }
    if !add.is_empty() {
        ec2.create_tags(&resources, add)
            .await
            .map_err(Error::aws("tagging a security group"))?;
    }
    Ok(())
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
        Err(e) if e.is_already_exists() => {
            let Some(group) = find_group(ec2, config, name).await? else {
                return Err(Error::aws(context)(e));
            };
            check_managed_group(config, &group)?;
            Ok(group.id)
        }
        Err(e) => Err(Error::aws(context)(e)),
    }
}

/// The check before using a group found under a load balancer's managed-group name: one owned by this cluster
/// is ours, and so is an untagged one (made by a create whose tags were lost: its ownership tags are added). One
/// tagged for another cluster, or `shared` for this one, is someone else's: it is never tagged, changed,
/// attached or deleted, and the Service fails naming it and its tag.
pub fn check_managed_group(config: &LoadBalancerConfig, group: &SecurityGroup) -> Result<(), Error> {
    match config.cluster.ownership(&group.tags) {
        Ownership::Owned | Ownership::Untagged => Ok(()),
        Ownership::Shared | Ownership::Foreign => Err(Error::ForeignGroup {
            group: group.id.as_str().to_owned(),
            name: group.name.clone(),
            tags: crate::ownership::cluster_tags(&group.tags),
        }),
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
        Err(e) if e.is_already_exists() => {
            for p in permissions {
                match ec2.authorize_ingress(group, std::slice::from_ref(p)).await {
                    Err(e) if !e.is_already_exists() => return Err(Error::aws(context)(e)),
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

/// A security group of the load balancer: the managed one (whose ID is known only once it exists) or a given ID.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub enum GroupRef {
    /// The managed group `k8s-elb-<name>`.
    Managed,
    /// A group by ID (annotation, `ElbSecurityGroup`, or an existing group).
    Id(String),
}

/// The managed security group.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ManagedGroup {
    /// Its name.
    pub name: String,
    /// Its description.
    pub description: String,
    /// Its creation tags.
    pub tags: Tags,
    /// Exactly these CIDR and prefix list rules.
    pub ingress: BTreeSet<Rule>,
}

/// What brings the observed managed group to [`ManagedGroup`]: both flavours plan it the same way.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GroupDiff {
    /// The group is missing: create it (with its tags).
    pub create: bool,
    /// Rules to add.
    pub authorize: Vec<Rule>,
    /// Rules to remove.
    pub revoke: Vec<Rule>,
    /// Tags to add or overwrite on an existing group this controller made (it names the Service). One the Go
    /// controller made with its cluster tag is taken over without a write (found for deletion by its name and
    /// cluster tag); an untagged one (a Go controller without a cluster ID) gets this Service's tags, the cluster
    /// tag `owned` included, so that its deletion finds it.
    pub add_tags: Tags,
    /// Tag keys to remove from it: those dropped from the annotation ([`super::dropped_tags`]).
    pub remove_tags: Vec<String>,
}

// === impl ManagedGroup ===

impl ManagedGroup {
    /// What `observed` (the group found by name, if any) lacks or has too much.
    pub fn diff(&self, observed: Option<&SecurityGroup>) -> GroupDiff {
        let (create, current) = match observed {
            None => (true, BTreeSet::new()),
            Some(group) => (false, observed_rules(group)),
        };
        // A group this controller made (it names the Service), and an untagged one taken over (the caller refused
        // another cluster's and a `shared` one), which would otherwise outlive its Service since deletion deletes
        // owned groups only. One the Go controller made with its cluster tag is taken over without a write.
        let tracked = observed.filter(|g| {
            g.tags.contains_key(super::SERVICE_NAME_TAG)
                || !g.tags.keys().any(|k| ccm_tagging::is_ownership_key(k))
        });
        GroupDiff {
            create,
            authorize: self.ingress.difference(&current).cloned().collect(),
            revoke: current.difference(&self.ingress).cloned().collect(),
            add_tags: tracked
                .map(|g| super::tag_additions(&g.tags, &self.tags))
                .unwrap_or_default(),
            remove_tags: tracked
                .map(|g| super::dropped_tags(&g.tags, &self.tags))
                .unwrap_or_default(),
        }
    }
}
