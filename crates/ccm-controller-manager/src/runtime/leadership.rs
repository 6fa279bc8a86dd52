//! Leading: the main lease (and the migration lease of `--enable-leader-migration`), then the controllers
//! under it until shutdown or a lost lease.

use super::*;

impl Runtime {
    pub(super) async fn lead<P: CloudProvider>(
        &self,
        provider: Arc<P>,
        ctx: &Ctx,
        migration: Option<MigrationConfig>,
        (status, migration_status): (LeaderStatus, LeaderStatus),
        identity: &str,
    ) -> Result<(), Error> {
        let enabled = self.enabled_controllers();
        let placement = |name: &str| {
            migration
                .as_ref()
                .map_or(Placement::NonMigrated, |m| m.placement(&self.known, name))
        };
        let placed = |keep: fn(Placement) -> bool| -> Vec<String> {
            enabled.iter().filter(|n| keep(placement(n))).cloned().collect()
        };
        for name in enabled.iter().filter(|n| placement(n) == Placement::Unowned) {
            tracing::info!(controller = %name, "not started: the leader-migration configuration assigns it to another component");
        }
        let mut running = Running::new(ctx);
        if self.options.dry_run {
            let all = placed(|p| p != Placement::Unowned);
            return self.run_unelected(&provider, ctx, &mut running, &all).await;
        }
        if !self.options.leader_elect {
            tracing::warn!("--leader-elect=false: running controllers without leader election");
            let all = placed(|p| p != Placement::Unowned);
            return self.run_unelected(&provider, ctx, &mut running, &all).await;
        }

        let Some(main) = self.acquire_main(ctx, identity, status).await else {
            return Ok(());
        };
        let mut held = vec![main];

        let first = placed(|p| p == Placement::NonMigrated);
        let migrated = placed(|p| p == Placement::Migrated);
        let mut result = self.run_checks(ctx).await;
        if result.is_ok() {
            result = self.start(&provider, ctx, &mut running, &first).await;
        }
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
        release(ctx, held, result).await
    }

    /// `--leader-elect=false`: every controller not owned by another component runs until shutdown or a failure,
    /// with no lease to lose.
    async fn run_unelected<P: CloudProvider>(
        &self,
        provider: &Arc<P>,
        ctx: &Ctx,
        running: &mut Running,
        names: &[String],
    ) -> Result<(), Error> {
        self.run_checks(ctx).await?;
        self.start(provider, ctx, running, names).await?;
        let result = self.wait(ctx, running, &[]).await;
        self.stop(ctx, running, STOP_TIMEOUT).await;
        result
    }

    /// Campaigns for the main lease until it is ours, then keeps renewing it in a task of its own; `None` when
    /// shutdown came first.
    async fn acquire_main(&self, ctx: &Ctx, identity: &str, status: LeaderStatus) -> Option<Held> {
        let o = &self.options;
        let main_cfg = self.lease_config(&o.leader_elect_resource_name, identity);
        let main_name = ccm_cloud_provider::namespaced_key(&main_cfg.namespace, &main_cfg.name);
        let mut main = Elector::new(ctx.election.clone(), main_cfg, self.clock.clone(), status);
        ctx.metrics.set_leader(&main_name, false);
        if !main.acquire(&ctx.cancel).await {
            return None;
        }
        ctx.metrics.set_leader(&main_name, true);
        Some(hold(main, main_name))
    }

    /// Acquires the migration lease (while watching the main lease and the controllers), then starts the
    /// migrated controllers.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn lead_migration<P: CloudProvider>(
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
        let name = ccm_cloud_provider::namespaced_key(&cfg.namespace, &cfg.name);
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
}

/// Stops renewing every held lease and waits for each elector to end (releasing the lease unless it was lost), so
/// that a successor can take over at once. A lease lost or lapsed meanwhile becomes the error when nothing failed
/// before; a lapse is remembered for rejoining the election.
async fn release(ctx: &Ctx, held: Vec<Held>, mut result: Result<(), Error>) -> Result<(), Error> {
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
