use kube::runtime::reflector;

use super::*;
use ccm_testing::fixtures::NodeBuilder;

fn k8s_node(ready: Option<&str>, taints: Vec<Taint>) -> Node {
    let node = NodeBuilder::new("n").taints(taints);
    let mut n = ready.map_or(node.clone(), |s| node.condition("Ready", s)).build();
    // A status without conditions, as a kubelet that has not reported yet leaves it.
    n.status.get_or_insert_default();
    n
}

fn node(ready: Option<&str>, taints: Vec<Taint>) -> NodeView {
    NodeView::from(k8s_node(ready, taints))
}

fn shutdown_taint() -> Taint {
    Taint {
        key: TAINT_SHUTDOWN.into(),
        effect: "NoSchedule".into(),
        ..Default::default()
    }
}

#[test]
fn readiness_defaults_to_unknown() {
    assert_eq!(ready_status(&node(None, vec![])), "Unknown");
    assert_eq!(ready_status(&node(Some("False"), vec![])), "False");
    assert_eq!(ready_status(&node(Some("True"), vec![])), "True");
}

#[test]
fn nodes_deleted_only_when_the_instance_is_gone() {
    // Test_NodesDeleted: NotReady/Unknown and !exists -> deleted; exists -> kept.
    for ready in [Some("False"), None] {
        let n = node(ready, vec![]);
        assert_eq!(not_ready_action(&n, false, false), LifecycleAction::Delete);
        assert_eq!(not_ready_action(&n, true, false), LifecycleAction::None);
    }
}

#[test]
fn shutdown_taint_added_once_and_removed_when_ready() {
    // Test_NodesShutdown: shutdown + exists -> taint; already tainted -> nothing.
    let other = Taint {
        key: "x".into(),
        effect: "NoExecute".into(),
        ..Default::default()
    };
    let n = node(Some("False"), vec![other.clone()]);
    assert_eq!(
        not_ready_action(&n, true, true),
        LifecycleAction::SetTaints(vec![other.clone(), shutdown_taint()])
    );
    let tainted = node(Some("False"), vec![other.clone(), shutdown_taint()]);
    assert_eq!(not_ready_action(&tainted, true, true), LifecycleAction::None);
    // Back to Ready: the taint goes, others stay. Ready without the taint: no call.
    let ready = node(Some("True"), vec![other.clone(), shutdown_taint()]);
    assert_eq!(ready_action(&ready), LifecycleAction::SetTaints(vec![other]));
    assert_eq!(ready_action(&node(Some("True"), vec![])), LifecycleAction::None);
}

mod deletion {
    use std::collections::HashMap;

    use ccm_testing::provider::{FakeInstance, FakeProvider};
    use k8s_openapi::{
        apimachinery::pkg::apis::meta::v1::Time,
        jiff::{SignedDuration, Timestamp},
    };
    use kube::runtime::watcher;

    use super::*;
    use crate::mock_api::{MockApi, mock_api};

    const NOW: i64 = 1_800_000_000;

    fn config() -> NodeLifecycleConfig {
        NodeLifecycleConfig {
            clock: Clock::fixed(Timestamp::from_second(NOW).unwrap()),
            ..Default::default()
        }
    }

    /// A NotReady Node created `age` before NOW.
    pub(super) fn gone_node(name: &str, age: Duration) -> Arc<CachedNode> {
        let mut n = node(Some("False"), vec![]);
        n.name = name.into();
        n.uid = Some(format!("uid-{name}"));
        n.resource_version = Some("42".into());
        let created = Timestamp::from_second(NOW).unwrap() - SignedDuration::try_from(age).unwrap();
        n.creation_timestamp = Some(Time(created));
        n.provider_id = Some(format!("fake://{name}"));
        Arc::new(CachedNode(n))
    }

    fn names(nodes: &[Arc<CachedNode>]) -> Vec<&str> {
        nodes.iter().map(|n| name_of(n)).collect()
    }

    #[test]
    fn a_young_node_needs_two_sightings_a_monitor_period_apart() {
        let cfg = config();
        let young = gone_node("young", Duration::from_secs(30));
        let mut since = HashMap::new();
        let t0 = Instant::now();
        let plan = plan_deletions(vec![young.clone()], &[], &mut since, t0, &cfg, 10);
        assert!(plan.delete.is_empty(), "one sighting is not enough");
        // A second sighting sooner than one period is not enough either.
        let early = t0 + cfg.node_monitor_period / 2;
        let plan = plan_deletions(vec![young.clone()], &[], &mut since, early, &cfg, 10);
        assert!(plan.delete.is_empty());
        let later = t0 + cfg.node_monitor_period;
        let plan = plan_deletions(vec![young], &[], &mut since, later, &cfg, 10);
        assert_eq!(names(&plan.delete), ["young"]);
    }

    #[test]
    fn a_node_older_than_the_grace_period_goes_at_the_first_sighting() {
        let cfg = config();
        let old = gone_node("old", cfg.deletion_grace_period);
        let mut since = HashMap::new();
        let plan = plan_deletions(vec![old], &[], &mut since, Instant::now(), &cfg, 10);
        assert_eq!(names(&plan.delete), ["old"]);
    }

    #[test]
    fn an_error_keeps_a_sighting_and_an_existing_instance_clears_it() {
        let cfg = config();
        let young = gone_node("young", Duration::from_secs(1));
        let key = key_of(&young);
        let mut since = HashMap::new();
        let t0 = Instant::now();
        plan_deletions(vec![young.clone()], &[], &mut since, t0, &cfg, 10);
        // The lookup fails on the next pass: the first sighting is kept.
        let t1 = t0 + cfg.node_monitor_period;
        plan_deletions(vec![], std::slice::from_ref(&key), &mut since, t1, &cfg, 10);
        assert_eq!(since.get(&key), Some(&t0));
        let t2 = t1 + cfg.node_monitor_period;
        let plan = plan_deletions(vec![young.clone()], &[], &mut since, t2, &cfg, 10);
        assert_eq!(names(&plan.delete), ["young"]);
        // Found existing once: the count starts over.
        plan_deletions(vec![], &[], &mut since, t2, &cfg, 10);
        assert!(since.is_empty());
        let t3 = t2 + cfg.node_monitor_period;
        let plan = plan_deletions(vec![young], &[], &mut since, t3, &cfg, 10);
        assert!(plan.delete.is_empty());
    }

    #[test]
    fn deletions_per_pass_are_capped_at_ten_percent_and_at_least_one() {
        assert_eq!(deletion_cap(0, 10), 1);
        assert_eq!(deletion_cap(9, 10), 1);
        assert_eq!(deletion_cap(30, 10), 3);
        assert_eq!(deletion_cap(1000, 10), 100);
        let cfg = config();
        let gone: Vec<_> = ["e", "d", "c", "b", "a"]
            .into_iter()
            .map(|n| gone_node(n, Duration::from_secs(3600)))
            .collect();
        let plan = plan_deletions(gone, &[], &mut HashMap::new(), Instant::now(), &cfg, 30);
        assert_eq!(names(&plan.delete), ["a", "b", "c"]);
        assert_eq!(names(&plan.deferred), ["d", "e"]);
        assert_eq!(plan.cap, 3);
    }

    pub(super) fn ctx(api: &MockApi, cloud: FakeProvider, nodes: &[Arc<CachedNode>]) -> Ctx<FakeProvider> {
        let (store, mut writer) = reflector::store();
        for n in nodes {
            writer.apply_watcher_event(&watcher::Event::Apply((**n).clone()));
        }
        let cfg = config();
        Ctx {
            client: api.client.clone(),
            provider: Arc::new(cloud),
            recorder: EventRecorder::new(api.client.clone(), "test", cfg.clock.clone(), cfg.metrics.clone()),
            config: cfg,
            store,
            gone_since: Mutex::default(),
        }
    }

    fn deletes(api: &MockApi) -> Vec<crate::mock_api::Recorded> {
        api.requests()
            .into_iter()
            .filter(|r| r.method == "DELETE")
            .collect()
    }

    #[tokio::test]
    async fn the_delete_carries_the_uid_and_resource_version_read() {
        let api = mock_api(|_| None);
        let old = gone_node("old", Duration::from_secs(3600));
        let ctx = ctx(&api, FakeProvider::new(), &[old]);
        monitor_nodes(&ctx).await;
        let deletes = deletes(&api);
        assert_eq!(deletes.len(), 1, "{deletes:?}");
        assert_eq!(deletes[0].path, "/api/v1/nodes/old");
        assert_eq!(
            deletes[0].body["preconditions"],
            serde_json::json!({ "uid": "uid-old", "resourceVersion": "42" })
        );
    }

    #[tokio::test]
    async fn a_failed_precondition_is_not_an_error_and_the_node_is_judged_again() {
        let api =
            mock_api(|r| (r.method == "DELETE").then(|| crate::mock_api::status_error(409, "Conflict")));
        let ctx = ctx(
            &api,
            FakeProvider::new(),
            &[gone_node("old", Duration::from_secs(3600))],
        );
        monitor_nodes(&ctx).await;
        assert_eq!(ctx.config.metrics.snapshot().errors, 0);
        assert_eq!(deletes(&api).len(), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn a_young_node_is_deleted_on_the_second_pass_only() {
        let api = mock_api(|_| None);
        let ctx = ctx(
            &api,
            FakeProvider::new(),
            &[gone_node("young", Duration::from_secs(5))],
        );
        monitor_nodes(&ctx).await;
        assert!(deletes(&api).is_empty(), "deleted on one sighting");
        tokio::time::advance(ctx.config.node_monitor_period).await;
        monitor_nodes(&ctx).await;
        assert_eq!(deletes(&api).len(), 1);
    }

    #[tokio::test]
    async fn a_capped_pass_deletes_one_of_two_and_warns() {
        let api = mock_api(|_| None);
        let nodes = [
            gone_node("a", Duration::from_secs(3600)),
            gone_node("b", Duration::from_secs(3600)),
        ];
        let ctx = ctx(&api, FakeProvider::new(), &nodes);
        monitor_nodes(&ctx).await;
        let deletes = deletes(&api);
        assert_eq!(deletes.len(), 1);
        assert_eq!(deletes[0].path, "/api/v1/nodes/a");
        assert!(api.event_reasons().contains(&"NodeDeletionCapped".to_owned()));
    }

    #[tokio::test]
    async fn a_provider_error_is_never_gone() {
        let api = mock_api(|_| None);
        let cloud = FakeProvider::new();
        cloud.add_instance(FakeInstance::new("other", "fake://other"));
        cloud.fail(ccm_testing::provider::Method::InstanceExistsBatch, None, || {
            ccm_cloud_provider::CloudError::other("malformed provider ID")
        });
        let ctx = ctx(&api, cloud, &[gone_node("old", Duration::from_secs(3600))]);
        monitor_nodes(&ctx).await;
        assert!(deletes(&api).is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn a_pass_that_outlasts_its_deadline_is_abandoned() {
        let api = mock_api(|_| None);
        let cloud = FakeProvider::new();
        // The provider stops answering (for longer than the deadline).
        cloud.set_delay(Duration::from_secs(3600));
        let mut ctx = ctx(&api, cloud, &[gone_node("old", Duration::from_secs(3600))]);
        ctx.config.pass_deadline = Duration::from_secs(60);
        let start = Instant::now();
        assert!(!monitor_within_deadline(&ctx).await);
        assert_eq!(start.elapsed(), Duration::from_secs(60));
        assert_eq!(ctx.config.metrics.snapshot().errors, 1);
        assert!(deletes(&api).is_empty());
    }
}

/// A taint write that meets a conflict is decided again from the Node read back, not from the Node judged.
mod taint_retry {
    use std::sync::atomic::{AtomicBool, Ordering};

    use ccm_testing::provider::{FakeInstance, FakeProvider};

    use super::{
        deletion::{ctx, gone_node},
        *,
    };
    use crate::mock_api::{MockApi, mock_api, status_error};

    fn other_taint() -> Taint {
        Taint {
            key: "x".into(),
            effect: "NoExecute".into(),
            ..Default::default()
        }
    }

    /// The Node "n" as the apiserver has it after someone else's write.
    fn fresh(ready: &str, taints: Vec<Taint>) -> Node {
        let mut n = k8s_node(Some(ready), taints);
        n.metadata.resource_version = Some("43".into());
        n
    }

    /// The first PATCH answers 409; every GET answers `fresh`.
    fn conflict_once_then(fresh: Node) -> MockApi {
        let patched = AtomicBool::new(false);
        let fresh = serde_json::to_value(fresh).unwrap();
        mock_api(move |r| match r.method.as_str() {
            "PATCH" if !patched.swap(true, Ordering::SeqCst) => Some(status_error(409, "Conflict")),
            "GET" => Some((200, fresh.clone())),
            _ => None,
        })
    }

    /// The taint keys each PATCH wrote, in order.
    fn patched_taints(api: &MockApi) -> Vec<Vec<String>> {
        api.requests()
            .iter()
            .filter(|r| r.is_patch_of("/api/v1/nodes/n"))
            .map(|r| {
                r.body["spec"]["taints"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|t| t["key"].as_str().unwrap().to_owned())
                    .collect()
            })
            .collect()
    }

    /// A NotReady Node "n" whose instance is shut down, without the shutdown taint.
    fn shut_down_ctx(api: &MockApi) -> Ctx<FakeProvider> {
        let cloud = FakeProvider::new();
        cloud.add_instance(FakeInstance::new("n", "fake://n").shut_down());
        ctx(api, cloud, &[gone_node("n", Duration::from_secs(3600))])
    }

    #[tokio::test]
    async fn a_node_ready_again_after_a_conflict_is_not_tainted() {
        let api = conflict_once_then(fresh("True", vec![]));
        let ctx = shut_down_ctx(&api);
        monitor_nodes(&ctx).await;
        // The write that met the conflict, and nothing after the re-read.
        assert_eq!(patched_taints(&api), [vec![TAINT_SHUTDOWN.to_owned()]]);
        assert!(
            api.requests().iter().any(|r| r.method == "GET"),
            "the Node was not read again"
        );
        assert_eq!(ctx.config.metrics.snapshot().errors, 0);
    }

    #[tokio::test]
    async fn a_node_ready_again_after_a_conflict_loses_a_shutdown_taint_set_meanwhile() {
        let api = conflict_once_then(fresh("True", vec![other_taint(), shutdown_taint()]));
        let ctx = shut_down_ctx(&api);
        monitor_nodes(&ctx).await;
        assert_eq!(
            patched_taints(&api),
            [vec![TAINT_SHUTDOWN.to_owned()], vec!["x".to_owned()]]
        );
        let last = api.requests().into_iter().rfind(|r| r.method == "PATCH").unwrap();
        assert_eq!(last.body["metadata"]["resourceVersion"], "43");
    }

    #[tokio::test]
    async fn a_node_still_not_ready_after_a_conflict_is_tainted_over_the_fresh_taints() {
        let api = conflict_once_then(fresh("False", vec![other_taint()]));
        let ctx = shut_down_ctx(&api);
        monitor_nodes(&ctx).await;
        assert_eq!(
            patched_taints(&api),
            [
                vec![TAINT_SHUTDOWN.to_owned()],
                vec!["x".to_owned(), TAINT_SHUTDOWN.to_owned()]
            ]
        );
        let last = api.requests().into_iter().rfind(|r| r.method == "PATCH").unwrap();
        assert_eq!(last.body["metadata"]["resourceVersion"], "43");
    }

    #[tokio::test]
    async fn a_node_not_ready_again_after_a_conflict_keeps_its_taint_for_the_next_pass() {
        // The removal was decided for a Ready Node; the provider was not asked about this one.
        let api = conflict_once_then(fresh("False", vec![shutdown_taint()]));
        let mut ready = node(Some("True"), vec![shutdown_taint()]);
        ready.resource_version = Some("42".into());
        let ctx = ctx(&api, FakeProvider::new(), &[Arc::new(CachedNode(ready))]);
        monitor_nodes(&ctx).await;
        assert_eq!(patched_taints(&api), [Vec::<String>::new()]);
        assert_eq!(ctx.config.metrics.snapshot().errors, 0);
    }
}
