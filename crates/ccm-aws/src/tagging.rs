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
//! - Only instances of the cluster are tagged or untagged: an instance without the cluster tag (a Node forged
//!   with another system's provider ID) is skipped with a warning ([`crate::membership`]).
//! - On Node deletion (seen live, or as missing from a relist after the watch was down), `DeleteTags` with the
//!   configured keys *and values* (a tag changed by someone else stays).
//! - `InvalidInstanceID.NotFound`: retried while the Node is younger than 5 minutes (eventual consistency after
//!   launch), else skipped; a malformed ID (`InvalidID`, KWOK nodes) is skipped. Other failures are retried with
//!   exponential backoff (5 ms doubling, at most 1000 s), 9 times, then dropped until the Node changes.
//!
//! Built from the controller toolkit of `ccm-controllers` (work queue, backoff, token bucket, clock, informer),
//! like the generic controllers; its queue publishes component-base's `workqueue_*` numbers under upstream's
//! queue name `tagging-controller` when given the runtime's [`ControllerMetrics`]. It lives here, in the
//! composition, because it needs both the Kubernetes side and the AWS ports (see docs/architecture.md).
//!
//! Entry point: [`run`] (or [`TaggingController`] for metrics, a clock and a node selector).

mod config;
mod core;
mod metrics;

use std::{fmt, future::Future, sync::Arc};

use ccm_aws_api::{Ec2, InstanceCatalog};
use ccm_controllers::{CachedNode, Clock, ControllerMetrics, Informer, Informers, run_until};
use ccm_tagging::ClusterTags;
use futures::future::join_all;
use kube::{Api, Client};

#[cfg(feature = "cli")]
pub use config::TaggingArgs;
pub use config::{
    CHECKSUM_LABEL, ConfigProblem, InvalidConfig, SUPPORTED_RESOURCES, TaggingConfig, TagsParseError,
    parse_tags, tags_checksum,
};
pub use metrics::TaggingMetrics;

use self::core::{Core, KubeLabels};
use crate::membership::{Members, Membership};

/// Nodes a worker takes at once with batching: their `CreateTags` calls coalesce into one request (the adapter
/// sends up to 1,000 resources per call).
pub const MAX_BATCH: usize = 500;

/// The work queue's name upstream (`TaggingControllerClientName`), under which its `workqueue_*` series appear.
pub const QUEUE_NAME: &str = "tagging-controller";

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
    members: Arc<dyn Members>,
    config: TaggingConfig,
    metrics: TaggingMetrics,
    queue_metrics: ControllerMetrics,
    clock: Clock,
    node_selector: Option<String>,
    informers: Option<Informers>,
    dry_run: Option<Arc<dyn ccm_controllers::DryRunSink>>,
}

/// Runs the tagging controller until `shutdown` completes: validates `config`, watches Nodes through `client`,
/// tags the instances of `cluster` through `ec2`. Watch failures are logged and retried; the function returns `Ok` on shutdown and
/// an error only for an invalid configuration.
pub async fn run<E>(
    client: Client,
    ec2: Arc<E>,
    cluster: ClusterTags,
    config: TaggingConfig,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), Error>
where
    E: Ec2 + Send + Sync + 'static,
{
    TaggingController::new(client, ec2, cluster, config)?
        .run(shutdown)
        .await;
    Ok(())
}

// === impl TaggingController ===

impl<E> TaggingController<E>
where
    E: Ec2 + Send + Sync + 'static,
{
    /// Validates `config`; the controller then watches Nodes through `client` and tags, through `ec2`, the
    /// instances that carry the tag of `cluster` (read through `ec2` too, unless [`Self::with_members`]).
    pub fn new(
        client: Client,
        ec2: Arc<E>,
        cluster: ClusterTags,
        config: TaggingConfig,
    ) -> Result<Self, InvalidConfig> {
        config.validate()?;
        Ok(Self {
            client,
            members: Arc::new(Membership::new(own_catalog().over(ec2.clone()), cluster)),
            ec2,
            config,
            metrics: TaggingMetrics::default(),
            queue_metrics: ControllerMetrics::default(),
            clock: Clock::system(),
            node_selector: None,
            informers: None,
            dry_run: None,
        })
    }

    /// Asks `members` which instances are the cluster's: give it the provider's
    /// [`AwsCloud::membership`](crate::AwsCloud::membership), which already knows every initialized Node's
    /// instance, instead of reading them again.
    #[must_use]
    pub fn with_members(mut self, members: Arc<dyn Members>) -> Self {
        self.members = members;
        self
    }

    /// Counts into `metrics` (shared with whoever exports them).
    #[must_use]
    pub fn with_metrics(mut self, metrics: TaggingMetrics) -> Self {
        self.metrics = metrics;
        self
    }

    /// Keeps the work queue's numbers in `metrics`: give it the runtime's `ControllerContext::metrics`, and the
    /// controller-manager serves them as `workqueue_*{name="tagging-controller"}`.
    #[must_use]
    pub fn with_controller_metrics(mut self, metrics: ControllerMetrics) -> Self {
        metrics.set_queue_name(QUEUE_NAME);
        self.queue_metrics = metrics;
        self
    }

    /// Wall-clock time for Node ages (tests fix it).
    #[must_use]
    pub fn with_clock(mut self, clock: Clock) -> Self {
        self.clock = clock;
        self
    }

    /// Handles only the Nodes matching this label selector (default: all). Select on labels that do not change:
    /// a Node that stops matching looks deleted, and its instance is untagged.
    #[must_use]
    pub fn with_node_selector(mut self, selector: impl Into<String>) -> Self {
        self.node_selector = Some(selector.into());
        self
    }

    /// Subscribes to the process's shared Node watch rather than watching on its own.
    #[must_use]
    pub fn with_informers(mut self, informers: Informers) -> Self {
        self.informers = Some(informers);
        self
    }

    /// A dry run (`ControllerContext::dry_run` of the controller manager): instead of tagging an instance and
    /// labelling its Node, the controller reports both to `sink`; an adapter in read-only mode refuses the tags
    /// anyway. `None` (the default): tag.
    #[must_use]
    pub fn with_dry_run(mut self, sink: Option<Arc<dyn ccm_controllers::DryRunSink>>) -> Self {
        self.dry_run = sink;
        self
    }

    /// Runs until `shutdown` completes.
    pub async fn run(self, shutdown: impl Future<Output = ()> + Send) {
        let workers = usize::try_from(self.config.concurrent_node_syncs)
            .unwrap_or(1)
            .max(1);
        let mut core = Core::new(
            self.ec2,
            self.members,
            KubeLabels(Api::all(self.client.clone())),
            &self.config,
            self.metrics,
            self.queue_metrics,
            self.clock,
        );
        core.dry_run = self.dry_run;
        let core = Arc::new(core);
        let nodes = match &self.informers {
            Some(informers) => Informer::<CachedNode>::shared(informers, self.node_selector.as_deref()),
            None => Informer::<CachedNode>::all(self.client, self.node_selector.as_deref()),
        };
        let store = nodes.store();
        let watch = nodes.run(|event| core.observe(event));
        // Workers start once the first list is complete, so the initial wave is taken in few batches.
        let work = async {
            if store.wait_until_ready().await.is_err() {
                return;
            }
            tracing::info!(
                workers,
                batch = core.batch,
                "tagging controller synced; starting workers"
            );
            join_all((0..workers).map(|_| core.work())).await;
        };
        run_until(shutdown, watch, work).await;
        core.shut_down();
    }
}

impl<E> fmt::Debug for TaggingController<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TaggingController")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

/// A catalog of the tagging controller's own, for membership when the provider's is not shared
/// ([`TaggingController::with_members`]).
fn own_catalog() -> Arc<InstanceCatalog> {
    let catalog = Arc::new(InstanceCatalog::new());
    catalog.start_expiry();
    catalog
}
#[cfg(test)]
mod tests;
