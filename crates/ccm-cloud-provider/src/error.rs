use std::time::Duration;

/// What a provider call reports when it fails. The variants other than [`CloudError::Other`] are the
/// sentinels of `k8s.io/cloud-provider`; each tells the controllers what to do next.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CloudError {
    /// The provider does not implement this operation (upstream `NotImplemented`). The controllers continue
    /// without the information where upstream does (for example a legacy provider without instance IDs).
    #[error("unimplemented")]
    NotImplemented,
    /// The instance does not exist (upstream `InstanceNotFound`). Must never be returned for a stopped or
    /// sleeping instance: the node-lifecycle controller deletes the Node of a missing instance.
    #[error("instance not found")]
    InstanceNotFound,
    /// Another controller owns this load balancer (upstream `ImplementedElsewhere`): the service controller
    /// treats the call as successful and neither writes the status nor emits the `EnsuredLoadBalancer` event.
    #[error("implemented by alternate to cloud provider")]
    ImplementedElsewhere,
    /// The operation is in progress or throttled: retry after exactly `after` instead of the exponential
    /// backoff (upstream `api.RetryError`).
    #[error("{message} (retry after {after:?})")]
    RetryAfter {
        /// What is pending.
        message: String,
        /// How long to wait before the next attempt.
        after: Duration,
    },
    /// Not a failure: the cloud is still releasing something the operation depends on (a deleted load
    /// balancer's network interfaces still hold its security group, which AWS answers with
    /// `DependencyViolation` for minutes). The operation made what progress it could and must be called again
    /// after `after`; the controllers report what is waited for instead of an error, and never treat the
    /// operation as finished (a load balancer's cleanup finalizer stays).
    #[error("waiting for {waiting_for} (retry after {after:?})")]
    Waiting {
        /// What is waited for, in the provider's words (names the resource).
        waiting_for: String,
        /// How long to wait before the next attempt.
        after: Duration,
    },
    /// Any other failure: the controllers log it and retry with their exponential backoff.
    #[error("{message}")]
    Other {
        /// What failed, in the provider's words.
        message: String,
        /// The underlying cause, if any.
        #[source]
        source: Option<Box<dyn std::error::Error + Send + Sync + 'static>>,
    },
}

// === impl CloudError ===

impl CloudError {
    /// A general failure with a message.
    pub fn other(message: impl Into<String>) -> Self {
        Self::Other {
            message: message.into(),
            source: None,
        }
    }

    /// A general failure with a message and its cause.
    pub fn with_source(
        message: impl Into<String>,
        source: impl Into<Box<dyn std::error::Error + Send + Sync + 'static>>,
    ) -> Self {
        Self::Other {
            message: message.into(),
            source: Some(source.into()),
        }
    }

    /// The one mapping of a provider's own error to what the controllers do next, for the errors that are no
    /// sentinel. With a `retry` delay (the cloud suggested one, or the provider's policy for throttling): a
    /// [`CloudError::RetryAfter`] whose message is `err` and its causes, `a: b: c`. Without: a
    /// [`CloudError::Other`] whose message is `err`'s own text and whose source is `err` itself, so that the
    /// cause can still be downcast and a printer of the chain that skips a repeated text (the controllers'
    /// `ErrorChain`) prints every cause once.
    pub fn from_failure<E>(err: E, retry: Option<Duration>) -> Self
    where
        E: std::error::Error + Send + Sync + 'static,
    {
        match retry {
            Some(after) => {
                let mut message = err.to_string();
                let mut cause = err.source();
                while let Some(c) = cause {
                    message = format!("{message}: {c}");
                    cause = c.source();
                }
                Self::retry_after(message, after)
            }
            None => Self::with_source(err.to_string(), err),
        }
    }

    /// A failure that should be retried after `after` (upstream `api.NewRetryError`).
    pub fn retry_after(message: impl Into<String>, after: Duration) -> Self {
        Self::RetryAfter {
            message: message.into(),
            after,
        }
    }

    /// Progress that waits on the cloud (see [`CloudError::Waiting`]).
    pub fn waiting(waiting_for: impl Into<String>, after: Duration) -> Self {
        Self::Waiting {
            waiting_for: waiting_for.into(),
            after,
        }
    }

    /// The delay a [`CloudError::RetryAfter`] or [`CloudError::Waiting`] asks for; `None` for every other kind.
    pub fn retry_delay(&self) -> Option<Duration> {
        match self {
            Self::RetryAfter { after, .. } | Self::Waiting { after, .. } => Some(*after),
            _ => None,
        }
    }

    /// What a [`CloudError::Waiting`] waits for; `None` for every other kind.
    pub fn waiting_for(&self) -> Option<&str> {
        match self {
            Self::Waiting { waiting_for, .. } => Some(waiting_for),
            _ => None,
        }
    }

    /// Whether this is [`CloudError::NotImplemented`].
    pub fn is_not_implemented(&self) -> bool {
        matches!(self, Self::NotImplemented)
    }

    /// Whether this is [`CloudError::InstanceNotFound`].
    pub fn is_instance_not_found(&self) -> bool {
        matches!(self, Self::InstanceNotFound)
    }

    /// Whether this is [`CloudError::ImplementedElsewhere`].
    pub fn is_implemented_elsewhere(&self) -> bool {
        matches!(self, Self::ImplementedElsewhere)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_delay_only_for_retry_after_and_waiting() {
        assert_eq!(
            CloudError::retry_after("creating", Duration::from_secs(42)).retry_delay(),
            Some(Duration::from_secs(42))
        );
        let waiting = CloudError::waiting("sg-1 to be released", Duration::from_secs(10));
        assert_eq!(waiting.retry_delay(), Some(Duration::from_secs(10)));
        assert_eq!(waiting.waiting_for(), Some("sg-1 to be released"));
        assert_eq!(
            waiting.to_string(),
            "waiting for sg-1 to be released (retry after 10s)"
        );
        assert_eq!(CloudError::retry_after("x", Duration::ZERO).waiting_for(), None);
        assert_eq!(CloudError::other("boom").retry_delay(), None);
        assert_eq!(CloudError::NotImplemented.retry_delay(), None);
    }

    #[test]
    fn messages_match_the_upstream_sentinels() {
        assert_eq!(CloudError::NotImplemented.to_string(), "unimplemented");
        assert_eq!(CloudError::InstanceNotFound.to_string(), "instance not found");
        assert_eq!(
            CloudError::ImplementedElsewhere.to_string(),
            "implemented by alternate to cloud provider"
        );
        let e = CloudError::with_source("describe failed", std::io::Error::other("socket"));
        assert_eq!(
            e.to_string(),
            "describe failed",
            "Display does not repeat the cause"
        );
        assert!(std::error::Error::source(&e).is_some());
    }

    #[derive(Debug, thiserror::Error)]
    #[error("creating the listener")]
    struct Failed(#[source] std::io::Error);

    #[test]
    fn a_failure_keeps_its_cause_or_names_it_when_retried() {
        let other = CloudError::from_failure(Failed(std::io::Error::other("throttled")), None);
        assert_eq!(other.to_string(), "creating the listener");
        let source = std::error::Error::source(&other).expect("the failure is the source");
        assert!(source.downcast_ref::<Failed>().is_some());
        let retry = CloudError::from_failure(
            Failed(std::io::Error::other("throttled")),
            Some(Duration::from_secs(3)),
        );
        assert_eq!(
            retry.to_string(),
            "creating the listener: throttled (retry after 3s)"
        );
        assert_eq!(retry.retry_delay(), Some(Duration::from_secs(3)));
    }
}
