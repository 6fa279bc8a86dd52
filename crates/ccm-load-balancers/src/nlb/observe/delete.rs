//! What the deletion of an NLB reads: the NLB, its target groups and leftovers, the managed group and the
//! nodes' rules (found through the targets: instances, or the interfaces holding the pods' addresses).

use ccm_aws_api::{InstanceId, elbv2::TargetId};

use super::*;

/// Reads what deletion of the claimant's NLB needs. `target_group_names` are the names the Service's current
/// ports give; `managed_group_name` is the managed group's name (`None` when unknown). Only resources owned by
/// this cluster and tagged for no other incarnation of the Service are deleted; groups given by annotation never
/// are. The claim comes with it: the NLB's when it is the claimant's ([`ownership::claim`] for deletion), else a
/// vacant one (none, or not ours: left alone with the target groups attached to it).
pub async fn observe_delete<E: CatalogLookup, L: Elb, V: Elbv2>(
    ec2: &E,
    elb: &L,
    elbv2: &V,
    config: &LoadBalancerConfig,
    claimant: &Claimant,
    target_group_names: &[String],
    managed_group_name: Option<&str>,
) -> Result<(DeleteObserved, Claim), Error> {
    let context = "reading the NLB to delete";
    let name = claimant.load_balancer.as_str();
    let mut load_balancer = network_load_balancer(elbv2, name, context).await?;
    let (namespace, service_name) = claimant
        .service
        .split_once('/')
        .unwrap_or(("", claimant.service.as_str()));
    // The successor names too: this Service may have taken them while its predecessor's NLB held the others.
    let names: Vec<String> = target_group_names
        .iter()
        .flat_map(|n| [n.clone(), successor_target_group_name(n, name)])
        .collect();
    let (mut groups, by_prefix) = leftover_target_groups(
        elbv2,
        (name, load_balancer.as_ref()),
        (namespace, service_name),
        &names,
    )
    .await?;
    let key = claimant.service.as_str();
    let arns: Vec<String> = load_balancer
        .iter()
        .map(|lb| lb.arn.clone())
        .chain(groups.iter().map(|g| g.arn.clone()))
        .collect();
    let tags = if arns.is_empty() {
        BTreeMap::new()
    } else {
        elbv2.tags(&arns).await.map_err(Error::aws(context))?
    };
    let lb_tags = load_balancer
        .as_ref()
        .map(|lb| tags.get(&lb.arn).cloned().unwrap_or_default());
    let claim = match ownership::claim(config, claimant, lb_tags.as_ref(), Purpose::Delete) {
        Ok(claim) => claim,
        Err(refused) => {
            tracing::warn!(load_balancer = name, %refused, "not deleting a load balancer this Service does not own");
            // Nor the target groups it uses.
            if let Some(lb) = load_balancer.take() {
                groups.retain(|g| !g.load_balancer_arns.contains(&lb.arn));
            }
            ownership::claim(config, claimant, None, Purpose::Delete)?
        }
    };
    // A prefix is shared by Services whose names agree on 8 characters: those groups must name this one. A
    // group tagged for another incarnation (the Service re-created under a chosen name) is that one's.
    groups.retain(|g| {
        tags.get(&g.arn).is_some_and(|t| {
            config.cluster.is_owned(t)
                && (!by_prefix.contains(&g.arn)
                    || t.get(shared::SERVICE_NAME_TAG).map(String::as_str) == Some(key))
                && t.get(shared::SERVICE_UID_TAG)
                    .is_none_or(|uid| *uid == claimant.uid)
        })
    });
    let mut observed = DeleteObserved {
        target_groups: groups,
        adopted: load_balancer.is_some()
            && lb_tags
                .as_ref()
                .and_then(|t| t.get(shared::ADOPTED_TAG))
                .is_some_and(|v| v == "true"),
        ..DeleteObserved::default()
    };
    // Read before anything changes: AWS would refuse the deletion only after the nodes' rules were gone.
    if let Some(lb) = &load_balancer {
        let attributes = elbv2
            .load_balancer_attributes(&lb.arn)
            .await
            .map_err(Error::aws(context))?;
        observed.deletion_protection = attributes.get(DELETION_PROTECTION).is_some_and(|v| v == "true");
    }
    observed.node_rules =
        deleted_node_rules(ec2, elb, elbv2, config, name, load_balancer.as_ref(), &observed).await?;
    deleted_managed_group(ec2, config, claimant, managed_group_name, &mut observed).await?;
    observed.load_balancer = load_balancer;
    Ok((observed, claim))
}

/// The managed group named `group_name` to delete, if this cluster owns it and no other incarnation of the
/// Service is named on it, with the rules referencing it.
async fn deleted_managed_group<E: Ec2>(
    ec2: &E,
    config: &LoadBalancerConfig,
    claimant: &Claimant,
    group_name: Option<&str>,
    observed: &mut DeleteObserved,
) -> Result<(), Error> {
    let managed = match (group_name, &observed.node_rules) {
        (None, _) => None,
        // The nodes' rules read the cluster's tagged groups of the VPC: the managed group, made with the
        // cluster's tag, is among them if it exists and is this cluster's (one `DescribeSecurityGroups` less).
        (Some(group_name), Some(nodes)) => nodes.groups.iter().find(|g| g.name == group_name).cloned(),
        (Some(group_name), None) => shared::find_group(ec2, config, group_name).await?,
    };
    if let Some(group) = managed
        && config.cluster.is_owned(&group.tags)
        && group
            .tags
            .get(shared::SERVICE_UID_TAG)
            .is_none_or(|uid| *uid == claimant.uid)
    {
        observed.references = references(ec2, config, &group.id).await?;
        observed.managed_group = Some(group.id);
    }
    Ok(())
}

/// The target groups deletion considers, from one listing of the region's groups: those the NLB uses, those
/// named for the current ports unless another load balancer uses them (made by a run that crashed before
/// attaching them) and, by the Service's name
/// prefix, unattached ones (left by a run that crashed between moving a listener to a new group and deleting the
/// old one; returned by ARN too, as their tags must name the Service). Deletion is rare, so this sweep is paid
/// there rather than on every sync.
async fn leftover_target_groups<V: Elbv2>(
    elbv2: &V,
    (name, load_balancer): (&str, Option<&LoadBalancerV2>),
    (namespace, service_name): (&str, &str),
    target_group_names: &[String],
) -> Result<(Vec<TargetGroup>, BTreeSet<String>), Error> {
    let prefix = name_prefix(namespace, service_name);
    let mut groups = Vec::new();
    let mut by_prefix = BTreeSet::new();
    let all = elbv2
        .all_target_groups()
        .await
        .map_err(Error::aws("reading the NLB to delete"))?;
    for g in all {
        let attached = load_balancer.is_some_and(|lb| g.load_balancer_arns.contains(&lb.arn));
        // A group of the current ports' names that another load balancer uses is not this one's: the group of a
        // re-created Service of the same name (whose NLB already serves it) or of a predecessor.
        if attached || (target_group_names.contains(&g.name) && !used_elsewhere(&g, name)) {
            groups.push(g);
        } else if g.name.starts_with(&prefix) && g.load_balancer_arns.is_empty() {
            // Only unattached ones: a group another load balancer uses is never a leftover of this Service.
            by_prefix.insert(g.arn.clone());
            groups.push(g);
        }
    }
    Ok((groups, by_prefix))
}

/// The nodes' rules of a deleted NLB. They go first, so with neither the NLB nor a target group left there are
/// none to find (and a Classic ELB's deletion, which sweeps here too, pays no read for them).
async fn deleted_node_rules<E: CatalogLookup, L: Elb, V: Elbv2>(
    ec2: &E,
    elb: &L,
    elbv2: &V,
    config: &LoadBalancerConfig,
    name: &str,
    load_balancer: Option<&LoadBalancerV2>,
    observed: &DeleteObserved,
) -> Result<Option<node_rules::Observed>, Error> {
    if !config.manage_node_security_groups || (load_balancer.is_none() && observed.target_groups.is_empty()) {
        return Ok(None);
    }
    let subnets: Vec<SubnetId> = load_balancer
        .iter()
        .flat_map(|lb| lb.availability_zones.iter().filter_map(|z| z.subnet_id.clone()))
        .collect();
    // The instances still registered lead to the nodes' untagged groups, which no tag finds (deletion runs
    // without the node list); the nodes' rules are revoked before the target groups go, so a repeated deletion
    // still sees them.
    let mut instances = BTreeSet::new();
    let mut addresses = BTreeSet::new();
    for tg in &observed.target_groups {
        let health = elbv2
            .target_health(&tg.arn)
            .await
            .map_err(Error::aws("reading the NLB to delete"))?;
        for h in health {
            match h.target.id {
                TargetId::Instance(id) => instances.insert(id.into_string()),
                TargetId::Ip(address) => addresses.insert(address.to_string()),
            };
        }
    }
    // IP targets (pods) lead to the instances whose interfaces hold their addresses: one read, IP groups only.
    instances.extend(instances_of_addresses(ec2, config, addresses).await?);
    let access = NodeAccess {
        instances: instances.into_iter().collect(),
        ..NodeAccess::none(name)
    };
    // Deletion needs no health source (every rule of the NLB goes): neither interfaces nor subnets are read.
    let mut nodes = node_rules::observe(ec2, config, &access, &subnets, None).await?;
    node_rules::find_heirs(ec2, elb, elbv2, &access, &mut nodes).await?;
    Ok(Some(nodes))
}

/// The instances whose network interfaces in the cluster's VPC hold `addresses` (pods' addresses, under the AWS
/// VPC CNI on their node's interfaces), 200 addresses a call. Addresses no interface holds any more (the pods
/// are gone) lead to every instance of the cluster in the VPC instead (one more read): their groups may hold the
/// NLB's rules, and a group without the cluster tag is found only through them.
async fn instances_of_addresses<E: Ec2>(
    ec2: &E,
    config: &LoadBalancerConfig,
    addresses: BTreeSet<String>,
) -> Result<BTreeSet<String>, Error> {
    let context = "reading the instances of the NLB's IP targets";
    let vpc = Filter::new("vpc-id", [config.vpc_id.as_str()]);
    let all: Vec<String> = addresses.iter().cloned().collect();
    let mut instances = BTreeSet::new();
    let mut unresolved = addresses;
    for chunk in all.chunks(200) {
        let filters = [
            vpc.clone(),
            Filter::new("addresses.private-ip-address", chunk.iter().map(String::as_str)),
        ];
        let interfaces = ec2
            .network_interfaces(&filters)
            .await
            .map_err(Error::aws(context))?;
        for interface in interfaces {
            for address in &interface.private_ips {
                unresolved.remove(address);
            }
            instances.extend(interface.attached_instance.map(InstanceId::into_string));
        }
    }
    if !unresolved.is_empty() {
        let filters = [Filter::tag_key(config.cluster.key()), vpc];
        let cluster = ec2.instances(&filters).await.map_err(Error::aws(context))?;
        instances.extend(cluster.into_iter().map(|i| i.id.into_string()));
    }
    Ok(instances)
}
