//! What a Service may have written for it on paths other than its own successful ensure: host updates only for
//! load balancers this process served, a predecessor's cleanup that leaves its successor's alone, and dry runs
//! that delete nothing and keep no stale plan.

use std::collections::BTreeMap;

use ccm_cloud_provider::LoadBalancerPlan;

use super::*;

/// The plans a dry run reported, by key.
#[derive(Debug, Default)]
struct Plans(Mutex<BTreeMap<String, LoadBalancerPlan>>);

impl crate::DryRunSink for Plans {
    fn load_balancer(&self, key: &str, plan: Option<LoadBalancerPlan>) {
        let mut plans = lock(&self.0);
        match plan {
            Some(plan) => plans.insert(key.to_owned(), plan),
            None => plans.remove(key),
        };
    }
    fn routes(&self, _: BTreeMap<String, Vec<String>>) {}
    fn changes(&self, _: &str, _: &str, _: Vec<String>) {}
}

/// A harness whose controller runs as a dry run, reporting to the returned plans.
fn dry_run(services: Vec<Service>) -> (Harness, Arc<Plans>) {
    let mut h = harness(|_| None, services, vec![named_node("n1")]);
    let plans = Arc::new(Plans::default());
    h.ctx.config.plans = Some(plans.clone());
    (h, plans)
}

/// Syncs every key queued now, as the workers would.
async fn drain(h: &Harness) -> Vec<String> {
    let mut synced = Vec::new();
    while !h.ctx.queue.is_empty() {
        for key in h.ctx.queue.next_batch(10, Duration::ZERO).await.unwrap() {
            let _ = sync_service(&h.ctx, &key).await;
            h.ctx.queue.done(&key);
            synced.push(key.to_string());
        }
    }
    synced
}

/// `svc`, deleted and re-created under the same name: the same Service with UID `uid-new`.
fn recreated(svc: &Service) -> Service {
    let mut new = svc.clone();
    new.metadata.uid = Some("uid-new".into());
    new
}

/// A Service whose ensure failed (refused: its annotation names another Service's load balancer) is never
/// handed to `update_load_balancer` by a node change, whether it was served before or never was: the node
/// change queues a full sync of it instead, whose ensure decides again. A served Service still gets its host
/// update.
#[tokio::test]
async fn a_service_whose_ensure_failed_gets_no_host_update() {
    let mut h = harness(
        |_| None,
        vec![svc("served"), svc("refused"), svc("fresh")],
        vec![named_node("n1")],
    );
    sync_service(&h.ctx, &key("ns/served")).await.unwrap();
    sync_service(&h.ctx, &key("ns/refused")).await.unwrap();
    let refusal = || CloudError::other("load balancer a1 belongs to Service ns/other");
    h.provider
        .fail_for(Method::EnsureLoadBalancer, "ns/refused", Some(1), refusal);
    h.provider
        .fail_for(Method::EnsureLoadBalancer, "ns/fresh", Some(1), refusal);
    sync_service(&h.ctx, &key("ns/refused"))
        .await
        .expect_err("refused");
    sync_service(&h.ctx, &key("ns/fresh")).await.expect_err("refused");
    h.provider.clear_calls();

    h.nodes
        .apply_watcher_event(&watcher::Event::Apply(CachedNode::from(named_node("n2"))));
    node_sync::sync_nodes(&h.ctx).await;
    let updated = h.calls();
    assert_eq!(
        updated,
        [(Method::UpdateLoadBalancer, "ns/served".to_owned())],
        "a host update only for the load balancer that was served"
    );

    h.provider.clear_calls();
    let mut synced = drain(&h).await;
    synced.sort();
    assert_eq!(synced, ["ns/fresh", "ns/refused"], "a full sync of each instead");
    assert_eq!(h.provider.count(Method::EnsureLoadBalancer), 2);
    assert_eq!(h.provider.count(Method::UpdateLoadBalancer), 0);

    // Ensured now: the next node change is a host update again, and nothing else is queued.
    h.provider.clear_calls();
    h.nodes
        .apply_watcher_event(&watcher::Event::Apply(CachedNode::from(named_node("n3"))));
    node_sync::sync_nodes(&h.ctx).await;
    assert_eq!(h.provider.count(Method::UpdateLoadBalancer), 3);
    assert_eq!(h.ctx.queue.len(), 0);
    drop(h.services);
}

/// A predecessor's cleanup asks the provider to delete the predecessor's load balancer next to the live
/// successor (a provider naming load balancers by annotation gives both the same one), and the plain deletion
/// only once the successor is gone too.
#[tokio::test]
async fn a_predecessors_cleanup_names_its_live_successor() {
    let old = with(finalized);
    let mut h = harness(|_| None, vec![old.clone()], vec![named_node("n1")]);
    sync_service(&h.ctx, &key("ns/svc")).await.unwrap();
    let new = recreated(&old);
    h.services
        .apply_watcher_event(&watcher::Event::Apply(new.clone()));
    sync_service(&h.ctx, &key("ns/svc")).await.unwrap();
    h.provider.clear_calls();
    // The cleanup waits on the cloud once, so it runs again after the successor is gone.
    h.provider
        .fail(Method::EnsurePredecessorLoadBalancerDeleted, Some(1), || {
            CloudError::waiting("security group sg-1", Duration::from_secs(10))
        });

    assert_eq!(drain(&h).await, ["ns/svc@uid-1"]);
    assert_eq!(
        h.provider.predecessor_deletions(),
        [("uid-1".to_owned(), "uid-new".to_owned())]
    );
    assert_eq!(h.provider.count(Method::EnsureLoadBalancerDeleted), 0);
    assert_eq!(
        h.provider.load_balancers()["ns/svc"].service_uid,
        "uid-new",
        "the successor's load balancer is left alone"
    );

    h.services.apply_watcher_event(&watcher::Event::Delete(new));
    sync_service(&h.ctx, &key("ns/svc@uid-1")).await.unwrap();
    assert_eq!(h.provider.count(Method::EnsurePredecessorLoadBalancerDeleted), 1);
    assert_eq!(h.provider.count(Method::EnsureLoadBalancerDeleted), 1);
    assert!(
        !h.ctx.states.any(|s| s.predecessor().is_some()),
        "forgotten once done"
    );
}

/// A dry run deletes nothing for a predecessor: its cleanup is reported as a plan under its own key, and the
/// predecessor is forgotten.
#[tokio::test]
async fn a_dry_run_plans_a_predecessors_cleanup() {
    let old = with(finalized);
    let (mut h, plans) = dry_run(vec![old.clone()]);
    sync_service(&h.ctx, &key("ns/svc")).await.unwrap();
    h.services
        .apply_watcher_event(&watcher::Event::Apply(recreated(&old)));
    sync_service(&h.ctx, &key("ns/svc")).await.unwrap();

    assert_eq!(drain(&h).await, ["ns/svc@uid-1"]);
    let deleting = [
        Method::EnsureLoadBalancerDeleted,
        Method::EnsurePredecessorLoadBalancerDeleted,
    ];
    let calls = h.provider.calls();
    assert!(calls.iter().all(|c| !deleting.contains(&c.method)), "{calls:?}");
    let plan = lock(&plans.0).get("ns/svc@uid-1").cloned().expect("a plan");
    assert_eq!(
        plan.changes,
        ["delete the load balancer of the previous incarnation ns/svc (UID uid-1)"]
    );
    assert!(!h.ctx.states.any(|s| s.predecessor().is_some()), "forgotten");
    drop(h.services);
}

/// A dry run whose provider answers `ImplementedElsewhere` (the Service moved to type `external`) drops the
/// Service's plan: nothing is pending for it here any more.
#[tokio::test]
async fn a_dry_run_drops_the_plan_of_a_service_served_elsewhere() {
    let (h, plans) = dry_run(vec![with(finalized)]);
    sync_service(&h.ctx, &key("ns/svc")).await.unwrap();
    assert!(lock(&plans.0).contains_key("ns/svc"), "planned");

    h.provider.fail(Method::PlanLoadBalancer, None, || {
        CloudError::ImplementedElsewhere
    });
    sync_service(&h.ctx, &key("ns/svc")).await.unwrap();
    assert_eq!(*lock(&plans.0), BTreeMap::new(), "no stale plan");
}

/// A name other than the default one is recorded on the Service before the ensure that may create under it,
/// in the finalizer's patch (one write), and again only when it changes: a deletion then finds a load balancer
/// made by an ensure that failed after its create, whatever the status shows.
#[tokio::test]
async fn a_chosen_name_is_recorded_before_the_ensure_that_may_create_under_it() {
    use ccm_testing::provider::CHOSEN_NAME_ANNOTATION;
    let names = ccm_cloud_provider::ANNOTATION_LOAD_BALANCER_NAMES;
    let chosen = |name: &str| {
        let mut s = svc("svc");
        s.metadata
            .annotations
            .get_or_insert_default()
            .insert(CHOSEN_NAME_ANNOTATION.to_owned(), name.to_owned());
        s
    };
    let h = harness(|_| None, vec![chosen("shop")], vec![named_node("n1")]);
    let refusal = || CloudError::other("failed after the create");
    h.provider
        .fail_for(Method::EnsureLoadBalancer, "ns/svc", Some(1), refusal);
    sync_service(&h.ctx, &key("ns/svc"))
        .await
        .expect_err("the ensure fails");
    let recorded = patches(&h.api);
    assert_eq!(recorded.len(), 1, "{recorded:?}");
    assert_eq!(recorded[0].1["metadata"]["annotations"][names], "shop");
    assert_eq!(
        recorded[0].1["metadata"]["finalizers"],
        json!([crate::keys::FINALIZER_LB_CLEANUP])
    );

    // Recorded already (and finalized): no write before the ensure. The default name is never recorded.
    let mut known = chosen("shop");
    known.metadata.finalizers = Some(vec![crate::keys::FINALIZER_LB_CLEANUP.to_owned()]);
    known
        .metadata
        .annotations
        .get_or_insert_default()
        .insert(names.to_owned(), "shop".to_owned());
    let h = harness(|_| None, vec![known.clone()], vec![named_node("n1")]);
    sync_service(&h.ctx, &key("ns/svc")).await.unwrap();
    assert!(
        patches(&h.api).iter().all(|(_, p)| p.get("metadata").is_none()),
        "{:?}",
        patches(&h.api)
    );
    // Renamed: the new name joins the record.
    let mut renamed = known;
    renamed
        .metadata
        .annotations
        .get_or_insert_default()
        .insert(CHOSEN_NAME_ANNOTATION.to_owned(), "store".to_owned());
    let h = harness(|_| None, vec![renamed], vec![named_node("n1")]);
    sync_service(&h.ctx, &key("ns/svc")).await.unwrap();
    let recorded = patches(&h.api);
    assert_eq!(recorded[0].1["metadata"]["annotations"][names], "shop,store");
}
