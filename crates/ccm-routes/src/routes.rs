//! [`AwsRoutes`]: the Routes capability over the EC2 port.

use std::{
    collections::{BTreeSet, HashMap, HashSet},
    fmt,
    net::IpAddr,
    sync::{Arc, Mutex, MutexGuard},
    time::Duration,
};

use ccm_aws_api::{
    Catalog, CatalogLookup, Ec2, ErrorKind, Filter, Freshness, InstanceCatalog, InstanceId, RouteTableId,
    VpcId,
    ec2::{Route as Ec2Route, RouteState, RouteTable},
};
use ccm_cloud_provider::{CloudError, NodeView, Route, Routes};
use ccm_tagging::{ClusterTags, LEGACY_CLUSTER_TAG};
use tokio::time::Instant;

use crate::{AnyRouteTarget, NoNodeNames, NodeNames, RouteTargets, RoutesError};

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
/// - `create_route` asks [`RouteTargets`] (see [`AwsRoutes::with_route_targets`]) whether the Node's instance may
///   be a target at all ([`RoutesError::Refused`] if not), then disables the instance's source/destination check
///   once, then per table: nothing if the route is there, `ReplaceRoute` over a blackhole (never a moment without
///   a route), `CreateRoute` otherwise; an active route to something else is a [`RoutesError::Conflict`] and left
///   alone.
/// - `delete_route` removes the CIDR's route from each table where it points at the listed instance (or, for a
///   blackhole, where it is blackholed); routes to gateways and other targets are never deleted.
///
/// AWS calls: one `DescribeRouteTables` per `list_routes`, plus one `DescribeInstances` (by ID, batched) only for
/// route targets that [`NodeNames`] does not know and that the instance catalog does not hold (a private DNS
/// name never changes: any read of the instance names it; see [`AwsRoutes::with_instance_catalog`]). Creates and
/// deletes reuse the tables of the last list while they are fresh.
pub struct AwsRoutes<E, N = NoNodeNames> {
    /// The EC2 port with the instance catalog in front.
    ec2: Catalog<E>,
    names: N,
    /// Which instances a route may point at (see [`AwsRoutes::with_route_targets`]).
    targets: Arc<dyn RouteTargets>,
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
    /// Instances are read through an instance catalog of their own, keeping them for
    /// [`ROUTE_NAMES_RETAIN`](crate::ROUTE_NAMES_RETAIN); share the controllers' one with
    /// [`AwsRoutes::with_instance_catalog`].
    pub fn new(ec2: E, config: RoutesConfig) -> Self {
        let catalog =
            Arc::new(InstanceCatalog::new().with_retention(crate::ROUTE_NAMES_RETAIN, Duration::ZERO));
        catalog.start_expiry();
        Self {
            ec2: catalog.over(ec2),
            names: NoNodeNames,
            targets: Arc::new(AnyRouteTarget),
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
            targets: self.targets,
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
            // An instance no route points at any more is checked again if one does later (and the set stays
            // bounded by the routes, not by every instance the process ever routed to).
            state.source_dest_disabled.retain(|id| live.contains(id));
        }
        self.store(tables);
        Ok(out)
    }

    /// Routes `route.destination_cidr` to the instance of `route.target_node` in every table of the cluster.
    pub async fn create(&self, cluster_name: &str, route: &Route) -> Result<(), RoutesError> {
        let (cidr, spelled) = parse_cidr(&route.destination_cidr)?;
        self.refuse_foreign_target(route).await?;
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
            // The snapshot was stale (`RouteAlreadyExists`): look again and decide once more (without another
            // create).
            Err(e) if e.is_already_exists() => {
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

impl<E, N> fmt::Debug for AwsRoutes<E, N> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AwsRoutes")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

mod contract;
mod instances;
mod rules;
use rules::*;

#[cfg(test)]
mod tests;
