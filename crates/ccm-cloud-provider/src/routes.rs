use std::future::Future;

use crate::NodeView;

use crate::{Result, Route};

/// Pod CIDR routes (upstream `Routes`).
pub trait Routes: Send + Sync {
    /// The routes this cluster manages (and only those).
    fn list_routes(&self, cluster_name: &str) -> impl Future<Output = Result<Vec<Route>>> + Send;

    /// Creates a route; `route.name` is ignored and `name_hint` (the node's UID) may be used to name it. With
    /// dual-stack nodes the same hint comes once per pod CIDR: the provider must keep the names unique.
    fn create_route(
        &self,
        cluster_name: &str,
        name_hint: &str,
        route: &Route,
    ) -> impl Future<Output = Result<()>> + Send;

    /// Deletes a route as returned by [`Routes::list_routes`].
    fn delete_route(&self, cluster_name: &str, route: &Route) -> impl Future<Output = Result<()>> + Send;

    /// Every Node the route controller knows, given before each pass. Upstream providers read a node informer
    /// to turn the instance a route targets back into a node name; here the controller shares what it already
    /// watches, so a provider needs no Kubernetes client of its own. The default ignores it.
    fn observe_nodes(&self, nodes: &[&NodeView]) {
        let _ = nodes;
    }
}
