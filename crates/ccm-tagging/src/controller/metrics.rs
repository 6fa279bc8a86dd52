//! The tagging controller's metrics: work item outcomes and errors (counters) and the delay from a node's
//! creation to its first tagging (histogram).

use std::{
    collections::BTreeMap,
    sync::{Arc, Mutex},
};

use prometheus_client::{
    encoding::EncodeLabelSet,
    metrics::{
        counter::Counter,
        family::Family,
        histogram::{Histogram, exponential_buckets},
    },
    registry::Registry,
};

/// The tagging controller's metrics (cheap to clone; clones share the numbers).
#[derive(Debug, Clone)]
pub struct TaggingMetrics {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    counts: Mutex<BTreeMap<(&'static str, &'static str), u64>>,
    items: Family<ItemLabels, Counter>,
    errors: Family<ErrorLabels, Counter>,
    delay: Histogram,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct ItemLabels {
    action: &'static str,
    outcome: &'static str,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct ErrorLabels {
    error_type: &'static str,
}

// === impl TaggingMetrics ===

impl Default for TaggingMetrics {
    fn default() -> Self {
        Self {
            inner: Arc::new(Inner {
                counts: Mutex::new(BTreeMap::new()),
                items: Family::default(),
                errors: Family::default(),
                // 1, 4, 16, 64, 256, 1024 s, as upstream.
                delay: Histogram::new(exponential_buckets(1.0, 4.0, 6)),
            }),
        }
    }
}

impl TaggingMetrics {
    /// Registers `cloudprovider_aws_tagging_controller_work_items_total{action,outcome}`,
    /// `cloudprovider_aws_tagging_controller_work_item_errors_total{error_type}` (upstream's name, without its
    /// per-instance label) and `cloudprovider_aws_tagging_controller_initial_node_tagging_delay_seconds`.
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "cloudprovider_aws_tagging_controller_work_items",
            "Tagging controller work items done, by action (tag, untag) and outcome",
            self.inner.items.clone(),
        );
        registry.register(
            "cloudprovider_aws_tagging_controller_work_item_errors",
            "Tagging controller work item failures: total_errors (retried), errors_after_retries_exhausted (dropped)",
            self.inner.errors.clone(),
        );
        registry.register(
            "cloudprovider_aws_tagging_controller_initial_node_tagging_delay_seconds",
            "Time from a node's creation to the first tagging of its instance",
            self.inner.delay.clone(),
        );
    }

    /// How many work items of `action` (`tag`, `untag`) ended with `outcome` (`done`, `skipped`, `gone`,
    /// `retried`, `dropped`).
    pub fn count(&self, action: &str, outcome: &str) -> u64 {
        self.counts()
            .iter()
            .filter(|((a, o), _)| *a == action && *o == outcome)
            .map(|(_, n)| *n)
            .sum()
    }

    fn counts(&self) -> std::sync::MutexGuard<'_, BTreeMap<(&'static str, &'static str), u64>> {
        self.inner
            .counts
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub(crate) fn item(&self, action: &'static str, outcome: &'static str) {
        *self.counts().entry((action, outcome)).or_default() += 1;
        self.inner
            .items
            .get_or_create(&ItemLabels { action, outcome })
            .inc();
        let error_type = match outcome {
            "retried" => "total_errors",
            "dropped" => "errors_after_retries_exhausted",
            _ => return,
        };
        self.inner.errors.get_or_create(&ErrorLabels { error_type }).inc();
    }

    pub(crate) fn initial_delay(&self, seconds: f64) {
        self.inner.delay.observe(seconds.max(0.0));
    }
}
