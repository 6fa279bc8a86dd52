//! An ensure that waits on the cloud (a consented rename whose old load balancer's security group AWS still
//! holds) is progress, not a failure: a Normal Event, no `SyncLoadBalancerFailed` Warning on every retry.

use super::*;

#[tokio::test(start_paused = true)]
async fn an_ensure_waiting_on_the_cloud_is_a_normal_event_not_a_warning_each_retry() {
    let h = harness(|_| None, vec![with(finalized)], vec![named_node("n1")]);
    let what =
        "AWS to release security group sg-1 of the deleted load balancer old, before the rename goes on";
    h.provider.fail(Method::EnsureLoadBalancer, Some(3), move || {
        CloudError::waiting(what, Duration::from_secs(10))
    });
    let mut delays = Vec::new();
    for _ in 0..3 {
        match sync_service(&h.ctx, &key("ns/svc")).await {
            Err(Error::Waiting {
                after, waiting_for, ..
            }) => {
                assert_eq!(waiting_for, what);
                delays.push(after.as_secs());
                tokio::time::advance(after).await;
            }
            other => panic!("expected a wait, got {other:?}"),
        }
    }
    assert_eq!(delays, [10, 10, 20], "the provider's delay, grown by the backoff");
    let reasons = h.api.event_reasons();
    assert!(
        !reasons.iter().any(|r| r == "SyncLoadBalancerFailed"),
        "no Warning while waiting: {reasons:?}"
    );
    let pending = event(&h.api, "LoadBalancerEnsurePending");
    assert_eq!(pending.body["type"], "Normal");
    assert!(
        pending.body["message"].as_str().unwrap().contains(what),
        "{pending:?}"
    );
    assert_eq!(status_patches(&h), 0, "no status written while waiting");

    // Released: the ensure succeeds and writes the status.
    tokio::time::advance(Duration::from_secs(20)).await;
    sync_service(&h.ctx, &key("ns/svc")).await.unwrap();
    assert_eq!(status_patches(&h), 1, "the status");
}

/// The status PATCHes sent (Events are counted by PATCHes too).
fn status_patches(h: &Harness) -> usize {
    h.api
        .writes()
        .iter()
        .filter(|r| r.is_patch_of(STATUS_PATH))
        .count()
}
