//! A token bucket (golang.org/x/time/rate's `Limiter`, as client-go uses it): `burst` tokens, refilled at `rate`
//! per second. One type for the three uses in the controllers: the Kubernetes client's QPS limit (callers
//! reserve a token and wait for it), a work queue's overall rate limit (the same, as a delay before the add) and
//! the Event spam filter (an Event without a token is dropped).
//!
//! Not shared across threads by itself: wrap it in a `Mutex` (the holder decides what one lock covers). Time is
//! tokio's, so tests pause it.

use std::time::Duration;

use tokio::time::Instant;

/// A token bucket.
#[derive(Debug, Clone)]
pub struct TokenBucket {
    rate: f64,
    burst: f64,
    /// May go negative: a reserved token not yet refilled (its holder waits for it).
    tokens: f64,
    last: Instant,
}

// === impl TokenBucket ===

impl TokenBucket {
    /// A full bucket of `burst` tokens (at least 1), refilled at `rate` tokens per second (more than 0).
    pub fn new(rate: f64, burst: f64) -> Self {
        Self::full_at(rate, burst, Instant::now())
    }

    /// A full bucket, as of `now`.
    pub fn full_at(rate: f64, burst: f64, now: Instant) -> Self {
        let burst = burst.max(1.0);
        Self {
            rate,
            burst,
            tokens: burst,
            last: now,
        }
    }

    fn refill(&mut self, now: Instant) {
        let elapsed = now.saturating_duration_since(self.last).as_secs_f64();
        self.tokens = (self.tokens + elapsed * self.rate).min(self.burst);
        self.last = now;
    }

    /// Takes one token now and returns how long to wait until it exists (zero when one was available); callers
    /// that wait in turn are served in the order they reserved.
    pub fn reserve(&mut self) -> Duration {
        self.reserve_at(Instant::now())
    }

    /// [`reserve`](Self::reserve) at `now`.
    pub fn reserve_at(&mut self, now: Instant) -> Duration {
        self.refill(now);
        self.tokens -= 1.0;
        if self.tokens >= 0.0 || self.rate <= 0.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64(-self.tokens / self.rate)
        }
    }

    /// Takes one token if there is one at `now`; `false` (nothing taken) otherwise.
    pub fn try_take_at(&mut self, now: Instant) -> bool {
        self.refill(now);
        if self.tokens < 1.0 {
            return false;
        }
        self.tokens -= 1.0;
        true
    }

    /// When the bucket was last used (to forget the stalest of many buckets).
    pub fn last_used(&self) -> Instant {
        self.last
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn reservations_wait_in_turn_once_the_burst_is_spent() {
        let mut b = TokenBucket::new(2.0, 2.0);
        assert_eq!(b.reserve(), Duration::ZERO);
        assert_eq!(b.reserve(), Duration::ZERO);
        assert_eq!(b.reserve(), Duration::from_millis(500));
        assert_eq!(b.reserve(), Duration::from_secs(1));
        tokio::time::advance(Duration::from_secs(1)).await;
        assert_eq!(
            b.reserve(),
            Duration::from_millis(500),
            "the two reserved tokens came first"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn try_take_never_goes_into_debt() {
        let start = Instant::now();
        let mut b = TokenBucket::full_at(0.5, 1.0, start);
        assert!(b.try_take_at(start));
        assert!(!b.try_take_at(start));
        assert!(!b.try_take_at(start + Duration::from_secs(1)));
        assert!(b.try_take_at(start + Duration::from_secs(2)));
        assert_eq!(b.last_used(), start + Duration::from_secs(2));
    }
}
