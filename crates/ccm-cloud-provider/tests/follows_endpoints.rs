//! A load balancer that follows endpoints keeps doing so behind the dyn facade (`DynProvider`), which the
//! controller manager's runtime calls providers through: the new methods are forwarded, not answered by the
//! facade's defaults (which would drop the endpoints).
#![allow(clippy::unwrap_used)]

use std::{
    future::Future,
    net::IpAddr,
    pin::pin,
    sync::{Arc, Mutex},
    task::{Context, Poll, Waker},
};

use ccm_cloud_provider::{
    Backends, CloudProvider, DynProvider, Endpoint, EndpointPort, LoadBalancer, LoadBalancerStatus, NodeView,
    Result, ServiceEndpoints, Unsupported,
};
use k8s_openapi::api::core::v1::Service;

/// What each call was given: its name and how many endpoints (`None`: none).
type Calls = Arc<Mutex<Vec<(&'static str, Option<usize>)>>>;

/// Follows the endpoints of every Service; records its calls.
#[derive(Default)]
struct Following(Calls);

impl LoadBalancer for Following {
    async fn get_load_balancer(&self, _: &str, _: &Service) -> Result<Option<LoadBalancerStatus>> {
        Ok(None)
    }
    fn load_balancer_name(&self, _: &str, _: &Service) -> String {
        "lb".to_owned()
    }
    async fn ensure_load_balancer(
        &self,
        _: &str,
        _: &Service,
        _: &[&NodeView],
    ) -> Result<LoadBalancerStatus> {
        self.0.lock().unwrap().push(("ensure", None));
        Ok(LoadBalancerStatus::default())
    }
    async fn update_load_balancer(&self, _: &str, _: &Service, _: &[&NodeView]) -> Result<()> {
        self.0.lock().unwrap().push(("update", None));
        Ok(())
    }
    async fn ensure_load_balancer_deleted(&self, _: &str, _: &Service) -> Result<()> {
        Ok(())
    }
    fn follows_endpoints(&self, _: &Service) -> bool {
        true
    }
    async fn ensure_load_balancer_with(
        &self,
        _: &str,
        _: &Service,
        backends: Backends<'_>,
    ) -> Result<ccm_cloud_provider::Ensured> {
        let given = backends.endpoints.map(|e| e.endpoints.len());
        self.0.lock().unwrap().push(("ensure_with", given));
        Ok(ccm_cloud_provider::Ensured::default())
    }
    async fn update_load_balancer_with(&self, _: &str, _: &Service, backends: Backends<'_>) -> Result<()> {
        let given = backends.endpoints.map(|e| e.endpoints.len());
        self.0.lock().unwrap().push(("update_with", given));
        Ok(())
    }
    async fn plan_load_balancer_with(
        &self,
        _: &str,
        _: &Service,
        backends: Backends<'_>,
    ) -> Result<Option<ccm_cloud_provider::LoadBalancerPlan>> {
        let given = backends.endpoints.map(|e| e.endpoints.len());
        self.0.lock().unwrap().push(("plan_with", given));
        Ok(None)
    }
}

struct Cloud(Following);

impl CloudProvider for Cloud {
    type InstancesV2 = Unsupported;
    type Instances = Unsupported;
    type Zones = Unsupported;
    type LoadBalancer = Following;
    type Routes = Unsupported;
    fn provider_name(&self) -> &str {
        "following"
    }
    fn load_balancer(&self) -> Option<&Following> {
        Some(&self.0)
    }
}

/// The output of a future that never waits (the fake's), polled once.
fn ready<T>(future: impl Future<Output = T>) -> T {
    match pin!(future).poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(out) => out,
        Poll::Pending => panic!("the fake never waits"),
    }
}

#[test]
fn the_dyn_facade_forwards_what_follows_endpoints() {
    let calls = Calls::default();
    let provider = DynProvider::new(Cloud(Following(calls.clone())));
    let lb = provider.load_balancer().unwrap();
    let service = Service::default();
    assert!(lb.follows_endpoints(&service));
    let endpoint = Endpoint::ready(
        IpAddr::from([10, 0, 0, 1]),
        Some("n"),
        vec![EndpointPort::new("", 80, "TCP")],
    );
    let endpoints = ServiceEndpoints::new([endpoint]);
    let nodes: Vec<&NodeView> = Vec::new();
    let backends = Backends::with_endpoints(&nodes, &endpoints);
    ready(lb.ensure_load_balancer_with("c", &service, backends)).unwrap();
    ready(lb.update_load_balancer_with("c", &service, backends)).unwrap();
    ready(lb.plan_load_balancer_with("c", &service, backends)).unwrap();
    // The upstream methods still reach the provider as they are.
    ready(lb.update_load_balancer("c", &service, &nodes)).unwrap();
    assert_eq!(
        *calls.lock().unwrap(),
        [
            ("ensure_with", Some(1)),
            ("update_with", Some(1)),
            ("plan_with", Some(1)),
            ("update", None)
        ]
    );
}
