//! Per-attempt metrics of every AWS call: service, operation, outcome, latency. Readable as plain counts (tests
//! assert exact ones; a caller on any metrics stack reads [`CallMetrics::snapshot`]) and, with the `prometheus`
//! feature, exportable with prometheus-client under our names and under the Go controller's
//! (`cloudprovider_aws_api_*`, so that its dashboards and alerts keep working).

use std::{
    collections::BTreeMap,
    sync::{Arc, Mutex},
    time::Duration,
};

#[cfg(feature = "prometheus")]
mod prometheus;

/// The metrics of one [`Adapter`](crate::Adapter) (cheap to clone; clones share the numbers).
#[derive(Debug, Clone, Default)]
pub struct CallMetrics {
    inner: Arc<Inner>,
}

/// One row of [`CallMetrics::snapshot`].
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CallKey {
    /// `ec2`, `elasticloadbalancing`, ...
    pub service: &'static str,
    /// `DescribeInstances`, ...
    pub operation: &'static str,
    /// `ok`, or an [`ErrorKind`](ccm_aws_api::ErrorKind) label (`throttled`, `not_found`, ...).
    pub outcome: &'static str,
}

/// Counts and total latency of the attempts with one [`CallKey`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CallStats {
    /// Attempts (HTTP requests; retries count again).
    pub attempts: u64,
    /// Their total latency.
    pub total_latency: Duration,
}

#[derive(Debug, Default)]
struct Inner {
    calls: Mutex<BTreeMap<CallKey, CallStats>>,
    #[cfg(feature = "prometheus")]
    exported: prometheus::Exported,
}

// === impl CallMetrics ===

impl CallMetrics {
    /// Every (service, operation, outcome) seen so far with its numbers.
    pub fn snapshot(&self) -> BTreeMap<CallKey, CallStats> {
        self.lock().clone()
    }

    /// Attempts of `operation` on `service` with any outcome.
    pub fn attempts(&self, service: &str, operation: &str) -> u64 {
        self.lock()
            .iter()
            .filter(|(k, _)| k.service == service && k.operation == operation)
            .map(|(_, s)| s.attempts)
            .sum()
    }

    /// Attempts of `operation` on `service` with `outcome` (`ok`, `throttled`, ...).
    pub fn attempts_with(&self, service: &str, operation: &str, outcome: &str) -> u64 {
        self.lock()
            .iter()
            .filter(|(k, _)| k.service == service && k.operation == operation && k.outcome == outcome)
            .map(|(_, s)| s.attempts)
            .sum()
    }

    /// All attempts on all services.
    pub fn total_attempts(&self) -> u64 {
        self.lock().values().map(|s| s.attempts).sum()
    }

    pub(crate) fn record(
        &self,
        service: &'static str,
        operation: &'static str,
        outcome: &'static str,
        latency: Duration,
    ) {
        {
            let mut calls = self.lock();
            let stats = calls
                .entry(CallKey {
                    service,
                    operation,
                    outcome,
                })
                .or_default();
            stats.attempts += 1;
            stats.total_latency += latency;
        }
        #[cfg(feature = "prometheus")]
        self.inner.exported.record(service, operation, outcome, latency);
    }

    /// Counts an error response by HTTP status (exported with the `prometheus` feature, labelled with the SDK's
    /// service ID as the Go controller does).
    #[cfg_attr(not(feature = "prometheus"), allow(clippy::unused_self))]
    pub(crate) fn record_status(
        &self,
        service: crate::limiter::Service,
        operation: &'static str,
        status: u16,
    ) {
        #[cfg(feature = "prometheus")]
        self.inner.exported.record_status(service, operation, status);
        #[cfg(not(feature = "prometheus"))]
        let _ = (service, operation, status);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<CallKey, CallStats>> {
        self.inner
            .calls
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_by_outcome() {
        let metrics = CallMetrics::default();
        metrics.record("ec2", "DescribeInstances", "throttled", Duration::from_millis(3));
        metrics.record("ec2", "DescribeInstances", "ok", Duration::from_millis(5));
        metrics.record("ec2", "CreateTags", "ok", Duration::from_millis(5));
        metrics.record_status(crate::limiter::Service::Ec2, "DescribeInstances", 503);
        assert_eq!(metrics.attempts("ec2", "DescribeInstances"), 2);
        assert_eq!(metrics.attempts_with("ec2", "DescribeInstances", "throttled"), 1);
        assert_eq!(metrics.total_attempts(), 3);
        let key = CallKey {
            service: "ec2",
            operation: "CreateTags",
            outcome: "ok",
        };
        assert_eq!(
            metrics.snapshot()[&key],
            CallStats {
                attempts: 1,
                total_latency: Duration::from_millis(5)
            }
        );
    }
}
