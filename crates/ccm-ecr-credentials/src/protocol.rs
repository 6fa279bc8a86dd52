//! The kubelet's exec credential provider protocol, `credentialprovider.kubelet.k8s.io/v1`: one JSON request on
//! stdin, one JSON response on stdout.

use std::{collections::BTreeMap, fmt, time::Duration};

use serde::{Deserialize, Serialize, Serializer};

use crate::{Error, Result};

/// The only protocol version spoken (`v1alpha1` and `v1beta1` are gone from current kubelets).
pub const API_VERSION: &str = "credentialprovider.kubelet.k8s.io/v1";

/// The request's `kind`.
pub const REQUEST_KIND: &str = "CredentialProviderRequest";

/// The response's `kind`.
pub const RESPONSE_KIND: &str = "CredentialProviderResponse";

/// The service account annotation naming the role to assume in service-account-token mode.
pub const ROLE_ARN_ANNOTATION: &str = "eks.amazonaws.com/ecr-role-arn";

/// What the kubelet asks for.
///
/// `Debug` redacts the service account token.
#[derive(Clone, PartialEq, Eq, Default)]
pub struct CredentialProviderRequest {
    /// The image to pull (`123456789012.dkr.ecr.eu-west-1.amazonaws.com/app:1`).
    pub image: String,
    /// The pod's service account token, when the kubelet's provider config has `tokenAttributes` (kubelet
    /// feature `KubeletServiceAccountTokenForCredentialProviders`).
    pub service_account_token: Option<String>,
    /// The service account's annotations that the provider config asked for
    /// (`requiredServiceAccountAnnotationKeys`, `optionalServiceAccountAnnotationKeys`).
    pub service_account_annotations: BTreeMap<String, String>,
}

/// What the provider answers: credentials per registry host, and how long the kubelet may cache them.
///
/// Serializes to the v1 JSON (fields in the kubelet's order); `Debug` redacts passwords.
#[derive(Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CredentialProviderResponse {
    api_version: &'static str,
    kind: &'static str,
    /// How the kubelet keys its cache: always per registry here (a token is valid for every image of the
    /// registry).
    pub cache_key_type: CacheKeyType,
    /// How long the kubelet may cache these credentials; zero means not at all. Always written, so that the
    /// kubelet's `defaultCacheDuration` never applies to a token that is about to expire.
    #[serde(serialize_with = "go_duration")]
    pub cache_duration: Duration,
    /// Credentials per registry host.
    pub auth: BTreeMap<String, AuthConfig>,
}

/// How the kubelet keys cached credentials.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub enum CacheKeyType {
    /// Per image.
    Image,
    /// Per registry host.
    Registry,
    /// For every image.
    Global,
}

/// A user name and password for one registry.
///
/// `Debug` redacts the password.
#[derive(Clone, PartialEq, Eq, Serialize)]
pub struct AuthConfig {
    /// The user (`AWS` for ECR).
    pub username: String,
    /// The password (the registry token).
    pub password: String,
}

/// The request as it appears on the wire; validated into [`CredentialProviderRequest`]. Unknown fields are
/// ignored so that newer kubelets keep working.
#[derive(Deserialize)]
#[serde(
    rename_all = "camelCase",
    expecting = "a JSON object (a CredentialProviderRequest)"
)]
struct WireRequest {
    api_version: Option<String>,
    kind: Option<String>,
    image: Option<String>,
    service_account_token: Option<String>,
    service_account_annotations: Option<BTreeMap<String, String>>,
}

// === impl CredentialProviderRequest ===

impl CredentialProviderRequest {
    /// A request for `image`, without a service account token.
    pub fn new(image: impl Into<String>) -> Self {
        Self {
            image: image.into(),
            ..Self::default()
        }
    }

    /// Parses and validates the JSON the kubelet writes to the provider's stdin: `apiVersion` must be
    /// [`API_VERSION`], `kind` must be [`REQUEST_KIND`], `image` must not be empty.
    pub fn from_json(input: &[u8]) -> Result<Self> {
        // serde would also read a struct from a JSON array of its fields in order: only objects are requests.
        if input.trim_ascii_start().starts_with(b"[") {
            let source = <serde_json::Error as serde::de::Error>::invalid_type(
                serde::de::Unexpected::Seq,
                &"a JSON object (a CredentialProviderRequest)",
            );
            return Err(Error::MalformedRequest { source });
        }
        let wire: WireRequest =
            serde_json::from_slice(input).map_err(|source| Error::MalformedRequest { source })?;
        if wire.api_version.as_deref() != Some(API_VERSION) {
            return Err(Error::UnsupportedApiVersion {
                found: wire.api_version,
            });
        }
        if wire.kind.as_deref() != Some(REQUEST_KIND) {
            return Err(Error::UnexpectedKind { found: wire.kind });
        }
        let image = wire.image.unwrap_or_default();
        if image.is_empty() {
            return Err(Error::EmptyImage);
        }
        Ok(Self {
            image,
            service_account_token: wire.service_account_token.filter(|token| !token.is_empty()),
            service_account_annotations: wire.service_account_annotations.unwrap_or_default(),
        })
    }

    /// The role named by the [`ROLE_ARN_ANNOTATION`] annotation, if present and not blank.
    pub fn role_arn_annotation(&self) -> Option<&str> {
        self.service_account_annotations
            .get(ROLE_ARN_ANNOTATION)
            .map(|arn| arn.trim())
            .filter(|arn| !arn.is_empty())
    }
}

impl fmt::Debug for CredentialProviderRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CredentialProviderRequest")
            .field("image", &self.image)
            .field(
                "service_account_token",
                &self.service_account_token.as_ref().map(|_| "<redacted>"),
            )
            .field("service_account_annotations", &self.service_account_annotations)
            .finish()
    }
}

// === impl CredentialProviderResponse ===

impl CredentialProviderResponse {
    /// A response with one registry's credentials, cached per registry for `cache_duration`.
    pub fn for_registry(host: impl Into<String>, auth: AuthConfig, cache_duration: Duration) -> Self {
        Self {
            api_version: API_VERSION,
            kind: RESPONSE_KIND,
            cache_key_type: CacheKeyType::Registry,
            cache_duration,
            auth: BTreeMap::from([(host.into(), auth)]),
        }
    }

    /// The JSON the kubelet reads, with a trailing newline.
    pub fn to_json(&self) -> Result<Vec<u8>> {
        let mut out = serde_json::to_vec(self).map_err(|source| Error::Encode { source })?;
        out.push(b'\n');
        Ok(out)
    }
}

impl fmt::Debug for CredentialProviderResponse {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CredentialProviderResponse")
            .field("cache_key_type", &self.cache_key_type)
            .field("cache_duration", &self.cache_duration)
            .field("auth", &self.auth)
            .finish()
    }
}

// === impl AuthConfig ===

impl fmt::Debug for AuthConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AuthConfig")
            .field("username", &self.username)
            .field("password", &"<redacted>")
            .finish()
    }
}

/// Writes a duration as Go's `time.Duration.String()` does for whole seconds (`6h0m0s`, `10m0s`, `59s`, `0s`),
/// the form `metav1.Duration` round-trips; sub-second parts are dropped.
fn go_duration<S: Serializer>(duration: &Duration, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.collect_str(&format_go_duration(*duration))
}

pub(crate) fn format_go_duration(duration: Duration) -> String {
    let secs = duration.as_secs();
    let (hours, minutes, seconds) = (secs / 3600, secs / 60 % 60, secs % 60);
    if hours > 0 {
        format!("{hours}h{minutes}m{seconds}s")
    } else if minutes > 0 {
        format!("{minutes}m{seconds}s")
    } else {
        format!("{seconds}s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_are_written_like_go() {
        for (secs, shown) in [
            (0, "0s"),
            (59, "59s"),
            (60, "1m0s"),
            (600, "10m0s"),
            (3599, "59m59s"),
            (21600, "6h0m0s"),
            (90061, "25h1m1s"),
        ] {
            assert_eq!(format_go_duration(Duration::from_secs(secs)), shown);
        }
        assert_eq!(format_go_duration(Duration::from_millis(1999)), "1s");
    }

    #[test]
    fn debug_redacts_token_and_password() {
        let request = CredentialProviderRequest {
            service_account_token: Some("eyJsecret".into()),
            ..CredentialProviderRequest::new("public.ecr.aws/a/b")
        };
        assert!(!format!("{request:?}").contains("eyJsecret"));
        let response = CredentialProviderResponse::for_registry(
            "public.ecr.aws",
            AuthConfig {
                username: "AWS".into(),
                password: "hunter2".into(),
            },
            Duration::ZERO,
        );
        assert!(!format!("{response:?}").contains("hunter2"));
    }

    #[test]
    fn annotation_role_is_trimmed_and_blank_means_none() {
        let mut request = CredentialProviderRequest::new("public.ecr.aws/a/b");
        assert_eq!(request.role_arn_annotation(), None);
        request
            .service_account_annotations
            .insert(ROLE_ARN_ANNOTATION.into(), "  ".into());
        assert_eq!(request.role_arn_annotation(), None);
        request
            .service_account_annotations
            .insert(ROLE_ARN_ANNOTATION.into(), " arn:aws:iam::1:role/r ".into());
        assert_eq!(request.role_arn_annotation(), Some("arn:aws:iam::1:role/r"));
    }
}
