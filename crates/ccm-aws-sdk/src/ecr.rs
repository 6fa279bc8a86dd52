//! [`Ecr`] and [`Sts`] on aws-sdk-ecr, aws-sdk-ecrpublic and aws-sdk-sts. Calls go to the region they name,
//! with either the ambient credentials or the temporary ones the caller passes, so clients are built per call
//! from the adapter's base configuration (cheap: they share its HTTP client).

use std::{sync::Arc, time::SystemTime};

use aws_config::{SdkConfig, retry::RetryConfig};
use aws_credential_types::{Credentials, provider::SharedCredentialsProvider};
use aws_types::region::Region;
use ccm_aws_api::{
    Ecr, ErrorKind, Result, Sts,
    ecr::{AuthorizationToken, ECR_PUBLIC_REGION},
    sts::{CallerIdentity, TemporaryCredentials, WebIdentityRole},
};

use crate::{
    AdapterOptions, endpoint_for,
    limiter::{ActionClass, Service},
    runtime::{Op, Runtime},
};

const GET_AUTHORIZATION_TOKEN: Op = Op::new(Service::Ecr, "GetAuthorizationToken", ActionClass::NonMutating);
const GET_PUBLIC_AUTHORIZATION_TOKEN: Op = Op::new(
    Service::Ecr,
    "GetPublicAuthorizationToken",
    ActionClass::NonMutating,
);
const ASSUME_ROLE_WITH_WEB_IDENTITY: Op =
    Op::new(Service::Sts, "AssumeRoleWithWebIdentity", ActionClass::Mutating);
const GET_CALLER_IDENTITY: Op = Op::new(Service::Sts, "GetCallerIdentity", ActionClass::NonMutating);

/// The ECR port. Cheap to clone.
#[derive(Clone)]
pub struct AwsEcr {
    base: Arc<Base>,
}

/// The STS port. Cheap to clone.
#[derive(Clone)]
pub struct AwsSts {
    base: Arc<Base>,
}

struct Base {
    config: SdkConfig,
    options: AdapterOptions,
    rt: Arc<Runtime>,
}

// === impl Base ===

impl Base {
    /// The endpoint and region for `service` when called for `region`.
    fn endpoint(&self, service: Service, region: &str) -> (Option<String>, String) {
        match endpoint_for(&self.options, service, Some(region)) {
            Some((url, signing_region)) => (Some(url), signing_region),
            None => (None, region.to_owned()),
        }
    }
}

fn static_credentials(credentials: &TemporaryCredentials) -> SharedCredentialsProvider {
    SharedCredentialsProvider::new(Credentials::new(
        &credentials.access_key_id,
        &credentials.secret_access_key,
        Some(credentials.session_token.clone()),
        Some(credentials.expiration),
        "ccm-sts",
    ))
}

fn to_system_time(time: Option<&aws_smithy_types::DateTime>) -> Option<SystemTime> {
    time.and_then(|t| SystemTime::try_from(*t).ok())
}

// === impl AwsEcr ===

impl AwsEcr {
    pub(crate) fn new(config: &SdkConfig, options: &AdapterOptions, rt: Arc<Runtime>) -> Self {
        Self {
            base: Arc::new(Base {
                config: config.clone(),
                options: options.clone(),
                rt,
            }),
        }
    }
}

impl std::fmt::Debug for AwsEcr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AwsEcr").finish_non_exhaustive()
    }
}

impl Ecr for AwsEcr {
    async fn authorization_token(
        &self,
        region: &str,
        credentials: Option<TemporaryCredentials>,
    ) -> Result<AuthorizationToken> {
        let (url, region) = self.base.endpoint(Service::Ecr, region);
        let mut config = aws_sdk_ecr::config::Builder::from(&self.base.config)
            .region(Region::new(region))
            .retry_config(RetryConfig::disabled());
        if let Some(url) = url {
            config = config.endpoint_url(url);
        }
        if let Some(credentials) = &credentials {
            config = config.credentials_provider(static_credentials(credentials));
        }
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

    async fn public_authorization_token(
        &self,
        credentials: Option<TemporaryCredentials>,
    ) -> Result<AuthorizationToken> {
        let (url, region) = self.base.endpoint(Service::Ecr, ECR_PUBLIC_REGION);
        let mut config = aws_sdk_ecrpublic::config::Builder::from(&self.base.config)
            .region(Region::new(region))
            .retry_config(RetryConfig::disabled());
        if let Some(url) = url {
            config = config.endpoint_url(url);
        }
        if let Some(credentials) = &credentials {
            config = config.credentials_provider(static_credentials(credentials));
        }
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
}

// === impl AwsSts ===

impl AwsSts {
    pub(crate) fn new(config: &SdkConfig, options: &AdapterOptions, rt: Arc<Runtime>) -> Self {
        Self {
            base: Arc::new(Base {
                config: config.clone(),
                options: options.clone(),
                rt,
            }),
        }
    }

    fn client(&self, region: Option<&str>, anonymous: bool) -> aws_sdk_sts::Client {
        let region = region
            .map(str::to_owned)
            .or_else(|| self.base.config.region().map(|r| r.as_ref().to_owned()))
            .unwrap_or_default();
        let (url, region) = self.base.endpoint(Service::Sts, &region);
        let mut config = aws_sdk_sts::config::Builder::from(&self.base.config)
            .region(Region::new(region))
            .retry_config(RetryConfig::disabled());
        if let Some(url) = url {
            config = config.endpoint_url(url);
        }
        if anonymous {
            // AssumeRoleWithWebIdentity needs no signature: the web identity token is the credential.
            config.set_credentials_provider(None);
        }
        aws_sdk_sts::Client::from_conf(config.build())
    }
}

impl std::fmt::Debug for AwsSts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AwsSts").finish_non_exhaustive()
    }
}

impl Sts for AwsSts {
    async fn assume_role_with_web_identity(
        &self,
        region: &str,
        role: &WebIdentityRole,
    ) -> Result<TemporaryCredentials> {
        let client = self.client(Some(region), true);
        let out = self
            .base
            .rt
            .call(ASSUME_ROLE_WITH_WEB_IDENTITY, || {
                client
                    .assume_role_with_web_identity()
                    .role_arn(&role.role_arn)
                    .role_session_name(&role.session_name)
                    .web_identity_token(&role.web_identity_token)
                    .send()
            })
            .await?;
        let c = out.credentials().ok_or_else(|| {
            ASSUME_ROLE_WITH_WEB_IDENTITY.error(ErrorKind::Permanent, "AWS returned no credentials")
        })?;
        Ok(TemporaryCredentials {
            access_key_id: c.access_key_id().to_owned(),
            secret_access_key: c.secret_access_key().to_owned(),
            session_token: c.session_token().to_owned(),
            expiration: SystemTime::try_from(*c.expiration()).map_err(|e| {
                ASSUME_ROLE_WITH_WEB_IDENTITY
                    .error(ErrorKind::Permanent, "credential expiration out of range")
                    .with_source(e)
            })?,
        })
    }

    async fn caller_identity(&self) -> Result<CallerIdentity> {
        let client = self.client(None, false);
        let out = self
            .base
            .rt
            .call(GET_CALLER_IDENTITY, || client.get_caller_identity().send())
            .await?;
        Ok(CallerIdentity {
            account: out.account().unwrap_or_default().to_owned(),
            arn: out.arn().unwrap_or_default().to_owned(),
            user_id: out.user_id().unwrap_or_default().to_owned(),
        })
    }
}
