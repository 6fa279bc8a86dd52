//! Role assumption (cloud config `RoleARN`, `SourceARN`): credentials from `sts:AssumeRole`, with the
//! confused-deputy headers `x-amz-source-account` (the role's account) and `x-amz-source-arn`.

use std::time::SystemTime;

use aws_credential_types::{
    Credentials,
    provider::{ProvideCredentials, error::CredentialsError, future},
};
use aws_smithy_runtime_api::{
    box_error::BoxError,
    client::{
        interceptors::{Intercept, context::BeforeTransmitInterceptorContextMut},
        runtime_components::RuntimeComponents,
    },
};
use aws_smithy_types::config_bag::ConfigBag;

/// The role to assume for every EC2 and ELB call.
/// Start from [`AssumeRole::new`] and set the other fields.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct AssumeRole {
    /// `arn:aws:iam::123456789012:role/ccm`.
    pub role_arn: String,
    /// Sent as `x-amz-source-arn` when set (the role's trust policy may require it).
    pub source_arn: Option<String>,
    /// The session name recorded in CloudTrail.
    pub session_name: String,
}

/// Credentials by `AssumeRole`; the SDK clients' identity cache keeps them until shortly before they expire.
#[derive(Debug)]
pub(crate) struct AssumeRoleProvider {
    pub(crate) sts: aws_sdk_sts::Client,
    pub(crate) role: AssumeRole,
}

/// Adds the source headers to STS requests.
#[derive(Debug)]
pub(crate) struct SourceHeaders {
    pub(crate) account: Option<String>,
    pub(crate) arn: Option<String>,
}

// === impl AssumeRole ===

impl AssumeRole {
    /// Assumes `role_arn` with the default session name `aws-cloud-controller-manager`.
    pub fn new(role_arn: impl Into<String>) -> Self {
        Self {
            role_arn: role_arn.into(),
            source_arn: None,
            session_name: "aws-cloud-controller-manager".into(),
        }
    }

    /// The 12-digit account of the role ARN (`arn:partition:iam::<account>:role/...`).
    pub fn account(&self) -> Option<&str> {
        self.role_arn.split(':').nth(4).filter(|a| !a.is_empty())
    }
}

// === impl AssumeRoleProvider ===

impl ProvideCredentials for AssumeRoleProvider {
    fn provide_credentials<'a>(&'a self) -> future::ProvideCredentials<'a>
    where
        Self: 'a,
    {
        future::ProvideCredentials::new(async move {
            let out = self
                .sts
                .assume_role()
                .role_arn(&self.role.role_arn)
                .role_session_name(&self.role.session_name)
                .send()
                .await
                .map_err(|e| {
                    CredentialsError::provider_error(format!(
                        "assuming role {}: {}",
                        self.role.role_arn,
                        aws_smithy_types::error::display::DisplayErrorContext(&e)
                    ))
                })?;
            let c = out
                .credentials()
                .ok_or_else(|| CredentialsError::unhandled("AssumeRole returned no credentials"))?;
            let expiry = SystemTime::try_from(*c.expiration()).ok();
            Ok(Credentials::new(
                c.access_key_id(),
                c.secret_access_key(),
                Some(c.session_token().to_owned()),
                expiry,
                "ccm-assume-role",
            ))
        })
    }
}

// === impl SourceHeaders ===

impl Intercept for SourceHeaders {
    fn name(&self) -> &'static str {
        "SourceHeaders"
    }

    fn modify_before_signing(
        &self,
        context: &mut BeforeTransmitInterceptorContextMut<'_>,
        _components: &RuntimeComponents,
        _cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let headers = context.request_mut().headers_mut();
        if let Some(account) = &self.account {
            headers.insert("x-amz-source-account", account.clone());
        }
        if let Some(arn) = &self.arn {
            headers.insert("x-amz-source-arn", arn.clone());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn account_of_role() {
        assert_eq!(
            AssumeRole::new("arn:aws:iam::123456789012:role/x").account(),
            Some("123456789012")
        );
        assert_eq!(
            AssumeRole::new("arn:aws-cn:iam::210987654321:role/a/b").account(),
            Some("210987654321")
        );
        assert_eq!(AssumeRole::new("garbage").account(), None);
    }
}
