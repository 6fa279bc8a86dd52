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
//! writes stdout. Differences from the Go `ecr-credential-provider`, each deliberate:
//! - images outside ECR are refused instead of being sent a token for the default region's registry;
//! - the cache duration is always written (zero when the token is already expired or expires within
//!   [`EXPIRY_MARGIN`]), so the kubelet's `defaultCacheDuration` never keeps an expired token;
//! - in service-account-token mode the credentials' own expiry also bounds the cache duration, and a malformed
//!   role ARN is reported as such before STS is called.
//!
//! May depend on: `ccm-aws-api` (Ecr and Sts ports), `serde`, `serde_json`, `base64`, `tracing`. Never on
//! `aws-sdk-*` or other domain crates.

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
