//! From a request to a response: registry, optional role assumption, token, cache duration.

use std::time::{Duration, SystemTime};

use base64::Engine as _;
use ccm_aws_api::{
    ecr::{AuthorizationToken, Ecr},
    sts::{Sts, TemporaryCredentials, WebIdentityRole},
};
use tracing::{debug, warn};

use crate::{
    AuthConfig, CredentialProviderRequest, CredentialProviderResponse, Error, Registry, RegistryKind, Result,
    protocol::ROLE_ARN_ANNOTATION,
};

/// The environment variable naming the role to assume in service-account-token mode when the service account
/// has no [`ROLE_ARN_ANNOTATION`] annotation. Binaries read it; this library only takes it through [`Config`].
pub const ROLE_ARN_ENV: &str = "AWS_ECR_ROLE_ARN";

/// The STS session name, as CloudTrail will show it.
pub const SESSION_NAME: &str = "ecr-credential-provider";

/// How long before a token expires the kubelet must stop using its cached copy: a pull that starts just before
/// expiry must still be able to finish, and node clocks drift.
pub const EXPIRY_MARGIN: Duration = Duration::from_secs(10 * 60);

/// A source of wall-clock time, injected so that cache durations are testable.
pub trait Clock: Send + Sync {
    /// The current time.
    fn now(&self) -> SystemTime;
}

/// The system's wall clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

/// A clock stopped at one instant, for tests and golden files.
#[derive(Debug, Clone, Copy)]
pub struct FixedClock(pub SystemTime);

/// Settings of the provider that do not come with the request.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct Config {
    /// The role to assume in service-account-token mode when the service account has no
    /// [`ROLE_ARN_ANNOTATION`] annotation (binaries take it from [`ROLE_ARN_ENV`]).
    pub default_role_arn: Option<String>,
}

/// The credential provider: answers one [`CredentialProviderRequest`] with ECR credentials.
///
/// Per request it makes exactly one ECR `GetAuthorizationToken` call, preceded by one STS
/// `AssumeRoleWithWebIdentity` call in service-account-token mode; it caches nothing itself (the kubelet caches
/// the response for [`CredentialProviderResponse::cache_duration`]).
#[derive(Debug)]
pub struct CredentialProvider<E, S, C = SystemClock> {
    ecr: E,
    sts: S,
    clock: C,
    config: Config,
}

// === impl SystemClock ===

impl Clock for SystemClock {
    #[allow(clippy::disallowed_methods)] // The one place where real time enters; everything else takes a Clock.
    fn now(&self) -> SystemTime {
        SystemTime::now()
    }
}

// === impl FixedClock ===

impl Clock for FixedClock {
    fn now(&self) -> SystemTime {
        self.0
    }
}

// === impl Config ===

impl Config {
    /// Sets the role assumed in service-account-token mode when the service account names none; empty or blank
    /// values count as unset.
    #[must_use]
    pub fn with_default_role_arn(mut self, arn: Option<String>) -> Self {
        self.default_role_arn = arn.map(|arn| arn.trim().to_owned()).filter(|arn| !arn.is_empty());
        self
    }
}

// === impl CredentialProvider ===

impl<E, S, C> CredentialProvider<E, S, C>
where
    E: Ecr + Sync,
    S: Sts + Sync,
    C: Clock,
{
    /// A provider calling ECR and STS through the given ports.
    pub fn new(ecr: E, sts: S, clock: C, config: Config) -> Self {
        Self {
            ecr,
            sts,
            clock,
            config,
        }
    }

    /// The whole exchange: parses the kubelet's JSON request, provides, and returns the JSON response with a
    /// trailing newline.
    pub async fn respond(&self, input: &[u8]) -> Result<Vec<u8>> {
        let request = CredentialProviderRequest::from_json(input)?;
        self.provide(&request).await?.to_json()
    }

    /// Credentials for the registry of `request.image`.
    pub async fn provide(&self, request: &CredentialProviderRequest) -> Result<CredentialProviderResponse> {
        let registry = Registry::from_image(&request.image)?;
        let region = registry.region();
        let credentials = self.assume_role(request, region).await?;
        let session_expiry = credentials.as_ref().map(|credentials| credentials.expiration);
        debug!(%registry, region, service_account_token = credentials.is_some(), "requesting an ECR token");
        let token = match registry.kind() {
            RegistryKind::Private(_) => self.ecr.authorization_token(region, credentials).await,
            RegistryKind::Public => self.ecr.public_authorization_token(credentials).await,
        }
        .map_err(|source| Error::Token {
            registry: registry.host().to_owned(),
            region: region.to_owned(),
            source: Box::new(source),
        })?;
        let auth = decode_token(&token, &registry)?;
        // A token obtained with temporary credentials is no use once they expire, whatever ECR says.
        let expires_at = match (token.expires_at, session_expiry) {
            (Some(token), Some(session)) => Some(token.min(session)),
            (token, session) => token.or(session),
        };
        let cache_duration = cache_duration(self.clock.now(), expires_at);
        Ok(CredentialProviderResponse::for_registry(
            registry.host(),
            auth,
            cache_duration,
        ))
    }

    /// Service-account-token mode: with a token in the request and a role from the service account's
    /// annotation (or the configured default), `AssumeRoleWithWebIdentity` in the registry's region. Without a
    /// role, the ambient credentials are used, as the Go provider does.
    async fn assume_role(
        &self,
        request: &CredentialProviderRequest,
        region: &str,
    ) -> Result<Option<TemporaryCredentials>> {
        let Some(token) = request.service_account_token.as_deref() else {
            return Ok(None);
        };
        let (role_arn, origin) = match (
            request.role_arn_annotation(),
            self.config.default_role_arn.as_deref(),
        ) {
            (Some(arn), _) => (arn, ROLE_ARN_ANNOTATION_ORIGIN),
            (None, Some(arn)) => (arn, ROLE_ARN_ENV_ORIGIN),
            (None, None) => {
                warn!(
                    image = %request.image,
                    "a service account token was passed but neither the service account annotation \
                     {ROLE_ARN_ANNOTATION} nor {ROLE_ARN_ENV} names a role: using the node's credentials"
                );
                return Ok(None);
            }
        };
        if !is_role_arn(role_arn) {
            return Err(Error::InvalidRoleArn {
                arn: role_arn.to_owned(),
                origin,
            });
        }
        let role = WebIdentityRole {
            role_arn: role_arn.to_owned(),
            session_name: SESSION_NAME.to_owned(),
            web_identity_token: token.to_owned(),
        };
        debug!(role_arn, region, "assuming the service account's role");
        let credentials = self
            .sts
            .assume_role_with_web_identity(region, &role)
            .await
            .map_err(|source| Error::AssumeRole {
                role_arn: role_arn.to_owned(),
                region: region.to_owned(),
                source: Box::new(source),
            })?;
        Ok(Some(credentials))
    }
}

const ROLE_ARN_ANNOTATION_ORIGIN: &str = "the service account annotation eks.amazonaws.com/ecr-role-arn";
const ROLE_ARN_ENV_ORIGIN: &str = "the environment variable AWS_ECR_ROLE_ARN";

/// How long the kubelet may cache a token that expires at `expires_at`: half its remaining lifetime (6 h for a
/// fresh 12 h token), never closer to expiry than [`EXPIRY_MARGIN`], whole seconds. Zero (do not cache) when
/// the expiry is unknown, past (moto's tokens, a skewed clock) or too close.
pub fn cache_duration(now: SystemTime, expires_at: Option<SystemTime>) -> Duration {
    let Some(remaining) = expires_at.and_then(|expires_at| expires_at.duration_since(now).ok()) else {
        return Duration::ZERO;
    };
    let half = remaining / 2;
    let before_margin = remaining.saturating_sub(EXPIRY_MARGIN);
    Duration::from_secs(half.min(before_margin).as_secs())
}

/// `arn:<partition>:iam::<12 digits>:role/<path and name>`.
fn is_role_arn(arn: &str) -> bool {
    let mut parts = arn.splitn(6, ':');
    let (Some("arn"), Some(partition), Some("iam"), Some(""), Some(account), Some(resource)) = (
        parts.next(),
        parts.next(),
        parts.next(),
        parts.next(),
        parts.next(),
        parts.next(),
    ) else {
        return false;
    };
    !partition.is_empty()
        && account.len() == 12
        && account.bytes().all(|b| b.is_ascii_digit())
        && resource
            .strip_prefix("role/")
            .is_some_and(|name| !name.is_empty())
}

/// base64(`user:password`) into its parts.
fn decode_token(token: &AuthorizationToken, registry: &Registry) -> Result<AuthConfig> {
    let invalid = |reason| Error::InvalidToken {
        registry: registry.host().to_owned(),
        reason,
    };
    if token.token.is_empty() {
        return Err(invalid("ECR returned an empty token"));
    }
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(token.token.trim())
        .map_err(|_| invalid("the token is not valid base64"))?;
    let decoded = String::from_utf8(decoded).map_err(|_| invalid("the decoded token is not UTF-8"))?;
    let Some((username, password)) = decoded.split_once(':') else {
        return Err(invalid("the decoded token is not `user:password`"));
    };
    if username.is_empty() || password.is_empty() {
        return Err(invalid("the decoded token has an empty user or password"));
    }
    Ok(AuthConfig {
        username: username.to_owned(),
        password: password.to_owned(),
    })
}

#[cfg(test)]
mod tests;
