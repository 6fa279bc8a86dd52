//! The rules an NLB needs on the nodes' own security groups (skipped with `[Global] DisableSecurityGroupIngress`):
//! client traffic to the node ports, health checks from the load balancer's own addresses and ICMP for path MTU
//! discovery. Every rule carries a description naming the load balancer, so that the rules of one NLB can be found,
//! reconciled and removed without touching anybody else's.
//!
//! The behaviour of upstream's `updateInstanceSecurityGroupsForNLB`, made correct and cheap:
//!
//! - The group of a target instance that receives the rules is [`shared::instance_group`]: its only group tagged
//!   for the cluster, else its only untagged group (several candidates are an error naming them).
//! - An NLB with security groups (managed or given) is referenced instead of CIDRs: on each such group,
//!   `tcp`/`udp` on each node port and `tcp` on each health check port from the NLB's group
//!   ([`NodeAccess::source_group`]), described as below; no MTU rule (the NLB's own group answers path MTU
//!   discovery). That is one rule per port whatever the source ranges and subnets, where CIDR rules multiply
//!   ports by ranges and subnets and are the first wall a large cluster hits
//!   (`RulesPerSecurityGroupLimitExceeded`). Switching an NLB from CIDR rules to its group adds the new rules
//!   before the old ones go, so traffic never stops.
//! - Otherwise, on each such group: **client rules**, `tcp`/`udp` on each node port from each client CIDR, described
//!   [`CLIENT_RULE_PREFIX`]`<name>`; **health rules**, `tcp` on each health check port from the private IPv4
//!   address (`/32`) of the load balancer's network interface in each of its subnets (where health checks come
//!   from; upstream allows each subnet's whole CIDR), or from the subnet's IPv4 CIDR while no interface is seen
//!   there (see below), described [`HEALTH_RULE_PREFIX`]`<name>`, left out when the client rules
//!   already allow them (clients include `0.0.0.0/0` (upstream: are exactly that), every client port is TCP and
//!   the health ports are client ports; or, rule by rule, a client rule with the same port and source);
//!   **MTU rules**, ICMP "fragmentation needed" (type 3 code 4; ICMPv6 "packet too big", type 2 code 0, for IPv6
//!   sources) from every CIDR that any NLB's client rule on the group allows, described [`MTU_RULE`] (shared by
//!   every NLB: an MTU rule goes when no client rule of any NLB uses its CIDR any more).
//! - The cluster's other groups (tagged `kubernetes.io/cluster/<id>` with any value, in the cluster's VPC) lose
//!   the rules described with this load balancer's name. Rules with another description are never changed, nor
//!   are groups of other clusters, nor untagged groups other than the target instances' chosen ones.
//! - The interfaces are found by the description AWS gives them, `ELB net/<name>/<id>`
//!   ([`interface_description`]). A load balancer this run creates has none yet, and right after its creation
//!   AWS may not show them (eventual consistency): those subnets' CIDRs are used meanwhile
//!   ([`Observed::subnets_without_interfaces`]), and a later full ensure narrows them to the addresses (the new
//!   rules added before the CIDR rules go). Rules made from the CIDRs by an earlier version or by the upstream
//!   controller are narrowed the same way.
//! - A rule that AWS already has under another description (the same protocol, ports and source, which AWS
//!   treats as one rule) is taken as present: authorizing it again would fail as a duplicate. A health rule its
//!   owner gives up while another NLB on that group needs it (same subnets, same health port) is handed over to
//!   that NLB instead of revoked ([`find_heirs`]); any other such rule its owner may remove, and the next
//!   reconcile of this load balancer adds it back under its own description.
//!
//! AWS calls of [`observe`], made concurrently: one `DescribeInstances` for all targets (none without targets),
//! one `DescribeSecurityGroups` filtered on the cluster tag key and the VPC (two in legacy tag mode), one
//! `DescribeNetworkInterfaces` for the load balancer's interfaces (none when no health rule is needed or the load
//! balancer does not exist yet) followed by one `DescribeSubnets` only for subnets where no interface was seen
//! (so one of the two in steady state, as upstream reads the subnets), then one more
//! `DescribeSecurityGroups` only when a target instance has no group in that set (untagged node groups). So 3
//! reads for a cluster with tagged node groups, never a whole-region scan (upstream reads every group of the
//! region). [`plan`] is pure and returns nothing when the groups are right, so a steady reconcile makes no
//! mutating call; [`apply`] makes one `AuthorizeSecurityGroupIngress` or `RevokeSecurityGroupIngress` per change
//! (one per rule only when a crashed or concurrent run left some of the batch done already).
//!
//! Deletion: `plan(&NodeAccess::none(name), &observed)` revokes every rule of the load balancer from the observed
//! groups (and the MTU rules that no client rule needs any more). Observing with the last target instances (or a
//! [`NodeAccess`] that still names them) also cleans their untagged groups, which the tag-filtered read cannot
//! find.

use std::{
    collections::{BTreeMap, BTreeSet},
    net::{Ipv4Addr, Ipv6Addr},
};

use ccm_aws_api::{
    Ec2, SecurityGroupId, SubnetId,
    ec2::{IpPermission, SecurityGroup},
};
use serde::Serialize;

use crate::{Error, shared, shared::Rule};

mod heirs;
mod observe;

pub use heirs::find as find_heirs;
pub use observe::{interface_description, observe};

pub use crate::shared::neighbours::{CLIENT_RULE_PREFIX, HEALTH_RULE_PREFIX};
/// The description of the ICMP path MTU rules (shared by every NLB of the cluster).
pub const MTU_RULE: &str = "kubernetes.io/rule/nlb/mtu";
/// The source of rules referencing an NLB's managed group before the group exists (planned with its creation);
/// applying them substitutes the created group's ID.
pub const MANAGED_GROUP_SOURCE: &str = "<the NLB's managed security group>";

/// What the nodes' groups must allow for one NLB.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NodeAccess {
    /// The load balancer's name (in the rule descriptions).
    pub load_balancer: String,
    /// Client traffic: (`tcp` or `udp`, node port).
    pub client_ports: BTreeSet<(String, i32)>,
    /// Where clients come from (the Service's source ranges).
    pub client_cidrs: Vec<String>,
    /// Health check ports (TCP), probed from the load balancer's own addresses.
    pub health_ports: BTreeSet<i32>,
    /// The target instances (IDs).
    pub instances: Vec<String>,
    /// The NLB's security group, when it has groups: the source of every client and health rule instead of the
    /// CIDRs (`None`: CIDR rules). [`MANAGED_GROUP_SOURCE`] stands for a managed group that this run creates.
    pub source_group: Option<String>,
    /// Whether the targets are IPv6 (IPv6 target groups): health checks then come from the IPv6 CIDRs of the
    /// load balancer's subnets.
    pub ipv6: bool,
}

/// A rule with its description.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct DescribedRule {
    /// The rule.
    pub rule: Rule,
    /// Its description (empty when the rule has none).
    pub description: String,
}

/// What [`observe`] found.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct Observed {
    /// The groups that may hold this load balancer's rules or must receive them, sorted by ID: the cluster's
    /// groups in its VPC and the group chosen for each target instance. [`plan`] changes nothing else.
    pub groups: Vec<SecurityGroup>,
    /// The group that receives the rules, per target instance ID (instances without a candidate group, unknown
    /// or terminated ones are absent).
    pub instance_groups: BTreeMap<String, SecurityGroupId>,
    /// Where health checks come from: the private IPv4 address (`/32`) of the load balancer's network interface
    /// in each of its subnets, or the subnet's IPv4 CIDR where no interface is seen (sorted).
    pub health_sources: Vec<String>,
    /// The subnets whose CIDR stands in for the load balancer's address among `health_sources` (created by this
    /// run, or its interface not visible yet): a later full ensure narrows them.
    pub subnets_without_interfaces: Vec<SubnetId>,
    /// Target instances that are stopping, stopped, shutting down or terminated: `RegisterTargets` refuses
    /// them (found by the chaos soak: one Node outliving its instance failed every reconcile of every NLB).
    /// Instances in `skipped` are among them.
    pub not_running: BTreeSet<String>,
    /// Target instances whose group cannot be chosen (several tagged for the cluster, or several untagged),
    /// with why: neither registered nor given rules, and a Warning on their Node.
    pub skipped: BTreeMap<String, String>,
    /// Health rules this load balancer gives up that another load balancer on the same group needs, with the
    /// description that one's own rule has ([`find_heirs`]): handed over (described so) instead of revoked.
    pub heirs: BTreeMap<(SecurityGroupId, Rule), String>,
}

/// A change to one node group.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub enum RuleChange {
    /// Adds rules to a group.
    Authorize {
        /// The group.
        group: String,
        /// The rules.
        rules: Vec<DescribedRule>,
    },
    /// Removes rules from a group.
    Revoke {
        /// The group.
        group: String,
        /// The rules.
        rules: Vec<DescribedRule>,
    },
}

// === impl NodeAccess ===

impl NodeAccess {
    /// No access at all: planning against it removes every rule of `load_balancer` (deletion).
    pub fn none(load_balancer: &str) -> Self {
        Self {
            load_balancer: load_balancer.to_owned(),
            client_ports: BTreeSet::new(),
            client_cidrs: Vec::new(),
            health_ports: BTreeSet::new(),
            instances: Vec::new(),
            source_group: None,
            ipv6: false,
        }
    }

    /// This access with its rules referencing `group` (`None`: CIDR rules).
    #[must_use]
    pub fn referencing(mut self, group: Option<String>) -> Self {
        self.source_group = group;
        self
    }

    /// The description of this load balancer's client rules.
    pub fn client_description(&self) -> String {
        format!("{CLIENT_RULE_PREFIX}{}", self.load_balancer)
    }

    /// The description of this load balancer's health check rules.
    pub fn health_description(&self) -> String {
        format!("{HEALTH_RULE_PREFIX}{}", self.load_balancer)
    }

    /// Whether the client rules already allow every health check (clients include `0.0.0.0/0`, every client
    /// port is TCP and the health ports are among them), so no health rule is needed.
    pub fn health_covered_by_clients(&self) -> bool {
        let everyone = if self.ipv6 { "::/0" } else { "0.0.0.0/0" };
        let all_v4 = self.client_cidrs.iter().any(|c| canonical_cidr(c) == everyone);
        let all_tcp = self
            .client_ports
            .iter()
            .all(|(p, _)| p.eq_ignore_ascii_case("tcp"));
        let tcp_ports: BTreeSet<i32> = self.client_ports.iter().map(|(_, port)| *port).collect();
        all_v4 && all_tcp && self.health_ports.is_subset(&tcp_ports)
    }

    /// The client and health rules every target group must hold, given the health check sources (unused when
    /// the rules reference the NLB's group).
    pub fn rules(&self, health_sources: &[String]) -> BTreeSet<DescribedRule> {
        if let Some(group) = &self.source_group {
            return self.group_rules(group);
        }
        let client = self.client_description();
        let mut rules = BTreeSet::new();
        for (protocol, port) in &self.client_ports {
            for cidr in &self.client_cidrs {
                rules.insert(DescribedRule {
                    rule: Rule {
                        protocol: protocol.to_ascii_lowercase(),
                        from_port: *port,
                        to_port: *port,
                        source: canonical_cidr(cidr),
                    },
                    description: client.clone(),
                });
            }
        }
        if self.health_covered_by_clients() {
            return rules;
        }
        let allowed: BTreeSet<Rule> = rules.iter().map(|r| r.rule.clone()).collect();
        let health = self.health_description();
        for port in &self.health_ports {
            for cidr in health_sources {
                let rule = Rule {
                    protocol: "tcp".to_owned(),
                    from_port: *port,
                    to_port: *port,
                    source: canonical_cidr(cidr),
                };
                // AWS keeps one rule per protocol, ports and source: a client rule covers it already.
                if !allowed.contains(&rule) {
                    rules.insert(DescribedRule {
                        rule,
                        description: health.clone(),
                    });
                }
            }
        }
        rules
    }

    /// The rules from the NLB's group: each client port, and each health port that no TCP client rule covers.
    fn group_rules(&self, group: &str) -> BTreeSet<DescribedRule> {
        let rule = |protocol: &str, port: i32| Rule {
            protocol: protocol.to_ascii_lowercase(),
            from_port: port,
            to_port: port,
            source: group.to_owned(),
        };
        let client = self.client_description();
        let mut rules: BTreeSet<DescribedRule> = self
            .client_ports
            .iter()
            .map(|(protocol, port)| DescribedRule {
                rule: rule(protocol, *port),
                description: client.clone(),
            })
            .collect();
        let health = self.health_description();
        for port in &self.health_ports {
            let rule = rule("tcp", *port);
            if !rules.iter().any(|r| r.rule == rule) {
                rules.insert(DescribedRule {
                    rule,
                    description: health.clone(),
                });
            }
        }
        rules
    }

    /// Whether any health rule may be needed (and so where health checks come from must be read).
    fn needs_health_sources(&self) -> bool {
        self.source_group.is_none()
            && !self.instances.is_empty()
            && !self.health_ports.is_empty()
            && !self.health_covered_by_clients()
    }
}

// === impl DescribedRule ===

impl DescribedRule {
    /// The ICMP path MTU rule for `cidr`: type 3 code 4 (ICMPv6 type 2 code 0 for IPv6), described [`MTU_RULE`].
    pub fn mtu(cidr: &str) -> Self {
        let cidr = canonical_cidr(cidr);
        let (protocol, ty, code) = if cidr.contains(':') {
            ("icmpv6", 2, 0)
        } else {
            ("icmp", 3, 4)
        };
        Self {
            rule: Rule {
                protocol: protocol.to_owned(),
                from_port: ty,
                to_port: code,
                source: cidr,
            },
            description: MTU_RULE.to_owned(),
        }
    }
}

// === impl RuleChange ===

impl RuleChange {
    /// The group changed.
    pub fn group(&self) -> &str {
        match self {
            Self::Authorize { group, .. } | Self::Revoke { group, .. } => group,
        }
    }

    /// The rules added or removed.
    pub fn rules(&self) -> &[DescribedRule] {
        match self {
            Self::Authorize { rules, .. } | Self::Revoke { rules, .. } => rules,
        }
    }

    /// Whether a rule references the managed group that this run creates ([`MANAGED_GROUP_SOURCE`]).
    pub fn needs_managed_group(&self) -> bool {
        self.rules().iter().any(|r| r.rule.source == MANAGED_GROUP_SOURCE)
    }

    /// This change with [`MANAGED_GROUP_SOURCE`] replaced by the managed group's ID.
    #[must_use]
    pub fn with_managed_group(&self, id: &str) -> Self {
        let mut change = self.clone();
        let (Self::Authorize { rules, .. } | Self::Revoke { rules, .. }) = &mut change;
        for r in rules.iter_mut().filter(|r| r.rule.source == MANAGED_GROUP_SOURCE) {
            id.clone_into(&mut r.rule.source);
        }
        change
    }
}

/// `cidr` in the form AWS keeps it (the network address without host bits; IPv6 compressed and lower case), so
/// that desired and observed rules compare equal; anything unparsable is returned unchanged (AWS rejects it).
fn canonical_cidr(cidr: &str) -> String {
    let cidr = cidr.trim();
    let Some((addr, len)) = cidr.split_once('/') else {
        return cidr.to_owned();
    };
    let Ok(len) = len.parse::<u32>() else {
        return cidr.to_owned();
    };
    if let Ok(v4) = addr.parse::<Ipv4Addr>()
        && len <= 32
    {
        let mask = u32::MAX.checked_shl(32 - len).unwrap_or(0);
        return format!("{}/{len}", Ipv4Addr::from(u32::from(v4) & mask));
    }
    if let Ok(v6) = addr.parse::<Ipv6Addr>()
        && len <= 128
    {
        let mask = u128::MAX.checked_shl(128 - len).unwrap_or(0);
        return format!("{}/{len}", Ipv6Addr::from(u128::from(v6) & mask));
    }
    cidr.to_owned()
}

/// AWS reports protocols by name or by IANA number.
pub(super) fn protocol_name(protocol: &str) -> String {
    match protocol {
        "6" => "tcp".to_owned(),
        "17" => "udp".to_owned(),
        "1" => "icmp".to_owned(),
        "58" => "icmpv6".to_owned(),
        other => other.to_ascii_lowercase(),
    }
}

/// Every rule of a group with its description, from CIDRs and from groups (all-port rules are not listed).
pub fn described_rules(group: &SecurityGroup) -> BTreeSet<DescribedRule> {
    let mut rules = BTreeSet::new();
    for p in &group.ingress {
        let (Some(from), Some(to)) = (p.from_port, p.to_port) else {
            continue;
        };
        let rule = |source: String, description: &Option<String>| DescribedRule {
            rule: Rule {
                protocol: protocol_name(&p.protocol),
                from_port: from,
                to_port: to,
                source,
            },
            description: description.clone().unwrap_or_default(),
        };
        for r in p.ip_ranges.iter().chain(&p.ipv6_ranges) {
            rules.insert(rule(canonical_cidr(&r.cidr), &r.description));
        }
        for g in &p.source_groups {
            rules.insert(rule(g.group_id.to_string(), &g.description));
        }
    }
    rules
}

/// The rules as EC2 permissions, one per protocol and port range, with their descriptions.
pub fn permissions(rules: &[DescribedRule]) -> Vec<IpPermission> {
    let mut by_ports: BTreeMap<(&str, i32, i32), IpPermission> = BTreeMap::new();
    for r in rules {
        let p = by_ports
            .entry((r.rule.protocol.as_str(), r.rule.from_port, r.rule.to_port))
            .or_insert_with(|| IpPermission {
                protocol: r.rule.protocol.clone(),
                from_port: Some(r.rule.from_port),
                to_port: Some(r.rule.to_port),
                ..IpPermission::default()
            });
        let description = (!r.description.is_empty()).then(|| r.description.clone());
        shared::add_source(p, &r.rule.source, description);
    }
    by_ports.into_values().collect()
}

/// The changes that make the observed groups match `access` (pure). Per group, in this order: revocations of
/// rules that are re-added under another description, additions, then the other revocations (so that traffic
/// keeps flowing while a port changes).
pub fn plan(access: &NodeAccess, observed: &Observed) -> Vec<RuleChange> {
    let client = access.client_description();
    let health = access.health_description();
    let targets: BTreeSet<&SecurityGroupId> = access
        .instances
        .iter()
        .filter_map(|i| observed.instance_groups.get(i))
        .collect();
    let wanted = access.rules(&observed.health_sources);
    let mut done: BTreeSet<&SecurityGroupId> = BTreeSet::new();
    let mut changes = Vec::new();
    for group in &observed.groups {
        if done.insert(&group.id) {
            changes.extend(group_changes(
                group,
                targets.contains(&group.id),
                &wanted,
                (&client, &health),
                &observed.heirs,
            ));
        }
    }
    changes
}

/// The changes of one group: `is_target` when a target instance's rules go there.
fn group_changes(
    group: &SecurityGroup,
    is_target: bool,
    wanted: &BTreeSet<DescribedRule>,
    (client, health): (&str, &str),
    heirs: &BTreeMap<(SecurityGroupId, Rule), String>,
) -> Vec<RuleChange> {
    let mut changes = Vec::new();
    let present = described_rules(group);
    let ours = |r: &DescribedRule| r.description == client || r.description == health;
    if !is_target && !present.iter().any(ours) {
        // Neither a target nor holding our rules: another load balancer's business.
        return changes;
    }
    let mine: BTreeSet<DescribedRule> = if is_target {
        wanted.clone()
    } else {
        BTreeSet::new()
    };
    let mtu = mtu_rules(&present, &mine, client);
    let stale: Vec<&DescribedRule> = present
        .iter()
        .filter(|r| (ours(r) && !mine.contains(*r)) || (r.description == MTU_RULE && !mtu.contains(*r)))
        .collect();
    // What AWS keeps after the revocations: one rule per protocol, ports and source, whatever its description.
    let kept: BTreeSet<&Rule> = present
        .iter()
        .filter(|r| !stale.contains(r))
        .map(|r| &r.rule)
        .collect();
    // A health rule another NLB needs is handed over: revoked, then authorized again under its name.
    let handed: Vec<DescribedRule> = stale
        .iter()
        .filter_map(|r| {
            let heir = heirs.get(&(group.id.clone(), r.rule.clone()))?;
            (r.description == health).then(|| DescribedRule {
                rule: r.rule.clone(),
                description: heir.clone(),
            })
        })
        .collect();
    let mut add: BTreeMap<&Rule, &DescribedRule> = BTreeMap::new();
    for r in mine.iter().chain(&mtu).chain(&handed) {
        if !kept.contains(&r.rule) {
            add.entry(&r.rule).or_insert(r);
        }
    }
    let (first, later): (Vec<&DescribedRule>, Vec<&DescribedRule>) =
        stale.into_iter().partition(|r| add.contains_key(&r.rule));
    let id = group.id.to_string();
    let owned = |rules: Vec<&DescribedRule>| rules.into_iter().cloned().collect::<Vec<_>>();
    if !first.is_empty() {
        changes.push(RuleChange::Revoke {
            group: id.clone(),
            rules: owned(first),
        });
    }
    if !add.is_empty() {
        changes.push(RuleChange::Authorize {
            group: id.clone(),
            rules: owned(add.into_values().collect()),
        });
    }
    if !later.is_empty() {
        changes.push(RuleChange::Revoke {
            group: id,
            rules: owned(later),
        });
    }
    changes
}

/// ICMP for path MTU discovery from every CIDR any NLB's client rule allows here.
fn mtu_rules(
    present: &BTreeSet<DescribedRule>,
    mine: &BTreeSet<DescribedRule>,
    client: &str,
) -> BTreeSet<DescribedRule> {
    // Rules from a group (an NLB's own) need none: that group answers path MTU discovery for its clients.
    let cidr = |r: &&DescribedRule| {
        !shared::is_group_source(&r.rule.source) && r.rule.source != MANAGED_GROUP_SOURCE
    };
    let mut mtu_cidrs: BTreeSet<&str> = present
        .iter()
        .filter(|r| r.description.starts_with(CLIENT_RULE_PREFIX) && r.description != client)
        .filter(cidr)
        .map(|r| r.rule.source.as_str())
        .collect();
    mtu_cidrs.extend(
        mine.iter()
            .filter(|r| r.description == client)
            .filter(cidr)
            .map(|r| r.rule.source.as_str()),
    );
    mtu_cidrs.into_iter().map(DescribedRule::mtu).collect()
}

/// Applies one change; repeating it after a crash is harmless (duplicates and missing rules are not errors).
/// Rules referencing a managed group not created yet are refused: [`RuleChange::with_managed_group`] first.
/// One call per change; only when AWS reports part of the batch as already done (a duplicate to add, a missing
/// rule to remove) is the batch retried rule by rule, skipping those.
pub async fn apply<E: Ec2>(ec2: &E, change: &RuleChange) -> Result<(), Error> {
    if change.needs_managed_group() {
        return Err(Error::NotFound(format!(
            "the managed security group the rules on {} reference",
            change.group()
        )));
    }
    match change {
        RuleChange::Authorize { group, rules } => {
            let id = SecurityGroupId::new(group.clone());
            let context = "authorizing NLB rules on a node security group";
            shared::authorize_idempotent(ec2, &id, &permissions(rules), context).await
        }
        RuleChange::Revoke { group, rules } => {
            let id = SecurityGroupId::new(group.clone());
            let context = "revoking NLB rules from a node security group";
            shared::revoke_idempotent(ec2, &id, &permissions(rules), context).await
        }
    }
}

#[cfg(test)]
mod tests;
