use ccm_aws_api::AwsError;

use crate::protocol::{API_VERSION, REQUEST_KIND};

/// Why no credentials could be provided. Every variant is fatal for the one invocation (the kubelet retries the
/// pull, and with it the provider, on its own schedule); the message says what to fix.
///
/// `Display` never repeats the cause, which `source()` returns: print the chain to show both.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// stdin is not a JSON `CredentialProviderRequest`.
    #[error("the request is not a valid CredentialProviderRequest JSON object")]
    MalformedRequest {
        /// The JSON error, with line and column.
        #[source]
        source: serde_json::Error,
    },
    /// `apiVersion` is missing or another version than the one this provider speaks.
    #[error(
        "apiVersion {} is not supported: only {API_VERSION:?} is (set `apiVersion: {API_VERSION}` for this \
         provider in the kubelet's CredentialProviderConfig)",
        shown(found.as_deref())
    )]
    UnsupportedApiVersion {
        /// The `apiVersion` the request carried, if any.
        found: Option<String>,
    },
    /// `kind` is missing or not `CredentialProviderRequest`.
    #[error("kind {} is not supported: expected {REQUEST_KIND:?}", shown(found.as_deref()))]
    UnexpectedKind {
        /// The `kind` the request carried, if any.
        found: Option<String>,
    },
    /// The request's `image` is missing or empty.
    #[error("the request's image is empty: the kubelet must pass the image to pull in `image`")]
    EmptyImage,
    /// The image reference has no usable registry host.
    #[error("image {image:?} cannot be parsed: {reason}")]
    InvalidImage {
        /// The image as requested.
        image: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// The image is not served by an ECR registry, so no ECR credentials are offered for it.
    #[error(
        "image {image:?} is not in an ECR registry (host {host:?}); accepted hosts are \
         <account>.dkr.ecr[-fips].<region>.amazonaws.com[.cn] (and the ISO and sovereign partitions' domains), \
         dual-stack <account>.dkr-ecr[-fips].<region>.on.aws and public.ecr.aws: limit this provider's \
         matchImages to ECR registries"
    )]
    NotEcr {
        /// The image as requested.
        image: String,
        /// Its registry host.
        host: String,
    },
    /// The role to assume with the service account token is not an IAM role ARN.
    #[error(
        "role {arn:?} from {origin} is not an IAM role ARN (arn:<partition>:iam::<12-digit account>:role/<name>)"
    )]
    InvalidRoleArn {
        /// The value found.
        arn: String,
        /// Where it came from: the service account annotation or the environment variable.
        origin: &'static str,
    },
    /// STS refused `AssumeRoleWithWebIdentity` (trust policy, token audience or expiry, ...).
    #[error(
        "failed to assume role {role_arn} with the service account token in {region}: check the role's trust \
         policy (OIDC provider, audience, subject) and the token audience in the kubelet's tokenAttributes"
    )]
    AssumeRole {
        /// The role.
        role_arn: String,
        /// The STS region.
        region: String,
        /// STS's error.
        #[source]
        source: Box<AwsError>,
    },
    /// ECR refused `GetAuthorizationToken` or could not be reached.
    #[error("failed to get an authorization token for {registry} from {region}")]
    Token {
        /// The registry host.
        registry: String,
        /// The region asked.
        region: String,
        /// ECR's error.
        #[source]
        source: Box<AwsError>,
    },
    /// ECR answered with a token that is not base64 of `user:password`.
    #[error("the authorization token for {registry} is unusable: {reason}")]
    InvalidToken {
        /// The registry host.
        registry: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// The response could not be encoded (not expected to happen).
    #[error("the response could not be encoded as JSON")]
    Encode {
        /// The JSON error.
        #[source]
        source: serde_json::Error,
    },
}

/// Results of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

fn shown(found: Option<&str>) -> String {
    match found {
        Some(found) => format!("{found:?}"),
        None => "(missing)".to_owned(),
    }
}
