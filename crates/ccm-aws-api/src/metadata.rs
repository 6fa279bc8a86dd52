//! The instance metadata port (IMDSv2): who and where the process runs.

use std::future::Future;

use crate::{InstanceId, Result};

/// The instance identity document (`/latest/dynamic/instance-identity/document`), reduced to what is used.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct InstanceIdentity {
    /// The instance.
    pub instance_id: InstanceId,
    /// The region.
    pub region: String,
    /// The availability zone.
    pub availability_zone: String,
    /// The account.
    pub account_id: String,
    /// The instance type.
    pub instance_type: String,
    /// The primary private IPv4 address.
    pub private_ip: Option<String>,
}

/// Instance metadata lookups. A path IMDS does not serve is [`ErrorKind::NotFound`](crate::ErrorKind::NotFound);
/// an unreachable endpoint is `Transient` after the adapter's short timeouts (the process may not run on EC2).
#[cfg_attr(feature = "mock", mockall::automock)]
pub trait Metadata {
    /// `meta-data/instance-id`.
    fn instance_id(&self) -> impl Future<Output = Result<InstanceId>> + Send;

    /// The region (`meta-data/placement/region`).
    fn region(&self) -> impl Future<Output = Result<String>> + Send;

    /// `meta-data/placement/availability-zone`.
    fn availability_zone(&self) -> impl Future<Output = Result<String>> + Send;

    /// The identity document (logged at start-up; carries the account).
    fn identity_document(&self) -> impl Future<Output = Result<InstanceIdentity>> + Send;
}

// === impl InstanceIdentity ===

impl InstanceIdentity {
    /// An identity (for fakes and tests).
    pub fn new(instance_id: InstanceId, region: &str, availability_zone: &str) -> Self {
        Self {
            instance_id,
            region: region.to_owned(),
            availability_zone: availability_zone.to_owned(),
            account_id: String::new(),
            instance_type: String::new(),
            private_ip: None,
        }
    }
}
