//! Starting the enabled controllers: each one's future from the options, the provider and the shared
//! informers, `--controller-start-interval` apart.

use super::*;

impl Runtime {
    /// Starts `names` in order, `--controller-start-interval` apart (jittered, as upstream).
    pub(super) async fn start<P: CloudProvider>(
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
            let client = if let Some(log) = &ctx.dry_run {
                // A client of its own, so that the writes it refuses are recorded under the controller's name.
                let agent = format!("cloud-controller-manager/{}", known.metric_label);
                client::build(ctx.config.clone(), ctx.limiter.clone(), None, &agent, Some(log))?
            } else if o.use_service_account_credentials {
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
    pub(super) fn controller_future<P: CloudProvider>(
        &self,
        provider: &Arc<P>,
        name: &str,
        client: Client,
        metrics: ControllerMetrics,
        stop: CancellationToken,
        informers: Informers,
    ) -> Result<Option<BoxFuture<'static, Result<(), BoxError>>>, Error> {
        if !self.can_run(provider, name) {
            return Ok(None);
        }
        let p = provider.clone();
        let boxed = |r: Result<(), ccm_controllers::Error>| r.map_err(|e| Box::new(e) as BoxError);
        let until = stop.clone().cancelled_owned();
        let fut: BoxFuture<'static, Result<(), BoxError>> = match name {
            controllers::CLOUD_NODE => {
                let cfg = self.cloud_node_config(metrics, informers);
                Box::pin(async move { boxed(ccm_controllers::cloud_node::run(client, p, cfg, until).await) })
            }
            controllers::NODE_LIFECYCLE => {
                let cfg = self.node_lifecycle_config(metrics, informers);
                Box::pin(
                    async move { boxed(ccm_controllers::node_lifecycle::run(client, p, cfg, until).await) },
                )
            }
            controllers::SERVICE => {
                let cfg = self.service_config(metrics, informers);
                Box::pin(async move { boxed(ccm_controllers::service::run(client, p, cfg, until).await) })
            }
            controllers::ROUTE => {
                let cfg = self.route_config(name, metrics, informers)?;
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
                    dry_run: self.dry_run_sink(),
                })
            }
        };
        Ok(Some(fut))
    }

    /// Whether the provider and the flags let the built-in controller `name` run, logging why not: a capability
    /// the provider lacks is a warning (the operator enabled the controller), routes turned off by flag are not.
    /// Provider controllers can always run.
    fn can_run<P: CloudProvider>(&self, provider: &Arc<P>, name: &str) -> bool {
        let o = &self.options;
        let has_instances = provider.instances_v2().is_some() || provider.instances().is_some();
        let why = match name {
            controllers::CLOUD_NODE | controllers::NODE_LIFECYCLE if !has_instances => {
                "the cloud provider has no instances"
            }
            controllers::SERVICE if provider.load_balancer().is_none() => {
                "the cloud provider has no load balancers"
            }
            controllers::ROUTE if !o.configure_cloud_routes => {
                tracing::info!("will not configure cloud provider routes: --configure-cloud-routes=false");
                return false;
            }
            controllers::ROUTE if provider.routes().is_none() => {
                "--configure-cloud-routes is set, but the cloud provider does not support routes"
            }
            // Upstream exits fatally here; a manager that cannot configure routes should still run the other
            // controllers.
            controllers::ROUTE if o.cluster_cidr.trim().is_empty() => {
                "--cluster-cidr is empty; set it, or --configure-cloud-routes=false to silence this"
            }
            _ => return true,
        };
        tracing::warn!(controller = %name, "skipping controller: {why}");
        false
    }

    fn cloud_node_config(&self, metrics: ControllerMetrics, informers: Informers) -> CloudNodeConfig {
        let o = &self.options;
        let mut cfg = CloudNodeConfig::default();
        cfg.node_status_update_frequency = o.node_status_update_frequency;
        cfg.concurrent_node_syncs = usize::try_from(o.concurrent_node_syncs).unwrap_or(1);
        cfg.concurrent_node_status_updates = usize::try_from(o.concurrent_node_status_updates).unwrap_or(0);
        cfg.node_selector = self.node_selector.clone();
        cfg.metrics = metrics;
        cfg.clock = self.clock.clone();
        cfg.informers = Some(informers);
        cfg
    }

    fn node_lifecycle_config(&self, metrics: ControllerMetrics, informers: Informers) -> NodeLifecycleConfig {
        let o = &self.options;
        let mut cfg = NodeLifecycleConfig::default();
        cfg.node_monitor_period = o.node_monitor_period;
        cfg.node_selector = self.node_selector.clone();
        cfg.metrics = metrics;
        cfg.clock = self.clock.clone();
        cfg.informers = Some(informers);
        cfg
    }

    fn service_config(&self, metrics: ControllerMetrics, informers: Informers) -> ServiceConfig {
        let o = &self.options;
        let mut cfg = ServiceConfig::default();
        cfg.cluster_name = o.cluster_name.clone();
        cfg.concurrent_service_syncs = usize::try_from(o.concurrent_service_syncs).unwrap_or(1);
        cfg.load_balancer_resync_period = o.load_balancer_resync_period;
        cfg.service_selector = self.service_selector.clone();
        cfg.node_selector = self.node_selector.clone();
        cfg.metrics = metrics;
        cfg.clock = self.clock.clone();
        cfg.informers = Some(informers);
        cfg.plans = self.dry_run_sink();
        cfg
    }

    /// With `--dry-run`, where the controllers' plans go.
    fn dry_run_sink(&self) -> Option<Arc<dyn ccm_controllers::DryRunSink>> {
        self.options
            .dry_run
            .then(|| self.dry_run.clone() as Arc<dyn ccm_controllers::DryRunSink>)
    }

    /// An unusable `--cluster-cidr` is an error, not a skip: flag validation already refuses one, so reaching it
    /// here is a bug worth stopping for.
    fn route_config(
        &self,
        name: &str,
        metrics: ControllerMetrics,
        informers: Informers,
    ) -> Result<RouteConfig, Error> {
        let o = &self.options;
        let mut cfg =
            RouteConfig::new(&o.cluster_name, o.cluster_cidr.trim()).map_err(|e| Error::Controller {
                name: name.to_owned(),
                source: Box::new(e),
            })?;
        cfg.route_reconciliation_period = o.route_reconciliation_period;
        cfg.node_selector = self.node_selector.clone();
        cfg.metrics = metrics;
        cfg.clock = self.clock.clone();
        cfg.informers = Some(informers);
        cfg.plans = self.dry_run_sink();
        Ok(cfg)
    }
}
