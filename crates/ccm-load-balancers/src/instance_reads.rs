//! How fresh the instances the load balancers read must be.
//!
//! Every full ensure reads its target instances (which exist, which of their security groups takes the load
//! balancer's rules), through the instance catalog ([`ccm_aws_api::catalog`]). When many Services are ensured one
//! after the other (a cluster's first sync, a fleet of Services created together), an instance read within
//! [`REUSE_FOR`], by this controller or any other reader of the catalog, answers again and only the others are
//! asked: five Services on 480 Nodes read 480 instances, not 2,400. A change to an instance's groups within that
//! time is seen by the next ensure after it, as a change made just after the read would be anyway. An instance
//! EC2 did not show is asked again every time: a brand-new instance may not be visible yet.

use std::time::Duration;

use ccm_aws_api::Freshness;

/// How long an instance read answers the load balancers' next reads.
pub const REUSE_FOR: Duration = Duration::from_secs(30);

/// The freshness the load balancers ask of the catalog.
pub(crate) const FRESHNESS: Freshness = Freshness::within(REUSE_FOR);

/// `ec2` behind a catalog of its own: every lookup reads (the tests' mocks expect each read).
#[cfg(test)]
pub(crate) fn uncached<E>(ec2: E) -> ccm_aws_api::Catalog<E> {
    std::sync::Arc::new(ccm_aws_api::InstanceCatalog::new().with_retention(Duration::ZERO, Duration::ZERO))
        .over(ec2)
}
