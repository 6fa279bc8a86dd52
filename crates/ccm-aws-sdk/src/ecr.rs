//! [`Ecr`] on aws-sdk-ecr (private registries, feature `ecr`) and aws-sdk-ecrpublic (ECR Public, feature
//! `ecr-public`). Calls go to the region they name, with either the ambient credentials or the temporary ones
//! the caller passes, so clients are built per call from the adapter's base configuration.

use std::sync::Arc;

use aws_smithy_types::retry::RetryConfig;
use aws_types::{SdkConfig, region::Region};
#[cfg(feature = "ecr-public")]
use ccm_aws_api::ecr::ECR_PUBLIC_REGION;
use ccm_aws_api::{Ecr, ErrorKind, Result, ecr::AuthorizationToken, sts::TemporaryCredentials};

use crate::{
    AdapterOptions,
    limiter::{ActionClass, Service},
    per_call::{Base, static_credentials, to_system_time},
    runtime::{Op, Runtime},
};

const GET_AUTHORIZATION_TOKEN: Op = Op::new(Service::Ecr, "GetAuthorizationToken", ActionClass::NonMutating);
const GET_PUBLIC_AUTHORIZATION_TOKEN: Op = Op::new(
    Service::Ecr,
    "GetPublicAuthorizationToken",
    ActionClass::NonMutating,
);

/// The ECR port. Cheap to clone. A registry kind whose feature is off (`ecr`, `ecr-public`) answers every call
/// with an [`ErrorKind::Invalid`] error naming the feature, without calling AWS.
#[derive(Clone)]
pub struct AwsEcr {
    base: Arc<Base>,
}

// === impl AwsEcr ===

impl AwsEcr {
    pub(crate) fn new(config: &SdkConfig, options: &AdapterOptions, rt: Arc<Runtime>) -> Self {
        Self {
            base: Base::new(config, options, rt),
        }
    }

    /// The ECR Public or private registry client's configuration for `region`, with `credentials` if given.
    fn config<B: SdkConfigBuilder>(&self, region: &str, credentials: Option<&TemporaryCredentials>) -> B {
        let (url, region) = self.base.endpoint(Service::Ecr, region);
        let mut config = B::from_sdk(&self.base.config)
            .region(Region::new(region))
            .no_retries();
        if let Some(url) = url {
            config = config.endpoint_url(url);
        }
        if let Some(credentials) = credentials {
            config = config.credentials(static_credentials(credentials));
        }
        config
    }
}

/// The few builder methods both ECR SDK crates' configuration builders have.
trait SdkConfigBuilder: Sized {
    fn from_sdk(config: &SdkConfig) -> Self;
    fn region(self, region: Region) -> Self;
    fn no_retries(self) -> Self;
    fn endpoint_url(self, url: String) -> Self;
    fn credentials(self, provider: aws_credential_types::provider::SharedCredentialsProvider) -> Self;
}

macro_rules! sdk_config_builder {
    ($($sdk:ident),*) => {$(
        impl SdkConfigBuilder for $sdk::config::Builder {
            fn from_sdk(config: &SdkConfig) -> Self {
                Self::from(config)
            }
            fn region(self, region: Region) -> Self {
                Self::region(self, region)
            }
            fn no_retries(self) -> Self {
                self.retry_config(RetryConfig::disabled())
            }
            fn endpoint_url(self, url: String) -> Self {
                Self::endpoint_url(self, url)
            }
            fn credentials(self, provider: aws_credential_types::provider::SharedCredentialsProvider) -> Self {
                self.credentials_provider(provider)
            }
        }
    )*};
}

#[cfg(feature = "ecr")]
sdk_config_builder!(aws_sdk_ecr);
#[cfg(feature = "ecr-public")]
sdk_config_builder!(aws_sdk_ecrpublic);

impl std::fmt::Debug for AwsEcr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AwsEcr").finish_non_exhaustive()
    }
}

/// The error of a call whose registry kind this build leaves out.
#[cfg(any(not(feature = "ecr"), not(feature = "ecr-public")))]
fn not_built(op: Op, feature: &str) -> ccm_aws_api::AwsError {
    op.error(
        ErrorKind::Invalid,
        format!("ccm-aws-sdk was built without its `{feature}` feature"),
    )
}

impl Ecr for AwsEcr {
    #[cfg(feature = "ecr")]
    async fn authorization_token(
        &self,
        region: &str,
        credentials: Option<TemporaryCredentials>,
    ) -> Result<AuthorizationToken> {
        let config: aws_sdk_ecr::config::Builder = self.config(region, credentials.as_ref());
        let client = aws_sdk_ecr::Client::from_conf(config.build());
        let out = self
            .base
            .rt
            .call(GET_AUTHORIZATION_TOKEN, || {
                client.get_authorization_token().send()
            })
            .await?;
        let data = out.authorization_data().first().ok_or_else(|| {
            GET_AUTHORIZATION_TOKEN.error(ErrorKind::Permanent, "authorization data was empty")
        })?;
        let token = data.authorization_token().ok_or_else(|| {
            GET_AUTHORIZATION_TOKEN.error(ErrorKind::Permanent, "authorization token in response was empty")
        })?;
        Ok(AuthorizationToken {
            token: token.to_owned(),
            expires_at: to_system_time(data.expires_at()),
            proxy_endpoint: data.proxy_endpoint().map(str::to_owned),
        })
    }

    #[cfg(not(feature = "ecr"))]
    async fn authorization_token(
        &self,
        _: &str,
        _: Option<TemporaryCredentials>,
    ) -> Result<AuthorizationToken> {
        Err(not_built(GET_AUTHORIZATION_TOKEN, "ecr"))
    }

    #[cfg(feature = "ecr-public")]
    async fn public_authorization_token(
        &self,
        credentials: Option<TemporaryCredentials>,
    ) -> Result<AuthorizationToken> {
        let config: aws_sdk_ecrpublic::config::Builder = self.config(ECR_PUBLIC_REGION, credentials.as_ref());
        let client = aws_sdk_ecrpublic::Client::from_conf(config.build());
        let out = self
            .base
            .rt
            .call(GET_PUBLIC_AUTHORIZATION_TOKEN, || {
                client.get_authorization_token().send()
            })
            .await?;
        let data = out.authorization_data().ok_or_else(|| {
            GET_PUBLIC_AUTHORIZATION_TOKEN.error(ErrorKind::Permanent, "authorization data was empty")
        })?;
        let token = data.authorization_token().ok_or_else(|| {
            GET_PUBLIC_AUTHORIZATION_TOKEN
                .error(ErrorKind::Permanent, "authorization token in response was empty")
        })?;
        Ok(AuthorizationToken {
            token: token.to_owned(),
            expires_at: to_system_time(data.expires_at()),
            proxy_endpoint: None,
        })
    }

    #[cfg(not(feature = "ecr-public"))]
    async fn public_authorization_token(
        &self,
        _: Option<TemporaryCredentials>,
    ) -> Result<AuthorizationToken> {
        Err(not_built(GET_PUBLIC_AUTHORIZATION_TOKEN, "ecr-public"))
    }
}
