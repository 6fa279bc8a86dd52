//! The one place where AWS error codes become [`ErrorKind`]s.

use aws_smithy_runtime_api::client::result::SdkError;
use aws_smithy_types::error::metadata::ProvideErrorMetadata;
use ccm_aws_api::{AwsError, ErrorKind};

/// Throttling codes of every service (the standard retryer's list, aws-sdk-go-v2 `retry/standard.go`).
const THROTTLE_CODES: &[&str] = &[
    "Throttling",
    "ThrottlingException",
    "ThrottledException",
    "RequestThrottledException",
    "TooManyRequestsException",
    "ProvisionedThroughputExceededException",
    "TransactionInProgressException",
    "RequestLimitExceeded",
    "BandwidthLimitExceeded",
    "LimitExceededException",
    "RequestThrottled",
    "SlowDown",
    "PriorRequestNotComplete",
    "EC2ThrottledException",
];

/// Codes that mean "the caller may not": credentials, policies, opt-in.
const ACCESS_DENIED_CODES: &[&str] = &[
    "UnauthorizedOperation",
    "AccessDenied",
    "AccessDeniedException",
    "AuthFailure",
    "InvalidClientTokenId",
    "ExpiredToken",
    "ExpiredTokenException",
    "RequestExpired",
    "SignatureDoesNotMatch",
    "OptInRequired",
    "InvalidIdentityToken",
    "IDPRejectedClaim",
    "UnrecognizedClientException",
    "Blocked",
    "MissingAuthenticationToken",
];

/// Codes that mean the state conflicts with the request for now: look again, then decide (never "exists").
const CONFLICT_CODES: &[&str] = &[
    "DependencyViolation",
    "ResourceInUse",
    "IncorrectState",
    "IncorrectInstanceState",
    "ConcurrentModification",
    "PriorityInUse",
];

/// Codes that refuse the request as configured (a listener on a target group another load balancer uses,
/// deletion protection, ...): repeating it unchanged cannot help; the user hears AWS's words.
const REFUSED_CODES: &[&str] = &["InvalidConfigurationRequest", "OperationNotPermitted"];

/// Server-side faults worth retrying.
const TRANSIENT_CODES: &[&str] = &[
    "InternalError",
    "InternalFailure",
    "InternalServerError",
    "InternalService",
    "ServiceUnavailable",
    "ServiceUnavailableException",
    "Unavailable",
    "RequestTimeout",
    "RequestTimeoutException",
];

/// Classifies an AWS error code, falling back to the HTTP status when there is no code.
pub fn classify(code: Option<&str>, http_status: Option<u16>) -> ErrorKind {
    let Some(code) = code.filter(|c| !c.is_empty()) else {
        return classify_status(http_status);
    };
    // Order matters: `RequestLimitExceeded` must be a throttle before `*LimitExceeded` is a quota, and
    // `InvalidInstanceID.NotFound` / `InvalidGroup.Duplicate` must not fall into the `Invalid*` bucket.
    if THROTTLE_CODES.contains(&code) {
        ErrorKind::Throttled
    } else if code == "DuplicateTagKeys" {
        // A request naming one tag key twice: nothing exists, the request is wrong.
        ErrorKind::Invalid
    } else if code == "CertificateNotFound" {
        // An ARN the user wrote in an annotation: their input is wrong, nothing is "gone".
        ErrorKind::Invalid
    } else if code.ends_with("NotFound")
        || code.ends_with("NotFoundException")
        || code == "AccessPointNotFound"
    {
        ErrorKind::NotFound
    } else if code.ends_with(".Duplicate")
        || code.starts_with("Duplicate")
        || code.ends_with("AlreadyExists")
        || code.ends_with("AlreadyExistsException")
    {
        ErrorKind::AlreadyExists
    } else if CONFLICT_CODES.contains(&code) {
        ErrorKind::Conflict
    } else if REFUSED_CODES.contains(&code) {
        ErrorKind::Invalid
    } else if ACCESS_DENIED_CODES.contains(&code) {
        ErrorKind::AccessDenied
    } else if code.starts_with("TooMany")
        || code.ends_with("LimitExceeded")
        || code.ends_with("QuotaExceeded")
    {
        ErrorKind::LimitExceeded
    } else if TRANSIENT_CODES.contains(&code) {
        ErrorKind::Transient
    } else if code.starts_with("Invalid")
        || code.starts_with("Validation")
        || code.starts_with("Unsupported")
        || code.starts_with("Missing")
        || code.ends_with(".Malformed")
        || code == "ValidationError"
    {
        ErrorKind::Invalid
    } else {
        classify_status(http_status)
    }
}

fn classify_status(http_status: Option<u16>) -> ErrorKind {
    match http_status {
        Some(404) => ErrorKind::NotFound,
        Some(429) => ErrorKind::Throttled,
        Some(401 | 403) => ErrorKind::AccessDenied,
        Some(409) => ErrorKind::Conflict,
        Some(400) => ErrorKind::Invalid,
        Some(s) if s >= 500 => ErrorKind::Transient,
        _ => ErrorKind::Permanent,
    }
}

/// Turns an SDK error into an [`AwsError`], keeping code, message and cause.
pub fn from_sdk<E, R>(service: &'static str, operation: &'static str, err: SdkError<E, R>) -> AwsError
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
    R: std::fmt::Debug + Send + Sync + 'static + HttpStatus,
{
    match err {
        SdkError::ServiceError(ctx) => {
            let status = ctx.raw().status_code();
            let err = ctx.into_err();
            let code = err.code().map(str::to_owned);
            let message = err.message().map(str::to_owned);
            let mut out = AwsError::new(classify(code.as_deref(), status), service, operation);
            if let Some(code) = code {
                out = out.with_code(code);
            }
            if let Some(message) = message {
                out = out.with_message(message);
            }
            out.with_source(err)
        }
        SdkError::TimeoutError(_) => AwsError::new(ErrorKind::Transient, service, operation)
            .with_message("timed out")
            .with_source(err),
        SdkError::DispatchFailure(_) => AwsError::new(ErrorKind::Transient, service, operation)
            .with_message("request could not be sent")
            .with_source(err),
        SdkError::ResponseError(ref ctx) => {
            let kind = classify_status(ctx.raw().status_code()).max_transient();
            AwsError::new(kind, service, operation)
                .with_message("unreadable response")
                .with_source(err)
        }
        SdkError::ConstructionFailure(_) => AwsError::new(ErrorKind::Invalid, service, operation)
            .with_message("request could not be built")
            .with_source(err),
        _ => AwsError::new(ErrorKind::Permanent, service, operation).with_source(err),
    }
}

/// The HTTP status of a raw response, for errors without a code.
pub trait HttpStatus {
    /// The status code, if there was a response.
    fn status_code(&self) -> Option<u16>;
}

impl HttpStatus for aws_smithy_runtime_api::client::orchestrator::HttpResponse {
    fn status_code(&self) -> Option<u16> {
        Some(self.status().as_u16())
    }
}

trait MaxTransient {
    fn max_transient(self) -> ErrorKind;
}

impl MaxTransient for ErrorKind {
    /// An unreadable response says nothing about the request: only a clear status makes it worse than transient.
    fn max_transient(self) -> ErrorKind {
        match self {
            ErrorKind::Permanent | ErrorKind::Invalid => ErrorKind::Transient,
            other => other,
        }
    }
}

/// A copy of `err` for another waiter of a batched call (the cause is kept as text only).
pub fn duplicate(err: &AwsError) -> AwsError {
    let mut out = AwsError::new(err.kind(), err.service(), err.operation());
    if let Some(code) = err.code() {
        out = out.with_code(code);
    }
    if let Some(message) = err.message() {
        out = out.with_message(message);
    }
    if let Some(delay) = err.retry_after() {
        out = out.with_retry_after(delay);
    }
    if let Some(source) = std::error::Error::source(err) {
        out = out.with_source(source.to_string());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_map_to_kinds() {
        use ErrorKind::*;
        let table: &[(&str, ErrorKind)] = &[
            // Throttling, every service's spelling.
            ("RequestLimitExceeded", Throttled),
            ("Throttling", Throttled),
            ("ThrottlingException", Throttled),
            ("TooManyRequestsException", Throttled),
            ("EC2ThrottledException", Throttled),
            ("SlowDown", Throttled),
            ("LimitExceededException", Throttled),
            // Not found.
            ("InvalidInstanceID.NotFound", NotFound),
            ("InvalidGroup.NotFound", NotFound),
            ("InvalidRouteTableID.NotFound", NotFound),
            ("InvalidRoute.NotFound", NotFound),
            ("InvalidPermission.NotFound", NotFound),
            ("InvalidSubnetID.NotFound", NotFound),
            ("InvalidVpcID.NotFound", NotFound),
            ("InvalidAllocationID.NotFound", NotFound),
            ("InvalidNetworkInterfaceID.NotFound", NotFound),
            ("LoadBalancerNotFound", NotFound),
            ("AccessPointNotFound", NotFound),
            ("TargetGroupNotFound", NotFound),
            ("ListenerNotFound", NotFound),
            ("PolicyNotFound", NotFound),
            ("SubnetNotFound", NotFound),
            ("RepositoryNotFoundException", NotFound),
            // Already exists: by these codes only.
            ("InvalidPermission.Duplicate", AlreadyExists),
            ("InvalidGroup.Duplicate", AlreadyExists),
            ("DuplicateLoadBalancerName", AlreadyExists),
            ("DuplicateListener", AlreadyExists),
            ("DuplicateTargetGroupName", AlreadyExists),
            ("DuplicatePolicyName", AlreadyExists),
            ("DuplicateTagKeys", Invalid),
            ("RouteAlreadyExists", AlreadyExists),
            ("ResourceAlreadyExistsException", AlreadyExists),
            // Conflicts with the state of the moment.
            ("DependencyViolation", Conflict),
            ("ResourceInUse", Conflict),
            ("IncorrectState", Conflict),
            ("IncorrectInstanceState", Conflict),
            ("ConcurrentModification", Conflict),
            ("PriorityInUse", Conflict),
            // Refusals of the request as configured: never "exists", never retried unchanged.
            ("InvalidConfigurationRequest", Invalid),
            ("OperationNotPermitted", Invalid),
            // Access.
            ("UnauthorizedOperation", AccessDenied),
            ("AccessDenied", AccessDenied),
            ("AuthFailure", AccessDenied),
            ("ExpiredToken", AccessDenied),
            ("InvalidClientTokenId", AccessDenied),
            ("InvalidIdentityToken", AccessDenied),
            // Quotas.
            ("TooManyLoadBalancers", LimitExceeded),
            ("TooManyTargets", LimitExceeded),
            ("RulesPerSecurityGroupLimitExceeded", LimitExceeded),
            ("SecurityGroupLimitExceeded", LimitExceeded),
            ("RouteLimitExceeded", LimitExceeded),
            ("TagLimitExceeded", LimitExceeded),
            ("FilterLimitExceeded", LimitExceeded),
            // Bad input.
            ("InvalidParameterValue", Invalid),
            ("InvalidParameterCombination", Invalid),
            ("InvalidInstanceID.Malformed", Invalid),
            ("InvalidID", Invalid),
            ("ValidationError", Invalid),
            ("ValidationException", Invalid),
            ("MissingParameter", Invalid),
            ("UnsupportedOperation", Invalid),
            ("UnsupportedProtocol", Invalid),
            ("CertificateNotFound", Invalid),
            ("InvalidScheme", Invalid),
            // Server faults.
            ("InternalError", Transient),
            ("InternalFailure", Transient),
            ("ServiceUnavailable", Transient),
            ("Unavailable", Transient),
        ];
        for (code, kind) in table {
            assert_eq!(classify(Some(code), Some(400)), *kind, "{code}");
        }
    }

    #[test]
    fn unknown_codes_and_missing_codes_fall_back_to_the_status() {
        use ErrorKind::*;
        assert_eq!(classify(Some("SomethingNew"), Some(503)), Transient);
        assert_eq!(classify(Some("SomethingNew"), Some(400)), Invalid);
        assert_eq!(classify(Some("SomethingNew"), None), Permanent);
        assert_eq!(classify(None, Some(500)), Transient);
        assert_eq!(classify(None, Some(429)), Throttled);
        assert_eq!(classify(None, Some(403)), AccessDenied);
        assert_eq!(classify(None, Some(404)), NotFound);
        assert_eq!(classify(Some(""), Some(409)), Conflict);
        assert_eq!(classify(None, None), Permanent);
    }

    #[test]
    fn duplicates_keep_everything_but_the_cause_object() {
        let err = AwsError::new(ErrorKind::NotFound, "ec2", "DescribeInstances")
            .with_code("InvalidInstanceID.NotFound")
            .with_message("gone")
            .with_retry_after(std::time::Duration::from_secs(1))
            .with_source(std::io::Error::other("cause"));
        let copy = duplicate(&err);
        assert_eq!(copy.to_string(), err.to_string());
        assert_eq!(copy.retry_after(), err.retry_after());
        assert_eq!(
            std::error::Error::source(&copy)
                .map(ToString::to_string)
                .as_deref(),
            Some("cause")
        );
    }
}
