//! The rules that let a Classic ELB reach the nodes: on the group of each target instance, one `tcp` rule per
//! port the load balancer sends to (its listeners' instance ports and its health check port), whose source is
//! the load balancer's first security group, described [`NODE_RULE_PREFIX`]`<load balancer name>`.
//!
//! Upstream (and earlier releases of this controller) allowed **all traffic** (`-1`) from that group instead. With a
//! group given by annotation that opened kubelet, every NodePort and hostNetwork pods to every member of the named
//! group (a bastion's, a VPN's, the VPC's default group), and the rule outlived the Service. Now:
//!
//! - Missing narrow rules are added; a rule AWS already has (same port and source, any description) counts.
//! - A narrow rule described with any load balancer's name goes when no load balancer using the same source
//!   group needs its port on that group ("needs" is decided from all of them: [`NodeGroups::others`], read from
//!   AWS, so that Services sharing `ElbSecurityGroup` or one given group never revoke each other's rules).
//! - A wide rule (`-1`) from the source goes once every port that any load balancer of that source needs on
//!   the group has its narrow rule (added first in the same plan: the Service keeps working throughout), on
//!   groups the controller may change ([`NodeGroups::revocable`]): any group when the source is the managed
//!   group, groups tagged for the cluster otherwise, and never when a group given by annotation is also
//!   attached to an instance (a bastion's or a VPN's group: its wide rules may be an operator's own).
//! - Rules from the source with another protocol, a port range or a foreign description are never touched.
//!
//! - A narrow rule no Classic ELB needs but an NLB using the same source group does (one group given to both
//!   flavours, with kube-proxy's shared health port: AWS keeps `tcp 10256` from it once, under the description
//!   of whichever load balancer made it) is handed over: revoked and authorized again at once, described as
//!   that NLB's own ([`NodeGroups::heirs`]), so that the NLB revokes it when it no longer needs it.
//!
//! Nothing is revoked while the other load balancers' needs are unknown: they are read (all Classic ELBs, and
//! the groups of their instances this observation did not read already; the NLBs whose rules from the source
//! name them, [`network_heirs`]) only when a revocation is possible and the source is not the managed group,
//! which no other load balancer uses.

use std::collections::{BTreeMap, BTreeSet};

use ccm_aws_api::{
    CatalogLookup, Ec2, Elb, Elbv2, Filter, InstanceId, SecurityGroupId,
    ec2::{InstanceState, IpPermission, SecurityGroup, SourceGroup},
    elb::ClassicLoadBalancer,
};
use serde::Serialize;

use super::{Change, HealthCheck, Listener};
use crate::{
    Error, LoadBalancerConfig, instance_reads, shared,
    shared::{GroupRef, neighbours},
};

pub use crate::shared::neighbours::{NODE_RULE_PREFIX, load_balancer_ports};

/// One rule whose source is the load balancer's group, as AWS reports it on a node group.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct SourceRule {
    /// `tcp`, `udp`, `icmp`, ... or `-1` (all traffic).
    pub protocol: String,
    /// The first port (`None` for all traffic).
    pub from_port: Option<i32>,
    /// The last port (`None` for all traffic).
    pub to_port: Option<i32>,
    /// The rule's description, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

/// The nodes' groups as observed for the node rules (read, never built by callers: fields may be added).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct NodeGroups {
    /// The group of each target instance, which must allow the load balancer's ports.
    pub wanted: BTreeSet<SecurityGroupId>,
    /// The rules whose source is the load balancer's group, per group holding any.
    pub rules: BTreeMap<SecurityGroupId, Vec<SourceRule>>,
    /// The groups whose wide rule from the source this controller may revoke (see the module documentation).
    pub revocable: BTreeSet<SecurityGroupId>,
    /// The ports other load balancers using the same source group need, per node group (`None`: not read, so
    /// nothing is revoked; the managed group is used by no other load balancer).
    pub others: Option<BTreeMap<SecurityGroupId, BTreeSet<i32>>>,
    /// Per node group and port, the description of the rule an NLB using the same source needs there
    /// ([`network_heirs`]): a narrow rule no Classic ELB needs is handed over to it instead of revoked.
    pub heirs: BTreeMap<(SecurityGroupId, i32), String>,
    /// What the observation learnt about the target instances (kept by the provider's host memory).
    pub instances: super::Known,
}

// === impl SourceRule ===

impl SourceRule {
    /// The narrow rule of `load_balancer` for `port`.
    pub fn narrow(port: i32, load_balancer: &str) -> Self {
        Self {
            protocol: "tcp".to_owned(),
            from_port: Some(port),
            to_port: Some(port),
            description: Some(format!("{NODE_RULE_PREFIX}{load_balancer}")),
        }
    }

    /// Whether this is an all-traffic rule.
    pub fn is_wide(&self) -> bool {
        self.protocol == "-1"
    }

    /// The port of a single-port TCP rule.
    pub fn port(&self) -> Option<i32> {
        match (self.from_port, self.to_port) {
            (Some(from), Some(to)) if from == to && (self.protocol == "tcp" || self.protocol == "6") => {
                Some(from)
            }
            _ => None,
        }
    }

    /// Whether a load balancer of this controller made it (its description names one).
    pub fn is_ours(&self) -> bool {
        self.description
            .as_deref()
            .is_some_and(|d| d.starts_with(NODE_RULE_PREFIX))
    }

    /// The rule as an EC2 permission from `source`.
    pub fn to_permission(&self, source: &SecurityGroupId) -> IpPermission {
        IpPermission {
            protocol: self.protocol.clone(),
            from_port: self.from_port,
            to_port: self.to_port,
            source_groups: vec![SourceGroup {
                group_id: source.clone(),
                description: self.description.clone(),
            }],
            ..IpPermission::default()
        }
    }
}

/// The rules of `group` whose source is `source`.
pub fn source_rules(group: &SecurityGroup, source: &SecurityGroupId) -> Vec<SourceRule> {
    let mut rules = Vec::new();
    for p in &group.ingress {
        for pair in p.source_groups.iter().filter(|g| g.group_id == *source) {
            rules.push(SourceRule {
                protocol: p.protocol.to_ascii_lowercase(),
                from_port: p.from_port.filter(|_| p.protocol != "-1"),
                to_port: p.to_port.filter(|_| p.protocol != "-1"),
                description: pair.description.clone(),
            });
        }
    }
    rules
}

/// The ports a Classic ELB sends to on the nodes: its listeners' instance ports and its health check port.
pub fn node_ports(listeners: &[Listener], health_check: &HealthCheck) -> BTreeSet<i32> {
    let mut ports: BTreeSet<i32> = listeners.iter().map(|l| l.instance_port).collect();
    ports.extend(neighbours::classic_health_port(&health_check.target));
    ports
}

/// The changes that give the `wanted` groups exactly `ports` from `from` (pure; see the module documentation).
/// Per group, additions come before revocations, so traffic keeps flowing while rules are narrowed.
pub fn plan(from: &GroupRef, ports: &BTreeSet<i32>, groups: &NodeGroups) -> Vec<Change> {
    let none = BTreeSet::new();
    let no_rules = Vec::new();
    let mut all: BTreeSet<&SecurityGroupId> = groups.wanted.iter().collect();
    all.extend(groups.rules.keys());
    let mut changes = Vec::new();
    for group in all {
        let rules = groups.rules.get(group).unwrap_or(&no_rules);
        let mine = if groups.wanted.contains(group) {
            ports
        } else {
            &none
        };
        let present: BTreeSet<i32> = rules.iter().filter_map(SourceRule::port).collect();
        let add: Vec<i32> = mine.difference(&present).copied().collect();
        let (revoke, heirs) = handed_over(group, stale(group, rules, mine, &present, &add, groups), groups);
        if !add.is_empty() {
            changes.push(Change::AuthorizeNodeAccess {
                group: group.to_string(),
                from: from.clone(),
                ports: add,
            });
        }
        if !heirs.is_empty() {
            let (rules, heirs) = heirs.into_iter().unzip();
            changes.push(Change::HandOverNodeAccess {
                group: group.to_string(),
                from: from.clone(),
                rules,
                heirs,
            });
        }
        if !revoke.is_empty() {
            changes.push(Change::RevokeNodeAccess {
                group: group.to_string(),
                from: from.clone(),
                rules: revoke,
            });
        }
    }
    changes
}

/// Splits the stale rules of `group` into those revoked and those an NLB needs (each with its heir's rule).
fn handed_over(
    group: &SecurityGroupId,
    stale: Vec<SourceRule>,
    groups: &NodeGroups,
) -> (Vec<SourceRule>, Vec<(SourceRule, SourceRule)>) {
    let mut revoke = Vec::new();
    let mut handed = Vec::new();
    for rule in stale {
        let heir = rule
            .port()
            .filter(|_| rule.is_ours())
            .and_then(|port| groups.heirs.get(&(group.clone(), port)));
        match heir {
            Some(description) => {
                let to = SourceRule {
                    description: Some(description.clone()),
                    ..rule.clone()
                };
                handed.push((rule, to));
            }
            None => revoke.push(rule),
        }
    }
    (revoke, handed)
}

/// The rules of one group to revoke: our narrow rules whose port nobody needs there, and the wide rule once
/// every needed port has its narrow rule.
fn stale(
    group: &SecurityGroupId,
    rules: &[SourceRule],
    mine: &BTreeSet<i32>,
    present: &BTreeSet<i32>,
    add: &[i32],
    groups: &NodeGroups,
) -> Vec<SourceRule> {
    let Some(others) = &groups.others else {
        return Vec::new();
    };
    let mut needed = mine.clone();
    needed.extend(others.get(group).into_iter().flatten());
    let narrowed = needed.iter().all(|p| present.contains(p) || add.contains(p));
    let wide_goes = narrowed && groups.revocable.contains(group);
    rules
        .iter()
        .filter(|r| {
            (r.is_ours() && r.port().is_some_and(|p| !needed.contains(&p))) || (r.is_wide() && wide_goes)
        })
        .cloned()
        .collect()
}

/// Whether a plan against `groups` could revoke anything (so that the other load balancers' needs matter).
pub(crate) fn may_revoke(ports: &BTreeSet<i32>, groups: &NodeGroups) -> bool {
    groups.rules.iter().any(|(group, rules)| {
        let wanted = groups.wanted.contains(group);
        rules.iter().any(|r| {
            (r.is_wide() && groups.revocable.contains(group))
                || (r.is_ours() && r.port().is_some_and(|p| !wanted || !ports.contains(&p)))
        })
    })
}

/// The ports that the Classic ELBs other than `name` which use `source` need, per node group: each one's
/// listeners' instance ports and health check port, on the group chosen for each of its registered instances.
/// `known` holds the instances' groups read already; the others are read (one `DescribeInstances` and one
/// `DescribeSecurityGroups` at most). An instance whose group is ambiguous counts for all its candidates.
pub async fn others<E: CatalogLookup, L: Elb>(
    ec2: &E,
    elb: &L,
    config: &LoadBalancerConfig,
    name: &str,
    source: &SecurityGroupId,
    known: &super::Known,
) -> Result<BTreeMap<SecurityGroupId, BTreeSet<i32>>, Error> {
    let context = "reading the other load balancers that use the same security group";
    let users: Vec<ClassicLoadBalancer> = elb
        .all_load_balancers()
        .await
        .map_err(Error::aws(context))?
        .into_iter()
        .filter(|lb| lb.name != name && lb.security_groups.contains(source) && !lb.instances.is_empty())
        .collect();
    let unknown: BTreeSet<&InstanceId> = users
        .iter()
        .flat_map(|lb| &lb.instances)
        .filter(|i| !known.running.contains_key(i.as_str()))
        .collect();
    let groups_of = instance_groups(ec2, config, &unknown, known).await?;
    let mut needs: BTreeMap<SecurityGroupId, BTreeSet<i32>> = BTreeMap::new();
    for lb in &users {
        let ports = load_balancer_ports(lb);
        for instance in &lb.instances {
            let groups: Vec<SecurityGroupId> = match known.running.get(instance.as_str()) {
                Some(group) => group.iter().cloned().collect(),
                None => groups_of.get(instance).cloned().unwrap_or_default(),
            };
            for group in groups {
                needs.entry(group).or_default().extend(ports.iter().copied());
            }
        }
    }
    Ok(needs)
}

/// The candidate node groups of each of `ids` (the chosen one, or all candidates when several are), reading
/// only groups `known` lacks.
async fn instance_groups<E: CatalogLookup>(
    ec2: &E,
    config: &LoadBalancerConfig,
    ids: &BTreeSet<&InstanceId>,
    known: &super::Known,
) -> Result<BTreeMap<InstanceId, Vec<SecurityGroupId>>, Error> {
    let context = "reading the groups of the other load balancers' instances";
    let mut out = BTreeMap::new();
    if ids.is_empty() {
        return Ok(out);
    }
    let ids: Vec<InstanceId> = ids.iter().map(|i| (*i).clone()).collect();
    let mut instances = ec2
        .lookup(&ids, instance_reads::FRESHNESS)
        .await
        .map_err(Error::aws(context))?
        .found;
    instances.retain(|i| !matches!(i.state, InstanceState::Terminated));
    let missing: BTreeSet<&str> = instances
        .iter()
        .flat_map(|i| &i.security_groups)
        .filter(|g| !known.groups.contains_key(*g))
        .map(SecurityGroupId::as_str)
        .collect();
    let read = if missing.is_empty() {
        Vec::new()
    } else {
        ec2.security_groups(&[Filter::new("group-id", missing.iter().copied())])
            .await
            .map_err(Error::aws(context))?
    };
    let by_id: BTreeMap<&SecurityGroupId, &SecurityGroup> = known
        .groups
        .iter()
        .chain(read.iter().map(|g| (&g.id, g)))
        .collect();
    for instance in &instances {
        let mine: Vec<&SecurityGroup> = instance
            .security_groups
            .iter()
            .filter_map(|id| by_id.get(id).copied())
            .collect();
        let groups = match shared::instance_group(&instance.id, &mine, &config.cluster) {
            Ok(group) => group.into_iter().collect(),
            Err(_) => mine.iter().map(|g| g.id.clone()).collect(),
        };
        out.insert(instance.id.clone(), groups);
    }
    Ok(out)
}

/// At most this many NLBs are read for one Classic ELB's handover (a bound on the calls; an NLB left unseen
/// gets its rule back at its next reconcile).
const MAX_NETWORK_HEIRS: usize = 20;

/// The narrow rules from `source` that NLBs need on the groups of `groups.rules` ([`NodeGroups::heirs`]). The
/// candidates on a group are the NLBs that rules from `source` there name: an NLB targeting the group keeps its
/// client rules there under its own name (node ports are unique in a cluster). One `DescribeLoadBalancers` and
/// one `DescribeTargetGroups` per candidate, none without one.
pub async fn network_heirs<V: Elbv2>(
    elbv2: &V,
    source: &SecurityGroupId,
    groups: &NodeGroups,
) -> Result<BTreeMap<(SecurityGroupId, i32), String>, Error> {
    let mut candidates: BTreeMap<&SecurityGroupId, BTreeSet<&str>> = BTreeMap::new();
    for (group, rules) in &groups.rules {
        let named = rules
            .iter()
            .filter_map(|r| neighbours::network_owner(r.description.as_deref()?));
        candidates.entry(group).or_default().extend(named);
    }
    let names: BTreeSet<&str> = candidates
        .values()
        .flatten()
        .copied()
        .take(MAX_NETWORK_HEIRS)
        .collect();
    if names.is_empty() {
        return Ok(BTreeMap::new());
    }
    let needs = neighbours::network_needs_from(elbv2, source, &names).await?;
    let mut heirs = BTreeMap::new();
    for (group, names) in candidates {
        for (port, description) in names.iter().filter_map(|n| needs.get(*n)).flatten() {
            heirs
                .entry((group.clone(), *port))
                .or_insert_with(|| description.clone());
        }
    }
    Ok(heirs)
}

/// Whether `group` is attached to any instance (one `DescribeNetworkInterfaces`): then it is not a load
/// balancer's group alone, and wide rules from it may be an operator's own.
pub async fn serves_instances<E: Ec2>(ec2: &E, group: &SecurityGroupId) -> Result<bool, Error> {
    let interfaces = ec2
        .network_interfaces(&[Filter::new("group-id", [group.as_str()])])
        .await
        .map_err(Error::aws(
            "reading what else uses the load balancer's security group",
        ))?;
    Ok(interfaces.iter().any(|i| i.attached_instance.is_some()))
}

/// The permissions of `ports` from `source`, described with `load_balancer`'s name.
pub fn permissions(source: &SecurityGroupId, ports: &[i32], load_balancer: &str) -> Vec<IpPermission> {
    ports
        .iter()
        .map(|p| SourceRule::narrow(*p, load_balancer).to_permission(source))
        .collect()
}
