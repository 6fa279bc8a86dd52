//! What the planning controllers tell a dry run (`--dry-run` of the controller manager): instead of changing
//! anything, the service controller hands each Service's load-balancer plan, the route controller each pass's
//! route plan, and a provider's controller what it would change to a [`DryRunSink`].

use std::collections::BTreeMap;

use ccm_cloud_provider::LoadBalancerPlan;

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
