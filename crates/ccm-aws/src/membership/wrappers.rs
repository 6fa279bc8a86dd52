//! The load balancers and routes, acting only for Nodes whose instance is the cluster's.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex, PoisonError},
};

use ccm_aws_api::{Ec2, InstanceId};
use ccm_cloud_provider::{CloudError, Drift, Ensured, LoadBalancer, LoadBalancerPlan, Result, Route, Routes};
use ccm_load_balancers::shared::node_instance_id;
use k8s_openapi::api::core::v1::{LoadBalancerStatus, Node, Service};

use super::Membership;

/// Load balancers whose targets (and so the rules on the targets' security groups) are only the Nodes whose
/// instance is the cluster's and no older Node's: the others are left out of every ensure, update and drift check,
/// so an instance registered before is deregistered and its group's rule revoked on the next ensure. A Node left
/// out because an older Node names its instance gets a Warning Event from each ensure (a notice on the Node).
#[derive(Debug)]
pub struct MemberLoadBalancers<B, E> {
    inner: B,
    membership: Arc<Membership<E>>,
}

impl<B, E> MemberLoadBalancers<B, E> {
    /// `inner`, given only member Nodes.
    pub fn new(inner: B, membership: Arc<Membership<E>>) -> Self {
        Self { inner, membership }
    }

    /// The wrapped load balancers.
    pub fn inner(&self) -> &B {
        &self.inner
    }

    /// Changes the wrapped load balancers (builder methods).
    pub(crate) fn map(self, f: impl FnOnce(B) -> B) -> Self {
        Self {
            inner: f(self.inner),
            membership: self.membership,
        }
    }
}

impl<B: LoadBalancer, E: Ec2 + Send + Sync> LoadBalancer for MemberLoadBalancers<B, E> {
    async fn get_load_balancer(
        &self,
        cluster_name: &str,
        service: &Service,
    ) -> Result<Option<LoadBalancerStatus>> {
        self.inner.get_load_balancer(cluster_name, service).await
    }

    fn load_balancer_name(&self, cluster_name: &str, service: &Service) -> String {
        self.inner.load_balancer_name(cluster_name, service)
    }

    async fn ensure_load_balancer(
        &self,
        cluster_name: &str,
        service: &Service,
        nodes: &[&Node],
    ) -> Result<LoadBalancerStatus> {
        let nodes = self.membership.member_nodes(nodes).await?;
        self.inner
            .ensure_load_balancer(cluster_name, service, &nodes)
            .await
    }

    async fn ensure_load_balancer_reporting(
        &self,
        cluster_name: &str,
        service: &Service,
        nodes: &[&Node],
    ) -> Result<Ensured> {
        let (nodes, refused) = self.membership.targets(nodes).await?;
        let mut ensured = self
            .inner
            .ensure_load_balancer_reporting(cluster_name, service, &nodes)
            .await?;
        ensured.notices.extend(refused);
        Ok(ensured)
    }

    async fn update_load_balancer(
        &self,
        cluster_name: &str,
        service: &Service,
        nodes: &[&Node],
    ) -> Result<()> {
        let nodes = self.membership.member_nodes(nodes).await?;
        self.inner
            .update_load_balancer(cluster_name, service, &nodes)
            .await
    }

    async fn ensure_load_balancer_deleted(&self, cluster_name: &str, service: &Service) -> Result<()> {
        self.inner
            .ensure_load_balancer_deleted(cluster_name, service)
            .await
    }

    async fn ensure_predecessor_load_balancer_deleted(
        &self,
        cluster_name: &str,
        predecessor: &Service,
        successor: &Service,
    ) -> Result<()> {
        self.inner
            .ensure_predecessor_load_balancer_deleted(cluster_name, predecessor, successor)
            .await
    }

    async fn drifted(
        &self,
        cluster_name: &str,
        services: &[&Service],
        nodes: &[&Node],
    ) -> Result<Vec<Drift>> {
        let nodes = self.membership.member_nodes(nodes).await?;
        self.inner.drifted(cluster_name, services, &nodes).await
    }

    async fn plan_load_balancer(
        &self,
        cluster_name: &str,
        service: &Service,
        nodes: &[&Node],
    ) -> Result<Option<LoadBalancerPlan>> {
        let nodes = self.membership.member_nodes(nodes).await?;
        self.inner.plan_load_balancer(cluster_name, service, &nodes).await
    }
}

/// Routes that never point at (nor disable the source/destination check of) an instance outside the cluster, nor
/// at an instance for a Node other than its own (one an older Node names). Routes to other targets are only
/// listed and deleted by the wrapped routes, which manage only the cluster's route tables.
#[derive(Debug)]
pub struct MemberRoutes<R, E> {
    inner: R,
    membership: Arc<Membership<E>>,
    /// Node name -> instance, from the Nodes the route controller shares.
    instances: Mutex<HashMap<String, InstanceId>>,
}

impl<R, E> MemberRoutes<R, E> {
    /// `inner`, creating routes to member instances only.
    pub fn new(inner: R, membership: Arc<Membership<E>>) -> Self {
        Self {
            inner,
            membership,
            instances: Mutex::new(HashMap::new()),
        }
    }

    /// The wrapped routes.
    pub fn inner(&self) -> &R {
        &self.inner
    }

    /// The instance of node `name`: by the Node's provider ID, else an `i-...` node name. `None` leaves it to
    /// the wrapped routes, which look private DNS names up among the cluster's instances only.
    fn instance_of(&self, name: &str) -> Option<InstanceId> {
        let known = self
            .instances
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(name)
            .cloned();
        known.or_else(|| {
            name.starts_with("i-")
                .then(|| InstanceId::new(name.split('.').next().unwrap_or(name)))
        })
    }
}

impl<R: Routes, E: Ec2 + Send + Sync> Routes for MemberRoutes<R, E> {
    async fn list_routes(&self, cluster_name: &str) -> Result<Vec<Route>> {
        self.inner.list_routes(cluster_name).await
    }

    async fn create_route(&self, cluster_name: &str, name_hint: &str, route: &Route) -> Result<()> {
        if let Some(elder) = self.membership.elder(&route.target_node) {
            return Err(CloudError::other(format!(
                "not routing {} to node {}: {}",
                route.destination_cidr,
                route.target_node,
                elder.reason()
            )));
        }
        if let Some(id) = self.instance_of(&route.target_node) {
            let members = self
                .membership
                .members(std::slice::from_ref(&id))
                .await
                .map_err(|e| {
                    CloudError::with_source(
                        format!("failed to read whether instance {id} carries the cluster tag"),
                        e,
                    )
                })?;
            if !members.contains(&id) {
                return Err(CloudError::other(format!(
                    "not routing {} to node {}: its instance {id} does not carry the cluster tag {} (owned or \
                     shared); tag the instance if the Node is the cluster's",
                    route.destination_cidr,
                    route.target_node,
                    self.membership.cluster().key()
                )));
            }
        }
        self.inner.create_route(cluster_name, name_hint, route).await
    }

    async fn delete_route(&self, cluster_name: &str, route: &Route) -> Result<()> {
        self.inner.delete_route(cluster_name, route).await
    }

    fn observe_nodes(&self, nodes: &[&Node]) {
        self.membership.observe(nodes);
        let map: HashMap<String, InstanceId> = nodes
            .iter()
            .filter_map(|n| Some((n.metadata.name.clone()?, node_instance_id(n)?)))
            .collect();
        *self.instances.lock().unwrap_or_else(PoisonError::into_inner) = map;
        self.inner.observe_nodes(nodes);
    }
}
