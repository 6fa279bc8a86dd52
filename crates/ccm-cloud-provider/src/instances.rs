use std::future::Future;

use crate::{InstanceMetadata, NodeAddress, NodeView, Result, Zone};

/// Instances for external providers (upstream `InstancesV2`): each call gets the Node, so the provider can
/// find the instance by `spec.providerID` first and by name or labels otherwise. The generic controllers hand
/// views of their cached Nodes ([`NodeView`]: what controllers read, not the kubelet's system info or other
/// annotations).
///
/// The `*_batch` methods serve many nodes at once: the controllers call them with every node that is pending
/// at that moment, so a provider that can look many instances up in one API call should override them. The
/// defaults loop over the single-node methods. Results are in the order of `nodes`, one per node.
pub trait InstancesV2: Send + Sync {
    /// Whether the node's instance exists. Must be `true` for stopped instances: `Ok(false)` makes the
    /// node-lifecycle controller delete a NotReady Node.
    fn instance_exists(&self, node: &NodeView) -> impl Future<Output = Result<bool>> + Send;

    /// Whether the node's instance is shut down (stopped); such NotReady nodes get the shutdown taint.
    fn instance_shutdown(&self, node: &NodeView) -> impl Future<Output = Result<bool>> + Send;

    /// The metadata to initialize the node with. `Ok(None)` means "nothing known yet": the node stays
    /// uninitialized and is looked at again on its next change.
    fn instance_metadata(
        &self,
        node: &NodeView,
    ) -> impl Future<Output = Result<Option<InstanceMetadata>>> + Send;

    /// [`InstancesV2::instance_metadata`] for many nodes.
    fn instance_metadata_batch(
        &self,
        nodes: &[&NodeView],
    ) -> impl Future<Output = Vec<Result<Option<InstanceMetadata>>>> + Send {
        async move {
            let mut out = Vec::with_capacity(nodes.len());
            for node in nodes {
                out.push(self.instance_metadata(node).await);
            }
            out
        }
    }

    /// [`InstancesV2::instance_exists`] for many nodes.
    fn instance_exists_batch(&self, nodes: &[&NodeView]) -> impl Future<Output = Vec<Result<bool>>> + Send {
        async move {
            let mut out = Vec::with_capacity(nodes.len());
            for node in nodes {
                out.push(self.instance_exists(node).await);
            }
            out
        }
    }

    /// [`InstancesV2::instance_shutdown`] for many nodes.
    fn instance_shutdown_batch(&self, nodes: &[&NodeView]) -> impl Future<Output = Vec<Result<bool>>> + Send {
        async move {
            let mut out = Vec::with_capacity(nodes.len());
            for node in nodes {
                out.push(self.instance_shutdown(node).await);
            }
            out
        }
    }
}

/// The legacy per-name instance capability (upstream `Instances`). Prefer [`InstancesV2`]; the controllers use
/// this one only when a provider has no `InstancesV2`.
pub trait Instances: Send + Sync {
    /// The addresses of the instance behind a node name.
    fn node_addresses(&self, node_name: &str) -> impl Future<Output = Result<Vec<NodeAddress>>> + Send;

    /// The addresses of the instance with this provider ID.
    fn node_addresses_by_provider_id(
        &self,
        provider_id: &str,
    ) -> impl Future<Output = Result<Vec<NodeAddress>>> + Send;

    /// The provider's instance ID for a node name (without the `<name>://` prefix).
    /// [`CloudError::InstanceNotFound`](crate::CloudError::InstanceNotFound) if there is no such instance
    /// (never for a stopped one); [`CloudError::NotImplemented`](crate::CloudError::NotImplemented) if the
    /// provider cannot map names to instances.
    fn instance_id(&self, node_name: &str) -> impl Future<Output = Result<String>> + Send;

    /// The instance type of the instance behind a node name.
    fn instance_type(&self, node_name: &str) -> impl Future<Output = Result<String>> + Send;

    /// The instance type of the instance with this provider ID.
    fn instance_type_by_provider_id(&self, provider_id: &str) -> impl Future<Output = Result<String>> + Send;

    /// Whether the instance exists; `true` for stopped instances.
    fn instance_exists_by_provider_id(&self, provider_id: &str) -> impl Future<Output = Result<bool>> + Send;

    /// Whether the instance is shut down.
    fn instance_shutdown_by_provider_id(
        &self,
        provider_id: &str,
    ) -> impl Future<Output = Result<bool>> + Send;
}

/// The deprecated zone capability (upstream `Zones`), used only together with the legacy [`Instances`].
/// Upstream's `GetZone` (the zone of the machine the CCM runs on) is left out: no controller needs it.
pub trait Zones: Send + Sync {
    /// The zone of the instance with this provider ID.
    fn zone_by_provider_id(&self, provider_id: &str) -> impl Future<Output = Result<Zone>> + Send;

    /// The zone of the instance behind a node name.
    fn zone_by_node_name(&self, node_name: &str) -> impl Future<Output = Result<Zone>> + Send;
}
