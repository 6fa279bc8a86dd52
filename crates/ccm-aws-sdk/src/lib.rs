//! The adapter: implements the `ccm-aws-api` ports on aws-sdk-rust. Paginators, error-code mapping, retries with
//! jitter, client-side rate limits, per-call metrics, endpoint overrides, IMDSv2, role assumption and request
//! batching live here and only here.
//!
//! One [`Adapter`] per process: its clients share one limiter and one set of metrics, so that every controller
//! draws from the same API budget.
//!
//! ```
//! use std::time::Duration;
//!
//! // Every port's calls go to this endpoint (moto, a proxy, a VPC endpoint), each attempt at most 5 s.
//! let options = ccm_aws_sdk::AdapterOptions::default()
//!     .with_endpoint_url("http://127.0.0.1:5000")
//!     .with_attempt_timeout(Duration::from_secs(5));
//! assert_eq!(options.endpoint_url.as_deref(), Some("http://127.0.0.1:5000"));
//! // Then, in a tokio runtime: `ccm_aws_sdk::Adapter::from_env(Some("us-east-1".into()), options).await`.
//! ```
//!
//! Each AWS service is a Cargo feature (`ec2`, `elb`, `elbv2`, `ecr`, `ecr-public`, `sts`), as is aws-config's
//! default credential chain and IMDS client (`config`); all are on by default. A library that needs fewer
//! depends on this crate with `default-features = false` and compiles only those services' SDK crates
//! (docs/using-the-crates.md).
//!
//! May depend on: `ccm-aws-api`, `aws-config`, `aws-sdk-*` and the `aws-smithy-*` crates under them (with the
//! certificate types of their TLS stack), `tokio`, `tracing`. It is the only crate that names `aws-sdk-*` or
//! `aws-config`.

#![cfg_attr(
    test,
    allow(
        clippy::too_many_lines,
        reason = "the function limit is for code, not for tests"
    )
)]
// The helpers the ports share (paging, error mapping, per-call clients, the role provider) are dead code in a
// build that leaves some ports out; the default build, which has every port, is linted for dead code in full.
#![cfg_attr(
    not(all(
        feature = "ec2",
        feature = "elb",
        feature = "elbv2",
        feature = "ecr",
        feature = "ecr-public",
        feature = "sts",
        feature = "config"
    )),
    allow(dead_code, unused_imports)
)]

#[cfg(feature = "ec2")]
mod batch;
#[cfg(any(feature = "ec2", feature = "elb", feature = "elbv2"))]
mod clients;
#[cfg(feature = "ec2")]
mod ec2;
#[cfg(any(feature = "ecr", feature = "ecr-public"))]
mod ecr;
#[cfg(feature = "ecr")]
mod ecr_only;
#[cfg(feature = "elb")]
mod elb;
#[cfg(feature = "elbv2")]
mod elbv2;
#[cfg(any(feature = "ec2", feature = "elb", feature = "elbv2"))]
mod endpoint;
mod error_map;
#[cfg(feature = "config")]
mod imds;
mod limiter;
#[cfg(feature = "ec2")]
mod lookup_split;
mod metrics;
#[cfg(any(feature = "ecr", feature = "ecr-public", feature = "sts"))]
mod per_call;
#[cfg(feature = "sts")]
mod role;
mod runtime;
#[cfg(feature = "sts")]
mod sts;
#[cfg(all(feature = "config", feature = "ecr"))]
mod trust;
mod user_agent;

use std::time::Duration;

use aws_types::SdkConfig;
use ccm_aws_api::{AwsError, ErrorKind};

#[cfg(feature = "ec2")]
pub use ec2::AwsEc2;
#[cfg(any(feature = "ecr", feature = "ecr-public"))]
pub use ecr::AwsEcr;
#[cfg(feature = "ecr")]
pub use ecr_only::EcrAdapter;
#[cfg(feature = "elb")]
pub use elb::AwsElb;
#[cfg(feature = "elbv2")]
pub use elbv2::AwsElbv2;
pub use error_map::classify;
#[cfg(feature = "config")]
pub use imds::{AwsMetadata, ImdsOptions};
pub use limiter::{ActionClass, BucketLimit, RateLimits, Service};
pub use metrics::{CallKey, CallMetrics, CallStats};
#[cfg(feature = "sts")]
pub use role::AssumeRole;
pub use runtime::RetryPolicy;
#[cfg(feature = "sts")]
pub use sts::AwsSts;
pub use user_agent::kubernetes_user_agent;

use crate::{limiter::Limiter, runtime::Runtime};

/// How the adapter reaches AWS.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct AdapterOptions {
    /// One endpoint for every service (tests point this at moto or a fault-injecting proxy).
    pub endpoint_url: Option<String>,
    /// Per-service endpoints (cloud config `[ServiceOverride]`), matched on service and the client's region.
    pub endpoint_overrides: Vec<EndpointOverride>,
    /// A role to assume for EC2 and ELB calls.
    #[cfg(feature = "sts")]
    pub assume_role: Option<AssumeRole>,
    /// Client-side rate limits.
    pub rate_limits: RateLimits,
    /// Retries.
    pub retry: RetryPolicy,
    /// How long concurrent instance lookups and tag changes wait for company.
    pub batch_window: Duration,
    /// Timeout of each HTTP attempt.
    pub attempt_timeout: Duration,
    /// Refuse every call that would change AWS (anything but `Describe*`, `Get*`, `List*` and `AssumeRole*`)
    /// without sending it: an `AccessDenied` error with AWS's dry-run code `DryRunOperation`, counted in
    /// [`CallMetrics`] under the outcome `dry_run`. For a controller's dry run: a code path that forgets it is in
    /// one fails loudly instead of writing.
    pub read_only: bool,
}

/// A custom endpoint for one service in one region. Start from [`EndpointOverride::new`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct EndpointOverride {
    /// The service.
    pub service: Service,
    /// The client region this override applies to.
    pub region: String,
    /// The endpoint URL.
    pub url: String,
    /// The region requests are signed for.
    pub signing_region: String,
    /// The service name requests are signed for, when not the service's own (`SigningName`).
    pub signing_name: Option<String>,
}

/// The clients of every port, sharing one limiter and one set of metrics. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Adapter {
    #[cfg(feature = "ec2")]
    ec2: AwsEc2,
    #[cfg(feature = "elb")]
    elb: AwsElb,
    #[cfg(feature = "elbv2")]
    elbv2: AwsElbv2,
    #[cfg(any(feature = "ecr", feature = "ecr-public"))]
    ecr: AwsEcr,
    #[cfg(feature = "sts")]
    sts: AwsSts,
    metrics: CallMetrics,
    runtime: std::sync::Arc<Runtime>,
    region: Option<String>,
}

// === impl EndpointOverride ===

impl EndpointOverride {
    /// Sends `service`'s calls in `region` to `url`, signed for `region` under the service's own name.
    pub fn new(service: Service, region: impl Into<String>, url: impl Into<String>) -> Self {
        let region = region.into();
        Self {
            service,
            signing_region: region.clone(),
            region,
            url: url.into(),
            signing_name: None,
        }
    }

    /// Signs requests for `region` instead of the client's.
    #[must_use]
    pub fn with_signing_region(mut self, region: impl Into<String>) -> Self {
        self.signing_region = region.into();
        self
    }

    /// Signs requests under `name` instead of the service's own (`SigningName`).
    #[must_use]
    pub fn with_signing_name(mut self, name: Option<String>) -> Self {
        self.signing_name = name;
        self
    }
}

// === impl AdapterOptions ===

impl Default for AdapterOptions {
    fn default() -> Self {
        Self {
            endpoint_url: None,
            endpoint_overrides: Vec::new(),
            #[cfg(feature = "sts")]
            assume_role: None,
            rate_limits: RateLimits::default(),
            retry: RetryPolicy::default(),
            batch_window: Duration::from_millis(20),
            attempt_timeout: Duration::from_secs(30),
            read_only: false,
        }
    }
}

impl AdapterOptions {
    /// Sends every service to `url`.
    #[must_use]
    pub fn with_endpoint_url(mut self, url: impl Into<String>) -> Self {
        self.endpoint_url = Some(url.into());
        self
    }

    /// Adds per-service endpoints.
    #[must_use]
    pub fn with_endpoint_overrides(mut self, overrides: Vec<EndpointOverride>) -> Self {
        self.endpoint_overrides = overrides;
        self
    }

    /// Assumes a role for EC2 and ELB calls.
    #[cfg(feature = "sts")]
    #[must_use]
    pub fn with_assume_role(mut self, role: AssumeRole) -> Self {
        self.assume_role = Some(role);
        self
    }

    /// Sets the client-side rate limits.
    #[must_use]
    pub fn with_rate_limits(mut self, limits: RateLimits) -> Self {
        self.rate_limits = limits;
        self
    }

    /// Sets the retry policy.
    #[must_use]
    pub fn with_retry(mut self, retry: RetryPolicy) -> Self {
        self.retry = retry;
        self
    }

    /// Sets the batching window.
    #[must_use]
    pub fn with_batch_window(mut self, window: Duration) -> Self {
        self.batch_window = window;
        self
    }

    /// Sets [`AdapterOptions::read_only`]: calls that would change AWS are refused, never sent.
    #[must_use]
    pub fn with_read_only(mut self, read_only: bool) -> Self {
        self.read_only = read_only;
        self
    }

    /// Sets the timeout of each HTTP attempt.
    #[must_use]
    pub fn with_attempt_timeout(mut self, timeout: Duration) -> Self {
        self.attempt_timeout = timeout;
        self
    }
}

// === impl Adapter ===

impl Adapter {
    /// Loads the default credential chain and region (environment, profile, web identity, ECS, IMDS), with
    /// `region` taking precedence when given, and builds the adapter on it.
    #[cfg(feature = "config")]
    pub async fn from_env(region: Option<String>, options: AdapterOptions) -> Self {
        Self::new(&config_loader(region).load().await, options)
    }

    /// Builds the clients on `sdk_config` (region and credentials) and `options`. Must be called inside a tokio
    /// runtime (the batchers spawn tasks).
    pub fn new(sdk_config: &SdkConfig, options: AdapterOptions) -> Self {
        let metrics = CallMetrics::default();
        let rt = Runtime::new(
            Limiter::new(options.rate_limits.clone()),
            metrics.clone(),
            options.retry,
            options.read_only,
        );
        let region = sdk_config.region().map(|r| r.as_ref().to_owned());
        #[cfg(any(feature = "ec2", feature = "elb", feature = "elbv2"))]
        let shared = clients::Shared::new(sdk_config, &options, region.as_deref());
        Self {
            #[cfg(feature = "ec2")]
            ec2: AwsEc2::new(
                clients::client!(aws_sdk_ec2, Service::Ec2, sdk_config, &shared),
                rt.clone(),
                options.batch_window,
            ),
            #[cfg(feature = "elb")]
            elb: AwsElb::new(
                clients::client!(aws_sdk_elasticloadbalancing, Service::Elb, sdk_config, &shared),
                rt.clone(),
            ),
            #[cfg(feature = "elbv2")]
            elbv2: AwsElbv2::new(
                clients::client!(
                    aws_sdk_elasticloadbalancingv2,
                    Service::Elbv2,
                    sdk_config,
                    &shared
                ),
                rt.clone(),
            ),
            // ECR and STS run with the ambient credentials (or those the caller passes), never the assumed role.
            #[cfg(any(feature = "ecr", feature = "ecr-public"))]
            ecr: AwsEcr::new(sdk_config, &options, rt.clone()),
            #[cfg(feature = "sts")]
            sts: AwsSts::new(sdk_config, &options, rt.clone()),
            metrics,
            runtime: rt,
            region,
        }
    }

    /// The EC2 port.
    #[cfg(feature = "ec2")]
    pub fn ec2(&self) -> &AwsEc2 {
        &self.ec2
    }

    /// The Classic ELB port.
    #[cfg(feature = "elb")]
    pub fn elb(&self) -> &AwsElb {
        &self.elb
    }

    /// The ELBv2 port.
    #[cfg(feature = "elbv2")]
    pub fn elbv2(&self) -> &AwsElbv2 {
        &self.elbv2
    }

    /// The ECR port.
    #[cfg(any(feature = "ecr", feature = "ecr-public"))]
    pub fn ecr(&self) -> &AwsEcr {
        &self.ecr
    }

    /// The STS port.
    #[cfg(feature = "sts")]
    pub fn sts(&self) -> &AwsSts {
        &self.sts
    }

    /// The metrics of every call made through this adapter.
    pub fn metrics(&self) -> &CallMetrics {
        &self.metrics
    }

    /// The fraction of its nominal refill rate a limiter bucket currently gets: 1.0 normally, less after AWS
    /// throttled calls of that class.
    pub fn rate_factor(&self, service: Service, class: ActionClass) -> f64 {
        self.runtime.limiter.rate_factor(service, class)
    }

    /// The region the clients use, when one was configured.
    pub fn region(&self) -> Option<&str> {
        self.region.as_deref()
    }
}

/// The AWS SDK behavior version of the configuration [`Adapter::from_env`] and [`EcrAdapter::from_env`] load:
/// pinned, so that updating the SDK crates (a consumer's `cargo update`) does not change the SDK's defaults under
/// a running controller. To use another, load the `SdkConfig` yourself (`aws_config::defaults(version)`) and
/// build the adapter on it with [`Adapter::new`] or [`EcrAdapter::new`]; the clients take the behavior version of
/// the configuration they are built on.
#[cfg(feature = "config")]
pub fn behavior_version() -> aws_config::BehaviorVersion {
    aws_config::BehaviorVersion::v2026_01_12()
}

/// The default credential chain and region at [`behavior_version`], `region` taking precedence when given.
#[cfg(feature = "config")]
pub(crate) fn config_loader(region: Option<String>) -> aws_config::ConfigLoader {
    let loader = aws_config::defaults(behavior_version());
    match region {
        Some(region) => loader.region(aws_types::region::Region::new(region)),
        None => loader,
    }
}

/// The signing name of the override for `service`, if it sets one.
#[cfg(any(feature = "ec2", feature = "elb", feature = "elbv2"))]
fn signing_name(options: &AdapterOptions, service: Service, region: Option<&str>) -> Option<String> {
    let client_region = region.unwrap_or_default();
    options
        .endpoint_overrides
        .iter()
        .find(|o| o.service == service && o.region == client_region)
        .and_then(|o| o.signing_name.clone())
        .filter(|n| !n.is_empty())
}

/// The endpoint URL and signing region for `service`: a matching override, else the global URL.
fn endpoint_for(
    options: &AdapterOptions,
    service: Service,
    region: Option<&str>,
) -> Option<(String, String)> {
    let client_region = region.unwrap_or_default();
    options
        .endpoint_overrides
        .iter()
        .find(|o| o.service == service && o.region == client_region)
        .map(|o| (o.url.clone(), o.signing_region.clone()))
        .or_else(|| {
            options
                .endpoint_url
                .clone()
                .map(|url| (url, client_region.to_owned()))
        })
}

/// An [`AwsError`] for a request the adapter refuses before calling AWS.
pub(crate) fn invalid(service: Service, operation: &'static str, message: impl Into<String>) -> AwsError {
    AwsError::new(ErrorKind::Invalid, service.as_str(), operation).with_message(message)
}

#[cfg(all(test, feature = "config"))]
mod tests {
    /// The loaders use the pinned version, not whatever `latest()` is in the SDK the build resolved.
    #[tokio::test]
    async fn the_loaded_configuration_has_the_pinned_behavior_version() {
        let config = super::config_loader(Some("eu-west-1".into()))
            .no_credentials()
            .load()
            .await;
        assert_eq!(config.behavior_version(), Some(super::behavior_version()));
        assert_eq!(config.region().map(AsRef::as_ref), Some("eu-west-1"));
    }
}

// The README's examples compile (and those without `no_run` run) as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeExamples;
