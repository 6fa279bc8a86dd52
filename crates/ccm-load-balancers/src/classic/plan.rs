//! The ordered plan of a Classic ELB from the observed to the desired state ([`plan`], pure): one small planner
//! per resource kind, each returning its changes, run in the order AWS needs them. Only owned fields are
//! compared: a steady Service plans nothing.

use std::{
    borrow::Cow,
    collections::{BTreeMap, BTreeSet},
};

use ccm_aws_api::{
    InstanceId, SubnetId, Tags,
    elb::{ClassicAttributes, ClassicListener, ClassicLoadBalancer},
};

use super::{
    Change, DeleteObserved, Desired, Listener, Observed, PROXY_PROTOCOL_POLICY, SSL_POLICY_PREFIX,
    fresh_attributes, ssl_policy_name,
};
use crate::{
    flavour::{PlannedChange, recreation_reason as flavour_recreation_reason},
    shared::{self, GroupRef},
};

/// The load balancer a plan continues from: the observed one, or what creating it yields.
struct Current<'a> {
    lb: Cow<'a, ClassicLoadBalancer>,
    tags: &'a Tags,
    attributes: Option<ClassicAttributes>,
    policies: Cow<'a, BTreeSet<String>>,
    exists: bool,
}

/// The ordered plan from `observed` to `desired` (pure). Only owned fields are compared: a steady Service plans
/// nothing.
pub fn plan(desired: &Desired, observed: &Observed) -> Vec<Change> {
    // A scheme change that will not be made (no consent, or not ours to replace) keeps the scheme and the
    // subnets it serves from; everything else is still planned.
    let (kept, withheld) = kept_scheme(desired, observed).unzip();
    let desired = kept.as_ref().unwrap_or(desired);
    // 1. The managed group and its rules.
    let mut changes = managed_group(desired, observed);
    changes.extend(withheld.flatten());
    // 2. The load balancer itself (recreated for a scheme change), its tags, listeners, subnets and groups.
    let (recreate, current) = scheme_recreation(desired, observed);
    changes.extend(recreate);
    let current = current.map_or_else(|| created(desired, &mut changes), |lb| existing(observed, lb));
    let mut recreated_ports = BTreeSet::new();
    if current.exists {
        changes.extend(tags(desired, current.tags));
        let (listener_changes, ports) = listeners(desired, &current.lb);
        changes.extend(listener_changes);
        recreated_ports = ports;
        changes.extend(subnets(desired, &current.lb));
        changes.extend(security_groups(desired, observed, &current.lb));
    }
    // 3. Health check and attributes.
    changes.extend(health_check(desired, &current.lb));
    changes.extend(attributes(desired, current.attributes.as_ref()));
    // 4. Policies: proxy protocol on back ends, SSL negotiation on secure listeners.
    changes.extend(backend_policies(desired, &current));
    changes.extend(ssl_policies(desired, &current, &recreated_ports));
    // 5. Instances, 6. the nodes' groups, 7. a managed group replaced by given groups.
    changes.extend(instances(desired, observed, &current.lb));
    changes.extend(node_rules(desired, observed));
    changes.extend(orphaned_group(desired, observed));
    changes
}

/// The managed group: created, tagged and its rules made exactly the desired ones.
fn managed_group(desired: &Desired, observed: &Observed) -> Vec<Change> {
    let mut changes = Vec::new();
    let Some(managed) = &desired.managed_group else {
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
            group: GroupRef::Managed,
            rules: diff.authorize,
        });
    }
    if !diff.revoke.is_empty() {
        changes.push(Change::RevokeIngress {
            group: GroupRef::Managed,
            rules: diff.revoke,
        });
    }
    if !diff.add_tags.is_empty() || !diff.remove_tags.is_empty() {
        changes.push(Change::TagSecurityGroup {
            add: diff.add_tags,
            remove: diff.remove_tags,
        });
    }
    changes
}

/// A Classic ELB cannot change its scheme: an owned one is deleted and created again under the same name (its
/// group, and so the nodes' rules, are kept); another's is left as it is, with a warning. Returns the deletion
/// and the load balancer that remains.
fn scheme_recreation<'a>(
    desired: &Desired,
    observed: &'a Observed,
) -> (Option<Change>, Option<&'a ClassicLoadBalancer>) {
    let current = observed.load_balancer.as_ref();
    let Some(lb) = current.filter(|lb| lb.internal != desired.internal) else {
        return (None, current);
    };
    let delete = Change::DeleteLoadBalancer {
        name: desired.name.clone(),
        recreate_because: Some(scheme_change(lb, desired)),
    };
    (Some(delete), None)
}

fn scheme_change(lb: &ClassicLoadBalancer, desired: &Desired) -> String {
    format!(
        "scheme {} -> {}",
        shared::scheme(lb.internal),
        shared::scheme(desired.internal)
    )
}

/// The desired load balancer with the current scheme and subnets, when the scheme differs and the load balancer
/// is not to be replaced: with a [`Change::RecreationWithheld`] when only consent is missing, without one when
/// it is not this cluster's to replace (a warning is logged).
fn kept_scheme(desired: &Desired, observed: &Observed) -> Option<(Desired, Option<Change>)> {
    let lb = observed
        .load_balancer
        .as_ref()
        .filter(|lb| lb.internal != desired.internal)?;
    let reason = scheme_change(lb, desired);
    let withheld = match observed.owned {
        Some(true) if desired.allow_recreation => return None,
        Some(true) => Some(Change::RecreationWithheld {
            name: desired.name.clone(),
            reason,
        }),
        Some(false) => {
            tracing::warn!(
                load_balancer = %desired.name,
                %reason,
                "the load balancer is not owned by this cluster (no cluster tag `owned`): its scheme is left as it is"
            );
            None
        }
        None => None,
    };
    let mut kept = desired.clone();
    kept.internal = lb.internal;
    kept.subnets = lb.subnets.iter().map(ToString::to_string).collect();
    kept.subnets.sort();
    Some((kept, withheld))
}

fn existing<'a>(observed: &'a Observed, lb: &'a ClassicLoadBalancer) -> Current<'a> {
    Current {
        lb: Cow::Borrowed(lb),
        tags: &observed.tags,
        attributes: observed.attributes.clone(),
        policies: Cow::Borrowed(&observed.policies),
        exists: true,
    }
}

/// Plans the creation; the rest of the plan continues from what creation yields.
fn created<'a>(desired: &'a Desired, changes: &mut Vec<Change>) -> Current<'a> {
    changes.push(Change::CreateLoadBalancer {
        name: desired.name.clone(),
        internal: desired.internal,
        subnets: desired.subnets.clone(),
        security_groups: desired.security_groups.clone(),
        listeners: desired.listeners.clone(),
        tags: desired.tags.clone(),
    });
    let mut fresh = ClassicLoadBalancer::new(&desired.name, "");
    fresh.listeners = desired.listeners.iter().map(Listener::to_aws).collect();
    fresh.subnets = desired.subnets.iter().map(|s| SubnetId::new(s.clone())).collect();
    Current {
        lb: Cow::Owned(fresh),
        tags: &desired.tags,
        attributes: Some(fresh_attributes()),
        // A load balancer's policies go with it.
        policies: Cow::Owned(BTreeSet::new()),
        exists: false,
    }
}

/// Keys dropped from the annotation go first (a crash before the new record is written repeats nothing), then
/// the tags it lacks.
fn tags(desired: &Desired, current: &Tags) -> Vec<Change> {
    let mut changes = Vec::new();
    let keys = shared::dropped_tags(current, &desired.tags);
    if !keys.is_empty() {
        changes.push(Change::RemoveTags { keys });
    }
    let add_tags = shared::tag_additions(current, &desired.tags);
    if !add_tags.is_empty() {
        changes.push(Change::AddTags { tags: add_tags });
    }
    changes
}

/// Listeners by port: a changed one is deleted and created again. Also returns the ports created anew (their
/// listener policies are gone).
fn listeners(desired: &Desired, lb: &ClassicLoadBalancer) -> (Vec<Change>, BTreeSet<i32>) {
    let by_port: BTreeMap<i32, &ClassicListener> =
        lb.listeners.iter().map(|l| (l.load_balancer_port, l)).collect();
    let wanted_ports: BTreeSet<i32> = desired.listeners.iter().map(|l| l.port).collect();
    let mut delete: Vec<i32> = lb
        .listeners
        .iter()
        .map(|l| l.load_balancer_port)
        .filter(|p| !wanted_ports.contains(p))
        .collect();
    let mut create = Vec::new();
    let mut recreated_ports = BTreeSet::new();
    for l in &desired.listeners {
        match by_port.get(&l.port) {
            Some(current) if l.matches(current) => {}
            Some(_) => {
                delete.push(l.port);
                create.push(l.clone());
                recreated_ports.insert(l.port);
            }
            None => {
                create.push(l.clone());
                recreated_ports.insert(l.port);
            }
        }
    }
    delete.sort_unstable();
    delete.dedup();
    let mut changes = Vec::new();
    if !delete.is_empty() {
        changes.push(Change::DeleteListeners { ports: delete });
    }
    if !create.is_empty() {
        changes.push(Change::CreateListeners { listeners: create });
    }
    (changes, recreated_ports)
}

/// A Classic ELB takes one subnet per zone and needs at least one: detach first when a subnet stays (so a
/// replacement in the same zone can attach), attach first when all are replaced.
fn subnets(desired: &Desired, lb: &ClassicLoadBalancer) -> Vec<Change> {
    let current: BTreeSet<&str> = lb.subnets.iter().map(SubnetId::as_str).collect();
    let wanted: BTreeSet<&str> = desired.subnets.iter().map(String::as_str).collect();
    let attach: Vec<String> = wanted.difference(&current).map(|s| (*s).to_owned()).collect();
    let detach: Vec<String> = current.difference(&wanted).map(|s| (*s).to_owned()).collect();
    let attach = (!attach.is_empty()).then_some(Change::AttachSubnets { subnets: attach });
    let detach = (!detach.is_empty()).then_some(Change::DetachSubnets { subnets: detach });
    if current.intersection(&wanted).next().is_some() {
        detach.into_iter().chain(attach).collect()
    } else {
        attach.into_iter().chain(detach).collect()
    }
}

fn security_groups(desired: &Desired, observed: &Observed, lb: &ClassicLoadBalancer) -> Option<Change> {
    let managed_id = observed.managed_group.as_ref().map(|g| g.id.to_string());
    let resolved: Option<BTreeSet<String>> = desired
        .security_groups
        .iter()
        .map(|g| match g {
            GroupRef::Managed => managed_id.clone(),
            GroupRef::Id(id) => Some(id.clone()),
        })
        .collect();
    let current: BTreeSet<String> = lb.security_groups.iter().map(ToString::to_string).collect();
    (resolved.as_ref() != Some(&current)).then(|| Change::ApplySecurityGroups {
        groups: desired.security_groups.clone(),
    })
}

fn health_check(desired: &Desired, lb: &ClassicLoadBalancer) -> Option<Change> {
    let matches = lb
        .health_check
        .as_ref()
        .is_some_and(|h| desired.health_check.matches(h));
    (!matches).then(|| Change::ConfigureHealthCheck {
        health_check: desired.health_check.clone(),
    })
}

fn attributes(desired: &Desired, current: Option<&ClassicAttributes>) -> Option<Change> {
    let current = current.filter(|current| !desired.attributes.matches(current))?;
    // AWS takes every attribute at once: keep its draining timeout where we own none.
    let mut attributes = desired.attributes.clone();
    if attributes.draining_timeout.is_none() {
        attributes.draining_timeout = current.connection_draining_timeout;
    }
    Some(Change::ModifyAttributes { attributes })
}

/// Proxy protocol: the policy, and on every back-end port exactly when wanted.
fn backend_policies(desired: &Desired, current: &Current<'_>) -> Vec<Change> {
    let mut changes = Vec::new();
    let backend: BTreeMap<i32, &Vec<String>> = current
        .lb
        .backend_policies
        .iter()
        .map(|b| (b.instance_port, &b.policy_names))
        .collect();
    let instance_ports: BTreeSet<i32> = desired.listeners.iter().map(|l| l.instance_port).collect();
    if desired.proxy_protocol && !current.policies.contains(PROXY_PROTOCOL_POLICY) {
        changes.push(Change::CreatePolicy {
            name: PROXY_PROTOCOL_POLICY.to_owned(),
            type_name: "ProxyProtocolPolicyType".to_owned(),
            attributes: vec![("ProxyProtocol".to_owned(), "true".to_owned())],
        });
    }
    for port in &instance_ports {
        let policies: Vec<String> = backend.get(port).map(|v| (*v).clone()).unwrap_or_default();
        let has = policies.iter().any(|p| p == PROXY_PROTOCOL_POLICY);
        if desired.proxy_protocol && !has {
            let mut policies = policies.clone();
            policies.push(PROXY_PROTOCOL_POLICY.to_owned());
            changes.push(Change::SetBackendPolicies {
                instance_port: *port,
                policies,
            });
        } else if !desired.proxy_protocol && has {
            changes.push(Change::SetBackendPolicies {
                instance_port: *port,
                policies: policies
                    .into_iter()
                    .filter(|p| p != PROXY_PROTOCOL_POLICY)
                    .collect(),
            });
        }
    }
    changes
}

/// SSL negotiation: the policy, and on every secure listener.
fn ssl_policies(desired: &Desired, current: &Current<'_>, recreated_ports: &BTreeSet<i32>) -> Vec<Change> {
    let mut changes = Vec::new();
    let Some(reference) = desired
        .ssl_negotiation_policy
        .as_ref()
        .filter(|_| desired.listeners.iter().any(Listener::is_secure))
    else {
        return changes;
    };
    let policy = ssl_policy_name(reference);
    if !current.policies.contains(&policy) {
        changes.push(Change::CreatePolicy {
            name: policy.clone(),
            type_name: "SSLNegotiationPolicyType".to_owned(),
            attributes: vec![("Reference-Security-Policy".to_owned(), reference.clone())],
        });
    }
    for l in desired.listeners.iter().filter(|l| l.is_secure()) {
        let policies = if recreated_ports.contains(&l.port) {
            Vec::new()
        } else {
            current
                .lb
                .listeners
                .iter()
                .find(|o| o.load_balancer_port == l.port)
                .map(|o| o.policy_names.clone())
                .unwrap_or_default()
        };
        // Only our negotiation policy is swapped: other policies on the listener (a stickiness policy set by
        // hand, say) stay, where upstream replaces the whole list.
        let mut wanted: Vec<String> = policies
            .iter()
            .filter(|p| !p.starts_with(SSL_POLICY_PREFIX))
            .cloned()
            .collect();
        wanted.push(policy.clone());
        let differs = policies.len() != wanted.len() || !wanted.iter().all(|p| policies.contains(p));
        if differs {
            changes.push(Change::SetListenerPolicies {
                port: l.port,
                policies: wanted,
            });
        }
    }
    changes
}

/// Instances: register first, then deregister.
fn instances(desired: &Desired, observed: &Observed, lb: &ClassicLoadBalancer) -> Vec<Change> {
    let current: BTreeSet<&str> = lb.instances.iter().map(InstanceId::as_str).collect();
    let wanted: BTreeSet<&str> = desired
        .instances
        .iter()
        .filter(|i| {
            observed
                .existing_instances
                .as_ref()
                .is_none_or(|e| e.contains(*i))
        })
        .map(String::as_str)
        .collect();
    let register: Vec<String> = wanted.difference(&current).map(|s| (*s).to_owned()).collect();
    let deregister: Vec<String> = current.difference(&wanted).map(|s| (*s).to_owned()).collect();
    let mut changes = Vec::new();
    if !register.is_empty() {
        changes.push(Change::RegisterInstances { instances: register });
    }
    if !deregister.is_empty() {
        changes.push(Change::DeregisterInstances {
            instances: deregister,
        });
    }
    changes
}

/// The nodes' groups allow the load balancer's first group on exactly the ports it sends to, while they are
/// wanted (see [`node_rules`](super::node_rules)).
fn node_rules(desired: &Desired, observed: &Observed) -> Vec<Change> {
    match (&observed.node_groups, desired.security_groups.first()) {
        (Some(nodes), Some(from)) if desired.manage_node_rules => {
            let ports = super::node_rules::node_ports(&desired.listeners, &desired.health_check);
            super::node_rules::plan(from, &ports, nodes)
        }
        _ => Vec::new(),
    }
}

/// A managed group replaced by given groups: its rules on other groups, then the group itself.
fn orphaned_group(desired: &Desired, observed: &Observed) -> Vec<Change> {
    let mut changes = Vec::new();
    if let Some(orphan) = &observed.orphaned_group
        && desired.managed_group.is_none()
        && !desired
            .security_groups
            .contains(&GroupRef::Id(orphan.id.to_string()))
    {
        for (group, rules) in &orphan.referenced_by {
            changes.push(Change::RevokeNodeAccess {
                group: group.to_string(),
                from: GroupRef::Id(orphan.id.to_string()),
                rules: rules.clone(),
            });
        }
        changes.push(Change::DeleteSecurityGroup {
            group: orphan.id.to_string(),
        });
    }
    changes
}

/// The notice of a plan that recreates the load balancer: a Warning naming what changed.
pub fn recreation(name: &str, changes: &[Change]) -> Option<String> {
    flavour_recreation_reason(changes).map(|reason| shared::recreation_notice("Classic ELB", name, reason))
}

/// Whether a change only concerns the back-end hosts (what `UpdateLoadBalancer` may do).
pub fn is_host_change(change: &Change) -> bool {
    change.is_host_change()
}

/// What changed that makes a plan recreate the load balancer (`None`: no recreation).
pub fn recreation_reason(changes: &[Change]) -> Option<&str> {
    flavour_recreation_reason(changes)
}

/// The deletion plan (pure): revoke the node rules nobody needs any more from a source the cluster does not
/// own and the rules referencing the owned groups, delete the load balancer, delete the owned groups.
pub fn plan_delete(name: &str, observed: &DeleteObserved) -> Vec<Change> {
    let mut changes = node_access_revocations(observed);
    if observed.load_balancer.is_some() {
        changes.push(Change::DeleteLoadBalancer {
            name: name.to_owned(),
            recreate_because: None,
        });
    }
    changes.extend(
        observed
            .groups
            .iter()
            .map(|g| Change::DeleteSecurityGroup { group: g.to_string() }),
    );
    changes
}

/// The release of the Classic ELB by its Service's deletion (pure; `aws-load-balancer-release-on-deletion`, an
/// adopted one's default): handed over to `service` under `hand_over_key` first, the nodes' rules revoked, the
/// instances deregistered (a node port given to another Service later must not receive its traffic), `keys`
/// removed from the managed group (the first owned group, which the apply is given) and from the load balancer
/// last, so an interrupted release is finished by the next deletion pass. The load balancer, its listeners and
/// groups stay.
pub fn plan_release(
    (hand_over_key, service): (&str, &str),
    keys: &[String],
    observed: &DeleteObserved,
) -> Vec<Change> {
    let Some(lb) = &observed.load_balancer else {
        return Vec::new();
    };
    let mut changes = vec![Change::AddTags {
        tags: Tags::from([(hand_over_key.to_owned(), service.to_owned())]),
    }];
    changes.extend(node_access_revocations(observed));
    if !lb.instances.is_empty() {
        changes.push(Change::DeregisterInstances {
            instances: lb.instances.iter().map(ToString::to_string).collect(),
        });
    }
    if !observed.groups.is_empty() {
        changes.push(Change::TagSecurityGroup {
            add: Tags::new(),
            remove: keys.to_vec(),
        });
    }
    changes.push(Change::RemoveTags { keys: keys.to_vec() });
    changes
}

/// The nodes' rules a deletion or release revokes: those from a source group the cluster does not own that nobody
/// needs any more, and those referencing the owned groups.
fn node_access_revocations(observed: &DeleteObserved) -> Vec<Change> {
    let mut changes: Vec<Change> = observed
        .given_source
        .iter()
        .flat_map(|(source, nodes)| {
            super::node_rules::plan(&GroupRef::Id(source.to_string()), &BTreeSet::new(), nodes)
        })
        .collect();
    changes.extend(
        observed
            .references
            .iter()
            .map(|(group, source, rules)| Change::RevokeNodeAccess {
                group: group.to_string(),
                from: GroupRef::Id(source.to_string()),
                rules: rules.clone(),
            }),
    );
    changes
}
