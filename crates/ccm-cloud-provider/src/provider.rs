use k8s_openapi::api::core::v1::{LoadBalancerStatus, Service};

use crate::NodeView;

use crate::{
    InstanceMetadata, Instances, InstancesV2, LoadBalancer, NodeAddress, Result, Route, Routes, Zone, Zones,
};

/// A cloud provider: the capabilities the generic controllers use (upstream `cloudprovider.Interface`).
///
/// Each capability is an associated type with an accessor; `None` means "not supported" (the controller that
/// needs it is not started). Unsupported capabilities use [`Unsupported`] as their type.
///
/// When [`CloudProvider::instances_v2`] is `Some`, the controllers use it and never call
/// [`CloudProvider::instances`] or [`CloudProvider::zones`].
pub trait CloudProvider: Send + Sync + 'static {
    /// The instance capability for external providers (preferred).
    type InstancesV2: InstancesV2;
    /// The legacy per-name instance capability.
    type Instances: Instances;
    /// The deprecated zone capability (used only with the legacy [`Instances`]).
    type Zones: Zones;
    /// External load balancers for Services of type `LoadBalancer`.
    type LoadBalancer: LoadBalancer;
    /// Pod CIDR routes.
    type Routes: Routes;

    /// The provider's name, the scheme of its provider IDs (`<name>://...`).
    fn provider_name(&self) -> &str;

    /// Whether the provider knows its cluster ID (upstream `HasClusterID`); a CCM refuses to start without one
    /// unless told to allow an untagged cloud.
    fn has_cluster_id(&self) -> bool {
        true
    }

    /// The [`InstancesV2`] capability, if supported.
    fn instances_v2(&self) -> Option<&Self::InstancesV2> {
        None
    }

    /// The legacy [`Instances`] capability, if supported.
    fn instances(&self) -> Option<&Self::Instances> {
        None
    }

    /// The deprecated [`Zones`] capability, if supported.
    fn zones(&self) -> Option<&Self::Zones> {
        None
    }

    /// The [`LoadBalancer`] capability, if supported.
    fn load_balancer(&self) -> Option<&Self::LoadBalancer> {
        None
    }

    /// The [`Routes`] capability, if supported.
    fn routes(&self) -> Option<&Self::Routes> {
        None
    }
}

/// The type of a capability a provider does not have. It has no values, so its methods can never run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unsupported {}

// === impl Unsupported ===

impl InstancesV2 for Unsupported {
    async fn instance_exists(&self, _: &NodeView) -> Result<bool> {
        match *self {}
    }
    async fn instance_shutdown(&self, _: &NodeView) -> Result<bool> {
        match *self {}
    }
    async fn instance_metadata(&self, _: &NodeView) -> Result<Option<InstanceMetadata>> {
        match *self {}
    }
}

impl Instances for Unsupported {
    async fn node_addresses(&self, _: &str) -> Result<Vec<NodeAddress>> {
        match *self {}
    }
    async fn node_addresses_by_provider_id(&self, _: &str) -> Result<Vec<NodeAddress>> {
        match *self {}
    }
    async fn instance_id(&self, _: &str) -> Result<String> {
        match *self {}
    }
    async fn instance_type(&self, _: &str) -> Result<String> {
        match *self {}
    }
    async fn instance_type_by_provider_id(&self, _: &str) -> Result<String> {
        match *self {}
    }
    async fn instance_exists_by_provider_id(&self, _: &str) -> Result<bool> {
        match *self {}
    }
    async fn instance_shutdown_by_provider_id(&self, _: &str) -> Result<bool> {
        match *self {}
    }
}

impl Zones for Unsupported {
    async fn zone_by_provider_id(&self, _: &str) -> Result<Zone> {
        match *self {}
    }
    async fn zone_by_node_name(&self, _: &str) -> Result<Zone> {
        match *self {}
    }
}

impl LoadBalancer for Unsupported {
    async fn get_load_balancer(&self, _: &str, _: &Service) -> Result<Option<LoadBalancerStatus>> {
        match *self {}
    }
    fn load_balancer_name(&self, _: &str, _: &Service) -> String {
        match *self {}
    }
    async fn ensure_load_balancer(
        &self,
        _: &str,
        _: &Service,
        _: &[&NodeView],
    ) -> Result<LoadBalancerStatus> {
        match *self {}
    }
    async fn update_load_balancer(&self, _: &str, _: &Service, _: &[&NodeView]) -> Result<()> {
        match *self {}
    }
    async fn ensure_load_balancer_deleted(&self, _: &str, _: &Service) -> Result<()> {
        match *self {}
    }
}

impl Routes for Unsupported {
    async fn list_routes(&self, _: &str) -> Result<Vec<Route>> {
        match *self {}
    }
    async fn create_route(&self, _: &str, _: &str, _: &Route) -> Result<()> {
        match *self {}
    }
    async fn delete_route(&self, _: &str, _: &Route) -> Result<()> {
        match *self {}
    }
}
