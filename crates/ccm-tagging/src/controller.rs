//! The tagging controller (upstream `pkg/controllers/tagging`, enabled with `--controllers=*,tagging`): tags the
//! EC2 instance of every Node with the configured tags, labels the Node with their checksum, and removes the tags
//! when the Node is deleted.
//!
//! - Nodes are watched; a Node whose provider ID names an EC2 instance (`aws:///<zone>/i-...`; Fargate
//!   `fargate-...` and other providers are skipped) and whose [`CHECKSUM_LABEL`] differs from the checksum of the
//!   configured tags is queued. After a restart with other tags, every Node differs, so every instance is retagged
//!   (tags dropped from `--tags` are not removed, as upstream).
//! - A worker tags the instance (`CreateTags` through the [`Ec2`] port, which coalesces concurrent calls with the
//!   same tags into one request), then sets the label. With batching, each worker takes up to [`MAX_BATCH`] queued
//!   Nodes at once, so a wave of joining Nodes costs a handful of `CreateTags` calls.
//! - On Node deletion, `DeleteTags` with the configured keys *and values* (a tag changed by someone else stays).
//! - `InvalidInstanceID.NotFound`: retried while the Node is younger than 5 minutes (eventual consistency after
//!   launch), else skipped; a malformed ID (`InvalidID`, KWOK nodes) is skipped. Other failures are retried with
//!   exponential backoff (5 ms doubling, at most 1000 s), 9 times, then dropped until the Node changes.
//!
//! Entry point: [`run`] (or [`TaggingController`] for metrics and a clock).

mod config;
mod metrics;
mod queue;

use std::{
    collections::{BTreeMap, HashMap, HashSet},
    fmt,
    future::Future,
    sync::{Arc, Mutex, MutexGuard},
};

use ccm_aws_api::{AwsError, Ec2, ErrorKind, InstanceId};
use futures::{StreamExt, future::join_all};
use k8s_openapi::{api::core::v1::Node, jiff::Timestamp};
use kube::{
    Api, Client,
    api::{Patch, PatchParams},
    runtime::{WatchStreamExt, watcher},
};

#[cfg(feature = "cli")]
pub use config::TaggingArgs;
pub use config::{
    CHECKSUM_LABEL, ConfigProblem, InvalidConfig, SUPPORTED_RESOURCES, TaggingConfig, TagsParseError,
    parse_tags, tags_checksum,
};
pub use metrics::TaggingMetrics;

use crate::Tags;
use queue::Queue;

/// Nodes a worker takes at once with batching: their `CreateTags` calls coalesce into one request (the adapter
/// sends up to 1,000 resources per call).
pub const MAX_BATCH: usize = 500;

/// Label patches in flight at once per controller, so a large batch does not open hundreds of API connections.
const MAX_CONCURRENT_LABELS: usize = 32;

/// Failures after which a work item is dropped (upstream `maxRequeuingCount`).
const MAX_RETRIES: u32 = 9;

/// A Node younger than this whose instance is not found yet is retried rather than skipped.
const NOT_FOUND_GRACE_SECONDS: i64 = 5 * 60;

/// Why the controller could not run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The configuration is invalid (the message lists every problem).
    #[error(transparent)]
    InvalidConfig(#[from] InvalidConfig),
}

/// The tagging controller, ready to [`run`](TaggingController::run).
pub struct TaggingController<E> {
    client: Client,
    ec2: Arc<E>,
    config: TaggingConfig,
    metrics: TaggingMetrics,
    clock: Clock,
    node_selector: Option<String>,
}

type Clock = Arc<dyn Fn() -> Timestamp + Send + Sync>;

/// Runs the tagging controller until `shutdown` completes: validates `config`, watches Nodes through `client`,
/// tags instances through `ec2`. Watch failures are logged and retried; the function returns `Ok` on shutdown and
/// an error only for an invalid configuration.
pub async fn run<E>(
    client: Client,
    ec2: Arc<E>,
    config: TaggingConfig,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), Error>
where
    E: Ec2 + Send + Sync + 'static,
{
    TaggingController::new(client, ec2, config)?.run(shutdown).await;
    Ok(())
}

/// What a work item does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Action {
    Tag,
    Untag,
}

/// One work item (upstream `workItem`): equal items are de-duplicated by the queue.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Item {
    action: Action,
    node: String,
    instance: InstanceId,
}

/// What the controller remembers of a Node.
#[derive(Debug, Clone, PartialEq)]
struct NodeEntry {
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
trait LabelNodes: Send + Sync {
    /// `Ok(false)` when the Node does not exist.
    fn set_label(&self, node: &str, value: &str) -> impl Future<Output = Result<bool, String>> + Send;
}

struct KubeLabels(Api<Node>);

/// The state shared by the watch loop and the workers.
struct Core<E, L> {
    ec2: Arc<E>,
    labels: L,
    tags: Tags,
    untag: BTreeMap<String, Option<String>>,
    checksum: String,
    batch: usize,
    nodes: Mutex<HashMap<String, NodeEntry>>,
    /// Names seen since the watch (re)started listing; `None` outside a relist.
    relisting: Mutex<Option<HashSet<String>>>,
    queue: Arc<Queue<Item>>,
    label_permits: tokio::sync::Semaphore,
    metrics: TaggingMetrics,
    clock: Clock,
}

// === impl TaggingController ===

impl<E> TaggingController<E>
where
    E: Ec2 + Send + Sync + 'static,
{
    /// Validates `config`; the controller then watches Nodes through `client` and tags through `ec2`.
    pub fn new(client: Client, ec2: Arc<E>, config: TaggingConfig) -> Result<Self, InvalidConfig> {
        config.validate()?;
        Ok(Self {
            client,
            ec2,
            config,
            metrics: TaggingMetrics::default(),
            clock: Arc::new(Timestamp::now),
            node_selector: None,
        })
    }

    /// Counts into `metrics` (shared with whoever exports them).
    #[must_use]
    pub fn with_metrics(mut self, metrics: TaggingMetrics) -> Self {
        self.metrics = metrics;
        self
    }

    /// Wall-clock time for Node ages (tests fix it).
    #[must_use]
    pub fn with_clock(mut self, clock: impl Fn() -> Timestamp + Send + Sync + 'static) -> Self {
        self.clock = Arc::new(clock);
        self
    }

    /// Handles only the Nodes matching this label selector (default: all). Select on labels that do not change:
    /// a Node that stops matching looks deleted, and its instance is untagged.
    #[must_use]
    pub fn with_node_selector(mut self, selector: impl Into<String>) -> Self {
        self.node_selector = Some(selector.into());
        self
    }

    /// Runs until `shutdown` completes.
    pub async fn run(self, shutdown: impl Future<Output = ()> + Send) {
        let api: Api<Node> = Api::all(self.client);
        let workers = usize::try_from(self.config.concurrent_node_syncs)
            .unwrap_or(1)
            .max(1);
        let core = Arc::new(Core::new(
            self.ec2,
            KubeLabels(api.clone()),
            &self.config,
            self.metrics,
            self.clock,
        ));
        let synced = tokio::sync::Notify::new();
        let watch = async {
            let mut config = watcher::Config::default();
            if let Some(selector) = &self.node_selector {
                config = config.labels(selector);
            }
            let stream = watcher(api, config).default_backoff();
            let mut stream = std::pin::pin!(stream);
            let mut first_sync = true;
            while let Some(event) = stream.next().await {
                match event {
                    Ok(event) => {
                        let done = matches!(event, watcher::Event::InitDone);
                        core.observe(event);
                        if done && first_sync {
                            first_sync = false;
                            synced.notify_one();
                        }
                    }
                    Err(error) => tracing::warn!(%error, "node watch failed; retrying"),
                }
            }
        };
        // Workers start once the first list is complete, so the initial wave is taken in few batches.
        let work = async {
            synced.notified().await;
            tracing::info!(
                workers,
                batch = core.batch,
                "tagging controller synced; starting workers"
            );
            join_all((0..workers).map(|_| core.work())).await;
        };
        tokio::select! {
            () = shutdown => {},
            () = watch => {},
            () = work => {},
        }
        core.queue.shut_down();
    }
}

impl<E> fmt::Debug for TaggingController<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TaggingController")
            .field("config", &self.config)
            .finish_non_exhaustive()
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
    fn new(ec2: Arc<E>, labels: L, config: &TaggingConfig, metrics: TaggingMetrics, clock: Clock) -> Self {
        Self {
            ec2,
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
            relisting: Mutex::new(None),
            queue: Queue::new(config.rate_limit, config.burst_limit),
            label_permits: tokio::sync::Semaphore::new(MAX_CONCURRENT_LABELS),
            metrics,
            clock,
        }
    }

    fn nodes(&self) -> MutexGuard<'_, HashMap<String, NodeEntry>> {
        self.nodes
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn relisting(&self) -> MutexGuard<'_, Option<HashSet<String>>> {
        self.relisting
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Handles a watch event: remembers the Node and queues what it needs.
    fn observe(&self, event: watcher::Event<Node>) {
        match event {
            watcher::Event::Init => *self.relisting() = Some(HashSet::new()),
            watcher::Event::InitApply(node) => {
                if let Some(seen) = self.relisting().as_mut()
                    && let Some(name) = &node.metadata.name
                {
                    seen.insert(name.clone());
                }
                self.applied(&node);
            }
            watcher::Event::Apply(node) => self.applied(&node),
            watcher::Event::Delete(node) => {
                if let Some(name) = &node.metadata.name {
                    self.deleted(name);
                }
            }
            watcher::Event::InitDone => {
                // Nodes deleted while the watch was down are only noticed as missing from the new list.
                let Some(seen) = self.relisting().take() else {
                    return;
                };
                let gone: Vec<String> = self
                    .nodes()
                    .keys()
                    .filter(|n| !seen.contains(*n))
                    .cloned()
                    .collect();
                for name in gone {
                    self.deleted(&name);
                }
            }
        }
    }

    fn applied(&self, node: &Node) {
        let Some(name) = node.metadata.name.clone() else {
            return;
        };
        let entry = NodeEntry {
            instance: node
                .spec
                .as_ref()
                .and_then(|s| s.provider_id.as_deref())
                .and_then(instance_id),
            label: node
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(CHECKSUM_LABEL))
                .cloned(),
            created: node.metadata.creation_timestamp.as_ref().map(|t| t.0),
        };
        let needs = entry.label.as_deref() != Some(self.checksum.as_str());
        let item = entry.instance.clone().filter(|_| needs).map(|instance| Item {
            action: Action::Tag,
            node: name.clone(),
            instance,
        });
        self.nodes().insert(name, entry);
        if let Some(item) = item {
            self.queue.add_event(item);
        }
    }

    fn deleted(&self, name: &str) {
        let Some(entry) = self.nodes().remove(name) else {
            return;
        };
        if let Some(instance) = entry.instance {
            self.queue.add_event(Item {
                action: Action::Untag,
                node: name.to_owned(),
                instance,
            });
        }
    }

    /// One worker: takes items (a batch with batching), processes them concurrently, retries failures.
    async fn work(&self) {
        loop {
            let items = self.queue.take(self.batch).await;
            if items.is_empty() {
                return;
            }
            let results = join_all(items.iter().map(|item| self.process(item))).await;
            for (item, result) in items.iter().zip(results) {
                let action = match item.action {
                    Action::Tag => "tag",
                    Action::Untag => "untag",
                };
                match result {
                    Ok(outcome) => {
                        self.queue.forget(item);
                        let outcome = match outcome {
                            Outcome::Done => "done",
                            Outcome::Skipped => "skipped",
                            Outcome::Gone => "gone",
                        };
                        self.metrics.item(action, outcome, item.instance.as_str());
                    }
                    Err(failure) if self.queue.failures(item) < MAX_RETRIES => {
                        let n = self.queue.add_rate_limited(item.clone());
                        self.metrics.item(action, "retried", item.instance.as_str());
                        tracing::warn!(node = item.node, error = %ErrorChain(&failure), failures = n, "retrying");
                    }
                    Err(failure) => {
                        self.queue.forget(item);
                        self.metrics.item(action, "dropped", item.instance.as_str());
                        tracing::error!(
                            node = item.node,
                            error = %ErrorChain(&failure),
                            "giving up after {MAX_RETRIES} retries"
                        );
                    }
                }
                self.queue.done(item);
            }
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
            return Ok(Outcome::Skipped);
        }
        let resources = [item.instance.as_str().to_owned()];
        if let Err(source) = self.ec2.create_tags(&resources, &self.tags).await {
            if source.kind() == ErrorKind::Invalid {
                tracing::warn!(node = item.node, instance = %item.instance, error = %source, "instance ID refused by EC2; not tagging");
                return Ok(Outcome::Skipped);
            }
            let young = entry
                .created
                .is_some_and(|c| (self.clock)().as_second() - c.as_second() < NOT_FOUND_GRACE_SECONDS);
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
            let delay = ((self.clock)().as_millisecond() - created.as_millisecond()) as f64 / 1000.0;
            self.metrics.initial_delay(delay);
        }
        if let Some(e) = self.nodes().get_mut(&item.node) {
            e.label = Some(self.checksum.clone());
        }
        tracing::info!(node = item.node, instance = %item.instance, "tagged instance");
        Ok(Outcome::Done)
    }

    async fn untag(&self, item: &Item) -> Result<Outcome, Failure> {
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

/// The instance of an AWS provider ID (`aws:///<zone>/i-...`, `aws:////i-...`, a bare `i-...`); `None` for Fargate
/// (`fargate-...`), other providers and anything malformed.
fn instance_id(provider_id: &str) -> Option<InstanceId> {
    let rest = match provider_id.split_once("://") {
        Some(("aws", rest)) => rest,
        Some(_) => return None,
        None => provider_id,
    };
    let last = rest.rsplit('/').next()?;
    (last.starts_with("i-") && last.len() > 2).then(|| InstanceId::new(last))
}

/// Displays an error with its causes, `a: b: c`.
struct ErrorChain<'a>(&'a (dyn std::error::Error + 'static));

impl fmt::Display for ErrorChain<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)?;
        let mut source = self.0.source();
        while let Some(s) = source {
            write!(f, ": {s}")?;
            source = s.source();
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
