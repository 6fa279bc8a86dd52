use ccm_cloud_provider::NodeAddressType::*;
use k8s_openapi::api::core::v1::Taint;

use kube::runtime::reflector;

use super::*;
use ccm_testing::fixtures::NodeBuilder;

fn taint(key: &str) -> Taint {
    Taint {
        key: key.to_owned(),
        value: Some("true".into()),
        effect: "NoSchedule".into(),
        ..Default::default()
    }
}

fn node(provider_id: Option<&str>, taints: Vec<Taint>) -> NodeView {
    let node = NodeBuilder::new("node0")
        .taints(taints)
        .address("Hostname", "kubelet-host");
    provider_id.map_or(node.clone(), |id| node.provider_id(id)).view()
}

fn meta() -> InstanceMetadata {
    InstanceMetadata {
        provider_id: "fake://12345".into(),
        instance_type: "t1.micro".into(),
        node_addresses: vec![
            NodeAddress::new(InternalIp, "10.0.0.1"),
            NodeAddress::new(ExternalIp, "132.143.154.163"),
        ],
        zone: "us-west-1a".into(),
        region: "us-west-1".into(),
        additional_labels: BTreeMap::new(),
        not_in_cluster: None,
    }
}

fn labels(n: &NodeView) -> BTreeMap<String, String> {
    n.labels.to_map()
}

fn taint_keys(n: &NodeView) -> Vec<String> {
    n.taints.iter().map(|t| t.key.clone()).collect()
}

#[test]
fn initialized_with_provider_id_labels_and_without_the_taint() {
    let n = node(None, vec![taint(TAINT_UNINITIALIZED), taint("other")]);
    let out = initialize_node(&n, &meta()).unwrap();
    assert_eq!(provider_id_of(&out), "fake://12345");
    assert_eq!(taint_keys(&out), vec!["other"], "other taints are kept");
    let l = labels(&out);
    for (k, v) in [
        (LABEL_INSTANCE_TYPE, "t1.micro"),
        (LABEL_INSTANCE_TYPE_BETA, "t1.micro"),
        (LABEL_ZONE, "us-west-1a"),
        (LABEL_ZONE_BETA, "us-west-1a"),
        (LABEL_REGION, "us-west-1"),
        (LABEL_REGION_BETA, "us-west-1"),
    ] {
        assert_eq!(l.get(k).map(String::as_str), Some(v), "{k}");
    }
}

#[test]
fn every_taint_with_the_key_goes_whatever_value_or_effect() {
    let mut other_effect = taint(TAINT_UNINITIALIZED);
    other_effect.effect = "NoExecute".into();
    other_effect.value = None;
    let n = node(None, vec![taint(TAINT_UNINITIALIZED), other_effect]);
    assert!(taint_keys(&initialize_node(&n, &meta()).unwrap()).is_empty());
}

#[test]
fn existing_provider_id_is_never_changed() {
    let n = node(Some("fake://already"), vec![taint(TAINT_UNINITIALIZED)]);
    assert_eq!(
        provider_id_of(&initialize_node(&n, &meta()).unwrap()),
        "fake://already"
    );
}

#[test]
fn empty_values_write_no_labels() {
    let n = node(None, vec![taint(TAINT_UNINITIALIZED)]);
    let out = initialize_node(
        &n,
        &InstanceMetadata {
            provider_id: "fake://1".into(),
            ..Default::default()
        },
    )
    .unwrap();
    assert!(labels(&out).is_empty());
}

#[test]
fn provider_id_resolution() {
    // [instanceV2] provider ID missing everywhere: error, the taint stays.
    let n = node(None, vec![taint(TAINT_UNINITIALIZED)]);
    let mut m = InstanceMetadata::default();
    let err = resolve_provider_id(&n, &mut m, true).unwrap_err();
    assert_eq!(
        err.to_string(),
        "cloud provider does not set node provider ID for node node0"
    );
    // Legacy Instances with NotImplemented instance IDs: initialized without a provider ID.
    assert!(resolve_provider_id(&n, &mut m, false).is_ok());
    let out = initialize_node(&n, &m).unwrap();
    assert_eq!(provider_id_of(&out), "");
    assert!(taint_keys(&out).is_empty());
    // The node's own provider ID fills in.
    let n = node(Some("fake://own"), vec![taint(TAINT_UNINITIALIZED)]);
    let mut m = InstanceMetadata::default();
    resolve_provider_id(&n, &mut m, true).unwrap();
    assert_eq!(m.provider_id, "fake://own");
}

#[test]
fn provided_node_ip_must_match_a_cloud_address() {
    let mut n = node(None, vec![taint(TAINT_UNINITIALIZED)]);
    n.provided_node_ip = Some("10.0.0.1".to_owned());
    assert!(initialize_node(&n, &meta()).is_ok(), "valid: matches InternalIP");
    n.provided_node_ip = Some("10.0.0.2".to_owned());
    let err = initialize_node(&n, &meta()).unwrap_err();
    assert!(matches!(err, Error::NodeIp { .. }), "{err}");
    n.provided_node_ip = Some("not-an-ip".to_owned());
    assert!(matches!(initialize_node(&n, &meta()), Err(Error::NodeIp { .. })));
}

#[test]
fn additional_labels_reserved_prefixes_dropped_and_existing_kept() {
    let mut n = node(None, vec![taint(TAINT_UNINITIALIZED)]);
    n.labels = [("example.com/existing", "mine")].into_iter().collect();
    let mut m = meta();
    for (k, v) in [
        ("example.com/new", "1"),
        ("example.com/existing", "theirs"),
        ("topology.k8s.io/x", "dropped"),
        ("kubernetes.io/x", "dropped"),
        ("k8s.io/x", "dropped"),
        ("topology.kubernetes.io/x", "dropped"),
        ("app.k8snio/x", "kept"),
    ] {
        m.additional_labels.insert(k.into(), v.into());
    }
    let l = labels(&initialize_node(&n, &m).unwrap());
    assert_eq!(l.get("example.com/new").map(String::as_str), Some("1"));
    assert_eq!(l.get("example.com/existing").map(String::as_str), Some("mine"));
    assert_eq!(l.get("app.k8snio/x").map(String::as_str), Some("kept"));
    for dropped in [
        "topology.k8s.io/x",
        "kubernetes.io/x",
        "k8s.io/x",
        "topology.kubernetes.io/x",
    ] {
        assert!(!l.contains_key(dropped), "{dropped}");
    }
}

#[test]
fn label_reconciliation_copies_beta_to_ga() {
    // (existing labels, expected fixes)
    type Labels<'a> = Vec<(&'a str, &'a str)>;
    let cases: Vec<(Labels<'_>, Labels<'_>)> = vec![
        (vec![], vec![]),
        (
            vec![
                (LABEL_ZONE_BETA, "a"),
                (LABEL_REGION_BETA, "r"),
                (LABEL_INSTANCE_TYPE_BETA, "t"),
            ],
            vec![(LABEL_INSTANCE_TYPE, "t"), (LABEL_REGION, "r"), (LABEL_ZONE, "a")],
        ),
        (vec![(LABEL_ZONE_BETA, "a"), (LABEL_ZONE, "a")], vec![]),
        (
            vec![(LABEL_ZONE_BETA, "a"), (LABEL_ZONE, "b")],
            vec![(LABEL_ZONE, "a")],
        ),
        (vec![(LABEL_ZONE, "only-ga")], vec![]),
    ];
    for (existing, want) in cases {
        let mut n = node(None, vec![]);
        n.labels = existing.iter().copied().collect();
        let want: BTreeMap<String, String> = want
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        assert_eq!(label_fixes(&n), want, "{existing:?}");
    }
}

#[test]
fn reserved_label_rule() {
    for (k, reserved) in [
        ("kubernetes.io/a", true),
        ("k8s.io/a", true),
        ("node.kubernetes.io/a", true),
        ("x.k8s.io/a", true),
        ("mykubernetes.io/a", false),
        ("app.k8snio/a", false),
        ("plain", false),
    ] {
        assert_eq!(is_reserved_label(k), reserved, "{k}");
    }
}

/// Syncs a batch in both stages at once (the worker overlaps them across batches); `false` when a stage
/// outlasted the deadline.
async fn sync_within_deadline<P: CloudProvider>(ctx: &Ctx<P>, batch: &[String]) -> bool {
    let Some(found) = within_deadline(ctx, batch, look_up(ctx, batch)).await else {
        return false;
    };
    within_deadline(ctx, batch, write(ctx, found)).await.is_some()
}

/// The controller's context over the scripted API, without its watch.
fn test_ctx<P: CloudProvider>(
    api: &crate::mock_api::MockApi,
    provider: P,
    store: reflector::Store<CachedNode>,
    config: CloudNodeConfig,
) -> Ctx<P> {
    Ctx {
        client: api.client.clone(),
        provider: Arc::new(provider),
        recorder: EventRecorder::new(
            api.client.clone(),
            "cloud-node-controller",
            config.clock.clone(),
            config.metrics.clone(),
        ),
        queue: WorkQueue::with_metrics(config.metrics.clone()),
        config,
        store,
        backoff: Backoff::new(Duration::from_millis(5), Duration::from_secs(1000)),
        superseded: Mutex::default(),
        not_in_cluster: Mutex::default(),
    }
}

/// A batch whose provider stops answering is abandoned at the deadline and its node retried with backoff.
#[tokio::test(start_paused = true)]
async fn a_batch_that_outlasts_its_deadline_is_abandoned_and_retried() {
    use ccm_testing::provider::FakeProvider;

    let api = crate::mock_api::mock_api(|_| None);
    let cloud = FakeProvider::new();
    cloud.set_delay(Duration::from_secs(3600));
    let (store, mut writer) = reflector::store();
    writer.apply_watcher_event(&kube::runtime::watcher::Event::Apply(CachedNode(node(
        None,
        vec![taint(TAINT_UNINITIALIZED)],
    ))));
    let config = CloudNodeConfig {
        sync_deadline: Duration::from_secs(60),
        ..CloudNodeConfig::default()
    };
    let ctx = test_ctx(&api, cloud, store, config);
    let start = tokio::time::Instant::now();
    assert!(!sync_within_deadline(&ctx, &["node0".to_owned()]).await);
    assert_eq!(start.elapsed(), Duration::from_secs(60));
    assert_eq!(ctx.backoff.failures("node0"), 1, "retried with backoff");
    assert_eq!(ctx.config.metrics.snapshot().errors, 1);
    assert!(api.writes().is_empty());
}

/// A burst's writes are its floor: the next batch's lookup (a slow listing page) runs while the last batch is
/// written, instead of after it. Two batches of two Nodes, lookups of 10 s, writes of 1 s a request: one after
/// the other they took 10 + W + 10 + W; overlapped, 10 + max(10, W) + W.
#[tokio::test(start_paused = true)]
async fn the_next_batch_is_looked_up_while_the_last_is_written() {
    use ccm_testing::provider::FakeProvider;

    let api = crate::mock_api::mock_api_paced(Duration::from_secs(1), |_| None);
    let cloud = FakeProvider::new();
    cloud.set_delay(Duration::from_secs(10));
    let (store, mut writer) = reflector::store();
    let names: Vec<String> = (0..4).map(|k| format!("node{k}")).collect();
    for name in &names {
        cloud.add_instance(
            ccm_testing::provider::FakeInstance::new(name, format!("fake://{name}"))
                .zone("zone-a", "region-a"),
        );
        let mut n = node(None, vec![taint(TAINT_UNINITIALIZED)]);
        n.name = name.clone();
        writer.apply_watcher_event(&kube::runtime::watcher::Event::Apply(CachedNode(n)));
    }
    let config = CloudNodeConfig {
        max_batch: 2,
        concurrent_node_syncs: 1,
        ..CloudNodeConfig::default()
    };
    let ctx = test_ctx(&api, cloud, store, config);
    for name in &names {
        ctx.queue.add(name);
    }
    let start = tokio::time::Instant::now();
    let initialized = async {
        while ctx.config.metrics.snapshot().reconciles < 4 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    };
    tokio::select! {
        () = worker(&ctx) => panic!("the worker ended"),
        () = initialized => {}
    }
    let elapsed = start.elapsed().as_secs_f64();
    let per_batch = api.writes().len() as f64 / 2.0;
    assert!(per_batch >= 2.0, "{:?}", api.writes());
    let overlapped = 10.0 + per_batch.max(10.0) + per_batch;
    assert!(
        (elapsed - overlapped).abs() < 1.0,
        "took {elapsed:.1} s; overlapped {overlapped:.1} s, one after the other {:.1} s",
        20.0 + 2.0 * per_batch
    );
}

/// A Node whose instance the provider does not count as the cluster's: one Warning per reason, counted while so.
#[tokio::test]
async fn a_node_outside_the_cluster_is_warned_about_once_and_counted_while_it_is() {
    use ccm_testing::provider::FakeProvider;

    let api = crate::mock_api::mock_api(|_| None);
    let (store, mut writer) = reflector::store();
    let n = node(Some("fake://1"), vec![]);
    writer.apply_watcher_event(&kube::runtime::watcher::Event::Apply(CachedNode(n.clone())));
    let ctx = test_ctx(&api, FakeProvider::new(), store, CloudNodeConfig::default());
    let outside = InstanceMetadata {
        not_in_cluster: Some("instance 1 lacks the cluster tag".into()),
        ..meta()
    };
    let counted = |ctx: &Ctx<FakeProvider>| ctx.config.metrics.snapshot().nodes_not_in_cluster;
    note_membership(&ctx, &n, &outside).await;
    note_membership(&ctx, &n, &outside).await;
    assert_eq!(api.event_reasons(), ["InstanceNotInCluster"], "once per reason");
    assert_eq!(counted(&ctx), 1);
    note_membership(&ctx, &n, &meta()).await;
    assert_eq!(counted(&ctx), 0, "tagged since");
    note_membership(&ctx, &n, &outside).await;
    // The same Event again: the recorder patches its count (client-go's correlation).
    let events = || {
        api.requests()
            .iter()
            .filter(|r| r.path.contains("/events"))
            .count()
    };
    assert_eq!(events(), 2, "untagged again");
    forget_membership(&ctx, "node0");
    assert_eq!(counted(&ctx), 0, "deleted");
    assert_eq!(api.requests().len(), events(), "nothing but Events");
}

/// The first address refresh runs at start, not a period later: the provider sees every initialized Node (one it
/// refuses a newer Node for, issue #55 item 6) right after a restart.
#[tokio::test(start_paused = true)]
async fn the_first_address_refresh_runs_at_start() {
    use ccm_testing::provider::{FakeInstance, FakeProvider, Method};

    let api = crate::mock_api::mock_api(|_| None);
    let cloud = FakeProvider::new();
    cloud.add_instance(FakeInstance::new("node0", "fake://12345"));
    let (store, mut writer) = reflector::store();
    writer.apply_watcher_event(&kube::runtime::watcher::Event::Apply(CachedNode(node(
        Some("fake://12345"),
        vec![],
    ))));
    let ctx = test_ctx(&api, cloud.clone(), store, CloudNodeConfig::default());
    tokio::select! {
        () = status_loop(&ctx) => panic!("the loop ended"),
        () = tokio::time::sleep(Duration::from_secs(1)) => {}
    }
    assert_eq!(cloud.batch_sizes(Method::InstanceMetadataBatch), vec![1]);
}
