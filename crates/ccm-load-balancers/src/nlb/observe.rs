//! The AWS state an NLB's plan is made against ([`observe`], reads only), and what its deletion finds
//! ([`observe_delete`]).

use std::collections::{BTreeMap, BTreeSet};

use ccm_aws_api::{
    CatalogLookup, Ec2, Elb, Elbv2, Filter, SecurityGroupId, SubnetId, Tags,
    ec2::SecurityGroup,
    elbv2::{ListenerV2, LoadBalancerV2, TargetGroup, TargetHealth},
};

use super::{
    Desired, ReferencePermission, Security, name_prefix,
    node_rules::{self, NodeAccess},
    successor_target_group_name,
};
use crate::{
    Error, LoadBalancerConfig,
    annotations::DELETION_PROTECTION,
    ownership::{self, Claim, Claimant, Purpose},
    shared,
};

mod delete;
pub use delete::observe_delete;

pub use crate::flavour::Scope;

/// A target group as observed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObservedTargetGroup {
    /// The group.
    pub group: TargetGroup,
    /// Its attributes (read only when some are owned).
    pub attributes: BTreeMap<String, String>,
    /// Its targets (read only for wanted groups).
    pub targets: Vec<TargetHealth>,
}

/// The AWS state a plan is made against.
#[derive(Debug, Clone, Default)]
pub struct Observed {
    /// The load balancer, if it exists.
    pub load_balancer: Option<LoadBalancerV2>,
    /// Its attributes.
    pub attributes: BTreeMap<String, String>,
    /// Its listeners.
    pub listeners: Vec<ListenerV2>,
    /// The attributes of the listeners that have some in the Service's annotations, by listener ARN (read
    /// by full observations only).
    pub listener_attributes: BTreeMap<String, BTreeMap<String, String>>,
    /// The certificate lists (default excluded) of the TLS listeners that want several certificates, by
    /// listener ARN (read by full observations only).
    pub listener_certificates: BTreeMap<String, Vec<String>>,
    /// Its target groups and the wanted ones found by name.
    pub target_groups: Vec<ObservedTargetGroup>,
    /// Wanted target groups whose upstream name another load balancer's group holds: upstream name -> the
    /// successor name this NLB uses instead ([`super::successor_target_group_name`]).
    pub renamed: BTreeMap<String, String>,
    /// Tags by ARN (load balancer, target groups, listeners).
    pub tags: BTreeMap<String, Tags>,
    /// The managed group, if it exists.
    pub managed_group: Option<SecurityGroup>,
    /// When the managed group is being released: the permissions of other groups referencing it.
    pub references: Vec<(SecurityGroupId, ReferencePermission)>,
    /// The nodes' groups (`None`: node rules not managed or not observed).
    pub node_rules: Option<node_rules::Observed>,
    /// The group the nodes' rules reference ([`Desired::node_rule_source`]; `None`: CIDR rules).
    pub node_rule_source: Option<String>,
}

/// What deletion found.
#[derive(Debug, Clone, Default)]
pub struct DeleteObserved {
    /// The NLB, if it still exists.
    pub load_balancer: Option<LoadBalancerV2>,
    /// Owned target groups to delete: the NLB's, those of the current ports, and the Service's unattached ones.
    pub target_groups: Vec<TargetGroup>,
    /// The managed group, when owned by this cluster.
    pub managed_group: Option<SecurityGroupId>,
    /// Rules of other groups referencing the managed group.
    pub references: Vec<(SecurityGroupId, ReferencePermission)>,
    /// The nodes' groups (`None`: node rules not managed).
    pub node_rules: Option<node_rules::Observed>,
    /// Whether the NLB has deletion protection on (AWS then refuses to delete it).
    pub deletion_protection: bool,
    /// Whether the NLB, this Service's, was adopted (tagged [`shared::ADOPTED_TAG`]): its deletion then
    /// releases it unless the Service says otherwise.
    pub adopted: bool,
}

/// The permissions of cluster-tagged groups that reference `source`.
async fn references<E: Ec2>(
    ec2: &E,
    config: &LoadBalancerConfig,
    source: &SecurityGroupId,
) -> Result<Vec<(SecurityGroupId, ReferencePermission)>, Error> {
    let groups = ec2
        .security_groups(&[Filter::new("ip-permission.group-id", [source.as_str()])])
        .await
        .map_err(Error::aws("reading the rules that reference the managed group"))?;
    let mut out = Vec::new();
    for g in groups
        .iter()
        .filter(|g| g.id != *source && config.cluster.is_tagged(&g.tags))
    {
        for p in &g.ingress {
            if p.source_groups.iter().any(|s| s.group_id == *source) {
                out.push((
                    g.id.clone(),
                    ReferencePermission {
                        protocol: p.protocol.clone(),
                        from_port: p.from_port,
                        to_port: p.to_port,
                        source: source.to_string(),
                    },
                ));
            }
        }
    }
    Ok(out)
}

async fn target_groups_of<V: Elbv2>(elbv2: &V, lb: &LoadBalancerV2) -> Result<Vec<TargetGroup>, Error> {
    match elbv2.target_groups(&lb.arn).await {
        Ok(groups) => Ok(groups),
        // No target group at all (moto answers TargetGroupNotFound).
        Err(e) if e.is_not_found() => Ok(Vec::new()),
        Err(e) => Err(Error::aws("reading the NLB's target groups")(e)),
    }
}

/// The status hostname of an observed or created NLB: its DNS name while `active`, `active_impaired` or
/// `provisioning`; a `failed` NLB is an error (upstream reports an empty status and no error).
pub fn status_hostname(lb: &LoadBalancerV2) -> Result<Option<String>, Error> {
    match lb.state.as_str() {
        "failed" => Err(Error::LoadBalancerFailed(lb.name.clone())),
        "active" | "active_impaired" | "provisioning" | "" => {
            Ok(Some(lb.dns_name.clone()).filter(|d| !d.is_empty()))
        }
        _ => Ok(None),
    }
}

/// Reads what the plan needs: the NLB, its attributes, listeners and target groups (the wanted ones not attached
/// to it are looked up by name, so a group created just before a crash is adopted), the wanted groups' targets
/// (and attributes when some are owned), every tag in one call, the managed group (and, when it is being
/// released, the rules referencing it) and the nodes' groups. A steady NLB costs one read per listed item.
pub async fn observe<E: CatalogLookup, L: Elb, V: Elbv2>(
    ec2: &E,
    elb: &L,
    elbv2: &V,
    config: &LoadBalancerConfig,
    desired: &Desired,
    scope: Scope,
) -> Result<Observed, Error> {
    let full = scope == Scope::Full;
    let load_balancer = elbv2
        .load_balancer(&desired.name)
        .await
        .map_err(Error::aws(CONTEXT))?;
    // ELBv2 names are unique across types: an ALB (or a gateway load balancer) under the name is someone
    // else's, and no NLB can be made under it. Refused before anything is made (a managed group, target groups).
    if let Some(lb) = load_balancer.as_ref().filter(|lb| lb.lb_type != "network") {
        return Err(crate::ownership::other_type(&desired.name, &lb.lb_type));
    }
    let mut observed = Observed::default();
    let mut groups = Vec::new();
    if let Some(lb) = &load_balancer {
        if lb.state == "failed" {
            return Err(Error::LoadBalancerFailed(desired.name.clone()));
        }
        groups = target_groups_of(elbv2, lb).await?;
        if full {
            let (attributes, listeners) =
                tokio::join!(elbv2.load_balancer_attributes(&lb.arn), elbv2.listeners(&lb.arn));
            observed.attributes = attributes.map_err(Error::aws(CONTEXT))?;
            observed.listeners = listeners.map_err(Error::aws(CONTEXT))?;
            observed.listener_attributes = listener_attributes(elbv2, desired, &observed.listeners).await?;
            observed.listener_certificates =
                super::certificates::observe(elbv2, desired, &observed.listeners).await?;
        }
    }
    (observed.target_groups, observed.renamed) = target_groups(elbv2, desired, groups, full).await?;
    if full {
        observed.tags = tags(elbv2, load_balancer.as_ref(), &observed).await?;
    }
    check_ownership(config, load_balancer.as_ref(), &observed)?;
    if full {
        managed_group(ec2, config, desired, &mut observed).await?;
    }
    if let Some(access) = &desired.node_access {
        // The subnets the NLB has after this run: pinned ones are made so (in place, or by recreation when the
        // Service consents; without consent it keeps those only a new NLB could change).
        let subnets: Vec<SubnetId> = match &load_balancer {
            Some(lb) if !desired.subnets_pinned => lb
                .availability_zones
                .iter()
                .filter_map(|z| z.subnet_id.clone())
                .collect(),
            Some(lb) if !desired.allow_recreation => super::plan::kept_subnets(desired, lb)
                .into_iter()
                .map(SubnetId::new)
                .collect(),
            _ => desired.subnets.iter().map(|s| SubnetId::new(s.clone())).collect(),
        };
        let managed = observed.managed_group.as_ref().map(|g| &g.id);
        observed.node_rule_source = desired.node_rule_source(load_balancer.as_ref(), managed, full);
        let access = access.clone().referencing(observed.node_rule_source.clone());
        let arn = load_balancer.as_ref().map(|lb| lb.arn.as_str());
        let mut nodes = node_rules::observe(ec2, config, &access, &subnets, arn).await?;
        node_rules::find_heirs(ec2, elb, elbv2, &access, &mut nodes).await?;
        observed.node_rules = Some(nodes);
    }
    observed.load_balancer = load_balancer;
    Ok(observed)
}

const CONTEXT: &str = "reading the NLB";

/// The attributes of the listeners whose port has some in `desired` (one `DescribeListenerAttributes` each;
/// none for a Service without the annotation).
async fn listener_attributes<V: Elbv2>(
    elbv2: &V,
    desired: &Desired,
    listeners: &[ListenerV2],
) -> Result<BTreeMap<String, BTreeMap<String, String>>, Error> {
    let mut out = BTreeMap::new();
    for current in listeners {
        if desired
            .listeners
            .iter()
            .any(|l| l.port == current.port && !l.attributes.is_empty())
        {
            let attributes = elbv2
                .listener_attributes(&current.arn)
                .await
                .map_err(Error::aws(CONTEXT))?;
            out.insert(current.arn.clone(), attributes);
        }
    }
    Ok(out)
}

/// The NLB named `name`, if there is one (an ALB under that name is none of ours).
async fn network_load_balancer<V: Elbv2>(
    elbv2: &V,
    name: &str,
    context: &'static str,
) -> Result<Option<LoadBalancerV2>, Error> {
    Ok(elbv2
        .load_balancer(name)
        .await
        .map_err(Error::aws(context))?
        .filter(|lb| lb.lb_type == "network"))
}

/// The NLB's target groups and the wanted ones found by name, with the wanted groups' targets (and attributes
/// when some are owned), and the wanted groups taken under their successor names. A group another load balancer
/// uses is never taken: its name goes to the successor name (one more lookup, only then).
async fn target_groups<V: Elbv2>(
    elbv2: &V,
    desired: &Desired,
    mut groups: Vec<TargetGroup>,
    full: bool,
) -> Result<(Vec<ObservedTargetGroup>, BTreeMap<String, String>), Error> {
    let mut renamed = BTreeMap::new();
    let lookup = async |name: &str| elbv2.target_group(name).await.map_err(Error::aws(CONTEXT));
    for wanted in desired.target_groups() {
        let successor = successor_target_group_name(&wanted.name, &desired.name);
        if groups.iter().any(|g| g.name == wanted.name) {
            continue;
        }
        if groups.iter().any(|g| g.name == successor) {
            renamed.insert(wanted.name.clone(), successor);
            continue;
        }
        // (Never in steady state: the wanted groups are attached. Moto does not attach a group that a listener
        // was moved to, so the updates need the lookup too.)
        match lookup(&wanted.name).await? {
            Some(g) if used_elsewhere(&g, &desired.name) => {
                renamed.insert(wanted.name.clone(), successor.clone());
                groups.extend(
                    lookup(&successor)
                        .await?
                        .filter(|g| !used_elsewhere(g, &desired.name)),
                );
            }
            Some(g) => groups.push(g),
            None => {}
        }
    }
    let desired = desired.named(&renamed);
    let wanted: BTreeSet<&str> = desired.target_groups().map(|g| g.name.as_str()).collect();
    let mut out = Vec::new();
    for group in groups {
        let mut o = ObservedTargetGroup {
            group,
            attributes: BTreeMap::new(),
            targets: Vec::new(),
        };
        if wanted.contains(o.group.name.as_str()) {
            o.targets = elbv2
                .target_health(&o.group.arn)
                .await
                .map_err(Error::aws("reading targets"))?;
            if full && !desired.target_group_attributes.is_empty() {
                o.attributes = elbv2
                    .target_group_attributes(&o.group.arn)
                    .await
                    .map_err(Error::aws("reading target group attributes"))?;
            }
        }
        out.push(o);
    }
    Ok((out, renamed))
}

/// Whether a load balancer not named `ours` uses the group. By the name in the ARN
/// (`...:loadbalancer/net/<name>/<id>`), not the ARN: after our NLB's deletion a group can still list it for a
/// while (AWS's eventual consistency; moto keeps it), and it is still ours to delete.
fn used_elsewhere(group: &TargetGroup, ours: &str) -> bool {
    group
        .load_balancer_arns
        .iter()
        .any(|arn| arn.split('/').nth(2) != Some(ours))
}

/// Every tag in one call (load balancer, target groups, listeners): needed for the adoption check of groups
/// found by name and for deleting unwanted ones.
async fn tags<V: Elbv2>(
    elbv2: &V,
    load_balancer: Option<&LoadBalancerV2>,
    observed: &Observed,
) -> Result<BTreeMap<String, Tags>, Error> {
    let arns: Vec<String> = load_balancer
        .iter()
        .map(|lb| lb.arn.clone())
        .chain(observed.target_groups.iter().map(|g| g.group.arn.clone()))
        .chain(observed.listeners.iter().map(|l| l.arn.clone()))
        .collect();
    if arns.is_empty() {
        return Ok(BTreeMap::new());
    }
    elbv2.tags(&arns).await.map_err(Error::aws(CONTEXT))
}

/// An unattached target group of another cluster is never touched. (Whose the NLB is, the provider decides from
/// the tags read here: `ownership::claim`.) A group one of the NLB's listeners forwards to is attached, whatever
/// the group says yet (AWS lists a listener's new group among its load balancers only some time later).
fn check_ownership(
    config: &LoadBalancerConfig,
    load_balancer: Option<&LoadBalancerV2>,
    observed: &Observed,
) -> Result<(), Error> {
    for g in &observed.target_groups {
        let tags = observed.tags.get(&g.group.arn);
        let attached = load_balancer.is_some_and(|lb| g.group.load_balancer_arns.contains(&lb.arn))
            || observed
                .listeners
                .iter()
                .any(|l| l.default_target_groups.contains(&g.group.arn));
        if !attached && let Some(tags) = tags {
            config.cluster.ensure_owned(&g.group.name, tags)?;
        }
    }
    Ok(())
}

/// The managed group, and the rules referencing it when it is being released for given groups.
async fn managed_group<E: Ec2>(
    ec2: &E,
    config: &LoadBalancerConfig,
    desired: &Desired,
    observed: &mut Observed,
) -> Result<(), Error> {
    if desired.wants_groups() {
        observed.managed_group = shared::find_group(ec2, config, &desired.managed_group_name).await?;
    }
    // Someone else's group under our name: never used. With given groups it is simply left alone (only an owned
    // managed group is released below).
    if let (Security::Managed(_), Some(group)) = (&desired.security, &observed.managed_group) {
        shared::check_managed_group(config, group)?;
    }
    if let (Security::Given(given), Some(group)) = (&desired.security, &observed.managed_group)
        && !given.iter().any(|g| g == group.id.as_str())
        && config.cluster.is_owned(&group.tags)
    {
        observed.references = references(ec2, config, &group.id).await?;
    }
    Ok(())
}
