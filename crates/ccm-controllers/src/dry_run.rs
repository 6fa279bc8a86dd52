//! What the planning controllers tell a dry run (`--dry-run` of the controller manager): instead of changing
//! anything, the service controller hands each Service's load-balancer plan, the route controller each pass's
//! route plan, and a provider's controller what it would change to a [`DryRunSink`].

use std::collections::BTreeMap;

use ccm_cloud_provider::LoadBalancerPlan;
use k8s_openapi::api::core::v1::Node;

/// Where a dry run's plans go (see `ServiceConfig::plans` and `RouteConfig::plans`).
pub trait DryRunSink: Send + Sync + std::fmt::Debug {
    /// The load-balancer plan of the Service `key` (`namespace/name`); `None`: nothing to do, or the provider
    /// cannot tell.
    fn load_balancer(&self, key: &str, plan: Option<LoadBalancerPlan>);

    /// One route pass's changes, by Node (a route whose Node is gone under `route <destination>`): replaces
    /// those of the previous pass; empty when the routes are as they should be.
    fn routes(&self, changes: BTreeMap<String, Vec<String>>);

    /// The changes another controller (a provider's, such as AWS's `tagging`) would make to `object`;
    /// replaces those reported before for it, and an empty list means nothing is pending for it any more.
    fn changes(&self, controller: &str, object: &str, changes: Vec<String>);
}

/// A dry run's view of `plan`: the routes it would delete and create, and the `NetworkUnavailable` conditions
/// it would write (as if every route were created), by Node.
pub(crate) fn route_changes(
    plan: &crate::route::RoutePlan,
    nodes: &[&Node],
    clock: &crate::Clock,
) -> BTreeMap<String, Vec<String>> {
    let mut changes: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for node in nodes {
        let name = node.metadata.name.as_deref().unwrap_or_default();
        let Some(&created) = plan.nodes.get(name) else {
            continue;
        };
        if let Some(condition) = crate::route::network_condition(node, created, clock) {
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
