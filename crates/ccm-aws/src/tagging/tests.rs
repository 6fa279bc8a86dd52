#![allow(clippy::unwrap_used, clippy::expect_used)]

use ccm_testing::fixtures::NodeBuilder;
use std::{
    pin::Pin,
    sync::atomic::{AtomicUsize, Ordering},
    time::Duration,
};

use std::{
    collections::BTreeMap,
    future::Future,
    sync::{Arc, Mutex},
};

use ccm_aws_api::{AwsError, ErrorKind, InstanceId, ProviderId, ec2::MockEc2};
use ccm_cloud_provider::NodeView;
use ccm_controllers::{CachedNode, Clock, ControllerMetrics};
use ccm_tagging::Tags;
use k8s_openapi::jiff::Timestamp;
use kube::runtime::watcher;

use super::{
    core::{Core, LabelNodes, MAX_CONCURRENT_LABELS},
    *,
};

type Fut<T> = Pin<Box<dyn Future<Output = ccm_aws_api::Result<T>> + Send>>;

const NOW: i64 = 1_800_000_000;

/// Hands `event` to `core` as the informer does: its object cached, behind an `Arc`.
fn observe(core: &Core<MockEc2, FakeLabels>, event: watcher::Event<NodeView>) {
    core.observe(match event {
        watcher::Event::Apply(n) => watcher::Event::Apply(Arc::new(CachedNode::from(n))),
        watcher::Event::InitApply(n) => watcher::Event::InitApply(Arc::new(CachedNode::from(n))),
        watcher::Event::Delete(n) => watcher::Event::Delete(Arc::new(CachedNode::from(n))),
        watcher::Event::Init => watcher::Event::Init,
        watcher::Event::InitDone => watcher::Event::InitDone,
    });
}

fn now() -> Timestamp {
    Timestamp::from_second(NOW).unwrap()
}

fn tags(pairs: &[(&str, &str)]) -> Tags {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

fn node(name: &str, provider_id: Option<&str>, label: Option<&str>, age_seconds: i64) -> NodeView {
    let mut node = NodeBuilder::new(name).created_at(NOW - age_seconds);
    if let Some(id) = provider_id {
        node = node.provider_id(id);
    }
    if let Some(l) = label {
        node = node.label(CHECKSUM_LABEL, l);
    }
    node.view()
}

fn aws_node(n: usize) -> NodeView {
    node(
        &format!("node-{n}"),
        Some(&format!("aws:///us-east-1a/i-{n:04}")),
        None,
        3600,
    )
}

/// Labels recorded in memory; nodes named `missing*` do not exist, `broken*` fail. Tracks patches in flight.
#[derive(Default, Clone)]
struct FakeLabels(
    Arc<Mutex<BTreeMap<String, String>>>,
    Arc<AtomicUsize>,
    Arc<AtomicUsize>,
);

impl LabelNodes for FakeLabels {
    async fn set_label(&self, node: &str, value: &str) -> Result<bool, String> {
        let now = self.1.fetch_add(1, Ordering::SeqCst) + 1;
        self.2.fetch_max(now, Ordering::SeqCst);
        tokio::time::sleep(Duration::from_millis(1)).await;
        self.1.fetch_sub(1, Ordering::SeqCst);
        if node.starts_with("missing") {
            return Ok(false);
        }
        if node.starts_with("broken") {
            return Err("apiserver said no".into());
        }
        self.0.lock().unwrap().insert(node.to_owned(), value.to_owned());
        Ok(true)
    }
}

/// Counts create_tags calls and the most of them in flight at once; answers with `answer(instance)`.
#[derive(Default, Clone)]
struct TagCalls {
    calls: Arc<AtomicUsize>,
    in_flight: Arc<AtomicUsize>,
    max_in_flight: Arc<AtomicUsize>,
}

fn ec2_with(
    answer: impl Fn(&str) -> Option<ErrorKind> + Send + Sync + Clone + 'static,
    calls: &TagCalls,
    expected_tags: Tags,
) -> MockEc2 {
    let mut ec2 = MockEc2::new();
    let c = calls.clone();
    let a = answer.clone();
    ec2.expect_create_tags().returning(move |resources, tags| {
        assert_eq!(resources.len(), 1);
        assert_eq!(*tags, expected_tags);
        let c = c.clone();
        let result = a(&resources[0]);
        Box::pin(async move {
            c.calls.fetch_add(1, Ordering::SeqCst);
            let now = c.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
            c.max_in_flight.fetch_max(now, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_millis(10)).await;
            c.in_flight.fetch_sub(1, Ordering::SeqCst);
            match result {
                None => Ok(()),
                Some(kind) => Err(AwsError::new(kind, "ec2", "CreateTags")),
            }
        }) as Fut<()>
    });
    ec2.expect_delete_tags().returning(move |resources, tags| {
        let result = answer(&resources[0]);
        assert_eq!(
            *tags,
            [("team".to_owned(), Some("a".to_owned()))].into(),
            "keys with values"
        );
        Box::pin(async move {
            match result {
                None => Ok(()),
                Some(kind) => Err(AwsError::new(kind, "ec2", "DeleteTags")),
            }
        }) as Fut<()>
    });
    ec2
}

fn core(ec2: MockEc2, labels: FakeLabels, batching: bool) -> Arc<Core<MockEc2, FakeLabels>> {
    let mut config = TaggingConfig::new(tags(&[("team", "a")]));
    config.enable_batching = batching;
    core_with(ec2, labels, &config, ControllerMetrics::default())
}

fn core_with(
    ec2: MockEc2,
    labels: FakeLabels,
    config: &TaggingConfig,
    queue_metrics: ControllerMetrics,
) -> Arc<Core<MockEc2, FakeLabels>> {
    core_outside(ec2, labels, config, queue_metrics, AllBut(Vec::new()))
}

fn core_outside(
    ec2: MockEc2,
    labels: FakeLabels,
    config: &TaggingConfig,
    queue_metrics: ControllerMetrics,
    members: AllBut,
) -> Arc<Core<MockEc2, FakeLabels>> {
    Arc::new(Core::new(
        Arc::new(ec2),
        Arc::new(members),
        labels,
        config,
        TaggingMetrics::default(),
        queue_metrics,
        Clock::fixed(now()),
    ))
}

/// Every instance is the cluster's but those listed (which EC2 shows without the cluster tag).
struct AllBut(Vec<&'static str>);

impl crate::membership::Members for AllBut {
    fn answers<'a>(
        &'a self,
        ids: &'a [InstanceId],
    ) -> futures::future::BoxFuture<'a, Result<BTreeMap<InstanceId, bool>, ccm_aws_api::AwsError>> {
        let answers = ids
            .iter()
            .map(|id| (id.clone(), !self.0.contains(&id.as_str())))
            .collect();
        Box::pin(async move { Ok(answers) })
    }
}

async fn until(what: &str, f: impl Fn() -> bool) {
    for _ in 0..100_000 {
        if f() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    panic!("timed out waiting for {what}");
}

fn checksum() -> String {
    tags_checksum(&tags(&[("team", "a")]))
}

#[test]
fn checksum_is_upstreams_md5_of_sorted_pairs() {
    assert_eq!(
        tags_checksum(&tags(&[("b", "2"), ("a", "1")])),
        "9dc867b7f2bf1e40160f90e46628512e"
    );
    assert_eq!(tags_checksum(&Tags::new()), "d41d8cd98f00b204e9800998ecf8427e");
}

#[test]
fn validation_lists_every_problem_with_upstreams_words() {
    let config = TaggingConfig {
        tags: tags(&[("aws:x", "1"), ("", "2")]),
        resources: vec!["instance".into(), "volume".into()],
        rate_limit: -1.0,
        burst_limit: -2,
        concurrent_node_syncs: 0,
        enable_batching: true,
    };
    let e = config.validate().unwrap_err();
    assert_eq!(
        e.to_string(),
        "Tagging controller inputs are not properly set: --tags: invalid tag key \"\": empty; --tags: invalid tag \
         key \"aws:x\": the aws: prefix is reserved by AWS; volume is not a supported resource. Current supported \
         resources [instance]; --tagging-controller-rate-limit must be a number >= 0, got -1; \
         --tagging-controller-burst-limit must be >= 0, got -2; --tagging-controller-concurrent-node-syncs must be \
         > 0, got 0"
    );
    let e = TaggingConfig::default().validate().unwrap_err();
    assert_eq!(
        e.problems,
        vec![ConfigProblem::NoTags, ConfigProblem::NoResources]
    );
    assert_eq!(
        ConfigProblem::NoTags.to_string(),
        "--tags must not be empty and must be a form of key=value"
    );
    assert!(TaggingConfig::new(tags(&[("k", "v")])).validate().is_ok());
    let mut nan = TaggingConfig::new(tags(&[("k", "v")]));
    nan.rate_limit = f64::NAN;
    assert!(nan.validate().is_err());
}

#[test]
fn tags_flag_parses_like_string_to_string() {
    assert_eq!(
        parse_tags("a=1,b=x=y").unwrap(),
        tags(&[("a", "1"), ("b", "x=y")])
    );
    assert_eq!(parse_tags("").unwrap(), Tags::new());
    assert_eq!(
        parse_tags("a=1,b").unwrap_err().to_string(),
        "\"a=1,b\" must be formatted as key=value (several separated by commas)"
    );
}

#[cfg(feature = "cli")]
#[test]
fn cli_flags_bind_to_the_config() {
    use clap::Parser;
    #[derive(clap::Parser)]
    struct Cmd {
        #[command(flatten)]
        tagging: TaggingArgs,
    }
    let cmd = Cmd::try_parse_from([
        "ccm",
        "--tags",
        "a=1,b=2",
        "--tags=c=3",
        "--resources",
        "instance",
        "--tagging-controller-rate-limit",
        "2.5",
        "--tagging-controller-burst-limit",
        "10",
        "--tagging-controller-concurrent-node-syncs",
        "4",
        "--tagging-controller-enable-batching=false",
    ])
    .unwrap();
    let config = TaggingConfig::from(cmd.tagging);
    assert_eq!(
        config,
        TaggingConfig {
            tags: tags(&[("a", "1"), ("b", "2"), ("c", "3")]),
            resources: vec!["instance".into()],
            rate_limit: 2.5,
            burst_limit: 10,
            concurrent_node_syncs: 4,
            enable_batching: false,
        }
    );
    let defaults = TaggingConfig::from(Cmd::try_parse_from(["ccm"]).unwrap().tagging);
    assert_eq!(
        defaults,
        TaggingConfig {
            resources: vec![],
            ..TaggingConfig::default()
        }
    );
    assert!(defaults.enable_batching && defaults.concurrent_node_syncs == 1);
    assert!(Cmd::try_parse_from(["ccm", "--tags", "nope"]).is_err());
    // Go's boolean forms, as pflag reads them.
    for (flag, want) in [
        ("", true),
        ("=true", true),
        ("=0", false),
        ("=F", false),
        ("=T", true),
    ] {
        let arg = format!("--tagging-controller-enable-batching{flag}");
        let cmd = Cmd::try_parse_from(["ccm", arg.as_str()]).unwrap();
        assert_eq!(cmd.tagging.enable_batching, want, "{arg}");
    }
    assert!(Cmd::try_parse_from(["ccm", "--tagging-controller-enable-batching=yes"]).is_err());
}

#[test]
fn provider_ids() {
    for (id, want) in [
        ("aws:///us-east-1a/i-0123", Some("i-0123")),
        ("aws:////i-0123", Some("i-0123")),
        ("i-0123", Some("i-0123")),
        ("aws:///us-east-1a/fargate-ip-10-0-0-1.ec2.internal", None),
        ("gce://p/z/i-0123", None),
        ("aws:///us-east-1a/", None),
        ("", None),
    ] {
        assert_eq!(
            ProviderId::ec2_instance_of(id).as_ref().map(InstanceId::as_str),
            want,
            "{id}"
        );
    }
}

#[tokio::test]
async fn only_nodes_needing_tags_are_queued() {
    let calls = TagCalls::default();
    let core = core(
        ec2_with(|_| None, &calls, tags(&[("team", "a")])),
        FakeLabels::default(),
        true,
    );
    observe(&core, watcher::Event::Init);
    observe(&core, watcher::Event::InitApply(aws_node(1)));
    observe(
        &core,
        watcher::Event::InitApply(node(
            "tagged",
            Some("aws:///us-east-1a/i-7"),
            Some(&checksum()),
            60,
        )),
    );
    observe(
        &core,
        watcher::Event::InitApply(node("stale", Some("aws:///us-east-1a/i-8"), Some("old"), 60)),
    );
    observe(
        &core,
        watcher::Event::InitApply(node(
            "fargate",
            Some("aws:///us-east-1a/fargate-ip-10-0-0-1"),
            None,
            60,
        )),
    );
    observe(
        &core,
        watcher::Event::InitApply(node("no-provider-id", None, None, 60)),
    );
    observe(&core, watcher::Event::InitDone);
    // Updates of a queued node do not queue it twice.
    observe(&core, watcher::Event::Apply(aws_node(1)));
    assert_eq!(core.queue.len(), 2, "node-1 and the stale label");
}

async fn tag_wave(batching: bool, nodes: usize) -> (TagCalls, FakeLabels, Arc<Core<MockEc2, FakeLabels>>) {
    let calls = TagCalls::default();
    let labels = FakeLabels::default();
    let core = core(
        ec2_with(|_| None, &calls, tags(&[("team", "a")])),
        labels.clone(),
        batching,
    );
    observe(&core, watcher::Event::Init);
    for n in 0..nodes {
        observe(&core, watcher::Event::InitApply(aws_node(n)));
    }
    observe(&core, watcher::Event::InitDone);
    let worker = {
        let core = core.clone();
        tokio::spawn(async move { core.work().await })
    };
    until("the wave tagged", || {
        core.metrics.count("tag", "done") == nodes as u64
    })
    .await;
    core.queue.shut_down();
    worker.await.unwrap();
    (calls, labels, core)
}

#[tokio::test(start_paused = true)]
async fn with_batching_one_worker_hands_the_whole_wave_to_ec2_at_once() {
    let (calls, labels, core) = tag_wave(true, 50).await;
    assert_eq!(calls.calls.load(Ordering::SeqCst), 50);
    assert_eq!(
        calls.max_in_flight.load(Ordering::SeqCst),
        50,
        "all 50 CreateTags in flight together: the adapter coalesces them into one request"
    );
    let labels = labels.0.lock().unwrap();
    assert_eq!(labels.len(), 50);
    assert!(labels.values().all(|v| *v == checksum()));
    // Once labelled, the watch's update is not queued again.
    observe(
        &core,
        watcher::Event::Apply(node(
            "node-1",
            Some("aws:///us-east-1a/i-0001"),
            Some(&checksum()),
            3600,
        )),
    );
    assert_eq!(core.queue.len(), 0);
}

#[tokio::test(start_paused = true)]
async fn without_batching_one_worker_tags_one_node_at_a_time() {
    let (calls, _, _) = tag_wave(false, 50).await;
    assert_eq!(calls.max_in_flight.load(Ordering::SeqCst), 1);
}

#[tokio::test(start_paused = true)]
async fn a_large_wave_goes_to_ec2_in_batches_of_500_with_few_label_patches_at_once() {
    let (calls, labels, _) = tag_wave(true, 1200).await;
    assert_eq!(calls.calls.load(Ordering::SeqCst), 1200);
    assert_eq!(calls.max_in_flight.load(Ordering::SeqCst), MAX_BATCH);
    assert_eq!(labels.2.load(Ordering::SeqCst), MAX_CONCURRENT_LABELS);
}

async fn run_one(core: &Arc<Core<MockEc2, FakeLabels>>, done: impl Fn(&TaggingMetrics) -> bool) {
    let worker = {
        let core = core.clone();
        tokio::spawn(async move { core.work().await })
    };
    until("the expected outcome", || done(&core.metrics)).await;
    core.queue.shut_down();
    worker.await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_young_node_whose_instance_is_not_found_is_retried_an_old_one_skipped() {
    let seen = Arc::new(AtomicUsize::new(0));
    let s = seen.clone();
    // Not found for the first two calls of the young node's instance, then found.
    let answer = move |instance: &str| {
        if instance == "i-old" {
            return Some(ErrorKind::NotFound);
        }
        (s.fetch_add(1, Ordering::SeqCst) < 2).then_some(ErrorKind::NotFound)
    };
    let calls = TagCalls::default();
    let core = core(
        ec2_with(answer, &calls, tags(&[("team", "a")])),
        FakeLabels::default(),
        true,
    );
    observe(
        &core,
        watcher::Event::Apply(node("young", Some("aws:///z/i-young"), None, 60)),
    );
    observe(
        &core,
        watcher::Event::Apply(node("old", Some("aws:///z/i-old"), None, 600)),
    );
    run_one(&core, |m| {
        m.count("tag", "done") == 1 && m.count("tag", "skipped") == 1
    })
    .await;
    assert_eq!(core.metrics.count("tag", "retried"), 2);
    assert_eq!(seen.load(Ordering::SeqCst), 3);
}

#[tokio::test(start_paused = true)]
async fn a_malformed_instance_id_is_skipped() {
    let calls = TagCalls::default();
    let core = core(
        ec2_with(|_| Some(ErrorKind::Invalid), &calls, tags(&[("team", "a")])),
        FakeLabels::default(),
        true,
    );
    observe(
        &core,
        watcher::Event::Apply(node("kwok", Some("aws:///z/i-kwok-1"), None, 60)),
    );
    run_one(&core, |m| m.count("tag", "skipped") == 1).await;
    assert_eq!(calls.calls.load(Ordering::SeqCst), 1, "not retried");
}

#[tokio::test(start_paused = true)]
async fn failures_are_retried_nine_times_then_dropped() {
    let calls = TagCalls::default();
    let core = core(
        ec2_with(|_| Some(ErrorKind::Throttled), &calls, tags(&[("team", "a")])),
        FakeLabels::default(),
        true,
    );
    observe(&core, watcher::Event::Apply(aws_node(1)));
    let started = tokio::time::Instant::now();
    run_one(&core, |m| m.count("tag", "dropped") == 1).await;
    assert_eq!(core.metrics.count("tag", "retried"), 9);
    assert_eq!(calls.calls.load(Ordering::SeqCst), 10);
    // 5 ms doubling: 5 + 10 + ... + 1280 ms = 2.555 s of backoff (plus the mock's 10 ms per call).
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(2555) && waited < Duration::from_secs(4),
        "{waited:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_label_failure_is_retried_and_a_vanished_node_is_gone() {
    let calls = TagCalls::default();
    let core = core(
        ec2_with(|_| None, &calls, tags(&[("team", "a")])),
        FakeLabels::default(),
        true,
    );
    observe(
        &core,
        watcher::Event::Apply(node("broken", Some("aws:///z/i-1"), None, 60)),
    );
    observe(
        &core,
        watcher::Event::Apply(node("missing", Some("aws:///z/i-2"), None, 60)),
    );
    run_one(&core, |m| {
        m.count("tag", "dropped") == 1 && m.count("tag", "gone") == 1
    })
    .await;
    assert_eq!(core.metrics.count("tag", "retried"), 9);
}

#[tokio::test(start_paused = true)]
async fn deleted_nodes_are_untagged() {
    let calls = TagCalls::default();
    let core = core(
        ec2_with(
            |i| (i == "i-0003").then_some(ErrorKind::NotFound),
            &calls,
            tags(&[("team", "a")]),
        ),
        FakeLabels::default(),
        true,
    );
    for n in 1..=3 {
        observe(
            &core,
            watcher::Event::Apply(node(
                &format!("node-{n}"),
                Some(&format!("aws:///z/i-{n:04}")),
                Some(&checksum()),
                60,
            )),
        );
    }
    // node-1's deletion is seen live; node-2 and node-3 vanished while the watch was down, which the informer
    // reports as deletions after its relist.
    for n in 1..=3 {
        observe(
            &core,
            watcher::Event::Delete(node(
                &format!("node-{n}"),
                Some(&format!("aws:///z/i-{n:04}")),
                None,
                60,
            )),
        );
    }
    run_one(&core, |m| {
        m.count("untag", "done") == 2 && m.count("untag", "skipped") == 1
    })
    .await;
    assert!(core.nodes().is_empty());
}

#[tokio::test(start_paused = true)]
async fn the_queue_wide_bucket_spaces_events() {
    let calls = TagCalls::default();
    let mut config = TaggingConfig::new(tags(&[("team", "a")]));
    config.rate_limit = 10.0;
    config.burst_limit = 2;
    let core = core_with(
        ec2_with(|_| None, &calls, tags(&[("team", "a")])),
        FakeLabels::default(),
        &config,
        ControllerMetrics::default(),
    );
    for n in 0..4 {
        observe(&core, watcher::Event::Apply(aws_node(n)));
    }
    assert_eq!(core.queue.len(), 2, "the burst goes at once");
    tokio::time::sleep(Duration::from_millis(101)).await;
    assert_eq!(core.queue.len(), 3);
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(core.queue.len(), 4);
}

#[tokio::test(start_paused = true)]
async fn the_queue_publishes_component_base_numbers() {
    let calls = TagCalls::default();
    let queue_metrics = ControllerMetrics::default();
    let core = core_with(
        ec2_with(|_| None, &calls, tags(&[("team", "a")])),
        FakeLabels::default(),
        &TaggingConfig::new(tags(&[("team", "a")])),
        queue_metrics.clone(),
    );
    for n in 0..3 {
        observe(&core, watcher::Event::Apply(aws_node(n)));
    }
    assert_eq!(queue_metrics.snapshot().queue_depth, 3);
    run_one(&core, |m| m.count("tag", "done") == 3).await;
    let q = queue_metrics.queue_snapshot();
    assert_eq!(q.adds, 3);
    assert_eq!(q.work_duration.count, 3);
    assert_eq!(queue_metrics.snapshot().queue_depth, 0);
}

#[tokio::test(start_paused = true)]
async fn a_deleted_nodes_instance_loses_its_error_series() {
    let calls = TagCalls::default();
    let core = core(
        ec2_with(|_| Some(ErrorKind::Throttled), &calls, tags(&[("team", "a")])),
        FakeLabels::default(),
        true,
    );
    let mut registry = prometheus_client::registry::Registry::default();
    core.metrics.register(&mut registry);
    let series = || {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        text.lines()
            .filter(|l| l.contains("instance_id=\"i-0001\""))
            .count()
    };
    observe(&core, watcher::Event::Apply(aws_node(1)));
    let worker = {
        let core = core.clone();
        tokio::spawn(async move { core.work().await })
    };
    until("the tag is dropped", || core.metrics.count("tag", "dropped") == 1).await;
    assert_eq!(series(), 2, "retried and dropped while the Node exists");
    observe(&core, watcher::Event::Delete(aws_node(1)));
    until("the untag is over", || {
        core.metrics.count("untag", "dropped") + core.metrics.count("untag", "done") == 1
    })
    .await;
    assert_eq!(series(), 0, "the Node is gone, and so are its instance's series");
    core.queue.shut_down();
    worker.await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn an_instance_without_the_cluster_tag_is_neither_tagged_nor_untagged() {
    let calls = TagCalls::default();
    let config = TaggingConfig::new(tags(&[("team", "a")]));
    let core = core_outside(
        ec2_with(|_| None, &calls, tags(&[("team", "a")])),
        FakeLabels::default(),
        &config,
        ControllerMetrics::default(),
        AllBut(vec!["i-foreign"]),
    );
    let forged = node("forged", Some("aws:///z/i-foreign"), None, 60);
    observe(&core, watcher::Event::Apply(forged));
    observe(
        &core,
        watcher::Event::Apply(node("own", Some("aws:///z/i-own"), None, 60)),
    );
    run_one(&core, |m| {
        m.count("tag", "done") == 1 && m.count("tag", "skipped") == 1
    })
    .await;
    assert_eq!(
        calls.calls.load(Ordering::SeqCst),
        1,
        "only the cluster's instance is tagged"
    );
    // A forged Node labelled as tagged (so not queued for tagging) that goes: nothing is untagged either.
    let core = core_outside(
        ec2_with(|_| None, &calls, tags(&[("team", "a")])),
        FakeLabels::default(),
        &config,
        ControllerMetrics::default(),
        AllBut(vec!["i-foreign"]),
    );
    let labelled = node("forged", Some("aws:///z/i-foreign"), Some(&checksum()), 60);
    observe(&core, watcher::Event::Apply(labelled.clone()));
    observe(&core, watcher::Event::Delete(labelled));
    run_one(&core, |m| m.count("untag", "skipped") == 1).await;
    assert_eq!(core.metrics.count("untag", "done"), 0, "nor untagged");
}

mod dry_run;
