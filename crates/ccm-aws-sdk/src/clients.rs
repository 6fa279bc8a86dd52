//! What the EC2 and ELB clients of an [`Adapter`](crate::Adapter) share: the attempt timeouts, the assumed role's
//! credentials (with the `sts` feature), the endpoint overrides and the Kubernetes user agent; retries are the
//! adapter's own, so the SDK's are off.

use aws_credential_types::provider::SharedCredentialsProvider;
use aws_smithy_types::timeout::TimeoutConfig;
use aws_types::SdkConfig;
#[cfg(feature = "sts")]
use aws_types::region::Region;

use crate::AdapterOptions;
#[cfg(feature = "sts")]
use crate::{Service, endpoint_for, role, user_agent};

/// The settings every EC2 and ELB client is built with ([`client!`]).
pub(crate) struct Shared<'a> {
    pub(crate) options: &'a AdapterOptions,
    pub(crate) region: Option<&'a str>,
    pub(crate) timeouts: TimeoutConfig,
    pub(crate) credentials: Option<SharedCredentialsProvider>,
}

impl<'a> Shared<'a> {
    pub(crate) fn new(sdk_config: &SdkConfig, options: &'a AdapterOptions, region: Option<&'a str>) -> Self {
        let timeouts = TimeoutConfig::builder()
            .operation_attempt_timeout(options.attempt_timeout)
            .connect_timeout(options.attempt_timeout.min(std::time::Duration::from_secs(5)))
            .build();
        Self {
            options,
            region,
            timeouts,
            credentials: assumed_role(sdk_config, options, region),
        }
    }
}

/// The credentials of [`AdapterOptions::assume_role`], refreshed through STS.
#[cfg(feature = "sts")]
fn assumed_role(
    sdk_config: &SdkConfig,
    options: &AdapterOptions,
    region: Option<&str>,
) -> Option<SharedCredentialsProvider> {
    let role = options.assume_role.as_ref()?;
    let headers = role::SourceHeaders {
        account: role.account().map(str::to_owned),
        arn: role.source_arn.clone(),
    };
    let mut sts = aws_sdk_sts::config::Builder::from(sdk_config)
        .interceptor(headers)
        .interceptor(user_agent::KubernetesUserAgent);
    if let Some((url, signing_region)) = endpoint_for(options, Service::Sts, region) {
        sts = sts.endpoint_url(url).region(Region::new(signing_region));
    }
    Some(SharedCredentialsProvider::new(role::AssumeRoleProvider {
        sts: aws_sdk_sts::Client::from_conf(sts.build()),
        role: role.clone(),
    }))
}

/// Without the `sts` feature there is no role to assume: the ambient credentials.
#[cfg(not(feature = "sts"))]
fn assumed_role(_: &SdkConfig, _: &AdapterOptions, _: Option<&str>) -> Option<SharedCredentialsProvider> {
    None
}

/// The client of the SDK crate `$sdk` for `$service`, built on `$sdk_config` and the [`Shared`] settings.
macro_rules! client {
    ($sdk:ident, $service:expr, $sdk_config:expr, $shared:expr) => {{
        let shared: &$crate::clients::Shared<'_> = $shared;
        let mut config = $sdk::config::Builder::from($sdk_config)
            .interceptor($crate::user_agent::KubernetesUserAgent)
            .retry_config(aws_smithy_types::retry::RetryConfig::disabled())
            .timeout_config(shared.timeouts.clone());
        if let Some((url, signing_region)) = $crate::endpoint_for(shared.options, $service, shared.region) {
            let region = aws_types::region::Region::new(signing_region.clone());
            match $crate::signing_name(shared.options, $service, shared.region) {
                Some(name) => {
                    config = config
                        .endpoint_resolver($crate::endpoint::StaticEndpoint::new(
                            url,
                            &signing_region,
                            Some(name),
                        ))
                        .region(region);
                }
                None => config = config.endpoint_url(url).region(region),
            }
        }
        if let Some(credentials) = &shared.credentials {
            config = config.credentials_provider(credentials.clone());
        }
        $sdk::Client::from_conf(config.build())
    }};
}
pub(crate) use client;
