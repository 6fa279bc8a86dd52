//! A Service's load balancer deletion. The provider is always asked to delete, whether or not it still finds
//! the load balancer: what it made beside it (security groups, target groups, rules on the nodes' groups) can
//! outlive the load balancer itself, for example when AWS answers `DependencyViolation` for a deleted load
//! balancer's group while its network interfaces drain. Deletion is finished only when the provider says
//! everything is gone; until then the cleanup finalizer stays.
//!
//! A provider that waits on the cloud ([`CloudError::Waiting`]) is not failing: the Service gets a Normal
//! `LoadBalancerDeletionPending` Event naming what is waited for, and the deletion is retried with backoff
//! (at most [`PENDING_RETRY_CAP`] apart) for [`ServiceConfig::deletion_patience`]. After that a Warning
//! `LoadBalancerDeletionStuck` Event is posted and the deletion is retried every `max_retry_delay`, for as
//! long as it takes.

use std::time::Duration;

use ccm_cloud_provider::{CloudError, CloudProvider};
use k8s_openapi::api::core::v1::{ObjectReference, Service};
use tokio::time::Instant;

use super::{Ctx, key::ServiceKey};
use crate::{
    Error,
    events::{EventType, service_reference},
};

/// The longest delay between two attempts while a deletion is within its patience.
pub const PENDING_RETRY_CAP: Duration = Duration::from_secs(60);

/// Asks the provider to delete `svc`'s load balancer and what belongs to it, posting `DeletingLoadBalancer`
/// and `DeletedLoadBalancer`. `Err(Error::Waiting)` while the provider waits on the cloud; the caller must then
/// keep the finalizer. Failures are returned without an Event: the caller names them in its own. `key` is the
/// work queue's key of this deletion: the Service's, or its predecessor's (see `predecessor`), whose live
/// `successor` the provider is then given so that it leaves alone what the successor wants.
pub(super) async fn delete_load_balancer<P: CloudProvider>(
    ctx: &Ctx<P>,
    lb: &P::LoadBalancer,
    svc: &Service,
    successor: Option<&Service>,
    key: &ServiceKey,
) -> Result<(), Error> {
    use ccm_cloud_provider::LoadBalancer as _;
    let reference = service_reference(svc);
    if !ctx.states.read(key, |s| s.is_waiting()) {
        ctx.recorder
            .publish(
                &reference,
                EventType::Normal,
                "DeletingLoadBalancer",
                "Deleting load balancer",
            )
            .await;
    }
    ctx.config.metrics.provider_call();
    let cluster = &ctx.config.cluster_name;
    let deleted = match successor {
        Some(successor) => {
            lb.ensure_predecessor_load_balancer_deleted(cluster, svc, successor)
                .await
        }
        None => lb.ensure_load_balancer_deleted(cluster, svc).await,
    };
    match deleted {
        Ok(()) | Err(CloudError::ImplementedElsewhere) => {}
        Err(CloudError::Waiting { waiting_for, after }) => {
            let after = wait(ctx, key, &reference, &waiting_for, after).await;
            return Err(Error::Waiting {
                object: key.into(),
                waiting_for,
                after,
            });
        }
        Err(e) => return Err(Error::cloud("failed to delete load balancer", key, e)),
    }
    ctx.states.update(key, |s| s.end_wait());
    ctx.recorder
        .publish(
            &reference,
            EventType::Normal,
            "DeletedLoadBalancer",
            "Deleted load balancer",
        )
        .await;
    Ok(())
}

/// Records one more "wait" answer for `key`, posts the Event it calls for, and returns the delay before the
/// next attempt: the provider's `after` grown by the per-key backoff up to [`PENDING_RETRY_CAP`] within the
/// patience, then `max_retry_delay`.
async fn wait<P: CloudProvider>(
    ctx: &Ctx<P>,
    key: &ServiceKey,
    reference: &ObjectReference,
    waiting_for: &str,
    after: Duration,
) -> Duration {
    let now = Instant::now();
    let patience = ctx.config.deletion_patience;
    let (event, delay) = ctx.states.update(key, |s| {
        let waited = s.keep_waiting(now);
        if waited >= patience {
            let delay = ctx.config.max_retry_delay.max(after);
            let message = format!(
                "Deleting the load balancer has waited {} for {waiting_for}; retrying every {}. The cleanup \
                 finalizer stays until everything is gone: check what still uses it in AWS",
                human(waited),
                human(delay)
            );
            s.report_wait(waiting_for);
            (
                Some((EventType::Warning, "LoadBalancerDeletionStuck", message)),
                delay,
            )
        } else {
            let delay = ctx.backoff.next(key).clamp(after, PENDING_RETRY_CAP.max(after));
            let event = s.report_wait(waiting_for).then(|| {
                let message = format!(
                    "Waiting for {waiting_for}; retrying in {} (AWS can take over 10 minutes). The cleanup \
                     finalizer stays until everything is gone",
                    human(delay)
                );
                (EventType::Normal, "LoadBalancerDeletionPending", message)
            });
            (event, delay)
        }
    });
    tracing::info!(
        service = %key,
        waiting_for,
        ?delay,
        "load balancer deletion waits on the cloud"
    );
    if let Some((kind, reason, message)) = event {
        ctx.recorder.publish(reference, kind, reason, &message).await;
    }
    delay
}

/// `1m30s`-style durations for Event messages.
fn human(d: Duration) -> String {
    let secs = d.as_secs();
    match (secs / 60, secs % 60) {
        (0, s) => format!("{s}s"),
        (m, 0) => format!("{m}m"),
        (m, s) => format!("{m}m{s}s"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn human_durations() {
        assert_eq!(human(Duration::from_secs(10)), "10s");
        assert_eq!(human(Duration::from_secs(300)), "5m");
        assert_eq!(human(Duration::from_secs(905)), "15m5s");
    }
}
