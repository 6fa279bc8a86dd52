//! The generic controllers of a cloud controller manager, each over any `P: CloudProvider`: cloud-node,
//! node-lifecycle, service and route.
//!
//! Each controller module has a config struct (upstream defaults) and an async `run(client, provider, config,
//! shutdown)` that returns when `shutdown` completes, so a controller-manager runtime can compose them. Each
//! config carries a [`ControllerMetrics`] the runtime can read and export. See `docs/controllers.md`.
//!
//! May depend on: `ccm-cloud-provider`, `kube`, `kube-runtime`, `k8s-openapi`, `tokio`, `tracing`, metrics and
//! HTTP crates. Never on anything AWS.

pub mod addresses;
mod clock;
pub mod cloud_node;
mod error;
pub mod events;
mod instances;
pub mod keys;
mod metrics;
#[cfg(test)]
mod mock_api;
pub mod node_lifecycle;
pub mod route;
pub mod service;
mod watch;
mod workqueue;

pub use clock::Clock;
pub use error::Error;
pub use metrics::{
    ControllerMetrics, HistogramSnapshot, MetricsSnapshot, QUEUE_DURATION_BUCKETS, QueueSnapshot,
};
