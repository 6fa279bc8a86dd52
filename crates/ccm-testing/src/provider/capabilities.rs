//! The state's bookkeeping and the contract's capabilities over it: what [`FakeProvider`] answers and records.

use super::*;

// === impl State ===

impl State {
    pub(super) fn take_failure(&mut self, method: Method, subject: Option<&str>) -> Result<(), CloudError> {
        let pos = self.failures.iter().position(|f| {
            f.method == method
                && f.remaining != Some(0)
                && match (&f.subject, subject) {
                    (None, _) => true,
                    (Some(want), Some(got)) => want == got,
                    (Some(_), None) => false,
                }
        });
        match pos {
            None => Ok(()),
            Some(i) => {
                let f = &mut self.failures[i];
                if let Some(n) = f.remaining.as_mut() {
                    *n -= 1;
                }
                Err((f.make)())
            }
        }
    }

    /// Only a failure for this very subject (or an unscoped one), used per node inside a batch.
    pub(super) fn take_subject_failure(&mut self, method: Method, subject: &str) -> Option<CloudError> {
        self.take_failure(method, Some(subject)).err()
    }
}

fn node_name(node: &NodeView) -> &str {
    &node.name
}

fn service_key(svc: &Service) -> String {
    ccm_cloud_provider::object_key(&svc.metadata)
}

// === impl CloudProvider for FakeProvider ===

impl CloudProvider for FakeProvider {
    type InstancesV2 = FakeProvider;
    type Instances = FakeProvider;
    type Zones = FakeProvider;
    type LoadBalancer = FakeProvider;
    type Routes = FakeProvider;

    fn provider_name(&self) -> &str {
        &self.inner.name
    }

    fn instances_v2(&self) -> Option<&Self::InstancesV2> {
        self.caps.instances_v2.then_some(self)
    }

    fn instances(&self) -> Option<&Self::Instances> {
        self.caps.instances.then_some(self)
    }

    fn zones(&self) -> Option<&Self::Zones> {
        self.caps.zones.then_some(self)
    }

    fn load_balancer(&self) -> Option<&Self::LoadBalancer> {
        self.caps.load_balancer.then_some(self)
    }

    fn routes(&self) -> Option<&Self::Routes> {
        self.caps.routes.then_some(self)
    }
}

impl InstancesV2 for FakeProvider {
    async fn instance_exists(&self, node: &NodeView) -> Result<bool, CloudError> {
        self.record(Method::InstanceExists, node_name(node), 1).await?;
        Self::answer_exists(&self.state(), node)
    }

    async fn instance_shutdown(&self, node: &NodeView) -> Result<bool, CloudError> {
        self.record(Method::InstanceShutdown, node_name(node), 1).await?;
        Self::answer_shutdown(&self.state(), node)
    }

    async fn instance_metadata(&self, node: &NodeView) -> Result<Option<InstanceMetadata>, CloudError> {
        self.record(Method::InstanceMetadata, node_name(node), 1).await?;
        Self::answer_metadata(&self.state(), node)
    }

    async fn instance_metadata_batch(
        &self,
        nodes: &[&NodeView],
    ) -> Vec<Result<Option<InstanceMetadata>, CloudError>> {
        if !self.caps.batching {
            let mut out = Vec::with_capacity(nodes.len());
            for node in nodes {
                out.push(self.instance_metadata(node).await);
            }
            return out;
        }
        self.batch(
            Method::InstanceMetadataBatch,
            Method::InstanceMetadata,
            nodes,
            Self::answer_metadata,
        )
        .await
    }

    async fn instance_exists_batch(&self, nodes: &[&NodeView]) -> Vec<Result<bool, CloudError>> {
        if !self.caps.batching {
            let mut out = Vec::with_capacity(nodes.len());
            for node in nodes {
                out.push(self.instance_exists(node).await);
            }
            return out;
        }
        self.batch(
            Method::InstanceExistsBatch,
            Method::InstanceExists,
            nodes,
            Self::answer_exists,
        )
        .await
    }

    async fn instance_shutdown_batch(&self, nodes: &[&NodeView]) -> Vec<Result<bool, CloudError>> {
        if !self.caps.batching {
            let mut out = Vec::with_capacity(nodes.len());
            for node in nodes {
                out.push(self.instance_shutdown(node).await);
            }
            return out;
        }
        self.batch(
            Method::InstanceShutdownBatch,
            Method::InstanceShutdown,
            nodes,
            Self::answer_shutdown,
        )
        .await
    }
}

impl Instances for FakeProvider {
    async fn node_addresses(&self, node_name: &str) -> Result<Vec<NodeAddress>, CloudError> {
        self.record(Method::NodeAddresses, node_name, 1).await?;
        let s = self.state();
        let i = s.instances.get(node_name).ok_or(CloudError::InstanceNotFound)?;
        Ok(i.metadata
            .as_ref()
            .map(|m| m.node_addresses.clone())
            .unwrap_or_default())
    }

    async fn node_addresses_by_provider_id(&self, provider_id: &str) -> Result<Vec<NodeAddress>, CloudError> {
        self.record(Method::NodeAddressesByProviderId, provider_id, 1)
            .await?;
        let s = self.state();
        let i = Self::by_provider_id(&s, provider_id).ok_or(CloudError::InstanceNotFound)?;
        Ok(i.metadata
            .as_ref()
            .map(|m| m.node_addresses.clone())
            .unwrap_or_default())
    }

    async fn instance_id(&self, node_name: &str) -> Result<String, CloudError> {
        self.record(Method::InstanceId, node_name, 1).await?;
        let s = self.state();
        let i = s.instances.get(node_name).ok_or(CloudError::InstanceNotFound)?;
        let (_, id) =
            split_provider_id(&i.provider_id, None).map_err(|e| CloudError::with_source("bad ID", e))?;
        Ok(id.to_owned())
    }

    async fn instance_type(&self, node_name: &str) -> Result<String, CloudError> {
        self.record(Method::InstanceType, node_name, 1).await?;
        let s = self.state();
        let i = s.instances.get(node_name).ok_or(CloudError::InstanceNotFound)?;
        Ok(i.metadata
            .as_ref()
            .map(|m| m.instance_type.clone())
            .unwrap_or_default())
    }

    async fn instance_type_by_provider_id(&self, provider_id: &str) -> Result<String, CloudError> {
        self.record(Method::InstanceTypeByProviderId, provider_id, 1)
            .await?;
        let s = self.state();
        let i = Self::by_provider_id(&s, provider_id).ok_or(CloudError::InstanceNotFound)?;
        Ok(i.metadata
            .as_ref()
            .map(|m| m.instance_type.clone())
            .unwrap_or_default())
    }

    async fn instance_exists_by_provider_id(&self, provider_id: &str) -> Result<bool, CloudError> {
        self.record(Method::InstanceExistsByProviderId, provider_id, 1)
            .await?;
        if provider_id.is_empty() {
            return Err(CloudError::other(
                "cannot check existence of an instance with empty providerID",
            ));
        }
        Ok(Self::by_provider_id(&self.state(), provider_id).is_some())
    }

    async fn instance_shutdown_by_provider_id(&self, provider_id: &str) -> Result<bool, CloudError> {
        self.record(Method::InstanceShutdownByProviderId, provider_id, 1)
            .await?;
        if provider_id.is_empty() {
            return Err(CloudError::other(
                "cannot shutdown instance with empty providerID",
            ));
        }
        Self::by_provider_id(&self.state(), provider_id)
            .map(|i| i.shutdown)
            .ok_or(CloudError::InstanceNotFound)
    }
}

impl Zones for FakeProvider {
    async fn zone_by_provider_id(&self, provider_id: &str) -> Result<Zone, CloudError> {
        self.record(Method::ZoneByProviderId, provider_id, 1).await?;
        let s = self.state();
        let i = Self::by_provider_id(&s, provider_id).ok_or(CloudError::InstanceNotFound)?;
        Ok(zone_of(i))
    }

    async fn zone_by_node_name(&self, node_name: &str) -> Result<Zone, CloudError> {
        self.record(Method::ZoneByNodeName, node_name, 1).await?;
        let s = self.state();
        let i = s.instances.get(node_name).ok_or(CloudError::InstanceNotFound)?;
        Ok(zone_of(i))
    }
}

impl FakeProvider {
    /// Deletes the load balancer under `key` if `service` made it. Load balancers are named by UID: a re-created
    /// Service's is not its predecessor's to delete.
    fn delete_own(&self, key: &str, service: &Service) {
        let uid = service.metadata.uid.clone().unwrap_or_default();
        let mut s = self.state();
        if s.load_balancers.get(key).is_some_and(|lb| lb.service_uid == uid) {
            s.load_balancers.remove(key);
        }
    }

    /// The endpoints an ensure or update of `service`'s load balancer was given.
    fn remember_endpoints(&self, service: &Service, endpoints: Option<&ServiceEndpoints>) {
        if let Some(lb) = self.state().load_balancers.get_mut(&service_key(service)) {
            lb.endpoints = endpoints.cloned();
        }
    }
}

fn zone_of(i: &FakeInstance) -> Zone {
    i.metadata
        .as_ref()
        .map(|m| Zone {
            failure_domain: m.zone.clone(),
            region: m.region.clone(),
        })
        .unwrap_or_default()
}

impl LoadBalancer for FakeProvider {
    async fn get_load_balancer(
        &self,
        _cluster_name: &str,
        service: &Service,
    ) -> Result<Option<LoadBalancerStatus>, CloudError> {
        let key = service_key(service);
        self.record(Method::GetLoadBalancer, &key, 1).await?;
        Ok(self.state().load_balancers.get(&key).map(|lb| lb.status.clone()))
    }

    /// A plan of one line, `ensure <namespace>/<name>` (with `nodes` back ends) for a Service without a load
    /// balancer, none for one that has one: what a dry run reports.
    async fn plan_load_balancer(
        &self,
        _cluster_name: &str,
        service: &Service,
        nodes: &[&NodeView],
    ) -> Result<Option<ccm_cloud_provider::LoadBalancerPlan>, CloudError> {
        let key = service_key(service);
        self.record(Method::PlanLoadBalancer, &key, nodes.len()).await?;
        let exists = self.state().load_balancers.contains_key(&key);
        let changes = if exists {
            Vec::new()
        } else {
            vec![format!("ensure {key} with {} nodes", nodes.len())]
        };
        Ok(Some(ccm_cloud_provider::LoadBalancerPlan::new(changes, false)))
    }

    /// [`Self::plan_load_balancer`]; given endpoints, its line ends `and <n> ready endpoints` (the addresses of
    /// the ready ones, comma-separated, in brackets).
    async fn plan_load_balancer_with(
        &self,
        cluster_name: &str,
        service: &Service,
        backends: Backends<'_>,
    ) -> Result<Option<ccm_cloud_provider::LoadBalancerPlan>, CloudError> {
        let mut plan = self
            .plan_load_balancer(cluster_name, service, backends.nodes)
            .await?;
        if let (Some(plan), Some(endpoints)) = (plan.as_mut(), backends.endpoints) {
            let ready: Vec<String> = endpoints.ready().map(|e| e.address.to_string()).collect();
            for line in &mut plan.changes {
                line.push_str(&format!(
                    " and {} ready endpoints [{}]",
                    ready.len(),
                    ready.join(",")
                ));
            }
        }
        Ok(plan)
    }

    fn load_balancer_name(&self, _cluster_name: &str, service: &Service) -> String {
        // A name chosen by the test's annotation, as a provider may let a Service choose one.
        if let Some(chosen) = service
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(super::CHOSEN_NAME_ANNOTATION))
        {
            return chosen.clone();
        }
        // Upstream's DefaultLoadBalancerName: "a" + UID without dashes, at most 32 characters.
        let uid = service
            .metadata
            .uid
            .as_deref()
            .unwrap_or_default()
            .replace('-', "");
        let mut name = format!("a{uid}");
        name.truncate(32);
        name
    }

    async fn ensure_load_balancer(
        &self,
        cluster_name: &str,
        service: &Service,
        nodes: &[&NodeView],
    ) -> Result<LoadBalancerStatus, CloudError> {
        let key = service_key(service);
        self.record(Method::EnsureLoadBalancer, &key, nodes.len()).await?;
        let mut s = self.state();
        let ports = service.spec.as_ref().and_then(|s| s.ports.as_ref()).map(|ports| {
            ports
                .iter()
                .map(|p| PortStatus {
                    port: p.port,
                    protocol: p.protocol.clone().unwrap_or_default(),
                    error: None,
                })
                .collect()
        });
        let status = LoadBalancerStatus {
            ingress: Some(vec![LoadBalancerIngress {
                ip: Some(s.external_ip.clone()),
                ip_mode: s.ip_mode.clone(),
                ports,
                ..Default::default()
            }]),
        };
        let lb = FakeLoadBalancer {
            name: self.load_balancer_name(cluster_name, service),
            service_uid: service.metadata.uid.clone().unwrap_or_default(),
            hosts: nodes.iter().map(|n| node_name(n).to_owned()).collect(),
            status: status.clone(),
            endpoints: None,
        };
        s.drift.remove(&key);
        s.load_balancers.insert(key, lb);
        Ok(status)
    }

    async fn ensure_load_balancer_reporting(
        &self,
        cluster_name: &str,
        service: &Service,
        nodes: &[&NodeView],
    ) -> Result<Ensured, CloudError> {
        let status = self.ensure_load_balancer(cluster_name, service, nodes).await?;
        Ok(Ensured::new(status, self.state().notices.clone()))
    }

    async fn update_load_balancer(
        &self,
        _cluster_name: &str,
        service: &Service,
        nodes: &[&NodeView],
    ) -> Result<(), CloudError> {
        let key = service_key(service);
        self.record(Method::UpdateLoadBalancer, &key, nodes.len()).await?;
        let mut s = self.state();
        let lb = s
            .load_balancers
            .get_mut(&key)
            .ok_or_else(|| CloudError::other(format!("no load balancer for {key}")))?;
        lb.hosts = nodes.iter().map(|n| node_name(n).to_owned()).collect();
        Ok(())
    }

    fn follows_endpoints(&self, service: &Service) -> bool {
        service
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(super::FOLLOW_ENDPOINTS_ANNOTATION))
            .is_some_and(|v| v == "true")
    }

    async fn ensure_load_balancer_with(
        &self,
        cluster_name: &str,
        service: &Service,
        backends: Backends<'_>,
    ) -> Result<Ensured, CloudError> {
        let ensured = self
            .ensure_load_balancer_reporting(cluster_name, service, backends.nodes)
            .await?;
        self.remember_endpoints(service, backends.endpoints);
        Ok(ensured)
    }

    async fn update_load_balancer_with(
        &self,
        cluster_name: &str,
        service: &Service,
        backends: Backends<'_>,
    ) -> Result<(), CloudError> {
        self.update_load_balancer(cluster_name, service, backends.nodes)
            .await?;
        self.remember_endpoints(service, backends.endpoints);
        Ok(())
    }

    async fn ensure_load_balancer_deleted(
        &self,
        _cluster_name: &str,
        service: &Service,
    ) -> Result<(), CloudError> {
        let key = service_key(service);
        self.record(Method::EnsureLoadBalancerDeleted, &key, 1).await?;
        self.delete_own(&key, service);
        Ok(())
    }

    /// The contract's default, recorded as one call of its own with both UIDs.
    async fn ensure_predecessor_load_balancer_deleted(
        &self,
        cluster_name: &str,
        predecessor: &Service,
        successor: &Service,
    ) -> Result<(), CloudError> {
        let key = service_key(predecessor);
        let uid = |s: &Service| s.metadata.uid.clone().unwrap_or_default();
        self.state()
            .predecessor_deletions
            .push((uid(predecessor), uid(successor)));
        self.record(Method::EnsurePredecessorLoadBalancerDeleted, &key, 1)
            .await?;
        if self.load_balancer_name(cluster_name, predecessor)
            != self.load_balancer_name(cluster_name, successor)
        {
            self.delete_own(&key, predecessor);
        }
        Ok(())
    }

    async fn drifted(
        &self,
        _cluster_name: &str,
        services: &[&Service],
        _nodes: &[&NodeView],
    ) -> Result<Vec<Drift>, CloudError> {
        self.record(Method::DriftedLoadBalancers, "", services.len())
            .await?;
        let s = self.state();
        Ok(services
            .iter()
            .map(|svc| service_key(svc))
            .filter_map(|key| {
                s.drift
                    .get(&key)
                    .map(|what| Drift::new(key.clone(), what.clone()))
            })
            .collect())
    }
}

impl Routes for FakeProvider {
    async fn list_routes(&self, cluster_name: &str) -> Result<Vec<Route>, CloudError> {
        self.record(Method::ListRoutes, cluster_name, 1).await?;
        Ok(self
            .state()
            .routes
            .iter()
            .filter(|(c, _)| c == cluster_name)
            .map(|(_, r)| r.clone())
            .collect())
    }

    async fn create_route(
        &self,
        cluster_name: &str,
        _name_hint: &str,
        route: &Route,
    ) -> Result<(), CloudError> {
        self.record(Method::CreateRoute, &route.destination_cidr, 1)
            .await?;
        let name = format!("{cluster_name}-{}-{}", route.target_node, route.destination_cidr);
        let mut s = self.state();
        if s.routes.iter().any(|(c, r)| c == cluster_name && r.name == name) {
            return Err(CloudError::other(format!("route {name} already exists")));
        }
        s.routes.push((
            cluster_name.to_owned(),
            Route {
                name,
                blackhole: false,
                ..route.clone()
            },
        ));
        Ok(())
    }

    async fn delete_route(&self, cluster_name: &str, route: &Route) -> Result<(), CloudError> {
        self.record(Method::DeleteRoute, &route.destination_cidr, 1)
            .await?;
        let mut s = self.state();
        let pos = s.routes.iter().position(|(c, r)| {
            c == cluster_name
                && r.destination_cidr == route.destination_cidr
                && r.target_node == route.target_node
        });
        match pos {
            Some(i) => {
                s.routes.remove(i);
                Ok(())
            }
            None => Err(CloudError::other(format!(
                "no route for {} to {:?} in cluster {cluster_name}",
                route.destination_cidr, route.target_node
            ))),
        }
    }
}
