pub(crate) mod queue;

use std::sync::{
    Arc, Mutex, OnceLock,
    atomic::{AtomicU64, Ordering},
};

pub use queue::{HistogramSnapshot, QUEUE_DURATION_BUCKETS, QueueSnapshot};

/// Counters of one controller. Plain atomics, cheap to clone (shared); the controller-manager runtime reads them
/// with [`ControllerMetrics::snapshot`] and exports them (for example as Prometheus counters named
/// `<controller>_reconciles_total`, `<controller>_errors_total`, `<controller>_provider_calls_total`).
#[derive(Debug, Clone, Default)]
pub struct ControllerMetrics(Arc<Counters>);

#[derive(Debug, Default)]
struct Counters {
    reconciles: AtomicU64,
    errors: AtomicU64,
    provider_calls: AtomicU64,
    api_writes: AtomicU64,
    queue_depth: AtomicU64,
    nodes_not_in_cluster: AtomicU64,
    queue: Mutex<queue::QueueStats>,
    queue_name: OnceLock<&'static str>,
}

/// A point-in-time copy of [`ControllerMetrics`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MetricsSnapshot {
    /// Reconciles (one per object synced, or one per pass for the periodic controllers).
    pub reconciles: u64,
    /// Reconciles or steps that failed.
    pub errors: u64,
    /// Calls into the cloud provider (a batch call counts once).
    pub provider_calls: u64,
    /// Writes to the Kubernetes API (updates, patches, deletes, Events).
    pub api_writes: u64,
    /// Keys waiting in the controller's work queue now (a gauge; 0 for the periodic controllers, which have none).
    pub queue_depth: u64,
    /// Nodes whose instance the provider does not count as the cluster's
    /// ([`InstanceMetadata::not_in_cluster`](ccm_cloud_provider::InstanceMetadata::not_in_cluster)), as the
    /// cloud-node controller last saw them (a gauge; 0 for the other controllers).
    pub nodes_not_in_cluster: u64,
}

// === impl ControllerMetrics ===

impl ControllerMetrics {
    /// Current values.
    pub fn snapshot(&self) -> MetricsSnapshot {
        MetricsSnapshot {
            reconciles: self.0.reconciles.load(Ordering::Relaxed),
            errors: self.0.errors.load(Ordering::Relaxed),
            provider_calls: self.0.provider_calls.load(Ordering::Relaxed),
            api_writes: self.0.api_writes.load(Ordering::Relaxed),
            queue_depth: self.0.queue_depth.load(Ordering::Relaxed),
            nodes_not_in_cluster: self.0.nodes_not_in_cluster.load(Ordering::Relaxed),
        }
    }

    /// Names the controller's work queue as upstream names it (the `name` label of component-base's
    /// `workqueue_*` series), for a controller the runtime does not know; the first name given stays.
    pub fn set_queue_name(&self, name: &'static str) {
        let _ = self.0.queue_name.set(name);
    }

    /// The name given with [`set_queue_name`](Self::set_queue_name), if any.
    pub fn queue_name(&self) -> Option<&'static str> {
        self.0.queue_name.get().copied()
    }

    /// The controller's work-queue numbers (all zero for the periodic controllers, which have no queue).
    pub fn queue_snapshot(&self) -> QueueSnapshot {
        self.queue().snapshot()
    }

    pub(crate) fn queue(&self) -> std::sync::MutexGuard<'_, queue::QueueStats> {
        self.0
            .queue
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub(crate) fn set_queue_depth(&self, depth: usize) {
        self.0
            .queue_depth
            .store(u64::try_from(depth).unwrap_or(u64::MAX), Ordering::Relaxed);
    }

    pub(crate) fn set_nodes_not_in_cluster(&self, nodes: usize) {
        self.0
            .nodes_not_in_cluster
            .store(u64::try_from(nodes).unwrap_or(u64::MAX), Ordering::Relaxed);
    }

    pub(crate) fn reconcile(&self) {
        self.0.reconciles.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn error(&self) {
        self.0.errors.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn provider_call(&self) {
        self.0.provider_calls.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn api_write(&self) {
        self.0.api_writes.fetch_add(1, Ordering::Relaxed);
    }
}
