//! The ECR port: registry authorization tokens.
//!
//! One method per registry kind: private ECR registries live in a region (and its partition), ECR Public has a
//! single authorization endpoint in `us-east-1`. Both accept optional explicit credentials, so that the
//! credential provider's service-account-token mode can call ECR with the credentials STS returned for the pod's
//! role instead of the ambient (instance profile) ones.

use std::{fmt, future::Future, time::SystemTime};

use crate::{Result, sts::TemporaryCredentials};

/// The region that serves ECR Public's `GetAuthorizationToken` (the only one).
pub const ECR_PUBLIC_REGION: &str = "us-east-1";

/// An authorization token as `GetAuthorizationToken` returns it.
///
/// `Debug` redacts the token.
#[derive(Clone, PartialEq, Eq)]
pub struct AuthorizationToken {
    /// The token: base64 of `user:password` (the user is `AWS` for ECR and ECR Public).
    pub token: String,
    /// When the token expires (12 hours after issue on AWS); `None` when the service did not say.
    pub expires_at: Option<SystemTime>,
    /// The registry URL the token is for (`https://123456789012.dkr.ecr.eu-west-1.amazonaws.com`); `None` for
    /// ECR Public, whose answer carries no endpoint.
    pub proxy_endpoint: Option<String>,
}

/// The ECR operations the workspace needs.
///
/// The adapter asks for the token of the caller's default registry (no registry IDs), which is valid for every
/// private registry in that region the credentials are allowed to pull from; it fails with
/// [`ErrorKind::Permanent`] when ECR answers with no authorization data at all.
///
/// [`ErrorKind::Permanent`]: crate::ErrorKind::Permanent
#[cfg_attr(feature = "mock", mockall::automock)]
pub trait Ecr {
    /// ECR `GetAuthorizationToken` in `region` (the registry's region, which also selects the partition), signed
    /// with `credentials` when given and with the ambient credential chain otherwise. (Credentials are passed by
    /// value: mockall cannot mock `Option<&T>` arguments, and a clone per token request costs nothing.)
    fn authorization_token(
        &self,
        region: &str,
        credentials: Option<TemporaryCredentials>,
    ) -> impl Future<Output = Result<AuthorizationToken>> + Send;

    /// ECR Public `GetAuthorizationToken` in [`ECR_PUBLIC_REGION`], signed with `credentials` when given and with
    /// the ambient credential chain otherwise.
    fn public_authorization_token(
        &self,
        credentials: Option<TemporaryCredentials>,
    ) -> impl Future<Output = Result<AuthorizationToken>> + Send;
}

// === impl AuthorizationToken ===

impl fmt::Debug for AuthorizationToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AuthorizationToken")
            .field("token", &"<redacted>")
            .field("expires_at", &self.expires_at)
            .field("proxy_endpoint", &self.proxy_endpoint)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_redacts_the_token() {
        let token = AuthorizationToken {
            token: "QVdTOnNlY3JldA==".into(),
            expires_at: None,
            proxy_endpoint: Some("https://123456789012.dkr.ecr.us-east-1.amazonaws.com".into()),
        };
        let shown = format!("{token:?}");
        assert!(!shown.contains("QVdTOnNlY3JldA"), "{shown}");
        assert!(shown.contains("dkr.ecr.us-east-1"));
    }

    #[cfg(feature = "mock")]
    #[test]
    fn the_mock_matches_on_credentials() {
        use std::{
            pin::pin,
            task::{Context, Poll, Waker},
        };

        let mut ecr = MockEcr::new();
        ecr.expect_authorization_token()
            .withf(|region, credentials| {
                region == "eu-west-1" && credentials.as_ref().is_some_and(|c| c.access_key_id == "ASIA1")
            })
            .times(1)
            .returning(|_, _| {
                Box::pin(std::future::ready(Ok(AuthorizationToken {
                    token: "QVdTOnB3".into(),
                    expires_at: None,
                    proxy_endpoint: None,
                })))
            });
        let credentials = TemporaryCredentials {
            access_key_id: "ASIA1".into(),
            secret_access_key: "s".into(),
            session_token: "t".into(),
            expiration: SystemTime::UNIX_EPOCH,
        };
        let future = pin!(ecr.authorization_token("eu-west-1", Some(credentials)));
        let Poll::Ready(Ok(token)) = future.poll(&mut Context::from_waker(Waker::noop())) else {
            panic!("a ready mock future");
        };
        assert_eq!(token.token, "QVdTOnB3");
    }
}
