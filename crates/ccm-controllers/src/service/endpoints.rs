//! The endpoints of the Services whose load balancer follows them ([`LoadBalancer::follows_endpoints`]): one
//! watch of EndpointSlices, started when the first such Service is synced (a cluster that has none pays
//! nothing), kept as a compact projection (addresses, conditions, node, zone, ports; nothing else of a slice).
//!
//! The API version is the served one: `discovery.k8s.io/v1`, or `v1beta1` on clusters older than 1.21 (the
//! test apiserver, 1.20, serves only that). Both are read as JSON into the same projection, since the fields
//! read have the same names and meaning in both but for where a `v1beta1` slice keeps the node and zone (its
//! `topology` map, before `nodeName` and `zone` existed).
//!
//! [`LoadBalancer::follows_endpoints`]: ccm_cloud_provider::LoadBalancer::follows_endpoints

use std::{
    collections::{BTreeMap, HashMap, HashSet},
    net::IpAddr,
    sync::Mutex,
    time::Duration,
};

use ccm_cloud_provider::{Endpoint, EndpointPort, ServiceEndpoints};
use futures::StreamExt;
use kube::{
    Api, Client,
    api::{ApiResource, DynamicObject, GroupVersionKind},
    runtime::{WatchStreamExt, watcher},
};
use serde::Deserialize;
use tokio::sync::{Notify, watch};

use super::lock;
use crate::Error;

/// How long a sync waits for the first listing of EndpointSlices.
pub(super) const FIRST_LISTING_WAIT: Duration = Duration::from_secs(30);

/// The label the EndpointSlice controller names a slice's Service with.
pub(super) const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";

/// The label naming who manages a slice, and the endpoint-slice controller's value: only its slices list the
/// pods a Service's selector chose (`Endpoint::managed`).
const MANAGED_BY_LABEL: &str = "endpointslice.kubernetes.io/managed-by";
const SLICE_CONTROLLER: &str = "endpointslice-controller.k8s.io";

/// A Service, by namespace and name.
pub(super) type ServiceName = (String, String);

/// The EndpointSlices of the cluster, as far as load balancers read them; see the module's docs.
pub(super) struct EndpointSlices {
    projection: Mutex<Projection>,
    /// The Services whose slices changed since the last [`EndpointSlices::take_changed`].
    changed: Mutex<HashSet<ServiceName>>,
    /// Woken when `changed` gains a Service.
    pub(super) changes: Notify,
    /// Set once, by the first Service that follows its endpoints: the watch starts then.
    start: watch::Sender<bool>,
    /// Whether the watch has listed every slice once (its first `InitDone`).
    synced: watch::Sender<bool>,
}

/// The slices kept, by Service and by slice.
#[derive(Debug, Default, Clone)]
struct Projection {
    /// Each Service's slices (by slice name) with their endpoints.
    by_service: HashMap<ServiceName, BTreeMap<String, Vec<Endpoint>>>,
    /// Each slice's Service (namespace and slice name to Service name).
    by_slice: HashMap<(String, String), String>,
}

/// One slice as read: its namespace and name, its Service, its endpoints.
#[derive(Debug, Clone, PartialEq)]
struct Slice {
    namespace: String,
    name: String,
    service: String,
    endpoints: Vec<Endpoint>,
}

impl Default for EndpointSlices {
    fn default() -> Self {
        Self {
            projection: Mutex::default(),
            changed: Mutex::default(),
            changes: Notify::new(),
            start: watch::channel(false).0,
            synced: watch::channel(false).0,
        }
    }
}

// === impl EndpointSlices ===

impl EndpointSlices {
    /// The endpoints of the Service `namespace/name`, once the watch has listed every slice: starts the watch
    /// if nothing did yet, and waits for its first listing, at most [`FIRST_LISTING_WAIT`]. A listing that does
    /// not come (the service controller may not list EndpointSlices: RBAC from before this watch) fails the
    /// caller's sync, which is retried with backoff, rather than holding the Service's lock.
    pub(super) async fn of(&self, namespace: &str, name: &str) -> Result<ServiceEndpoints, Error> {
        self.start
            .send_if_modified(|started| !std::mem::replace(started, true));
        let mut synced = self.synced.subscribe();
        // The channel is never closed while `self` lives (the sender is ours): only the timeout can fail.
        if tokio::time::timeout(FIRST_LISTING_WAIT, synced.wait_for(|synced| *synced))
            .await
            .is_err()
        {
            return Err(Error::DeadlineExceeded {
                what: "the first listing of EndpointSlices (the service controller needs `list` and `watch` on \
                       `endpointslices` of `discovery.k8s.io`; the log says why the watch failed)",
                deadline: FIRST_LISTING_WAIT,
            });
        }
        Ok(lock(&self.projection).endpoints_of(namespace, name))
    }

    /// The Services whose endpoints changed since the last call.
    pub(super) fn take_changed(&self) -> HashSet<ServiceName> {
        std::mem::take(&mut *lock(&self.changed))
    }

    /// Runs the watch once a Service asked for endpoints; never returns. Watch errors are logged and retried
    /// with kube-runtime's default backoff.
    pub(super) async fn run(&self, client: Client) {
        let mut start = self.start.subscribe();
        let _ = start.wait_for(|started| *started).await;
        let resource = served_version(&client).await;
        tracing::info!(api_version = %resource.api_version, "watching EndpointSlices for load balancers that follow endpoints");
        let api: Api<DynamicObject> = Api::all_with(client, &resource);
        let stream = watcher(api, watcher::Config::default()).default_backoff();
        let mut stream = std::pin::pin!(stream);
        let mut relist: Option<Projection> = None;
        while let Some(event) = stream.next().await {
            match event {
                Ok(event) => self.apply(event, &mut relist),
                Err(error) => tracing::warn!(%error, "EndpointSlice watch failed; retrying"),
            }
        }
    }

    /// One watch event into the projection. A relist (`Init` .. `InitDone`) is gathered apart and replaces the
    /// projection at its end, so that a slice deleted while the watch was down goes too.
    fn apply(&self, event: watcher::Event<DynamicObject>, relist: &mut Option<Projection>) {
        let changed = match event {
            watcher::Event::Init => {
                *relist = Some(Projection::default());
                Vec::new()
            }
            watcher::Event::InitApply(obj) => {
                if let (Some(listed), Some(slice)) = (relist.as_mut(), read_slice(&obj)) {
                    listed.insert(slice);
                }
                Vec::new()
            }
            watcher::Event::InitDone => {
                let listed = relist.take().unwrap_or_default();
                let old = std::mem::replace(&mut *lock(&self.projection), listed.clone());
                let changed = old.differences(&listed);
                self.synced
                    .send_if_modified(|synced| !std::mem::replace(synced, true));
                changed
            }
            watcher::Event::Apply(obj) => match read_slice(&obj) {
                Some(slice) => lock(&self.projection).insert(slice),
                None => {
                    let (namespace, name) = slice_key(&obj);
                    lock(&self.projection).remove(&namespace, &name)
                }
            },
            watcher::Event::Delete(obj) => {
                let (namespace, name) = slice_key(&obj);
                lock(&self.projection).remove(&namespace, &name)
            }
        };
        if !changed.is_empty() {
            lock(&self.changed).extend(changed);
            self.changes.notify_one();
        }
    }
}

// === impl Projection ===

impl Projection {
    fn endpoints_of(&self, namespace: &str, name: &str) -> ServiceEndpoints {
        let key = (namespace.to_owned(), name.to_owned());
        let slices = self.by_service.get(&key);
        ServiceEndpoints::new(slices.into_iter().flat_map(|s| s.values().flatten().cloned()))
    }

    /// Keeps `slice` in place of what its name held: the Services whose endpoints that changed.
    fn insert(&mut self, slice: Slice) -> Vec<ServiceName> {
        let service = (slice.namespace.clone(), slice.service.clone());
        let slice_key = (slice.namespace, slice.name.clone());
        let mut changed = Vec::new();
        if let Some(old) = self.by_slice.insert(slice_key.clone(), slice.service)
            && old != service.1
        {
            // Moved to another Service (a label rewritten by hand): gone from the old one.
            changed.extend(self.remove_from(&(slice_key.0.clone(), old), &slice_key.1));
        }
        let slices = self.by_service.entry(service.clone()).or_default();
        if slices.get(&slice.name) != Some(&slice.endpoints) {
            slices.insert(slice.name, slice.endpoints);
            changed.push(service);
        }
        changed
    }

    /// Forgets the slice `namespace/name`: its Service, if it had one.
    fn remove(&mut self, namespace: &str, name: &str) -> Vec<ServiceName> {
        let Some(service) = self.by_slice.remove(&(namespace.to_owned(), name.to_owned())) else {
            return Vec::new();
        };
        self.remove_from(&(namespace.to_owned(), service), name)
            .into_iter()
            .collect()
    }

    fn remove_from(&mut self, service: &ServiceName, slice: &str) -> Option<ServiceName> {
        let slices = self.by_service.get_mut(service)?;
        slices.remove(slice)?;
        if slices.is_empty() {
            self.by_service.remove(service);
        }
        Some(service.clone())
    }

    /// The Services whose slices differ between `self` and `other`.
    fn differences(&self, other: &Self) -> Vec<ServiceName> {
        let mut changed: Vec<ServiceName> = self
            .by_service
            .iter()
            .filter(|(service, slices)| other.by_service.get(*service) != Some(*slices))
            .map(|(service, _)| service.clone())
            .collect();
        changed.extend(
            other
                .by_service
                .keys()
                .filter(|service| !self.by_service.contains_key(*service))
                .cloned(),
        );
        changed
    }
}

/// The endpoints of the Service `namespace/name` as its EndpointSlices say now, read as the watch reads them
/// (one list of the served version, the slices labelled with the Service's name): what the service controller
/// would hand a load balancer that follows them. For tools that plan one Service without the controller
/// (`lb-plan`).
///
/// # Errors
///
/// The list's error (RBAC: `list` on `endpointslices` in the namespace).
pub async fn list_service_endpoints(
    client: &Client,
    namespace: &str,
    name: &str,
) -> Result<ServiceEndpoints, kube::Error> {
    let resource = served_version(client).await;
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, &resource);
    let params = kube::api::ListParams::default().labels(&format!("{SERVICE_NAME_LABEL}={name}"));
    let slices = api.list(&params).await?;
    Ok(ServiceEndpoints::new(
        slices
            .items
            .iter()
            .filter_map(read_slice)
            .filter(|slice| slice.service == name)
            .flat_map(|slice| slice.endpoints),
    ))
}

/// `discovery.k8s.io/v1` where the apiserver serves it, else `v1beta1`.
async fn served_version(client: &Client) -> ApiResource {
    let version = match client.list_api_group_resources("discovery.k8s.io/v1").await {
        Ok(list) if list.resources.iter().any(|r| r.name == "endpointslices") => "v1",
        _ => "v1beta1",
    };
    let gvk = GroupVersionKind::gvk("discovery.k8s.io", version, "EndpointSlice");
    ApiResource::from_gvk_with_plural(&gvk, "endpointslices")
}

fn slice_key(obj: &DynamicObject) -> (String, String) {
    (
        obj.metadata.namespace.clone().unwrap_or_default(),
        obj.metadata.name.clone().unwrap_or_default(),
    )
}

/// A slice as kept; `None` for one that names no Service (not the EndpointSlice controller's) or does not read.
fn read_slice(obj: &DynamicObject) -> Option<Slice> {
    let labels = obj.metadata.labels.as_ref()?;
    let service = labels.get(SERVICE_NAME_LABEL)?.clone();
    let managed = labels.get(MANAGED_BY_LABEL).map(String::as_str) == Some(SLICE_CONTROLLER);
    let data = match SliceData::deserialize(&obj.data) {
        Ok(data) => data,
        Err(error) => {
            tracing::warn!(slice = ?slice_key(obj), %error, "an EndpointSlice does not read; its endpoints are left out");
            return None;
        }
    };
    let (namespace, name) = slice_key(obj);
    Some(Slice {
        namespace,
        name,
        service,
        endpoints: data.endpoints(managed),
    })
}

/// The fields of an EndpointSlice (`v1` or `v1beta1`) that are kept.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct SliceData {
    #[serde(default)]
    address_type: String,
    #[serde(default)]
    endpoints: Vec<SliceEndpoint>,
    #[serde(default)]
    ports: Vec<SlicePort>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct SliceEndpoint {
    #[serde(default)]
    addresses: Vec<String>,
    #[serde(default)]
    conditions: SliceConditions,
    node_name: Option<String>,
    zone: Option<String>,
    /// `v1beta1` only (`deprecatedTopology` in `v1`, which has `nodeName` and `zone` instead).
    #[serde(default)]
    topology: BTreeMap<String, String>,
}

#[derive(Debug, Default, Deserialize)]
struct SliceConditions {
    ready: Option<bool>,
    serving: Option<bool>,
    terminating: Option<bool>,
}

#[derive(Debug, Deserialize)]
struct SlicePort {
    name: Option<String>,
    port: Option<i32>,
    protocol: Option<String>,
}

// === impl SliceData ===

impl SliceData {
    /// Its endpoints with its ports; none for an `FQDN` slice, and no port without a number (a slice's "all
    /// ports", which a load balancer cannot register); `managed` when the endpoint-slice controller wrote it.
    fn endpoints(&self, managed: bool) -> Vec<Endpoint> {
        if self.address_type != "IPv4" && self.address_type != "IPv6" {
            return Vec::new();
        }
        let ports: Vec<EndpointPort> = self
            .ports
            .iter()
            .filter_map(|p| {
                let port = u16::try_from(p.port?).ok()?;
                let protocol = p.protocol.clone().unwrap_or_else(|| "TCP".to_owned());
                Some(EndpointPort::new(
                    p.name.clone().unwrap_or_default(),
                    port,
                    protocol,
                ))
            })
            .collect();
        let mut out = Vec::new();
        for endpoint in &self.endpoints {
            let ready = endpoint.conditions.ready.unwrap_or(true);
            let serving = endpoint.conditions.serving.unwrap_or(ready);
            let terminating = endpoint.conditions.terminating.unwrap_or(false);
            let node = endpoint.node_name.as_deref().or_else(|| {
                endpoint
                    .topology
                    .get("kubernetes.io/hostname")
                    .map(String::as_str)
            });
            let zone = endpoint.zone.as_deref().or_else(|| {
                endpoint
                    .topology
                    .get("topology.kubernetes.io/zone")
                    .map(String::as_str)
            });
            for address in &endpoint.addresses {
                let Ok(address) = address.parse::<IpAddr>() else {
                    continue;
                };
                out.push(
                    Endpoint::ready(address, node, ports.clone())
                        .with_conditions(ready, serving, terminating)
                        .in_zone(zone)
                        .managed(managed),
                );
            }
        }
        out
    }
}

#[cfg(test)]
mod tests;
