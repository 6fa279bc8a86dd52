//! The crate's error type: why a load balancer could not be ensured, updated or deleted, and how each error
//! maps to the controller's [`CloudError`] (waiting, retrying after a delay, or failing).

use ccm_aws_api::AwsError;
use ccm_cloud_provider::CloudError;

use crate::InvalidService;

/// Why a load balancer could not be ensured, updated or deleted.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The Service's annotations or fields are invalid: fix the Service (nothing was changed in AWS).
    #[error(transparent)]
    Invalid(#[from] InvalidService),
    /// The Service has no `metadata.uid`, from which the load balancer name derives.
    #[error("the Service has no metadata.uid: the load balancer name derives from it")]
    MissingUid,
    /// An AWS call failed.
    #[error("{context}")]
    Aws {
        /// What was being done.
        context: &'static str,
        /// The failed call.
        #[source]
        source: Box<AwsError>,
    },
    /// Subnets named by the annotation do not all exist in the cluster's VPC.
    #[error(
        "service.beta.kubernetes.io/aws-load-balancer-subnets: {unmatched:?} match no single subnet of the \
         cluster's VPC (each entry must be the ID of one of its subnets or the Name tag of exactly one; found \
         {found:?}): fix the annotation"
    )]
    SubnetsNotFound {
        /// What the annotation names.
        wanted: Vec<String>,
        /// The entries that matched no subnet, or (a name) several.
        unmatched: Vec<String>,
        /// The subnets found.
        found: Vec<String>,
    },
    /// A dual-stack NLB was asked for on subnets without IPv6 CIDR blocks (AWS would refuse it after the managed
    /// group was made): nothing is changed until the subnets or the annotation are fixed.
    #[error(
        "service.beta.kubernetes.io/aws-load-balancer-ip-address-type=dualstack needs subnets with IPv6 CIDR \
         blocks, but {subnets:?} have none: add IPv6 CIDR blocks to them, pin other subnets with the subnets \
         annotation, or use ipv4"
    )]
    SubnetsWithoutIpv6 {
        /// The subnets lacking an IPv6 CIDR block.
        subnets: Vec<String>,
    },
    /// Discovery found no subnet.
    #[error(
        "could not find any suitable subnets for creating the ELB in {vpc} (internal: {internal}): tag subnets \
         kubernetes.io/role/elb (public) or kubernetes.io/role/internal-elb, or set the subnets annotation"
    )]
    NoSubnets {
        /// The VPC searched.
        vpc: String,
        /// Whether an internal load balancer was wanted.
        internal: bool,
    },
    /// An instance has several candidate groups for the load balancer's rule.
    #[error(
        "multiple {what} security groups found for instance {instance}: {groups:?}; ensure only the cluster's \
         security group is tagged kubernetes.io/cluster/<id>"
    )]
    AmbiguousInstanceGroups {
        /// The instance.
        instance: String,
        /// The candidates.
        groups: Vec<String>,
        /// `cluster-tagged` or `untagged`.
        what: &'static str,
    },
    /// A resource found by name carries another cluster's tag.
    #[error(transparent)]
    Ownership(#[from] ccm_tagging::OwnershipError),
    /// A security group under the load balancer's managed-group name belongs to another cluster (or is `shared`
    /// with this one): it is never tagged, changed, attached or deleted. Nothing was changed in AWS.
    #[error(
        "security group {name} ({group}) has this load balancer's managed-group name but is tagged {tags:?}: it \
         is never tagged, changed, attached or deleted by this cluster; delete or rename it, or give the Service \
         its groups with service.beta.kubernetes.io/aws-load-balancer-security-groups"
    )]
    ForeignGroup {
        /// The group's ID.
        group: String,
        /// The group's name.
        name: String,
        /// Its cluster tags, as `key=value`.
        tags: Vec<String>,
    },
    /// A load balancer exists under the Service's name but this cluster does not own it: it is never modified,
    /// adopted or deleted. Nothing was changed in AWS.
    #[error(transparent)]
    NotOurs(#[from] crate::ownership::NotOurs),
    /// The Service's chosen load balancer name (`aws-load-balancer-name`) is taken by a load balancer of another
    /// Service, or of nothing this cluster owns: it is never modified, adopted or deleted. Nothing was changed.
    #[error(
        "load balancer name {name} is taken: its load balancer belongs to {held_by}, so it is left alone; choose \
         another name in service.beta.kubernetes.io/aws-load-balancer-name"
    )]
    NameTaken {
        /// The name.
        name: String,
        /// What holds it (`Service ns/name`, or `nothing of this cluster`).
        held_by: String,
    },
    /// The annotated health-check port is none of the ports a Service may open on its nodes: nothing was written.
    #[error(
        "service.beta.kubernetes.io/aws-load-balancer-healthcheck-port={port} is refused: the health-check port is \
         opened on every target node, so it must be one of this Service's node ports, its healthCheckNodePort, \
         the shared health probe's port or a port the cloud config allows ([Global] AllowedHealthCheckPorts); \
         allowed here: {allowed}"
    )]
    HealthCheckPortRefused {
        /// The refused port.
        port: i32,
        /// The ports allowed for this Service, comma-separated.
        allowed: String,
    },
    /// The load balancer to update does not exist (yet): the next full sync creates it.
    #[error("load balancer {0} not found")]
    NotFound(String),
    /// A security group is still in use (AWS releases a deleted load balancer's interfaces after a while).
    #[error("security group {group} of load balancer {name} is still in use; retrying")]
    GroupInUse {
        /// The group.
        group: String,
        /// The load balancer.
        name: String,
    },
    /// A target group is still in use (AWS detaches a deleted NLB's listeners after a while).
    #[error("target group {group} of load balancer {name} is still in use; retrying")]
    TargetGroupInUse {
        /// The target group's name.
        group: String,
        /// The load balancer.
        name: String,
    },
    /// The NLB has deletion protection on, which the Service does not turn off: AWS refuses to delete it.
    #[error(
        "NLB {0} has deletion protection on (attribute deletion_protection.enabled), so AWS refuses to delete it: \
         it is kept, with the Service, until the Service's annotation \
         service.beta.kubernetes.io/aws-load-balancer-attributes says deletion_protection.enabled=false"
    )]
    DeletionProtected(String),
    /// A consented recreation of an adopted load balancer, whose deletion would release it rather than delete it:
    /// refused before anything is written, unless the Service says `aws-load-balancer-release-on-deletion: "false"`.
    #[error(
        "load balancer {0} was adopted, so its Service's deletion releases it rather than deleting it, and a \
         recreation (which deletes it) is refused too; to recreate it, annotate the Service \
         service.beta.kubernetes.io/aws-load-balancer-release-on-deletion: \"false\", or revert the change"
    )]
    AdoptedNotRecreated(String),
    /// The NLB is in state `failed`: AWS could not provision it. Delete the Service's load balancer (set the
    /// Service type to ClusterIP and back) or fix what AWS reports for it.
    #[error("NLB {0} is in state failed: AWS could not provision it")]
    LoadBalancerFailed(String),
}

/// The first retry delay of a deletion that waits on a resource AWS still holds (the service controller grows it).
const IN_USE_RETRY: std::time::Duration = std::time::Duration::from_secs(10);

// === impl Error ===

impl Error {
    /// A mapper of an [`AwsError`] with context, for `map_err`.
    pub fn aws(context: &'static str) -> impl Fn(AwsError) -> Self {
        move |source| Self::Aws {
            context,
            source: Box::new(source),
        }
    }
}

impl From<Error> for CloudError {
    /// Deletions waiting on AWS become [`CloudError::Waiting`]; everything else goes through
    /// [`CloudError::from_failure`] (after the delay AWS suggested, if any), keeping this error as the cause.
    fn from(err: Error) -> Self {
        match err {
            // Expected after a deletion, for minutes: progress that waits, not a failure.
            Error::GroupInUse { group, name } => CloudError::waiting(
                format!(
                    "AWS to release security group {group} of the deleted load balancer {name} (its network \
                     interfaces are still draining)"
                ),
                IN_USE_RETRY,
            ),
            Error::TargetGroupInUse { group, name } => CloudError::waiting(
                format!("AWS to release target group {group} of the deleted load balancer {name}"),
                IN_USE_RETRY,
            ),
            Error::Aws { ref source, .. } => {
                let retry = source.retry_after();
                CloudError::from_failure(err, retry)
            }
            other => CloudError::from_failure(other, None),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use ccm_aws_api::ErrorKind;

    use super::*;

    fn aws(kind: ErrorKind) -> AwsError {
        AwsError::new(kind, "elb", "CreateLoadBalancerListeners").with_code("Boom")
    }

    /// The cause is kept as the source (so it can be downcast) and is not repeated in the message, which the
    /// controllers print followed by the chain of sources.
    #[test]
    fn an_aws_failure_keeps_its_source_and_prints_its_cause_once() {
        let err = CloudError::from(Error::aws("creating the listeners")(aws(ErrorKind::Permanent)));
        assert_eq!(err.to_string(), "creating the listeners");
        let source = std::error::Error::source(&err).expect("source kept");
        let ours = source
            .downcast_ref::<Error>()
            .expect("the crate's error is the source");
        assert!(matches!(ours, Error::Aws { .. }));
        assert!(std::error::Error::source(ours).is_some_and(|s| s.to_string().contains("Boom")));
    }

    #[test]
    fn a_suggested_delay_retries_after_it_naming_the_cause() {
        let throttled = aws(ErrorKind::Throttled).with_retry_after(Duration::from_secs(7));
        let err = CloudError::from(Error::aws("creating the listeners")(throttled));
        assert_eq!(err.retry_delay(), Some(Duration::from_secs(7)));
        assert!(
            err.to_string()
                .starts_with("creating the listeners: elb CreateLoadBalancerListeners failed")
        );
    }

    #[test]
    fn errors_without_a_cause_keep_their_type() {
        let err = CloudError::from(Error::MissingUid);
        assert_eq!(err.to_string(), Error::MissingUid.to_string());
        let source = std::error::Error::source(&err).expect("source kept");
        assert!(matches!(source.downcast_ref::<Error>(), Some(Error::MissingUid)));
    }
}
