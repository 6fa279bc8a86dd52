//! The composition: `AwsCloud` implements `CloudProvider` from the AWS domain crates on top of the `ccm-aws-sdk` adapter; the cloud config (INI, parsed by `ccm-cloud-config`, re-exported as [`cloud_config`]) turned into the adapter's options; cluster ID discovery; the leak report ([`doctor`]); the AWS tagging controller ([`tagging`]), built from the `ccm-controllers` toolkit.
//!
//! ```
//! // The Go provider's cloud config, as the `--cloud-config` file holds it.
//! let config = ccm_aws::CloudConfig::parse("[Global]\nKubernetesClusterID = my-cluster\n").unwrap();
//! assert!(config.warnings.is_empty());
//! ```
//!
//! May depend on: every library crate of the workspace. Binaries in `examples/` depend on this crate and `ccm-controllers`.

#![cfg_attr(
    test,
    allow(
        clippy::too_many_lines,
        reason = "the function limit is for code, not for tests"
    )
)]

mod adapter_options;
mod catalog_metrics;
pub mod cloud;
/// The cloud config file, parsed (re-exported from `ccm-cloud-config`).
pub use ccm_cloud_config as cloud_config;
pub mod cluster_id;
pub mod doctor;
pub mod membership;
pub mod tagging;
pub mod zone_labels;

pub use catalog_metrics::CatalogMetrics;
pub use cloud::{AwsCloud, AwsCloudError, Environment, PROVIDER_NAME};
pub use cloud_config::{CloudConfig, CloudConfigErrors, ConfigError, GlobalConfig, LoadError};
pub use cluster_id::ClusterIdError;
pub use zone_labels::{ZoneLabelCheck, ZoneLabelError};

// The README's examples compile (and those without `no_run` run) as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeExamples;
