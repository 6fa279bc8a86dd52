//! [`DynProvider`]'s capabilities: each call forwarded to the `Dyn*` trait object of the provider inside, or
//! [`CloudError::NotImplemented`] where it lacks the capability.

use k8s_openapi::api::core::v1::{LoadBalancerStatus, Service};

use crate::NodeView;

use super::DynProvider;
use crate::{
    Backends, CloudError, Drift, Ensured, InstanceMetadata, Instances, InstancesV2, LoadBalancer,
    LoadBalancerPlan, NodeAddress, Result, Route, Routes, Zone, Zones,
};

impl InstancesV2 for DynProvider {
    async fn instance_exists(&self, node: &NodeView) -> Result<bool> {
        self.v2()?.instance_exists(node).await
    }
    async fn instance_shutdown(&self, node: &NodeView) -> Result<bool> {
        self.v2()?.instance_shutdown(node).await
    }
    async fn instance_metadata(&self, node: &NodeView) -> Result<Option<InstanceMetadata>> {
        self.v2()?.instance_metadata(node).await
    }
    async fn instance_metadata_batch(&self, nodes: &[&NodeView]) -> Vec<Result<Option<InstanceMetadata>>> {
        match self.v2() {
            Ok(c) => c.instance_metadata_batch(nodes).await,
            Err(_) => nodes.iter().map(|_| Err(CloudError::NotImplemented)).collect(),
        }
    }
    async fn instance_exists_batch(&self, nodes: &[&NodeView]) -> Vec<Result<bool>> {
        match self.v2() {
            Ok(c) => c.instance_exists_batch(nodes).await,
            Err(_) => nodes.iter().map(|_| Err(CloudError::NotImplemented)).collect(),
        }
    }
    async fn instance_shutdown_batch(&self, nodes: &[&NodeView]) -> Vec<Result<bool>> {
        match self.v2() {
            Ok(c) => c.instance_shutdown_batch(nodes).await,
            Err(_) => nodes.iter().map(|_| Err(CloudError::NotImplemented)).collect(),
        }
    }
}

impl Instances for DynProvider {
    async fn node_addresses(&self, node_name: &str) -> Result<Vec<NodeAddress>> {
        self.v1()?.node_addresses(node_name).await
    }
    async fn node_addresses_by_provider_id(&self, provider_id: &str) -> Result<Vec<NodeAddress>> {
        self.v1()?.node_addresses_by_provider_id(provider_id).await
    }
    async fn instance_id(&self, node_name: &str) -> Result<String> {
        self.v1()?.instance_id(node_name).await
    }
    async fn instance_type(&self, node_name: &str) -> Result<String> {
        self.v1()?.instance_type(node_name).await
    }
    async fn instance_type_by_provider_id(&self, provider_id: &str) -> Result<String> {
        self.v1()?.instance_type_by_provider_id(provider_id).await
    }
    async fn instance_exists_by_provider_id(&self, provider_id: &str) -> Result<bool> {
        self.v1()?.instance_exists_by_provider_id(provider_id).await
    }
    async fn instance_shutdown_by_provider_id(&self, provider_id: &str) -> Result<bool> {
        self.v1()?.instance_shutdown_by_provider_id(provider_id).await
    }
}

impl Zones for DynProvider {
    async fn zone_by_provider_id(&self, provider_id: &str) -> Result<Zone> {
        self.zones_of()?.zone_by_provider_id(provider_id).await
    }
    async fn zone_by_node_name(&self, node_name: &str) -> Result<Zone> {
        self.zones_of()?.zone_by_node_name(node_name).await
    }
}

impl LoadBalancer for DynProvider {
    async fn get_load_balancer(
        &self,
        cluster_name: &str,
        service: &Service,
    ) -> Result<Option<LoadBalancerStatus>> {
        self.lb()?.get_load_balancer(cluster_name, service).await
    }
    fn load_balancer_name(&self, cluster_name: &str, service: &Service) -> String {
        self.lb()
            .map(|lb| lb.load_balancer_name(cluster_name, service))
            .unwrap_or_default()
    }
    async fn ensure_load_balancer(
        &self,
        cluster_name: &str,
        service: &Service,
        nodes: &[&NodeView],
    ) -> Result<LoadBalancerStatus> {
        Ok(
            LoadBalancer::ensure_load_balancer_reporting(self, cluster_name, service, nodes)
                .await?
                .status,
        )
    }
    async fn ensure_load_balancer_reporting(
        &self,
        cluster_name: &str,
        service: &Service,
        nodes: &[&NodeView],
    ) -> Result<Ensured> {
        self.lb()?
            .ensure_load_balancer_reporting(cluster_name, service, nodes)
            .await
    }
    async fn update_load_balancer(
        &self,
        cluster_name: &str,
        service: &Service,
        nodes: &[&NodeView],
    ) -> Result<()> {
        self.lb()?
            .update_load_balancer(cluster_name, service, nodes)
            .await
    }
    fn follows_endpoints(&self, service: &Service) -> bool {
        self.lb().is_ok_and(|lb| lb.follows_endpoints(service))
    }
    async fn ensure_load_balancer_with(
        &self,
        cluster_name: &str,
        service: &Service,
        backends: Backends<'_>,
    ) -> Result<Ensured> {
        self.lb()?
            .ensure_load_balancer_with(cluster_name, service, backends)
            .await
    }
    async fn update_load_balancer_with(
        &self,
        cluster_name: &str,
        service: &Service,
        backends: Backends<'_>,
    ) -> Result<()> {
        self.lb()?
            .update_load_balancer_with(cluster_name, service, backends)
            .await
    }
    async fn ensure_load_balancer_deleted(&self, cluster_name: &str, service: &Service) -> Result<()> {
        self.lb()?
            .ensure_load_balancer_deleted(cluster_name, service)
            .await
    }
    async fn ensure_predecessor_load_balancer_deleted(
        &self,
        cluster_name: &str,
        predecessor: &Service,
        successor: &Service,
    ) -> Result<()> {
        self.lb()?
            .ensure_predecessor_load_balancer_deleted(cluster_name, predecessor, successor)
            .await
    }
    async fn drifted(
        &self,
        cluster_name: &str,
        services: &[&Service],
        nodes: &[&NodeView],
    ) -> Result<Vec<Drift>> {
        self.lb()?.drifted(cluster_name, services, nodes).await
    }
    async fn plan_load_balancer(
        &self,
        cluster_name: &str,
        service: &Service,
        nodes: &[&NodeView],
    ) -> Result<Option<LoadBalancerPlan>> {
        self.lb()?.plan_load_balancer(cluster_name, service, nodes).await
    }
    async fn plan_load_balancer_with(
        &self,
        cluster_name: &str,
        service: &Service,
        backends: Backends<'_>,
    ) -> Result<Option<LoadBalancerPlan>> {
        self.lb()?
            .plan_load_balancer_with(cluster_name, service, backends)
            .await
    }
}

impl Routes for DynProvider {
    async fn list_routes(&self, cluster_name: &str) -> Result<Vec<Route>> {
        self.routes_of()?.list_routes(cluster_name).await
    }
    async fn create_route(&self, cluster_name: &str, name_hint: &str, route: &Route) -> Result<()> {
        self.routes_of()?
            .create_route(cluster_name, name_hint, route)
            .await
    }
    async fn delete_route(&self, cluster_name: &str, route: &Route) -> Result<()> {
        self.routes_of()?.delete_route(cluster_name, route).await
    }
    fn observe_nodes(&self, nodes: &[&NodeView]) {
        if let Ok(routes) = self.routes_of() {
            routes.observe_nodes(nodes);
        }
    }
}
