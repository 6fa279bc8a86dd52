use std::{fmt, time::Duration};

/// What an AWS failure means for the caller: the controller's next step follows from the kind alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The resource does not exist (`InvalidInstanceID.NotFound`, `LoadBalancerNotFound`, ...). Often an answer
    /// rather than a failure: an instance that is gone, a load balancer already deleted.
    NotFound,
    /// AWS or the client-side limiter refused the call for its rate (`RequestLimitExceeded`, `Throttling`,
    /// `ThrottlingException`, ...): retry later, slower.
    Throttled,
    /// The request itself is wrong (`InvalidParameterValue`, `ValidationError`, an unknown certificate ARN, ...):
    /// retrying the same request cannot help; report it to the user.
    Invalid,
    /// The resource to create exists already, recognised by AWS's codes only (`*.Duplicate`, `Duplicate*`,
    /// `*AlreadyExists`: `InvalidPermission.Duplicate`, `DuplicateLoadBalancerName`, `RouteAlreadyExists`, ...): a
    /// create repeated after a crash; look the resource up and compare. Never inferred from another refusal.
    AlreadyExists,
    /// The request conflicts with the current state and may succeed later (`DependencyViolation`, `ResourceInUse`,
    /// `IncorrectState`, `ConcurrentModification`, ...): observe again, then decide. Never "already exists".
    Conflict,
    /// The caller is not allowed (`UnauthorizedOperation`, `AccessDenied`, expired credentials): needs an operator.
    AccessDenied,
    /// A quota is exhausted (`TooManyLoadBalancers`, `RulesPerSecurityGroupLimitExceeded`, ...): needs an operator.
    LimitExceeded,
    /// A server-side or network fault (HTTP 5xx, timeout, dropped connection) that outlived the retries:
    /// retry after a delay.
    Transient,
    /// Anything else that retrying will not fix.
    Permanent,
}

/// A failed AWS call, with the service, operation and AWS error code kept for logs, Events and metrics.
///
/// `Display` shows the operation, code and message but never the cause, which `source()` returns (so error
/// chains print each layer once).
#[derive(Debug, thiserror::Error)]
pub struct AwsError {
    kind: ErrorKind,
    service: &'static str,
    operation: &'static str,
    code: Option<String>,
    message: Option<String>,
    retry_after: Option<Duration>,
    #[source]
    source: Option<Box<dyn std::error::Error + Send + Sync>>,
}

/// Results of port calls.
pub type Result<T, E = AwsError> = std::result::Result<T, E>;

// === impl ErrorKind ===

impl ErrorKind {
    /// Whether repeating the same call later can succeed without anything else changing.
    pub fn is_retryable(self) -> bool {
        matches!(self, Self::Throttled | Self::Transient | Self::Conflict)
    }

    /// A stable lower-case label for metrics and logs.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::NotFound => "not_found",
            Self::Throttled => "throttled",
            Self::Invalid => "invalid",
            Self::AlreadyExists => "already_exists",
            Self::Conflict => "conflict",
            Self::AccessDenied => "access_denied",
            Self::LimitExceeded => "limit_exceeded",
            Self::Transient => "transient",
            Self::Permanent => "permanent",
        }
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

// === impl AwsError ===

impl AwsError {
    /// A new error of `kind` from `service`'s `operation` (for example `"ec2"`, `"DescribeInstances"`).
    pub fn new(kind: ErrorKind, service: &'static str, operation: &'static str) -> Self {
        Self {
            kind,
            service,
            operation,
            code: None,
            message: None,
            retry_after: None,
            source: None,
        }
    }

    /// Sets the AWS error code (`InvalidInstanceID.NotFound`, ...).
    #[must_use]
    pub fn with_code(mut self, code: impl Into<String>) -> Self {
        self.code = Some(code.into());
        self
    }

    /// Sets the human-readable message AWS returned.
    #[must_use]
    pub fn with_message(mut self, message: impl Into<String>) -> Self {
        self.message = Some(message.into());
        self
    }

    /// Sets how long the caller should wait before retrying (client-side limiter back-off, for example).
    #[must_use]
    pub fn with_retry_after(mut self, delay: Duration) -> Self {
        self.retry_after = Some(delay);
        self
    }

    /// Sets the underlying cause.
    #[must_use]
    pub fn with_source(mut self, source: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> Self {
        self.source = Some(source.into());
        self
    }

    /// What the failure means for the caller.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The service, as its SDK names it (`ec2`, `elasticloadbalancing`, ...).
    pub fn service(&self) -> &'static str {
        self.service
    }

    /// The API operation (`DescribeInstances`, ...).
    pub fn operation(&self) -> &'static str {
        self.operation
    }

    /// The AWS error code, when AWS answered with one.
    pub fn code(&self) -> Option<&str> {
        self.code.as_deref()
    }

    /// AWS's message, when there was one.
    pub fn message(&self) -> Option<&str> {
        self.message.as_deref()
    }

    /// A suggested delay before retrying, when one is known.
    pub fn retry_after(&self) -> Option<Duration> {
        self.retry_after
    }

    /// Whether this is [`ErrorKind::NotFound`].
    pub fn is_not_found(&self) -> bool {
        self.kind == ErrorKind::NotFound
    }

    /// Whether the resource to create exists already ([`ErrorKind::AlreadyExists`]).
    pub fn is_already_exists(&self) -> bool {
        self.kind == ErrorKind::AlreadyExists
    }
}

impl fmt::Display for AwsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {} failed ({})", self.service, self.operation, self.kind)?;
        if let Some(code) = &self.code {
            write!(f, ": {code}")?;
        }
        if let Some(message) = &self.message {
            write!(f, ": {message}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_names_operation_kind_code_and_message_but_not_the_cause() {
        let err = AwsError::new(ErrorKind::NotFound, "ec2", "DescribeInstances")
            .with_code("InvalidInstanceID.NotFound")
            .with_message("The instance ID 'i-1' does not exist")
            .with_source(std::io::Error::other("inner cause"));
        let shown = err.to_string();
        assert_eq!(
            shown,
            "ec2 DescribeInstances failed (not_found): InvalidInstanceID.NotFound: The instance ID 'i-1' does not exist"
        );
        assert!(std::error::Error::source(&err).is_some());
        assert!(err.is_not_found());
        assert!(!err.kind().is_retryable());
        assert!(ErrorKind::Throttled.is_retryable());
    }
}
