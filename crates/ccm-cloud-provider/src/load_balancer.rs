use std::future::Future;

use k8s_openapi::api::core::v1::{LoadBalancerStatus, Service};

use crate::NodeView;

use crate::{Backends, Result};

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
        nodes: &[&NodeView],
    ) -> impl Future<Output = Result<LoadBalancerStatus>> + Send;

    /// [`LoadBalancer::ensure_load_balancer`], also reporting what the users of the Service should hear about
    /// (a load balancer replaced, a setting that cannot be applied): the service controller publishes each
    /// [`Notice`] as an Event on the Service. The default reports nothing; a provider that overrides this should
    /// make `ensure_load_balancer` call it and drop the notices.
    fn ensure_load_balancer_reporting(
        &self,
        cluster_name: &str,
        service: &Service,
        nodes: &[&NodeView],
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
        nodes: &[&NodeView],
    ) -> impl Future<Output = Result<()>> + Send;

    /// Whether the load balancer of `service` follows its endpoints: targets that are pods (an NLB's IP
    /// targets), or only the nodes that run a ready endpoint. For such a Service the service controller watches
    /// EndpointSlices, calls [`LoadBalancer::ensure_load_balancer_with`] and
    /// [`LoadBalancer::update_load_balancer_with`] with its endpoints, and calls the latter again whenever they
    /// change. Cheap and pure (it is asked on every EndpointSlice event of the Service): decided from the
    /// Service alone. The default follows none.
    fn follows_endpoints(&self, service: &Service) -> bool {
        let _ = service;
        false
    }

    /// [`LoadBalancer::ensure_load_balancer_reporting`] given [`Backends`]: with the Service's endpoints when
    /// [`LoadBalancer::follows_endpoints`] says so. The service controller calls this one; the default hands
    /// the nodes to `ensure_load_balancer_reporting`, so a provider that follows no endpoints needs nothing here.
    fn ensure_load_balancer_with(
        &self,
        cluster_name: &str,
        service: &Service,
        backends: Backends<'_>,
    ) -> impl Future<Output = Result<Ensured>> + Send {
        self.ensure_load_balancer_reporting(cluster_name, service, backends.nodes)
    }

    /// [`LoadBalancer::update_load_balancer`] given [`Backends`]: called when the nodes change and, for a
    /// Service whose endpoints it follows, when they change. The default hands the nodes to
    /// `update_load_balancer`.
    fn update_load_balancer_with(
        &self,
        cluster_name: &str,
        service: &Service,
        backends: Backends<'_>,
    ) -> impl Future<Output = Result<()>> + Send {
        self.update_load_balancer(cluster_name, service, backends.nodes)
    }

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

    /// Deletes the load balancer of `predecessor`, an earlier incarnation of `successor` (the same namespace and
    /// name, another UID: deleted and re-created while its cleanup was pending), never touching what `successor`
    /// wants. The service controller calls it instead of [`LoadBalancer::ensure_load_balancer_deleted`] for such
    /// a predecessor whenever `successor` is in the cluster (whatever its type: the provider judges what it
    /// wants), with the same rules: `Ok` only once all of the predecessor's is gone,
    /// [`CloudError::Waiting`](crate::CloudError::Waiting) while the cloud still holds something. Names derived
    /// from the UID alone never collide; a name both incarnations share (chosen by annotation) does, and deleting
    /// it would take the successor's load balancer. The default deletes the predecessor's load balancer unless
    /// `load_balancer_name` gives both the same name, in which case the successor has it and nothing is deleted.
    fn ensure_predecessor_load_balancer_deleted(
        &self,
        cluster_name: &str,
        predecessor: &Service,
        successor: &Service,
    ) -> impl Future<Output = Result<()>> + Send {
        async move {
            let name = self.load_balancer_name(cluster_name, predecessor);
            if name == self.load_balancer_name(cluster_name, successor) {
                return Ok(());
            }
            self.ensure_load_balancer_deleted(cluster_name, predecessor).await
        }
    }

    /// Drift detection: of `services` (each already ensured with `nodes`), those whose load balancer no longer
    /// looks as the last ensure left it (changed by hand in the cloud), each with what differs. The service
    /// controller calls it every `--load-balancer-resync-period` and re-ensures only those. A provider should read
    /// in bulk (one listing of every load balancer) rather than per Service, and may leave out what bulk reads
    /// cannot show. The default reports no drift.
    fn drifted(
        &self,
        cluster_name: &str,
        services: &[&Service],
        nodes: &[&NodeView],
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
        nodes: &[&NodeView],
    ) -> impl Future<Output = Result<Option<LoadBalancerPlan>>> + Send {
        let _ = (cluster_name, service, nodes);
        async { Ok(None) }
    }

    /// [`LoadBalancer::plan_load_balancer`] given [`Backends`], as [`LoadBalancer::ensure_load_balancer_with`]
    /// is given them: a dry run plans what the ensure would do with the Service's endpoints. The default hands
    /// the nodes to `plan_load_balancer`.
    fn plan_load_balancer_with(
        &self,
        cluster_name: &str,
        service: &Service,
        backends: Backends<'_>,
    ) -> impl Future<Output = Result<Option<LoadBalancerPlan>>> + Send {
        self.plan_load_balancer(cluster_name, service, backends.nodes)
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

#[cfg(test)]
mod tests {
    use std::{
        pin::pin,
        sync::Mutex,
        task::{Context, Poll, Waker},
    };

    use super::*;

    /// Load balancers named by the annotation `name` when there is one, else by UID; deletions recorded by UID.
    #[derive(Default)]
    struct Named(Mutex<Vec<String>>);

    impl LoadBalancer for Named {
        async fn get_load_balancer(&self, _: &str, _: &Service) -> Result<Option<LoadBalancerStatus>> {
            Ok(None)
        }
        fn load_balancer_name(&self, _: &str, service: &Service) -> String {
            let chosen = service.metadata.annotations.as_ref().and_then(|a| a.get("name"));
            chosen
                .cloned()
                .unwrap_or_else(|| format!("a{}", service.metadata.uid.as_deref().unwrap_or_default()))
        }
        async fn ensure_load_balancer(
            &self,
            _: &str,
            _: &Service,
            _: &[&NodeView],
        ) -> Result<LoadBalancerStatus> {
            Ok(LoadBalancerStatus::default())
        }
        async fn update_load_balancer(&self, _: &str, _: &Service, _: &[&NodeView]) -> Result<()> {
            Ok(())
        }
        async fn ensure_load_balancer_deleted(&self, _: &str, service: &Service) -> Result<()> {
            let uid = service.metadata.uid.clone().unwrap_or_default();
            self.0.lock().unwrap().push(uid);
            Ok(())
        }
    }

    fn service(uid: &str, name: Option<&str>) -> Service {
        let mut svc = Service::default();
        svc.metadata.uid = Some(uid.to_owned());
        svc.metadata.annotations = name.map(|n| [("name".to_owned(), n.to_owned())].into());
        svc
    }

    /// The default methods here never wait.
    fn ready<T>(future: impl Future<Output = T>) -> T {
        match pin!(future).poll(&mut Context::from_waker(Waker::noop())) {
            Poll::Ready(out) => out,
            Poll::Pending => panic!("the default waited"),
        }
    }

    #[test]
    fn a_predecessor_is_deleted_unless_its_successor_has_the_same_name() {
        let lbs = Named::default();
        let delete = |old: &Service, new: &Service| {
            ready(lbs.ensure_predecessor_load_balancer_deleted("k", old, new)).unwrap();
        };
        delete(&service("1", None), &service("2", None));
        delete(&service("3", Some("web")), &service("4", None));
        delete(&service("5", Some("web")), &service("6", Some("web")));
        assert_eq!(
            *lbs.0.lock().unwrap(),
            ["1", "3"],
            "the successor's `web` is left alone"
        );
    }
}
