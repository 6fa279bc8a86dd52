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

mod batch;
mod ec2;
mod ecr;
mod ecr_only;
mod elb;
mod elbv2;
mod endpoint;
mod error_map;
mod imds;
mod limiter;
mod lookup_split;
mod metrics;
mod role;
mod runtime;
mod trust;
mod user_agent;

use std::time::Duration;

use aws_config::{SdkConfig, retry::RetryConfig, timeout::TimeoutConfig};
use aws_credential_types::provider::SharedCredentialsProvider;
use aws_types::region::Region;
use ccm_aws_api::{AwsError, ErrorKind};

pub use ec2::AwsEc2;
pub use ecr::{AwsEcr, AwsSts};
pub use ecr_only::EcrAdapter;
pub use elb::AwsElb;
pub use elbv2::AwsElbv2;
pub use error_map::classify;
pub use imds::{AwsMetadata, ImdsOptions};
pub use limiter::{ActionClass, BucketLimit, RateLimits, Service};
pub use metrics::{CallKey, CallMetrics, CallStats};
pub use role::AssumeRole;
pub use runtime::RetryPolicy;
pub use user_agent::kubernetes_user_agent;

use crate::{limiter::Limiter, role::AssumeRoleProvider, runtime::Runtime};

/// How the adapter reaches AWS.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct AdapterOptions {
    /// One endpoint for every service (tests point this at moto or a fault-injecting proxy).
    pub endpoint_url: Option<String>,
    /// Per-service endpoints (cloud config `[ServiceOverride]`), matched on service and the client's region.
    pub endpoint_overrides: Vec<EndpointOverride>,
    /// A role to assume for EC2 and ELB calls.
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
    ec2: AwsEc2,
    elb: AwsElb,
    elbv2: AwsElbv2,
    ecr: AwsEcr,
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
    pub async fn from_env(region: Option<String>, options: AdapterOptions) -> Self {
        let mut loader = aws_config::defaults(aws_config::BehaviorVersion::latest());
        if let Some(region) = region {
            loader = loader.region(Region::new(region));
        }
        Self::new(&loader.load().await, options)
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
        let timeouts = TimeoutConfig::builder()
            .operation_attempt_timeout(options.attempt_timeout)
            .connect_timeout(options.attempt_timeout.min(Duration::from_secs(5)))
            .build();

        let credentials = options.assume_role.as_ref().map(|role| {
            let headers = role::SourceHeaders {
                account: role.account().map(str::to_owned),
                arn: role.source_arn.clone(),
            };
            let mut sts = aws_sdk_sts::config::Builder::from(sdk_config)
                .interceptor(headers)
                .interceptor(user_agent::KubernetesUserAgent);
            if let Some((url, signing_region)) = endpoint_for(&options, Service::Sts, region.as_deref()) {
                sts = sts.endpoint_url(url).region(Region::new(signing_region));
            }
            SharedCredentialsProvider::new(AssumeRoleProvider {
                sts: aws_sdk_sts::Client::from_conf(sts.build()),
                role: role.clone(),
            })
        });

        macro_rules! client {
            ($sdk:ident, $service:expr) => {{
                let mut config = $sdk::config::Builder::from(sdk_config)
                    .interceptor(user_agent::KubernetesUserAgent)
                    .retry_config(RetryConfig::disabled())
                    .timeout_config(timeouts.clone());
                if let Some((url, signing_region)) = endpoint_for(&options, $service, region.as_deref()) {
                    match signing_name(&options, $service, region.as_deref()) {
                        Some(name) => {
                            config = config
                                .endpoint_resolver(endpoint::StaticEndpoint::new(
                                    url,
                                    &signing_region,
                                    Some(name),
                                ))
                                .region(Region::new(signing_region));
                        }
                        None => config = config.endpoint_url(url).region(Region::new(signing_region)),
                    }
                }
                if let Some(credentials) = &credentials {
                    config = config.credentials_provider(credentials.clone());
                }
                $sdk::Client::from_conf(config.build())
            }};
        }

        let ec2 = AwsEc2::new(
            client!(aws_sdk_ec2, Service::Ec2),
            rt.clone(),
            options.batch_window,
        );
        let elb = AwsElb::new(client!(aws_sdk_elasticloadbalancing, Service::Elb), rt.clone());
        let elbv2 = AwsElbv2::new(
            client!(aws_sdk_elasticloadbalancingv2, Service::Elbv2),
            rt.clone(),
        );
        // ECR and STS run with the ambient credentials (or those the caller passes), never the assumed role.
        let ecr = AwsEcr::new(sdk_config, &options, rt.clone());
        let sts = AwsSts::new(sdk_config, &options, rt.clone());
        Self {
            ec2,
            elb,
            elbv2,
            ecr,
            sts,
            metrics,
            runtime: rt,
            region,
        }
    }

    /// The EC2 port.
    pub fn ec2(&self) -> &AwsEc2 {
        &self.ec2
    }

    /// The Classic ELB port.
    pub fn elb(&self) -> &AwsElb {
        &self.elb
    }

    /// The ELBv2 port.
    pub fn elbv2(&self) -> &AwsElbv2 {
        &self.elbv2
    }

    /// The ECR port.
    pub fn ecr(&self) -> &AwsEcr {
        &self.ecr
    }

    /// The STS port.
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

/// The signing name of the override for `service`, if it sets one.
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
