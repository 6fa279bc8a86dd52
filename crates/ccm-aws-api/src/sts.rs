//! The STS port: role assumption and caller identity.
//!
//! Used by the ECR credential provider's service-account-token mode (AssumeRoleWithWebIdentity with the pod's
//! projected token, then ECR with the returned credentials) and to learn the account the process runs as.

use std::{fmt, future::Future, time::SystemTime};

use crate::Result;

/// Short-lived credentials returned by STS (`AssumeRoleWithWebIdentity`, `AssumeRole`).
///
/// `Debug` redacts the secret key and session token so that the value can be logged safely.
#[derive(Clone, PartialEq, Eq)]
pub struct TemporaryCredentials {
    /// The access key ID (`ASIA...`).
    pub access_key_id: String,
    /// The secret access key.
    pub secret_access_key: String,
    /// The session token that must accompany every request signed with these credentials.
    pub session_token: String,
    /// When the credentials stop working.
    pub expiration: SystemTime,
}

/// The inputs of `AssumeRoleWithWebIdentity`.
///
/// `Debug` redacts the web identity token (a bearer token for the service account).
#[derive(Clone, PartialEq, Eq)]
pub struct WebIdentityRole {
    /// The role to assume (`arn:aws:iam::123456789012:role/ecr-pull`).
    pub role_arn: String,
    /// The session name recorded in CloudTrail (`ecr-credential-provider`); 2 to 64 characters of
    /// `[\w+=,.@-]`.
    pub session_name: String,
    /// The OIDC token issued for the service account (the kubelet's `serviceAccountToken`).
    pub web_identity_token: String,
}

/// Who the caller is, as `GetCallerIdentity` reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallerIdentity {
    /// The 12-digit account ID.
    pub account: String,
    /// The ARN of the calling principal (a user, or an assumed-role session).
    pub arn: String,
    /// The unique ID of the calling principal.
    pub user_id: String,
}

/// The STS operations the workspace needs.
///
/// Errors: a rejected web identity token or role trust policy maps to [`ErrorKind::AccessDenied`]
/// (`InvalidIdentityToken`, `AccessDenied`), an expired token to `ExpiredTokenException` with the same kind, a
/// malformed ARN or session name to [`ErrorKind::Invalid`].
///
/// [`ErrorKind::AccessDenied`]: crate::ErrorKind::AccessDenied
/// [`ErrorKind::Invalid`]: crate::ErrorKind::Invalid
#[cfg_attr(feature = "mock", mockall::automock)]
pub trait Sts {
    /// `AssumeRoleWithWebIdentity` against the STS endpoint of `region` (regional endpoints keep the call inside
    /// the registry's partition: a China or GovCloud role cannot be assumed through `us-east-1`). The call is
    /// not signed: no ambient credentials are needed or used.
    fn assume_role_with_web_identity(
        &self,
        region: &str,
        role: &WebIdentityRole,
    ) -> impl Future<Output = Result<TemporaryCredentials>> + Send;

    /// `GetCallerIdentity` with the ambient credentials, in the adapter's configured region.
    fn caller_identity(&self) -> impl Future<Output = Result<CallerIdentity>> + Send;
}

// === impl TemporaryCredentials ===

impl fmt::Debug for TemporaryCredentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TemporaryCredentials")
            .field("access_key_id", &self.access_key_id)
            .field("secret_access_key", &"<redacted>")
            .field("session_token", &"<redacted>")
            .field("expiration", &self.expiration)
            .finish()
    }
}

// === impl WebIdentityRole ===

impl fmt::Debug for WebIdentityRole {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WebIdentityRole")
            .field("role_arn", &self.role_arn)
            .field("session_name", &self.session_name)
            .field("web_identity_token", &"<redacted>")
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_redacts_secrets() {
        let credentials = TemporaryCredentials {
            access_key_id: "ASIAEXAMPLE".into(),
            secret_access_key: "top-secret".into(),
            session_token: "session-secret".into(),
            expiration: SystemTime::UNIX_EPOCH,
        };
        let shown = format!("{credentials:?}");
        assert!(shown.contains("ASIAEXAMPLE"));
        assert!(
            !shown.contains("top-secret") && !shown.contains("session-secret"),
            "{shown}"
        );

        let role = WebIdentityRole {
            role_arn: "arn:aws:iam::123456789012:role/r".into(),
            session_name: "s".into(),
            web_identity_token: "eyJhbGciOi.secret".into(),
        };
        let shown = format!("{role:?}");
        assert!(shown.contains("role/r"));
        assert!(!shown.contains("eyJhbGciOi"), "{shown}");
    }
}
