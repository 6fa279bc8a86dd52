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

    /// [`LoadBalancer::ensure_load_balancer`], also reporting what the users of the Service should hear about
    /// (a load balancer replaced, a setting that cannot be applied): the service controller publishes each
    /// [`Notice`] as an Event on the Service. The default reports nothing; a provider that overrides this should
    /// make `ensure_load_balancer` call it and drop the notices.
    fn ensure_load_balancer_reporting(
        &self,
        cluster_name: &str,
        service: &Service,
        nodes: &[&Node],
    ) -> impl Future<Output = Result<Ensured>> + Send {
        async move {
            Ok(Ensured {
                status: self.ensure_load_balancer(cluster_name, service, nodes).await?,
                notices: Vec::new(),
            })
        }
    }

    /// Updates only the load balancer's back-end hosts to `nodes`.
    fn update_load_balancer(
        &self,
        cluster_name: &str,
        service: &Service,
        nodes: &[&Node],
    ) -> impl Future<Output = Result<()>> + Send;

    /// Deletes the load balancer and everything the provider made for it (security groups, target groups, rules
    /// on the nodes' groups); `Ok` only once all of it is gone, including when none of it ever existed. Called
    /// whether or not [`LoadBalancer::get_load_balancer`] still finds the load balancer, so it must find the
    /// leftovers by deterministic names and ownership tags. While the cloud still holds something (a deleted
    /// load balancer's interfaces keeping its security group in use), return
    /// [`CloudError::Waiting`](crate::CloudError::Waiting): the service controller keeps the cleanup finalizer
    /// and calls again.
    fn ensure_load_balancer_deleted(
        &self,
        cluster_name: &str,
        service: &Service,
    ) -> impl Future<Output = Result<()>> + Send;

    /// Drift detection: of `services` (each already ensured with `nodes`), those whose load balancer no longer
    /// looks as the last ensure left it (changed by hand in the cloud), each with what differs. The service
    /// controller calls it every `--load-balancer-resync-period` and re-ensures only those. A provider should read
    /// in bulk (one listing of every load balancer) rather than per Service, and may leave out what bulk reads
    /// cannot show. The default reports no drift.
    fn drifted(
        &self,
        cluster_name: &str,
        services: &[&Service],
        nodes: &[&Node],
    ) -> impl Future<Output = Result<Vec<Drift>>> + Send {
        let _ = (cluster_name, services, nodes);
        async { Ok(Vec::new()) }
    }

    /// What [`LoadBalancer::ensure_load_balancer`] would do for `service`, changing nothing (a controller's dry
    /// run). `None` when the provider cannot tell, the default.
    fn plan_load_balancer(
        &self,
        cluster_name: &str,
        service: &Service,
        nodes: &[&Node],
    ) -> impl Future<Output = Result<Option<LoadBalancerPlan>>> + Send {
        let _ = (cluster_name, service, nodes);
        async { Ok(None) }
    }
}

/// What an ensure would do (see [`LoadBalancer::plan_load_balancer`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct LoadBalancerPlan {
    /// The changes in order, one line each, as the provider prints them (empty: nothing to do).
    pub changes: Vec<String>,
    /// Whether the plan replaces the serving load balancer (its address changes).
    pub replaces: bool,
}

impl LoadBalancerPlan {
    /// A plan of `changes`, replacing the load balancer when `replaces`.
    pub fn new(changes: Vec<String>, replaces: bool) -> Self {
        Self { changes, replaces }
    }
}

/// A load balancer that differs from what the last ensure made (see [`LoadBalancer::drifted`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Drift {
    /// The Service, `namespace/name`.
    pub service: String,
    /// What differs, for people (`listener 443 missing`, `instances i-1 not registered`).
    pub what: Vec<String>,
}

// === impl Drift ===

impl Drift {
    /// The drift of `service` (`namespace/name`).
    pub fn new(service: impl Into<String>, what: Vec<String>) -> Self {
        Self {
            service: service.into(),
            what,
        }
    }
}

/// What [`LoadBalancer::ensure_load_balancer_reporting`] returns.
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct Ensured {
    /// The status (written to `status.loadBalancer`).
    pub status: LoadBalancerStatus,
    /// What to tell the Service's users, in order.
    pub notices: Vec<Notice>,
}

/// Something a provider did or could not do that the Service's users should know: an Event on the Service.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notice {
    /// A `Warning` Event (else `Normal`).
    pub warning: bool,
    /// The Event reason, UpperCamelCase (`RecreatingLoadBalancer`).
    pub reason: String,
    /// The Event message.
    pub message: String,
    /// The Node the Event is about (`None`: the Service), e.g. a target the load balancer had to skip.
    pub node: Option<String>,
}

// === impl Ensured ===

impl Ensured {
    /// A status with notices.
    pub fn new(status: LoadBalancerStatus, notices: Vec<Notice>) -> Self {
        Self { status, notices }
    }
}

// === impl Notice ===

impl Notice {
    /// A `Normal` notice.
    pub fn normal(reason: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            warning: false,
            reason: reason.into(),
            message: message.into(),
            node: None,
        }
    }

    /// A `Warning` notice.
    pub fn warning(reason: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            warning: true,
            reason: reason.into(),
            message: message.into(),
            node: None,
        }
    }

    /// A `Warning` notice about the Node named `node` (an Event on that Node).
    pub fn warning_on_node(
        node: impl Into<String>,
        reason: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        Self {
            node: Some(node.into()),
            ..Self::warning(reason, message)
        }
    }
}
