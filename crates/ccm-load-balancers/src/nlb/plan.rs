//! The ordered plan of an NLB from the observed to the desired state ([`plan`], pure): one small planner per
//! resource kind, each returning its changes, run in the order AWS needs them (security group, recreation,
//! target groups and targets, the load balancer, listeners, tags, unwanted target groups, a released managed
//! group, node rules), the load balancer's attributes last. Only owned fields are compared: a steady Service
//! plans nothing. Target groups go by the names observation settled on ([`Observed::renamed`]).

use std::collections::{BTreeMap, BTreeSet};

use ccm_aws_api::{
    Tags,
    elbv2::{ListenerV2, LoadBalancerV2, TargetHealth, TargetType},
};

use super::{
    ACCESS_LOGS_ATTRIBUTE, ACCESS_LOGS_PREFIX_ATTRIBUTE, CROSS_ZONE_ATTRIBUTE, Change, Desired, Listener,
    Observed, ObservedTargetGroup, Security, TargetGroupSpec, certificates, listener_attributes,
    node_rules::{self, RuleChange},
};
use crate::{
    annotations::DELETION_PROTECTION,
    shared::{self, GroupRef},
    spec::IpAddressType,
};

mod delete;
mod recreation;
mod release;

use delete::revoke_references;
pub use delete::{plan_delete, unprotect};
pub(super) use recreation::kept_subnets;
pub use recreation::{
    is_host_change, protected_recreation, recreation, recreation_reason, recreation_reasons,
};
use recreation::{recreate, subnets_added_in_place};
pub use release::{observe_release, plan_release};

/// The ordered plan from `observed` to `desired` (pure). Only owned fields are compared: a steady Service plans
/// nothing.
pub fn plan(desired: &Desired, observed: &Observed) -> Vec<Change> {
    // Target groups whose upstream names another load balancer holds go by their successor names.
    let desired = &*desired.named(&observed.renamed);
    // 0. A load balancer that cannot become what is wanted is deleted first (and created again below), or,
    //    without the Service's consent, kept as it is: the rest is planned against what it keeps.
    let (mut changes, lb) = recreate(desired, observed);
    let withheld = matches!(changes.first(), Some(Change::RecreationWithheld { .. }));
    let kept = lb.filter(|_| withheld).map(|lb| recreation::kept(desired, lb));
    let desired = kept.as_ref().unwrap_or(desired);
    // An NLB created without groups can never have some: with managed mode it stays without (as upstream).
    let groupless = lb.is_some_and(|l| l.security_groups.is_empty());
    // 1. The managed group and its rules.
    if !groupless {
        changes.extend(managed_group(desired, observed));
    }
    // 2. Target groups, their health checks, attributes and targets (before the listeners that use them).
    let mut tag_arns = Vec::new();
    changes.extend(target_groups(desired, observed, &mut tag_arns));
    // 3. The load balancer, its groups and tags.
    changes.extend(load_balancer(desired, observed, lb, groupless, &mut tag_arns));
    // 4. The tags missing anywhere, then the listeners, keyed by port: the hardened IAM policy lets the
    //    controller change or delete only listeners that carry the cluster's tag, and Go-era ones carry none.
    let listener_changes = listeners(desired, observed, lb, &mut tag_arns);
    changes.extend(dropped_tags(desired, observed));
    if !tag_arns.is_empty() {
        changes.push(Change::AddTags {
            arns: tag_arns,
            tags: desired.tags.clone(),
        });
    }
    changes.extend(listener_changes);
    // 5. Target groups no longer wanted, 6. the nodes' rules, 7. a managed group released for given groups
    //    (after the nodes' rules from the given group exist, and its own are revoked).
    changes.extend(unwanted_target_groups(desired, observed));
    let mut node_changes = Vec::new();
    if let (Some(access), Some(nodes)) = (&desired.node_access, &observed.node_rules) {
        let access = access.clone().referencing(observed.node_rule_source.clone());
        node_changes = node_rules::plan(&access, nodes);
    }
    let released = released_group(desired, observed, &node_changes);
    changes.extend(node_changes.into_iter().map(Change::NodeRules));
    changes.extend(released);
    // 8. The load balancer's attributes, last: AWS checks some only when they are set (an access log bucket's
    //    policy, a value out of range), and such a refusal must not hold up what serves traffic (listeners, tags,
    //    the nodes' rules) on every retry. Repeating the step after a crash sets what still differs.
    changes.extend(attributes(desired, observed, lb));
    without_stopped_targets(changes, observed)
}

/// Drops the instances known not to be running from every registration: AWS refuses the whole call for one of
/// them, which would fail the reconcile until the Node is gone (or forever, for a stopped instance).
fn without_stopped_targets(changes: Vec<Change>, observed: &Observed) -> Vec<Change> {
    let Some(skip) = observed
        .node_rules
        .as_ref()
        .map(|n| &n.not_running)
        .filter(|s| !s.is_empty())
    else {
        return changes;
    };
    changes
        .into_iter()
        .filter_map(|c| match c {
            Change::RegisterTargets {
                name,
                port,
                instances,
            } => {
                let instances: Vec<String> = instances.into_iter().filter(|i| !skip.contains(i)).collect();
                (!instances.is_empty()).then_some(Change::RegisterTargets {
                    name,
                    port,
                    instances,
                })
            }
            other => Some(other),
        })
        .collect()
}

fn managed_group(desired: &Desired, observed: &Observed) -> Vec<Change> {
    let mut changes = Vec::new();
    let Security::Managed(managed) = &desired.security else {
        return changes;
    };
    let diff = managed.diff(observed.managed_group.as_ref());
    if diff.create {
        changes.push(Change::CreateSecurityGroup {
            name: managed.name.clone(),
            description: managed.description.clone(),
            tags: managed.tags.clone(),
        });
    }
    if !diff.authorize.is_empty() {
        changes.push(Change::AuthorizeIngress {
            rules: diff.authorize,
        });
    }
    if !diff.revoke.is_empty() {
        changes.push(Change::RevokeIngress { rules: diff.revoke });
    }
    if !diff.add_tags.is_empty() || !diff.remove_tags.is_empty() {
        changes.push(Change::TagSecurityGroup {
            add: diff.add_tags,
            remove: diff.remove_tags,
        });
    }
    changes
}

/// The tags dropped from the annotation, removed from every resource whose record names them (one call per
/// set of keys; before the new record is written by `AddTags`).
fn dropped_tags(desired: &Desired, observed: &Observed) -> Vec<Change> {
    let mut by_keys: BTreeMap<Vec<String>, Vec<String>> = BTreeMap::new();
    for (arn, tags) in &observed.tags {
        let keys = shared::dropped_tags(tags, &desired.tags);
        if !keys.is_empty() {
            by_keys.entry(keys).or_default().push(arn.clone());
        }
    }
    by_keys
        .into_iter()
        .map(|(keys, arns)| Change::RemoveTags { arns, keys })
        .collect()
}

fn observed_group<'a>(observed: &'a Observed, name: &str) -> Option<&'a ObservedTargetGroup> {
    observed.target_groups.iter().find(|g| g.group.name == name)
}

/// Records `arn` for tagging when the tags were read and it lacks some of the desired ones.
fn tag_if_missing(tag_arns: &mut Vec<String>, observed: &Observed, arn: &str, desired: &Desired) {
    if !observed.tags.is_empty() {
        add_tags_if_missing(tag_arns, arn, observed.tags.get(arn), &desired.tags);
    }
}

fn target_groups(desired: &Desired, observed: &Observed, tag_arns: &mut Vec<String>) -> Vec<Change> {
    let mut changes = Vec::new();
    let mut seen = BTreeSet::new();
    for tg in desired.target_groups() {
        if !seen.insert(tg.name.as_str()) {
            continue;
        }
        match observed_group(observed, &tg.name) {
            None => changes.extend(new_target_group(desired, tg)),
            Some(o) => {
                changes.extend(existing_target_group(desired, tg, o));
                tag_if_missing(tag_arns, observed, &o.group.arn, desired);
            }
        }
    }
    changes
}

fn new_target_group(desired: &Desired, tg: &TargetGroupSpec) -> Vec<Change> {
    let mut changes = vec![Change::CreateTargetGroup {
        target_group: tg.clone(),
        health_check: desired.health_check.clone(),
        tags: desired.tags.clone(),
    }];
    if !desired.target_group_attributes.is_empty() {
        changes.push(Change::ModifyTargetGroupAttributes {
            name: tg.name.clone(),
            attributes: desired.target_group_attributes.clone(),
        });
    }
    changes.extend(target_changes(desired, tg, &[]));
    changes
}

fn existing_target_group(desired: &Desired, tg: &TargetGroupSpec, o: &ObservedTargetGroup) -> Vec<Change> {
    let mut changes = Vec::new();
    if !desired.health_check.matches(&o.group.health_check) {
        changes.push(Change::ModifyTargetGroup {
            name: tg.name.clone(),
            health_check: desired.health_check.clone(),
        });
    }
    let attributes: BTreeMap<String, String> = desired
        .target_group_attributes
        .iter()
        .filter(|(k, v)| o.attributes.get(*k) != Some(*v))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    if !attributes.is_empty() {
        changes.push(Change::ModifyTargetGroupAttributes {
            name: tg.name.clone(),
            attributes,
        });
    }
    changes.extend(target_changes(desired, tg, &o.targets));
    changes
}

/// The load balancer: created, or changed in place (subnets, IP address type, groups, tags).
fn load_balancer(
    desired: &Desired,
    observed: &Observed,
    lb: Option<&LoadBalancerV2>,
    groupless: bool,
    tag_arns: &mut Vec<String>,
) -> Vec<Change> {
    match lb {
        None => vec![create_load_balancer(desired)],
        Some(current) => {
            tag_if_missing(tag_arns, observed, &current.arn, desired);
            in_place(desired, observed, current, groupless)
        }
    }
}

/// The attributes of the load balancer that differ (`lb` is `None` when it is made in this plan: a fresh NLB
/// has AWS's defaults).
fn attributes(desired: &Desired, observed: &Observed, lb: Option<&LoadBalancerV2>) -> Option<Change> {
    let defaults = default_attributes();
    let current = if lb.is_some() {
        &observed.attributes
    } else {
        &defaults
    };
    let attributes: BTreeMap<String, String> = desired
        .attributes
        .iter()
        .filter(|(k, v)| current.get(*k).or_else(|| defaults.get(*k)) != Some(*v))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    (!attributes.is_empty()).then_some(Change::ModifyAttributes { attributes })
}

/// The groups the NLB is created with or set to (`None`: not managed).
fn groups_wanted(desired: &Desired) -> Option<Vec<GroupRef>> {
    match &desired.security {
        Security::Unmanaged => None,
        Security::Managed(_) => Some(vec![GroupRef::Managed]),
        Security::Given(ids) => Some(ids.iter().cloned().map(GroupRef::Id).collect()),
    }
}

fn create_load_balancer(desired: &Desired) -> Change {
    let addresses = |i: usize, list: &[String]| list.get(i).cloned();
    Change::CreateLoadBalancer {
        name: desired.name.clone(),
        internal: desired.internal,
        subnets: desired
            .subnets
            .iter()
            .enumerate()
            .map(|(i, s)| {
                (
                    s.clone(),
                    addresses(i, &desired.eip_allocations),
                    addresses(i, &desired.private_ipv4_addresses),
                )
            })
            .collect(),
        security_groups: groups_wanted(desired),
        ip_address_type: desired.ip_address_type,
        tags: desired.tags.clone(),
    }
}

fn in_place(
    desired: &Desired,
    observed: &Observed,
    current: &LoadBalancerV2,
    groupless: bool,
) -> Vec<Change> {
    let mut changes = Vec::new();
    // AWS always reports the type; an empty one (never seen) is the AWS default.
    let current_type = if current.ip_address_type.is_empty() {
        IpAddressType::Ipv4.as_str()
    } else {
        current.ip_address_type.as_str()
    };
    // Subnets first: a dual-stack NLB needs every subnet, new ones included, to have IPv6.
    if subnets_added_in_place(desired, current) {
        changes.push(Change::SetSubnets {
            subnets: desired.subnets.clone(),
        });
    }
    if !current_type.eq_ignore_ascii_case(desired.ip_address_type.as_str()) {
        changes.push(Change::SetIpAddressType {
            ip_address_type: desired.ip_address_type,
        });
    }
    if let Some(wanted) = groups_wanted(desired)
        && !groupless
    {
        let managed_id = observed.managed_group.as_ref().map(|g| g.id.to_string());
        let wanted_ids: Option<BTreeSet<String>> = wanted
            .iter()
            .map(|g| match g {
                GroupRef::Managed => managed_id.clone(),
                GroupRef::Id(id) => Some(id.clone()),
            })
            .collect();
        let current_ids: BTreeSet<String> = current.security_groups.iter().map(ToString::to_string).collect();
        if wanted_ids.as_ref() != Some(&current_ids) {
            changes.push(Change::SetSecurityGroups { groups: wanted });
        }
    }
    changes
}

/// Listeners, keyed by port: a protocol change is a modification (TCP <-> TLS) or a replacement.
fn listeners(
    desired: &Desired,
    observed: &Observed,
    lb: Option<&LoadBalancerV2>,
    tag_arns: &mut Vec<String>,
) -> Vec<Change> {
    let mut changes = Vec::new();
    let current_listeners: &[ListenerV2] = if lb.is_some() { &observed.listeners } else { &[] };
    let by_port: BTreeMap<i32, &ListenerV2> = current_listeners.iter().map(|l| (l.port, l)).collect();
    let wanted_ports: BTreeSet<i32> = desired.listeners.iter().map(|l| l.port).collect();
    for l in current_listeners
        .iter()
        .filter(|l| !wanted_ports.contains(&l.port))
    {
        tag_if_missing(tag_arns, observed, &l.arn, desired);
        changes.push(Change::DeleteListener {
            port: l.port,
            arn: l.arn.clone(),
        });
    }
    for l in &desired.listeners {
        match by_port.get(&l.port) {
            None => changes.push(Change::CreateListener {
                listener: l.clone(),
                tags: desired.tags.clone(),
            }),
            Some(current) => changes.extend(listener(desired, observed, l, current, tag_arns)),
        }
    }
    changes
}

/// Whether the resource `arn` carries the cluster's ownership tag as `desired` sets it.
fn carries_cluster_tag(observed: &Observed, arn: &str, desired: &Desired) -> bool {
    observed.tags.get(arn).is_some_and(|tags| {
        desired
            .tags
            .iter()
            .any(|(k, v)| ccm_tagging::is_ownership_key(k) && tags.get(k) == Some(v))
    })
}

/// One existing listener: kept, modified in place, or replaced.
fn listener(
    desired: &Desired,
    observed: &Observed,
    l: &Listener,
    current: &ListenerV2,
    tag_arns: &mut Vec<String>,
) -> Vec<Change> {
    let tg_arn = observed_group(observed, &l.target_group.name).map(|g| g.group.arn.as_str());
    let tg_differs = tg_arn.is_none_or(|arn| current.default_target_groups != [arn]);
    let same_protocol = current.protocol.eq_ignore_ascii_case(&l.protocol);
    let tls = l.protocol == "TLS";
    let cert_differs = tls && current.certificates.first() != l.certificate.as_ref();
    let policy_differs = tls && l.ssl_policy.is_some() && current.ssl_policy != l.ssl_policy;
    // AWS reports no policy (or `None`) for a listener without one.
    let alpn = |p: Option<&str>| p.filter(|p| !p.is_empty()).unwrap_or("None").to_owned();
    let alpn_differs = tls && alpn(current.alpn_policy.as_deref()) != alpn(l.alpn_policy.as_deref());
    // Attributes and certificate lists, of a listener kept (a replaced one is created with them).
    let settings: Vec<Change> = if same_protocol {
        let certificates = observed.listener_certificates.get(&current.arn);
        listener_attributes::change(l, current, observed.listener_attributes.get(&current.arn))
            .into_iter()
            .chain(certificates::change(l, current, certificates))
            .collect()
    } else {
        Vec::new()
    };
    if same_protocol && !tg_differs && !cert_differs && !policy_differs && !alpn_differs {
        // A listener carrying the cluster's tag gets the tags it lacks (an `additional-resource-tags` edit); a
        // Go-era one, untagged, is tagged only before it is changed (the hardened IAM policy's condition), so a
        // takeover writes nothing to it.
        if !settings.is_empty() || carries_cluster_tag(observed, &current.arn, desired) {
            tag_if_missing(tag_arns, observed, &current.arn, desired);
        }
        return settings;
    }
    if same_protocol {
        tag_if_missing(tag_arns, observed, &current.arn, desired);
        let modify = Change::ModifyListener {
            arn: current.arn.clone(),
            port: l.port,
            protocol: None,
            certificate: l.certificate.clone().filter(|_| cert_differs),
            ssl_policy: l.ssl_policy.clone().filter(|_| policy_differs),
            alpn_policy: l.alpn_policy.clone().filter(|_| alpn_differs),
            target_group: tg_differs.then(|| l.target_group.name.clone()),
        };
        // The new default certificate first: the list's change then never removes the listener's default.
        return std::iter::once(modify).chain(settings).collect();
    }
    // A protocol change (TCP -> TLS, TCP -> UDP, ...) replaces the listener of that port: deleted first, so no
    // DuplicateListener; ModifyListener cannot make every such change (UDP, TCP_UDP, TLS -> TCP).
    tag_if_missing(tag_arns, observed, &current.arn, desired);
    vec![
        Change::DeleteListener {
            port: current.port,
            arn: current.arn.clone(),
        },
        Change::CreateListener {
            listener: l.clone(),
            tags: desired.tags.clone(),
        },
    ]
}

/// Target groups no longer wanted (owned by this cluster only), once no listener uses them. An adopted NLB's
/// groups come with it: those only it uses are its owner's too (the previous tool's, or this Service's before a
/// release), so they go once the listeners have moved to the Service's own.
fn unwanted_target_groups(desired: &Desired, observed: &Observed) -> Vec<Change> {
    let wanted_groups: BTreeSet<&str> = desired.target_groups().map(|g| g.name.as_str()).collect();
    let adopted = observed.load_balancer.as_ref().filter(|lb| {
        let tagged = |tags: &Tags| tags.get(shared::ADOPTED_TAG).is_some_and(|v| v == "true");
        tagged(&desired.tags) || observed.tags.get(&lb.arn).is_some_and(tagged)
    });
    observed
        .target_groups
        .iter()
        .filter(|o| {
            let owned = observed
                .tags
                .get(&o.group.arn)
                .is_some_and(|tags| desired_owner(desired, tags))
                || adopted.is_some_and(|lb| o.group.load_balancer_arns == [lb.arn.clone()]);
            !wanted_groups.contains(o.group.name.as_str()) && owned
        })
        .map(|o| Change::DeleteTargetGroup {
            name: o.group.name.clone(),
            arn: o.group.arn.clone(),
        })
        .collect()
}

/// A managed group released for given groups: references revoked (but those the nodes' rules revoke), then
/// deleted.
fn released_group(desired: &Desired, observed: &Observed, node_changes: &[RuleChange]) -> Vec<Change> {
    let mut changes = Vec::new();
    if let (Security::Given(given), Some(group)) = (&desired.security, &observed.managed_group)
        && !given.iter().any(|g| g == group.id.as_str())
        && desired_owner(desired, &group.tags)
    {
        changes.extend(revoke_references(&observed.references, node_changes));
        changes.push(Change::DeleteSecurityGroup {
            group: group.id.to_string(),
        });
    }
    changes
}

/// The attributes of a fresh NLB, also assumed for keys AWS does not report.
fn default_attributes() -> BTreeMap<String, String> {
    BTreeMap::from([
        (CROSS_ZONE_ATTRIBUTE.to_owned(), "false".to_owned()),
        (DELETION_PROTECTION.to_owned(), "false".to_owned()),
        (ACCESS_LOGS_ATTRIBUTE.to_owned(), "false".to_owned()),
        (ACCESS_LOGS_PREFIX_ATTRIBUTE.to_owned(), String::new()),
    ])
}

fn add_tags_if_missing(arns: &mut Vec<String>, arn: &str, current: Option<&Tags>, desired: &Tags) {
    let empty = Tags::new();
    if !shared::tag_additions(current.unwrap_or(&empty), desired).is_empty() {
        arns.push(arn.to_owned());
    }
}

/// Whether `tags` say the resource belongs to this cluster and this Service (the cluster tag `owned` as in the
/// desired tags, and the Service name tag).
fn desired_owner(desired: &Desired, tags: &Tags) -> bool {
    desired
        .tags
        .iter()
        .filter(|(k, v)| k.starts_with(ccm_tagging::CLUSTER_TAG_PREFIX) && *v == "owned")
        .all(|(k, v)| tags.get(k) == Some(v))
        && tags.get(shared::SERVICE_NAME_TAG) == Some(&desired.service)
}

/// The target changes of one group: deregister what is no longer wanted (targets already draining are left
/// alone), then register what is missing, one change each (the adapter sends 100 targets a call: a rollout costs
/// calls in proportion to its batches of endpoint changes, not to its pods). An IP group whose endpoints are not
/// known is left as it is.
fn target_changes(desired: &Desired, tg: &TargetGroupSpec, targets: &[TargetHealth]) -> Vec<Change> {
    let mut changes = Vec::new();
    let wanted: BTreeSet<(String, i32)> = match (tg.target_type, &tg.ip_targets) {
        (TargetType::Instance, _) => desired.instances.iter().map(|i| (i.clone(), tg.port)).collect(),
        (TargetType::Ip, Some(wanted)) => wanted.clone(),
        (TargetType::Ip, None) => return changes,
    };
    let registered: BTreeSet<(String, i32)> = targets
        .iter()
        .filter(|t| t.reason.as_deref() != Some("Target.DeregistrationInProgress") && t.state != "draining")
        .map(|t| (t.target.id.to_string(), t.target.port))
        .collect();
    let remove: Vec<(String, i32)> = registered.difference(&wanted).cloned().collect();
    let add: Vec<(String, i32)> = wanted.difference(&registered).cloned().collect();
    if !remove.is_empty() {
        changes.push(Change::DeregisterTargets {
            name: tg.name.clone(),
            targets: remove,
        });
    }
    if add.is_empty() {
        return changes;
    }
    changes.push(match tg.target_type {
        TargetType::Ip => Change::RegisterIpTargets {
            name: tg.name.clone(),
            targets: add,
        },
        TargetType::Instance => Change::RegisterTargets {
            name: tg.name.clone(),
            port: tg.port,
            instances: add.into_iter().map(|(i, _)| i).collect(),
        },
    });
    changes
}
