//! Drift repair: a listener, target or health check changed by hand in the cloud is otherwise repaired only on
//! the next Service or node change. Every `load_balancer_resync_period` the provider is asked, in one call for
//! every ensured Service, which load balancers differ ([`LoadBalancer::drifted`], read in bulk by the AWS
//! provider); only those are re-ensured, and the Service gets a Normal Event `LoadBalancerDriftRepaired`
//! naming what changed once the ensure succeeded.
//!
//! Only settled load balancers are judged: those whose last ensure or host update succeeded, with none of
//! their own in flight when the pass began or started before it ended. A listing taken beside a change may
//! predate it (a load balancer still being created is "gone"), and that change leaves the load balancer as
//! wanted anyway; judging it would re-ensure it for nothing and tell of a repair of what nobody changed.

use ccm_cloud_provider::NodeView;
use std::{
    collections::HashMap,
    sync::{Arc, atomic::Ordering},
};

use ccm_cloud_provider::{CloudProvider, LoadBalancer};
use k8s_openapi::api::core::v1::Service;

use super::{Ctx, key::ServiceKey, stable_nodes, wants_load_balancer};
use crate::{
    ErrorChain,
    events::{EventType, service_reference},
};

/// Runs drift detection every `load_balancer_resync_period` (never when it is zero).
pub(super) async fn resync_loop<P: CloudProvider>(ctx: &Ctx<P>) {
    let period = ctx.config.load_balancer_resync_period;
    if period.is_zero() {
        return std::future::pending().await;
    }
    loop {
        tokio::time::sleep(period).await;
        detect(ctx).await;
    }
}

/// One pass: asks the provider about every Service whose load balancer was ensured, and queues those that
/// drifted, remembering what changed for the Event.
pub(super) async fn detect<P: CloudProvider>(ctx: &Ctx<P>) {
    let Some(lb) = ctx.provider.load_balancer() else {
        return;
    };
    if ctx.config.plans.is_some() {
        // A dry run ensured nothing to judge: it plans every Service again, against AWS as it is now.
        for (key, svc, _) in ctx.states.cached() {
            if wants_load_balancer(&svc) {
                ctx.queue.add(&key);
            }
        }
        return;
    }
    let mut judged: HashMap<ServiceKey, u64> = HashMap::new();
    let services: Vec<Arc<Service>> = ctx
        .states
        .cached()
        .into_iter()
        .filter(|(_, svc, _)| wants_load_balancer(svc))
        .filter_map(|(key, svc, settled)| {
            judged.insert(key, settled?);
            Some(svc)
        })
        .collect();
    if services.is_empty() {
        return;
    }
    let nodes = stable_nodes(ctx);
    let node_refs: Vec<&NodeView> = nodes.iter().map(|n| n.view()).collect();
    let service_refs: Vec<&Service> = services.iter().map(AsRef::as_ref).collect();
    ctx.config.metrics.provider_call();
    let drifts = match lb
        .drifted(&ctx.config.cluster_name, &service_refs, &node_refs)
        .await
    {
        Ok(drifts) => drifts,
        Err(error) => {
            ctx.config.metrics.error();
            tracing::warn!(error = %ErrorChain(&error), "drift detection failed; trying again next period");
            return;
        }
    };
    tracing::debug!(
        services = services.len(),
        drifted = drifts.len(),
        "drift detection pass"
    );
    for drift in drifts {
        let key = match drift.service.parse::<ServiceKey>() {
            Ok(key) => key,
            Err(error) => {
                tracing::warn!(%error, what = ?drift.what, "the provider named a drifted load balancer by a bad key");
                continue;
            }
        };
        if ctx.states.read(&key, |s| s.settled()) != judged.get(&key).copied() {
            tracing::debug!(service = %key, "changed during the drift pass; not judged");
            continue;
        }
        tracing::info!(service = %key, what = ?drift.what, "load balancer drifted; re-ensuring it");
        ctx.states
            .update(&key, |s| s.remember_drift(drift.what.join("; ")));
        ctx.queue.add(&key);
    }
}

/// Before a sync or host update of `key`: it is not judged until [`settled`] again.
pub(super) fn unsettle<P: CloudProvider>(ctx: &Ctx<P>, key: &ServiceKey) {
    ctx.states.update(key, |s| s.unsettle());
}

/// After an ensure or host update of `key` succeeded: judged from the next pass on.
pub(super) fn settled<P: CloudProvider>(ctx: &Ctx<P>, key: &ServiceKey) {
    let change = ctx.changes.fetch_add(1, Ordering::Relaxed);
    ctx.states.update(key, |s| s.settle(change));
}

/// After a successful ensure of `svc`: the Event for the drift it repaired, if it was queued for one.
pub(super) async fn repaired<P: CloudProvider>(ctx: &Ctx<P>, key: &ServiceKey, svc: &Service) {
    let Some(what) = ctx.states.update(key, |s| s.take_drift()) else {
        return;
    };
    let message = format!("Repaired the load balancer, changed outside the cluster: {what}");
    ctx.recorder
        .publish(
            &service_reference(svc),
            EventType::Normal,
            "LoadBalancerDriftRepaired",
            &message,
        )
        .await;
}
