//! A Service deleted and re-created under the same name while its load balancer's deletion was still going on
//! (the usual trigger: an operator strips a stuck cleanup finalizer and applies the manifest again). The two are
//! different objects: the new one is ensured at once, and the old one's cleanup goes on beside it under a key of
//! its own (`ServiceKey::Predecessor`, `<namespace>/<name>@<uid>`), with its own backoff, wait accounting and
//! Events (on the old object, which is what they are about).
//!
//! Their load balancers differ when the provider names them by UID, but not when the name is chosen (by an
//! annotation both incarnations carry): then the old one's plain deletion would delete the new one's load
//! balancer. So while the new one is in the cluster, the cleanup asks the provider with it
//! (`LoadBalancer::ensure_predecessor_load_balancer_deleted`), which leaves alone what it wants. A dry run
//! deletes nothing: it reports the cleanup as a plan.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Service;

use super::{Ctx, delete_cached_load_balancer, key::ServiceKey, plans, state::ServiceState};
use crate::Error;
use ccm_cloud_provider::CloudProvider;

/// `old`, the incarnation processed last under `service_key`, was replaced: its cleanup is queued under its own
/// key, taking along the wait already recorded for it, so the caller can ensure the new one at once.
pub(super) fn hand_over<P: CloudProvider>(ctx: &Ctx<P>, service_key: &ServiceKey, old: Arc<Service>) {
    let key = service_key.predecessor(&old);
    tracing::info!(
        service = %service_key,
        cleanup = %key,
        "the Service was deleted and re-created: its previous load balancer is deleted beside the new one"
    );
    let wait = ctx.states.update(service_key, ServiceState::hand_over);
    ctx.states.update(&key, |s| s.take_over(old, wait));
    ctx.queue.add(&key);
}

/// Deletes the load balancer of the previous incarnation queued under `key`; forgotten once the provider is
/// done (a wait or a failure is retried under the same key), or once a dry run reported it.
pub(super) async fn sync<P: CloudProvider>(ctx: &Ctx<P>, key: &ServiceKey) -> Result<(), Error> {
    let held = ctx.states.lock_of(key);
    let guard = held.lock().await;
    let old = ctx.states.read(key, ServiceState::predecessor);
    let result = match (old, ctx.provider.load_balancer()) {
        (Some(old), Some(lb)) => match &ctx.config.plans {
            Some(sink) => {
                plans::predecessor(key, &old, sink.as_ref());
                Ok(())
            }
            None => {
                let successor = successor(ctx, key, &old);
                delete_cached_load_balancer(ctx, lb, &old, successor.as_deref(), key).await
            }
        },
        _ => Ok(()),
    };
    // (The deletion itself forgets its wait record once done.)
    if result.is_ok() {
        ctx.states.update(key, ServiceState::forget_predecessor);
    }
    drop(guard);
    ctx.states.release(key, held);
    result
}

/// The Service in the cluster now under the name of `old`, whose cleanup is queued under `key`, if it is
/// another incarnation. The cleanup was handed over when the informer showed that successor, so it is missing
/// only once it was deleted too.
fn successor<P: CloudProvider>(ctx: &Ctx<P>, key: &ServiceKey, old: &Service) -> Option<Arc<Service>> {
    ctx.services
        .get(&key.object_ref())
        .filter(|live| live.metadata.uid != old.metadata.uid)
}
