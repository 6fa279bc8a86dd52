//! [`Sts`] on aws-sdk-sts (feature `sts`): web identity for the ECR credential provider and the caller's
//! identity. Clients are built per call from the adapter's base configuration, for the region the call names.

use std::{sync::Arc, time::SystemTime};

use aws_smithy_types::retry::RetryConfig;
use aws_types::{SdkConfig, region::Region};
use ccm_aws_api::{
    ErrorKind, Result, Sts,
    sts::{CallerIdentity, TemporaryCredentials, WebIdentityRole},
};

use crate::{
    AdapterOptions,
    limiter::{ActionClass, Service},
    per_call::Base,
    runtime::{Op, Runtime},
};

const ASSUME_ROLE_WITH_WEB_IDENTITY: Op =
    Op::new(Service::Sts, "AssumeRoleWithWebIdentity", ActionClass::Mutating);
const GET_CALLER_IDENTITY: Op = Op::new(Service::Sts, "GetCallerIdentity", ActionClass::NonMutating);

/// The STS port. Cheap to clone.
#[derive(Clone)]
pub struct AwsSts {
    base: Arc<Base>,
}

// === impl AwsSts ===

impl AwsSts {
    pub(crate) fn new(config: &SdkConfig, options: &AdapterOptions, rt: Arc<Runtime>) -> Self {
        Self {
            base: Base::new(config, options, rt),
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
