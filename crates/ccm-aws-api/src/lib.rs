//! Narrow async port traits per AWS service (Ec2, Elb, Elbv2, Ecr, Sts, Metadata) in domain types, with pages
//! collapsed, and [`AwsError`] carrying an [`ErrorKind`] (not found, throttled, invalid, conflict, ...) and the
//! AWS error code. The `mock` feature generates mockall mocks of every port.
//!
//! ```
//! use ccm_aws_api::{AwsError, ErrorKind};
//!
//! // A port's answer to AWS throttling: callers steer on the kind, never on the AWS error code.
//! let err = AwsError::new(ErrorKind::Throttled, "ec2", "DescribeInstances").with_code("RequestLimitExceeded");
//! assert!(matches!(err.kind(), ErrorKind::Throttled));
//! assert!(err.kind().is_retryable());
//! ```
//!
//! Domain crates (instances, load balancers, routes, tagging, ECR credentials) are written against these traits
//! and test with mocks or fakes; `ccm-aws-sdk` is the one implementation on aws-sdk-rust.
//!
//! Conventions every port follows:
//! - methods are `async` with `Send` futures (`-> impl Future<Output = Result<T>> + Send`), so callers stay
//!   generic and no trait object is needed;
//! - list-returning methods return every page: callers never see paging;
//! - inputs and outputs are plain domain types of this crate, never SDK types;
//! - the EC2, ELB and ELBv2 ports are declared with one macro that also implements them for `Arc<T>` and for
//!   [`Intercept`] (a [`CallHook`] asked before every call), so no wrapper forwards a port by hand; a method that
//!   changes something in AWS names its operation with `#[doc(alias = "...")]` (search the docs for
//!   `CreateRoute` to find the method that calls it), and the hook is told that operation. No method has a
//!   default body: an implementation that misses one does not compile.
//!
//! It also holds the AWS vocabulary every domain crate shares: [`ProviderId`] (a Node's `spec.providerID`, every
//! accepted form, the written form, the instance and zone it names) and [`PROVIDER_NAME`].
//!
//! The wire text every adapter reads the same way lives here too, so that it is tested and fuzzed without the SDK:
//! the instance identity document ([`metadata::InstanceIdentity::from_document`]), the region of a zone
//! ([`metadata::region_of_zone`]) and the IDs an `InvalidInstanceID.NotFound` message names
//! ([`ec2::unknown_instance_ids`]).
//!
//! It holds the instance catalog too ([`InstanceCatalog`]): the one reader of EC2 instances every controller shares, kept
//! here, beside the port it reads through, so that every domain crate can take it without importing another.
//!
//! May depend on: `thiserror`, `serde_json`, `tokio` (the catalog's clock and expiry), `mockall` (feature
//! `mock`). Never on `aws-sdk-*`: domain crates build against these ports in seconds.

#![cfg_attr(
    test,
    allow(
        clippy::too_many_lines,
        reason = "the function limit is for code, not for tests"
    )
)]

// Declares the ports (`port!`), so it comes before them.
#[macro_use]
mod port;

mod error;
mod provider_id;
mod types;

pub mod catalog;
pub mod ec2;
pub mod ecr;
pub mod elb;
pub mod elbv2;
pub mod metadata;
pub mod sts;

pub use catalog::{
    Catalog, CatalogInstance, CatalogLookup, Freshness, InstanceCatalog, InterfaceAddresses, sweep_every,
};
pub use ec2::Ec2;
pub use ecr::Ecr;
pub use elb::Elb;
pub use elbv2::Elbv2;
pub use error::{AwsError, ErrorKind, Result};
pub use metadata::Metadata;
pub use port::{CallHook, Intercept, PortCall};
pub use provider_id::{
    ACCEPTED_FORMS, FARGATE_PREFIX, InstanceRef, PROVIDER_NAME, ProviderId, ProviderIdError, ProviderIdReason,
};
pub use sts::Sts;
pub use types::{
    Filter, InstanceId, NetworkInterfaceId, RouteTableId, SecurityGroupId, SubnetId, Tags, VpcId,
};

// The README's examples compile (and those without `no_run` run) as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeExamples;
