//! Classic ELB rules on the cluster's node groups: upstream's all-traffic rules from a load balancer's group
//! (reported, never removed here: the next ensure of that Service narrows them to its ports, or a migration
//! from the Go controller wants to see them first), and narrow rules left by Classic ELBs that are gone or
//! leaked (removable).

use std::collections::{BTreeMap, BTreeSet};

use ccm_aws_api::{
    SecurityGroupId,
    ec2::{IpPermission, SecurityGroup},
};
use ccm_load_balancers::classic::{
    NODE_RULE_PREFIX,
    node_rules::{load_balancer_ports, source_rules},
};

use super::{Action, Finding, Kind, Scope, observe::Inventory};

/// The findings about Classic ELB rules on `node_groups` (the cluster's groups and its instances' groups).
pub(super) fn findings(
    scope: &Scope,
    inv: &Inventory,
    node_groups: &BTreeSet<&SecurityGroupId>,
    leaked: &BTreeSet<String>,
    out: &mut Vec<Finding>,
) {
    // The first group of each of the cluster's Classic ELBs: the source of its node rules.
    // Leaked ones are left out: deleting their group revokes its rules (a security-group finding).
    let sources: BTreeMap<&SecurityGroupId, &str> = inv
        .classic
        .iter()
        .filter(|(lb, tags)| scope.cluster.is_tagged(tags) && !leaked.contains(&lb.name))
        .filter_map(|(lb, _)| Some((lb.security_groups.first()?, lb.name.as_str())))
        .collect();
    let live: BTreeSet<&str> = inv
        .classic
        .iter()
        .map(|(lb, _)| lb.name.as_str())
        .filter(|n| !leaked.contains(*n))
        .collect();
    // The ports the live Classic ELBs send to, per group they use: a rule left by a deleted load balancer that
    // one of them needs (a shared health port) is kept by the controller, and so by `--delete`.
    let mut needed: BTreeMap<&SecurityGroupId, BTreeSet<i32>> = BTreeMap::new();
    for (lb, _) in inv
        .classic
        .iter()
        .filter(|(lb, _)| live.contains(lb.name.as_str()))
    {
        for group in &lb.security_groups {
            needed.entry(group).or_default().extend(load_balancer_ports(lb));
        }
    }
    for group in inv
        .groups
        .iter()
        .filter(|g| scope.cluster.is_tagged(&g.tags) || node_groups.contains(&g.id))
    {
        wide(group, &sources, out);
        stale(group, &live, &needed, leaked, out);
    }
}

/// All-traffic rules from a Classic ELB's group.
fn wide(group: &SecurityGroup, sources: &BTreeMap<&SecurityGroupId, &str>, out: &mut Vec<Finding>) {
    for (source, lb) in sources {
        if **source == group.id || !source_rules(group, source).iter().any(|r| r.is_wide()) {
            continue;
        }
        let reason = format!(
            "all traffic from {source}, the group of Classic ELB {lb}: the next ensure of its Service narrows it \
             to the load balancer's ports"
        );
        let mut finding = Finding::new(Kind::NodeGroupRules, format!("{} {lb}", group.id), reason);
        finding.name = Some(group.name.clone());
        finding.details = vec![format!("rule: all traffic from {source}")];
        out.push(finding);
    }
}

/// Narrow rules described with the name of a Classic ELB that is gone or leaked, unless a live one of the same
/// source needs the port.
fn stale(
    group: &SecurityGroup,
    live: &BTreeSet<&str>,
    needed: &BTreeMap<&SecurityGroupId, BTreeSet<i32>>,
    leaked: &BTreeSet<String>,
    out: &mut Vec<Finding>,
) {
    let mut by_lb: BTreeMap<String, Vec<IpPermission>> = BTreeMap::new();
    let sources: BTreeSet<&SecurityGroupId> = group
        .ingress
        .iter()
        .flat_map(|p| p.source_groups.iter().map(|s| &s.group_id))
        .collect();
    for source in sources {
        for rule in source_rules(group, source) {
            let Some(lb) = rule
                .description
                .as_deref()
                .and_then(|d| d.strip_prefix(NODE_RULE_PREFIX))
            else {
                continue;
            };
            let in_use = rule
                .port()
                .is_some_and(|p| needed.get(source).is_some_and(|ports| ports.contains(&p)));
            if !live.contains(lb) && !in_use {
                by_lb
                    .entry(lb.to_owned())
                    .or_default()
                    .push(rule.to_permission(source));
            }
        }
    }
    for (lb, rules) in by_lb {
        let state = if leaked.contains(&lb) {
            "is leaked"
        } else {
            "does not exist"
        };
        let reason = format!("rules for Classic ELB {lb}, which {state}");
        let mut finding = Finding::new(Kind::NodeGroupRules, format!("{} {lb}", group.id), reason);
        finding.name = Some(group.name.clone());
        finding.details = rules.iter().map(|r| format!("rule: {}", describe(r))).collect();
        out.push(finding.with_action(Action::RevokeRules(vec![(group.id.clone(), rules)])));
    }
}

/// `tcp 30080 from 0.0.0.0/0`, `all traffic from sg-1`.
pub(super) fn describe(p: &IpPermission) -> String {
    let ports = match (p.protocol.as_str(), p.from_port, p.to_port) {
        ("-1", _, _) => "all traffic".to_owned(),
        (proto, Some(a), Some(b)) if a == b => format!("{proto} {a}"),
        (proto, Some(a), Some(b)) => format!("{proto} {a}-{b}"),
        (proto, _, _) => proto.to_owned(),
    };
    let sources: Vec<String> = p
        .ip_ranges
        .iter()
        .chain(&p.ipv6_ranges)
        .map(|r| match &r.description {
            Some(d) => format!("{} ({d})", r.cidr),
            None => r.cidr.clone(),
        })
        .chain(p.source_groups.iter().map(|g| g.group_id.to_string()))
        .collect();
    format!("{ports} from {}", sources.join(", "))
}
