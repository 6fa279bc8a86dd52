//! The contract as trait objects, for a provider chosen at run time (by `--cloud-provider` name, see
//! [`ProviderRegistry`](crate::ProviderRegistry)).
//!
//! [`CloudProvider`] and its capability traits return `impl Future` and name their capabilities as associated
//! types, so they cannot be trait objects. Each `Dyn*` trait here is the dyn-compatible twin of one of them
//! (boxed futures through `async-trait`), implemented for every implementor of the static trait; and
//! [`DynProvider`] turns a `dyn DynCloudProvider` back into a [`CloudProvider`], so the generic controllers run
//! it unchanged. The price, one boxed future per call, is paid only on this path: a provider given to the
//! controllers as its own type is still called statically.
//!
//! ```
//! use ccm_cloud_provider::{CloudProvider, DynProvider, Unsupported};
//!
//! struct NoCloud;
//! impl CloudProvider for NoCloud {
//!     type InstancesV2 = Unsupported;
//!     type Instances = Unsupported;
//!     type Zones = Unsupported;
//!     type LoadBalancer = Unsupported;
//!     type Routes = Unsupported;
//!     fn provider_name(&self) -> &str {
//!         "none"
//!     }
//! }
//! let provider = DynProvider::new(NoCloud);
//! assert_eq!(provider.provider_name(), "none");
//! assert!(provider.load_balancer().is_none());
//! ```

use std::sync::Arc;

use async_trait::async_trait;
use k8s_openapi::api::core::v1::{LoadBalancerStatus, Service};

use crate::NodeView;

use crate::{
    Backends, CloudError, CloudProvider, Drift, Ensured, InstanceMetadata, Instances, InstancesV2,
    LoadBalancer, LoadBalancerPlan, NodeAddress, Result, Route, Routes, Zone, Zones,
};

/// [`InstancesV2`] as a trait object.
#[async_trait]
pub trait DynInstancesV2: Send + Sync {
    /// [`InstancesV2::instance_exists`].
    async fn instance_exists(&self, node: &NodeView) -> Result<bool>;
    /// [`InstancesV2::instance_shutdown`].
    async fn instance_shutdown(&self, node: &NodeView) -> Result<bool>;
    /// [`InstancesV2::instance_metadata`].
    async fn instance_metadata(&self, node: &NodeView) -> Result<Option<InstanceMetadata>>;
    /// [`InstancesV2::instance_metadata_batch`].
    async fn instance_metadata_batch(&self, nodes: &[&NodeView]) -> Vec<Result<Option<InstanceMetadata>>>;
    /// [`InstancesV2::instance_exists_batch`].
    async fn instance_exists_batch(&self, nodes: &[&NodeView]) -> Vec<Result<bool>>;
    /// [`InstancesV2::instance_shutdown_batch`].
    async fn instance_shutdown_batch(&self, nodes: &[&NodeView]) -> Vec<Result<bool>>;
}

#[async_trait]
impl<T: InstancesV2> DynInstancesV2 for T {
    async fn instance_exists(&self, node: &NodeView) -> Result<bool> {
        InstancesV2::instance_exists(self, node).await
    }
    async fn instance_shutdown(&self, node: &NodeView) -> Result<bool> {
        InstancesV2::instance_shutdown(self, node).await
    }
    async fn instance_metadata(&self, node: &NodeView) -> Result<Option<InstanceMetadata>> {
        InstancesV2::instance_metadata(self, node).await
    }
    async fn instance_metadata_batch(&self, nodes: &[&NodeView]) -> Vec<Result<Option<InstanceMetadata>>> {
        InstancesV2::instance_metadata_batch(self, nodes).await
    }
    async fn instance_exists_batch(&self, nodes: &[&NodeView]) -> Vec<Result<bool>> {
        InstancesV2::instance_exists_batch(self, nodes).await
    }
    async fn instance_shutdown_batch(&self, nodes: &[&NodeView]) -> Vec<Result<bool>> {
        InstancesV2::instance_shutdown_batch(self, nodes).await
    }
}

/// [`Instances`] as a trait object.
#[async_trait]
pub trait DynInstances: Send + Sync {
    /// [`Instances::node_addresses`].
    async fn node_addresses(&self, node_name: &str) -> Result<Vec<NodeAddress>>;
    /// [`Instances::node_addresses_by_provider_id`].
    async fn node_addresses_by_provider_id(&self, provider_id: &str) -> Result<Vec<NodeAddress>>;
    /// [`Instances::instance_id`].
    async fn instance_id(&self, node_name: &str) -> Result<String>;
    /// [`Instances::instance_type`].
    async fn instance_type(&self, node_name: &str) -> Result<String>;
    /// [`Instances::instance_type_by_provider_id`].
    async fn instance_type_by_provider_id(&self, provider_id: &str) -> Result<String>;
    /// [`Instances::instance_exists_by_provider_id`].
    async fn instance_exists_by_provider_id(&self, provider_id: &str) -> Result<bool>;
    /// [`Instances::instance_shutdown_by_provider_id`].
    async fn instance_shutdown_by_provider_id(&self, provider_id: &str) -> Result<bool>;
}

#[async_trait]
impl<T: Instances> DynInstances for T {
    async fn node_addresses(&self, node_name: &str) -> Result<Vec<NodeAddress>> {
        Instances::node_addresses(self, node_name).await
    }
    async fn node_addresses_by_provider_id(&self, provider_id: &str) -> Result<Vec<NodeAddress>> {
        Instances::node_addresses_by_provider_id(self, provider_id).await
    }
    async fn instance_id(&self, node_name: &str) -> Result<String> {
        Instances::instance_id(self, node_name).await
    }
    async fn instance_type(&self, node_name: &str) -> Result<String> {
        Instances::instance_type(self, node_name).await
    }
    async fn instance_type_by_provider_id(&self, provider_id: &str) -> Result<String> {
        Instances::instance_type_by_provider_id(self, provider_id).await
    }
    async fn instance_exists_by_provider_id(&self, provider_id: &str) -> Result<bool> {
        Instances::instance_exists_by_provider_id(self, provider_id).await
    }
    async fn instance_shutdown_by_provider_id(&self, provider_id: &str) -> Result<bool> {
        Instances::instance_shutdown_by_provider_id(self, provider_id).await
    }
}

/// [`Zones`] as a trait object.
#[async_trait]
pub trait DynZones: Send + Sync {
    /// [`Zones::zone_by_provider_id`].
    async fn zone_by_provider_id(&self, provider_id: &str) -> Result<Zone>;
    /// [`Zones::zone_by_node_name`].
    async fn zone_by_node_name(&self, node_name: &str) -> Result<Zone>;
}

#[async_trait]
impl<T: Zones> DynZones for T {
    async fn zone_by_provider_id(&self, provider_id: &str) -> Result<Zone> {
        Zones::zone_by_provider_id(self, provider_id).await
    }
    async fn zone_by_node_name(&self, node_name: &str) -> Result<Zone> {
        Zones::zone_by_node_name(self, node_name).await
    }
}

/// [`LoadBalancer`] as a trait object.
#[async_trait]
pub trait DynLoadBalancer: Send + Sync {
    /// [`LoadBalancer::get_load_balancer`].
    async fn get_load_balancer(
        &self,
        cluster_name: &str,
        service: &Service,
    ) -> Result<Option<LoadBalancerStatus>>;
    /// [`LoadBalancer::load_balancer_name`].
    fn load_balancer_name(&self, cluster_name: &str, service: &Service) -> String;
    /// [`LoadBalancer::ensure_load_balancer_reporting`] (the controllers call only this one of the two ensures).
    async fn ensure_load_balancer_reporting(
        &self,
        cluster_name: &str,
        service: &Service,
        nodes: &[&NodeView],
    ) -> Result<Ensured>;
    /// [`LoadBalancer::update_load_balancer`].
    async fn update_load_balancer(
        &self,
        cluster_name: &str,
        service: &Service,
        nodes: &[&NodeView],
    ) -> Result<()>;
    /// [`LoadBalancer::follows_endpoints`] (the default, for an implementor of its own: none).
    fn follows_endpoints(&self, service: &Service) -> bool {
        let _ = service;
        false
    }
    /// [`LoadBalancer::ensure_load_balancer_with`] (the default: the nodes to `ensure_load_balancer_reporting`).
    async fn ensure_load_balancer_with(
        &self,
        cluster_name: &str,
        service: &Service,
        backends: Backends<'_>,
    ) -> Result<Ensured> {
        self.ensure_load_balancer_reporting(cluster_name, service, backends.nodes)
            .await
    }
    /// [`LoadBalancer::update_load_balancer_with`] (the default: the nodes to `update_load_balancer`).
    async fn update_load_balancer_with(
        &self,
        cluster_name: &str,
        service: &Service,
        backends: Backends<'_>,
    ) -> Result<()> {
        self.update_load_balancer(cluster_name, service, backends.nodes)
            .await
    }
    /// [`LoadBalancer::ensure_load_balancer_deleted`].
    async fn ensure_load_balancer_deleted(&self, cluster_name: &str, service: &Service) -> Result<()>;
    /// [`LoadBalancer::ensure_predecessor_load_balancer_deleted`].
    async fn ensure_predecessor_load_balancer_deleted(
        &self,
        cluster_name: &str,
        predecessor: &Service,
        successor: &Service,
    ) -> Result<()>;
    /// [`LoadBalancer::drifted`].
    async fn drifted(
        &self,
        cluster_name: &str,
        services: &[&Service],
        nodes: &[&NodeView],
    ) -> Result<Vec<Drift>>;
    /// [`LoadBalancer::plan_load_balancer`].
    async fn plan_load_balancer(
        &self,
        cluster_name: &str,
        service: &Service,
        nodes: &[&NodeView],
    ) -> Result<Option<LoadBalancerPlan>>;
    /// [`LoadBalancer::plan_load_balancer_with`] (the default: the nodes to `plan_load_balancer`).
    async fn plan_load_balancer_with(
        &self,
        cluster_name: &str,
        service: &Service,
        backends: Backends<'_>,
    ) -> Result<Option<LoadBalancerPlan>> {
        self.plan_load_balancer(cluster_name, service, backends.nodes)
            .await
    }
}

#[async_trait]
impl<T: LoadBalancer> DynLoadBalancer for T {
    async fn get_load_balancer(
        &self,
        cluster_name: &str,
        service: &Service,
    ) -> Result<Option<LoadBalancerStatus>> {
        LoadBalancer::get_load_balancer(self, cluster_name, service).await
    }
    fn load_balancer_name(&self, cluster_name: &str, service: &Service) -> String {
        LoadBalancer::load_balancer_name(self, cluster_name, service)
    }
    async fn ensure_load_balancer_reporting(
        &self,
        cluster_name: &str,
        service: &Service,
        nodes: &[&NodeView],
    ) -> Result<Ensured> {
        LoadBalancer::ensure_load_balancer_reporting(self, cluster_name, service, nodes).await
    }
    async fn update_load_balancer(
        &self,
        cluster_name: &str,
        service: &Service,
        nodes: &[&NodeView],
    ) -> Result<()> {
        LoadBalancer::update_load_balancer(self, cluster_name, service, nodes).await
    }
    fn follows_endpoints(&self, service: &Service) -> bool {
        LoadBalancer::follows_endpoints(self, service)
    }
    async fn ensure_load_balancer_with(
        &self,
        cluster_name: &str,
        service: &Service,
        backends: Backends<'_>,
    ) -> Result<Ensured> {
        LoadBalancer::ensure_load_balancer_with(self, cluster_name, service, backends).await
    }
    async fn update_load_balancer_with(
        &self,
        cluster_name: &str,
        service: &Service,
        backends: Backends<'_>,
    ) -> Result<()> {
        LoadBalancer::update_load_balancer_with(self, cluster_name, service, backends).await
    }
    async fn ensure_load_balancer_deleted(&self, cluster_name: &str, service: &Service) -> Result<()> {
        LoadBalancer::ensure_load_balancer_deleted(self, cluster_name, service).await
    }
    async fn ensure_predecessor_load_balancer_deleted(
        &self,
        cluster_name: &str,
        predecessor: &Service,
        successor: &Service,
    ) -> Result<()> {
        LoadBalancer::ensure_predecessor_load_balancer_deleted(self, cluster_name, predecessor, successor)
            .await
    }
    async fn drifted(
        &self,
        cluster_name: &str,
        services: &[&Service],
        nodes: &[&NodeView],
    ) -> Result<Vec<Drift>> {
        LoadBalancer::drifted(self, cluster_name, services, nodes).await
    }
    async fn plan_load_balancer(
        &self,
        cluster_name: &str,
        service: &Service,
        nodes: &[&NodeView],
    ) -> Result<Option<LoadBalancerPlan>> {
        LoadBalancer::plan_load_balancer(self, cluster_name, service, nodes).await
    }
    async fn plan_load_balancer_with(
        &self,
        cluster_name: &str,
        service: &Service,
        backends: Backends<'_>,
    ) -> Result<Option<LoadBalancerPlan>> {
        LoadBalancer::plan_load_balancer_with(self, cluster_name, service, backends).await
    }
}

/// [`Routes`] as a trait object.
#[async_trait]
pub trait DynRoutes: Send + Sync {
    /// [`Routes::list_routes`].
    async fn list_routes(&self, cluster_name: &str) -> Result<Vec<Route>>;
    /// [`Routes::create_route`].
    async fn create_route(&self, cluster_name: &str, name_hint: &str, route: &Route) -> Result<()>;
    /// [`Routes::delete_route`].
    async fn delete_route(&self, cluster_name: &str, route: &Route) -> Result<()>;
    /// [`Routes::observe_nodes`].
    fn observe_nodes(&self, nodes: &[&NodeView]);
}

#[async_trait]
impl<T: Routes> DynRoutes for T {
    async fn list_routes(&self, cluster_name: &str) -> Result<Vec<Route>> {
        Routes::list_routes(self, cluster_name).await
    }
    async fn create_route(&self, cluster_name: &str, name_hint: &str, route: &Route) -> Result<()> {
        Routes::create_route(self, cluster_name, name_hint, route).await
    }
    async fn delete_route(&self, cluster_name: &str, route: &Route) -> Result<()> {
        Routes::delete_route(self, cluster_name, route).await
    }
    fn observe_nodes(&self, nodes: &[&NodeView]) {
        Routes::observe_nodes(self, nodes);
    }
}

/// [`CloudProvider`] as a trait object: implemented for every provider.
pub trait DynCloudProvider: Send + Sync + 'static {
    /// [`CloudProvider::provider_name`].
    fn provider_name(&self) -> &str;
    /// [`CloudProvider::has_cluster_id`].
    fn has_cluster_id(&self) -> bool;
    /// [`CloudProvider::instances_v2`].
    fn instances_v2(&self) -> Option<&dyn DynInstancesV2>;
    /// [`CloudProvider::instances`].
    fn instances(&self) -> Option<&dyn DynInstances>;
    /// [`CloudProvider::zones`].
    fn zones(&self) -> Option<&dyn DynZones>;
    /// [`CloudProvider::load_balancer`].
    fn load_balancer(&self) -> Option<&dyn DynLoadBalancer>;
    /// [`CloudProvider::routes`].
    fn routes(&self) -> Option<&dyn DynRoutes>;
}

impl<P: CloudProvider> DynCloudProvider for P {
    fn provider_name(&self) -> &str {
        CloudProvider::provider_name(self)
    }
    fn has_cluster_id(&self) -> bool {
        CloudProvider::has_cluster_id(self)
    }
    fn instances_v2(&self) -> Option<&dyn DynInstancesV2> {
        CloudProvider::instances_v2(self).map(|c| c as &dyn DynInstancesV2)
    }
    fn instances(&self) -> Option<&dyn DynInstances> {
        CloudProvider::instances(self).map(|c| c as &dyn DynInstances)
    }
    fn zones(&self) -> Option<&dyn DynZones> {
        CloudProvider::zones(self).map(|c| c as &dyn DynZones)
    }
    fn load_balancer(&self) -> Option<&dyn DynLoadBalancer> {
        CloudProvider::load_balancer(self).map(|c| c as &dyn DynLoadBalancer)
    }
    fn routes(&self) -> Option<&dyn DynRoutes> {
        CloudProvider::routes(self).map(|c| c as &dyn DynRoutes)
    }
}

/// A provider behind a trait object, itself a [`CloudProvider`] (each of its capabilities is itself, present
/// when the wrapped provider has it), so that anything generic over `P: CloudProvider` runs it.
#[derive(Clone)]
pub struct DynProvider {
    inner: Arc<dyn DynCloudProvider>,
}

impl std::fmt::Debug for DynProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DynProvider")
            .field("provider_name", &self.inner.provider_name())
            .finish()
    }
}

// === impl DynProvider ===

impl DynProvider {
    /// Wraps a provider.
    pub fn new(provider: impl CloudProvider) -> Self {
        Self {
            inner: Arc::new(provider),
        }
    }

    /// Wraps a provider that is already a trait object.
    pub fn from_arc(provider: Arc<dyn DynCloudProvider>) -> Self {
        Self { inner: provider }
    }

    /// The wrapped provider.
    pub fn inner(&self) -> &dyn DynCloudProvider {
        self.inner.as_ref()
    }

    fn v2(&self) -> Result<&dyn DynInstancesV2> {
        self.inner.instances_v2().ok_or(CloudError::NotImplemented)
    }

    fn v1(&self) -> Result<&dyn DynInstances> {
        self.inner.instances().ok_or(CloudError::NotImplemented)
    }

    fn zones_of(&self) -> Result<&dyn DynZones> {
        self.inner.zones().ok_or(CloudError::NotImplemented)
    }

    fn lb(&self) -> Result<&dyn DynLoadBalancer> {
        self.inner.load_balancer().ok_or(CloudError::NotImplemented)
    }

    fn routes_of(&self) -> Result<&dyn DynRoutes> {
        self.inner.routes().ok_or(CloudError::NotImplemented)
    }
}

impl CloudProvider for DynProvider {
    type InstancesV2 = Self;
    type Instances = Self;
    type Zones = Self;
    type LoadBalancer = Self;
    type Routes = Self;

    fn provider_name(&self) -> &str {
        self.inner.provider_name()
    }
    fn has_cluster_id(&self) -> bool {
        self.inner.has_cluster_id()
    }
    fn instances_v2(&self) -> Option<&Self> {
        self.inner.instances_v2().map(|_| self)
    }
    fn instances(&self) -> Option<&Self> {
        self.inner.instances().map(|_| self)
    }
    fn zones(&self) -> Option<&Self> {
        self.inner.zones().map(|_| self)
    }
    fn load_balancer(&self) -> Option<&Self> {
        self.inner.load_balancer().map(|_| self)
    }
    fn routes(&self) -> Option<&Self> {
        self.inner.routes().map(|_| self)
    }
}

// Each capability method below is reached only through the accessor above, which returns `Some` only when the
// wrapped provider has the capability; the `NotImplemented` of `v2()` and the like is the upstream answer
// should anything call it directly anyway.

mod forward;
