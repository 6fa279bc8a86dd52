//! The kubelet image credential provider for ECR: the `credentialprovider.kubelet.k8s.io/v1` request and
//! response types, image to registry and region for every partition, and authorization tokens turned into
//! credentials with a safe cache duration.
//!
//! ```text
//! stdin JSON ─ CredentialProviderRequest::from_json ─ Registry::from_image ─ [Sts::assume_role_with_web_identity]
//!            ─ Ecr::authorization_token | public_authorization_token ─ CredentialProviderResponse::to_json ─ stdout
//! ```
//!
//! [`CredentialProvider::respond`] does the whole exchange; a binary only reads stdin, builds the ports and
//! writes stdout:
//!
//! ```
//! use std::time::{Duration, SystemTime};
//!
//! use ccm_aws_api::{ecr::{AuthorizationToken, MockEcr}, sts::MockSts};
//! use ccm_ecr_credentials::{Config, CredentialProvider, CredentialProviderRequest, FixedClock};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
//! // The ECR port: a mock (feature `mock` of ccm-aws-api) here, the ccm-aws-sdk adapter in the binary.
//! let mut ecr = MockEcr::new();
//! ecr.expect_authorization_token().returning(move |region, _credentials| {
//!     assert_eq!(region, "eu-west-1"); // the registry's region, from the image
//!     let token = AuthorizationToken {
//!         token: "QVdTOnNlY3JldA==".to_owned(), // base64 of "AWS:secret"
//!         expires_at: Some(now + Duration::from_secs(12 * 3600)),
//!         proxy_endpoint: None,
//!     };
//!     Box::pin(async move { Ok(token) })
//! });
//! // No service account token in the request: STS is not called.
//! let provider = CredentialProvider::new(ecr, MockSts::new(), FixedClock(now), Config::default());
//!
//! let request = CredentialProviderRequest::from_json(
//!     br#"{"apiVersion":"credentialprovider.kubelet.k8s.io/v1","kind":"CredentialProviderRequest",
//!          "image":"123456789012.dkr.ecr.eu-west-1.amazonaws.com/app:1"}"#,
//! )
//! .unwrap();
//! let response = provider.provide(&request).await.unwrap();
//! let auth = &response.auth["123456789012.dkr.ecr.eu-west-1.amazonaws.com"];
//! assert_eq!((auth.username.as_str(), auth.password.as_str()), ("AWS", "secret"));
//! // The kubelet caches it for half the token's remaining lifetime: 6 h of a fresh 12 h token.
//! assert_eq!(response.cache_duration, Duration::from_secs(6 * 3600));
//! # }
//! ```
//! Differences from the Go `ecr-credential-provider`, each deliberate:
//! - images outside ECR are refused instead of being sent a token for the default region's registry;
//! - the cache duration is always written (zero when the token is already expired or expires within
//!   [`EXPIRY_MARGIN`]), so the kubelet's `defaultCacheDuration` never keeps an expired token;
//! - in service-account-token mode the credentials' own expiry also bounds the cache duration, and a malformed
//!   role ARN is reported as such before STS is called.
//!
//! May depend on: `ccm-aws-api` (Ecr and Sts ports), `serde`, `serde_json`, `base64`, `tracing`. Never on
//! `aws-sdk-*` or other domain crates.

#![cfg_attr(
    test,
    allow(
        clippy::too_many_lines,
        reason = "the function limit is for code, not for tests"
    )
)]

mod error;
mod protocol;
mod provider;
mod registry;

pub use error::{Error, Result};
pub use protocol::{
    API_VERSION, AuthConfig, CacheKeyType, CredentialProviderRequest, CredentialProviderResponse,
    REQUEST_KIND, RESPONSE_KIND, ROLE_ARN_ANNOTATION,
};
pub use provider::{
    Clock, Config, CredentialProvider, EXPIRY_MARGIN, FixedClock, ROLE_ARN_ENV, SESSION_NAME, SystemClock,
    cache_duration,
};
pub use registry::{ECR_PUBLIC_HOST, Partition, PrivateRegistry, Registry, RegistryKind};
