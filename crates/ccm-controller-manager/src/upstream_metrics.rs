//! The metrics a Go controller manager serves through component-base, under their exact names, labels and
//! buckets, so that dashboards and alerts built for the Go controller keep working: `workqueue_*` per work queue
//! (upstream queue names), `rest_client_*` for the Kubernetes API calls and `process_*`.

use std::{
    future::Future,
    pin::Pin,
    sync::OnceLock,
    task::{Context, Poll},
};

use ccm_controllers::{ControllerMetrics, HistogramSnapshot, QUEUE_DURATION_BUCKETS};
use hyper::body::{Body, Buf, Frame, SizeHint};
use prometheus_client::{
    collector::Collector,
    encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric, NoLabelSet},
    metrics::{
        MetricType, counter::ConstCounter, counter::Counter, family::Family, gauge::ConstGauge,
        histogram::Histogram,
    },
    registry::Registry,
};
use tokio::time::Instant;

/// The upstream work-queue name of a built-in controller's queue (cloud-provider's
/// `TypedRateLimitingQueueConfig` names); controllers without a queue have none. A provider's controller names its
/// own with `ControllerMetrics::set_queue_name` (the AWS tagging controller: `tagging-controller`).
pub(crate) fn upstream_queue_name(controller: &str) -> Option<&'static str> {
    match controller {
        crate::controllers::CLOUD_NODE => Some("Nodes"),
        "service-lb-controller" => Some("service"),
        _ => None,
    }
}

/// A family: name, help, and how to read its value.
type Family3<F> = (&'static str, &'static str, F);
type GaugeOf = fn(&ccm_controllers::MetricsSnapshot, &ccm_controllers::QueueSnapshot) -> f64;
type CounterOf = fn(&ccm_controllers::QueueSnapshot) -> u64;
type HistogramOf = fn(&ccm_controllers::QueueSnapshot) -> HistogramSnapshot;

/// A controller's work queue: its upstream name and what it counts.
type Queue<'a> = (
    &'a str,
    ccm_controllers::MetricsSnapshot,
    ccm_controllers::QueueSnapshot,
);

/// Encodes component-base's `workqueue_*` families for the controllers that have a work queue.
pub(crate) fn encode_workqueues(
    encoder: &mut DescriptorEncoder<'_>,
    controllers: &[(String, ControllerMetrics)],
) -> Result<(), std::fmt::Error> {
    let queues: Vec<Queue<'_>> = controllers
        .iter()
        .filter_map(|(c, m)| {
            m.queue_name()
                .or_else(|| upstream_queue_name(c))
                .map(|q| (q, m.snapshot(), m.queue_snapshot()))
        })
        .collect();
    encode_queue_gauges(encoder, &queues)?;
    encode_queue_counters(encoder, &queues)?;
    encode_queue_histograms(encoder, &queues)
}

fn encode_queue_gauges(
    encoder: &mut DescriptorEncoder<'_>,
    queues: &[Queue<'_>],
) -> Result<(), std::fmt::Error> {
    let gauges: [Family3<GaugeOf>; 3] = [
        ("workqueue_depth", "Current depth of workqueue", |m, _| {
            m.queue_depth as f64
        }),
        (
            "workqueue_unfinished_work_seconds",
            "How many seconds of work has done that is in progress and hasn't been observed by work_duration. \
             Large values indicate stuck threads. One can deduce the number of stuck threads by observing the \
             rate at which this increases.",
            |_, q| q.unfinished_work_seconds,
        ),
        (
            "workqueue_longest_running_processor_seconds",
            "How many seconds has the longest running processor for workqueue been running.",
            |_, q| q.longest_running_processor_seconds,
        ),
    ];
    for (name, help, value) in gauges {
        let mut family = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
        for (queue, m, q) in queues {
            ConstGauge::new(value(m, q)).encode(family.encode_family(&[("name", *queue)])?)?;
        }
    }
    Ok(())
}

fn encode_queue_counters(
    encoder: &mut DescriptorEncoder<'_>,
    queues: &[Queue<'_>],
) -> Result<(), std::fmt::Error> {
    let counters: [Family3<CounterOf>; 2] = [
        (
            "workqueue_adds",
            "Total number of adds handled by workqueue",
            |q| q.adds,
        ),
        (
            "workqueue_retries",
            "Total number of retries handled by workqueue",
            |q| q.retries,
        ),
    ];
    for (name, help, value) in counters {
        let mut family = encoder.encode_descriptor(name, help, None, MetricType::Counter)?;
        for (queue, _, q) in queues {
            ConstCounter::new(value(q)).encode(family.encode_family(&[("name", *queue)])?)?;
        }
    }
    Ok(())
}

/// The duration histograms, in the queues' own buckets plus `+Inf`, which counts what overflowed them.
fn encode_queue_histograms(
    encoder: &mut DescriptorEncoder<'_>,
    queues: &[Queue<'_>],
) -> Result<(), std::fmt::Error> {
    let histograms: [Family3<HistogramOf>; 2] = [
        (
            "workqueue_queue_duration_seconds",
            "How long in seconds an item stays in workqueue before being requested.",
            |q| q.queue_duration,
        ),
        (
            "workqueue_work_duration_seconds",
            "How long in seconds processing an item from workqueue takes.",
            |q| q.work_duration,
        ),
    ];
    for (name, help, value) in histograms {
        let mut family = encoder.encode_descriptor(name, help, None, MetricType::Histogram)?;
        for (queue, _, q) in queues {
            let h = value(q);
            let mut buckets: Vec<(f64, u64)> =
                QUEUE_DURATION_BUCKETS.iter().copied().zip(h.buckets).collect();
            buckets.push((f64::INFINITY, h.overflow));
            family
                .encode_family(&[("name", *queue)])?
                .encode_histogram::<NoLabelSet>(h.sum, h.count, &buckets, None)?;
        }
    }
    Ok(())
}

// === rest_client_* ===

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct RequestLabels {
    code: String,
    method: String,
    host: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct LatencyLabels {
    verb: String,
    host: String,
}

/// client-go's request metrics, process-wide as in Go (every client of the process counts into them).
#[derive(Debug, Clone)]
struct RestClientMetrics {
    requests: Family<RequestLabels, Counter>,
    latency: Family<LatencyLabels, Histogram>,
    request_size: Family<LatencyLabels, Histogram>,
    response_size: Family<LatencyLabels, Histogram>,
}

/// component-base's buckets of `rest_client_request_size_bytes` and `rest_client_response_size_bytes`: 64 bytes
/// to 16 MiB.
const SIZE_BUCKETS: [f64; 11] = [
    64.0, 256.0, 512.0, 1024.0, 4096.0, 16384.0, 65536.0, 262144.0, 1048576.0, 4194304.0, 16777216.0,
];

fn rest_metrics() -> &'static RestClientMetrics {
    static METRICS: OnceLock<RestClientMetrics> = OnceLock::new();
    METRICS.get_or_init(|| {
        fn histogram() -> Histogram {
            Histogram::new([0.005, 0.025, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0])
        }
        fn sizes() -> Histogram {
            Histogram::new(SIZE_BUCKETS)
        }
        RestClientMetrics {
            requests: Family::default(),
            latency: Family::new_with_constructor(histogram as fn() -> Histogram),
            request_size: Family::new_with_constructor(sizes as fn() -> Histogram),
            response_size: Family::new_with_constructor(sizes as fn() -> Histogram),
        }
    })
}

/// A client layer that counts every Kubernetes API request as client-go does (`code` is `<error>` when no
/// response came back).
#[derive(Debug, Clone)]
pub(crate) struct RestMetricsLayer {
    /// `host[:port]` of the API server.
    pub(crate) host: String,
}

pub(crate) struct RestMetrics<S> {
    inner: S,
    host: String,
}

impl<S> tower::Layer<S> for RestMetricsLayer {
    type Service = RestMetrics<S>;

    fn layer(&self, inner: S) -> Self::Service {
        RestMetrics {
            inner,
            host: self.host.clone(),
        }
    }
}

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

impl<S, B, RB> tower::Service<hyper::Request<B>> for RestMetrics<S>
where
    S: tower::Service<hyper::Request<B>, Response = hyper::Response<RB>>,
    S::Future: Send + 'static,
    B: Body,
    RB: Body + Unpin,
{
    type Response = hyper::Response<SizedBody<RB>>;
    type Error = S::Error;
    type Future = BoxFuture<Result<Self::Response, S::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: hyper::Request<B>) -> Self::Future {
        let method = req.method().as_str().to_owned();
        let host = self.host.clone();
        let labels = LatencyLabels {
            verb: method.clone(),
            host: host.clone(),
        };
        // As client-go: watches count as requests but have no sizes; a request body of unknown length has none.
        let watch = is_watch(req.uri());
        if let Some(size) = req.body().size_hint().exact().filter(|_| !watch) {
            rest_metrics()
                .request_size
                .get_or_create(&labels)
                .observe(size as f64);
        }
        let started = Instant::now();
        let fut = self.inner.call(req);
        Box::pin(async move {
            let result = fut.await;
            let code = match &result {
                Ok(response) => response.status().as_u16().to_string(),
                Err(_) => "<error>".to_owned(),
            };
            let m = rest_metrics();
            m.latency
                .get_or_create(&labels)
                .observe(started.elapsed().as_secs_f64());
            m.requests
                .get_or_create(&RequestLabels { code, method, host })
                .inc();
            result.map(|response| {
                // client-go counts an error status's body only when there is one.
                let success = (200..=206).contains(&response.status().as_u16());
                response.map(|inner| SizedBody {
                    inner,
                    read: 0,
                    labels: (!watch).then_some(labels),
                    count_empty: success,
                })
            })
        })
    }
}

/// `?watch=true` (or `1`): a watch, whose body is a stream of events rather than a response.
fn is_watch(uri: &hyper::Uri) -> bool {
    uri.query()
        .is_some_and(|q| q.split('&').any(|p| matches!(p, "watch=true" | "watch=1")))
}

/// A response body that records its length in `rest_client_response_size_bytes` once read to the end (client-go
/// observes the length of the body it read); a body that fails or is dropped early is not recorded.
pub(crate) struct SizedBody<B: Body> {
    inner: B,
    read: u64,
    /// `None` for watches and once recorded.
    labels: Option<LatencyLabels>,
    count_empty: bool,
}

impl<B: Body> SizedBody<B> {
    fn record(&mut self) {
        if let Some(labels) = self.labels.take()
            && (self.read > 0 || self.count_empty)
        {
            rest_metrics()
                .response_size
                .get_or_create(&labels)
                .observe(self.read as f64);
        }
    }
}

impl<B: Body + Unpin> Body for SizedBody<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        let this = &mut *self;
        let polled = Pin::new(&mut this.inner).poll_frame(cx);
        match &polled {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    this.read += data.remaining() as u64;
                }
            }
            Poll::Ready(None) => this.record(),
            Poll::Ready(Some(Err(_))) => this.labels = None,
            Poll::Pending => {}
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

impl<B: Body> Drop for SizedBody<B> {
    fn drop(&mut self) {
        // A reader may stop at `is_end_stream` without polling for the end.
        if self.inner.is_end_stream() {
            self.record();
        }
    }
}

// === process_* ===

/// The Prometheus Go client's process collector, read from `/proc` at scrape time (nothing on other systems).
#[derive(Debug, Clone, Copy, Default)]
struct ProcessCollector;

/// Linux's `USER_HZ`, the unit of the CPU times in `/proc/<pid>/stat` (100 on every architecture Linux exports).
const CLOCK_TICKS: f64 = 100.0;

/// The process numbers: CPU seconds, open fds, max fds, virtual and resident bytes, start time.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct ProcessStats {
    pub(crate) cpu_seconds: f64,
    pub(crate) open_fds: Option<u64>,
    pub(crate) max_fds: Option<u64>,
    pub(crate) virtual_bytes: Option<u64>,
    pub(crate) resident_bytes: Option<u64>,
    pub(crate) start_time_seconds: Option<f64>,
}

/// Reads the current process's numbers from `/proc`; `None` where it is not available.
pub(crate) fn process_stats() -> Option<ProcessStats> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the command (which may contain spaces) start at field 3 (state).
    let rest = stat.rsplit_once(") ")?.1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let field = |n: usize| fields.get(n - 3).and_then(|v| v.parse::<f64>().ok());
    let (utime, stime, start_ticks) = (field(14)?, field(15)?, field(22)?);
    let boot_time = std::fs::read_to_string("/proc/stat").ok().and_then(|s| {
        s.lines()
            .find_map(|l| l.strip_prefix("btime "))
            .and_then(|v| v.trim().parse::<f64>().ok())
    });
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let kib = |key: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .map(|v| v * 1024)
    };
    let max_fds = std::fs::read_to_string("/proc/self/limits").ok().and_then(|s| {
        s.lines()
            .find(|l| l.starts_with("Max open files"))
            .and_then(|l| l.split_whitespace().nth(3))
            .and_then(|v| v.parse::<u64>().ok())
    });
    Some(ProcessStats {
        cpu_seconds: (utime + stime) / CLOCK_TICKS,
        open_fds: std::fs::read_dir("/proc/self/fd").ok().map(|d| d.count() as u64),
        max_fds,
        virtual_bytes: kib("VmSize:"),
        resident_bytes: kib("VmRSS:"),
        start_time_seconds: boot_time.map(|b| b + start_ticks / CLOCK_TICKS),
    })
}

impl Collector for ProcessCollector {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
        let Some(p) = process_stats() else {
            return Ok(());
        };
        let cpu = encoder.encode_descriptor(
            "process_cpu_seconds",
            "Total user and system CPU time spent in seconds.",
            None,
            MetricType::Counter,
        )?;
        ConstCounter::new(p.cpu_seconds).encode(cpu)?;
        let gauges = [
            (
                "process_open_fds",
                "Number of open file descriptors.",
                p.open_fds.map(|v| v as f64),
            ),
            (
                "process_max_fds",
                "Maximum number of open file descriptors.",
                p.max_fds.map(|v| v as f64),
            ),
            (
                "process_virtual_memory_bytes",
                "Virtual memory size in bytes.",
                p.virtual_bytes.map(|v| v as f64),
            ),
            (
                "process_resident_memory_bytes",
                "Resident memory size in bytes.",
                p.resident_bytes.map(|v| v as f64),
            ),
            (
                "process_start_time_seconds",
                "Start time of the process since unix epoch in seconds.",
                p.start_time_seconds,
            ),
        ];
        for (name, help, value) in gauges {
            if let Some(value) = value {
                let family = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
                ConstGauge::new(value).encode(family)?;
            }
        }
        Ok(())
    }
}

/// Registers the process-wide upstream metrics (`rest_client_*`, `process_*`) in `registry`.
pub(crate) fn register(registry: &mut Registry) {
    let m = rest_metrics();
    registry.register(
        "rest_client_requests",
        "Number of HTTP requests, partitioned by status code, method, and host.",
        m.requests.clone(),
    );
    registry.register(
        "rest_client_request_duration_seconds",
        "Request latency in seconds. Broken down by verb, and host.",
        m.latency.clone(),
    );
    registry.register(
        "rest_client_request_size_bytes",
        "Request size in bytes. Broken down by verb and host.",
        m.request_size.clone(),
    );
    registry.register(
        "rest_client_response_size_bytes",
        "Response size in bytes. Broken down by verb and host.",
        m.response_size.clone(),
    );
    registry.register_collector(Box::new(ProcessCollector));
}

#[cfg(test)]
mod tests;
