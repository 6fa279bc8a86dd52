//! The tagging controller's state and work: what it remembers of each Node, the work items, and the workers.

use std::{
    collections::{BTreeMap, HashMap},
    fmt,
    future::Future,
    sync::{Arc, Mutex, MutexGuard},
    time::Duration,
};

use ccm_aws_api::{AwsError, Ec2, ErrorKind, InstanceId, ProviderId};
use ccm_cloud_provider::NodeView;
use ccm_controllers::{Backoff, CachedNode, Clock, ControllerMetrics, ErrorChain, TokenBucket, WorkQueue};
use ccm_tagging::Tags;
use futures::future::join_all;
use k8s_openapi::{api::core::v1::Node, jiff::Timestamp};
use kube::{
    Api,
    api::{Patch, PatchParams},
    runtime::watcher,
};

use super::{CHECKSUM_LABEL, MAX_BATCH, TaggingConfig, TaggingMetrics};
use crate::membership::Members;

/// Label patches in flight at once per controller, so a large batch does not open hundreds of API connections.
pub(super) const MAX_CONCURRENT_LABELS: usize = 32;

/// Failures after which a work item is dropped (upstream `maxRequeuingCount`).
const MAX_RETRIES: u32 = 9;

/// The controller's name in a dry run's report.
const CONTROLLER: &str = "tagging";

/// A Node younger than this whose instance is not found yet is retried rather than skipped.
const NOT_FOUND_GRACE_SECONDS: i64 = 5 * 60;

/// The per-item backoff (upstream's `ItemExponentialFailureRateLimiter(5ms, 1000s)`).
const BASE_DELAY: Duration = Duration::from_millis(5);
const MAX_DELAY: Duration = Duration::from_secs(1000);

/// What a work item does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum Action {
    Tag,
    Untag,
}

/// One work item (upstream `workItem`): equal items are de-duplicated by the queue.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) struct Item {
    pub(super) action: Action,
    pub(super) node: String,
    pub(super) instance: InstanceId,
}

/// What the controller remembers of a Node.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct NodeEntry {
    instance: Option<InstanceId>,
    label: Option<String>,
    created: Option<Timestamp>,
}

/// How a work item ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Done,
    /// Nothing to do, or nothing that can be done (instance gone for good, malformed ID).
    Skipped,
    /// The Node is gone or changed since the item was queued.
    Gone,
}

/// What a lookup that does not show the instance means to the tagging decision: CreateTags' NotFound.
fn not_visible(instance: &InstanceId) -> AwsError {
    AwsError::new(ErrorKind::NotFound, "ec2", "DescribeInstances")
        .with_code("InvalidInstanceID.NotFound")
        .with_message(format!("the instance ID '{instance}' does not exist"))
}

/// A failure worth retrying.
#[derive(Debug, thiserror::Error)]
enum Failure {
    #[error("tagging instance {instance} failed")]
    Tag {
        instance: InstanceId,
        #[source]
        source: AwsError,
    },
    #[error("untagging instance {instance} failed")]
    Untag {
        instance: InstanceId,
        #[source]
        source: AwsError,
    },
    #[error("labelling node {node} failed: {message}")]
    Label { node: String, message: String },
}

/// Sets the checksum label on a Node (the Kubernetes side, a trait so that tests need no apiserver).
pub(super) trait LabelNodes: Send + Sync {
    /// `Ok(false)` when the Node does not exist.
    fn set_label(&self, node: &str, value: &str) -> impl Future<Output = Result<bool, String>> + Send;
}

pub(super) struct KubeLabels(pub(super) Api<Node>);

/// The state shared by the watch and the workers.
pub(super) struct Core<E, L> {
    ec2: Arc<E>,
    /// Which instances are the cluster's: only those are tagged or untagged.
    members: Arc<dyn Members>,
    labels: L,
    tags: Tags,
    untag: BTreeMap<String, Option<String>>,
    checksum: String,
    pub(super) batch: usize,
    nodes: Mutex<HashMap<String, NodeEntry>>,
    pub(super) queue: WorkQueue<Item>,
    backoff: Backoff<Item>,
    /// The queue-wide limit (`--tagging-controller-rate-limit`/`-burst-limit`), if any.
    bucket: Option<Mutex<TokenBucket>>,
    label_permits: tokio::sync::Semaphore,
    pub(super) metrics: TaggingMetrics,
    clock: Clock,
    /// With a dry run: where the tags and labels this controller would write go instead.
    pub(super) dry_run: Option<Arc<dyn ccm_controllers::DryRunSink>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

// === impl Item ===

impl fmt::Display for Item {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let action = match self.action {
            Action::Tag => "tag",
            Action::Untag => "untag",
        };
        write!(f, "{action} {}/{}", self.node, self.instance)
    }
}

// === impl KubeLabels ===

impl LabelNodes for KubeLabels {
    async fn set_label(&self, node: &str, value: &str) -> Result<bool, String> {
        let patch = serde_json::json!({ "metadata": { "labels": { CHECKSUM_LABEL: value } } });
        match self
            .0
            .patch(node, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => Ok(true),
            Err(kube::Error::Api(s)) if s.is_not_found() => Ok(false),
            Err(e) => Err(e.to_string()),
        }
    }
}

// === impl Core ===

impl<E, L> Core<E, L>
where
    E: Ec2 + Send + Sync + 'static,
    L: LabelNodes,
{
    pub(super) fn new(
        ec2: Arc<E>,
        members: Arc<dyn Members>,
        labels: L,
        config: &TaggingConfig,
        metrics: TaggingMetrics,
        queue_metrics: ControllerMetrics,
        clock: Clock,
    ) -> Self {
        #[allow(clippy::cast_precision_loss)]
        let bucket = (config.rate_limit > 0.0 && config.burst_limit > 0)
            .then(|| Mutex::new(TokenBucket::new(config.rate_limit, config.burst_limit as f64)));
        Self {
            ec2,
            members,
            labels,
            untag: config
                .tags
                .iter()
                .map(|(k, v)| (k.clone(), Some(v.clone())))
                .collect(),
            tags: config.tags.clone(),
            checksum: config.checksum(),
            batch: if config.enable_batching { MAX_BATCH } else { 1 },
            nodes: Mutex::new(HashMap::new()),
            queue: WorkQueue::with_metrics(queue_metrics),
            backoff: Backoff::new(BASE_DELAY, MAX_DELAY),
            bucket,
            label_permits: tokio::sync::Semaphore::new(MAX_CONCURRENT_LABELS),
            metrics,
            clock,
            dry_run: None,
        }
    }

    pub(super) fn nodes(&self) -> MutexGuard<'_, HashMap<String, NodeEntry>> {
        lock(&self.nodes)
    }

    pub(super) fn shut_down(&self) {
        self.queue.shut_down();
    }

    /// How long the queue-wide bucket makes the next add wait (zero without a bucket).
    fn bucket_delay(&self) -> Duration {
        self.bucket.as_ref().map_or(Duration::ZERO, |b| lock(b).reserve())
    }

    /// A new event's item: at once, or when the queue-wide bucket allows.
    fn add_event(&self, item: &Item) {
        self.queue.add_after(item, self.bucket_delay());
    }

    /// A failed item: after its exponential delay (or the bucket's, if longer). Returns the failures so far.
    fn add_rate_limited(&self, item: &Item) -> u32 {
        let delay = self.backoff.next(item).max(self.bucket_delay());
        self.queue.add_after(item, delay);
        self.backoff.failures(item)
    }

    /// Handles a watch event (deletions missed while the watch was down come as `Delete` events too): remembers
    /// the Node and queues what it needs.
    pub(super) fn observe(&self, event: watcher::Event<Arc<CachedNode>>) {
        match event {
            watcher::Event::InitApply(node) | watcher::Event::Apply(node) => self.applied(&node),
            // A nameless Node (never from the apiserver) was never remembered.
            watcher::Event::Delete(node) if !node.name.is_empty() => self.deleted(&node.name),
            watcher::Event::Delete(_) | watcher::Event::Init | watcher::Event::InitDone => {}
        }
    }

    fn applied(&self, node: &NodeView) {
        // A nameless Node (never from the apiserver) cannot be labelled.
        if node.name.is_empty() {
            return;
        }
        let name = node.name.clone();
        let entry = NodeEntry {
            instance: node.provider_id.as_deref().and_then(ProviderId::ec2_instance_of),
            label: node.labels.get(CHECKSUM_LABEL).map(str::to_owned),
            created: node.creation_timestamp.as_ref().map(|t| t.0),
        };
        let needs = entry.label.as_deref() != Some(self.checksum.as_str());
        let item = entry.instance.clone().filter(|_| needs).map(|instance| Item {
            action: Action::Tag,
            node: name.clone(),
            instance,
        });
        self.nodes().insert(name, entry);
        if let Some(item) = item {
            self.add_event(&item);
        }
    }

    fn deleted(&self, name: &str) {
        let Some(entry) = self.nodes().remove(name) else {
            return;
        };
        if let Some(instance) = entry.instance {
            self.add_event(&Item {
                action: Action::Untag,
                node: name.to_owned(),
                instance,
            });
        }
    }

    /// One worker: takes items (a batch with batching), processes them concurrently, retries failures.
    pub(super) async fn work(&self) {
        while let Some(items) = self.queue.next_batch(self.batch, Duration::ZERO).await {
            let results = join_all(items.iter().map(|item| self.process(item))).await;
            for (item, result) in items.iter().zip(results) {
                self.finish(item, result);
                self.queue.done(item);
            }
        }
    }

    /// Counts the outcome; retries a failure up to [`MAX_RETRIES`] times.
    fn finish(&self, item: &Item, result: Result<Outcome, Failure>) {
        let action = match item.action {
            Action::Tag => "tag",
            Action::Untag => "untag",
        };
        match result {
            Ok(outcome) => {
                self.backoff.forget(item);
                let outcome = match outcome {
                    Outcome::Done => "done",
                    Outcome::Skipped => "skipped",
                    Outcome::Gone => "gone",
                };
                self.metrics.item(action, outcome, item.instance.as_str());
                self.forget_if_gone(item);
            }
            Err(failure) if self.backoff.failures(item) < MAX_RETRIES => {
                let n = self.add_rate_limited(item);
                self.metrics.item(action, "retried", item.instance.as_str());
                tracing::warn!(node = item.node, error = %ErrorChain(&failure), failures = n, "retrying");
            }
            Err(failure) => {
                self.backoff.forget(item);
                self.metrics.item(action, "dropped", item.instance.as_str());
                self.forget_if_gone(item);
                tracing::error!(
                    node = item.node,
                    error = %ErrorChain(&failure),
                    "giving up after {MAX_RETRIES} retries"
                );
            }
        }
    }

    /// Once the last work item of a deleted Node's instance is over, its error series go: a series per
    /// instance kept forever would grow `/metrics` with every Node the cluster ever had.
    fn forget_if_gone(&self, item: &Item) {
        if matches!(item.action, Action::Untag) {
            self.metrics.forget_instance(item.instance.as_str());
        }
    }

    async fn process(&self, item: &Item) -> Result<Outcome, Failure> {
        match item.action {
            Action::Tag => self.tag(item).await,
            Action::Untag => self.untag(item).await,
        }
    }

    async fn tag(&self, item: &Item) -> Result<Outcome, Failure> {
        let Some(entry) = self.nodes().get(&item.node).cloned() else {
            return Ok(Outcome::Gone);
        };
        if entry.instance.as_ref() != Some(&item.instance) {
            return Ok(Outcome::Gone);
        }
        if entry.label.as_deref() == Some(self.checksum.as_str()) {
            self.report(item, Vec::new());
            return Ok(Outcome::Skipped);
        }
        // Only the cluster's instances are tagged; an instance not visible (yet) is handled as CreateTags'
        // NotFound would be, without sending it.
        let member = self.membership(item).await;
        if self.dry_run.is_some() && matches!(member, Ok(Some(true))) {
            let keys: Vec<&str> = self.tags.keys().map(String::as_str).collect();
            let changes = vec![
                format!("tag instance {} with {}", item.instance, keys.join(", ")),
                format!("label node {} {CHECKSUM_LABEL}={}", item.node, self.checksum),
            ];
            self.report(item, changes);
            return Ok(Outcome::Skipped);
        }
        let refused = match member {
            Ok(Some(true)) => self
                .ec2
                .create_tags(&[item.instance.to_string()], &self.tags)
                .await
                .err(),
            Ok(Some(false)) => return Ok(Outcome::Skipped),
            Ok(None) => Some(not_visible(&item.instance)),
            Err(e) => Some(e),
        };
        if let Some(source) = refused {
            if source.kind() == ErrorKind::Invalid {
                tracing::warn!(node = item.node, instance = %item.instance, error = %source, "instance ID refused by EC2; not tagging");
                return Ok(Outcome::Skipped);
            }
            let young = entry
                .created
                .is_some_and(|c| self.clock.now().0.as_second() - c.as_second() < NOT_FOUND_GRACE_SECONDS);
            if source.is_not_found() && !young {
                tracing::warn!(node = item.node, instance = %item.instance, "instance not found; not tagging");
                return Ok(Outcome::Skipped);
            }
            return Err(Failure::Tag {
                instance: item.instance.clone(),
                source,
            });
        }
        let labelled = {
            // Never closed, so acquiring only waits.
            let _permit = self.label_permits.acquire().await.ok();
            self.labels.set_label(&item.node, &self.checksum).await
        };
        match labelled {
            Ok(true) => {}
            Ok(false) => return Ok(Outcome::Gone),
            Err(message) => {
                return Err(Failure::Label {
                    node: item.node.clone(),
                    message,
                });
            }
        }
        if entry.label.is_none()
            && let Some(created) = entry.created
        {
            #[allow(clippy::cast_precision_loss)]
            let delay = (self.clock.now().0.as_millisecond() - created.as_millisecond()) as f64 / 1000.0;
            self.metrics.initial_delay(delay);
        }
        if let Some(e) = self.nodes().get_mut(&item.node) {
            e.label = Some(self.checksum.clone());
        }
        tracing::info!(node = item.node, instance = %item.instance, "tagged instance");
        Ok(Outcome::Done)
    }

    /// Whether the item's instance is the cluster's (`None`: EC2 does not show it): another system's instance
    /// behind a (forged) Node is never tagged nor untagged.
    async fn membership(&self, item: &Item) -> Result<Option<bool>, AwsError> {
        let answers = self.members.answers(std::slice::from_ref(&item.instance)).await?;
        let member = answers.get(&item.instance).copied();
        if member == Some(false) {
            tracing::warn!(
                node = item.node,
                instance = %item.instance,
                "instance does not carry the cluster tag: not tagging it"
            );
        }
        Ok(member)
    }

    /// With a dry run, what tagging `item` would change (empty: nothing).
    fn report(&self, item: &Item, changes: Vec<String>) {
        if let Some(sink) = &self.dry_run {
            sink.changes(CONTROLLER, &format!("/api/v1/nodes/{}", item.node), changes);
        }
    }

    async fn untag(&self, item: &Item) -> Result<Outcome, Failure> {
        if self.dry_run.is_some() {
            // The Node is gone: nothing pending for it any more (its instance keeps the tags in a dry run).
            self.report(item, Vec::new());
            return Ok(Outcome::Skipped);
        }
        match self.membership(item).await {
            Ok(Some(true)) => {}
            // Gone, or not the cluster's: nothing of ours to remove.
            Ok(_) => return Ok(Outcome::Skipped),
            Err(e) if e.is_not_found() || e.kind() == ErrorKind::Invalid => return Ok(Outcome::Skipped),
            Err(source) => {
                return Err(Failure::Untag {
                    instance: item.instance.clone(),
                    source,
                });
            }
        }
        let resources = [item.instance.as_str().to_owned()];
        match self.ec2.delete_tags(&resources, &self.untag).await {
            Ok(()) => {
                tracing::info!(node = item.node, instance = %item.instance, "untagged instance of deleted node");
                Ok(Outcome::Done)
            }
            Err(e) if e.is_not_found() || e.kind() == ErrorKind::Invalid => Ok(Outcome::Skipped),
            Err(source) => Err(Failure::Untag {
                instance: item.instance.clone(),
                source,
            }),
        }
    }
}
