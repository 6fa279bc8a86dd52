//! The rules of the report (see the module documentation of `doctor`): pure, from an [`Inventory`], a
//! [`Snapshot`] and the uninitialized Nodes' instance lookups to [`Finding`]s.

use std::collections::{BTreeMap, BTreeSet};

use ccm_aws_api::{
    InstanceId, ProviderId, SecurityGroupId, Tags,
    ec2::{Instance, InstanceState, IpPermission, RouteTable, SecurityGroup},
};
use ccm_load_balancers::{
    nlb::node_rules::{CLIENT_RULE_PREFIX, HEALTH_RULE_PREFIX},
    shared::{self, SERVICE_NAME_TAG, SERVICE_UID_TAG},
};
use k8s_openapi::api::core::v1::Service;

use super::{
    Action, Finding, Kind, LOAD_BALANCER_CLEANUP_FINALIZER, NodeLookup, Scope, Snapshot,
    classic_rules::describe,
    objects::{self, is_load_balancer},
    observe::Inventory,
};

/// The prefix of Classic ELB security group names (`k8s-elb-<load balancer>`).
const CLASSIC_GROUP_PREFIX: &str = "k8s-elb-";
/// Routes that are never a pod CIDR's.
const DEFAULT_ROUTES: [&str; 2] = ["0.0.0.0/0", "::/0"];

/// The Services by `namespace/name`.
type Services<'a> = BTreeMap<String, &'a Service>;

/// The Kubernetes side of ownership.
struct Owners<'a> {
    services: Services<'a>,
    /// Every name a Service that wants a load balancer may give it (chosen, in its status, its UID's): a load
    /// balancer or a Classic group under one of them is never leaked, whatever Service its tags name.
    wanted: BTreeSet<String>,
}

/// The leaked load balancers, by Classic name, NLB name and NLB ARN.
#[derive(Debug, Default)]
struct Leaked {
    names: BTreeSet<String>,
    arns: BTreeSet<String>,
}

/// Every finding, AWS resources first (in deletion order), then Nodes and Services.
pub(super) fn findings(
    scope: &Scope,
    inventory: &Inventory,
    snapshot: &Snapshot,
    lookups: &BTreeMap<String, NodeLookup>,
) -> Vec<Finding> {
    let services: Services<'_> = snapshot
        .services
        .iter()
        .map(|s| (ccm_cloud_provider::object_key(&s.metadata), s))
        .collect();
    let wanted = services
        .values()
        .filter(|s| wants_load_balancer(s))
        .flat_map(|s| shared::all_names(s))
        .collect();
    let owners = Owners { services, wanted };
    let mut out = Vec::new();
    let leaked = load_balancers(scope, inventory, &owners, &mut out);
    target_groups(scope, inventory, &owners.services, &leaked, &mut out);
    security_groups(scope, inventory, &owners, &leaked, &mut out);
    node_rules(scope, inventory, &leaked, &mut out);
    routes(scope, inventory, snapshot, &mut out);
    objects::nodes(scope, snapshot, lookups, &mut out);
    objects::nodes_outside_cluster(scope, inventory, snapshot, &mut out);
    objects::failing_services(scope, snapshot, &mut out);
    out
}

// --- load balancers, target groups, groups ---

fn load_balancers(scope: &Scope, inv: &Inventory, owners: &Owners<'_>, out: &mut Vec<Finding>) -> Leaked {
    let mut leaked = Leaked::default();
    for (lb, tags) in &inv.classic {
        let Some(key) = tags
            .get(SERVICE_NAME_TAG)
            .filter(|_| scope.cluster.is_owned(tags))
        else {
            continue;
        };
        if let Some(reason) = load_balancer_reason(owners, key, &lb.name, tags) {
            leaked.names.insert(lb.name.clone());
            out.push(
                Finding::new(Kind::ClassicLoadBalancer, &lb.name, reason)
                    .for_service(key)
                    .created_at(lb.created_time, scope.now)
                    .with_action(Action::DeleteClassic(lb.name.clone())),
            );
        }
    }
    for (lb, tags) in inv.v2.iter().filter(|(lb, _)| lb.lb_type == "network") {
        let Some(key) = tags
            .get(SERVICE_NAME_TAG)
            .filter(|_| scope.cluster.is_owned(tags))
        else {
            continue;
        };
        if let Some(reason) = load_balancer_reason(owners, key, &lb.name, tags) {
            leaked.names.insert(lb.name.clone());
            leaked.arns.insert(lb.arn.clone());
            let mut finding = Finding::new(Kind::NetworkLoadBalancer, &lb.arn, reason)
                .for_service(key)
                .created_at(lb.created_time, scope.now)
                .with_action(Action::DeleteNetwork(lb.arn.clone()));
            finding.name = Some(lb.name.clone());
            out.push(finding);
        }
    }
    leaked
}

/// Why a load balancer named `lb_name`, tagged `tags` for Service `key`, is leaked, or `None` when a live Service
/// owns or wants it.
fn load_balancer_reason(owners: &Owners<'_>, key: &str, lb_name: &str, tags: &Tags) -> Option<String> {
    if owners.wanted.contains(lb_name) {
        return None;
    }
    let service = match owner(&owners.services, key) {
        Ok(service) => service,
        Err(reason) => return Some(reason),
    };
    if is_generated_name(lb_name) {
        return recreated(service, key, lb_name);
    }
    recreated_leftover(service, key, lb_name, tags)
}

/// The reason of a load balancer (or Classic group) under a UID name that its Service `key`, whose names do not
/// include it, no longer has: the Service was deleted and re-created. `None` without a UID.
fn recreated(service: &Service, key: &str, lb_name: &str) -> Option<String> {
    let uid = service.metadata.uid.as_deref().unwrap_or_default();
    let expected = shared::load_balancer_name(uid).ok()?;
    Some(format!(
        "Service {key} was recreated: its UID {uid} names load balancer {expected}, not {lb_name}"
    ))
}

/// Why a load balancer under a chosen name (or its Classic group), tagged `tags` for Service `key` whose names do
/// not include it, is that Service's leftover from before it was deleted and re-created: its UID tag names
/// another UID than the Service's. A chosen name carries no UID, so without the tag (made before it existed)
/// nothing tells a leftover from a load balancer the Service still owns, and `None` leaves it alone.
fn recreated_leftover(service: &Service, key: &str, lb_name: &str, tags: &Tags) -> Option<String> {
    let uid = service.metadata.uid.as_deref().filter(|uid| !uid.is_empty())?;
    let made_for = tags.get(SERVICE_UID_TAG).filter(|made_for| *made_for != uid)?;
    let wanted = shared::wanted_name(service).unwrap_or_default();
    Some(format!(
        "Service {key} was recreated: load balancer {lb_name} was made for UID {made_for}, the Service has UID \
         {uid} and wants load balancer {wanted}"
    ))
}

fn target_groups(
    scope: &Scope,
    inv: &Inventory,
    services: &Services<'_>,
    leaked: &Leaked,
    out: &mut Vec<Finding>,
) {
    for (group, tags) in &inv.target_groups {
        let Some(key) = tags
            .get(SERVICE_NAME_TAG)
            .filter(|_| scope.cluster.is_owned(tags))
        else {
            continue;
        };
        if group.load_balancer_arns.iter().any(|a| !leaked.arns.contains(a)) {
            continue;
        }
        let reason = match owner(services, key) {
            Err(reason) => reason,
            Ok(_) if !group.load_balancer_arns.is_empty() => {
                "only leaked load balancers forward to it".to_owned()
            }
            // Unattached while its Service wants an NLB: a sync in progress, or the CCM's own sweep's to do.
            Ok(_) => continue,
        };
        let mut finding = Finding::new(Kind::TargetGroup, &group.arn, reason)
            .for_service(key)
            .with_action(Action::DeleteTargetGroup(group.arn.clone()));
        finding.name = Some(group.name.clone());
        finding.details = group
            .load_balancer_arns
            .iter()
            .map(|arn| format!("used by leaked load balancer {arn}"))
            .collect();
        out.push(finding);
    }
}

fn security_groups(
    scope: &Scope,
    inv: &Inventory,
    owners: &Owners<'_>,
    leaked: &Leaked,
    out: &mut Vec<Finding>,
) {
    let live_classic: BTreeSet<&str> = inv
        .classic
        .iter()
        .map(|(lb, _)| lb.name.as_str())
        .filter(|n| !leaked.names.contains(*n))
        .collect();
    let used: BTreeSet<&SecurityGroupId> = inv
        .classic
        .iter()
        .filter(|(lb, _)| !leaked.names.contains(&lb.name))
        .flat_map(|(lb, _)| &lb.security_groups)
        .chain(
            inv.v2
                .iter()
                .filter(|(lb, _)| !leaked.arns.contains(&lb.arn))
                .flat_map(|(lb, _)| &lb.security_groups),
        )
        .collect();
    for group in &inv.groups {
        let key = group.tags.get(SERVICE_NAME_TAG);
        let classic_name = group.name.strip_prefix(CLASSIC_GROUP_PREFIX);
        if !scope.cluster.is_owned(&group.tags)
            || (key.is_none() && classic_name.is_none())
            || used.contains(&group.id)
        {
            continue;
        }
        let Some(reason) = group_reason(owners, leaked, &live_classic, group) else {
            continue;
        };
        let referencing = references(&inv.groups, &group.id);
        let mut finding = Finding::new(Kind::SecurityGroup, group.id.as_str(), reason);
        finding.name = Some(group.name.clone());
        finding.service = key.cloned();
        finding.details = referencing
            .iter()
            .flat_map(|(from, perms)| {
                perms
                    .iter()
                    .map(move |p| format!("rule of {from}: {}", describe(p)))
            })
            .collect();
        out.push(finding.with_action(Action::DeleteGroup(group.id.clone(), referencing)));
    }
}

/// Why a load balancer group is leaked: its Service's verdict when it names one, else whether its Classic load
/// balancer exists. A Classic group under a name a live Service wants never is.
fn group_reason(
    owners: &Owners<'_>,
    leaked: &Leaked,
    live_classic: &BTreeSet<&str>,
    group: &SecurityGroup,
) -> Option<String> {
    let classic_name = group.name.strip_prefix(CLASSIC_GROUP_PREFIX);
    if classic_name.is_some_and(|lb| owners.wanted.contains(lb)) {
        return None;
    }
    match (group.tags.get(SERVICE_NAME_TAG), classic_name) {
        (Some(key), classic_name) => {
            let service = match owner(&owners.services, key) {
                Ok(service) => service,
                Err(reason) => return Some(reason),
            };
            let lb = classic_name?;
            if is_generated_name(lb) {
                return recreated(service, key, lb);
            }
            // By the group's own UID tag, which still tells once its load balancer is gone (removed by an earlier
            // --delete while AWS held the group); else by its load balancer's verdict in this reading.
            recreated_leftover(service, key, lb, &group.tags).or_else(|| {
                leaked
                    .names
                    .contains(lb)
                    .then(|| format!("its load balancer {lb} is leaked"))
            })
        }
        (None, Some(lb)) => (!live_classic.contains(lb)).then(|| {
            format!("load balancer {lb} does not exist and no Service's load balancer has that name")
        }),
        (None, None) => None,
    }
}

/// The rules of other groups whose source is `group`, reduced to that source, per group.
fn references(
    groups: &[SecurityGroup],
    group: &SecurityGroupId,
) -> Vec<(SecurityGroupId, Vec<IpPermission>)> {
    let mut out = Vec::new();
    for other in groups.iter().filter(|g| g.id != *group) {
        let perms: Vec<IpPermission> = other
            .ingress
            .iter()
            .filter_map(|p| {
                let sources: Vec<_> = p
                    .source_groups
                    .iter()
                    .filter(|s| s.group_id == *group)
                    .cloned()
                    .collect();
                (!sources.is_empty()).then(|| IpPermission {
                    protocol: p.protocol.clone(),
                    from_port: p.from_port,
                    to_port: p.to_port,
                    source_groups: sources,
                    ..IpPermission::default()
                })
            })
            .collect();
        if !perms.is_empty() {
            out.push((other.id.clone(), perms));
        }
    }
    out
}

/// NLB rules on the cluster's node groups whose load balancer is gone or leaked (and the Classic ELB rules of
/// [`classic_rules`](super::classic_rules)).
fn node_rules(scope: &Scope, inv: &Inventory, leaked: &Leaked, out: &mut Vec<Finding>) {
    let live: BTreeSet<&str> = inv
        .v2
        .iter()
        .map(|(lb, _)| lb.name.as_str())
        .filter(|n| !leaked.names.contains(*n))
        .collect();
    let node_groups: BTreeSet<&SecurityGroupId> = inv
        .instances
        .values()
        .filter(|i| scope.cluster.is_tagged(&i.tags))
        .flat_map(|i| {
            i.security_groups
                .iter()
                .chain(i.network_interfaces.iter().flat_map(|n| &n.security_groups))
        })
        .collect();
    super::classic_rules::findings(scope, inv, &node_groups, &leaked.names, out);
    for group in &inv.groups {
        if !scope.cluster.is_tagged(&group.tags) && !node_groups.contains(&group.id) {
            continue;
        }
        let mut stale: BTreeMap<&str, Vec<IpPermission>> = BTreeMap::new();
        for p in &group.ingress {
            for (v6, range) in p
                .ip_ranges
                .iter()
                .map(|r| (false, r))
                .chain(p.ipv6_ranges.iter().map(|r| (true, r)))
            {
                let Some(desc) = range.description.as_deref() else {
                    continue;
                };
                let Some(lb) = desc
                    .strip_prefix(CLIENT_RULE_PREFIX)
                    .or_else(|| desc.strip_prefix(HEALTH_RULE_PREFIX))
                else {
                    continue;
                };
                if live.contains(lb) {
                    continue;
                }
                let mut rule = IpPermission {
                    protocol: p.protocol.clone(),
                    from_port: p.from_port,
                    to_port: p.to_port,
                    ..IpPermission::default()
                };
                if v6 {
                    rule.ipv6_ranges.push(range.clone())
                } else {
                    rule.ip_ranges.push(range.clone())
                }
                stale.entry(lb).or_default().push(rule);
            }
        }
        for (lb, rules) in stale {
            let state = if leaked.names.contains(lb) {
                "is leaked"
            } else {
                "does not exist"
            };
            let reason = format!("rules for NLB {lb}, which {state}");
            let mut finding = Finding::new(Kind::NodeGroupRules, format!("{} {lb}", group.id), reason);
            finding.name = Some(group.name.clone());
            finding.details = rules.iter().map(|r| format!("rule: {}", describe(r))).collect();
            out.push(finding.with_action(Action::RevokeRules(vec![(group.id.clone(), rules)])));
        }
    }
}

// --- routes ---

fn routes(scope: &Scope, inv: &Inventory, snapshot: &Snapshot, out: &mut Vec<Finding>) {
    let node_instances: BTreeSet<InstanceId> = snapshot
        .nodes
        .iter()
        .filter_map(|n| ProviderId::ec2_instance_of(n.spec.as_ref()?.provider_id.as_deref()?))
        .collect();
    let node_names: BTreeSet<&str> = snapshot
        .nodes
        .iter()
        .filter_map(|n| n.metadata.name.as_deref())
        .collect();
    let is_node = |i: &Instance| {
        node_instances.contains(&i.id)
            || node_names.contains(i.id.as_str())
            || i.private_dns_name
                .as_deref()
                .is_some_and(|d| node_names.contains(d))
    };
    for table in &inv.route_tables {
        for route in &table.routes {
            let (Some(dest), Some(id)) = (
                route
                    .destination_cidr
                    .as_deref()
                    .or(route.destination_ipv6_cidr.as_deref()),
                &route.instance_id,
            ) else {
                continue;
            };
            if DEFAULT_ROUTES.contains(&dest) {
                continue;
            }
            let (reason, gone) = match inv.instances.get(id) {
                None => (format!("instance {id} does not exist"), true),
                Some(i) if i.state == InstanceState::Terminated => {
                    (format!("instance {id} is terminated"), true)
                }
                Some(i) if scope.cluster.is_tagged(&i.tags) && !is_node(i) => {
                    let dns = i.private_dns_name.as_deref().unwrap_or("no private DNS name");
                    (
                        format!("instance {id} ({dns}) is no Node's (reported only: the instance runs)"),
                        false,
                    )
                }
                _ => continue,
            };
            out.push(route_finding(
                scope,
                table,
                dest,
                route.destination_cidr.is_some(),
                reason,
                gone,
            ));
        }
    }
}

fn route_finding(
    scope: &Scope,
    table: &RouteTable,
    dest: &str,
    v4: bool,
    reason: String,
    gone: bool,
) -> Finding {
    let finding = Finding::new(Kind::Route, format!("{} {dest}", table.id), reason);
    // Only an owned table's IPv4 routes to instances that are gone are removed (DeleteRoute takes IPv4).
    if gone && v4 && scope.cluster.is_owned(&table.tags) {
        finding.with_action(Action::DeleteRoute(table.id.clone(), dest.to_owned()))
    } else {
        finding
    }
}

// --- helpers ---

/// The Service named `key`, when it still wants its load balancer; else why not.
fn owner<'a>(services: &Services<'a>, key: &str) -> Result<&'a Service, String> {
    match services.get(key) {
        None => Err(format!("Service {key} does not exist")),
        Some(service) if !wants_load_balancer(service) => Err(format!(
            "Service {key} is of type {} and has no {LOAD_BALANCER_CLEANUP_FINALIZER} finalizer",
            service
                .spec
                .as_ref()
                .and_then(|s| s.type_.as_deref())
                .unwrap_or("ClusterIP")
        )),
        Some(service) => Ok(service),
    }
}

/// A Service owns its load balancer while it is of type LoadBalancer or its cleanup finalizer is still on.
fn wants_load_balancer(service: &Service) -> bool {
    is_load_balancer(service)
        || service
            .metadata
            .finalizers
            .as_ref()
            .is_some_and(|f| f.iter().any(|f| f == LOAD_BALANCER_CLEANUP_FINALIZER))
}

/// Whether `name` has the form of a generated load balancer name: `a` and 31 lower-case hex digits.
fn is_generated_name(name: &str) -> bool {
    name.len() == 32
        && name.starts_with('a')
        && name[1..]
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

// === impl Finding (analysis helpers) ===

impl Finding {
    fn for_service(mut self, key: &str) -> Self {
        self.service = Some(key.to_owned());
        self
    }
}
