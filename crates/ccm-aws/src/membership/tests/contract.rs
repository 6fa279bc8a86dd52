//! Every method of the `LoadBalancer` and `Routes` contracts, driven through the membership decorators: each
//! reaches the wrapped implementation as itself (a method the decorator forgot would run the contract's default
//! body instead, and show up here as the calls that body makes), and those that take Nodes pass member Nodes
//! only.

use ccm_cloud_provider::{Drift, Ensured, LoadBalancerPlan};

use super::*;

/// A load balancer recording each call by method, with the Node names it was given.
#[derive(Default)]
struct Every(Mutex<Vec<(&'static str, Vec<String>)>>);

impl Every {
    fn record(&self, method: &'static str, nodes: &[&Node]) {
        let names = nodes.iter().map(|n| n.metadata.name.clone().unwrap()).collect();
        self.0.lock().unwrap().push((method, names));
    }
}

impl LoadBalancer for Every {
    async fn get_load_balancer(&self, _: &str, _: &Service) -> CloudResult<Option<LoadBalancerStatus>> {
        self.record("get_load_balancer", &[]);
        Ok(None)
    }
    fn load_balancer_name(&self, _: &str, _: &Service) -> String {
        self.record("load_balancer_name", &[]);
        "name".to_owned()
    }
    async fn ensure_load_balancer(
        &self,
        _: &str,
        _: &Service,
        nodes: &[&Node],
    ) -> CloudResult<LoadBalancerStatus> {
        self.record("ensure_load_balancer", nodes);
        Ok(LoadBalancerStatus::default())
    }
    async fn ensure_load_balancer_reporting(
        &self,
        _: &str,
        _: &Service,
        nodes: &[&Node],
    ) -> CloudResult<Ensured> {
        self.record("ensure_load_balancer_reporting", nodes);
        Ok(Ensured::new(LoadBalancerStatus::default(), Vec::new()))
    }
    async fn update_load_balancer(&self, _: &str, _: &Service, nodes: &[&Node]) -> CloudResult<()> {
        self.record("update_load_balancer", nodes);
        Ok(())
    }
    async fn ensure_load_balancer_deleted(&self, _: &str, _: &Service) -> CloudResult<()> {
        self.record("ensure_load_balancer_deleted", &[]);
        Ok(())
    }
    async fn ensure_predecessor_load_balancer_deleted(
        &self,
        _: &str,
        _: &Service,
        _: &Service,
    ) -> CloudResult<()> {
        self.record("ensure_predecessor_load_balancer_deleted", &[]);
        Ok(())
    }
    async fn drifted(&self, _: &str, _: &[&Service], nodes: &[&Node]) -> CloudResult<Vec<Drift>> {
        self.record("drifted", nodes);
        Ok(Vec::new())
    }
    async fn plan_load_balancer(
        &self,
        _: &str,
        _: &Service,
        nodes: &[&Node],
    ) -> CloudResult<Option<LoadBalancerPlan>> {
        self.record("plan_load_balancer", nodes);
        Ok(None)
    }
}

#[tokio::test]
async fn every_load_balancer_method_reaches_the_wrapped_one_with_member_nodes() {
    let lookups = Arc::new(AtomicUsize::new(0));
    let lbs = MemberLoadBalancers::new(Every::default(), membership(&lookups));
    let own = node("own", Some(&format!("aws:///us-east-1a/{OWN}")));
    let forged = node("forged", Some(&format!("aws:///us-east-1a/{FOREIGN}")));
    let nodes = [&own, &forged];
    let (svc, old) = (Service::default(), Service::default());
    lbs.get_load_balancer("k", &svc).await.unwrap();
    lbs.load_balancer_name("k", &svc);
    lbs.ensure_load_balancer("k", &svc, &nodes).await.unwrap();
    lbs.ensure_load_balancer_reporting("k", &svc, &nodes)
        .await
        .unwrap();
    lbs.update_load_balancer("k", &svc, &nodes).await.unwrap();
    lbs.ensure_load_balancer_deleted("k", &svc).await.unwrap();
    lbs.ensure_predecessor_load_balancer_deleted("k", &old, &svc)
        .await
        .unwrap();
    lbs.drifted("k", &[&svc], &nodes).await.unwrap();
    lbs.plan_load_balancer("k", &svc, &nodes).await.unwrap();
    let own_only = || vec!["own".to_owned()];
    let expected: Vec<(&str, Vec<String>)> = vec![
        ("get_load_balancer", Vec::new()),
        ("load_balancer_name", Vec::new()),
        ("ensure_load_balancer", own_only()),
        ("ensure_load_balancer_reporting", own_only()),
        ("update_load_balancer", own_only()),
        ("ensure_load_balancer_deleted", Vec::new()),
        ("ensure_predecessor_load_balancer_deleted", Vec::new()),
        ("drifted", own_only()),
        ("plan_load_balancer", own_only()),
    ];
    assert_eq!(*lbs.inner().0.lock().unwrap(), expected);
}

/// Routes recording each call by method.
#[derive(Default)]
struct EveryRoute(Mutex<Vec<String>>);

impl Routes for EveryRoute {
    async fn list_routes(&self, _: &str) -> CloudResult<Vec<Route>> {
        self.0.lock().unwrap().push("list_routes".into());
        Ok(Vec::new())
    }
    async fn create_route(&self, _: &str, _: &str, route: &Route) -> CloudResult<()> {
        self.0
            .lock()
            .unwrap()
            .push(format!("create_route {}", route.target_node));
        Ok(())
    }
    async fn delete_route(&self, _: &str, route: &Route) -> CloudResult<()> {
        self.0
            .lock()
            .unwrap()
            .push(format!("delete_route {}", route.target_node));
        Ok(())
    }
    fn observe_nodes(&self, nodes: &[&Node]) {
        self.0
            .lock()
            .unwrap()
            .push(format!("observe_nodes {}", nodes.len()));
    }
}

#[tokio::test]
async fn every_routes_method_reaches_the_wrapped_one_and_only_member_targets_are_created() {
    let lookups = Arc::new(AtomicUsize::new(0));
    let routes = MemberRoutes::new(EveryRoute::default(), membership(&lookups));
    let own = node("own", Some(&format!("aws:///us-east-1a/{OWN}")));
    let forged = node("forged", Some(&format!("aws:///us-east-1a/{FOREIGN}")));
    routes.observe_nodes(&[&own, &forged]);
    routes.list_routes("k").await.unwrap();
    routes.create_route("k", "uid-1", &route("own")).await.unwrap();
    routes
        .create_route("k", "uid-2", &route("forged"))
        .await
        .unwrap_err();
    routes.delete_route("k", &route("forged")).await.unwrap();
    let expected = [
        "observe_nodes 2",
        "list_routes",
        "create_route own",
        "delete_route forged",
    ];
    assert_eq!(*routes.inner().0.lock().unwrap(), expected);
}
