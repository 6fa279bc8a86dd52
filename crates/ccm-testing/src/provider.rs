//! [`FakeProvider`]: an in-memory [`CloudProvider`] that records every call and injects failures, for the
//! controllers' tests and for anyone testing code written against the contract.
//!
//! ```
//! # tokio_test_block_on(async {
//! use ccm_cloud_provider::{CloudError, CloudProvider, InstancesV2, NodeView};
//! use ccm_testing::provider::{FakeInstance, FakeProvider, Method};
//!
//! let cloud = FakeProvider::new();
//! cloud.add_instance(FakeInstance::new("node-a", "fake://i-a").instance_type("m5.large"));
//! cloud.fail(Method::InstanceExists, Some(1), || CloudError::other("throttled"));
//!
//! let node = NodeView::named("node-a");
//! let v2 = cloud.instances_v2().unwrap();
//! assert!(v2.instance_exists(&node).await.is_err(), "the injected failure comes first");
//! assert!(v2.instance_exists(&node).await.unwrap());
//! assert_eq!(cloud.count(Method::InstanceExists), 2);
//! # });
//! # fn tokio_test_block_on<F: std::future::Future>(f: F) -> F::Output {
//! #     tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(f)
//! # }
//! ```

use std::{
    collections::BTreeMap,
    sync::{Arc, Mutex, MutexGuard},
    time::Duration,
};

use ccm_cloud_provider::{
    Backends, CloudError, CloudProvider, Drift, Ensured, InstanceMetadata, Instances, InstancesV2,
    LoadBalancer, LoadBalancerStatus, NodeAddress, NodeView, Notice, Route, Routes, ServiceEndpoints, Zone,
    Zones, split_provider_id,
};
use k8s_openapi::api::core::v1::{LoadBalancerIngress, PortStatus, Service};

/// Every provider method the fake answers, for counting calls and injecting failures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Method {
    /// `InstancesV2::instance_exists`.
    InstanceExists,
    /// `InstancesV2::instance_shutdown`.
    InstanceShutdown,
    /// `InstancesV2::instance_metadata`.
    InstanceMetadata,
    /// `InstancesV2::instance_exists_batch` (only when batching is on).
    InstanceExistsBatch,
    /// `InstancesV2::instance_shutdown_batch` (only when batching is on).
    InstanceShutdownBatch,
    /// `InstancesV2::instance_metadata_batch` (only when batching is on).
    InstanceMetadataBatch,
    /// `Instances::node_addresses`.
    NodeAddresses,
    /// `Instances::node_addresses_by_provider_id`.
    NodeAddressesByProviderId,
    /// `Instances::instance_id`.
    InstanceId,
    /// `Instances::instance_type`.
    InstanceType,
    /// `Instances::instance_type_by_provider_id`.
    InstanceTypeByProviderId,
    /// `Instances::instance_exists_by_provider_id`.
    InstanceExistsByProviderId,
    /// `Instances::instance_shutdown_by_provider_id`.
    InstanceShutdownByProviderId,
    /// `Zones::zone_by_provider_id`.
    ZoneByProviderId,
    /// `Zones::zone_by_node_name`.
    ZoneByNodeName,
    /// `LoadBalancer::get_load_balancer`.
    GetLoadBalancer,
    /// `LoadBalancer::ensure_load_balancer`.
    EnsureLoadBalancer,
    /// `LoadBalancer::update_load_balancer`.
    UpdateLoadBalancer,
    /// `LoadBalancer::ensure_load_balancer_deleted`.
    EnsureLoadBalancerDeleted,
    /// `LoadBalancer::ensure_predecessor_load_balancer_deleted` (its subject the predecessor's `namespace/name`;
    /// both UIDs are in [`FakeProvider::predecessor_deletions`]).
    EnsurePredecessorLoadBalancerDeleted,
    /// `LoadBalancer::plan_load_balancer` (a dry run's).
    PlanLoadBalancer,
    /// `LoadBalancer::drifted` (recorded with the number of Services asked about).
    DriftedLoadBalancers,
    /// `Routes::list_routes`.
    ListRoutes,
    /// `Routes::create_route`.
    CreateRoute,
    /// `Routes::delete_route`.
    DeleteRoute,
}

/// One recorded call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    /// The method.
    pub method: Method,
    /// What it was about: a node name, provider ID, `namespace/name` of a Service, a CIDR, or the cluster name.
    /// Empty for batch calls.
    pub subject: String,
    /// How many nodes a batch call carried; 1 for single calls.
    pub batch_size: usize,
}

/// One instance of the fake cloud.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FakeInstance {
    /// The node name this instance is found by (when the Node has no provider ID).
    pub node_name: String,
    /// What `instance_metadata` returns; `None` makes it answer `Ok(None)` (upstream "nil metadata").
    pub metadata: Option<InstanceMetadata>,
    /// The provider ID the instance is found by when the Node has one (kept even with `metadata: None`).
    pub provider_id: String,
    /// Whether the instance is shut down (it still exists).
    pub shutdown: bool,
}

/// The annotation whose value the fake gives as a Service's load balancer name (`load_balancer_name`), instead of
/// upstream's default name: a name the Service chose.
pub const CHOSEN_NAME_ANNOTATION: &str = "fake.ccm-testing/load-balancer-name";

/// The annotation that makes the fake's load balancer follow the Service's endpoints
/// (`LoadBalancer::follows_endpoints`) when it is `"true"`: ensures and updates then record what they were given in
/// [`FakeLoadBalancer::endpoints`].
pub const FOLLOW_ENDPOINTS_ANNOTATION: &str = "fake.ccm-testing/follow-endpoints";

/// A load balancer the fake holds, keyed by the Service's `namespace/name`.
#[derive(Debug, Clone, PartialEq)]
pub struct FakeLoadBalancer {
    /// `LoadBalancer::load_balancer_name` of the Service.
    pub name: String,
    /// The Service's UID at the last ensure.
    pub service_uid: String,
    /// Names of the back-end nodes, as last ensured or updated.
    pub hosts: Vec<String>,
    /// The status returned.
    pub status: LoadBalancerStatus,
    /// The endpoints last given, for a Service that has the load balancer follow them.
    pub endpoints: Option<ccm_cloud_provider::ServiceEndpoints>,
}

/// An in-memory cloud provider (the counterpart of upstream `fake.Cloud`).
///
/// All capabilities are on by default (InstancesV2, legacy Instances and Zones, LoadBalancer, Routes); the
/// `without_*` builders turn them off. Calls are recorded after the optional delay and before any injected
/// failure, so a failed call counts too. Batch methods are answered in one recorded call unless
/// [`FakeProvider::without_batching`] makes them fall back to one call per node.
#[derive(Clone)]
pub struct FakeProvider {
    inner: Arc<Inner>,
    caps: Caps,
}

#[derive(Debug, Clone, Copy)]
struct Caps {
    instances_v2: bool,
    instances: bool,
    zones: bool,
    load_balancer: bool,
    routes: bool,
    batching: bool,
}

struct Inner {
    name: String,
    state: Mutex<State>,
}

type ErrorFactory = Arc<dyn Fn() -> CloudError + Send + Sync>;

struct Failure {
    method: Method,
    subject: Option<String>,
    remaining: Option<u32>,
    make: ErrorFactory,
}

#[derive(Default)]
struct State {
    instances: BTreeMap<String, FakeInstance>,
    load_balancers: BTreeMap<String, FakeLoadBalancer>,
    routes: Vec<(String, Route)>,
    calls: Vec<Call>,
    failures: Vec<Failure>,
    delay: Duration,
    external_ip: String,
    ip_mode: Option<String>,
    notices: Vec<Notice>,
    /// What `drifted` reports per Service key until the next ensure repairs it.
    drift: BTreeMap<String, Vec<String>>,
    /// The UIDs of each `ensure_predecessor_load_balancer_deleted`: (predecessor, successor).
    predecessor_deletions: Vec<(String, String)>,
}

// === impl FakeInstance ===

impl FakeInstance {
    /// A running instance for node `node_name` with the given provider ID and otherwise empty metadata.
    pub fn new(node_name: impl Into<String>, provider_id: impl Into<String>) -> Self {
        let provider_id = provider_id.into();
        Self {
            node_name: node_name.into(),
            metadata: Some(InstanceMetadata {
                provider_id: provider_id.clone(),
                ..Default::default()
            }),
            provider_id,
            shutdown: false,
        }
    }

    fn meta(&mut self) -> &mut InstanceMetadata {
        self.metadata.get_or_insert_with(Default::default)
    }

    /// Sets the instance type.
    #[must_use]
    pub fn instance_type(mut self, instance_type: impl Into<String>) -> Self {
        self.meta().instance_type = instance_type.into();
        self
    }

    /// Sets zone and region.
    #[must_use]
    pub fn zone(mut self, zone: impl Into<String>, region: impl Into<String>) -> Self {
        let meta = self.meta();
        meta.zone = zone.into();
        meta.region = region.into();
        self
    }

    /// Sets the addresses.
    #[must_use]
    pub fn addresses(mut self, addresses: Vec<NodeAddress>) -> Self {
        self.meta().node_addresses = addresses;
        self
    }

    /// Adds an additional label.
    #[must_use]
    pub fn label(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.meta().additional_labels.insert(key.into(), value.into());
        self
    }

    /// Makes the metadata report an empty provider ID (the instance is still found by `provider_id`).
    #[must_use]
    pub fn without_metadata_provider_id(mut self) -> Self {
        self.meta().provider_id.clear();
        self
    }

    /// Makes `instance_metadata` answer `Ok(None)`.
    #[must_use]
    pub fn without_metadata(mut self) -> Self {
        self.metadata = None;
        self
    }

    /// Marks the instance shut down.
    #[must_use]
    pub fn shut_down(mut self) -> Self {
        self.shutdown = true;
        self
    }
}

// === impl FakeProvider ===

impl Default for FakeProvider {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for FakeProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FakeProvider")
            .field("name", &self.inner.name)
            .field("caps", &self.caps)
            .finish()
    }
}

impl FakeProvider {
    /// A provider named `fake` with every capability and no instances.
    pub fn new() -> Self {
        Self::named("fake")
    }

    /// A provider with another name (the scheme of its provider IDs).
    pub fn named(name: impl Into<String>) -> Self {
        Self {
            inner: Arc::new(Inner {
                name: name.into(),
                state: Mutex::new(State {
                    external_ip: "192.0.2.10".to_owned(),
                    ..Default::default()
                }),
            }),
            caps: Caps {
                instances_v2: true,
                instances: true,
                zones: true,
                load_balancer: true,
                routes: true,
                batching: true,
            },
        }
    }

    /// Turns `InstancesV2` off (so the controllers use the legacy `Instances`).
    #[must_use]
    pub fn without_instances_v2(mut self) -> Self {
        self.caps.instances_v2 = false;
        self
    }

    /// Turns the legacy `Instances` off.
    #[must_use]
    pub fn without_instances(mut self) -> Self {
        self.caps.instances = false;
        self
    }

    /// Turns `Zones` off.
    #[must_use]
    pub fn without_zones(mut self) -> Self {
        self.caps.zones = false;
        self
    }

    /// Turns `LoadBalancer` off.
    #[must_use]
    pub fn without_load_balancers(mut self) -> Self {
        self.caps.load_balancer = false;
        self
    }

    /// Turns `Routes` off.
    #[must_use]
    pub fn without_routes(mut self) -> Self {
        self.caps.routes = false;
        self
    }

    /// Makes the `*_batch` methods use the contract's default (one call per node), for baselines.
    #[must_use]
    pub fn without_batching(mut self) -> Self {
        self.caps.batching = false;
        self
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock only happens in a failing test; keep going with the data.
        self.inner
            .state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Adds (or replaces) an instance, keyed by its node name.
    pub fn add_instance(&self, instance: FakeInstance) {
        self.state()
            .instances
            .insert(instance.node_name.clone(), instance);
    }

    /// Removes the instance of a node name (it no longer exists).
    pub fn remove_instance(&self, node_name: &str) -> Option<FakeInstance> {
        self.state().instances.remove(node_name)
    }

    /// Marks an instance shut down or running.
    pub fn set_shutdown(&self, node_name: &str, shutdown: bool) {
        if let Some(i) = self.state().instances.get_mut(node_name) {
            i.shutdown = shutdown;
        }
    }

    /// Sets the addresses of an instance.
    pub fn set_addresses(&self, node_name: &str, addresses: Vec<NodeAddress>) {
        if let Some(i) = self.state().instances.get_mut(node_name) {
            i.meta().node_addresses = addresses;
        }
    }

    /// The instances.
    pub fn instance_list(&self) -> Vec<FakeInstance> {
        self.state().instances.values().cloned().collect()
    }

    /// Sleeps this long in every call before recording it (upstream `RequestDelay`).
    pub fn set_delay(&self, delay: Duration) {
        self.state().delay = delay;
    }

    /// The ingress IP that `ensure_load_balancer` reports (default `192.0.2.10`) and its `ipMode` (default
    /// none).
    pub fn set_ingress(&self, ip: impl Into<String>, ip_mode: Option<&str>) {
        let mut s = self.state();
        s.external_ip = ip.into();
        s.ip_mode = ip_mode.map(str::to_owned);
    }

    /// Makes `drifted` report the load balancer of `service_key` (`namespace/name`) as changed by hand (`what`),
    /// until the next ensure of that Service repairs it.
    pub fn set_drift(&self, service_key: impl Into<String>, what: Vec<String>) {
        self.state().drift.insert(service_key.into(), what);
    }

    /// The notices every `ensure_load_balancer_reporting` returns (default none).
    pub fn set_load_balancer_notices(&self, notices: Vec<Notice>) {
        self.state().notices = notices;
    }

    /// Makes calls of `method` fail with `make()`: the next `times` calls, or every call with `None`.
    /// Failures are matched in the order they were added.
    pub fn fail(
        &self,
        method: Method,
        times: Option<u32>,
        make: impl Fn() -> CloudError + Send + Sync + 'static,
    ) {
        self.state().failures.push(Failure {
            method,
            subject: None,
            remaining: times,
            make: Arc::new(make),
        });
    }

    /// Like [`FakeProvider::fail`], but only for calls about `subject` (a node name, a Service's
    /// `namespace/name`, a CIDR). Inside a batch it fails that node's entry only.
    pub fn fail_for(
        &self,
        method: Method,
        subject: impl Into<String>,
        times: Option<u32>,
        make: impl Fn() -> CloudError + Send + Sync + 'static,
    ) {
        self.state().failures.push(Failure {
            method,
            subject: Some(subject.into()),
            remaining: times,
            make: Arc::new(make),
        });
    }

    /// Removes every injected failure.
    pub fn clear_failures(&self) {
        self.state().failures.clear();
    }

    /// Every call so far, in order.
    pub fn calls(&self) -> Vec<Call> {
        self.state().calls.clone()
    }

    /// How many calls of `method` were made.
    pub fn count(&self, method: Method) -> usize {
        self.state().calls.iter().filter(|c| c.method == method).count()
    }

    /// How many calls were made in total (a batch counts once).
    pub fn total_calls(&self) -> usize {
        self.state().calls.len()
    }

    /// The sizes of the batch calls of `method`, in order.
    pub fn batch_sizes(&self, method: Method) -> Vec<usize> {
        self.state()
            .calls
            .iter()
            .filter(|c| c.method == method)
            .map(|c| c.batch_size)
            .collect()
    }

    /// Forgets the recorded calls.
    pub fn clear_calls(&self) {
        self.state().calls.clear();
    }

    /// The load balancers, keyed by `namespace/name`.
    pub fn load_balancers(&self) -> BTreeMap<String, FakeLoadBalancer> {
        self.state().load_balancers.clone()
    }

    /// The UIDs of every `ensure_predecessor_load_balancer_deleted` call so far, in order: (predecessor,
    /// successor).
    pub fn predecessor_deletions(&self) -> Vec<(String, String)> {
        self.state().predecessor_deletions.clone()
    }

    /// Adds a load balancer as if an earlier ensure had made it.
    pub fn add_load_balancer(&self, service_key: impl Into<String>, lb: FakeLoadBalancer) {
        self.state().load_balancers.insert(service_key.into(), lb);
    }

    /// The routes of every cluster, as `(cluster, route)`.
    pub fn route_list(&self) -> Vec<(String, Route)> {
        self.state().routes.clone()
    }

    /// Adds a route to a cluster as is (its name included).
    pub fn add_route(&self, cluster_name: impl Into<String>, route: Route) {
        self.state().routes.push((cluster_name.into(), route));
    }

    /// Waits the configured delay, records the call and returns an injected failure if one matches.
    async fn record(&self, method: Method, subject: &str, batch_size: usize) -> Result<(), CloudError> {
        let delay = self.state().delay;
        if !delay.is_zero() {
            tokio::time::sleep(delay).await;
        }
        let mut s = self.state();
        s.calls.push(Call {
            method,
            subject: subject.to_owned(),
            batch_size,
        });
        s.take_failure(method, Some(subject))
    }

    fn find<'a>(s: &'a State, node: &NodeView) -> Option<&'a FakeInstance> {
        let provider_id = node.provider_id.as_deref().unwrap_or_default();
        if provider_id.is_empty() {
            s.instances.get(&node.name)
        } else {
            s.instances.values().find(|i| i.provider_id == provider_id)
        }
    }

    fn by_provider_id<'a>(s: &'a State, provider_id: &str) -> Option<&'a FakeInstance> {
        s.instances.values().find(|i| i.provider_id == provider_id)
    }

    fn answer_exists(s: &State, node: &NodeView) -> Result<bool, CloudError> {
        Ok(Self::find(s, node).is_some())
    }

    fn answer_shutdown(s: &State, node: &NodeView) -> Result<bool, CloudError> {
        Self::find(s, node)
            .map(|i| i.shutdown)
            .ok_or(CloudError::InstanceNotFound)
    }

    fn answer_metadata(s: &State, node: &NodeView) -> Result<Option<InstanceMetadata>, CloudError> {
        Self::find(s, node)
            .map(|i| i.metadata.clone())
            .ok_or(CloudError::InstanceNotFound)
    }

    async fn batch<T>(
        &self,
        method: Method,
        single: Method,
        nodes: &[&NodeView],
        answer: fn(&State, &NodeView) -> Result<T, CloudError>,
    ) -> Vec<Result<T, CloudError>> {
        let whole = self.record(method, "", nodes.len()).await;
        let mut s = self.state();
        nodes
            .iter()
            .map(|node| {
                if let Err(e) = &whole {
                    return Err(CloudError::other(e.to_string()));
                }
                s.take_subject_failure(single, &node.name)
                    .map_or_else(|| answer(&s, node), Err)
            })
            .collect()
    }
}

mod capabilities;
#[cfg(test)]
mod tests;
