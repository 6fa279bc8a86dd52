//! A load balancer and routes that record what the membership decorators pass on, for the tests of both.

use ccm_cloud_provider::{Drift, Ensured, LoadBalancerPlan};

use super::*;

/// A load balancer recording each call by method, with the Node names it was given.
#[derive(Default)]
pub(super) struct Recording(Mutex<Vec<(&'static str, Vec<String>)>>);

impl Recording {
    fn record(&self, method: &'static str, nodes: &[&Node]) {
        let names = nodes.iter().map(|n| n.metadata.name.clone().unwrap()).collect();
        self.0.lock().unwrap().push((method, names));
    }
}

impl LoadBalancer for Recording {
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

impl Recording {
    /// Every call, by method, with the Node names it was given.
    pub(super) fn calls(&self) -> Vec<(&'static str, Vec<String>)> {
        self.0.lock().unwrap().clone()
    }

    /// The Node names of every call that was given Nodes, in order.
    pub(super) fn nodes_given(&self) -> Vec<Vec<String>> {
        self.0
            .lock()
            .unwrap()
            .iter()
            .filter(|(_, names)| !names.is_empty())
            .map(|(_, names)| names.clone())
            .collect()
    }
}

/// Routes recording each call by method.
#[derive(Default)]
pub(super) struct RecordingRoutes(Mutex<Vec<String>>);

impl Routes for RecordingRoutes {
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

impl RecordingRoutes {
    /// Every call, in order.
    pub(super) fn calls(&self) -> Vec<String> {
        self.0.lock().unwrap().clone()
    }

    /// How many routes it was asked to create.
    pub(super) fn created(&self) -> usize {
        self.calls()
            .iter()
            .filter(|c| c.starts_with("create_route "))
            .count()
    }
}
