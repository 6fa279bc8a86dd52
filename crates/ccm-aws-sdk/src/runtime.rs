//! What every call goes through: the shared limiter, per-attempt metrics, error mapping and retries with
//! jittered exponential back-off. The SDK's own retries are off so that each attempt is limited and counted.

use std::{future::Future, sync::Arc, time::Duration};

use aws_smithy_runtime_api::client::{orchestrator::HttpResponse, result::SdkError};
use aws_smithy_types::error::metadata::ProvideErrorMetadata;
use ccm_aws_api::{AwsError, ErrorKind};
use rand::RngExt;
use tokio::time::Instant;

use crate::{
    error_map,
    limiter::{ActionClass, Limiter, Service},
    metrics::CallMetrics,
};

/// How failed attempts are retried. Start from [`RetryPolicy::default`] and set the fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct RetryPolicy {
    /// Attempts per call, the first included (1 disables retries).
    pub max_attempts: u32,
    /// Back-off base for transient faults (doubled per attempt, full jitter).
    pub base_delay: Duration,
    /// Back-off base after throttling (larger: AWS's bucket needs time to refill).
    pub throttle_base_delay: Duration,
    /// The longest single back-off.
    pub max_delay: Duration,
}

#[derive(Debug)]
pub(crate) struct Runtime {
    pub(crate) limiter: Limiter,
    pub(crate) metrics: CallMetrics,
    pub(crate) retry: RetryPolicy,
    /// [`AdapterOptions::read_only`](crate::AdapterOptions::read_only): calls that change AWS are refused.
    pub(crate) read_only: bool,
}

/// Whether the operation `name` changes anything in AWS. By AWS's naming: reads are `Describe*`, `Get*` and
/// `List*`; `AssumeRole*` only hands out credentials. Everything else is taken to write, so that an operation
/// added later is refused in read-only mode until it is known to be a read.
pub(crate) fn mutates(name: &str) -> bool {
    !["Describe", "Get", "List", "AssumeRole"]
        .iter()
        .any(|prefix| name.starts_with(prefix))
}

/// Which service and operation a call is, and which bucket it draws from.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Op {
    pub(crate) service: Service,
    pub(crate) name: &'static str,
    pub(crate) class: ActionClass,
}

// === impl RetryPolicy ===

impl Default for RetryPolicy {
    /// 5 attempts; transient back-off from 100 ms, throttling back-off from 1 s, at most 20 s.
    fn default() -> Self {
        Self {
            max_attempts: 5,
            base_delay: Duration::from_millis(100),
            throttle_base_delay: Duration::from_secs(1),
            max_delay: Duration::from_secs(20),
        }
    }
}

impl RetryPolicy {
    /// `attempts` attempts with millisecond back-offs (5 ms, 20 ms after throttling, at most 50 ms): for emulators
    /// such as moto and for tests, where waiting only slows things down.
    pub fn quick(attempts: u32) -> Self {
        Self {
            max_attempts: attempts,
            base_delay: Duration::from_millis(5),
            throttle_base_delay: Duration::from_millis(20),
            max_delay: Duration::from_millis(50),
        }
    }

    /// The jittered delay before attempt `attempt + 1` (`attempt` starts at 1) after an error of `kind`.
    fn backoff(&self, attempt: u32, kind: ErrorKind) -> Duration {
        let base = if kind == ErrorKind::Throttled {
            self.throttle_base_delay
        } else {
            self.base_delay
        };
        let ceiling = base
            .saturating_mul(1 << attempt.saturating_sub(1).min(16))
            .min(self.max_delay);
        // Full jitter, with a floor of a tenth so that a throttled caller never hammers again immediately.
        let nanos = u64::try_from(ceiling.as_nanos()).unwrap_or(u64::MAX);
        let jittered = rand::rng().random_range(nanos / 10..=nanos.max(1));
        Duration::from_nanos(jittered)
    }
}

// === impl Service ===

impl Service {
    /// The service's name in metrics and errors, as the SDK spells its crate.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ec2 => "ec2",
            Self::Elb => "elasticloadbalancing",
            Self::Elbv2 => "elasticloadbalancingv2",
            Self::Sts => "sts",
            Self::Ecr => "ecr",
        }
    }
}

// === impl Op ===

impl Op {
    pub(crate) const fn new(service: Service, name: &'static str, class: ActionClass) -> Self {
        Self { service, name, class }
    }

    pub(crate) fn error(&self, kind: ErrorKind, message: impl Into<String>) -> AwsError {
        AwsError::new(kind, self.service.as_str(), self.name).with_message(message)
    }
}

/// The most pages one listing follows: far above any real account (10,000 pages of 1,000 instances), low enough
/// that a service answering pages forever cannot hold a reconcile (and its memory) without end.
pub(crate) const MAX_PAGES: usize = 10_000;

/// Guards a paging loop: a continuation token seen before (a service or proxy going round in circles) or more
/// than [`MAX_PAGES`] pages end the listing with an error instead of looping.
#[derive(Debug, Default)]
pub(crate) struct Pages {
    seen: std::collections::HashSet<String>,
}

impl Pages {
    /// The token to ask the next page with (`None`: the listing is complete), or an error for a repeated token or
    /// too many pages. Empty tokens end the listing, as AWS's SDKs treat them.
    pub(crate) fn next(&mut self, op: Op, token: Option<String>) -> Result<Option<String>, AwsError> {
        self.next_of(op.service.as_str(), op.name, token)
    }

    /// [`Pages::next`] for a listing named by service and operation.
    pub(crate) fn next_of(
        &mut self,
        service: &'static str,
        operation: &'static str,
        token: Option<String>,
    ) -> Result<Option<String>, AwsError> {
        let Some(token) = token.filter(|t| !t.is_empty()) else {
            return Ok(None);
        };
        let stop = |kind, message: String| AwsError::new(kind, service, operation).with_message(message);
        if self.seen.len() >= MAX_PAGES {
            return Err(stop(
                ErrorKind::Permanent,
                format!("more than {MAX_PAGES} pages: listing stopped"),
            ));
        }
        if !self.seen.insert(token.clone()) {
            return Err(stop(
                ErrorKind::Transient,
                format!("the continuation token {token:?} came back a second time: listing stopped"),
            ));
        }
        Ok(Some(token))
    }
}

// === impl Runtime ===

impl Runtime {
    pub(crate) fn new(
        limiter: Limiter,
        metrics: CallMetrics,
        retry: RetryPolicy,
        read_only: bool,
    ) -> Arc<Self> {
        Arc::new(Self {
            limiter,
            metrics,
            retry,
            read_only,
        })
    }

    /// Runs a paged operation to the end: `send(token)` issues one page request (each under [`Self::call`]),
    /// `extract` appends the page's items to the output and returns its continuation token. Paging stops at
    /// the first page without a (non-empty) token, so callers never see pages.
    pub(crate) async fn paged<P, T, E, F, Fut, X>(
        &self,
        op: Op,
        mut send: F,
        mut extract: X,
    ) -> Result<Vec<T>, AwsError>
    where
        F: FnMut(Option<String>) -> Fut,
        Fut: Future<Output = Result<P, SdkError<E, HttpResponse>>>,
        E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
        X: FnMut(&P, &mut Vec<T>) -> Option<String>,
    {
        let mut out = Vec::new();
        let mut token = None;
        let mut pages = Pages::default();
        loop {
            let page = self.call(op, || send(token.clone())).await?;
            token = pages.next(op, extract(&page, &mut out))?;
            if token.is_none() {
                return Ok(out);
            }
        }
    }

    /// Runs `send` (one SDK request) under the limiter, with metrics and retries.
    pub(crate) async fn call<T, E, F, Fut>(&self, op: Op, send: F) -> Result<T, AwsError>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, SdkError<E, HttpResponse>>>,
        E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
    {
        self.call_with(op, self.retry.max_attempts, send).await
    }

    /// [`Self::call`] with at most `transient_attempts` attempts after transient faults (timeouts, 5xx), for a
    /// caller with a better answer to them than the same request again (a smaller one). Throttling is retried
    /// as usual.
    pub(crate) async fn call_with<T, E, F, Fut>(
        &self,
        op: Op,
        transient_attempts: u32,
        mut send: F,
    ) -> Result<T, AwsError>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, SdkError<E, HttpResponse>>>,
        E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
    {
        let service = op.service.as_str();
        if self.read_only && mutates(op.name) {
            // Never sent: counted under the outcome `dry_run`, and refused as EC2 refuses a `DryRun` request.
            self.metrics.record(service, op.name, "dry_run", Duration::ZERO);
            tracing::info!(
                service,
                operation = op.name,
                "dry run: not sent, it would change AWS"
            );
            return Err(op
                .error(
                    ErrorKind::AccessDenied,
                    format!("dry run: {} changes AWS and was not sent", op.name),
                )
                .with_code("DryRunOperation"));
        }
        let mut attempt = 1;
        loop {
            if let Err(wait) = self.limiter.acquire(op.service, op.class).await {
                return Err(AwsError::new(ErrorKind::Throttled, service, op.name)
                    .with_message(format!(
                        "client-side rate limit: the call would wait {wait:?}, longer than {:?}",
                        crate::limiter::MAX_WAIT
                    ))
                    .with_retry_after(wait));
            }
            let started = Instant::now();
            let result = send().await;
            let latency = started.elapsed();
            match result {
                Ok(out) => {
                    self.metrics.record(service, op.name, "ok", latency);
                    self.limiter.succeeded(op.service, op.class);
                    return Ok(out);
                }
                Err(err) => {
                    if let Some(response) = err.raw_response() {
                        self.metrics
                            .record_status(op.service, op.name, response.status().as_u16());
                    }
                    let err = error_map::from_sdk(service, op.name, err);
                    let kind = err.kind();
                    self.metrics.record(service, op.name, kind.as_str(), latency);
                    if kind == ErrorKind::Throttled {
                        self.limiter.throttled(op.service, op.class);
                    }
                    let retryable = matches!(kind, ErrorKind::Throttled | ErrorKind::Transient);
                    let max_attempts = if kind == ErrorKind::Transient {
                        transient_attempts.min(self.retry.max_attempts)
                    } else {
                        self.retry.max_attempts
                    };
                    if !retryable || attempt >= max_attempts {
                        return Err(err);
                    }
                    let delay = self
                        .retry
                        .backoff(attempt, kind)
                        .max(err.retry_after().unwrap_or_default());
                    tracing::debug!(service, operation = op.name, attempt, ?delay, error = %err, "retrying AWS call");
                    tokio::time::sleep(delay).await;
                    attempt += 1;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_are_told_from_writes_by_name() {
        for read in [
            "DescribeInstances",
            "GetAuthorizationToken",
            "ListTagsForResource",
            "AssumeRoleWithWebIdentity",
        ] {
            assert!(!mutates(read), "{read}");
        }
        for write in [
            "CreateTags",
            "DeleteLoadBalancer",
            "ModifyListener",
            "RegisterTargets",
            "SetSubnets",
        ] {
            assert!(mutates(write), "{write}");
        }
        // Unknown operations are writes until known otherwise.
        assert!(mutates("StartSomethingNew"));
    }

    #[test]
    fn backoff_grows_with_jitter_and_caps() {
        let policy = RetryPolicy {
            max_attempts: 10,
            base_delay: Duration::from_millis(100),
            throttle_base_delay: Duration::from_secs(1),
            max_delay: Duration::from_secs(5),
        };
        for _ in 0..100 {
            let first = policy.backoff(1, ErrorKind::Transient);
            assert!(
                first >= Duration::from_millis(10) && first <= Duration::from_millis(100),
                "{first:?}"
            );
            let third = policy.backoff(3, ErrorKind::Transient);
            assert!(third <= Duration::from_millis(400), "{third:?}");
            let throttled = policy.backoff(2, ErrorKind::Throttled);
            assert!(throttled >= Duration::from_millis(200) && throttled <= Duration::from_secs(2));
            assert!(policy.backoff(30, ErrorKind::Throttled) <= Duration::from_secs(5));
        }
    }

    #[test]
    fn pages_end_on_an_empty_token_and_stop_on_a_repeated_one_or_too_many() {
        let mut pages = Pages::default();
        assert_eq!(
            pages
                .next_of("ec2", "DescribeRouteTables", Some(String::new()))
                .unwrap(),
            None
        );
        assert_eq!(
            pages
                .next_of("ec2", "DescribeRouteTables", Some("a".into()))
                .unwrap(),
            Some("a".into())
        );
        let again = pages
            .next_of("ec2", "DescribeRouteTables", Some("a".into()))
            .unwrap_err();
        assert_eq!(again.operation(), "DescribeRouteTables");
        let mut pages = Pages::default();
        for n in 0..MAX_PAGES {
            pages
                .next_of("ec2", "DescribeInstances", Some(n.to_string()))
                .unwrap();
        }
        let many = pages
            .next_of("ec2", "DescribeInstances", Some("last".into()))
            .unwrap_err();
        assert_eq!(many.kind(), ErrorKind::Permanent, "{many}");
    }
}
