//! Leader election on a `coordination.k8s.io/v1` Lease, compatible with client-go's `LeaseLock` (a Go cloud
//! controller manager and this one can take turns on the same Lease).
//!
//! As client-go: a Lease held by someone else is taken only once its record (holder, renew time) has not changed
//! for `leaseDurationSeconds` of *local* monotonic time since this process observed it, so clock skew between
//! nodes does not matter; every write carries the observed `resourceVersion`, so two candidates can never both
//! win (the loser gets 409 Conflict). Beyond client-go: a candidate wakes exactly when the observed lease expires
//! (not up to 2.4 retry periods later), a leader that sees another holder stops at once instead of retrying until
//! its renew deadline, and the Lease is released (holder cleared) on graceful shutdown.

use std::{
    sync::{Arc, Mutex},
    time::Duration,
};

use ccm_controllers::Clock;
use k8s_openapi::{
    api::coordination::v1::{Lease, LeaseSpec},
    apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta},
};
use kube::{Api, Client, api::PostParams};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// client-go's `JitterFactor`: the renew deadline must exceed 1.2 retry periods.
pub(crate) const JITTER: f64 = 1.2;

/// How long controllers may take to stop once leadership is lost before they are aborted: another process may
/// lead as soon as the lease expires, so the lease duration must exceed the renew deadline by at least this.
pub(crate) const LOST_STOP_TIMEOUT: Duration = Duration::from_secs(1);

/// How long past the lease duration a leader may go without renewing before `/healthz/leaderElection` fails
/// (upstream's watchdog tolerance).
pub(crate) const HEALTH_TOLERANCE: Duration = Duration::from_secs(20);

/// Where and how to elect.
#[derive(Debug, Clone)]
pub(crate) struct LeaseConfig {
    pub(crate) namespace: String,
    pub(crate) name: String,
    pub(crate) identity: String,
    pub(crate) lease_duration: Duration,
    pub(crate) renew_deadline: Duration,
    pub(crate) retry_period: Duration,
}

/// Why leadership ended while holding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Ended {
    /// `stop` was cancelled; the Lease was released.
    Released,
    /// Another holder took the Lease.
    Lost(String),
    /// Not renewed within the renew deadline (the apiserver was slow or out of reach); the Lease still names
    /// this candidate unless someone took it since, so the same identity may lead again at once.
    Lapsed(String),
}

/// What a candidate last saw of the Lease, and when (local monotonic time).
#[derive(Debug, Clone)]
struct Observed {
    lease: Lease,
    at: Instant,
}

/// Shared view of one election for `/healthz` and metrics.
#[derive(Debug, Clone, Default)]
pub(crate) struct LeaderStatus(Arc<Mutex<StatusInner>>);

#[derive(Debug, Default)]
struct StatusInner {
    leading: bool,
    last_renew: Option<Instant>,
}

impl LeaderStatus {
    fn set(&self, leading: bool, renewed: Option<Instant>) {
        let mut s = self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        s.leading = leading;
        if renewed.is_some() || !leading {
            s.last_renew = renewed;
        }
    }

    /// The `leaderElection` health check: failing when this process leads but has not renewed for the lease
    /// duration plus [`HEALTH_TOLERANCE`].
    pub(crate) fn check(&self, lease_duration: Duration) -> Result<(), String> {
        let s = self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        match (s.leading, s.last_renew) {
            (true, Some(at)) if at.elapsed() > lease_duration + HEALTH_TOLERANCE => Err(format!(
                "failed election to renew leadership on lease: last renewal {:?} ago",
                at.elapsed()
            )),
            _ => Ok(()),
        }
    }
}

/// One candidate for one Lease.
pub(crate) struct Elector {
    api: Api<Lease>,
    cfg: LeaseConfig,
    clock: Clock,
    observed: Option<Observed>,
    status: LeaderStatus,
    /// When the acquiring request that won was sent: where the first renew deadline runs from.
    acquired_at: Option<Instant>,
}

impl Elector {
    pub(crate) fn new(client: Client, cfg: LeaseConfig, clock: Clock, status: LeaderStatus) -> Self {
        Self {
            api: Api::namespaced(client, &cfg.namespace),
            cfg,
            clock,
            observed: None,
            status,
            acquired_at: None,
        }
    }

    fn lease_seconds(&self) -> i32 {
        i32::try_from(self.cfg.lease_duration.as_secs().max(1)).unwrap_or(i32::MAX)
    }

    fn now(&self) -> MicroTime {
        MicroTime(self.clock.now().0)
    }

    fn holder(lease: &Lease) -> Option<&str> {
        lease
            .spec
            .as_ref()
            .and_then(|s| s.holder_identity.as_deref())
            .filter(|h| !h.is_empty())
    }

    /// Records what was read; the observation time moves only when the record changed.
    fn observe(&mut self, lease: Lease) {
        let same = self
            .observed
            .as_ref()
            .is_some_and(|o| o.lease.metadata.resource_version == lease.metadata.resource_version);
        if !same {
            self.observed = Some(Observed {
                lease,
                at: Instant::now(),
            });
        }
    }

    /// When the observed lease of another holder expires, if it is held by someone else and still valid.
    fn foreign_expiry(&self) -> Option<Instant> {
        let o = self.observed.as_ref()?;
        let holder = Self::holder(&o.lease)?;
        if holder == self.cfg.identity {
            return None;
        }
        let secs = o
            .lease
            .spec
            .as_ref()
            .and_then(|s| s.lease_duration_seconds)
            .unwrap_or(0)
            .max(0);
        let expiry = o.at + Duration::from_secs(u64::try_from(secs).unwrap_or(0));
        (expiry > Instant::now()).then_some(expiry)
    }

    /// The holder's renewal without a read first (client-go's optimistic update): the Lease as this candidate
    /// last wrote it, with a new renew time, sent with its resourceVersion. `None` when this candidate does not
    /// hold a still valid Lease by its own record, or the write failed (a conflict included): the caller reads.
    async fn try_renew_observed(&mut self) -> Option<Lease> {
        let o = self.observed.as_ref()?;
        if Self::holder(&o.lease) != Some(self.cfg.identity.as_str())
            || o.at + self.cfg.lease_duration <= Instant::now()
        {
            return None;
        }
        let mut next = o.lease.clone();
        let spec = next.spec.get_or_insert_with(LeaseSpec::default);
        spec.renew_time = Some(self.now());
        spec.lease_duration_seconds = Some(self.lease_seconds());
        match self
            .api
            .replace(&self.cfg.name, &PostParams::default(), &next)
            .await
        {
            Ok(written) => Some(written),
            Err(e) => {
                tracing::debug!(lease = %self.lease_name(), error = %e, "optimistic renewal failed; reading the lease");
                None
            }
        }
    }

    /// One attempt to take or renew the Lease. `Ok(true)` when this candidate holds it afterwards.
    pub(crate) async fn try_acquire_or_renew(&mut self) -> Result<bool, kube::Error> {
        if let Some(written) = self.try_renew_observed().await {
            self.observed = Some(Observed {
                lease: written,
                at: Instant::now(),
            });
            return Ok(true);
        }
        let now = self.now();
        let Some(current) = self.api.get_opt(&self.cfg.name).await? else {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(self.cfg.name.clone()),
                    namespace: Some(self.cfg.namespace.clone()),
                    ..ObjectMeta::default()
                },
                spec: Some(LeaseSpec {
                    holder_identity: Some(self.cfg.identity.clone()),
                    lease_duration_seconds: Some(self.lease_seconds()),
                    acquire_time: Some(now.clone()),
                    renew_time: Some(now),
                    lease_transitions: Some(0),
                    ..LeaseSpec::default()
                }),
            };
            return match self.api.create(&PostParams::default(), &lease).await {
                Ok(created) => {
                    self.observe(created);
                    Ok(true)
                }
                Err(kube::Error::Api(s)) if s.is_already_exists() => Ok(false),
                Err(e) => Err(e),
            };
        };
        self.observe(current.clone());
        if self.foreign_expiry().is_some() {
            return Ok(false);
        }
        let previous = current.spec.clone().unwrap_or_default();
        let mine = Self::holder(&current) == Some(self.cfg.identity.as_str());
        let spec = LeaseSpec {
            holder_identity: Some(self.cfg.identity.clone()),
            lease_duration_seconds: Some(self.lease_seconds()),
            acquire_time: if mine {
                previous.acquire_time.clone()
            } else {
                Some(now.clone())
            },
            renew_time: Some(now),
            lease_transitions: Some(
                previous.lease_transitions.unwrap_or(0)
                    + i32::from(!mine && Self::holder(&current).is_some()),
            ),
            ..previous
        };
        let mut next = current;
        next.spec = Some(spec);
        // `replace` sends the observed resourceVersion: a concurrent writer makes this a 409 Conflict.
        match self
            .api
            .replace(&self.cfg.name, &PostParams::default(), &next)
            .await
        {
            Ok(written) => {
                self.observed = Some(Observed {
                    lease: written,
                    at: Instant::now(),
                });
                Ok(true)
            }
            Err(kube::Error::Api(s)) if s.is_conflict() => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Tries until this candidate leads (`true`) or `shutdown` is cancelled (`false`).
    pub(crate) async fn acquire(&mut self, shutdown: &CancellationToken) -> bool {
        tracing::info!(lease = %self.lease_name(), identity = %self.cfg.identity, "attempting to acquire leader lease");
        loop {
            let sent = Instant::now();
            match self.try_acquire_or_renew().await {
                Ok(true) => {
                    tracing::info!(lease = %self.lease_name(), identity = %self.cfg.identity, "successfully acquired lease");
                    self.acquired_at = Some(sent);
                    self.status.set(true, Some(sent));
                    return true;
                }
                Ok(false) => {
                    tracing::debug!(lease = %self.lease_name(), holder = ?self.observed.as_ref().and_then(|o| Self::holder(&o.lease)), "lease is held by another candidate");
                }
                Err(e) => {
                    tracing::warn!(lease = %self.lease_name(), error = %e, "error retrieving or updating the lease")
                }
            }
            // Wake at the retry period (jittered up to 1.2x, as client-go), or exactly when the lease we saw expires
            // if that is sooner.
            let jitter = self
                .cfg
                .retry_period
                .mul_f64(rand::random::<f64>() * (JITTER - 1.0));
            let mut wake = Instant::now() + self.cfg.retry_period + jitter;
            if let Some(expiry) = self.foreign_expiry() {
                wake = wake.min(expiry + Duration::from_millis(5));
            }
            tokio::select! {
                () = shutdown.cancelled() => return false,
                () = tokio::time::sleep_until(wake) => {}
            }
        }
    }

    /// Renews every retry period until `stop` is cancelled (then releases the Lease) or leadership is lost.
    ///
    /// The renew deadline runs from when the last successful renewal was *sent*, not from its reply: the Lease
    /// may have been written (and seen by the others, who count the lease duration from then) at any moment in
    /// between, so a slow reply must not extend this process's leadership.
    pub(crate) async fn hold(&mut self, stop: &CancellationToken) -> Ended {
        let mut last_renew = self.acquired_at.take().unwrap_or_else(Instant::now);
        loop {
            tokio::select! {
                () = stop.cancelled() => {
                    self.release().await;
                    return Ended::Released;
                }
                () = tokio::time::sleep(self.cfg.retry_period) => {}
            }
            let remaining = self
                .cfg
                .renew_deadline
                .saturating_sub(last_renew.elapsed())
                .max(Duration::from_millis(1));
            let sent = Instant::now();
            let attempt = tokio::time::timeout(remaining, self.try_acquire_or_renew()).await;
            match attempt {
                Ok(Ok(true)) => {
                    last_renew = sent;
                    self.status.set(true, Some(last_renew));
                }
                Ok(Ok(false)) if self.foreign_expiry().is_some() => {
                    let holder = self
                        .observed
                        .as_ref()
                        .and_then(|o| Self::holder(&o.lease))
                        .unwrap_or_default()
                        .to_owned();
                    self.status.set(false, None);
                    return Ended::Lost(format!("the lease is now held by {holder}"));
                }
                Ok(Ok(false)) => {
                    tracing::warn!(lease = %self.lease_name(), "lease renewal conflicted; retrying")
                }
                Ok(Err(e)) => {
                    tracing::warn!(lease = %self.lease_name(), error = %e, "failed to renew the lease; retrying")
                }
                Err(_) => tracing::warn!(lease = %self.lease_name(), "lease renewal timed out"),
            }
            if last_renew.elapsed() >= self.cfg.renew_deadline {
                self.status.set(false, None);
                return Ended::Lapsed(format!(
                    "not renewed within the renew deadline of {:?}",
                    self.cfg.renew_deadline
                ));
            }
        }
    }

    /// Clears the holder if this candidate still holds the Lease, so that a successor takes over at once.
    pub(crate) async fn release(&mut self) {
        self.status.set(false, None);
        let Some(observed) = self.observed.clone() else {
            return;
        };
        if Self::holder(&observed.lease) != Some(self.cfg.identity.as_str()) {
            return;
        }
        let now = self.now();
        let mut next = observed.lease;
        if let Some(spec) = next.spec.as_mut() {
            spec.holder_identity = Some(String::new());
            spec.lease_duration_seconds = Some(1);
            spec.acquire_time = Some(now.clone());
            spec.renew_time = Some(now);
        }
        match self
            .api
            .replace(&self.cfg.name, &PostParams::default(), &next)
            .await
        {
            Ok(_) => tracing::info!(lease = %self.lease_name(), "released the leader lease"),
            Err(e) => {
                tracing::warn!(lease = %self.lease_name(), error = %e, "could not release the leader lease; a successor takes over once it expires")
            }
        }
    }

    fn lease_name(&self) -> String {
        ccm_cloud_provider::namespaced_key(&self.cfg.namespace, &self.cfg.name)
    }
}

/// This process's identity in elections: `<hostname>_<random UUID>`, as upstream.
pub(crate) fn identity() -> String {
    let host = hostname::get()
        .ok()
        .and_then(|h| h.into_string().ok())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "unknown".to_owned());
    let b: [u8; 16] = rand::random();
    format!(
        "{host}_{:08x}-{:04x}-4{:03x}-{:04x}-{:012x}",
        u32::from_be_bytes([b[0], b[1], b[2], b[3]]),
        u16::from_be_bytes([b[4], b[5]]),
        u16::from_be_bytes([b[6], b[7]]) & 0x0fff,
        (u16::from_be_bytes([b[8], b[9]]) & 0x3fff) | 0x8000,
        u64::from_be_bytes([0, 0, b[10], b[11], b[12], b[13], b[14], b[15]])
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identity_is_host_and_uuid() {
        let id = identity();
        let (_, uuid) = id.rsplit_once('_').unwrap();
        assert_eq!(uuid.len(), 36, "{id}");
        assert_eq!(uuid.as_bytes()[14], b'4');
        assert_ne!(identity(), id);
    }

    #[tokio::test(start_paused = true)]
    async fn health_fails_only_for_a_stale_leader() {
        let status = LeaderStatus::default();
        let lease = Duration::from_secs(15);
        assert!(status.check(lease).is_ok(), "not leading is healthy");
        status.set(true, Some(Instant::now()));
        tokio::time::advance(Duration::from_secs(34)).await;
        assert!(status.check(lease).is_ok(), "within 15 s + 20 s");
        tokio::time::advance(Duration::from_secs(2)).await;
        assert!(
            status
                .check(lease)
                .unwrap_err()
                .contains("failed election to renew")
        );
        status.set(false, None);
        assert!(status.check(lease).is_ok());
    }
}
