//! Names and tags: the load balancer's name from the Service UID, its managed group's name, the tags both
//! carry, and the words shared by both flavours' messages.

use ccm_aws_api::Tags;
use ccm_tagging::ClusterTags;
use k8s_openapi::api::core::v1::Service;

use crate::{
    Error,
    annotations::{Annotations, Key},
    spec::ServiceSpec,
};

/// The tag naming the Service of a load balancer.
pub const SERVICE_NAME_TAG: &str = "kubernetes.io/service-name";

/// The tag naming the UID of the Service incarnation a resource was made (or last claimed) for: it tells a
/// Service from an earlier incarnation of the same name (see [`crate::ownership`]).
pub const SERVICE_UID_TAG: &str = "kubernetes.io/service-uid";

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

/// The name of the Service's load balancer: `aws-load-balancer-name` when given, else the UID name
/// ([`load_balancer_name`]).
pub fn service_load_balancer_name(spec: &ServiceSpec) -> Result<String, Error> {
    match &spec.load_balancer_name {
        Some(chosen) => Ok(chosen.clone()),
        None => load_balancer_name(&spec.uid),
    }
}

/// Whether `name` is a name AWS accepts for a Classic ELB or an NLB: 1 to 32 ASCII letters, digits and
/// hyphens, no hyphen first or last, not beginning with `internal-` (AWS prefixes internal load balancers'
/// DNS names with it).
pub fn is_load_balancer_name(name: &str) -> bool {
    (1..=32).contains(&name.len())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
        && !name.starts_with('-')
        && !name.ends_with('-')
        && !name.to_ascii_lowercase().starts_with("internal-")
}

/// The load balancer names a DNS name may carry, most likely first: AWS names a load balancer's DNS
/// `[internal-]<name>-<id>.<region>.elb.amazonaws.com` (an NLB's `...elb.<region>.amazonaws.com`), moto also
/// `<name>.<region>...` for Classic ELBs, so both the first label without its last `-<id>` and the whole label
/// are candidates (each one a valid name). A caller looks them up; none is trusted for being here.
pub fn names_in_hostname(hostname: &str) -> Vec<String> {
    let label = hostname.split('.').next().unwrap_or_default();
    let label = label.strip_prefix("internal-").unwrap_or(label);
    let mut names: Vec<String> = label
        .rsplit_once('-')
        .map(|(name, _)| name)
        .into_iter()
        .chain([label])
        .filter(|n| is_load_balancer_name(n))
        .map(str::to_owned)
        .collect();
    names.dedup();
    names
}

/// The load balancer names the Service's status hostnames carry (candidates, see [`names_in_hostname`]).
pub fn status_names(service: &Service) -> Vec<String> {
    let mut names: Vec<String> = service
        .status
        .as_ref()
        .and_then(|s| s.load_balancer.as_ref())
        .and_then(|lb| lb.ingress.as_ref())
        .into_iter()
        .flatten()
        .filter_map(|i| i.hostname.as_deref())
        .flat_map(names_in_hostname)
        .collect();
    names.dedup();
    names
}

/// Whether the Service's status shows a load balancer under another name than `wanted` (its name changed since
/// it was made, and the change is not yet applied): the old names, else none. Without a status naming `wanted`,
/// the names the service controller recorded before earlier ensures count too
/// ([`ccm_cloud_provider::ANNOTATION_LOAD_BALANCER_NAMES`]): a load balancer made by an ensure that failed later
/// is renamed like one the status shows, not left behind.
pub fn renamed_from(service: &k8s_openapi::api::core::v1::Service, wanted: &str) -> Vec<String> {
    let mut old = status_names(service);
    if old.iter().any(|n| n == wanted) {
        return Vec::new();
    }
    for name in recorded_names(service) {
        if name != wanted && !old.contains(&name) {
            old.push(name);
        }
    }
    old
}

/// The names recorded on the Service that are valid load balancer names (anything else is ignored: the
/// annotation can be edited by the Service's author, and every name is claimed before anything is done to it).
fn recorded_names(service: &Service) -> Vec<String> {
    ccm_cloud_provider::recorded_load_balancer_names(service)
        .into_iter()
        .filter(|n| is_load_balancer_name(n))
        .collect()
}

/// The name the Service's load balancer should have now (`None` without a UID).
pub fn wanted_name(service: &Service) -> Option<String> {
    let raw = service.metadata.annotations.clone().unwrap_or_default();
    match Annotations::parse(&raw).text(Key::LoadBalancerName) {
        Some(chosen) => Some(chosen.to_owned()),
        None => load_balancer_name(service.metadata.uid.as_deref().unwrap_or_default()).ok(),
    }
}

/// Every name a load balancer of the Service may have, the wanted one first, then those its status shows, then
/// those recorded before its ensures, then the UID name; without duplicates.
pub fn all_names(service: &Service) -> Vec<String> {
    let uid = load_balancer_name(service.metadata.uid.as_deref().unwrap_or_default()).ok();
    let mut names: Vec<String> = Vec::new();
    for name in wanted_name(service)
        .into_iter()
        .chain(status_names(service))
        .chain(recorded_names(service))
        .chain(uid)
    {
        if !names.contains(&name) {
            names.push(name);
        }
    }
    names
}

/// The managed security group's name for load balancer `lb_name` (`k8s-elb-<name>`).
pub fn security_group_name(lb_name: &str) -> String {
    format!("k8s-elb-{lb_name}")
}

/// The managed security group's description.
pub fn security_group_description(lb_name: &str, spec: &ServiceSpec) -> String {
    format!("Security group for Kubernetes ELB {lb_name} ({})", spec.key())
}

/// The tag recording which keys `aws-load-balancer-additional-resource-tags` applied to a resource (space
/// separated, sorted): on the resource itself, so that a key dropped from the annotation is removed from it by any
/// later process, and tags added by hand never are.
pub const ANNOTATION_TAGS_MARKER: &str = "kubernetes.io/additional-resource-tags";

/// The same record as the Go controller writes it on an NLB and its listeners and target groups since its pull
/// request #1447 (keys sorted, comma separated). Read beside ours, and written on NLBs, so that a key dropped
/// under either controller is removed by the other after a takeover or a rollback.
pub const UPSTREAM_TAGS_MARKER: &str = "kubernetes.io/cloud-controller/managed-tags";

/// The tags of an NLB and its listeners and target groups: a load balancer's ([`load_balancer_tags`]) with the
/// record of the annotation's keys also under the Go controller's key ([`UPSTREAM_TAGS_MARKER`]).
pub fn network_load_balancer_tags(cluster: &ClusterTags, spec: &ServiceSpec) -> Tags {
    let mut tags = load_balancer_tags(cluster, spec);
    if let Some(record) = tags.get(ANNOTATION_TAGS_MARKER) {
        let upstream = record.replace(' ', ",");
        tags.insert(UPSTREAM_TAGS_MARKER.to_owned(), upstream);
    }
    tags
}

/// The tag that hands a load balancer over to a Service of the cluster `cluster_id` (its key,
/// `kubernetes.io/hand-over/<cluster ID>`; the value is `<namespace>/<name>`): set by an operator, or by this
/// controller when a deletion releases the load balancer. A Service annotated `aws-load-balancer-adopt` adopts it.
pub fn hand_over_key(cluster_id: &str) -> String {
    format!("{HAND_OVER_TAG_PREFIX}{cluster_id}")
}

/// The prefix of [`hand_over_key`].
pub const HAND_OVER_TAG_PREFIX: &str = "kubernetes.io/hand-over/";

/// The tag recording that a load balancer was adopted (`true`): the Service's deletion then releases it
/// instead of deleting it, unless `aws-load-balancer-release-on-deletion` says `false`.
pub const ADOPTED_TAG: &str = "kubernetes.io/adopted";

/// The tag keys a release removes: this cluster's ownership tags, the Service's name and UID, and the adoption
/// record. The additional tags and their records stay (a Service that adopts the load balancer again takes them over).
pub fn released_keys(cluster: &ClusterTags) -> Vec<String> {
    cluster
        .ownership_tags()
        .into_keys()
        .chain(
            [SERVICE_NAME_TAG, SERVICE_UID_TAG, ADOPTED_TAG]
                .into_iter()
                .map(str::to_owned),
        )
        .collect()
}

/// The tags of a load balancer: the additional tags with their marker, the Service name and UID and the cluster
/// ownership tags (which win).
pub fn load_balancer_tags(cluster: &ClusterTags, spec: &ServiceSpec) -> Tags {
    let mut additional = spec.additional_tags.clone();
    if let Some(marker) = annotation_tags_marker(&spec.additional_tags) {
        additional.insert(ANNOTATION_TAGS_MARKER.to_owned(), marker);
    }
    additional.insert(SERVICE_NAME_TAG.to_owned(), spec.key());
    additional.insert(SERVICE_UID_TAG.to_owned(), spec.uid.clone());
    cluster.creation_tags(&additional)
}

/// The tags of the managed security group: as a load balancer's.
pub fn security_group_tags(cluster: &ClusterTags, spec: &ServiceSpec) -> Tags {
    load_balancer_tags(cluster, spec)
}

/// The marker's value for `additional` tags: their keys, sorted, space separated, as many as fit in a tag
/// value (256 characters); a key with a space is left out (it would read back as two). `None` without keys.
fn annotation_tags_marker(additional: &Tags) -> Option<String> {
    let mut value = String::new();
    for key in additional.keys().filter(|k| !k.contains(char::is_whitespace)) {
        if value.len() + key.len() + 1 > 256 {
            tracing::warn!(key = %key, "too many additional tags to record them all: this key will not be removed when dropped");
            continue;
        }
        if !value.is_empty() {
            value.push(' ');
        }
        value.push_str(key);
    }
    (!value.is_empty()).then_some(value)
}

/// The tags to add or overwrite on a resource tagged `current` to reach `desired` ([`ccm_tagging::additions`]);
/// but a resource without a record of the annotation's keys, or without a Service UID, gets them only along with
/// another change of its tags, so that a load balancer taken over from the Go controller (or made before records
/// and UIDs) is not written to for them alone: the takeover writes nothing but the nodes' rules. Such load
/// balancers are under their Service's UID name, which carries the UID already; the ownership claim takes a
/// missing UID tag as this Service's ([`crate::ownership`]). A UID of another incarnation is overwritten at once
/// (the re-created Service took the load balancer over).
pub fn tag_additions(current: &Tags, desired: &Tags) -> Tags {
    let add = ccm_tagging::additions(current, desired);
    let deferred = |k: &String| {
        (k == ANNOTATION_TAGS_MARKER || k == UPSTREAM_TAGS_MARKER || k == SERVICE_UID_TAG)
            && !current.contains_key(k.as_str())
    };
    if add.keys().all(deferred) {
        return Tags::new();
    }
    add
}

/// The keys to remove from a resource tagged `current` to reach `desired`: those its records say the annotation
/// applied (ours, space separated, or the Go controller's, comma separated: [`UPSTREAM_TAGS_MARKER`]) and that
/// `desired` no longer has, and each record itself once `desired` has none. Keys no record names (added by hand,
/// or before records existed) are never removed, nor are the controller's own tags.
pub fn dropped_tags(current: &Tags, desired: &Tags) -> Vec<String> {
    let records = [(ANNOTATION_TAGS_MARKER, ' '), (UPSTREAM_TAGS_MARKER, ',')];
    let mut dropped: Vec<String> = records
        .iter()
        .filter_map(|(key, separator)| current.get(*key).map(|v| v.split(*separator)))
        .flatten()
        .filter(|k| !k.is_empty() && current.contains_key(*k) && !desired.contains_key(*k))
        .filter(|k| !ccm_tagging::is_ownership_key(k) && !is_record_or_service_tag(k))
        .map(str::to_owned)
        .collect();
    for (key, _) in records {
        if current.contains_key(key) && !desired.contains_key(key) {
            dropped.push(key.to_owned());
        }
    }
    dropped.sort();
    dropped.dedup();
    dropped
}

/// The controller's own tags besides the cluster's: never removed as an annotation's key.
fn is_record_or_service_tag(key: &str) -> bool {
    [
        SERVICE_NAME_TAG,
        SERVICE_UID_TAG,
        ANNOTATION_TAGS_MARKER,
        UPSTREAM_TAGS_MARKER,
    ]
    .contains(&key)
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
