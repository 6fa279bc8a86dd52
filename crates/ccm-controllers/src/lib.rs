//! The generic controllers of a cloud controller manager, each over any `P: CloudProvider`: cloud-node,
//! node-lifecycle, service and route.
//!
//! Each controller module has a config struct (upstream defaults) and an async `run(client, provider, config,
//! shutdown)` that returns when `shutdown` completes, so a controller-manager runtime can compose them. Each
//! config carries a [`ControllerMetrics`] the runtime can read and export. See `docs/controllers.md`.
//!
//! The toolkit the controllers are built from is public, so that a provider's own controllers (the AWS tagging
//! controller) are built the same way: [`WorkQueue`] and [`Backoff`] (client-go's de-duplicating, rate-limited
//! queue), [`TokenBucket`], [`Clock`], [`ErrorChain`], [`Bootstrap`] / [`Informer`] / [`Informers`] / [`run_until`]
//! (client, recorder, stores and watches, shared per process) and [`Error::retry_delay`] (when a failed key is tried again).
//!
//! May depend on: `ccm-cloud-provider`, `kube`, `kube-runtime`, `k8s-openapi`, `tokio`, `tracing`, metrics and
//! HTTP crates. Never on anything AWS.

#![cfg_attr(
    test,
    allow(
        clippy::too_many_lines,
        reason = "the function limit is for code, not for tests"
    )
)]

pub mod addresses;
mod bootstrap;
mod cached_node;
mod clock;
pub mod cloud_node;
mod dry_run;
mod error;
mod error_chain;
pub mod events;
mod instances;
pub mod keys;
mod metrics;
#[cfg(test)]
mod mock_api;
pub mod node_lifecycle;
mod rate;
pub mod route;
pub mod service;
mod shared;
mod watch;
mod workqueue;

pub use bootstrap::{Bootstrap, Informer, run_until};
pub use cached_node::CachedNode;
pub use clock::Clock;
pub use dry_run::DryRunSink;
pub use error::Error;
pub use error_chain::ErrorChain;
pub use metrics::{
    ControllerMetrics, HistogramSnapshot, MetricsSnapshot, QUEUE_DURATION_BUCKETS, QueueSnapshot,
};
pub use rate::TokenBucket;
pub use shared::Informers;
pub use watch::Watched;
pub use workqueue::{Backoff, QueueKey, WorkQueue};
