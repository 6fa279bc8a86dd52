//! [`AwsInstances`]: the contract's `InstancesV2` over the EC2 port, every method batched.

use std::{
    collections::{BTreeMap, BTreeSet, HashMap},
    net::IpAddr,
    panic::AssertUnwindSafe,
    sync::{Arc, Mutex, PoisonError},
    time::{Duration, SystemTime},
};

use ccm_aws_api::{
    Catalog, CatalogInstance, Ec2, InstanceCatalog, InstanceId, InstanceRef, ProviderId, ProviderIdError,
    ProviderIdReason, VpcId,
    ec2::{InstanceState, NetworkInterface},
};
use ccm_cloud_provider::{CloudError, InstanceMetadata, InstancesV2, NodeView, Result as CloudResult};
use ccm_tagging::ClusterTags;
use regex::Regex;

use crate::{
    InstancesError,
    addresses::{IpFamily, fargate_addresses, instance_addresses},
    topology::{NETWORK_NODE_LAYER_PREFIX, UnsupportedStore, network_node_labels},
    zone_form::ZoneForm,
};

use listing::ClusterListing;
pub use listing::{INSTANCES_PER_PAGE, LISTING_REUSE};
use lookup::Reuse;
use regions::Away;

/// The zone ID label (`use1-az1`), the same physical zone in every account.
pub const ZONE_ID_LABEL: &str = "topology.k8s.aws/zone-id";

/// The default `SupportedTopologyInstanceTypePattern`: types that must report a topology.
pub const DEFAULT_TOPOLOGY_PATTERN: &str = r"^(hpc|trn|p)[0-9]+[a-z]*(-[a-z0-9]+)?(\.[0-9a-z]*)$";

/// How recent a read of an instance (by this provider or any other reader of its instance catalog: the load
/// balancers, the membership guard) answers node initialization and the address refresh: a joining Node's
/// instance, just read by another reader, is not read again. Existence and shutdown checks always read.
pub const RECENT_READ: Duration = Duration::from_secs(30);

/// Instance IDs per `instances_by_id` call (DescribeInstances accepts 1,000).
pub const IDS_PER_LOOKUP: usize = 1000;

/// Values per EC2 filter (AWS accepts 200).
pub const VALUES_PER_FILTER: usize = 200;

/// How long a topology lookup may hold up the initialization of nodes whose instance types do not match
/// `SupportedTopologyInstanceTypePattern` (their topology labels are best effort).
pub const BEST_EFFORT_TOPOLOGY: Duration = Duration::from_secs(3);

/// What the controller does not do for a Node whose instance lacks the cluster tag (the end of
/// [`InstanceMetadata::not_in_cluster`]).
pub const NOT_IN_CLUSTER_CONSEQUENCE: &str = "the controller does not register it with load balancers, open its \
     security groups, route to it or tag it; tag the instance for this cluster if the Node is one of its own";

/// The states a node name may match (all but terminated), as upstream.
const LIVE_STATES: [&str; 5] = ["pending", "running", "shutting-down", "stopping", "stopped"];

/// What [`AwsInstances`] needs to know about the cluster.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct InstancesConfig {
    /// The region, reported as every node's region.
    pub region: String,
    /// `NodeIPFamilies`: the order of address families (default `[Ipv4]`).
    pub node_ip_families: Vec<IpFamily>,
    /// `SupportedTopologyInstanceTypePattern`: types whose missing topology is retried per instance and whose
    /// topology errors fail initialization.
    pub topology_instance_types: Regex,
    /// The cluster's tags: instances found by private DNS name must carry them (as upstream). `None` accepts any.
    pub cluster: Option<ClusterTags>,
    /// The cluster's VPC: Fargate interfaces are looked for there only. `None` looks in every VPC.
    pub vpc_id: Option<VpcId>,
    /// Whether many private DNS names may be answered by one listing of the cluster (default true). Off, names
    /// are always asked by name, 200 a call, as the Go provider does: only for measuring its call pattern.
    pub cluster_listing: bool,
    /// What the zone reported for a Node holds (`NodeZoneLabel`): the zone name (default) or the zone ID.
    pub zone_form: ZoneForm,
}

/// InstancesV2 for AWS, generic over the EC2 port. See the crate documentation for the rules.
#[derive(Debug)]
pub struct AwsInstances<E> {
    /// The EC2 port with the instance catalog in front: every instance read teaches it, and lookups by ID are
    /// answered from it when recent enough. The port is shared with the task that reads a listing ahead.
    ec2: Catalog<Arc<E>>,
    config: InstancesConfig,
    zone_ids: Mutex<HashMap<String, String>>,
    zone_refresh: tokio::sync::Mutex<()>,
    unsupported_topology: Mutex<UnsupportedStore>,
    /// Shared with the timer that drops it once too old (see [`AwsInstances::new`]).
    listing: Arc<Mutex<ClusterListing>>,
    /// Held while a lookup or the read-ahead asks a page of the cluster listing (see `listing`). It guards no
    /// data, so a panic while it is held leaves nothing half-written: asserting unwind safety keeps
    /// `AwsInstances` as unwind-safe as it was before the lock was shared.
    listing_pages: Arc<AssertUnwindSafe<tokio::sync::Mutex<()>>>,
}

/// How a node is looked up.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Target {
    Ec2(InstanceId),
    DnsName(String),
    Fargate { name: String, ip: IpAddr },
}

/// What a lookup found.
#[derive(Debug, Clone)]
enum Found {
    Instance(Arc<CatalogInstance>),
    Interface(Box<NetworkInterface>),
    Missing,
}

type Lookup = Result<Found, InstancesError>;

// === impl InstancesConfig ===

impl InstancesConfig {
    /// The defaults of a region: IPv4 addresses, the default topology pattern, no cluster tag, no VPC.
    pub fn new(region: impl Into<String>) -> Self {
        Self {
            region: region.into(),
            node_ip_families: vec![IpFamily::Ipv4],
            topology_instance_types: default_topology_pattern(),
            cluster: None,
            vpc_id: None,
            cluster_listing: true,
            zone_form: ZoneForm::Name,
        }
    }

    /// Sets what the reported zone holds: the zone name (default) or the zone ID. The provider ID names the zone
    /// by name either way (`aws:///us-east-1a/i-...`, the form every reader of provider IDs expects).
    #[must_use]
    pub fn with_zone_form(mut self, form: ZoneForm) -> Self {
        self.zone_form = form;
        self
    }

    /// Sets the address families.
    #[must_use]
    pub fn with_node_ip_families(mut self, families: Vec<IpFamily>) -> Self {
        self.node_ip_families = families;
        self
    }

    /// Sets the topology type pattern.
    #[must_use]
    pub fn with_topology_instance_types(mut self, pattern: Regex) -> Self {
        self.topology_instance_types = pattern;
        self
    }

    /// Sets the cluster's tags.
    #[must_use]
    pub fn with_cluster(mut self, cluster: ClusterTags) -> Self {
        self.cluster = Some(cluster);
        self
    }

    /// Sets the cluster's VPC.
    #[must_use]
    pub fn with_vpc_id(mut self, vpc_id: VpcId) -> Self {
        self.vpc_id = Some(vpc_id);
        self
    }
}

#[allow(clippy::expect_used)]
fn default_topology_pattern() -> Regex {
    // A constant pattern, covered by the tests.
    Regex::new(DEFAULT_TOPOLOGY_PATTERN).expect("the default topology pattern is valid")
}

// === impl AwsInstances ===

impl<E: Ec2 + Send + Sync + 'static> AwsInstances<E> {
    /// Instances over `ec2` with `config`.
    ///
    /// Their instance reads go through an instance catalog of their own, keeping instances for
    /// [`LISTING_REUSE`]; give them the catalog every reader shares with [`AwsInstances::with_instance_catalog`].
    /// Within a Tokio runtime, a timer drops the catalog's expired entries and a cluster listing once older than
    /// [`LISTING_REUSE`] (without one, they go at the next lookup).
    pub fn new(ec2: E, config: InstancesConfig) -> Self {
        let catalog = Arc::new(InstanceCatalog::new().with_retention(LISTING_REUSE, Duration::ZERO));
        catalog.start_expiry();
        let listing = Arc::new(Mutex::default());
        ClusterListing::start_expiry(&listing);
        Self {
            ec2: catalog.over(Arc::new(ec2)),
            config,
            zone_ids: Mutex::default(),
            zone_refresh: tokio::sync::Mutex::new(()),
            unsupported_topology: Mutex::default(),
            listing,
            listing_pages: Arc::new(AssertUnwindSafe(tokio::sync::Mutex::new(()))),
        }
    }

    /// Reads instances through `catalog`, shared with the other controllers (which must keep instances for
    /// [`LISTING_REUSE`] at least), instead of a catalog of their own.
    #[must_use]
    pub fn with_instance_catalog(mut self, catalog: &Arc<InstanceCatalog>) -> Self {
        let (ec2, _) = self.ec2.into_parts();
        self.ec2 = catalog.over(ec2);
        self
    }

    /// Allows (the default) or forbids listing the cluster for many names (see [`InstancesConfig`]).
    #[must_use]
    pub fn with_cluster_listing(mut self, on: bool) -> Self {
        self.config.cluster_listing = on;
        self
    }

    /// The EC2 port.
    pub fn ec2(&self) -> &E {
        self.ec2.inner().as_ref()
    }

    /// Metadata for `nodes`, in their order. Instance lookups cost one `instances_by_id` per 1,000 distinct IDs,
    /// one `instances` per 200 distinct private DNS names (or one cluster-wide listing when that is fewer calls
    /// and the cluster tag is known; names it found running answer later batches for [`LISTING_REUSE`]), one
    /// `network_interfaces` per 200 Fargate IPs; zone IDs cost one
    /// `availability_zones` when a zone is not cached yet; topology one `instance_topology` per batch.
    pub async fn metadata(
        &self,
        nodes: &[&NodeView],
    ) -> Vec<Result<Option<InstanceMetadata>, InstancesError>> {
        // Another Region's Node is another controller's to initialize: no metadata, so it is left as it is. A
        // Region that does not exist has no instance: not found, as an unknown instance of this Region.
        let away = |node: &NodeView, away: &Away| match away {
            Away::OtherRegion(_) => Ok(None),
            Away::NoRegion(_) => Err(not_found(node)),
        };
        self.in_region_only(nodes, away, |here| self.metadata_here(here))
            .await
    }

    async fn metadata_here(
        &self,
        nodes: Vec<&NodeView>,
    ) -> Vec<Result<Option<InstanceMetadata>, InstancesError>> {
        let nodes = nodes.as_slice();
        let targets: Vec<_> = nodes.iter().map(|n| target(n)).collect();
        // A listing older than a Node may name a dead instance that held its address (see `lookup`).
        let created: HashMap<String, SystemTime> = nodes
            .iter()
            .filter_map(|n| {
                let seconds = u64::try_from(n.creation_timestamp.as_ref()?.0.as_second()).ok()?;
                Some((
                    n.name.clone(),
                    SystemTime::UNIX_EPOCH + Duration::from_secs(seconds),
                ))
            })
            .collect();
        let found = self.find(&targets, true, Reuse::Recent(&created)).await;

        let live = |f: &Lookup| match f {
            Ok(Found::Instance(i)) if i.state != InstanceState::Terminated => Some(i.clone()),
            _ => None,
        };
        // Zone IDs for every zone of a node without the label, and of every node when the zone is reported by ID.
        let mut zones = BTreeSet::new();
        for (node, f) in nodes.iter().zip(&found) {
            if has_label(node, ZONE_ID_LABEL) && self.config.zone_form == ZoneForm::Name {
                continue;
            }
            let zone = match f {
                Ok(Found::Instance(i)) if i.state != InstanceState::Terminated => i.availability_zone.clone(),
                Ok(Found::Interface(eni)) => eni.availability_zone.clone(),
                _ => None,
            };
            zones.extend(zone.filter(|z| !z.is_empty()));
        }

        // Topology of EC2 instances without the labels.
        let candidates: Vec<(InstanceId, String)> = nodes
            .iter()
            .zip(&found)
            .filter(|(node, _)| !has_label(node, &format!("{NETWORK_NODE_LAYER_PREFIX}1")))
            .filter_map(|(_, f)| live(f))
            .filter(|i| !i.instance_type.is_empty())
            .map(|i| (i.id.clone(), i.instance_type.clone()))
            .collect();
        let (zone_ids, topology) = tokio::join!(self.zone_ids(&zones), self.topology(candidates));

        nodes
            .iter()
            .zip(found)
            .map(|(node, f)| self.node_metadata(node, f?, &zone_ids, &topology).map(Some))
            .collect()
    }

    /// The metadata of one node from what the batch found.
    fn node_metadata(
        &self,
        node: &NodeView,
        found: Found,
        zone_ids: &Result<HashMap<String, String>, InstancesError>,
        topology: &HashMap<InstanceId, Result<Vec<String>, InstancesError>>,
    ) -> Result<InstanceMetadata, InstancesError> {
        let meta = match found {
            Found::Missing => return Err(not_found(node)),
            Found::Instance(i) if i.state == InstanceState::Terminated => {
                return Err(not_found(node));
            }
            Found::Instance(i) => {
                let zone = i.availability_zone.clone().unwrap_or_default();
                let mut meta = InstanceMetadata {
                    provider_id: existing_provider_id(node).map_or_else(
                        || ProviderId::new(zone.as_str(), i.id.clone()).to_string(),
                        str::to_owned,
                    ),
                    instance_type: i.instance_type.clone(),
                    node_addresses: instance_addresses(&i, &self.config.node_ip_families)?,
                    zone,
                    region: self.config.region.clone(),
                    additional_labels: BTreeMap::new(),
                    not_in_cluster: self.config.cluster.as_ref().and_then(|c| {
                        c.not_member(&format!("instance {}", i.id), &i.cluster_tags())
                            .map(|why| format!("{why}: {NOT_IN_CLUSTER_CONSEQUENCE}"))
                    }),
                };
                if let Some(result) = topology.get(&i.id) {
                    meta.additional_labels
                        .extend(network_node_labels(result.clone()?.as_slice()));
                }
                meta
            }
            Found::Interface(eni) => {
                let zone = eni.availability_zone.clone().unwrap_or_default();
                // Only Fargate targets find an interface; the interface's own IP names it otherwise.
                let instance = match target(node) {
                    Ok(Target::Fargate { name, ip }) => Some(InstanceRef::Fargate { name, ip }),
                    _ => eni
                        .private_ips
                        .first()
                        .and_then(|ip| ip.parse().ok())
                        .map(|ip: IpAddr| InstanceRef::Fargate {
                            name: ip.to_string(),
                            ip,
                        }),
                };
                InstanceMetadata {
                    provider_id: existing_provider_id(node)
                        .map(str::to_owned)
                        .or_else(|| instance.map(|i| ProviderId::new(zone.as_str(), i).to_string()))
                        .unwrap_or_default(),
                    instance_type: String::new(),
                    node_addresses: fargate_addresses(&eni, &self.config.node_ip_families),
                    zone,
                    region: self.config.region.clone(),
                    additional_labels: BTreeMap::new(),
                    // A Fargate pod's interface is the cluster's by the profile that made it.
                    not_in_cluster: None,
                }
            }
        };
        self.with_zone_id(node, meta, zone_ids)
    }

    /// Whether each node's instance exists: `false` only for terminated instances and for none found. A
    /// malformed instance ID is an error, never "gone" (see `well_formed`).
    /// A Node of another Region exists as far as this controller knows (it cannot see that Region's
    /// instances), so it is never deleted; one whose zone is of no Region of the partition does not.
    pub async fn exists(&self, nodes: &[&NodeView]) -> Vec<Result<bool, InstancesError>> {
        let away = |_: &NodeView, away: &Away| Ok(matches!(away, Away::OtherRegion(_)));
        self.in_region_only(nodes, away, |here| self.exists_here(here))
            .await
    }

    async fn exists_here(&self, nodes: Vec<&NodeView>) -> Vec<Result<bool, InstancesError>> {
        let targets: Vec<_> = nodes.iter().map(|n| target(n).and_then(well_formed)).collect();
        self.find(&targets, true, Reuse::Never)
            .await
            .into_iter()
            .map(|f| {
                Ok(match f? {
                    Found::Instance(i) => i.state != InstanceState::Terminated,
                    Found::Interface(_) => true,
                    Found::Missing => false,
                })
            })
            .collect()
    }

    /// Whether each node's instance is shut down: `true` for stopped and stopping instances only. Fargate pods
    /// never are (no call is made for them); a missing instance is not shut down (it does not exist).
    /// A Node of another Region is not shut down as far as this controller knows (nor one of no Region: it
    /// does not exist).
    pub async fn shutdown(&self, nodes: &[&NodeView]) -> Vec<Result<bool, InstancesError>> {
        self.in_region_only(nodes, |_, _| Ok(false), |here| self.shutdown_here(here))
            .await
    }

    async fn shutdown_here(&self, nodes: Vec<&NodeView>) -> Vec<Result<bool, InstancesError>> {
        let targets: Vec<_> = nodes.iter().map(|n| target(n)).collect();
        self.find(&targets, false, Reuse::Never)
            .await
            .into_iter()
            .map(|f| {
                Ok(match f? {
                    Found::Instance(i) => matches!(i.state, InstanceState::Stopped | InstanceState::Stopping),
                    Found::Interface(_) | Found::Missing => false,
                })
            })
            .collect()
    }

    /// Adds the zone-ID label (unless the node has one) and, when zones are reported by ID, reports the zone so.
    /// A zone without an ID only loses the label by name, but fails the node by ID: a zone name among zone IDs
    /// would mix the forms for good (labels are written once).
    fn with_zone_id(
        &self,
        node: &NodeView,
        mut meta: InstanceMetadata,
        zone_ids: &Result<HashMap<String, String>, InstancesError>,
    ) -> Result<InstanceMetadata, InstancesError> {
        let by_id = self.config.zone_form == ZoneForm::Id;
        let labelled = has_label(node, ZONE_ID_LABEL);
        if meta.zone.is_empty() || (labelled && !by_id) {
            return Ok(meta);
        }
        match zone_ids.as_ref().map_err(Clone::clone)?.get(&meta.zone) {
            Some(id) => {
                if !labelled {
                    meta.additional_labels
                        .insert(ZONE_ID_LABEL.to_owned(), id.clone());
                }
                if by_id {
                    meta.zone = id.clone();
                }
            }
            None if by_id => {
                return Err(InstancesError::NoZoneId {
                    node: node.name.clone(),
                    zone: meta.zone,
                });
            }
            None => tracing::warn!(zone = %meta.zone, "could not get zone ID from zone name"),
        }
        Ok(meta)
    }

    /// The zone IDs of `zones`, refreshing the cache once when one is unknown.
    async fn zone_ids(&self, zones: &BTreeSet<String>) -> Result<HashMap<String, String>, InstancesError> {
        if zones.is_empty() {
            return Ok(HashMap::new());
        }
        let missing = |cache: &HashMap<String, String>| zones.iter().any(|z| !cache.contains_key(z));
        if missing(&self.zone_ids.lock().unwrap_or_else(PoisonError::into_inner)) {
            let _refresh = self.zone_refresh.lock().await;
            // Another batch may have refreshed while this one waited.
            if missing(&self.zone_ids.lock().unwrap_or_else(PoisonError::into_inner)) {
                let all = self.ec2.availability_zones().await.map_err(|e| {
                    InstancesError::aws("failed to describe availability zones for zone IDs", Arc::new(e))
                })?;
                let mut cache = self.zone_ids.lock().unwrap_or_else(PoisonError::into_inner);
                cache.extend(all.into_iter().map(|z| (z.name, z.zone_id)));
            }
        }
        let cache = self.zone_ids.lock().unwrap_or_else(PoisonError::into_inner);
        Ok(zones
            .iter()
            .filter_map(|z| cache.get(z).map(|id| (z.clone(), id.clone())))
            .collect())
    }
}

impl<E: Ec2 + Send + Sync + 'static> InstancesV2 for AwsInstances<E> {
    async fn instance_exists(&self, node: &NodeView) -> CloudResult<bool> {
        first(self.exists(&[node]).await)
    }

    async fn instance_shutdown(&self, node: &NodeView) -> CloudResult<bool> {
        first(self.shutdown(&[node]).await)
    }

    async fn instance_metadata(&self, node: &NodeView) -> CloudResult<Option<InstanceMetadata>> {
        first(self.metadata(&[node]).await)
    }

    async fn instance_metadata_batch(
        &self,
        nodes: &[&NodeView],
    ) -> Vec<CloudResult<Option<InstanceMetadata>>> {
        self.metadata(nodes).await.into_iter().map(to_cloud).collect()
    }

    async fn instance_exists_batch(&self, nodes: &[&NodeView]) -> Vec<CloudResult<bool>> {
        self.exists(nodes).await.into_iter().map(to_cloud).collect()
    }

    async fn instance_shutdown_batch(&self, nodes: &[&NodeView]) -> Vec<CloudResult<bool>> {
        self.shutdown(nodes).await.into_iter().map(to_cloud).collect()
    }
}

fn to_cloud<T>(r: Result<T, InstancesError>) -> CloudResult<T> {
    r.map_err(CloudError::from)
}

fn first<T>(results: Vec<Result<T, InstancesError>>) -> CloudResult<T> {
    results
        .into_iter()
        .next()
        .map_or_else(|| Err(CloudError::other("no result for the node")), to_cloud)
}

fn not_found(node: &NodeView) -> InstancesError {
    InstancesError::InstanceNotFound {
        node: node.name.clone(),
    }
}

/// How to look a node up: by its provider ID if it has one, else by its name.
fn target(node: &NodeView) -> Result<Target, InstancesError> {
    let to_target = |r: InstanceRef| match r {
        InstanceRef::Ec2(id) => Target::Ec2(id),
        InstanceRef::Fargate { name, ip } => Target::Fargate { name, ip },
    };
    if let Some(id) = existing_provider_id(node) {
        return Ok(to_target(ProviderId::parse(id)?.into_instance()));
    }
    let name = node.name.as_str();
    match InstanceRef::from_node_name(name) {
        Some(r) => Ok(to_target(r?)),
        None if name.is_empty() => Err(ProviderIdError::new(name, ProviderIdReason::Empty).into()),
        None => Ok(Target::DnsName(name.to_owned())),
    }
}

/// Refuses an EC2 instance ID that is not `i-` and 8 or 17 lowercase hexadecimal digits. EC2 answers such an
/// ID with `InvalidInstanceID.Malformed`, which the ID lookup treats like an unknown ID (it falls back to a
/// filter that ignores it), so without this a typo in a provider ID reads as "the instance is gone" and the
/// node-lifecycle controller deletes the Node.
fn well_formed(target: Target) -> Result<Target, InstancesError> {
    match &target {
        Target::Ec2(id) if !id.is_well_formed() => {
            Err(ProviderIdError::new(id.as_str(), ProviderIdReason::MalformedInstanceId).into())
        }
        _ => Ok(target),
    }
}

fn existing_provider_id(node: &NodeView) -> Option<&str> {
    node.provider_id.as_deref().filter(|id| !id.is_empty())
}

fn has_label(node: &NodeView, key: &str) -> bool {
    node.labels.contains_key(key)
}

mod listing;
mod lookup;
mod network_nodes;
mod regions;
#[cfg(test)]
mod tests;
