//! Names and tags: the load balancer's name from the Service UID, its managed group's name, the tags both
//! carry, and the words shared by both flavours' messages.

use ccm_aws_api::Tags;
use ccm_tagging::ClusterTags;

use crate::{Error, spec::ServiceSpec};

/// The tag naming the Service of a load balancer.
pub const SERVICE_NAME_TAG: &str = "kubernetes.io/service-name";

/// The load balancer name of a Service, as upstream's `DefaultLoadBalancerName`: `a` followed by the UID without
/// dashes, cut to 32 characters. Stable for the Service's lifetime, so lookups by name are idempotent. Only ASCII
/// alphanumerics are kept (a UUID loses only its dashes, as upstream): a UID of any other shape must neither make a
/// name AWS refuses nor cut a multi-byte character in half (a panic).
pub fn load_balancer_name(uid: &str) -> Result<String, Error> {
    if uid.is_empty() {
        return Err(Error::MissingUid);
    }
    Ok(std::iter::once('a')
        .chain(uid.chars().filter(char::is_ascii_alphanumeric))
        .take(32)
        .collect())
}

/// The managed security group's name for load balancer `lb_name` (`k8s-elb-<name>`).
pub fn security_group_name(lb_name: &str) -> String {
    format!("k8s-elb-{lb_name}")
}

/// The managed security group's description.
pub fn security_group_description(lb_name: &str, spec: &ServiceSpec) -> String {
    format!("Security group for Kubernetes ELB {lb_name} ({})", spec.key())
}

/// The tags of a load balancer: the additional tags, the Service name and the cluster ownership tags (which win).
pub fn load_balancer_tags(cluster: &ClusterTags, spec: &ServiceSpec) -> Tags {
    let mut additional = spec.additional_tags.clone();
    additional.insert(SERVICE_NAME_TAG.to_owned(), spec.key());
    cluster.creation_tags(&additional)
}

/// The tags of the managed security group: the additional tags and the ownership tags.
pub fn security_group_tags(cluster: &ClusterTags, spec: &ServiceSpec) -> Tags {
    let mut additional = spec.additional_tags.clone();
    additional.insert(SERVICE_NAME_TAG.to_owned(), spec.key());
    cluster.creation_tags(&additional)
}

/// A load balancer scheme's AWS name.
pub fn scheme(internal: bool) -> &'static str {
    if internal { "internal" } else { "internet-facing" }
}

/// The Warning notice of a recreation kept back for want of consent: what differs, and how to allow it.
pub fn recreation_withheld_notice(kind: &str, name: &str, reason: &str) -> String {
    format!(
        "{kind} {name} is kept as it is: {reason} needs a new load balancer, whose DNS name would differ; \
         everything else is applied in place. To replace it, annotate the Service \
         service.beta.kubernetes.io/aws-load-balancer-allow-recreation: \"true\" (or run the controller with \
         --allow-load-balancer-recreation), or revert the change"
    )
}

/// The Warning notice of a recreation: what is recreated, why, and what that costs its users.
pub fn recreation_notice(kind: &str, name: &str, reason: &str) -> String {
    format!(
        "recreating {kind} {name}: {reason}; its DNS name changes and traffic is interrupted until the new load \
         balancer is in service"
    )
}
