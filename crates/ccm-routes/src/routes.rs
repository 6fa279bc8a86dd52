//! [`AwsRoutes`]: the Routes capability over the EC2 port.

use std::{
    collections::{BTreeSet, HashMap, HashSet},
    fmt,
    net::IpAddr,
    sync::{Arc, Mutex, MutexGuard},
    time::Duration,
};

use ccm_aws_api::{
    Ec2, ErrorKind, Filter, InstanceId, RouteTableId, VpcId,
    ec2::{Route as Ec2Route, RouteState, RouteTable},
};
use ccm_cloud_provider::{CloudError, Route, Routes};
use ccm_tagging::{ClusterTags, LEGACY_CLUSTER_TAG};
use k8s_openapi::api::core::v1::Node;
use tokio::time::Instant;

use crate::{NoNodeNames, NodeNames, RoutesError};

/// Instance states a node's instance can be in (upstream's filter for name lookups; terminated ones excluded).
const LIVE_STATES: [&str; 5] = ["pending", "running", "shutting-down", "stopping", "stopped"];

/// How long the route tables read by the last `list_routes` are trusted by the creates and deletes that follow
/// it (the route controller lists, then changes, every 10 s).
const DEFAULT_SNAPSHOT_MAX_AGE: Duration = Duration::from_secs(30);

/// What [`AwsRoutes`] needs to know about the cluster.
#[derive(Debug, Clone)]
pub struct RoutesConfig {
    cluster: ClusterTags,
    route_table_ids: Vec<RouteTableId>,
    vpc_id: Option<VpcId>,
    snapshot_max_age: Duration,
}

/// The Routes capability for AWS: pod CIDR routes to instances in every route table of the cluster.
///
/// - Tables: those named in [`RoutesConfig::with_route_table_ids`] (the cloud config's `RouteTableID`), else every
///   table tagged `kubernetes.io/cluster/<id>` (any value) or `KubernetesCluster=<id>`, optionally only in one VPC.
///   Upstream insists on exactly one; here a route is reconciled in all of them, and counts as present only when
///   every table has it.
/// - `list_routes` reports IPv4 and IPv6 routes to instances that belong to known nodes (name from
///   [`NodeNames`], else the private DNS name of a cluster-tagged instance) and blackholed routes to instances or
///   network interfaces (name `<cluster>-<cidr>`, `blackhole: true`). Other routes are never reported, so the
///   route controller never deletes them.
/// - `create_route` disables the instance's source/destination check once, then per table: nothing if the route
///   is there, `ReplaceRoute` over a blackhole (never a moment without a route), `CreateRoute` otherwise; an
///   active route to something else is a [`RoutesError::Conflict`] and left alone.
/// - `delete_route` removes the CIDR's route from each table where it points at the listed instance (or, for a
///   blackhole, where it is blackholed); routes to gateways and other targets are never deleted.
///
/// AWS calls: one `DescribeRouteTables` per `list_routes`, plus one `DescribeInstances` (by ID, batched) only for
/// route targets that [`NodeNames`] does not know and that were not named before. Creates and deletes reuse the
/// tables of the last list while they are fresh.
pub struct AwsRoutes<E, N = NoNodeNames> {
    ec2: E,
    names: N,
    config: RoutesConfig,
    state: Mutex<State>,
    refresh: tokio::sync::Mutex<()>,
    cidr_locks: Mutex<HashMap<Cidr, Arc<tokio::sync::Mutex<()>>>>,
}

#[derive(Default)]
struct State {
    snapshot: Option<Snapshot>,
    /// Instances whose source/destination check this process turned off (or saw off).
    source_dest_disabled: HashSet<InstanceId>,
    /// Names found through EC2 (private DNS names of cluster-tagged instances): immutable, so cached.
    fallback_names: HashMap<InstanceId, String>,
    /// The instance each CIDR reported by the last list pointed at.
    listed: HashMap<Cidr, InstanceId>,
}

struct Snapshot {
    taken: Instant,
    tables: Vec<RouteTable>,
}

/// A parsed destination: equal CIDRs compare equal whatever their spelling (IPv6 compression).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
struct Cidr {
    ip: IpAddr,
    prefix: u8,
}

/// What a table holds for a CIDR.
#[derive(Debug, Clone, Copy)]
enum Existing<'a> {
    Absent,
    Blackhole(&'a Ec2Route),
    Instance(&'a InstanceId),
    Other(&'a Ec2Route),
}

/// What a create does in one table.
#[derive(Debug, Clone, PartialEq, Eq)]
enum CreateAction {
    Nothing,
    Create,
    Replace,
    Conflict(String),
}

// === impl RoutesConfig ===

impl RoutesConfig {
    /// Routes of cluster `cluster`, in the tables tagged for it.
    pub fn new(cluster: ClusterTags) -> Self {
        Self {
            cluster,
            route_table_ids: Vec::new(),
            vpc_id: None,
            snapshot_max_age: DEFAULT_SNAPSHOT_MAX_AGE,
        }
    }

    /// Use exactly these tables (the cloud config's `RouteTableID`), tagged or not. Empty: discover by tag.
    #[must_use]
    pub fn with_route_table_ids(mut self, ids: impl IntoIterator<Item = RouteTableId>) -> Self {
        self.route_table_ids = ids.into_iter().collect();
        self
    }

    /// Discover tagged tables in this VPC only (the cluster's VPC); by default in the whole region.
    #[must_use]
    pub fn with_vpc_id(mut self, vpc_id: VpcId) -> Self {
        self.vpc_id = Some(vpc_id);
        self
    }

    /// How long creates and deletes trust the tables read by the last list (default 30 s).
    #[must_use]
    pub fn with_snapshot_max_age(mut self, age: Duration) -> Self {
        self.snapshot_max_age = age;
        self
    }

    /// The cluster.
    pub fn cluster(&self) -> &ClusterTags {
        &self.cluster
    }
}

// === impl AwsRoutes ===

impl<E> AwsRoutes<E, NoNodeNames>
where
    E: Ec2 + Send + Sync,
{
    /// Routes over `ec2` (the adapter, cheap to clone) without node knowledge: see [`AwsRoutes::with_node_names`].
    pub fn new(ec2: E, config: RoutesConfig) -> Self {
        Self {
            ec2,
            names: NoNodeNames,
            config,
            state: Mutex::new(State::default()),
            refresh: tokio::sync::Mutex::new(()),
            cidr_locks: Mutex::new(HashMap::new()),
        }
    }
}

impl<E, N> AwsRoutes<E, N>
where
    E: Ec2 + Send + Sync,
    N: NodeNames,
{
    /// Maps instances to node names and back through `names` (the composition's node cache). Needed unless node
    /// names are private DNS names; see [`NodeNames`].
    pub fn with_node_names<M: NodeNames>(self, names: M) -> AwsRoutes<E, M> {
        AwsRoutes {
            ec2: self.ec2,
            names,
            config: self.config,
            state: self.state,
            refresh: self.refresh,
            cidr_locks: self.cidr_locks,
        }
    }

    /// The configuration.
    pub fn config(&self) -> &RoutesConfig {
        &self.config
    }

    /// The routes of this cluster in all its tables (see the type's documentation).
    pub async fn list(&self, cluster_name: &str) -> Result<Vec<Route>, RoutesError> {
        let tables = self.fetch_tables(cluster_name).await?;
        let per_table: Vec<HashMap<Cidr, &Ec2Route>> = tables.iter().map(routes_by_cidr).collect();
        let mut cidrs: BTreeSet<Cidr> = BTreeSet::new();
        let mut targets = BTreeSet::new();
        for route in per_table.iter().flat_map(HashMap::values) {
            if let Some((cidr, _)) = destination(route) {
                cidrs.insert(cidr);
            }
            if let Existing::Instance(id) = classify(Some(route)) {
                targets.insert(id.clone());
            }
        }
        let names = self.node_names(&targets).await?;
        let mut out = Vec::new();
        let mut listed = HashMap::new();
        for cidr in cidrs {
            let existing: Vec<Existing<'_>> = per_table
                .iter()
                .map(|t| classify(t.get(&cidr).copied()))
                .collect();
            // Reported in canonical form (RFC 5952 for IPv6), as Kubernetes writes pod CIDRs, since the route
            // controller compares the strings.
            let spelled = cidr.to_string();
            let spelled = spelled.as_str();
            let name = format!("{cluster_name}-{spelled}");
            if let Some(instance) = same_instance(&existing) {
                if let Some(node) = names.get(instance) {
                    listed.insert(cidr, instance.clone());
                    out.push(Route {
                        name,
                        target_node: node.clone(),
                        destination_cidr: spelled.to_owned(),
                        ..Route::default()
                    });
                } else {
                    tracing::debug!(cidr = spelled, %instance, "route to an instance of no known node: left alone");
                }
                continue;
            }
            let active_to_node = existing
                .iter()
                .any(|e| matches!(e, Existing::Instance(i) if names.contains_key(*i)));
            let blackholed = existing.iter().any(
                |e| matches!(e, Existing::Blackhole(r) if r.instance_id.is_some() || r.network_interface_id.is_some()),
            );
            if blackholed && !active_to_node {
                out.push(Route {
                    name,
                    destination_cidr: spelled.to_owned(),
                    blackhole: true,
                    ..Route::default()
                });
            } else if existing.iter().any(|e| matches!(e, Existing::Instance(_))) {
                tracing::debug!(
                    cidr = spelled,
                    "route missing from some route tables or inconsistent: reported absent so that it is created"
                );
            }
        }
        let live: HashSet<InstanceId> = targets.into_iter().collect();
        {
            let mut state = self.lock_state();
            state.listed = listed;
            state.fallback_names.retain(|id, _| live.contains(id));
        }
        self.store(tables);
        Ok(out)
    }

    /// Routes `route.destination_cidr` to the instance of `route.target_node` in every table of the cluster.
    pub async fn create(&self, cluster_name: &str, route: &Route) -> Result<(), RoutesError> {
        let (cidr, spelled) = parse_cidr(&route.destination_cidr)?;
        let instance = self.instance_of(&route.target_node).await?;
        self.disable_source_dest_check(&instance).await?;
        let lock = self.cidr_lock(cidr);
        let _serialized = lock.lock().await;
        let plan: Vec<(RouteTableId, CreateAction)> = self
            .with_tables(cluster_name, |tables| {
                tables
                    .iter()
                    .map(|t| (t.id.clone(), create_action(find(t, cidr), &instance)))
                    .collect()
            })
            .await?;
        let mut first_error = None;
        for (table, action) in plan {
            let result = match action {
                CreateAction::Nothing => Ok(()),
                CreateAction::Create => self.create_in(&table, cidr, spelled, &instance).await,
                CreateAction::Replace => self.replace_in(&table, cidr, spelled, &instance).await,
                CreateAction::Conflict(target) => Err(RoutesError::Conflict {
                    table: table.clone(),
                    cidr: spelled.to_owned(),
                    target,
                    wanted: instance.clone(),
                }),
            };
            match result {
                Ok(()) => {}
                Err(error) => {
                    tracing::warn!(%table, cidr = spelled, %error, "could not create route");
                    first_error.get_or_insert(error);
                }
            }
        }
        match first_error {
            None => {
                tracing::info!(cidr = spelled, node = route.target_node, %instance, "route in place");
                Ok(())
            }
            Some(error) => Err(error),
        }
    }

    /// Deletes the route for `route.destination_cidr` from every table of the cluster where it is this cluster's.
    pub async fn delete(&self, cluster_name: &str, route: &Route) -> Result<(), RoutesError> {
        let (cidr, spelled) = parse_cidr(&route.destination_cidr)?;
        let lock = self.cidr_lock(cidr);
        let _serialized = lock.lock().await;
        let expected = if route.blackhole {
            None
        } else {
            self.lock_state().listed.get(&cidr).cloned()
        };
        let tables: Vec<RouteTableId> = self
            .with_tables(cluster_name, |tables| {
                tables
                    .iter()
                    .filter(|t| deletable(find(t, cidr), route.blackhole, expected.as_ref()))
                    .map(|t| t.id.clone())
                    .collect()
            })
            .await?;
        let mut first_error = None;
        for table in tables {
            match self.ec2.delete_route(&table, spelled).await {
                Ok(()) => self.record(&table, cidr, spelled, None),
                Err(e) if e.kind() == ErrorKind::NotFound => self.record(&table, cidr, spelled, None),
                Err(e) => {
                    let error = RoutesError::aws(format!("failed to delete route {spelled} from {table}"), e);
                    tracing::warn!(%table, cidr = spelled, %error, "could not delete route");
                    first_error.get_or_insert(error);
                }
            }
        }
        if first_error.is_none() {
            self.lock_state().listed.remove(&cidr);
        }
        first_error.map_or(Ok(()), Err)
    }

    // --- tables ---

    /// Reads the cluster's tables from EC2 (one `DescribeRouteTables`).
    async fn fetch_tables(&self, cluster_name: &str) -> Result<Vec<RouteTable>, RoutesError> {
        let cluster = &self.config.cluster;
        let configured = &self.config.route_table_ids;
        let filters = if configured.is_empty() {
            // Tables carrying either cluster key; the exact rule (value of the legacy tag) is applied below.
            let mut f = vec![Filter::new(
                "tag-key",
                [cluster.key(), LEGACY_CLUSTER_TAG.to_owned()],
            )];
            if let Some(vpc) = &self.config.vpc_id {
                f.push(Filter::new("vpc-id", [vpc.as_str()]));
            }
            f
        } else {
            vec![Filter::new(
                "route-table-id",
                configured.iter().map(RouteTableId::as_str),
            )]
        };
        let mut tables = self
            .ec2
            .route_tables(&filters)
            .await
            .map_err(|e| RoutesError::aws("failed to describe route tables", e))?;
        if configured.is_empty() {
            tables.retain(|t| cluster.is_tagged(&t.tags));
        } else if let Some(id) = configured.iter().find(|id| !tables.iter().any(|t| t.id == **id)) {
            return Err(RoutesError::ConfiguredTableMissing { id: id.clone() });
        }
        if tables.is_empty() {
            return Err(RoutesError::NoRouteTable {
                cluster: cluster_name.to_owned(),
                cluster_id: cluster.id().to_owned(),
            });
        }
        tables.sort_by(|a, b| a.id.cmp(&b.id));
        Ok(tables)
    }

    fn store(&self, tables: Vec<RouteTable>) {
        self.lock_state().snapshot = Some(Snapshot {
            taken: Instant::now(),
            tables,
        });
    }

    /// `f` over the tables of the last list if fresh, else over newly read ones (one reader at a time).
    async fn with_tables<T>(
        &self,
        cluster_name: &str,
        f: impl Fn(&[RouteTable]) -> T,
    ) -> Result<T, RoutesError> {
        if let Some(out) = self.on_fresh_snapshot(&f) {
            return Ok(out);
        }
        let _one_reader = self.refresh.lock().await;
        if let Some(out) = self.on_fresh_snapshot(&f) {
            return Ok(out);
        }
        let tables = self.fetch_tables(cluster_name).await?;
        let out = f(&tables);
        self.store(tables);
        Ok(out)
    }

    fn on_fresh_snapshot<T>(&self, f: &impl Fn(&[RouteTable]) -> T) -> Option<T> {
        let state = self.lock_state();
        let snapshot = state.snapshot.as_ref()?;
        (snapshot.taken.elapsed() <= self.config.snapshot_max_age).then(|| f(&snapshot.tables))
    }

    /// Updates the snapshot after a change of ours: `cidr` in `table` now points at `target` (or is gone).
    fn record(&self, table: &RouteTableId, cidr: Cidr, spelled: &str, target: Option<&InstanceId>) {
        let mut state = self.lock_state();
        let Some(t) = state
            .snapshot
            .as_mut()
            .and_then(|s| s.tables.iter_mut().find(|t| t.id == *table))
        else {
            return;
        };
        t.routes.retain(|r| destination(r).is_none_or(|(c, _)| c != cidr));
        if let Some(instance) = target {
            let mut route = Ec2Route::to_instance(spelled, instance.clone());
            if cidr.ip.is_ipv6() {
                route.destination_ipv6_cidr = route.destination_cidr.take();
            }
            t.routes.push(route);
        }
    }

    /// Rereads one table after EC2 contradicted the snapshot; returns what it now holds for `cidr`.
    async fn reread(&self, table: &RouteTableId, cidr: Cidr) -> Result<Option<Ec2Route>, RoutesError> {
        let tables = self
            .ec2
            .route_tables(&[Filter::new("route-table-id", [table.as_str()])])
            .await
            .map_err(|e| RoutesError::aws(format!("failed to describe route table {table}"), e))?;
        let Some(fresh) = tables.into_iter().find(|t| t.id == *table) else {
            return Ok(None);
        };
        let now = find(&fresh, cidr).cloned();
        let mut state = self.lock_state();
        if let Some(t) = state
            .snapshot
            .as_mut()
            .and_then(|s| s.tables.iter_mut().find(|t| t.id == *table))
        {
            *t = fresh;
        }
        Ok(now)
    }

    // --- changes ---

    async fn create_in(
        &self,
        table: &RouteTableId,
        cidr: Cidr,
        spelled: &str,
        instance: &InstanceId,
    ) -> Result<(), RoutesError> {
        match self.ec2.create_route(table, spelled, instance).await {
            Ok(()) => {
                self.record(table, cidr, spelled, Some(instance));
                Ok(())
            }
            // The snapshot was stale: look again and decide once more (without another create).
            Err(e) if e.kind() == ErrorKind::Conflict => {
                let now = self.reread(table, cidr).await?;
                match create_action(now.as_ref(), instance) {
                    CreateAction::Nothing => Ok(()),
                    CreateAction::Replace => self.replace_in(table, cidr, spelled, instance).await,
                    CreateAction::Conflict(target) => Err(RoutesError::Conflict {
                        table: table.clone(),
                        cidr: spelled.to_owned(),
                        target,
                        wanted: instance.clone(),
                    }),
                    CreateAction::Create => Err(RoutesError::aws(
                        format!("error creating AWS route ({spelled}) in {table}"),
                        e,
                    )),
                }
            }
            Err(e) => Err(RoutesError::aws(
                format!("error creating AWS route ({spelled}) in {table}"),
                e,
            )),
        }
    }

    async fn replace_in(
        &self,
        table: &RouteTableId,
        cidr: Cidr,
        spelled: &str,
        instance: &InstanceId,
    ) -> Result<(), RoutesError> {
        match self.ec2.replace_route(table, spelled, instance).await {
            Ok(()) => {
                tracing::info!(%table, cidr = spelled, %instance, "replaced blackholed route");
                self.record(table, cidr, spelled, Some(instance));
                Ok(())
            }
            // The blackhole went away meanwhile: plain create.
            Err(e) if e.kind() == ErrorKind::NotFound => {
                match self.ec2.create_route(table, spelled, instance).await {
                    Ok(()) => {
                        self.record(table, cidr, spelled, Some(instance));
                        Ok(())
                    }
                    Err(e) => Err(RoutesError::aws(
                        format!("error creating AWS route ({spelled}) in {table}"),
                        e,
                    )),
                }
            }
            Err(e) => Err(RoutesError::aws(
                format!("error replacing blackholed AWS route ({spelled}) in {table}"),
                e,
            )),
        }
    }

    async fn disable_source_dest_check(&self, instance: &InstanceId) -> Result<(), RoutesError> {
        if self.lock_state().source_dest_disabled.contains(instance) {
            return Ok(());
        }
        self.ec2
            .set_source_dest_check(instance, false)
            .await
            .map_err(|e| {
                RoutesError::aws(
                    format!("failed to disable the source/destination check of instance {instance}"),
                    e,
                )
            })?;
        tracing::info!(%instance, "disabled the source/destination check");
        self.lock_state().source_dest_disabled.insert(instance.clone());
        Ok(())
    }

    // --- names ---

    /// The instance of node `node`: from [`NodeNames`], from an `i-...` name (text before the first dot), or the
    /// one live, cluster-tagged instance with that private DNS name.
    async fn instance_of(&self, node: &str) -> Result<InstanceId, RoutesError> {
        if let Some(id) = self.names.instance_id(node) {
            return Ok(id);
        }
        if node.starts_with("i-") {
            let id = node.split('.').next().unwrap_or(node);
            return Ok(InstanceId::new(id));
        }
        if node.is_empty() {
            return Err(RoutesError::InstanceNotFound { node: String::new() });
        }
        let filters = [
            Filter::new("private-dns-name", [node]),
            Filter::new("instance-state-name", LIVE_STATES),
        ];
        let mut found: Vec<_> = self
            .ec2
            .instances(&filters)
            .await
            .map_err(|e| RoutesError::aws(format!("failed to find the instance of node {node}"), e))?
            .into_iter()
            .filter(|i| self.config.cluster.is_tagged(&i.tags))
            .collect();
        match found.len() {
            0 => Err(RoutesError::InstanceNotFound {
                node: node.to_owned(),
            }),
            1 => {
                let instance = found.remove(0);
                if instance.source_dest_check == Some(false) {
                    self.lock_state().source_dest_disabled.insert(instance.id.clone());
                }
                Ok(instance.id)
            }
            _ => Err(RoutesError::MultipleInstances {
                node: node.to_owned(),
                ids: found.into_iter().map(|i| i.id).collect(),
            }),
        }
    }

    /// Node names of `instances`: [`NodeNames`] first, then names found before, then one `DescribeInstances` for
    /// the rest (cluster-tagged instances are named by their private DNS name; others stay unnamed).
    async fn node_names(
        &self,
        instances: &BTreeSet<InstanceId>,
    ) -> Result<HashMap<InstanceId, String>, RoutesError> {
        let mut out = HashMap::new();
        let mut unknown = Vec::new();
        {
            let state = self.lock_state();
            for id in instances {
                if let Some(name) = self.names.node_name(id) {
                    out.insert(id.clone(), name);
                } else if let Some(name) = state.fallback_names.get(id) {
                    out.insert(id.clone(), name.clone());
                } else {
                    unknown.push(id.clone());
                }
            }
        }
        if unknown.is_empty() {
            return Ok(out);
        }
        let described = self
            .ec2
            .instances_by_id(&unknown)
            .await
            .map_err(|e| RoutesError::aws("failed to describe the instances routes point at", e))?;
        let mut state = self.lock_state();
        for instance in described {
            if !self.config.cluster.is_tagged(&instance.tags) {
                tracing::debug!(instance = %instance.id, "route target is not tagged for this cluster: left alone");
                continue;
            }
            if let Some(name) = instance.private_dns_name {
                state.fallback_names.insert(instance.id.clone(), name.clone());
                out.insert(instance.id, name);
            }
        }
        Ok(out)
    }

    fn cidr_lock(&self, cidr: Cidr) -> Arc<tokio::sync::Mutex<()>> {
        let mut locks = self
            .cidr_locks
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        // Forget locks nobody holds, so the map stays as small as the operations in flight.
        locks.retain(|_, l| Arc::strong_count(l) > 1);
        locks.entry(cidr).or_default().clone()
    }

    fn lock_state(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl<E, N> Routes for AwsRoutes<E, N>
where
    E: Ec2 + Send + Sync,
    N: NodeNames,
{
    async fn list_routes(&self, cluster_name: &str) -> ccm_cloud_provider::Result<Vec<Route>> {
        self.list(cluster_name).await.map_err(CloudError::from)
    }

    async fn create_route(
        &self,
        cluster_name: &str,
        _name_hint: &str,
        route: &Route,
    ) -> ccm_cloud_provider::Result<()> {
        self.create(cluster_name, route).await.map_err(CloudError::from)
    }

    async fn delete_route(&self, cluster_name: &str, route: &Route) -> ccm_cloud_provider::Result<()> {
        self.delete(cluster_name, route).await.map_err(CloudError::from)
    }

    fn observe_nodes(&self, nodes: &[&Node]) {
        let pairs: Vec<(&str, Option<&str>)> = nodes
            .iter()
            .filter_map(|n| {
                let name = n.metadata.name.as_deref()?;
                Some((name, n.spec.as_ref().and_then(|s| s.provider_id.as_deref())))
            })
            .collect();
        self.names.observe(&pairs);
    }
}

impl<E, N> fmt::Debug for AwsRoutes<E, N> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AwsRoutes")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

// === impl Cidr ===

impl Cidr {
    fn parse(s: &str) -> Option<Self> {
        let (ip, prefix) = s.trim().split_once('/')?;
        let ip: IpAddr = ip.parse().ok()?;
        let prefix: u8 = prefix.parse().ok()?;
        let max = if ip.is_ipv4() { 32 } else { 128 };
        (prefix <= max).then_some(Self { ip, prefix })
    }
}

impl fmt::Display for Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.ip, self.prefix)
    }
}

// === helpers ===

fn parse_cidr(s: &str) -> Result<(Cidr, &str), RoutesError> {
    let trimmed = s.trim();
    Cidr::parse(trimmed)
        .map(|c| (c, trimmed))
        .ok_or_else(|| RoutesError::InvalidCidr { cidr: s.to_owned() })
}

/// The destination of a route (IPv4 or IPv6) and its spelling.
fn destination(r: &Ec2Route) -> Option<(Cidr, &str)> {
    let spelled = r
        .destination_cidr
        .as_deref()
        .or(r.destination_ipv6_cidr.as_deref())?;
    Cidr::parse(spelled).map(|c| (c, spelled))
}

fn routes_by_cidr(table: &RouteTable) -> HashMap<Cidr, &Ec2Route> {
    let mut out = HashMap::new();
    for route in &table.routes {
        if let Some((cidr, _)) = destination(route) {
            out.entry(cidr).or_insert(route);
        }
    }
    out
}

fn find(table: &RouteTable, cidr: Cidr) -> Option<&Ec2Route> {
    table
        .routes
        .iter()
        .find(|r| destination(r).is_some_and(|(c, _)| c == cidr))
}

fn classify(route: Option<&Ec2Route>) -> Existing<'_> {
    match route {
        None => Existing::Absent,
        Some(r) if r.state == RouteState::Blackhole => Existing::Blackhole(r),
        Some(r) => match &r.instance_id {
            Some(id) => Existing::Instance(id),
            None => Existing::Other(r),
        },
    }
}

/// The instance every table routes the CIDR to, when all agree and all are active.
fn same_instance<'a>(existing: &[Existing<'a>]) -> Option<&'a InstanceId> {
    let mut target = None;
    for e in existing {
        match e {
            Existing::Instance(id) if target.is_none_or(|t| t == *id) => target = Some(*id),
            _ => return None,
        }
    }
    target
}

fn create_action(route: Option<&Ec2Route>, instance: &InstanceId) -> CreateAction {
    match classify(route) {
        Existing::Absent => CreateAction::Create,
        Existing::Blackhole(_) => CreateAction::Replace,
        Existing::Instance(id) if id == instance => CreateAction::Nothing,
        Existing::Instance(id) => CreateAction::Conflict(format!("instance {id}")),
        Existing::Other(r) => CreateAction::Conflict(target_of(r)),
    }
}

fn target_of(r: &Ec2Route) -> String {
    if let Some(g) = &r.gateway_id {
        format!("gateway {g}")
    } else if let Some(eni) = &r.network_interface_id {
        format!("network interface {eni}")
    } else {
        "another target".to_owned()
    }
}

/// Whether a delete removes this table's route: a blackholed route to an instance or interface; and unless a
/// blackhole was asked for, an active route to the listed instance (to any instance when nothing was listed).
fn deletable(route: Option<&Ec2Route>, blackhole: bool, expected: Option<&InstanceId>) -> bool {
    match classify(route) {
        Existing::Absent | Existing::Other(_) => false,
        Existing::Blackhole(r) => r.instance_id.is_some() || r.network_interface_id.is_some(),
        Existing::Instance(id) => !blackhole && expected.is_none_or(|e| e == id),
    }
}

#[cfg(test)]
mod tests;
