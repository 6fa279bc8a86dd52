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
    /// As upstream: one series per failing instance (only instances with errors get one).
    instance_id: String,
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
    /// `cloudprovider_aws_tagging_controller_work_item_errors_total{error_type,instance_id}` (upstream's name and
    /// labels) and the node tagging delay histogram twice: as
    /// `cloudprovider_aws_tagging_controller_initial_node_tagging_delay_seconds` and under upstream's exact
    /// (misspelt, unprefixed) name `tagging_controller_inital_node_tagging_delay_seconds`, so that dashboards
    /// made for the Go controller find it.
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
        registry.register(
            "tagging_controller_inital_node_tagging_delay_seconds",
            "Latency (in seconds) between node creation and its first successful tagging by TaggingController.",
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

    pub(crate) fn item(&self, action: &'static str, outcome: &'static str, instance_id: &str) {
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
        let labels = ErrorLabels {
            error_type,
            instance_id: instance_id.to_owned(),
        };
        self.inner.errors.get_or_create(&labels).inc();
    }

    /// Drops the error series of `instance_id` (its Node is gone).
    pub(crate) fn forget_instance(&self, instance_id: &str) {
        for error_type in ["total_errors", "errors_after_retries_exhausted"] {
            self.inner.errors.remove(&ErrorLabels {
                error_type,
                instance_id: instance_id.to_owned(),
            });
        }
    }

    pub(crate) fn initial_delay(&self, seconds: f64) {
        self.inner.delay.observe(seconds.max(0.0));
    }
}

#[cfg(test)]
mod tests {
    use prometheus_client::encoding::text::encode;

    use super::*;

    #[test]
    fn served_under_the_go_controllers_names_and_labels() {
        let metrics = TaggingMetrics::default();
        let mut registry = Registry::default();
        metrics.register(&mut registry);
        metrics.item("tag", "retried", "i-1");
        metrics.initial_delay(3.0);
        let mut text = String::new();
        encode(&mut text, &registry).unwrap();
        assert!(
            text.contains(
                "cloudprovider_aws_tagging_controller_work_item_errors_total{error_type=\"total_errors\",instance_id=\"i-1\"} 1"
            ),
            "{text}"
        );
        assert!(
            text.contains("tagging_controller_inital_node_tagging_delay_seconds_count 1"),
            "{text}"
        );
        assert!(text.contains("le=\"1024.0\""), "upstream's buckets: {text}");
    }

    #[test]
    fn an_instances_error_series_go_when_it_is_forgotten() {
        let metrics = TaggingMetrics::default();
        let mut registry = Registry::default();
        metrics.register(&mut registry);
        metrics.item("tag", "retried", "i-1");
        metrics.item("untag", "dropped", "i-1");
        metrics.item("tag", "retried", "i-2");
        metrics.forget_instance("i-1");
        let mut text = String::new();
        encode(&mut text, &registry).unwrap();
        assert!(!text.contains("instance_id=\"i-1\""), "{text}");
        assert!(text.contains("instance_id=\"i-2\""), "{text}");
    }
}
