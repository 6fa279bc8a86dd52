//! [`HostUpdates`]: the provider's load balancers, with host updates skipped where a Service's targets did not
//! change, and the Go controller's host updates on request.
//!
//! The service controller sends every load balancer a host update on any change of the node set, but a load
//! balancer targets only the nodes with its Service's `aws-load-balancer-target-node-labels`: at 5,000 Nodes in
//! pools, one Node joining would cost every load balancer of the cluster its reads. So the targets (instance
//! IDs) of each Service's last successful ensure or update are remembered, and a host update that leaves them
//! as they were makes no AWS call. Whatever drifts meanwhile is the drift check's to find.
//!
//! The Go provider answers a node change with a full `EnsureLoadBalancer` of every NLB (and several reads per
//! Classic ELB); this workspace updates only the members that changed. The scale harness runs one binary in both
//! ways to measure the ratio (docs/performance.md), so the Go pattern is a switch here rather than a second
//! implementation: [`HostUpdates::full_ensure`] makes every host update a full ensure, never skipped.

use std::{
    collections::HashMap,
    sync::{Mutex, PoisonError},
};

use ccm_aws_api::InstanceId;
use ccm_cloud_provider::{Drift, Ensured, LoadBalancer, Result};
use ccm_load_balancers::{parse_service, shared::target_instances};
use k8s_openapi::api::core::v1::{LoadBalancerStatus, Node, Service};

/// The load balancers `B`, whose host updates are either `B`'s own (skipped when the targets did not change)
/// or full ensures.
#[derive(Debug)]
pub struct HostUpdates<B> {
    inner: B,
    full_ensure: bool,
    /// Per Service (UID), the targets of its last successful ensure or host update.
    applied: Mutex<HashMap<String, Vec<InstanceId>>>,
}

impl<B> HostUpdates<B> {
    /// `inner`'s own host updates.
    pub fn new(inner: B) -> Self {
        Self {
            inner,
            full_ensure: false,
            applied: Mutex::new(HashMap::new()),
        }
    }

    /// Every host update a full ensure (the Go controller's call pattern) when `on`.
    #[must_use]
    pub fn full_ensure(mut self, on: bool) -> Self {
        self.full_ensure = on;
        self
    }

    /// The wrapped load balancers.
    pub fn inner(&self) -> &B {
        &self.inner
    }

    /// The Service's key and targets among `nodes`; `None` when its annotations do not parse (the wrapped
    /// provider reports that).
    fn targets(service: &Service, nodes: &[&Node]) -> Option<(String, Vec<InstanceId>)> {
        let key = service.metadata.uid.clone()?;
        let spec = parse_service(service).ok()?;
        Some((key, target_instances(nodes, &spec.target_node_labels)))
    }

    /// Remembers (`Some`) or forgets (`None`) what a call to the wrapped provider left on the load balancer.
    fn record(&self, service: &Service, targets: Option<(String, Vec<InstanceId>)>) {
        let mut applied = self.applied.lock().unwrap_or_else(PoisonError::into_inner);
        match targets {
            Some((key, targets)) => {
                applied.insert(key, targets);
            }
            None => {
                if let Some(uid) = &service.metadata.uid {
                    applied.remove(uid);
                }
            }
        }
    }

    /// After an ensure or update of `service` to `nodes`: remember its targets on success, forget them on failure.
    fn settled<T>(&self, service: &Service, nodes: &[&Node], result: &Result<T>) {
        let targets = result.as_ref().ok().and_then(|_| Self::targets(service, nodes));
        self.record(service, targets);
    }
}

impl<B: LoadBalancer> LoadBalancer for HostUpdates<B> {
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
        let result = self
            .inner
            .ensure_load_balancer(cluster_name, service, nodes)
            .await;
        self.settled(service, nodes, &result);
        result
    }

    async fn ensure_load_balancer_reporting(
        &self,
        cluster_name: &str,
        service: &Service,
        nodes: &[&Node],
    ) -> Result<Ensured> {
        let result = self
            .inner
            .ensure_load_balancer_reporting(cluster_name, service, nodes)
            .await;
        self.settled(service, nodes, &result);
        result
    }

    async fn update_load_balancer(
        &self,
        cluster_name: &str,
        service: &Service,
        nodes: &[&Node],
    ) -> Result<()> {
        if self.full_ensure {
            return self
                .inner
                .ensure_load_balancer(cluster_name, service, nodes)
                .await
                .map(drop);
        }
        if let Some((key, targets)) = Self::targets(service, nodes) {
            let applied = self.applied.lock().unwrap_or_else(PoisonError::into_inner);
            if applied.get(&key) == Some(&targets) {
                tracing::debug!(
                    namespace = service.metadata.namespace.as_deref(),
                    name = service.metadata.name.as_deref(),
                    targets = targets.len(),
                    "host update leaves the load balancer's targets as they are; nothing to do"
                );
                return Ok(());
            }
        }
        let result = self
            .inner
            .update_load_balancer(cluster_name, service, nodes)
            .await;
        self.settled(service, nodes, &result);
        result
    }

    async fn ensure_load_balancer_deleted(&self, cluster_name: &str, service: &Service) -> Result<()> {
        self.record(service, None);
        self.inner
            .ensure_load_balancer_deleted(cluster_name, service)
            .await
    }

    async fn drifted(
        &self,
        cluster_name: &str,
        services: &[&Service],
        nodes: &[&Node],
    ) -> Result<Vec<Drift>> {
        self.inner.drifted(cluster_name, services, nodes).await
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::sync::Mutex;

    use ccm_testing::fixtures::{NodeBuilder, ServiceBuilder};

    use super::*;

    /// Records which method was called.
    #[derive(Default)]
    struct Calls(Mutex<Vec<&'static str>>);

    impl Calls {
        fn push(&self, name: &'static str) {
            self.0.lock().unwrap().push(name);
        }
    }

    impl LoadBalancer for Calls {
        async fn get_load_balancer(&self, _: &str, _: &Service) -> Result<Option<LoadBalancerStatus>> {
            self.push("get");
            Ok(None)
        }

        fn load_balancer_name(&self, _: &str, _: &Service) -> String {
            "name".to_owned()
        }

        async fn ensure_load_balancer(
            &self,
            _: &str,
            _: &Service,
            _: &[&Node],
        ) -> Result<LoadBalancerStatus> {
            self.push("ensure");
            Ok(LoadBalancerStatus::default())
        }

        async fn update_load_balancer(&self, _: &str, _: &Service, _: &[&Node]) -> Result<()> {
            self.push("update");
            Ok(())
        }

        async fn ensure_load_balancer_deleted(&self, _: &str, _: &Service) -> Result<()> {
            self.push("delete");
            Ok(())
        }
    }

    fn node(name: &str, pool: &str, instance: &str) -> Node {
        NodeBuilder::new(name)
            .label("pool", pool)
            .provider_id(&format!("aws:///us-east-1a/{instance}"))
            .build()
    }

    fn service(uid: &str, pool: &str) -> Service {
        ServiceBuilder::new("default", &format!("svc-{uid}"))
            .uid(uid)
            .annotation(
                "service.beta.kubernetes.io/aws-load-balancer-target-node-labels",
                &format!("pool={pool}"),
            )
            .port(80, "TCP", Some(30080))
            .build()
    }

    fn calls(lbs: &HostUpdates<Calls>) -> Vec<&'static str> {
        std::mem::take(&mut *lbs.inner().0.lock().unwrap())
    }

    #[tokio::test]
    async fn a_node_outside_a_services_targets_costs_that_load_balancer_nothing() {
        let lbs = HostUpdates::new(Calls::default());
        let (a, b) = (service("a", "0"), service("b", "1"));
        let n1 = node("n1", "0", "i-00000000000000001");
        let n2 = node("n2", "1", "i-00000000000000002");
        for svc in [&a, &b] {
            lbs.ensure_load_balancer("kubernetes", svc, &[&n1, &n2])
                .await
                .unwrap();
        }
        assert_eq!(calls(&lbs), ["ensure", "ensure"]);
        // A node of pool 0 joins: only a's targets change.
        let n3 = node("n3", "0", "i-00000000000000003");
        for svc in [&a, &b] {
            lbs.update_load_balancer("kubernetes", svc, &[&n1, &n2, &n3])
                .await
                .unwrap();
        }
        assert_eq!(calls(&lbs), ["update"]);
        // The same host set again: nothing to do for either.
        for svc in [&a, &b] {
            lbs.update_load_balancer("kubernetes", svc, &[&n1, &n2, &n3])
                .await
                .unwrap();
        }
        assert_eq!(calls(&lbs), Vec::<&str>::new());
        // It leaves: a again, b still not.
        for svc in [&a, &b] {
            lbs.update_load_balancer("kubernetes", svc, &[&n1, &n2])
                .await
                .unwrap();
        }
        assert_eq!(calls(&lbs), ["update"]);
    }

    #[tokio::test]
    async fn unknown_or_deleted_services_are_always_updated() {
        let lbs = HostUpdates::new(Calls::default());
        let a = service("a", "0");
        let n1 = node("n1", "0", "i-00000000000000001");
        // Never ensured by this process (a restart): updated.
        lbs.update_load_balancer("kubernetes", &a, &[&n1]).await.unwrap();
        lbs.update_load_balancer("kubernetes", &a, &[&n1]).await.unwrap();
        assert_eq!(calls(&lbs), ["update"]);
        lbs.ensure_load_balancer_deleted("kubernetes", &a).await.unwrap();
        lbs.update_load_balancer("kubernetes", &a, &[&n1]).await.unwrap();
        assert_eq!(calls(&lbs), ["delete", "update"]);
    }

    #[tokio::test]
    async fn full_ensure_is_never_skipped() {
        let lbs = HostUpdates::new(Calls::default()).full_ensure(true);
        let a = service("a", "0");
        let n1 = node("n1", "0", "i-00000000000000001");
        lbs.ensure_load_balancer("kubernetes", &a, &[&n1]).await.unwrap();
        lbs.update_load_balancer("kubernetes", &a, &[&n1]).await.unwrap();
        assert_eq!(calls(&lbs), ["ensure", "ensure"]);
    }

    async fn host_update(full: bool) -> Vec<&'static str> {
        let lbs = HostUpdates::new(Calls::default()).full_ensure(full);
        lbs.update_load_balancer("kubernetes", &Service::default(), &[])
            .await
            .unwrap();
        lbs.inner().0.lock().unwrap().clone()
    }

    #[tokio::test]
    async fn a_host_update_is_an_update_unless_full_ensure_is_on() {
        assert_eq!(host_update(false).await, ["update"]);
        assert_eq!(host_update(true).await, ["ensure"]);
    }
}
