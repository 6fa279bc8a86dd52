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
    /// With `--dry-run`: where the controller reports what it would change, instead of changing it (its
    /// client refuses writes anyway, and the AWS adapter mutating calls).
    pub dry_run: Option<Arc<dyn ccm_controllers::DryRunSink>>,
}

type StartFn = Arc<dyn Fn(ControllerContext) -> BoxFuture<'static, Result<(), BoxError>> + Send + Sync>;

/// The controller-manager runtime. Build it from parsed [`Options`], add provider controllers and metrics, then
/// [`Runtime::run`] it with the provider.
pub struct Runtime {
    options: Options,
    known: Known,
    extras: BTreeMap<String, StartFn>,
    checks: Vec<checks::Check>,
    metrics: Registry,
    node_selector: Option<String>,
    service_selector: Option<String>,
    clock: Clock,
    /// With `--dry-run`: what the controllers would have written.
    dry_run: Arc<crate::dry_run::DryRunLog>,
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

impl Running {
    /// Nothing running yet, with the term's own stop token and watches.
    fn new(ctx: &Ctx) -> Self {
        let stop = CancellationToken::new();
        Self {
            set: JoinSet::new(),
            _guard: stop.clone().drop_guard(),
            stop,
            labels: BTreeMap::new(),
            informers: Informers::new(ctx.root.clone()),
        }
    }
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
            checks: Vec::new(),
            metrics: Registry::default(),
            node_selector: None,
            service_selector: None,
            clock: Clock::system(),
            dry_run: Arc::default(),
        }
    }

    /// With `--dry-run`, the writes the controllers would have made so far (empty otherwise).
    pub fn dry_run_log(&self) -> Arc<crate::dry_run::DryRunLog> {
        self.dry_run.clone()
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

    /// Restricts the built-in controllers to Nodes and Services matching these label selectors (default: all),
    /// for staged roll-outs and for tests that share a cluster. Everything else is left alone: a Service that
    /// loses the labels keeps its load balancer (nothing deletes or updates it any more), and the route
    /// controller deletes only routes of Nodes it has seen selected that are gone (not those of Nodes outside
    /// the selection, nor of a selected Node deleted while the process was down).
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
        let migration = self.preflight(&provider)?;
        let log = self.options.dry_run.then(|| self.dry_run.clone());
        let ctx = Ctx::connect(&self.options, log).await?;
        let _cancel_on_drop = ctx.cancel.clone().drop_guard();
        cancel_on_shutdown(shutdown, ctx.cancel.clone());

        let mut this = self;
        ctx.metrics.register(&mut this.metrics);
        if let Some(log) = &ctx.dry_run {
            log.register(&mut this.metrics);
            // Refused writes expire without any event: the gauge follows them.
            let (log, cancel) = (log.clone(), ctx.cancel.clone());
            tokio::spawn(async move {
                let mut tick = tokio::time::interval(std::time::Duration::from_secs(30));
                while cancel.run_until_cancelled(tick.tick()).await.is_some() {
                    log.update_gauge();
                }
            });
        }
        let registry = Arc::new(std::mem::take(&mut this.metrics));
        let statuses = (LeaderStatus::default(), LeaderStatus::default());
        this.add_leader_health(&ctx.health, &statuses);

        let server_stop = CancellationToken::new();
        let _server_stop_on_drop = server_stop.clone().drop_guard();
        if this.options.secure_port != 0 {
            this.serve(&ctx, registry, server_stop.clone()).await?;
        }

        let result = this
            .lead_rejoining(&provider, &ctx, migration.as_ref(), &statuses)
            .await;
        server_stop.cancel();
        ctx.cancel.cancel();
        result
    }

    /// The checks and warnings that need neither the apiserver nor the network, so that a bad flag or migration
    /// file stops the process before it takes a lease or a port; returns the migration configuration when
    /// `--enable-leader-migration` applies.
    fn preflight<P: CloudProvider>(&self, provider: &Arc<P>) -> Result<Option<MigrationConfig>, Error> {
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
        if o.dry_run {
            tracing::warn!(
                "--dry-run: nothing is written (no Kubernetes write, no leader Lease, no AWS change); controllers \
                 run at once, beside whichever controller leads"
            );
        }
        if o.enable_leader_migration && !o.leader_elect {
            tracing::warn!("--enable-leader-migration has no effect without --leader-elect");
        }
        if matches!(o.tls_min_version.as_str(), "VersionTLS10" | "VersionTLS11") {
            tracing::warn!(value = %o.tls_min_version, "TLS 1.0 and 1.1 are not offered; the minimum is TLS 1.2");
        }
        let migration = if o.leader_elect && !o.dry_run && o.enable_leader_migration {
            Some(self.migration_config()?)
        } else {
            None
        };
        Ok(migration)
    }

    /// With `--leader-elect`, `/healthz` fails while a lease this process leads on (the main one or the migration
    /// one) goes unrenewed past its duration, so that the kubelet restarts a leader stuck that way.
    fn add_leader_health(&self, health: &Health, (status, migration_status): &(LeaderStatus, LeaderStatus)) {
        let o = &self.options;
        if o.leader_elect && !o.dry_run {
            let (s, m, d) = (
                status.clone(),
                migration_status.clone(),
                o.leader_elect_lease_duration,
            );
            health.add("leaderElection", move || s.check(d).and_then(|()| m.check(d)));
        }
    }

    /// Binds `--secure-port` and serves on it until `stop`. Binding here rather than in the serving task makes a
    /// taken port or a bad certificate fail the start.
    async fn serve(&self, ctx: &Ctx, registry: Arc<Registry>, stop: CancellationToken) -> Result<(), Error> {
        let o = &self.options;
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
            health: ctx.health.clone(),
            registry,
            // Reviews have a client and limiter of their own (upstream's 20/30): a flood of requests to the
            // port can neither starve the controllers nor flood the apiserver.
            auth: crate::auth::Auth::new(
                client::build(
                    ctx.config.clone(),
                    Bucket::new(20.0, 30),
                    None,
                    "cloud-controller-manager/delegated-auth",
                    None,
                )?,
                o.authorization_always_allow_paths.clone(),
            ),
            configz: Arc::new(crate::configz::render(o)),
            dry_run: ctx.dry_run.clone(),
        };
        // The server's own thread runs until `stop`; nothing waits for it.
        http::start(listener, tls, state, stop)?;
        Ok(())
    }

    /// Leads (or runs unelected) until shutdown or a failure, over and over while leadership merely lapses. One
    /// identity for the whole process, so that the Lease it still names is ours again at once.
    async fn lead_rejoining<P: CloudProvider>(
        &self,
        provider: &Arc<P>,
        ctx: &Ctx,
        migration: Option<&MigrationConfig>,
        statuses: &(LeaderStatus, LeaderStatus),
    ) -> Result<(), Error> {
        let identity = crate::leader::identity();
        loop {
            let result = self
                .lead(
                    provider.clone(),
                    ctx,
                    migration.cloned(),
                    statuses.clone(),
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
            return result;
        }
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
    /// With `--dry-run`: the writes the controllers' clients refused.
    dry_run: Option<Arc<crate::dry_run::DryRunLog>>,
    config: kube::Config,
    limiter: Option<Arc<Bucket>>,
    health: Health,
    metrics: RuntimeMetrics,
    cancel: CancellationToken,
    /// Set when leadership lapsed (renew deadline missed) rather than being taken by another holder.
    lapsed: std::sync::atomic::AtomicBool,
}

impl Ctx {
    /// Connects with the kubeconfig of the flags. Leader election gets a client of its own, without the rate
    /// limiter, so that lease renewals never queue behind a burst of controller writes (upstream's election
    /// client has its own limiter too).
    async fn connect(o: &Options, dry_run: Option<Arc<crate::dry_run::DryRunLog>>) -> Result<Self, Error> {
        let config = client::root_config(&o.kubeconfig, &o.master).await?;
        let limiter = Bucket::new(o.kube_api_qps, o.kube_api_burst);
        let root = client::build(
            config.clone(),
            limiter.clone(),
            None,
            "cloud-controller-manager",
            dry_run.as_ref(),
        )?;
        let election = client::build(
            config.clone(),
            None,
            None,
            "cloud-controller-manager/leader-election",
            None,
        )?;
        Ok(Self {
            root,
            election,
            dry_run,
            config,
            limiter,
            health: Health::default(),
            metrics: RuntimeMetrics::default(),
            cancel: CancellationToken::new(),
            lapsed: std::sync::atomic::AtomicBool::new(false),
        })
    }
}

/// Cancels `cancel` when `shutdown` completes. A task of its own, so that the trigger is watched whatever the
/// runtime awaits; it ends with the runtime, which cancels `cancel` on its way out.
fn cancel_on_shutdown(shutdown: impl Future<Output = ()> + Send + 'static, cancel: CancellationToken) {
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

mod checks;
mod leadership;
mod starting;
