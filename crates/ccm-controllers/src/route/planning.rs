//! The route controller's decisions, without side effects: which routes a pass deletes and creates, and the
//! `NetworkUnavailable` condition each Node gets (upstream `reconcile`, steps 1 to 4), and how a dry run shows
//! them. The controller (`route.rs`) reads the world, asks for a plan here, and applies it.

use ccm_cloud_provider::NodeView;
use std::{
    collections::{BTreeMap, BTreeSet},
    fmt,
    net::IpAddr,
    str::FromStr,
};

use ccm_cloud_provider::{NodeAddress, Route};
use k8s_openapi::api::core::v1::NodeCondition;

use crate::{Clock, addresses::node_addresses, keys::CONDITION_NETWORK_UNAVAILABLE};

/// An IP network such as `10.244.0.0/16` (host bits are cleared, as Go's `ParseCIDR` does).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cidr {
    network: IpAddr,
    prefix: u8,
}

/// One route to create for a node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannedRoute {
    /// The node's UID, the provider's name hint.
    pub name_hint: String,
    /// The route (target node, its addresses, destination).
    pub route: Route,
}

/// What a pass does (upstream `reconcile`, steps 1 to 4).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RoutePlan {
    /// Routes to delete.
    pub delete: Vec<Route>,
    /// Routes to create (new, or replacing an outdated one).
    pub create: Vec<PlannedRoute>,
    /// Deletes must finish before creates (the provider tracks node addresses, so an update is
    /// delete-then-create).
    pub deletes_first: bool,
    /// For each node the condition is written for: whether its routes exist once `create` succeeded. Nodes
    /// without pod CIDRs but with routes pointing at them get `false`.
    pub nodes: BTreeMap<String, bool>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Action {
    Keep,
    Add,
    Update,
}

// === impl Cidr ===

impl FromStr for Cidr {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || format!("{s:?} is not a CIDR such as 10.244.0.0/16 or fd00:10:244::/56");
        let (ip, prefix) = s.trim().split_once('/').ok_or_else(bad)?;
        let ip: IpAddr = ip.parse().map_err(|_| bad())?;
        let prefix: u8 = prefix.parse().map_err(|_| bad())?;
        let max = if ip.is_ipv4() { 32 } else { 128 };
        if prefix > max {
            return Err(bad());
        }
        Ok(Self {
            network: mask(ip, prefix),
            prefix,
        })
    }
}

impl fmt::Display for Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.network, self.prefix)
    }
}

fn bits(ip: IpAddr) -> (u128, u32) {
    match ip {
        IpAddr::V4(v4) => (u128::from(u32::from(v4)), 32),
        IpAddr::V6(v6) => (u128::from(v6), 128),
    }
}

fn from_bits(v: u128, v4: bool) -> IpAddr {
    if v4 {
        IpAddr::from(u32::try_from(v).unwrap_or(u32::MAX).to_be_bytes())
    } else {
        IpAddr::from(v.to_be_bytes())
    }
}

fn host_mask(prefix: u8, width: u32) -> u128 {
    let host = width - u32::from(prefix);
    if host >= 128 {
        u128::MAX
    } else {
        (1u128 << host) - 1
    }
}

fn mask(ip: IpAddr, prefix: u8) -> IpAddr {
    let (v, width) = bits(ip);
    from_bits(v & !host_mask(prefix, width), ip.is_ipv4())
}

impl Cidr {
    /// Whether `ip` is inside this network.
    pub fn contains(&self, ip: IpAddr) -> bool {
        ip.is_ipv4() == self.network.is_ipv4() && mask(ip, self.prefix) == self.network
    }

    /// The network address.
    pub fn network(&self) -> IpAddr {
        self.network
    }

    /// The last address.
    pub fn last(&self) -> IpAddr {
        let (v, width) = bits(self.network);
        from_bits(v | host_mask(self.prefix, width), self.network.is_ipv4())
    }

    /// Whether this is an IPv4 network.
    pub fn is_ipv4(&self) -> bool {
        self.network.is_ipv4()
    }
}

fn pod_cidrs(node: &NodeView) -> Vec<String> {
    node.pod_cidrs.clone()
}

fn same_addresses(a: &[NodeAddress], b: &[NodeAddress]) -> bool {
    a.len() == b.len() && a.iter().all(|x| b.contains(x))
}

/// Upstream `reconcile`'s decisions, without side effects, for a controller responsible for `cluster_cidrs`.
pub(super) fn plan(cluster_cidrs: &[Cidr], nodes: &[&NodeView], routes: &[Route]) -> RoutePlan {
    let mut by_node: BTreeMap<&str, Vec<&Route>> = BTreeMap::new();
    for r in routes.iter().filter(|r| !r.target_node.is_empty()) {
        by_node.entry(r.target_node.as_str()).or_default().push(r);
    }
    let mut actions: BTreeMap<(String, String), Action> = BTreeMap::new();
    let mut out = RoutePlan::default();
    for node in nodes {
        let name = node.name.clone();
        let cidrs = pod_cidrs(node);
        if cidrs.is_empty() {
            if by_node.contains_key(name.as_str()) {
                out.nodes.insert(name, false);
            }
            continue;
        }
        let addresses = node_addresses(node);
        let existing = by_node.get(name.as_str()).cloned().unwrap_or_default();
        for cidr in cidrs.iter().collect::<BTreeSet<_>>() {
            let action = match existing.iter().find(|r| &r.destination_cidr == cidr) {
                Some(r)
                    if !r.enable_node_addresses || same_addresses(&r.target_node_addresses, &addresses) =>
                {
                    Action::Keep
                }
                Some(_) => Action::Update,
                None => Action::Add,
            };
            if action != Action::Keep {
                out.create.push(PlannedRoute {
                    name_hint: node.uid.clone().unwrap_or_default(),
                    route: Route {
                        target_node: name.clone(),
                        target_node_addresses: addresses.clone(),
                        destination_cidr: cidr.clone(),
                        ..Default::default()
                    },
                });
            }
            actions.insert((name.clone(), cidr.clone()), action);
        }
        out.nodes.insert(name, true);
    }
    for r in routes.iter().filter(|r| responsible(cluster_cidrs, r)) {
        let action = actions.get(&(r.target_node.clone(), r.destination_cidr.clone()));
        if r.blackhole || !matches!(action, Some(Action::Keep | Action::Add)) {
            out.delete.push(r.clone());
        }
    }
    out.deletes_first = routes.first().is_some_and(|r| r.enable_node_addresses);
    out
}

/// The `NetworkUnavailable` condition to write, or `None` when the node already has the equivalent one.
pub fn network_condition(node: &NodeView, routes_created: bool, clock: &Clock) -> Option<NodeCondition> {
    let existing = node
        .conditions
        .iter()
        .find(|c| c.type_ == CONDITION_NETWORK_UNAVAILABLE);
    let (status, reason, message) = if routes_created {
        ("False", "RouteCreated", "RouteController created a route")
    } else {
        (
            "True",
            "NoRouteCreated",
            "RouteController failed to create a route",
        )
    };
    if existing.is_some_and(|c| c.status == status && c.reason.as_deref() == Some(reason)) {
        return None;
    }
    let now = clock.now();
    Some(NodeCondition {
        type_: CONDITION_NETWORK_UNAVAILABLE.to_owned(),
        status: status.to_owned(),
        reason: Some(reason.to_owned()),
        message: Some(message.to_owned()),
        last_transition_time: Some(now.clone()),
        last_heartbeat_time: Some(now),
    })
}

/// Whether a controller responsible for `cluster_cidrs` manages `route`: its network or last address lies in
/// one of them.
pub(super) fn responsible(cluster_cidrs: &[Cidr], route: &Route) -> bool {
    let Ok(cidr) = route.destination_cidr.parse::<Cidr>() else {
        return false;
    };
    cluster_cidrs
        .iter()
        .any(|c| c.contains(cidr.network()) || c.contains(cidr.last()))
}

/// A dry run's view of `plan`: the routes it would delete and create, and the `NetworkUnavailable` conditions
/// it would write (as if every route were created), by Node.
pub(super) fn route_changes(
    plan: &RoutePlan,
    nodes: &[&NodeView],
    clock: &Clock,
) -> BTreeMap<String, Vec<String>> {
    let mut changes: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for node in nodes {
        let name = node.name.as_str();
        let Some(&created) = plan.nodes.get(name) else {
            continue;
        };
        if let Some(condition) = network_condition(node, created, clock) {
            let line = format!("set condition NetworkUnavailable={}", condition.status);
            changes.entry(name.to_owned()).or_default().push(line);
        }
    }
    for route in &plan.delete {
        let key = if route.target_node.is_empty() {
            format!("route {}", route.destination_cidr)
        } else {
            route.target_node.clone()
        };
        let line = format!("delete route {} -> {}", route.destination_cidr, route.target_node);
        changes.entry(key).or_default().push(line);
    }
    for planned in &plan.create {
        let route = &planned.route;
        let line = format!("create route {} -> {}", route.destination_cidr, route.target_node);
        changes.entry(route.target_node.clone()).or_default().push(line);
    }
    changes
}
