use std::time::Duration;

use ccm_aws_api::{AwsError, ErrorKind, InstanceId, RouteTableId};
use ccm_cloud_provider::CloudError;

/// How long a throttled call asks the route controller to wait when AWS suggested no delay: the controller's
/// own period (10 s), so a throttled pass is simply skipped.
const THROTTLED_RETRY_AFTER: Duration = Duration::from_secs(10);

/// Why a route operation failed. Each variant names the value at fault and converts into the [`CloudError`] the
/// route controller acts on (see `impl From<RoutesError> for CloudError`).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RoutesError {
    /// No route table carries the cluster tag (upstream `unable to find route table for AWS cluster`). Tag the
    /// cluster's route table(s) with `kubernetes.io/cluster/<id>` or set `RouteTableID` in the cloud config.
    #[error(
        "unable to find route table for AWS cluster: {cluster} (tag it kubernetes.io/cluster/{cluster_id}=owned or \
         shared, or set RouteTableID in the cloud config)"
    )]
    NoRouteTable {
        /// The cluster name the controller passed.
        cluster: String,
        /// The cluster ID the tag names.
        cluster_id: String,
    },
    /// A route table named by `RouteTableID` does not exist.
    #[error("route table {id} (RouteTableID in the cloud config) does not exist")]
    ConfiguredTableMissing {
        /// The configured table.
        id: RouteTableId,
    },
    /// The route's destination is not a CIDR.
    #[error("invalid destination CIDR {cidr:?}: expected an IPv4 or IPv6 CIDR such as 10.244.1.0/24")]
    InvalidCidr {
        /// The offending value.
        cidr: String,
    },
    /// No live, cluster-tagged instance carries the node's private DNS name. Becomes
    /// [`CloudError::InstanceNotFound`].
    #[error("no instance found for node {node:?}")]
    InstanceNotFound {
        /// The node name.
        node: String,
    },
    /// Several live instances carry the node's private DNS name (upstream `multiple instances found for name`).
    #[error("multiple instances found for node name {node:?}: {ids:?}")]
    MultipleInstances {
        /// The node name.
        node: String,
        /// The matching instances.
        ids: Vec<InstanceId>,
    },
    /// The table already routes the CIDR to something else that is active (another instance, a gateway, ...):
    /// left alone. Once the route controller deletes the stale route (or an operator does), creation succeeds.
    #[error("route table {table} already routes {cidr} to {target}, not to instance {wanted}: left alone")]
    Conflict {
        /// The table.
        table: RouteTableId,
        /// The destination.
        cidr: String,
        /// What the existing route points at.
        target: String,
        /// The instance the route should point at.
        wanted: InstanceId,
    },
    /// The route would point at an instance that is not the cluster's, or not the Node's (an older Node names it):
    /// refused before anything is written (see [`RouteTargets`](crate::RouteTargets)).
    #[error("not routing {cidr} to node {node}: {reason}")]
    Refused {
        /// The destination.
        cidr: String,
        /// The node the route was to point at.
        node: String,
        /// Why the node's instance is no route target.
        reason: String,
    },
    /// An AWS call failed.
    #[error("{what}")]
    Aws {
        /// What was being done.
        what: String,
        /// The AWS error (its kind tells whether to retry).
        #[source]
        source: Box<AwsError>,
    },
}

// === impl RoutesError ===

impl RoutesError {
    pub(crate) fn aws(what: impl Into<String>, source: AwsError) -> Self {
        Self::Aws {
            what: what.into(),
            source: Box::new(source),
        }
    }
}

impl From<RoutesError> for CloudError {
    /// `InstanceNotFound` becomes [`CloudError::InstanceNotFound`]; a throttled AWS call (or one with a suggested
    /// delay) becomes [`CloudError::RetryAfter`]; everything else [`CloudError::Other`] with this error as the
    /// cause (both through [`CloudError::from_failure`]).
    fn from(err: RoutesError) -> Self {
        let retry = match &err {
            RoutesError::InstanceNotFound { .. } => return CloudError::InstanceNotFound,
            RoutesError::Aws { source, .. } => source
                .retry_after()
                .or((source.kind() == ErrorKind::Throttled).then_some(THROTTLED_RETRY_AFTER)),
            _ => None,
        };
        CloudError::from_failure(err, retry)
    }
}
