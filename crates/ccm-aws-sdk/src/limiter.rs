//! Client-side token buckets, one per (service, action class), shared by every caller of one [`Adapter`], so
//! that the CCM cannot spend the account's API budget that other tools share.
//!
//! Capacities default to AWS's documented buckets (EC2 and ELB API throttling pages). EC2's refill at half of
//! AWS's rates: a burst (a cluster's first lookups) is served as fast as AWS itself would serve it, and what the
//! CCM sustains leaves half of the account's EC2 rate to the other tools sharing it (node autoscalers, CNI
//! plugins, infrastructure tools all spend it). Elastic Load Balancing's refill at AWS's own rates: a Service
//! waits on them, for its load balancer and for its deletion (its cleanup finalizer), the load-balancer
//! controllers are the ones that spend that budget, and neither the Go controller (no limiter) nor the AWS Load
//! Balancer Controller (AWS's rates by default) keeps less: at half, 200 NLB deletions took twice the Go
//! controller's time. (Half the capacity too made the CCM slower than the Go controller at creating five Classic
//! ELBs: their 20 mutating calls waited on a bucket of 10.)
//! A throttling answer from AWS halves the bucket's refill rate (down to a tenth) and empties it; every success
//! wins back 5% of the nominal rate (additive increase, multiplicative decrease).
//!
//! A call waiting for a token goes out [`ADMIT_MARGIN`] after the token exists here, not the instant it does.
//! This bucket counts when a call leaves, AWS's when it arrives; at AWS's own rate both are empty between calls,
//! and a call that reaches AWS a few milliseconds quicker than the one that emptied AWS's bucket would find it a
//! hair short of a token, be throttled, and halve the rate for the next dozen calls. The margin shifts the
//! schedule once, without slowing its rate: reservations still chain a token apart.
//!
//! [`Adapter`]: crate::Adapter

use std::{collections::HashMap, sync::Mutex, time::Duration};

use tokio::time::Instant;

/// The AWS services the adapter calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Service {
    /// EC2.
    Ec2,
    /// Classic Elastic Load Balancing.
    Elb,
    /// Elastic Load Balancing v2.
    Elbv2,
    /// STS.
    Sts,
    /// ECR.
    Ecr,
}

/// AWS's throttling categories, per service.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum ActionClass {
    /// `Describe*`, `List*`, `Get*` (filtered or paginated).
    NonMutating,
    /// EC2 `DescribeInstances`, `DescribeSecurityGroups`, `DescribeNetworkInterfaces`: AWS bills unfiltered,
    /// unpaginated calls (and ID-list calls, by caution) against a smaller bucket.
    LargeDescribe,
    /// Creates, deletes and modifications.
    Mutating,
    /// EC2 `AuthorizeSecurityGroupIngress`/`Revoke...`; ELB `CreateLoadBalancer` and subnet changes.
    ResourceIntensive,
    /// EC2 `CreateTags`/`DeleteTags`.
    Tags,
    /// ELB target and instance (de)registration.
    Registration,
    /// EC2 `DescribeInstanceTopology` (1 call per second on AWS).
    Topology,
}

/// A bucket's size and refill rate.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BucketLimit {
    /// Tokens available at once.
    pub capacity: f64,
    /// Tokens added per second.
    pub refill_per_second: f64,
}

/// The limits of every bucket; [`RateLimits::default`] holds AWS's capacities, EC2's (and STS's and ECR's)
/// refilled at half of AWS's rates, Elastic Load Balancing's at AWS's (module docs).
#[derive(Debug, Clone, PartialEq)]
pub struct RateLimits {
    buckets: HashMap<(Service, ActionClass), BucketLimit>,
    /// ELB and ELBv2 each have an account-level bucket shared by all their actions.
    service_wide: HashMap<Service, BucketLimit>,
}

/// The shared limiter.
#[derive(Debug)]
pub(crate) struct Limiter {
    limits: RateLimits,
    buckets: Mutex<HashMap<BucketKey, Bucket>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum BucketKey {
    Class(Service, ActionClass),
    Service(Service),
}

#[derive(Debug)]
struct Bucket {
    limit: BucketLimit,
    /// May go negative: callers reserve a token and sleep until it exists, which keeps them in arrival order.
    tokens: f64,
    /// Fraction of the nominal refill rate currently applied, in [`MIN_FACTOR`, 1].
    factor: f64,
    last: Instant,
}

/// The longest a call waits for the client-side limiter; a longer wait fails the call at once with a retry
/// delay (an AWS `Throttled` error), so one throttled load balancer does not hold a worker for minutes.
pub const MAX_WAIT: Duration = Duration::from_secs(20);

/// Reserved tokens, given back if dropped (the waiting caller was cancelled); forgotten once spent.
struct Refund<'a> {
    buckets: &'a Mutex<HashMap<BucketKey, Bucket>>,
    keys: Vec<BucketKey>,
}

impl Refund<'_> {
    fn give_back(buckets: &mut HashMap<BucketKey, Bucket>, keys: &[BucketKey]) {
        for key in keys {
            if let Some(bucket) = buckets.get_mut(key) {
                bucket.tokens = (bucket.tokens + 1.0).min(bucket.limit.capacity);
            }
        }
    }
}

impl Drop for Refund<'_> {
    fn drop(&mut self) {
        let mut buckets = self
            .buckets
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        Self::give_back(&mut buckets, &self.keys);
    }
}

/// How long after its token exists a waiting call goes out: more than a call's time to reach AWS varies from one
/// call to the next on a loaded host (module docs).
pub const ADMIT_MARGIN: Duration = Duration::from_millis(100);

const MIN_FACTOR: f64 = 0.1;
const RECOVERY_STEP: f64 = 0.05;

// === impl BucketLimit ===

impl BucketLimit {
    /// A bucket of `capacity` tokens refilled at `refill_per_second`.
    pub const fn new(capacity: f64, refill_per_second: f64) -> Self {
        Self {
            capacity,
            refill_per_second,
        }
    }
}

// === impl RateLimits ===

impl Default for RateLimits {
    fn default() -> Self {
        use ActionClass::*;
        use Service::*;
        let half_rate = |capacity: f64, refill: f64| BucketLimit::new(capacity, refill / 2.0);
        let mut buckets = HashMap::new();
        // EC2 (https://docs.aws.amazon.com/ec2/latest/devguide/ec2-api-throttling.html).
        buckets.insert((Ec2, NonMutating), half_rate(100.0, 20.0));
        buckets.insert((Ec2, LargeDescribe), half_rate(50.0, 10.0));
        buckets.insert((Ec2, Mutating), half_rate(50.0, 5.0));
        buckets.insert((Ec2, ResourceIntensive), half_rate(50.0, 5.0));
        buckets.insert((Ec2, Tags), half_rate(100.0, 10.0));
        // AWS's bucket holds a single token: a burst of two would be throttled.
        buckets.insert((Ec2, Topology), half_rate(1.0, 1.0));
        // ELB and ELBv2 (https://docs.aws.amazon.com/elasticloadbalancing/latest/userguide/elb-api-throttling.html).
        for elb in [Elb, Elbv2] {
            // At AWS's own rates (module docs); a throttling answer (another tool of the account) halves them.
            buckets.insert((elb, ResourceIntensive), BucketLimit::new(10.0, 0.2));
            buckets.insert((elb, Registration), BucketLimit::new(20.0, 4.0));
            buckets.insert((elb, NonMutating), BucketLimit::new(40.0, 10.0));
            buckets.insert((elb, Mutating), BucketLimit::new(20.0, 3.0));
        }
        // STS: 600/s per account; ECR GetAuthorizationToken: 20/s sustained, 200 burst (the older, lower quota).
        buckets.insert((Sts, NonMutating), half_rate(100.0, 20.0));
        buckets.insert((Sts, Mutating), half_rate(100.0, 20.0));
        buckets.insert((Ecr, NonMutating), half_rate(200.0, 20.0));
        let service_wide = HashMap::from([
            (Elb, BucketLimit::new(40.0, 10.0)),
            (Elbv2, BucketLimit::new(40.0, 10.0)),
        ]);
        Self {
            buckets,
            service_wide,
        }
    }
}

impl RateLimits {
    /// No client-side limit at all (tests that count calls, or callers with their own limiter).
    pub fn unlimited() -> Self {
        Self {
            buckets: HashMap::new(),
            service_wide: HashMap::new(),
        }
    }

    /// Sets one bucket's limit.
    #[must_use]
    pub fn with(mut self, service: Service, class: ActionClass, limit: BucketLimit) -> Self {
        self.buckets.insert((service, class), limit);
        self
    }

    /// The limit of a bucket, if limited.
    pub fn get(&self, service: Service, class: ActionClass) -> Option<BucketLimit> {
        self.buckets.get(&(service, class)).copied()
    }
}

// === impl Limiter ===

impl Limiter {
    pub(crate) fn new(limits: RateLimits) -> Self {
        Self {
            limits,
            buckets: Mutex::new(HashMap::new()),
        }
    }

    /// Waits until a call of `class` to `service` may go out; `Err(wait)` at once, with nothing taken, when
    /// that would be longer than [`MAX_WAIT`]: the caller fails with a retry delay instead of holding its
    /// worker (and every caller queued behind it). A caller cancelled while it waits gives its reservation back,
    /// so that those queued after it do not wait for a call that never goes out.
    pub(crate) async fn acquire(&self, service: Service, class: ActionClass) -> Result<(), Duration> {
        let (wait, refund) = {
            let now = Instant::now();
            let mut buckets = self.lock();
            let mut wait = Duration::ZERO;
            let mut keys = Vec::new();
            for key in [BucketKey::Class(service, class), BucketKey::Service(service)] {
                let Some(limit) = self.limit(key) else { continue };
                let bucket = buckets.entry(key).or_insert_with(|| Bucket::new(limit, now));
                wait = wait.max(bucket.reserve(now));
                keys.push(key);
            }
            let refund = Refund {
                buckets: &self.buckets,
                keys,
            };
            if wait > MAX_WAIT {
                Refund::give_back(&mut buckets, &refund.keys);
                std::mem::forget(refund);
                return Err(wait);
            }
            (wait, refund)
        };
        if !wait.is_zero() {
            // Out a little after the token exists, not the instant it does (module docs).
            let wait = wait + ADMIT_MARGIN;
            tracing::debug!(
                ?service,
                ?class,
                ?wait,
                "client-side rate limit: delaying AWS call"
            );
            tokio::time::sleep(wait).await;
        }
        // The call goes out: the tokens are spent.
        std::mem::forget(refund);
        Ok(())
    }

    /// AWS said the call came too fast: slow this bucket down.
    pub(crate) fn throttled(&self, service: Service, class: ActionClass) {
        let now = Instant::now();
        let mut buckets = self.lock();
        for key in [BucketKey::Class(service, class), BucketKey::Service(service)] {
            if let Some(bucket) = buckets.get_mut(&key) {
                bucket.refill(now);
                bucket.factor = (bucket.factor / 2.0).max(MIN_FACTOR);
                bucket.tokens = bucket.tokens.min(0.0);
            }
        }
    }

    /// A call succeeded: recover some of the nominal rate.
    pub(crate) fn succeeded(&self, service: Service, class: ActionClass) {
        let now = Instant::now();
        let mut buckets = self.lock();
        for key in [BucketKey::Class(service, class), BucketKey::Service(service)] {
            if let Some(bucket) = buckets.get_mut(&key)
                && bucket.factor < 1.0
            {
                bucket.refill(now);
                bucket.factor = (bucket.factor + RECOVERY_STEP).min(1.0);
            }
        }
    }

    /// The fraction of the nominal refill rate a bucket currently gets (1.0 when never throttled).
    pub(crate) fn rate_factor(&self, service: Service, class: ActionClass) -> f64 {
        self.lock()
            .get(&BucketKey::Class(service, class))
            .map_or(1.0, |b| b.factor)
    }

    fn limit(&self, key: BucketKey) -> Option<BucketLimit> {
        match key {
            BucketKey::Class(service, class) => self.limits.get(service, class),
            BucketKey::Service(service) => self.limits.service_wide.get(&service).copied(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<BucketKey, Bucket>> {
        // A panic while holding this lock leaves consistent numbers behind: keep going.
        self.buckets
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

// === impl Bucket ===

impl Bucket {
    fn new(limit: BucketLimit, now: Instant) -> Self {
        Self {
            limit,
            tokens: limit.capacity,
            factor: 1.0,
            last: now,
        }
    }

    fn rate(&self) -> f64 {
        (self.limit.refill_per_second * self.factor).max(f64::MIN_POSITIVE)
    }

    fn refill(&mut self, now: Instant) {
        let elapsed = now.saturating_duration_since(self.last).as_secs_f64();
        self.tokens = (self.tokens + elapsed * self.rate()).min(self.limit.capacity);
        self.last = now;
    }

    /// Takes a token and says how long to wait until it exists.
    fn reserve(&mut self, now: Instant) -> Duration {
        self.refill(now);
        self.tokens -= 1.0;
        if self.tokens >= 0.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64((-self.tokens / self.rate()).min(3600.0))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limiter(capacity: f64, refill: f64) -> Limiter {
        Limiter::new(RateLimits::unlimited().with(
            Service::Ec2,
            ActionClass::Mutating,
            BucketLimit::new(capacity, refill),
        ))
    }

    #[tokio::test(start_paused = true)]
    async fn burst_then_refill_rate() {
        let limiter = limiter(5.0, 2.0);
        let start = Instant::now();
        for _ in 0..5 {
            limiter
                .acquire(Service::Ec2, ActionClass::Mutating)
                .await
                .unwrap();
        }
        assert_eq!(start.elapsed(), Duration::ZERO, "the burst is free");
        for _ in 0..4 {
            limiter
                .acquire(Service::Ec2, ActionClass::Mutating)
                .await
                .unwrap();
        }
        // 4 more tokens at 2 per second, the last call out a margin after its token.
        assert_eq!(start.elapsed(), Duration::from_secs(2) + ADMIT_MARGIN);
        // Other buckets are unaffected.
        let before = Instant::now();
        limiter
            .acquire(Service::Ec2, ActionClass::NonMutating)
            .await
            .unwrap();
        assert_eq!(before.elapsed(), Duration::ZERO);
    }

    #[tokio::test(start_paused = true)]
    async fn throttling_halves_the_rate_and_successes_win_it_back() {
        let limiter = limiter(1.0, 10.0);
        limiter
            .acquire(Service::Ec2, ActionClass::Mutating)
            .await
            .unwrap();
        limiter.throttled(Service::Ec2, ActionClass::Mutating);
        limiter.throttled(Service::Ec2, ActionClass::Mutating);
        assert!((limiter.rate_factor(Service::Ec2, ActionClass::Mutating) - 0.25).abs() < 1e-9);
        let start = Instant::now();
        limiter
            .acquire(Service::Ec2, ActionClass::Mutating)
            .await
            .unwrap();
        // One token at 10 * 0.25 per second.
        assert_eq!(start.elapsed(), Duration::from_millis(400) + ADMIT_MARGIN);
        for _ in 0..20 {
            limiter.succeeded(Service::Ec2, ActionClass::Mutating);
        }
        assert!((limiter.rate_factor(Service::Ec2, ActionClass::Mutating) - 1.0).abs() < 1e-9);
        for _ in 0..10 {
            limiter.throttled(Service::Ec2, ActionClass::Mutating);
        }
        assert!((limiter.rate_factor(Service::Ec2, ActionClass::Mutating) - MIN_FACTOR).abs() < 1e-9);
    }

    /// AWS's bucket as AWS keeps it: counted on arrival. Returns how many of the calls it throttled.
    fn throttled_on_arrival(limit: BucketLimit, mut arrivals: Vec<f64>) -> usize {
        arrivals.sort_by(f64::total_cmp);
        let (mut tokens, mut last, mut throttled) = (limit.capacity, arrivals[0], 0);
        for at in arrivals {
            tokens = (tokens + (at - last) * limit.refill_per_second).min(limit.capacity);
            last = at;
            if tokens >= 1.0 {
                tokens -= 1.0;
            } else {
                throttled += 1;
            }
        }
        throttled
    }

    #[tokio::test(start_paused = true)]
    async fn calls_at_aws_rate_are_not_throttled_when_one_reaches_aws_quicker() {
        // CreateLoadBalancer: this bucket as AWS's, 10 tokens refilled at 0.2 a second.
        let create = BucketLimit::new(10.0, 0.2);
        let limiter =
            Limiter::new(RateLimits::unlimited().with(Service::Elb, ActionClass::ResourceIntensive, create));
        let start = Instant::now();
        let mut arrivals = Vec::new();
        for call in 0..30 {
            limiter
                .acquire(Service::Elb, ActionClass::ResourceIntensive)
                .await
                .unwrap();
            // The burst's calls take 30 ms to reach AWS (a loaded host), the later ones 0 to 20 ms.
            let transit = if call < 10 {
                0.030
            } else {
                0.010 * f64::from(call % 3)
            };
            arrivals.push(start.elapsed().as_secs_f64() + transit);
        }
        assert_eq!(throttled_on_arrival(create, arrivals.clone()), 0);
        // Still at AWS's rate: the 30th call goes out 20 tokens after the burst, 100 s, plus the margin.
        let last = arrivals.iter().copied().fold(0.0, f64::max);
        assert!((100.0..100.5).contains(&last), "{last}");
    }

    #[tokio::test(start_paused = true)]
    async fn a_cancelled_wait_gives_its_token_back() {
        let limiter = limiter(1.0, 1.0);
        limiter
            .acquire(Service::Ec2, ActionClass::Mutating)
            .await
            .unwrap();
        // This caller waits 1 s for its token, and is cancelled (its reconcile timed out) after 10 ms.
        let cancelled = tokio::time::timeout(
            Duration::from_millis(10),
            limiter.acquire(Service::Ec2, ActionClass::Mutating),
        )
        .await;
        assert!(cancelled.is_err());
        // The next one waits only for the token the first call spent: 1 s from the start, not 2 s.
        let start = Instant::now();
        limiter
            .acquire(Service::Ec2, ActionClass::Mutating)
            .await
            .unwrap();
        assert_eq!(start.elapsed(), Duration::from_millis(990) + ADMIT_MARGIN);
    }

    #[tokio::test(start_paused = true)]
    async fn a_wait_longer_than_the_bound_fails_at_once_and_takes_nothing() {
        // One token every 10 s: the third caller in a row would wait 20 s, the fourth 30 s.
        let limiter = limiter(1.0, 0.1);
        limiter
            .acquire(Service::Ec2, ActionClass::Mutating)
            .await
            .unwrap();
        let start = Instant::now();
        let second = limiter.acquire(Service::Ec2, ActionClass::Mutating);
        let third = limiter.acquire(Service::Ec2, ActionClass::Mutating);
        let fourth = limiter.acquire(Service::Ec2, ActionClass::Mutating);
        let (second, third, fourth) = tokio::join!(second, third, fourth);
        assert_eq!((second, third), (Ok(()), Ok(())));
        assert_eq!(
            fourth,
            Err(Duration::from_secs(30)),
            "refused, with how long it would have waited"
        );
        assert_eq!(
            start.elapsed(),
            MAX_WAIT + ADMIT_MARGIN,
            "the refused call did not wait"
        );
        // The refused call took no token: the next waits 10 s, not 20 s.
        let start = Instant::now();
        limiter
            .acquire(Service::Ec2, ActionClass::Mutating)
            .await
            .unwrap();
        assert_eq!(start.elapsed(), Duration::from_secs(10));
    }

    #[test]
    fn defaults_burst_as_aws_and_refill_ec2_at_half_but_elb_at_aws_rate() {
        let limits = RateLimits::default();
        let ec2 = limits.get(Service::Ec2, ActionClass::NonMutating).unwrap();
        assert_eq!((ec2.capacity, ec2.refill_per_second), (100.0, 10.0));
        let ec2_mutating = limits.get(Service::Ec2, ActionClass::Mutating).unwrap();
        assert_eq!(
            (ec2_mutating.capacity, ec2_mutating.refill_per_second),
            (50.0, 2.5)
        );
        // DescribeInstanceTopology: AWS's bucket holds one token, refilled at one a second.
        let topology = limits.get(Service::Ec2, ActionClass::Topology).unwrap();
        assert_eq!((topology.capacity, topology.refill_per_second), (1.0, 0.5));
        for elb in [Service::Elb, Service::Elbv2] {
            let create = limits.get(elb, ActionClass::ResourceIntensive).unwrap();
            assert_eq!((create.capacity, create.refill_per_second), (10.0, 0.2));
            // Deletions (DeleteLoadBalancer, DeleteTargetGroup) at AWS's 3 a second, as the Go controller's.
            let mutating = limits.get(elb, ActionClass::Mutating).unwrap();
            assert_eq!((mutating.capacity, mutating.refill_per_second), (20.0, 3.0));
            let registration = limits.get(elb, ActionClass::Registration).unwrap();
            assert_eq!(
                (registration.capacity, registration.refill_per_second),
                (20.0, 4.0)
            );
            let describe = limits.get(elb, ActionClass::NonMutating).unwrap();
            assert_eq!((describe.capacity, describe.refill_per_second), (40.0, 10.0));
            let wide = limits.service_wide[&elb];
            assert_eq!((wide.capacity, wide.refill_per_second), (40.0, 10.0));
        }
    }
}
