//! Health rules other NLBs need: two NLBs in the same subnets with the same health check port need the same rule
//! (`tcp` on that port from each subnet's CIDR, or from one security group both were given), which AWS keeps
//! once, under the description of the NLB that made it. When that NLB no longer needs it (deleted, or its nodes
//! left that group), revoking it would fail the other NLB's health checks until its next reconcile. So the rule is handed over instead: revoked and authorized
//! again at once, described with the other NLB's name, which then owns it (and revokes it when it does not need it
//! after all).
//!
//! A Classic ELB may need it too: one group given to both flavours, with kube-proxy's shared health port, makes
//! both need `tcp 10256` from that group. Then the rule is handed over to the Classic ELB (described as its
//! narrow rule, `kubernetes.io/rule/elb=<name>`).
//!
//! Who may need it: the NLBs with client rules on the same group and the Classic ELBs with rules from the rule's
//! source group there (their descriptions name them). Their needs are read only when this NLB has a health rule
//! to give up on a group that another load balancer uses: one `DescribeLoadBalancers` per such load balancer,
//! one `DescribeTargetGroups` per such NLB, one `DescribeSubnets` for their subnets.

use std::collections::{BTreeMap, BTreeSet};

use ccm_aws_api::{Ec2, Elb, Elbv2, Filter, SecurityGroupId, SubnetId};

use super::{NodeAccess, Observed, described_rules};
use crate::{
    Error,
    shared::{
        Rule,
        neighbours::{self, CLIENT_RULE_PREFIX, HEALTH_RULE_PREFIX, NODE_RULE_PREFIX},
    },
};

/// At most this many other NLBs are read for one load balancer's handover (a bound on the calls; the rest of
/// their needs then go unseen, and their next reconcile restores a revoked rule).
const MAX_HEIRS: usize = 20;

/// Fills `observed.heirs`: for each health rule of `access`'s load balancer that it no longer needs on a group,
/// the description of the rule another load balancer on that group needs it as (see the module documentation).
pub async fn find<E: Ec2, L: Elb, V: Elbv2>(
    ec2: &E,
    elb: &L,
    elbv2: &V,
    access: &NodeAccess,
    observed: &mut Observed,
) -> Result<(), Error> {
    let given_up = given_up(access, observed);
    if given_up.is_empty() {
        return Ok(());
    }
    let mut candidates: BTreeMap<&SecurityGroupId, BTreeSet<String>> = BTreeMap::new();
    // (group, source) -> the Classic ELBs with rules from that source on that group.
    let mut classics: BTreeMap<(&SecurityGroupId, String), BTreeSet<String>> = BTreeMap::new();
    let mine = access.client_description();
    for group in observed.groups.iter().filter(|g| given_up.contains_key(&g.id)) {
        for r in described_rules(group)
            .into_iter()
            .filter(|r| r.description != mine)
        {
            if let Some(name) = r.description.strip_prefix(CLIENT_RULE_PREFIX) {
                candidates.entry(&group.id).or_default().insert(name.to_owned());
            } else if let Some(name) = neighbours::classic_owner(&r.description) {
                let users = classics.entry((&group.id, r.rule.source.clone())).or_default();
                users.insert(name.to_owned());
            }
        }
    }
    let names: BTreeSet<&String> = candidates.values().flatten().take(MAX_HEIRS).collect();
    let classic_names: BTreeSet<&str> = classics
        .values()
        .flatten()
        .map(String::as_str)
        .take(MAX_HEIRS)
        .collect();
    if names.is_empty() && classic_names.is_empty() {
        return Ok(());
    }
    let needs = needs(ec2, elbv2, &names).await?;
    let classic_needs = neighbours::classic_needs(elb, &classic_names).await?;
    let mut heirs = BTreeMap::new();
    for (group, rules) in &given_up {
        for rule in rules {
            let network = candidates
                .get(group)
                .into_iter()
                .flatten()
                .find(|name| needs.get(*name).is_some_and(|n| n.contains(rule)))
                .map(|name| format!("{HEALTH_RULE_PREFIX}{name}"));
            let heir = network.or_else(|| {
                let users = classics.get(&(group, rule.source.clone()))?;
                users
                    .iter()
                    .find(|name| {
                        classic_needs
                            .get(*name)
                            .is_some_and(|n| classic_needs_rule(n, rule))
                    })
                    .map(|name| format!("{NODE_RULE_PREFIX}{name}"))
            });
            if let Some(heir) = heir {
                heirs.insert((group.clone(), rule.clone()), heir);
            }
        }
    }
    observed.heirs = heirs;
    Ok(())
}

/// Whether a Classic ELB with node rules from `source` on `ports` needs `rule` (a `tcp` rule on one port from
/// that group).
fn classic_needs_rule((source, ports): &(SecurityGroupId, BTreeSet<i32>), rule: &Rule) -> bool {
    rule.protocol == "tcp"
        && rule.from_port == rule.to_port
        && rule.source == source.as_str()
        && ports.contains(&rule.from_port)
}

/// The health rules of `access`'s load balancer on each group that it will not keep there.
fn given_up(access: &NodeAccess, observed: &Observed) -> BTreeMap<SecurityGroupId, Vec<Rule>> {
    let health = access.health_description();
    let wanted: BTreeSet<Rule> = access
        .rules(&observed.health_sources)
        .into_iter()
        .map(|r| r.rule)
        .collect();
    let targets: BTreeSet<&SecurityGroupId> = access
        .instances
        .iter()
        .filter_map(|i| observed.instance_groups.get(i))
        .collect();
    let mut out = BTreeMap::new();
    for group in &observed.groups {
        let kept = |r: &Rule| targets.contains(&group.id) && wanted.contains(r);
        let rules: Vec<Rule> = described_rules(group)
            .into_iter()
            .filter(|r| r.description == health && !kept(&r.rule))
            .map(|r| r.rule)
            .collect();
        if !rules.is_empty() {
            out.insert(group.id.clone(), rules);
        }
    }
    out
}

/// The health rules each named NLB needs: `tcp` on each target group's health check port from each of its
/// subnets' IPv4 CIDRs, or from its own security groups. NLBs that are gone need nothing.
async fn needs<E: Ec2, V: Elbv2>(
    ec2: &E,
    elbv2: &V,
    names: &BTreeSet<&String>,
) -> Result<BTreeMap<String, BTreeSet<Rule>>, Error> {
    let context = "reading the other NLBs that use the nodes' groups";
    let names: BTreeSet<&str> = names.iter().map(|n| n.as_str()).collect();
    let found = neighbours::network_needs(elbv2, &names, None, context).await?;
    let ids: BTreeSet<&str> = found
        .values()
        .flat_map(|n| n.subnets.iter().map(SubnetId::as_str))
        .collect();
    let cidrs: BTreeMap<SubnetId, String> = if ids.is_empty() {
        BTreeMap::new()
    } else {
        ec2.subnets(&[Filter::new("subnet-id", ids.iter().copied())])
            .await
            .map_err(Error::aws(context))?
            .into_iter()
            .filter_map(|s| Some((s.id, s.cidr_block?)))
            .collect()
    };
    Ok(found
        .into_iter()
        .map(|(name, needs)| {
            // From its subnets, or from its own groups when its rules reference them.
            let sources: Vec<String> = needs
                .subnets
                .iter()
                .filter_map(|s| cidrs.get(s))
                .map(|cidr| super::canonical_cidr(cidr))
                .chain(needs.security_groups.iter().map(ToString::to_string))
                .collect();
            let rules = needs
                .health_ports
                .iter()
                .flat_map(|port| {
                    sources.iter().map(|source| Rule {
                        protocol: "tcp".to_owned(),
                        from_port: *port,
                        to_port: *port,
                        source: source.clone(),
                    })
                })
                .collect();
            (name, rules)
        })
        .collect())
}
