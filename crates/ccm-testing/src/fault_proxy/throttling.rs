//! The throttling mode of the fault proxy: AWS's documented token buckets for one account, so that what an
//! emulator never does (throttle) is in the loop. A request finds its buckets; when one of them lacks the tokens
//! it needs, the proxy answers with the service's throttling error and the request never reaches the emulator;
//! else it takes them and goes on. Tokens refill continuously at each bucket's rate, up to its capacity; every
//! bucket starts full.
//!
//! How AWS documents its buckets, and so what this mode does (figures in `aws_limits.rs`; the table and the
//! choices made where AWS is silent: docs/performance.md, "AWS's rate limits in the loop"):
//!
//! - **EC2** evaluates "each API individually": every action has a request bucket of its own, sized by its
//!   category (non-mutating, mutating, resource-intensive), or by its own row for the uncategorized actions.
//!   Seven `Describe*` actions asked without a filter and without pagination take from a smaller bucket instead
//!   (unfiltered and unpaginated). `RunInstances`, `StartInstances`, `StopInstances` and `TerminateInstances`
//!   also take one token per instance from a resource bucket.
//! - **Elastic Load Balancing** has one bucket per category (resource-intensive, registration, non-mutating,
//!   mutating) for each API version (Classic ELB's and ELBv2's), and each request also takes a token from the
//!   version's account-level bucket.
//!
//! Only the query APIs are throttled (told apart by the request's `Version`); JSON APIs (ECR) and STS pass.
//! Time is tokio's, so that tests can pause it; token amounts are integers (millionths of millionths of a
//! token), so that the same calls at the same instants always get the same answers.

use std::collections::{BTreeMap, HashMap};

use tokio::time::Instant;

use super::aws_limits::{
    EC2_RESOURCE_INTENSIVE, EC2_RESOURCES, EC2_UNCATEGORIZED, EC2_UNFILTERED_SUBSET, ELB_REGISTRATION,
    ELB_RESOURCE_INTENSIVE, ELBV2_REGISTRATION, ELBV2_RESOURCE_INTENSIVE, ELBV2_UNCATEGORIZED,
};

/// The AWS query APIs the throttling mode knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum Api {
    /// EC2 (`Version=2016-11-15`).
    Ec2,
    /// Classic Elastic Load Balancing, ELB API version 1 (`Version=2012-06-01`).
    Elb,
    /// Elastic Load Balancing version 2: NLBs, ALBs (`Version=2015-12-01`).
    Elbv2,
}

/// AWS's throttling categories (EC2's and Elastic Load Balancing's pages name them alike).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum ActionClass {
    /// `Describe*`, `List*`, `Search*`, `Get*`.
    NonMutating,
    /// EC2: one of seven `Describe*` actions asked with no filter, no pagination and no ID list.
    UnfilteredUnpaginated,
    /// Every other action.
    Mutating,
    /// The slowest mutating actions (EC2 security group rules, a load balancer's creation and subnets).
    ResourceIntensive,
    /// Elastic Load Balancing: registering and deregistering targets or instances.
    Registration,
    /// An action with a bucket size of its own.
    Uncategorized,
}

/// A token bucket's size and refill rate.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Limit {
    /// Tokens the bucket holds when full (the burst).
    pub capacity: f64,
    /// Tokens added per second, continuously (rounded to thousandths).
    pub refill_per_second: f64,
}

/// The buckets of one account: sizes and refill rates per API and class, per action for the uncategorized ones.
/// [`Throttling::aws_documented`] holds AWS's figures; the `with_*` methods change one bucket (tests use small
/// ones). Given to [`FaultProxy::set_throttling`](super::FaultProxy::set_throttling).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Throttling {
    classes: BTreeMap<(Api, ActionClass), Limit>,
    actions: BTreeMap<(Api, String), Limit>,
    resources: BTreeMap<String, Limit>,
    accounts: BTreeMap<Api, Limit>,
}

/// One bucket of the account.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum BucketKey {
    /// An EC2 action's request bucket; its unfiltered and unpaginated requests have a second one.
    Ec2Request { action: String, unfiltered: bool },
    /// An EC2 action's resource bucket (tokens per instance).
    Ec2Resource(String),
    /// An Elastic Load Balancing category's bucket, shared by its actions.
    ElbClass(Api, ActionClass),
    /// An uncategorized Elastic Load Balancing action's bucket.
    ElbAction(Api, String),
    /// An Elastic Load Balancing version's account-level bucket, shared by every action.
    ElbAccount(Api),
}

/// One unit of token amounts: a token is `PICO` of them.
const PICO: u128 = 1_000_000_000_000;

#[derive(Debug)]
struct Bucket {
    /// In millionths of millionths of a token.
    capacity: u128,
    /// Thousandths of a token per second, which are millionths of millionths of a token per nanosecond.
    refill_milli: u128,
    tokens: u128,
    last: Instant,
}

/// The account's buckets as time goes (the proxy's state while the throttling mode is on).
#[derive(Debug)]
pub(super) struct Throttler {
    config: Throttling,
    buckets: HashMap<BucketKey, Bucket>,
}

// === impl Api ===

impl Api {
    /// The API of a query request's `Version` parameter; `None` for other APIs.
    pub fn from_version(version: &str) -> Option<Self> {
        match version {
            "2016-11-15" => Some(Self::Ec2),
            "2012-06-01" => Some(Self::Elb),
            "2015-12-01" => Some(Self::Elbv2),
            _ => None,
        }
    }
}

// === impl Limit ===

impl Limit {
    /// A bucket of `capacity` tokens refilled at `refill_per_second`.
    pub const fn new(capacity: f64, refill_per_second: f64) -> Self {
        Self {
            capacity,
            refill_per_second,
        }
    }
}

// === impl Throttling ===

impl Throttling {
    /// AWS's documented buckets: EC2's request and resource buckets ("Request throttling for the Amazon EC2
    /// API"), Classic ELB's and ELBv2's category and account-level buckets ("Request throttling for the
    /// Elastic Load Balancing API").
    pub fn aws_documented() -> Self {
        use ActionClass::{Mutating, NonMutating, Registration, ResourceIntensive, UnfilteredUnpaginated};
        let mut t = Self::default()
            .with_class(Api::Ec2, NonMutating, Limit::new(100.0, 20.0))
            .with_class(Api::Ec2, UnfilteredUnpaginated, Limit::new(50.0, 10.0))
            .with_class(Api::Ec2, Mutating, Limit::new(50.0, 5.0))
            .with_class(Api::Ec2, ResourceIntensive, Limit::new(50.0, 5.0));
        t.actions
            .extend(table(EC2_UNCATEGORIZED).map(|(a, l)| ((Api::Ec2, a), l)));
        t.resources.extend(table(EC2_RESOURCES));
        for elb in [Api::Elb, Api::Elbv2] {
            t = t
                .with_class(elb, ResourceIntensive, Limit::new(10.0, 0.2))
                .with_class(elb, Registration, Limit::new(20.0, 4.0))
                .with_class(elb, NonMutating, Limit::new(40.0, 10.0))
                .with_class(elb, Mutating, Limit::new(20.0, 3.0))
                .with_account(elb, Limit::new(40.0, 10.0));
        }
        t.actions
            .extend(table(ELBV2_UNCATEGORIZED).map(|(a, l)| ((Api::Elbv2, a), l)));
        t
    }

    /// The same buckets with `class` of `api` sized `limit` (EC2: each action of the class gets a bucket so).
    #[must_use]
    pub fn with_class(mut self, api: Api, class: ActionClass, limit: Limit) -> Self {
        self.classes.insert((api, class), limit);
        self
    }

    /// The same buckets with `action` of `api` in a bucket of its own sized `limit` (an uncategorized action).
    #[must_use]
    pub fn with_action(mut self, api: Api, action: &str, limit: Limit) -> Self {
        self.actions.insert((api, action.to_owned()), limit);
        self
    }

    /// The same buckets with EC2 `action` taking one token per instance from a resource bucket sized `limit`.
    #[must_use]
    pub fn with_resource(mut self, action: &str, limit: Limit) -> Self {
        self.resources.insert(action.to_owned(), limit);
        self
    }

    /// The same buckets with `api`'s account-level bucket sized `limit`.
    #[must_use]
    pub fn with_account(mut self, api: Api, limit: Limit) -> Self {
        self.accounts.insert(api, limit);
        self
    }

    /// The size of `class`'s buckets in `api`, if it has any.
    pub fn class_limit(&self, api: Api, class: ActionClass) -> Option<Limit> {
        self.classes.get(&(api, class)).copied()
    }

    /// The class of a request of `action` to `api` whose form-encoded body is `form`.
    pub fn classify(&self, api: Api, action: &str, form: &str) -> ActionClass {
        if self.actions.contains_key(&(api, action.to_owned())) {
            return ActionClass::Uncategorized;
        }
        let (intensive, registration) = match api {
            Api::Ec2 => (EC2_RESOURCE_INTENSIVE, &[][..]),
            Api::Elb => (ELB_RESOURCE_INTENSIVE, ELB_REGISTRATION),
            Api::Elbv2 => (ELBV2_RESOURCE_INTENSIVE, ELBV2_REGISTRATION),
        };
        if ["Describe", "List", "Search", "Get"]
            .iter()
            .any(|p| action.starts_with(p))
        {
            if api == Api::Ec2 && EC2_UNFILTERED_SUBSET.contains(&action) && !narrowed(form) {
                ActionClass::UnfilteredUnpaginated
            } else {
                ActionClass::NonMutating
            }
        } else if intensive.contains(&action) {
            ActionClass::ResourceIntensive
        } else if registration.contains(&action) {
            ActionClass::Registration
        } else {
            ActionClass::Mutating
        }
    }

    /// The buckets a request takes from, each with its limit and the tokens it needs.
    fn buckets(&self, api: Api, action: &str, form: &str) -> Vec<(BucketKey, Limit, u64)> {
        let class = self.classify(api, action, form);
        let own = self.actions.get(&(api, action.to_owned())).copied();
        let of_class = self.classes.get(&(api, class)).copied();
        let mut out = Vec::new();
        match api {
            Api::Ec2 => {
                let unfiltered = class == ActionClass::UnfilteredUnpaginated;
                let key = BucketKey::Ec2Request {
                    action: action.to_owned(),
                    unfiltered,
                };
                out.extend(own.or(of_class).map(|l| (key, l, 1)));
                if let Some(&limit) = self.resources.get(action) {
                    let key = BucketKey::Ec2Resource(action.to_owned());
                    out.push((key, limit, instances(action, form)));
                }
            }
            Api::Elb | Api::Elbv2 => {
                match own {
                    Some(l) => out.push((BucketKey::ElbAction(api, action.to_owned()), l, 1)),
                    None => out.extend(of_class.map(|l| (BucketKey::ElbClass(api, class), l, 1))),
                }
                let account = self.accounts.get(&api).copied();
                out.extend(account.map(|l| (BucketKey::ElbAccount(api), l, 1)));
            }
        }
        out
    }
}

/// The rows of one of `aws_limits`' tables as limits by action.
fn table(rows: &'static [(&'static str, f64, f64)]) -> impl Iterator<Item = (String, Limit)> {
    rows.iter().map(|&(a, c, r)| (a.to_owned(), Limit::new(c, r)))
}

/// Whether a request names a filter, a page (`MaxResults`, `NextToken`) or a list of IDs or names
/// (`InstanceId.1`, `GroupName.1`, ...): then it is not "unfiltered and unpaginated".
fn narrowed(form: &str) -> bool {
    params(form).any(|(key, _)| {
        key.starts_with("Filter.")
            || key == "MaxResults"
            || key == "NextToken"
            || key.split_once('.').is_some_and(|(name, n)| {
                (name.ends_with("Id") || name.ends_with("Name")) && n.parse::<u32>().is_ok()
            })
    })
}

/// The instances a resource-limited EC2 request affects: `RunInstances`' `MaxCount`, the others' instance IDs;
/// at least one.
fn instances(action: &str, form: &str) -> u64 {
    let n = if action == "RunInstances" {
        params(form)
            .find(|(key, _)| *key == "MaxCount")
            .and_then(|(_, v)| v.parse().ok())
            .unwrap_or(1)
    } else {
        let ids = params(form).filter(|(key, _)| key.starts_with("InstanceId."));
        u64::try_from(ids.count()).unwrap_or(u64::MAX)
    };
    n.max(1)
}

/// The parameters of a form-encoded body, names and values as sent (the names read here are never encoded).
fn params(form: &str) -> impl Iterator<Item = (&str, &str)> {
    form.split('&')
        .filter(|p| !p.is_empty())
        .map(|p| p.split_once('=').unwrap_or((p, "")))
}

// === impl Bucket ===

impl Bucket {
    fn full(limit: Limit, now: Instant) -> Self {
        // Negative or NaN figures saturate to 0 (an always empty bucket), never panic.
        let capacity = (limit.capacity * 1e12).round() as u128;
        Self {
            capacity,
            refill_milli: (limit.refill_per_second * 1e3).round() as u128,
            tokens: capacity,
            last: now,
        }
    }

    fn refill(&mut self, now: Instant) {
        let elapsed = now.saturating_duration_since(self.last).as_nanos();
        let added = elapsed.saturating_mul(self.refill_milli);
        self.tokens = self.tokens.saturating_add(added).min(self.capacity);
        self.last = now;
    }
}

// === impl Throttler ===

impl Throttler {
    pub(super) fn new(config: Throttling) -> Self {
        Self {
            config,
            buckets: HashMap::new(),
        }
    }

    /// Whether the account's buckets hold the tokens a request needs at `now`; takes them from every bucket when
    /// they do, from none when one lacks them (a throttled request costs nothing, as on AWS).
    pub(super) fn admit(&mut self, api: Api, action: &str, form: &str, now: Instant) -> bool {
        let wanted = self.config.buckets(api, action, form);
        let mut enough = true;
        for (key, limit, cost) in &wanted {
            let bucket = self
                .buckets
                .entry(key.clone())
                .or_insert_with(|| Bucket::full(*limit, now));
            bucket.refill(now);
            enough &= bucket.tokens >= u128::from(*cost) * PICO;
        }
        if enough {
            for (key, _, cost) in &wanted {
                if let Some(bucket) = self.buckets.get_mut(key) {
                    bucket.tokens = bucket.tokens.saturating_sub(u128::from(*cost) * PICO);
                }
            }
        }
        enough
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use tokio::time::advance;

    use super::*;

    const EC2: &str = "Version=2016-11-15";

    /// Sends `n` requests of `action` now and returns how many passed.
    fn burst(t: &mut Throttler, api: Api, action: &str, form: &str, n: usize) -> usize {
        (0..n)
            .filter(|_| t.admit(api, action, form, Instant::now()))
            .count()
    }

    fn aws() -> Throttler {
        Throttler::new(Throttling::aws_documented())
    }

    #[tokio::test(start_paused = true)]
    async fn a_full_bucket_lets_its_capacity_through_then_refills_at_its_rate() {
        let mut t = aws();
        let form = format!("Action=CreateRoute&{EC2}");
        // Mutating: 50 tokens, 5 a second.
        assert_eq!(burst(&mut t, Api::Ec2, "CreateRoute", &form, 60), 50);
        advance(Duration::from_millis(199)).await;
        assert_eq!(
            burst(&mut t, Api::Ec2, "CreateRoute", &form, 5),
            0,
            "not a whole token yet"
        );
        advance(Duration::from_millis(1)).await;
        assert_eq!(burst(&mut t, Api::Ec2, "CreateRoute", &form, 5), 1);
        advance(Duration::from_secs(3)).await;
        assert_eq!(burst(&mut t, Api::Ec2, "CreateRoute", &form, 20), 15);
        // Never more than the capacity, however long the pause.
        advance(Duration::from_secs(3600)).await;
        assert_eq!(burst(&mut t, Api::Ec2, "CreateRoute", &form, 60), 50);
    }

    #[tokio::test(start_paused = true)]
    async fn a_fractional_rate_makes_a_token_in_several_seconds() {
        let mut t = aws();
        let form = "Action=CreateLoadBalancer&Version=2012-06-01";
        // Classic ELB resource-intensive: 10 tokens, 0.2 a second.
        assert_eq!(burst(&mut t, Api::Elb, "CreateLoadBalancer", form, 12), 10);
        advance(Duration::from_millis(4999)).await;
        assert_eq!(burst(&mut t, Api::Elb, "CreateLoadBalancer", form, 1), 0);
        advance(Duration::from_millis(1)).await;
        assert_eq!(burst(&mut t, Api::Elb, "CreateLoadBalancer", form, 2), 1);
        // ELBv2 has buckets of its own: its CreateLoadBalancer still has all ten.
        let v2 = "Action=CreateLoadBalancer&Version=2015-12-01";
        assert_eq!(burst(&mut t, Api::Elbv2, "CreateLoadBalancer", v2, 12), 10);
    }

    #[tokio::test(start_paused = true)]
    async fn ec2_actions_have_a_bucket_each_and_unfiltered_listings_a_smaller_one() {
        let mut t = aws();
        let subnets = format!("Action=DescribeSubnets&{EC2}");
        assert_eq!(burst(&mut t, Api::Ec2, "DescribeSubnets", &subnets, 120), 100);
        // Another action of the same class is not affected (AWS: "each API is evaluated individually").
        let vpcs = format!("Action=DescribeVpcs&{EC2}");
        assert_eq!(burst(&mut t, Api::Ec2, "DescribeVpcs", &vpcs, 120), 100);
        let all = format!("Action=DescribeInstances&{EC2}");
        assert_eq!(burst(&mut t, Api::Ec2, "DescribeInstances", &all, 70), 50);
        let by_filter =
            format!("Action=DescribeInstances&{EC2}&Filter.1.Name=private-dns-name&Filter.1.Value.1=a");
        assert_eq!(burst(&mut t, Api::Ec2, "DescribeInstances", &by_filter, 120), 100);
        advance(Duration::from_secs(1)).await;
        // One second: 10 unfiltered tokens, 20 filtered ones.
        assert_eq!(burst(&mut t, Api::Ec2, "DescribeInstances", &all, 30), 10);
        assert_eq!(burst(&mut t, Api::Ec2, "DescribeInstances", &by_filter, 30), 20);
    }

    #[test]
    fn classes_follow_the_documented_lists() {
        let aws = Throttling::aws_documented();
        let ec2 = |action: &str, extra: &str| {
            aws.classify(Api::Ec2, action, &format!("Action={action}&{EC2}{extra}"))
        };
        use ActionClass::*;
        assert_eq!(ec2("DescribeInstances", ""), UnfilteredUnpaginated);
        assert_eq!(ec2("DescribeInstances", "&MaxResults=1000"), NonMutating);
        assert_eq!(ec2("DescribeInstances", "&NextToken=abc"), NonMutating);
        assert_eq!(ec2("DescribeInstances", "&InstanceId.1=i-1"), NonMutating);
        assert_eq!(ec2("DescribeSecurityGroups", "&GroupId.1=sg-1"), NonMutating);
        assert_eq!(
            ec2("DescribeSecurityGroups", "&DryRun=false"),
            UnfilteredUnpaginated
        );
        assert_eq!(
            ec2("DescribeSubnets", ""),
            NonMutating,
            "not in the smaller bucket's list"
        );
        assert_eq!(ec2("AuthorizeSecurityGroupIngress", ""), ResourceIntensive);
        assert_eq!(ec2("ModifyInstanceAttribute", ""), Mutating);
        assert_eq!(ec2("CreateTags", ""), Uncategorized);
        assert_eq!(ec2("DescribeInstanceTopology", ""), Uncategorized);
        let elb = |api, action: &str| aws.classify(api, action, "");
        assert_eq!(elb(Api::Elb, "CreateLoadBalancer"), ResourceIntensive);
        assert_eq!(elb(Api::Elb, "AttachLoadBalancerToSubnets"), ResourceIntensive);
        assert_eq!(elb(Api::Elb, "RegisterInstancesWithLoadBalancer"), Registration);
        assert_eq!(elb(Api::Elb, "DescribeLoadBalancerAttributes"), NonMutating);
        assert_eq!(elb(Api::Elb, "ConfigureHealthCheck"), Mutating);
        assert_eq!(elb(Api::Elbv2, "SetSubnets"), ResourceIntensive);
        assert_eq!(elb(Api::Elbv2, "DeregisterTargets"), Registration);
        assert_eq!(elb(Api::Elbv2, "DescribeTargetHealth"), NonMutating);
        assert_eq!(elb(Api::Elbv2, "ModifyListener"), Mutating);
        assert_eq!(elb(Api::Elbv2, "DescribeTrustStores"), Uncategorized);
        assert_eq!(
            elb(Api::Elbv2, "RegisterInstancesWithLoadBalancer"),
            Mutating,
            "a Classic ELB name"
        );
        assert_eq!(
            aws.class_limit(Api::Ec2, UnfilteredUnpaginated),
            Some(Limit::new(50.0, 10.0))
        );
    }

    #[tokio::test(start_paused = true)]
    async fn every_elb_request_also_takes_from_the_account_bucket() {
        let mut t = aws();
        let v2 = |a: &str| format!("Action={a}&Version=2015-12-01");
        // Mutating: 20 tokens; the account: 40.
        assert_eq!(burst(&mut t, Api::Elbv2, "AddTags", &v2("AddTags"), 25), 20);
        // Non-mutating holds 40, but the account has 20 left.
        assert_eq!(
            burst(&mut t, Api::Elbv2, "DescribeTags", &v2("DescribeTags"), 40),
            20
        );
        // Classic ELB's account is its own.
        let v1 = "Action=DescribeTags&Version=2012-06-01";
        assert_eq!(burst(&mut t, Api::Elb, "DescribeTags", v1, 50), 40);
        // Throttled requests took nothing: a second refills one token of the account (10 a second, 10 used).
        advance(Duration::from_millis(100)).await;
        assert_eq!(
            burst(&mut t, Api::Elbv2, "DescribeTags", &v2("DescribeTags"), 5),
            1
        );
    }

    #[tokio::test(start_paused = true)]
    async fn run_instances_takes_a_resource_token_per_instance() {
        let mut t = aws();
        let run = |n: u32| format!("Action=RunInstances&{EC2}&MaxCount={n}&MinCount=1&ImageId=ami-1");
        assert!(t.admit(Api::Ec2, "RunInstances", &run(600), Instant::now()));
        // 400 resource tokens left: refused, and the request bucket (5, one used) keeps its four.
        assert!(!t.admit(Api::Ec2, "RunInstances", &run(600), Instant::now()));
        assert!(t.admit(Api::Ec2, "RunInstances", &run(400), Instant::now()));
        assert!(!t.admit(Api::Ec2, "RunInstances", &run(1), Instant::now()));
        advance(Duration::from_millis(500)).await;
        assert!(t.admit(Api::Ec2, "RunInstances", &run(1), Instant::now()));
        let terminate = format!("Action=TerminateInstances&{EC2}&InstanceId.1=i-1&InstanceId.2=i-2");
        assert_eq!(instances("TerminateInstances", &terminate), 2);
        assert_eq!(
            instances("RunInstances", &format!("Action=RunInstances&{EC2}")),
            1
        );
    }

    #[test]
    fn a_bucket_of_nonsense_figures_is_empty_not_a_panic() {
        let config =
            Throttling::default().with_class(Api::Ec2, ActionClass::Mutating, Limit::new(f64::NAN, -1.0));
        let mut t = Throttler::new(config);
        assert!(!t.admit(Api::Ec2, "CreateRoute", EC2, Instant::now()));
        // No bucket configured: no limit.
        assert!(t.admit(Api::Elb, "CreateLoadBalancer", "", Instant::now()));
    }

    #[tokio::test(start_paused = true)]
    async fn the_proxy_answers_throttling_counts_it_and_keeps_queued_faults() {
        use crate::fault_proxy::{Fault, FaultProxy, Request, record};
        let proxy = FaultProxy::start("http://127.0.0.1:9").await.unwrap();
        let small = Throttling::aws_documented().with_action(Api::Ec2, "DescribeVpcs", Limit::new(2.0, 1.0));
        proxy.set_throttling(Some(small));
        let request = |body: String, target: Option<&str>| Request {
            method: "POST".into(),
            path: "/".into(),
            headers: target
                .map(|t| ("X-Amz-Target".to_owned(), t.to_owned()))
                .into_iter()
                .collect(),
            body: body.into_bytes(),
        };
        let vpcs = request(format!("Action=DescribeVpcs&{EC2}"), None);
        let send = || record(&proxy.state, &vpcs, "DescribeVpcs");
        let mut faults = vec![send(), send()];
        proxy.inject("DescribeVpcs", Fault::error(500, "InternalError"), 1);
        faults.extend([send(), send()]);
        advance(Duration::from_secs(1)).await;
        faults.extend([send(), send()]);
        let throttle = Some(Fault::Throttle);
        let queued = Some(Fault::error(500, "InternalError"));
        assert_eq!(
            faults,
            [None, None, throttle.clone(), throttle.clone(), queued, throttle]
        );
        assert_eq!(
            proxy.throttled_by_action(),
            BTreeMap::from([("DescribeVpcs".to_owned(), 3)])
        );
        assert_eq!(proxy.requests("DescribeVpcs"), 6);
        // JSON APIs are not throttled.
        let ecr = request(
            String::new(),
            Some("AmazonEC2ContainerRegistry_V20150921.GetAuthorizationToken"),
        );
        assert_eq!(record(&proxy.state, &ecr, "GetAuthorizationToken"), None);
        // Off means off; the counts stay.
        proxy.set_throttling(None);
        assert_eq!(record(&proxy.state, &vpcs, "DescribeVpcs"), None);
        assert_eq!(proxy.throttled_by_action()["DescribeVpcs"], 3);
    }
}
