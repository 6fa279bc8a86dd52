//! The controller-manager runtime that turns the generic controllers of `ccm-controllers` (and a provider's own
//! controllers) into a daemon an operator can deploy in place of the Go cloud controller manager: the upstream
//! flags ([`Options`]), leader election on a `coordination.k8s.io/v1` Lease and leader migration, an HTTPS server
//! with `/healthz` and `/metrics`, JSON or text logs ([`init_logging`]) and graceful shutdown on SIGTERM/SIGINT.
//!
//! ```no_run
//! # use std::sync::Arc;
//! # async fn example<P: ccm_cloud_provider::CloudProvider>(options: ccm_controller_manager::Options, provider: P)
//! # -> Result<(), ccm_controller_manager::Error> {
//! ccm_controller_manager::init_logging(&options)?;
//! ccm_controller_manager::Runtime::new(options)
//!     .with_controller("tagging", false, |ctx| async move {
//!         ctx.shutdown.cancelled().await;
//!         Ok(())
//!     })
//!     .run(Arc::new(provider))
//!     .await
//! # }
//! ```
//!
//! A crate of its own (not a module of `ccm-controllers`) so that users who embed single controllers do not
//! build clap, rustls and prometheus-client. May depend on `ccm-cloud-provider`, `ccm-controllers`, `kube`,
//! `k8s-openapi` and plumbing crates; never on anything AWS.

#![cfg_attr(
    test,
    allow(
        clippy::too_many_lines,
        reason = "the function limit is for code, not for tests"
    )
)]

mod auth;
mod client;
mod configz;
mod controllers;
mod dry_run;
mod duration;
mod error;
mod go_flags;
mod http;
mod leader;
mod logging;
mod migration;
mod options;
mod runtime;
mod upstream_metrics;

pub use dry_run::{DryRunLog, PendingWrite, Refused};
pub use duration::parse_go_duration;
pub use error::Error;
pub use go_flags::{bool_flag_problems, normalize_flag_names, parse_go_bool, version_request};
pub use logging::{filter_for_verbosity, go_quote, init_logging, log_subscriber};
pub use migration::MigrationConfig;
pub use options::{CompatOptions, Options, OptionsError};
pub use runtime::{BoxError, ControllerContext, Runtime};

// The README's examples compile (and those without `no_run` run) as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeExamples;
