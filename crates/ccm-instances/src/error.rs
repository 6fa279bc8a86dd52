use std::sync::Arc;

use ccm_aws_api::{AwsError, InstanceId, ProviderIdError};
use ccm_cloud_provider::CloudError;

/// Why an instance lookup failed. Every variant names the value at fault; each converts into the
/// [`CloudError`] the controllers act on: [`InstancesError::InstanceNotFound`] into
/// [`CloudError::InstanceNotFound`], an AWS error with a suggested delay into [`CloudError::RetryAfter`], the rest
/// into [`CloudError::Other`] with this error as the cause.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum InstancesError {
    /// A provider ID (or an instance-ID or Fargate node name) that is not one of the accepted AWS forms. The
    /// Node's `spec.providerID` or name must be fixed; retrying cannot help.
    #[error(transparent)]
    InvalidProviderId(#[from] ProviderIdError),
    /// No instance (or only a terminated one) behind the node: becomes [`CloudError::InstanceNotFound`]. May be
    /// eventual consistency right after launch: retry.
    #[error("no instance found for node {node:?}")]
    InstanceNotFound {
        /// The node name.
        node: String,
    },
    /// Several live instances carry the node's private DNS name (upstream `multiple instances found for name`).
    #[error("multiple instances found for node name {name:?}: {ids:?}")]
    MultipleInstances {
        /// The node name.
        name: String,
        /// The matching instances.
        ids: Vec<InstanceId>,
    },
    /// Several attached network interfaces carry a Fargate node's IP.
    #[error("multiple network interfaces found for Fargate address {ip}: {ids:?}")]
    MultipleInterfaces {
        /// The address.
        ip: String,
        /// The matching interfaces.
        ids: Vec<String>,
    },
    /// EC2 reported an address that is not an IP (upstream `EC2 instance had invalid private address`).
    #[error("EC2 instance {instance} had invalid {kind} address {address:?}")]
    InvalidAddress {
        /// The instance.
        instance: InstanceId,
        /// `private`, `public` or `IPv6`.
        kind: &'static str,
        /// The offending value.
        address: String,
    },
    /// The Nodes' zone label holds zone IDs ([`ZoneForm::Id`](crate::ZoneForm::Id)), but
    /// `DescribeAvailabilityZones` lists no ID for the node's zone (even after a refresh): the Node is not
    /// initialized rather than labelled with a zone name among zone IDs. The controller retries.
    #[error(
        "node {node:?}: DescribeAvailabilityZones lists no zone ID for zone {zone:?}, and NodeZoneLabel = ZoneID \
         labels Nodes with zone IDs only"
    )]
    NoZoneId {
        /// The node name.
        node: String,
        /// The zone name of its instance.
        zone: String,
    },
    /// An AWS call failed; retry later (the cause tells whether an operator is needed).
    #[error("{what}")]
    Aws {
        /// What was being looked up.
        what: String,
        /// The failed call.
        #[source]
        source: Arc<AwsError>,
    },
}

// === impl InstancesError ===

impl InstancesError {
    pub(crate) fn aws(what: impl Into<String>, source: Arc<AwsError>) -> Self {
        Self::Aws {
            what: what.into(),
            source,
        }
    }
}

impl From<InstancesError> for CloudError {
    /// `InstanceNotFound` becomes [`CloudError::InstanceNotFound`]; everything else goes through
    /// [`CloudError::from_failure`] (after the delay AWS suggested, if any), keeping this error as the cause.
    fn from(err: InstancesError) -> Self {
        let retry = match &err {
            InstancesError::InstanceNotFound { .. } => return CloudError::InstanceNotFound,
            InstancesError::Aws { source, .. } => source.retry_after(),
            _ => None,
        };
        CloudError::from_failure(err, retry)
    }
}
