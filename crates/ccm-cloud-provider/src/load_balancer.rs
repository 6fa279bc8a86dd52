use std::future::Future;

use k8s_openapi::api::core::v1::{LoadBalancerStatus, Node, Service};

use crate::Result;

/// External load balancers for Services of type `LoadBalancer` (upstream `LoadBalancer`).
///
/// `cluster_name` is the CCM's `--cluster-name`. The service and nodes are read-only. The node list is the
/// stable node set: nodes that are not being deleted, not excluded by
/// `node.kubernetes.io/exclude-from-external-load-balancers` and not tainted `ToBeDeletedByClusterAutoscaler`;
/// readiness is left to the load balancer's health checks.
///
/// If another controller owns a load balancer, `ensure_load_balancer` and `update_load_balancer` return
/// [`CloudError::ImplementedElsewhere`](crate::CloudError::ImplementedElsewhere) and `get_load_balancer`
/// reports `None`; `ensure_load_balancer_deleted` never returns it.
pub trait LoadBalancer: Send + Sync {
    /// The status of the service's load balancer, or `None` if it does not exist (or is not ours).
    fn get_load_balancer(
        &self,
        cluster_name: &str,
        service: &Service,
    ) -> impl Future<Output = Result<Option<LoadBalancerStatus>>> + Send;

    /// The name the provider gives (or gave) the service's load balancer.
    fn load_balancer_name(&self, cluster_name: &str, service: &Service) -> String;

    /// Creates or updates the load balancer and returns its status (written to `status.loadBalancer`). May
    /// return [`CloudError::RetryAfter`](crate::CloudError::RetryAfter) while it is being provisioned.
    fn ensure_load_balancer(
        &self,
        cluster_name: &str,
        service: &Service,
        nodes: &[&Node],
    ) -> impl Future<Output = Result<LoadBalancerStatus>> + Send;

    /// Updates only the load balancer's back-end hosts to `nodes`.
    fn update_load_balancer(
        &self,
        cluster_name: &str,
        service: &Service,
        nodes: &[&Node],
    ) -> impl Future<Output = Result<()>> + Send;

    /// Deletes the load balancer; `Ok` if it is gone, including when it never existed.
    fn ensure_load_balancer_deleted(
        &self,
        cluster_name: &str,
        service: &Service,
    ) -> impl Future<Output = Result<()>> + Send;
}
