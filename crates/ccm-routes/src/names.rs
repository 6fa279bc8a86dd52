use std::sync::Arc;

use ccm_aws_api::InstanceId;

/// What the cluster knows about which Node runs on which instance (from each Node's `spec.providerID`).
///
/// The `Routes` contract passes node *names* to `create_route` and expects node names back from `list_routes`,
/// but a route only names an instance. Upstream answers with its node informer; this crate cannot watch Nodes
/// (domain crates have no Kubernetes client), so the composition passes a `NodeNames` backed by its node cache.
///
/// Both methods answer from memory and must be cheap. `None` means "not known here": [`AwsRoutes`] then falls
/// back to EC2 (an `i-...` node name is an instance ID; another name is looked up as a private DNS name, and an
/// instance found by ID is named by its private DNS name). The fallback is exact only for clusters whose node
/// names are private DNS names, so clusters with resource-based (`i-...`) or custom node names must pass a real
/// `NodeNames`, synced before the route controller's first pass.
///
/// [`AwsRoutes`]: crate::AwsRoutes
pub trait NodeNames: Send + Sync {
    /// The name of the Node whose provider ID names `instance`.
    fn node_name(&self, instance: &InstanceId) -> Option<String>;

    /// The instance named by the provider ID of Node `node_name`.
    fn instance_id(&self, node_name: &str) -> Option<InstanceId>;
}

/// No knowledge: every lookup falls back to EC2 (node names are taken to be private DNS names or instance IDs).
#[derive(Debug, Clone, Copy, Default)]
pub struct NoNodeNames;

// === impl NoNodeNames ===

impl NodeNames for NoNodeNames {
    fn node_name(&self, _instance: &InstanceId) -> Option<String> {
        None
    }

    fn instance_id(&self, _node_name: &str) -> Option<InstanceId> {
        None
    }
}

impl<T: NodeNames + ?Sized> NodeNames for Arc<T> {
    fn node_name(&self, instance: &InstanceId) -> Option<String> {
        (**self).node_name(instance)
    }

    fn instance_id(&self, node_name: &str) -> Option<InstanceId> {
        (**self).instance_id(node_name)
    }
}
