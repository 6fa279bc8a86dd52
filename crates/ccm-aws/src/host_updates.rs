//! [`HostUpdates`]: the provider's load balancers, with the Go controller's host updates on request.
//!
//! The Go provider answers a node change with a full `EnsureLoadBalancer` of every NLB (and several reads per
//! Classic ELB); this workspace updates only the members that changed. The scale harness runs one binary in both
//! ways to measure the ratio (docs/performance.md), so the Go pattern is a switch here rather than a second
//! implementation: [`HostUpdates::full_ensure`] makes every host update a full ensure.

use ccm_cloud_provider::{Drift, Ensured, LoadBalancer, Result};
use k8s_openapi::api::core::v1::{LoadBalancerStatus, Node, Service};

/// The load balancers `B`, whose host updates are either `B`'s own or full ensures.
#[derive(Debug)]
pub struct HostUpdates<B> {
    inner: B,
    full_ensure: bool,
}

impl<B> HostUpdates<B> {
    /// `inner`'s own host updates.
    pub fn new(inner: B) -> Self {
        Self {
            inner,
            full_ensure: false,
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
        self.inner
            .ensure_load_balancer(cluster_name, service, nodes)
            .await
    }

    async fn ensure_load_balancer_reporting(
        &self,
        cluster_name: &str,
        service: &Service,
        nodes: &[&Node],
    ) -> Result<Ensured> {
        self.inner
            .ensure_load_balancer_reporting(cluster_name, service, nodes)
            .await
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
        self.inner
            .update_load_balancer(cluster_name, service, nodes)
            .await
    }

    async fn ensure_load_balancer_deleted(&self, cluster_name: &str, service: &Service) -> Result<()> {
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
