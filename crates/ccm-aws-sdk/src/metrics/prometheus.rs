//! The AWS call metrics in prometheus-client (feature `prometheus`): our families and the Go controller's.

use std::{
    collections::BTreeMap,
    sync::{Arc, Mutex},
    time::Duration,
};

use prometheus_client::{
    collector::Collector,
    encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric},
    metrics::{MetricType, counter::Counter, family::Family, gauge::ConstGauge, histogram::Histogram},
    registry::Registry,
};

use super::CallMetrics;

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct Labels {
    service: &'static str,
    operation: &'static str,
    outcome: &'static str,
}

/// The Go controller's `request` label.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct RequestLabel {
    request: String,
}

/// The labels of the Go controller's `cloudprovider_aws_api_response_status_total`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct StatusLabels {
    service: &'static str,
    operation: &'static str,
    status_code: String,
}

/// The Go controller's `operation_name` label.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct OperationLabel {
    operation_name: &'static str,
}

/// The families the calls are counted in.
#[derive(Debug)]
pub(super) struct Exported {
    requests: Family<Labels, Counter>,
    latency: Family<Labels, Histogram>,
    /// `cloudprovider_aws_api_request_duration_seconds{request}`: successful calls only, as upstream.
    upstream_latency: Family<RequestLabel, Histogram>,
    /// `cloudprovider_aws_api_request_errors{request}`.
    upstream_errors: UpstreamErrors,
    /// `cloudprovider_aws_api_throttled_requests_total{operation_name}`.
    upstream_throttles: Family<OperationLabel, Counter>,
    /// `cloudprovider_aws_api_response_status_total{service,operation,status_code}`: responses of 400 and more.
    upstream_statuses: Family<StatusLabels, Counter>,
}

/// The Go controller's error counter is named without `_total`, which OpenMetrics cannot express for a
/// counter: it is exported with the `unknown` type so that the sample keeps the exact upstream name.
#[derive(Debug, Clone, Default)]
struct UpstreamErrors(Arc<Mutex<BTreeMap<String, u64>>>);

/// The Go controller's `request` label of an operation: snake case (`DescribeRouteTables` →
/// `describe_route_tables`), `DescribeInstances` being `describe_instance` as upstream.
pub(crate) fn upstream_request_label(operation: &str) -> String {
    if operation == "DescribeInstances" {
        return "describe_instance".to_owned();
    }
    let mut out = String::with_capacity(operation.len() + 4);
    for (i, c) in operation.chars().enumerate() {
        if c.is_ascii_uppercase() {
            if i > 0 {
                out.push('_');
            }
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

impl Collector for UpstreamErrors {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
        let counts = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        let mut family = encoder.encode_descriptor(
            "cloudprovider_aws_api_request_errors",
            "AWS API errors",
            None,
            MetricType::Unknown,
        )?;
        for (request, count) in counts {
            let labels = [("request", request.as_str())];
            let metric = family.encode_family(&labels)?;
            ConstGauge::new(i64::try_from(count).unwrap_or(i64::MAX)).encode(metric)?;
        }
        Ok(())
    }
}

impl CallMetrics {
    /// Registers the metrics (`aws_api_requests_total`, `aws_api_request_duration_seconds`, labelled by service,
    /// operation and outcome) in `registry`.
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "aws_api_requests",
            "AWS API requests (each retry counts), by service, operation and outcome",
            self.inner.exported.requests.clone(),
        );
        registry.register(
            "aws_api_request_duration_seconds",
            "Latency of AWS API requests, by service, operation and outcome",
            self.inner.exported.latency.clone(),
        );
        registry.register(
            "cloudprovider_aws_api_request_duration_seconds",
            "Latency of AWS API calls",
            self.inner.exported.upstream_latency.clone(),
        );
        registry.register_collector(Box::new(self.inner.exported.upstream_errors.clone()));
        registry.register(
            "cloudprovider_aws_api_throttled_requests",
            "AWS API throttled requests",
            self.inner.exported.upstream_throttles.clone(),
        );
        registry.register(
            "cloudprovider_aws_api_response_status",
            "AWS API response status code counts",
            self.inner.exported.upstream_statuses.clone(),
        );
    }
}

// === impl Exported ===

impl Exported {
    pub(super) fn record(
        &self,
        service: &'static str,
        operation: &'static str,
        outcome: &'static str,
        latency: Duration,
    ) {
        let labels = Labels {
            service,
            operation,
            outcome,
        };
        self.requests.get_or_create(&labels).inc();
        self.latency.get_or_create(&labels).observe(latency.as_secs_f64());
        let request = RequestLabel {
            request: upstream_request_label(operation),
        };
        if outcome == "ok" {
            self.upstream_latency
                .get_or_create(&request)
                .observe(latency.as_secs_f64());
        } else {
            *self
                .upstream_errors
                .0
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .entry(request.request)
                .or_default() += 1;
        }
        if outcome == "throttled" {
            self.upstream_throttles
                .get_or_create(&OperationLabel {
                    operation_name: operation,
                })
                .inc();
        }
    }

    pub(super) fn record_status(
        &self,
        service: crate::limiter::Service,
        operation: &'static str,
        status: u16,
    ) {
        if status < 400 {
            return;
        }
        let service = match service {
            crate::limiter::Service::Ec2 => "EC2",
            crate::limiter::Service::Elb => "Elastic Load Balancing",
            crate::limiter::Service::Elbv2 => "Elastic Load Balancing v2",
            crate::limiter::Service::Sts => "STS",
            crate::limiter::Service::Ecr => "ECR",
        };
        self.upstream_statuses
            .get_or_create(&StatusLabels {
                service,
                operation,
                status_code: status.to_string(),
            })
            .inc();
    }
}

impl Default for Exported {
    fn default() -> Self {
        fn histogram() -> Histogram {
            Histogram::new([
                0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
            ])
        }
        // component-base's default buckets (prometheus.DefBuckets), which the Go histogram uses.
        fn upstream_histogram() -> Histogram {
            Histogram::new([0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0])
        }
        Self {
            requests: Family::default(),
            latency: Family::new_with_constructor(histogram as fn() -> Histogram),
            upstream_latency: Family::new_with_constructor(upstream_histogram as fn() -> Histogram),
            upstream_errors: UpstreamErrors::default(),
            upstream_throttles: Family::default(),
            upstream_statuses: Family::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exports_ours_and_the_go_controllers() {
        let metrics = CallMetrics::default();
        metrics.record("ec2", "DescribeInstances", "throttled", Duration::from_millis(3));
        metrics.record("ec2", "DescribeInstances", "ok", Duration::from_millis(5));
        metrics.record("ec2", "CreateTags", "ok", Duration::from_millis(5));
        metrics.record_status(crate::limiter::Service::Ec2, "DescribeInstances", 503);
        metrics.record_status(crate::limiter::Service::Ec2, "DescribeInstances", 200);
        assert_eq!(metrics.attempts("ec2", "DescribeInstances"), 2);
        assert_eq!(metrics.attempts_with("ec2", "DescribeInstances", "throttled"), 1);
        assert_eq!(metrics.total_attempts(), 3);

        let mut registry = Registry::default();
        metrics.register(&mut registry);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        assert!(
            text.contains(
                r#"aws_api_requests_total{service="ec2",operation="DescribeInstances",outcome="throttled"} 1"#
            ),
            "{text}"
        );
        assert!(text.contains("aws_api_request_duration_seconds_bucket"), "{text}");
        // The Go controller's names, labels and buckets.
        for line in [
            r#"cloudprovider_aws_api_request_duration_seconds_count{request="describe_instance"} 1"#,
            r#"cloudprovider_aws_api_request_duration_seconds_bucket{le="10.0",request="create_tags"} 1"#,
            r#"cloudprovider_aws_api_request_errors{request="describe_instance"} 1"#,
            r#"cloudprovider_aws_api_throttled_requests_total{operation_name="DescribeInstances"} 1"#,
            r#"cloudprovider_aws_api_response_status_total{service="EC2",operation="DescribeInstances",status_code="503"} 1"#,
        ] {
            assert!(text.lines().any(|l| l == line), "{line} missing:\n{text}");
        }
        assert!(
            !text.contains(r#"cloudprovider_aws_api_request_duration_seconds_bucket{le="30.0""#),
            "upstream buckets end at 10 s: {text}"
        );
    }

    #[test]
    fn upstream_request_labels() {
        assert_eq!(upstream_request_label("DescribeInstances"), "describe_instance");
        assert_eq!(
            upstream_request_label("DescribeRouteTables"),
            "describe_route_tables"
        );
        assert_eq!(upstream_request_label("CreateTags"), "create_tags");
    }
}
