//! The runtime: validates the flags, builds clients, serves HTTPS, elects a leader, runs the enabled controllers
//! while leading, and shuts down gracefully.

use std::{
    collections::BTreeMap,
    future::Future,
    net::{IpAddr, SocketAddr},
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use ccm_cloud_provider::CloudProvider;
use ccm_controllers::{
    Clock, ControllerMetrics, Informers, cloud_node::CloudNodeConfig, node_lifecycle::NodeLifecycleConfig,
    route::RouteConfig, service::ServiceConfig,
};
use futures::future::BoxFuture;
use kube::Client;
use prometheus_client::registry::Registry;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::{
    Error, Options, OptionsError,
    client::{self, Bucket},
    controllers::{self, Registry as Known},
    http::{self, Health, RuntimeMetrics},
    leader::{Elector, Ended, LOST_STOP_TIMEOUT, LeaderStatus, LeaseConfig},
    migration::{MigrationConfig, Placement},
};

/// A boxed error from a provider controller.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// How long stopping controllers may take on graceful shutdown before the leases are released anyway.
const STOP_TIMEOUT: Duration = Duration::from_secs(30);

/// What a provider controller gets when it is started.
#[derive(Clone)]
#[non_exhaustive]
pub struct ControllerContext {
    /// A Kubernetes client (with `--use-service-account-credentials`, authenticated as the controller's own
    /// service account `kube-system/<name>-controller`).
    pub client: Client,
    /// Cancelled when the controller must stop (shutdown or lost leadership); the controller's future should
    /// then return promptly.
    pub shutdown: CancellationToken,
    /// Counters exported on `/metrics` as `ccm_controller_*_total{controller="<name>"}`.
    pub metrics: ControllerMetrics,
    /// The process's shared watches: subscribe to them (`Informer::shared`) rather than watching Nodes or
    /// Services on your own.
    pub informers: Informers,
}

type StartFn = Arc<dyn Fn(ControllerContext) -> BoxFuture<'static, Result<(), BoxError>> + Send + Sync>;

/// The controller-manager runtime. Build it from parsed [`Options`], add provider controllers and metrics, then
/// [`Runtime::run`] it with the provider.
pub struct Runtime {
    options: Options,
    known: Known,
    extras: BTreeMap<String, StartFn>,
    metrics: Registry,
    node_selector: Option<String>,
    service_selector: Option<String>,
    clock: Clock,
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime")
            .field("options", &self.options)
            .field("extras", &self.extras.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

/// The leases this process elects on, for shutdown and metrics.
struct Held {
    lease: String,
    stop: CancellationToken,
    task: AbortOnDrop,
    ended: tokio::sync::watch::Receiver<Option<Ended>>,
}

/// Running controllers. Dropped (the runtime's future dropped or aborted), it cancels them.
struct Running {
    set: JoinSet<(String, Result<(), BoxError>)>,
    stop: CancellationToken,
    labels: BTreeMap<String, String>,
    /// One Node and one Service watch for every controller of this term (stopped when it ends).
    informers: Informers,
    _guard: tokio_util::sync::DropGuard,
}

/// A spawned task that dies with its owner: dropping or aborting the runtime's future leaves nothing behind
/// (in particular no task that keeps renewing a lease).
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl Runtime {
    /// A runtime for `options` with the four built-in controllers.
    pub fn new(options: Options) -> Self {
        Self {
            options,
            known: Known::builtin(),
            extras: BTreeMap::new(),
            metrics: Registry::default(),
            node_selector: None,
            service_selector: None,
            clock: Clock::system(),
        }
    }

    /// Adds a provider controller named `name` (selected by `--controllers` like the built-ins; when
    /// `enabled_by_default` is false only `--controllers=...,name` starts it). `start` is called each time this
    /// process starts leading; its future runs until [`ControllerContext::shutdown`] is cancelled. Returning
    /// `Ok(())` early means "nothing to do" (logged); an error stops the manager.
    #[must_use]
    pub fn with_controller<F, Fut>(mut self, name: &str, enabled_by_default: bool, start: F) -> Self
    where
        F: Fn(ControllerContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<(), BoxError>> + Send + 'static,
    {
        self.known.add(name, enabled_by_default);
        self.extras
            .insert(name.to_owned(), Arc::new(move |ctx| Box::pin(start(ctx))));
        self
    }

    /// Restricts the built-in controllers to Nodes and Services matching these label selectors (default: all).
    /// For staged roll-outs and for tests that share a cluster.
    #[must_use]
    pub fn with_selectors(mut self, nodes: Option<String>, services: Option<String>) -> Self {
        self.node_selector = nodes;
        self.service_selector = services;
        self
    }

    /// The Prometheus registry served on `/metrics`: register the provider's metrics here before running.
    pub fn registry(&mut self) -> &mut Registry {
        &mut self.metrics
    }

    /// Checks the flags, including `--controllers` against the provider controllers added so far.
    pub fn validate(&self) -> Result<(), OptionsError> {
        self.options.validate_with(&self.known)
    }

    /// The canonical names of the controllers `--controllers` enables, built-in and provider ones, in start
    /// order (whether each can run is decided at start: capabilities, `--configure-cloud-routes`).
    pub fn enabled_controllers(&self) -> Vec<String> {
        self.known
            .known()
            .iter()
            .filter(|k| self.known.is_enabled(&self.options.controllers, &k.name))
            .map(|k| k.name.clone())
            .collect()
    }

    /// Runs until SIGTERM or SIGINT (then stops the controllers, releases the leases and returns `Ok`), or until
    /// leadership is lost or a controller fails (then returns the error: exit non-zero).
    pub async fn run<P: CloudProvider>(self, provider: Arc<P>) -> Result<(), Error> {
        self.run_until(provider, shutdown_signal()).await
    }

    /// [`Runtime::run`] with another shutdown trigger (tests, embedding).
    pub async fn run_until<P: CloudProvider>(
        self,
        provider: Arc<P>,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Result<(), Error> {
        self.validate()?;
        let o = &self.options;
        if o.cloud_provider != provider.provider_name() {
            return Err(Error::ProviderMismatch {
                given: o.cloud_provider.clone(),
                expected: provider.provider_name().to_owned(),
            });
        }
        for flag in o.ignored_flags() {
            tracing::warn!(flag = %flag, "flag is accepted for compatibility with the Go cloud controller manager and has no effect");
        }
        if o.enable_leader_migration && !o.leader_elect {
            tracing::warn!("--enable-leader-migration has no effect without --leader-elect");
        }
        if matches!(o.tls_min_version.as_str(), "VersionTLS10" | "VersionTLS11") {
            tracing::warn!(value = %o.tls_min_version, "TLS 1.0 and 1.1 are not offered; the minimum is TLS 1.2");
        }
        let migration = if o.leader_elect && o.enable_leader_migration {
            Some(self.migration_config()?)
        } else {
            None
        };

        let config = client::root_config(&o.kubeconfig, &o.master).await?;
        let limiter = Bucket::new(o.kube_api_qps, o.kube_api_burst);
        let root = client::build(config.clone(), limiter.clone(), None, "cloud-controller-manager")?;
        // Leader election has a client of its own without the rate limiter, so that lease renewals never queue
        // behind a burst of controller writes (upstream's election client has its own limiter too).
        let election = client::build(
            config.clone(),
            None,
            None,
            "cloud-controller-manager/leader-election",
        )?;

        let cancel = CancellationToken::new();
        let _cancel_on_drop = cancel.clone().drop_guard();
        {
            let cancel = cancel.clone();
            tokio::spawn(async move {
                tokio::select! {
                    () = shutdown => {
                        tracing::info!("shutdown requested: stopping controllers, then releasing the leader lease");
                        cancel.cancel();
                    }
                    () = cancel.cancelled() => {}
                }
            });
        }

        let mut this = self;
        let runtime_metrics = RuntimeMetrics::default();
        runtime_metrics.register(&mut this.metrics);
        let registry = Arc::new(std::mem::take(&mut this.metrics));
        let health = Health::default();
        let status = LeaderStatus::default();
        let migration_status = LeaderStatus::default();
        let o = &this.options;
        if o.leader_elect {
            let (s, m, d) = (
                status.clone(),
                migration_status.clone(),
                o.leader_elect_lease_duration,
            );
            health.add("leaderElection", move || s.check(d).and_then(|()| m.check(d)));
        }

        let server_stop = CancellationToken::new();
        let _server_stop_on_drop = server_stop.clone().drop_guard();
        if o.secure_port != 0 {
            let bind: IpAddr = o
                .bind_address
                .parse()
                .map_err(|_| Error::Serving("bad --bind-address".to_owned()))?;
            let tls = http::tls_config(&http::TlsSource {
                cert_file: &o.tls_cert_file,
                key_file: &o.tls_private_key_file,
                cert_dir: &o.cert_dir,
                min_version: &o.tls_min_version,
                bind,
            })?;
            let port =
                u16::try_from(o.secure_port).map_err(|_| Error::Serving("bad --secure-port".to_owned()))?;
            let listener = http::bind(SocketAddr::new(bind, port)).await?;
            tracing::info!(address = %SocketAddr::new(bind, port), "serving /healthz and /metrics over HTTPS");
            let state = http::State {
                health: health.clone(),
                registry,
                // Reviews have a client and limiter of their own (upstream's 20/30): a flood of requests to the
                // port can neither starve the controllers nor flood the apiserver.
                auth: crate::auth::Auth::new(
                    client::build(
                        config.clone(),
                        Bucket::new(20.0, 30),
                        None,
                        "cloud-controller-manager/delegated-auth",
                    )?,
                    o.authorization_always_allow_paths.clone(),
                ),
                configz: Arc::new(crate::configz::render(o)),
            };
            tokio::spawn(http::serve(listener, tls, state, server_stop.clone()));
        }

        let ctx = Ctx {
            root,
            election,
            config,
            limiter,
            health,
            metrics: runtime_metrics,
            cancel: cancel.clone(),
            lapsed: std::sync::atomic::AtomicBool::new(false),
        };
        let identity = crate::leader::identity();
        let result = loop {
            let result = this
                .lead(
                    provider.clone(),
                    &ctx,
                    migration.clone(),
                    (status.clone(), migration_status.clone()),
                    &identity,
                )
                .await;
            // A lapse (the apiserver slow or unreachable past the renew deadline) stopped the controllers; the
            // Lease still names this identity unless another candidate took it, so rejoining the election with
            // the same identity leads again as soon as the apiserver answers, instead of exiting and waiting out
            // a whole lease duration under a new identity.
            if ctx.lapsed.swap(false, std::sync::atomic::Ordering::SeqCst) && !ctx.cancel.is_cancelled() {
                if let Err(e) = &result {
                    tracing::warn!(error = %e, identity = %identity, "controllers stopped; rejoining the election");
                }
                continue;
            }
            break result;
        };
        server_stop.cancel();
        cancel.cancel();
        result
    }

    fn migration_config(&self) -> Result<MigrationConfig, Error> {
        let path = &self.options.leader_migration_config;
        if path.is_empty() {
            return Ok(MigrationConfig::default_config());
        }
        let text = std::fs::read_to_string(path).map_err(|e| Error::Migration {
            path: path.clone(),
            reason: e.to_string(),
        })?;
        MigrationConfig::parse(&text).map_err(|reason| Error::Migration {
            path: path.clone(),
            reason,
        })
    }

    fn lease_config(&self, name: &str, identity: &str) -> LeaseConfig {
        let o = &self.options;
        LeaseConfig {
            namespace: o.leader_elect_resource_namespace.clone(),
            name: name.to_owned(),
            identity: identity.to_owned(),
            lease_duration: o.leader_elect_lease_duration,
            renew_deadline: o.leader_elect_renew_deadline,
            retry_period: o.leader_elect_retry_period,
        }
    }

    async fn lead<P: CloudProvider>(
        &self,
        provider: Arc<P>,
        ctx: &Ctx,
        migration: Option<MigrationConfig>,
        (status, migration_status): (LeaderStatus, LeaderStatus),
        identity: &str,
    ) -> Result<(), Error> {
        let o = &self.options;
        let enabled = self.enabled_controllers();
        let placement = |name: &str| {
            migration
                .as_ref()
                .map_or(Placement::NonMigrated, |m| m.placement(&self.known, name))
        };
        for name in enabled.iter().filter(|n| placement(n) == Placement::Unowned) {
            tracing::info!(controller = %name, "not started: the leader-migration configuration assigns it to another component");
        }
        let stop = CancellationToken::new();
        let mut running = Running {
            set: JoinSet::new(),
            _guard: stop.clone().drop_guard(),
            stop,
            labels: BTreeMap::new(),
            informers: Informers::new(ctx.root.clone()),
        };
        if !o.leader_elect {
            tracing::warn!("--leader-elect=false: running controllers without leader election");
            let all: Vec<_> = enabled
                .iter()
                .filter(|n| placement(n) != Placement::Unowned)
                .cloned()
                .collect();
            self.start(&provider, ctx, &mut running, &all).await?;
            let result = self.wait(ctx, &mut running, &[]).await;
            self.stop(ctx, &mut running, STOP_TIMEOUT).await;
            return result;
        }

        let main_cfg = self.lease_config(&o.leader_elect_resource_name, identity);
        let main_name = format!("{}/{}", main_cfg.namespace, main_cfg.name);
        let mut main = Elector::new(ctx.election.clone(), main_cfg, self.clock.clone(), status);
        ctx.metrics.set_leader(&main_name, false);
        if !main.acquire(&ctx.cancel).await {
            return Ok(());
        }
        ctx.metrics.set_leader(&main_name, true);
        let mut held = vec![hold(main, main_name)];

        let first: Vec<_> = enabled
            .iter()
            .filter(|n| placement(n) == Placement::NonMigrated)
            .cloned()
            .collect();
        let migrated: Vec<_> = enabled
            .iter()
            .filter(|n| placement(n) == Placement::Migrated)
            .cloned()
            .collect();
        let mut result = self.start(&provider, ctx, &mut running, &first).await;
        if result.is_ok()
            && let Some(m) = &migration
        {
            result = self
                .lead_migration(
                    &provider,
                    ctx,
                    &mut running,
                    &mut held,
                    m,
                    identity,
                    migration_status,
                    migrated,
                )
                .await;
        }
        if result.is_ok() {
            result = self.wait(ctx, &mut running, &held).await;
        }
        let lost = matches!(result, Err(Error::LeaderElectionLost { .. }));
        self.stop(
            ctx,
            &mut running,
            if lost { LOST_STOP_TIMEOUT } else { STOP_TIMEOUT },
        )
        .await;
        for h in &held {
            h.stop.cancel();
        }
        for mut h in held {
            ctx.metrics.set_leader(&h.lease, false);
            let _ = (&mut h.task.0).await;
            let ended = h.ended.borrow().clone();
            if let Some(Ended::Lapsed(_)) = &ended {
                ctx.lapsed.store(true, std::sync::atomic::Ordering::SeqCst);
            }
            if let (Some(Ended::Lost(reason) | Ended::Lapsed(reason)), true) = (ended, result.is_ok()) {
                result = Err(Error::LeaderElectionLost {
                    lease: h.lease,
                    reason,
                });
            }
        }
        result
    }

    /// Acquires the migration lease (while watching the main lease and the controllers), then starts the
    /// migrated controllers.
    #[allow(clippy::too_many_arguments)]
    async fn lead_migration<P: CloudProvider>(
        &self,
        provider: &Arc<P>,
        ctx: &Ctx,
        running: &mut Running,
        held: &mut Vec<Held>,
        m: &MigrationConfig,
        identity: &str,
        status: LeaderStatus,
        migrated: Vec<String>,
    ) -> Result<(), Error> {
        let cfg = self.lease_config(&m.leader_name, identity);
        let name = format!("{}/{}", cfg.namespace, cfg.name);
        let mut elector = Elector::new(ctx.election.clone(), cfg, self.clock.clone(), status);
        let acquire_cancel = ctx.cancel.child_token();
        let acquiring = {
            let acquire_cancel = acquire_cancel.clone();
            tokio::spawn(async move {
                let got = elector.acquire(&acquire_cancel).await;
                (got, elector)
            })
        };
        let _cancel_acquiring = acquire_cancel.clone().drop_guard();
        tracing::info!(lease = %name, controllers = ?migrated, "leader migration: waiting for the migration lease");
        // Watch everything already running while waiting.
        let joined = {
            let waiting = self.wait(ctx, running, held);
            tokio::pin!(waiting);
            tokio::pin!(acquiring);
            tokio::select! {
                r = &mut waiting => {
                    acquire_cancel.cancel();
                    return r;
                }
                joined = &mut acquiring => joined,
            }
        };
        let (got, elector) = joined.map_err(|e| Error::Controller {
            name: "leader-migration".to_owned(),
            source: Box::new(e),
        })?;
        if !got {
            return Ok(());
        }
        ctx.metrics.set_leader(&name, true);
        held.push(hold(elector, name));
        self.start(provider, ctx, running, &migrated).await
    }

    /// Starts `names` in order, `--controller-start-interval` apart (jittered, as upstream).
    async fn start<P: CloudProvider>(
        &self,
        provider: &Arc<P>,
        ctx: &Ctx,
        running: &mut Running,
        names: &[String],
    ) -> Result<(), Error> {
        let o = &self.options;
        for (i, name) in names.iter().enumerate() {
            if i > 0 && !o.controller_start_interval.is_zero() {
                let d = o.controller_start_interval.mul_f64(1.0 + rand::random::<f64>());
                tokio::select! {
                    () = ctx.cancel.cancelled() => return Ok(()),
                    () = tokio::time::sleep(d) => {}
                }
            }
            let Some(known) = self.known.get(name) else {
                continue;
            };
            let client = if o.use_service_account_credentials {
                client::service_account_client(
                    &ctx.root,
                    &ctx.config,
                    ctx.limiter.clone(),
                    &known.client_name,
                    running.stop.clone(),
                )
                .await?
            } else {
                ctx.root.clone()
            };
            let metrics = ControllerMetrics::default();
            let stop = running.stop.clone();
            let shared = running.informers.clone();
            let fut: Option<BoxFuture<'static, Result<(), BoxError>>> =
                self.controller_future(provider, name, client, metrics.clone(), stop, shared)?;
            let Some(fut) = fut else { continue };
            tracing::info!(controller = %name, "starting controller");
            ctx.metrics.controllers.add(name, metrics);
            ctx.metrics.set_running(&known.metric_label, true);
            running.labels.insert(name.clone(), known.metric_label.clone());
            let alive = Arc::new(AtomicBool::new(true));
            {
                let alive = alive.clone();
                ctx.health.add(name, move || {
                    if alive.load(Ordering::Relaxed) {
                        Ok(())
                    } else {
                        Err("the controller has stopped".to_owned())
                    }
                });
            }
            let name = name.clone();
            running.set.spawn(async move {
                let r = fut.await;
                alive.store(false, Ordering::Relaxed);
                (name, r)
            });
        }
        Ok(())
    }

    /// The future of one controller, or `None` (logged) when it is not to be started.
    fn controller_future<P: CloudProvider>(
        &self,
        provider: &Arc<P>,
        name: &str,
        client: Client,
        metrics: ControllerMetrics,
        stop: CancellationToken,
        informers: Informers,
    ) -> Result<Option<BoxFuture<'static, Result<(), BoxError>>>, Error> {
        let o = &self.options;
        let p = provider.clone();
        let has_instances = provider.instances_v2().is_some() || provider.instances().is_some();
        let skip = |why: &str| {
            tracing::warn!(controller = %name, "skipping controller: {why}");
            Ok(None)
        };
        let boxed = |r: Result<(), ccm_controllers::Error>| r.map_err(|e| Box::new(e) as BoxError);
        let until = stop.clone().cancelled_owned();
        let fut: BoxFuture<'static, Result<(), BoxError>> = match name {
            controllers::CLOUD_NODE => {
                if !has_instances {
                    return skip("the cloud provider has no instances");
                }
                let mut cfg = CloudNodeConfig::default();
                cfg.node_status_update_frequency = o.node_status_update_frequency;
                cfg.concurrent_node_syncs = usize::try_from(o.concurrent_node_syncs).unwrap_or(1);
                cfg.concurrent_node_status_updates =
                    usize::try_from(o.concurrent_node_status_updates).unwrap_or(0);
                cfg.node_selector = self.node_selector.clone();
                cfg.metrics = metrics;
                cfg.clock = self.clock.clone();
                cfg.informers = Some(informers);
                cfg.max_batch = lookup_batch(o, cfg.max_batch);
                Box::pin(async move { boxed(ccm_controllers::cloud_node::run(client, p, cfg, until).await) })
            }
            controllers::NODE_LIFECYCLE => {
                if !has_instances {
                    return skip("the cloud provider has no instances");
                }
                let mut cfg = NodeLifecycleConfig::default();
                cfg.node_monitor_period = o.node_monitor_period;
                cfg.node_selector = self.node_selector.clone();
                cfg.metrics = metrics;
                cfg.clock = self.clock.clone();
                cfg.informers = Some(informers);
                cfg.max_batch = lookup_batch(o, cfg.max_batch);
                Box::pin(
                    async move { boxed(ccm_controllers::node_lifecycle::run(client, p, cfg, until).await) },
                )
            }
            controllers::SERVICE => {
                if provider.load_balancer().is_none() {
                    return skip("the cloud provider has no load balancers");
                }
                let mut cfg = ServiceConfig::default();
                cfg.cluster_name = o.cluster_name.clone();
                cfg.concurrent_service_syncs = usize::try_from(o.concurrent_service_syncs).unwrap_or(1);
                cfg.load_balancer_resync_period = o.load_balancer_resync_period;
                cfg.service_selector = self.service_selector.clone();
                cfg.node_selector = self.node_selector.clone();
                cfg.metrics = metrics;
                cfg.clock = self.clock.clone();
                cfg.informers = Some(informers);
                Box::pin(async move { boxed(ccm_controllers::service::run(client, p, cfg, until).await) })
            }
            controllers::ROUTE => {
                if !o.configure_cloud_routes {
                    tracing::info!(
                        "will not configure cloud provider routes: --configure-cloud-routes=false"
                    );
                    return Ok(None);
                }
                if provider.routes().is_none() {
                    return skip(
                        "--configure-cloud-routes is set, but the cloud provider does not support routes",
                    );
                }
                if o.cluster_cidr.trim().is_empty() {
                    // Upstream exits fatally here; a manager that cannot configure routes should still run the
                    // other controllers.
                    return skip(
                        "--cluster-cidr is empty; set it, or --configure-cloud-routes=false to silence this",
                    );
                }
                let mut cfg = RouteConfig::new(&o.cluster_name, o.cluster_cidr.trim()).map_err(|e| {
                    Error::Controller {
                        name: name.to_owned(),
                        source: Box::new(e),
                    }
                })?;
                cfg.route_reconciliation_period = o.route_reconciliation_period;
                cfg.node_selector = self.node_selector.clone();
                cfg.metrics = metrics;
                cfg.clock = self.clock.clone();
                cfg.informers = Some(informers);
                Box::pin(async move { boxed(ccm_controllers::route::run(client, p, cfg, until).await) })
            }
            other => {
                let Some(start) = self.extras.get(other) else {
                    return Ok(None);
                };
                start(ControllerContext {
                    client,
                    shutdown: stop,
                    metrics,
                    informers,
                })
            }
        };
        Ok(Some(fut))
    }

    /// Waits for shutdown, a lost lease or a failed controller.
    async fn wait(&self, ctx: &Ctx, running: &mut Running, held: &[Held]) -> Result<(), Error> {
        let lost = async {
            if held.is_empty() {
                return futures::future::pending::<(String, Ended)>().await;
            }
            let tasks = held.iter().map(|h| {
                let lease = h.lease.clone();
                let mut rx = h.ended.clone();
                Box::pin(async move {
                    let ended = match rx.wait_for(Option::is_some).await {
                        Ok(v) => v.clone().unwrap_or(Ended::Released),
                        Err(_) => Ended::Lost("the elector task stopped".to_owned()),
                    };
                    (lease, ended)
                })
            });
            futures::future::select_all(tasks).await.0
        };
        tokio::pin!(lost);
        loop {
            tokio::select! {
                () = ctx.cancel.cancelled() => return Ok(()),
                (lease, ended) = &mut lost => {
                    let reason = match ended {
                        Ended::Lost(r) => r,
                        Ended::Lapsed(r) => {
                            ctx.lapsed.store(true, std::sync::atomic::Ordering::SeqCst);
                            r
                        }
                        Ended::Released => "released".to_owned(),
                    };
                    tracing::error!(lease = %lease, reason = %reason, "leaderelection lost");
                    return Err(Error::LeaderElectionLost { lease, reason });
                }
                Some(joined) = running.set.join_next() => {
                    let (name, r) = match joined {
                        Ok(x) => x,
                        Err(e) => return Err(Error::Controller { name: "unknown".to_owned(), source: Box::new(e) }),
                    };
                    if let Some(label) = running.labels.get(&name) {
                        ctx.metrics.set_running(label, false);
                    }
                    match r {
                        Err(e) if e.downcast_ref::<ccm_controllers::Error>().is_some_and(|e| matches!(e, ccm_controllers::Error::Unsupported { .. })) => {
                            tracing::warn!(controller = %name, error = %e, "skipping controller");
                            ctx.health.remove(&name);
                        }
                        Err(e) => {
                            tracing::error!(controller = %name, error = %e, "controller failed");
                            return Err(Error::Controller { name, source: e });
                        }
                        Ok(()) => {
                            tracing::info!(controller = %name, "controller finished");
                            ctx.health.remove(&name);
                        }
                    }
                }
            }
        }
    }

    async fn stop(&self, ctx: &Ctx, running: &mut Running, timeout: Duration) {
        running.stop.cancel();
        let all = async {
            while let Some(joined) = running.set.join_next().await {
                if let Ok((name, Err(e))) = joined {
                    tracing::warn!(controller = %name, error = %e, "controller stopped with an error");
                }
            }
        };
        if tokio::time::timeout(timeout, all).await.is_err() {
            tracing::warn!("controllers did not stop within {timeout:?}; aborting them");
            running.set.abort_all();
        }
        for label in running.labels.values() {
            ctx.metrics.set_running(label, false);
        }
    }
}

/// What the runtime shares between its steps.
struct Ctx {
    root: Client,
    election: Client,
    config: kube::Config,
    limiter: Option<Arc<Bucket>>,
    health: Health,
    metrics: RuntimeMetrics,
    cancel: CancellationToken,
    /// Set when leadership lapsed (renew deadline missed) rather than being taken by another holder.
    lapsed: std::sync::atomic::AtomicBool,
}

fn hold(mut elector: Elector, lease: String) -> Held {
    let stop = CancellationToken::new();
    let (tx, ended) = tokio::sync::watch::channel(None);
    let task = {
        let stop = stop.clone();
        AbortOnDrop(tokio::spawn(async move {
            let e = elector.hold(&stop).await;
            let _ = tx.send(Some(e));
        }))
    };
    Held {
        lease,
        stop,
        task,
        ended,
    }
}

/// The nodes per provider lookup: `--node-lookup-batch-size` when set, else the controller's default.
fn lookup_batch(options: &Options, default: usize) -> usize {
    match usize::try_from(options.node_lookup_batch_size) {
        Ok(0) | Err(_) => default,
        Ok(n) => n,
    }
}

/// Completes on SIGTERM or SIGINT.
async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = term.recv() => tracing::info!("received SIGTERM"),
                    _ = tokio::signal::ctrl_c() => tracing::info!("received SIGINT"),
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot watch SIGTERM; only SIGINT stops gracefully");
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}
