//! The AWS state a Classic ELB's plan is made against ([`observe`], reads only, in two rounds of concurrent
//! calls), and what its deletion finds ([`observe_delete`]).

use std::collections::{BTreeMap, BTreeSet};

use ccm_aws_api::{
    CatalogLookup, Ec2, Elb, Elbv2, Filter, InstanceId, SecurityGroupId, Tags,
    ec2::SecurityGroup,
    elb::{ClassicAttributes, ClassicLoadBalancer},
};

use super::{
    Desired, PROXY_PROTOCOL_POLICY,
    node_rules::{self, NodeGroups, SourceRule},
    ssl_policy_name,
};
use crate::{
    Error, LoadBalancerConfig,
    flavour::Ports,
    instance_reads,
    ownership::{self, Claim, Claimant, Purpose},
    shared::{self, GroupRef},
};

pub use crate::flavour::Scope;

/// What an observation learnt about the target instances (see [`NodeGroups::instances`]): what the provider's
/// host memory keeps, so that a later node change need not describe them again.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Known {
    /// The chosen group (if any) of each pending or running target instance.
    pub running: BTreeMap<String, Option<SecurityGroupId>>,
    /// The target instances' groups, by ID.
    pub groups: BTreeMap<SecurityGroupId, SecurityGroup>,
    /// Target instances whose group cannot be chosen, with why: neither registered nor given a rule.
    pub skipped: BTreeMap<String, String>,
}

/// The AWS state a plan is made against.
#[derive(Debug, Clone, Default)]
pub struct Observed {
    /// The load balancer, if it exists.
    pub load_balancer: Option<ClassicLoadBalancer>,
    /// Its tags.
    pub tags: Tags,
    /// Whether its tags say this cluster owns it (`None`: tags not read): only an owned load balancer is ever
    /// recreated.
    pub owned: Option<bool>,
    /// Its attributes (`None` if not read).
    pub attributes: Option<ClassicAttributes>,
    /// Which of our policies exist on it.
    pub policies: BTreeSet<String>,
    /// The managed group, if it exists.
    pub managed_group: Option<SecurityGroup>,
    /// The nodes' groups (`None`: node rules not managed or not observed).
    pub node_groups: Option<NodeGroups>,
    /// The target instances that exist (not terminated); `None` when not read (no filtering then).
    pub existing_instances: Option<BTreeSet<String>>,
    /// The managed group left behind when the Service switched to given groups: owned by this cluster, it is
    /// detached, its rules on other groups revoked, and deleted.
    pub orphaned_group: Option<OrphanedGroup>,
}

/// A managed group no longer wanted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OrphanedGroup {
    /// The group.
    pub id: SecurityGroupId,
    /// The rules from it that the controller made (wide or described as ours), per group holding any.
    pub referenced_by: Vec<(SecurityGroupId, Vec<SourceRule>)>,
}

/// The group of each target instance that should allow the load balancer, and the targets that exist.
async fn target_groups<E: CatalogLookup>(
    ec2: &E,
    config: &LoadBalancerConfig,
    instances: &[String],
) -> Result<Targets, Error> {
    let context = "reading the nodes' security groups";
    let mut wanted = BTreeSet::new();
    let mut existing = BTreeSet::new();
    let mut known = Known::default();
    if instances.is_empty() {
        return Ok((wanted, existing, known));
    }
    let ids: Vec<InstanceId> = instances.iter().map(|s| InstanceId::new(s.clone())).collect();
    let mut found = ec2
        .lookup(&ids, instance_reads::FRESHNESS)
        .await
        .map_err(Error::aws(context))?
        .found;
    // Terminated instances cannot be registered (nor do their groups matter).
    found.retain(|i| !matches!(i.state, ccm_aws_api::ec2::InstanceState::Terminated));
    existing.extend(found.iter().map(|i| i.id.to_string()));
    let group_ids: BTreeSet<&str> = found
        .iter()
        .flat_map(|i| i.security_groups.iter().map(SecurityGroupId::as_str))
        .collect();
    if group_ids.is_empty() {
        return Ok((wanted, existing, known));
    }
    let groups = ec2
        .security_groups(&[Filter::new("group-id", group_ids.iter().copied())])
        .await
        .map_err(Error::aws(context))?;
    let by_id: BTreeMap<&SecurityGroupId, &SecurityGroup> = groups.iter().map(|g| (&g.id, g)).collect();
    for instance in &found {
        let mine: Vec<&SecurityGroup> = instance
            .security_groups
            .iter()
            .filter_map(|id| by_id.get(id).copied())
            .collect();
        let group = match shared::instance_group(&instance.id, &mine, &config.cluster) {
            Ok(group) => group,
            // Several candidate groups: only this instance is skipped (not registered, no rule), with a Warning.
            Err(e @ Error::AmbiguousInstanceGroups { .. }) => {
                existing.remove(instance.id.as_str());
                known.skipped.insert(instance.id.to_string(), e.to_string());
                continue;
            }
            Err(e) => return Err(e),
        };
        if matches!(
            instance.state,
            ccm_aws_api::ec2::InstanceState::Pending | ccm_aws_api::ec2::InstanceState::Running
        ) {
            known.running.insert(instance.id.to_string(), group.clone());
        }
        wanted.extend(group);
    }
    known.groups = by_id.into_iter().map(|(id, g)| (id.clone(), g.clone())).collect();
    Ok((wanted, existing, known))
}

/// The groups (other than `source` itself) with rules from `source`, each with those rules.
async fn referencing<E: Ec2>(
    ec2: &E,
    source: &SecurityGroupId,
) -> Result<Vec<(SecurityGroup, Vec<SourceRule>)>, Error> {
    let groups = ec2
        .security_groups(&[Filter::new("ip-permission.group-id", [source.as_str()])])
        .await
        .map_err(Error::aws(
            "reading the groups that allow the load balancer's group",
        ))?;
    Ok(groups
        .into_iter()
        .filter(|g| g.id != *source)
        .filter_map(|g| {
            let rules = node_rules::source_rules(&g, source);
            (!rules.is_empty()).then_some((g, rules))
        })
        .collect())
}

/// The rules from a group this controller made: wide ones and those described as a load balancer's.
fn made_by_us(rules: Vec<SourceRule>) -> Vec<SourceRule> {
    rules.into_iter().filter(|r| r.is_wide() || r.is_ours()).collect()
}

async fn policies<L: Elb>(elb: &L, desired: &Desired) -> Result<BTreeSet<String>, Error> {
    let mut wanted = Vec::new();
    if desired.proxy_protocol {
        wanted.push(PROXY_PROTOCOL_POLICY.to_owned());
    }
    if let Some(reference) = &desired.ssl_negotiation_policy {
        wanted.push(ssl_policy_name(reference));
    }
    let mut existing = BTreeSet::new();
    for policy in wanted {
        match elb.policies(&desired.name, std::slice::from_ref(&policy)).await {
            Ok(found) if found.iter().any(|p| p.name == policy) => {
                existing.insert(policy);
            }
            Ok(_) => {}
            Err(e) if e.is_not_found() => {}
            Err(e) => return Err(Error::aws("reading the load balancer's policies")(e)),
        }
    }
    Ok(existing)
}

/// Reads what the plan needs (no mutation), in two rounds of concurrent calls. Errors when the managed group
/// found by name belongs to another cluster.
pub async fn observe<E: CatalogLookup, L: Elb, V: Elbv2>(
    ec2: &E,
    elb: &L,
    elbv2: &V,
    config: &LoadBalancerConfig,
    desired: &Desired,
    scope: Scope,
) -> Result<Observed, Error> {
    let full = scope == Scope::Full;
    let (load_balancer, group, targets) = first_round(ec2, elb, config, desired, full).await?;
    let mut observed = Observed {
        load_balancer,
        ..Observed::default()
    };
    let orphan = sort_group(config, desired, group, &mut observed)?;
    let source = match desired.security_groups.first() {
        Some(GroupRef::Managed) => observed.managed_group.as_ref().map(|g| (g.id.clone(), true)),
        Some(GroupRef::Id(id)) => Some((SecurityGroupId::new(id.clone()), false)),
        None => None,
    }
    .filter(|_| desired.manage_node_rules);

    // Round 2: what depends on round 1.
    let exists = observed.load_balancer.is_some();
    let (details, referenced, orphan_refs) = tokio::join!(
        async {
            if full && exists {
                details(elb, desired).await.map(Some)
            } else {
                Ok(None)
            }
        },
        async {
            match &source {
                Some((id, _)) if targets.is_some() => referencing(ec2, id).await.map(Some),
                _ => Ok(None),
            }
        },
        async {
            match &orphan {
                Some(id) => referencing(ec2, id).await.map(Some),
                None => Ok(None),
            }
        },
    );
    if let Some((tags, attributes, policies)) = details? {
        // Whose it is, the provider decides from these tags (`ownership::claim`) before anything is applied.
        observed.owned = Some(config.cluster.is_owned(&tags));
        observed.tags = tags;
        observed.attributes = Some(attributes);
        observed.policies = policies;
    }
    if let Some(targets) = targets {
        let aws = Ports {
            ec2,
            elb,
            elbv2,
            config,
        };
        let referenced = referenced?.unwrap_or_default();
        observe_node_groups(&aws, desired, source.as_ref(), targets, referenced, &mut observed).await?;
    }
    if let (Some(id), Some(refs)) = (orphan, orphan_refs?) {
        observed.orphaned_group = Some(OrphanedGroup {
            id,
            referenced_by: refs
                .into_iter()
                .map(|(g, rules)| (g.id, made_by_us(rules)))
                .filter(|(_, rules)| !rules.is_empty())
                .collect(),
        });
    }
    Ok(observed)
}

/// The targets' node groups (the rules from the load balancer's `source` group there), with what settles their
/// revocations; `referenced` are the groups with rules from `source`.
async fn observe_node_groups<E: CatalogLookup, L: Elb, V: Elbv2>(
    aws: &Ports<'_, E, L, V>,
    desired: &Desired,
    source: Option<&(SecurityGroupId, bool)>,
    (wanted, existing, known): Targets,
    referenced: Vec<(SecurityGroup, Vec<SourceRule>)>,
    observed: &mut Observed,
) -> Result<(), Error> {
    let managed = matches!(desired.security_groups.first(), Some(GroupRef::Managed));
    let mut groups = node_groups(aws.config, wanted, referenced, managed);
    groups.instances = known;
    let ports = node_rules::node_ports(&desired.listeners, &desired.health_check);
    match source {
        Some((source, _)) => {
            settle_revocations(aws, &desired.name, source, managed, &ports, &mut groups).await?;
        }
        // The managed group is still to be made: no rule comes from it yet.
        None => groups.others = Some(BTreeMap::new()),
    }
    observed.node_groups = Some(groups);
    observed.existing_instances = Some(existing);
    Ok(())
}

const CONTEXT: &str = "reading the load balancer";

/// The targets' groups that should allow the load balancer, the targets that exist, and what was learnt.
type Targets = (BTreeSet<SecurityGroupId>, BTreeSet<String>, Known);

/// Round 1: the load balancer, the managed group (also when given groups replaced it), the targets.
async fn first_round<E: CatalogLookup, L: Elb>(
    ec2: &E,
    elb: &L,
    config: &LoadBalancerConfig,
    desired: &Desired,
    full: bool,
) -> Result<
    (
        Option<ClassicLoadBalancer>,
        Option<SecurityGroup>,
        Option<Targets>,
    ),
    Error,
> {
    let group_name = shared::security_group_name(&desired.name);
    let (load_balancer, group, targets) = tokio::join!(
        async {
            elb.load_balancer(&desired.name)
                .await
                .map_err(Error::aws(CONTEXT))
        },
        async {
            if desired.managed_group.is_some() || full {
                shared::find_group(ec2, config, &group_name).await
            } else {
                Ok(None)
            }
        },
        async {
            if desired.manage_node_rules {
                target_groups(ec2, config, &desired.instances).await.map(Some)
            } else {
                Ok(None)
            }
        },
    );
    Ok((load_balancer?, group?, targets?))
}

/// The group found by the managed name: the managed group (which must be ours), or an owned group left when
/// given groups replaced it (returned: it is released).
fn sort_group(
    config: &LoadBalancerConfig,
    desired: &Desired,
    group: Option<SecurityGroup>,
    observed: &mut Observed,
) -> Result<Option<SecurityGroupId>, Error> {
    match group {
        Some(group) if desired.managed_group.is_some() => {
            shared::check_managed_group(config, &group)?;
            config
                .cluster
                .missing_ownership_tags(group.id.as_str(), &group.tags)?;
            observed.managed_group = Some(group);
            Ok(None)
        }
        Some(group) if config.cluster.is_owned(&group.tags) => Ok(Some(group.id)),
        _ => Ok(None),
    }
}

/// The load balancer's tags, attributes and our policies on it.
async fn details<L: Elb>(
    elb: &L,
    desired: &Desired,
) -> Result<(Tags, ClassicAttributes, BTreeSet<String>), Error> {
    let (tags, attributes, policies) = tokio::join!(
        elb.tags(&desired.name),
        elb.attributes(&desired.name),
        policies(elb, desired)
    );
    Ok((
        tags.map_err(Error::aws(CONTEXT))?,
        attributes.map_err(Error::aws(CONTEXT))?,
        policies?,
    ))
}

/// The nodes' groups: those wanted, the rules from the source on each, and the groups whose wide rule may be
/// revoked (tagged for the cluster, or any when the source is the managed group: the rule is then ours alone).
fn node_groups(
    config: &LoadBalancerConfig,
    wanted: BTreeSet<SecurityGroupId>,
    referenced: Vec<(SecurityGroup, Vec<SourceRule>)>,
    managed_source: bool,
) -> NodeGroups {
    let mut groups = NodeGroups {
        wanted,
        ..NodeGroups::default()
    };
    for (group, rules) in referenced {
        if managed_source || config.cluster.is_tagged(&group.tags) {
            groups.revocable.insert(group.id.clone());
        }
        groups.rules.insert(group.id, rules);
    }
    groups
}

/// What revocations need before they are planned: for a source other than the managed group, the other load
/// balancers' needs (read only when a plan against `ports` could revoke anything), and for a group given by
/// annotation, that it serves no instance before any of its wide rules goes.
async fn settle_revocations<E: CatalogLookup, L: Elb, V: Elbv2>(
    aws: &Ports<'_, E, L, V>,
    name: &str,
    source: &SecurityGroupId,
    managed: bool,
    ports: &BTreeSet<i32>,
    groups: &mut NodeGroups,
) -> Result<(), Error> {
    let (ec2, config) = (aws.ec2, aws.config);
    if managed {
        groups.others = Some(BTreeMap::new());
        return Ok(());
    }
    let given = config.elb_security_group.as_ref() != Some(source);
    let wide_candidate = groups
        .rules
        .iter()
        .any(|(g, rules)| groups.revocable.contains(g) && rules.iter().any(SourceRule::is_wide));
    if given && wide_candidate && node_rules::serves_instances(ec2, source).await? {
        tracing::info!(load_balancer = name, group = %source, "keeping all-traffic rules from a given group that instances use");
        groups.revocable.clear();
    }
    if node_rules::may_revoke(ports, groups) {
        let (others, heirs) = tokio::join!(
            node_rules::others(ec2, aws.elb, config, name, source, &groups.instances),
            node_rules::network_heirs(aws.elbv2, source, groups),
        );
        groups.heirs = heirs?;
        groups.others = Some(others?);
    }
    Ok(())
}

/// What deletion found.
#[derive(Debug, Clone, Default)]
pub struct DeleteObserved {
    /// The load balancer, if it still exists.
    pub load_balancer: Option<ClassicLoadBalancer>,
    /// Owned groups to delete.
    pub groups: Vec<SecurityGroupId>,
    /// (group, source, rules): the rules from the owned group `source` on `group` that the controller made
    /// (wide ones, or described as a load balancer's), revoked before `source` is deleted.
    pub references: Vec<(SecurityGroupId, SecurityGroupId, Vec<SourceRule>)>,
    /// A source group the cluster does not own (given by annotation or `ElbSecurityGroup`) and the nodes'
    /// groups as observed against it: the rules nobody needs any more are revoked.
    pub given_source: Option<(SecurityGroupId, NodeGroups)>,
    /// Whether the load balancer, this Service's, was adopted (tagged [`shared::ADOPTED_TAG`]): its deletion
    /// then releases it unless the Service says otherwise.
    pub adopted: bool,
}

/// Reads what deletion needs: the load balancer, the groups this controller made for it (the managed group,
/// found by name too in case an earlier deletion stopped after the load balancer was gone; any other group it
/// uses only when owned by this cluster **and** tagged with this Service's name), the rules referencing them,
/// and the node rules from a source group the cluster does not own (the load balancer's first group, else
/// `source`: the Service's first given group or `ElbSecurityGroup`). Shared and untagged groups,
/// `ElbSecurityGroup`, groups named by annotation and groups made for other Services are never deleted.
///
/// The claim comes with it: the load balancer's when it is the claimant's ([`ownership::claim`] for deletion),
/// else a vacant one (none, or not ours: left alone with the groups it uses, only our leftovers found by name).
pub async fn observe_delete<E: CatalogLookup, L: Elb, V: Elbv2>(
    ec2: &E,
    elb: &L,
    elbv2: &V,
    config: &LoadBalancerConfig,
    claimant: &Claimant,
    keep: &BTreeSet<String>,
    source: Option<&SecurityGroupId>,
) -> Result<(DeleteObserved, Claim), Error> {
    let context = "reading the load balancer to delete";
    let name = claimant.load_balancer.as_str();
    let mut load_balancer = elb.load_balancer(name).await.map_err(Error::aws(context))?;
    let mut foreign = false;
    let mut tags = None;
    if load_balancer.is_some() {
        tags = Some(elb.tags(name).await.map_err(Error::aws(context))?);
    }
    let claim = match ownership::claim(config, claimant, tags.as_ref(), Purpose::Delete) {
        Ok(claim) => claim,
        Err(refused) => {
            tracing::warn!(load_balancer = name, %refused, "not deleting a load balancer this Service does not own");
            load_balancer = None;
            foreign = true;
            ownership::claim(config, claimant, None, Purpose::Delete)?
        }
    };
    let source = match &load_balancer {
        Some(lb) => lb.security_groups.first(),
        None => source.filter(|_| !foreign),
    }
    .cloned();
    let groups = owned_groups(ec2, config, claimant, keep, load_balancer.as_ref()).await?;
    let mut references = Vec::new();
    if !groups.is_empty() {
        let referencing = ec2
            .security_groups(&[Filter::new(
                "ip-permission.group-id",
                groups.iter().map(SecurityGroupId::as_str),
            )])
            .await
            .map_err(Error::aws(context))?;
        for g in &referencing {
            for owned in &groups {
                let rules = made_by_us(node_rules::source_rules(g, owned));
                if g.id != *owned && !rules.is_empty() {
                    references.push((g.id.clone(), owned.clone(), rules));
                }
            }
        }
    }
    let given_source = match source.filter(|s| !groups.contains(s) && config.manage_node_security_groups) {
        Some(source) => {
            let referenced = referencing(ec2, &source).await?;
            let mut nodes = node_groups(config, BTreeSet::new(), referenced, false);
            settle_revocations(
                &Ports {
                    ec2,
                    elb,
                    elbv2,
                    config,
                },
                name,
                &source,
                false,
                &BTreeSet::new(),
                &mut nodes,
            )
            .await?;
            Some((source, nodes))
        }
        None => None,
    };
    let adopted = load_balancer.is_some()
        && tags
            .as_ref()
            .and_then(|t| t.get(shared::ADOPTED_TAG))
            .is_some_and(|v| v == "true");
    let observed = DeleteObserved {
        load_balancer,
        groups,
        references,
        given_source,
        adopted,
    };
    Ok((observed, claim))
}

/// The groups this controller made for the load balancer (see [`observe_delete`]).
async fn owned_groups<E: Ec2>(
    ec2: &E,
    config: &LoadBalancerConfig,
    claimant: &Claimant,
    keep: &BTreeSet<String>,
    load_balancer: Option<&ClassicLoadBalancer>,
) -> Result<Vec<SecurityGroupId>, Error> {
    let (name, service_key) = (claimant.load_balancer.as_str(), claimant.service.as_str());
    // A group tagged for another incarnation of the Service (re-created under a chosen name) is that one's.
    let this_incarnation = |tags: &Tags| {
        tags.get(shared::SERVICE_UID_TAG)
            .is_none_or(|uid| *uid == claimant.uid)
    };
    let mut candidates: BTreeSet<SecurityGroupId> = load_balancer
        .map(|lb| lb.security_groups.iter().cloned().collect())
        .unwrap_or_default();
    let mut groups = Vec::new();
    if let Some(managed) = shared::find_group(ec2, config, &shared::security_group_name(name)).await? {
        candidates.remove(&managed.id);
        // One naming another Service is that Service's (under a name it chose first).
        let service = managed.tags.get(shared::SERVICE_NAME_TAG);
        if config.cluster.is_owned(&managed.tags)
            && service.is_none_or(|s| s == service_key)
            && this_incarnation(&managed.tags)
        {
            groups.push(managed.id);
        }
    }
    candidates.retain(|g| !keep.contains(g.as_str()) && config.elb_security_group.as_ref() != Some(g));
    if !candidates.is_empty() {
        let found = ec2
            .security_groups(&[Filter::new(
                "group-id",
                candidates.iter().map(SecurityGroupId::as_str),
            )])
            .await
            .map_err(Error::aws("reading the load balancer's security groups"))?;
        groups.extend(
            found
                .into_iter()
                .filter(|g| {
                    config.cluster.is_owned(&g.tags)
                        && g.tags.get(shared::SERVICE_NAME_TAG).map(String::as_str) == Some(service_key)
                        && this_incarnation(&g.tags)
                })
                .map(|g| g.id),
        );
    }
    Ok(groups)
}
