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
    pub(super) fn controller_future<P: CloudProvider>(
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
}

/// The nodes per provider lookup: `--node-lookup-batch-size` when set, else the controller's default.
fn lookup_batch(options: &Options, default: usize) -> usize {
    match usize::try_from(options.node_lookup_batch_size) {
        Ok(0) | Err(_) => default,
        Ok(n) => n,
    }
}
