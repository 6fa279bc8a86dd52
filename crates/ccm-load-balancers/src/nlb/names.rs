//! The names of an NLB's resources, exactly as upstream makes them (so that resources made by the Go controller
//! are found after a migration): target groups and the managed security group.

use sha1::Sha1;
use sha2::{Digest, Sha256};

use super::HealthCheck;
use crate::spec::ServiceSpec;

fn sha256_hex(input: &str) -> String {
    Sha256::digest(input.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn alnum_prefix(s: &str, n: usize) -> String {
    s.chars().filter(char::is_ascii_alphanumeric).take(n).collect()
}

/// `k8s-<namespace:8>-<name:8>-` (non-alphanumeric characters dropped): how upstream begins the names of a
/// Service's target groups and managed group.
pub(crate) fn name_prefix(namespace: &str, name: &str) -> String {
    format!("k8s-{}-{}-", alnum_prefix(namespace, 8), alnum_prefix(name, 8))
}

/// The target group name of one listener, exactly as upstream names it, so that the groups of NLBs made by the Go
/// controller are found (and kept) after a migration: `k8s-<namespace:8>-<name:8>-<hash:10>` (non-alphanumeric
/// characters dropped), the hash being the first 10 hex digits of sha1 over the cluster ID, namespace, name,
/// port, node port, target protocol, target type (`instance`), health check protocol and interval. A change of
/// any of those needs a new group (AWS cannot change the first ones in place; upstream names the last two too);
/// every other health check field is modified in place.
pub fn target_group_name(
    cluster_id: &str,
    spec: &ServiceSpec,
    port: i32,
    node_port: i32,
    protocol: &str,
    health_check: &HealthCheck,
) -> String {
    hashed_group_name(
        cluster_id,
        spec,
        port,
        &node_port.to_string(),
        protocol,
        "instance",
        health_check,
    )
}

/// The target group name of one listener with IP targets: as [`target_group_name`], with the target port (its
/// number, or the name of a named port) for the node port and `ip` for the target type, so that a change between
/// instance and IP targets, or of the target port, is a new group.
pub fn ip_target_group_name(
    cluster_id: &str,
    spec: &ServiceSpec,
    port: i32,
    target_port: &str,
    protocol: &str,
    health_check: &HealthCheck,
) -> String {
    hashed_group_name(cluster_id, spec, port, target_port, protocol, "ip", health_check)
}

fn hashed_group_name(
    cluster_id: &str,
    spec: &ServiceSpec,
    port: i32,
    back_port: &str,
    protocol: &str,
    target_type: &str,
    health_check: &HealthCheck,
) -> String {
    let mut hasher = Sha1::new();
    for part in [
        cluster_id,
        &spec.namespace,
        &spec.name,
        &port.to_string(),
        back_port,
        protocol,
        target_type,
        &health_check.protocol,
        &health_check.interval.to_string(),
    ] {
        hasher.update(part.as_bytes());
    }
    // IPv6 targets: a group of another family (AWS fixes it at creation). IPv4 names stay upstream's.
    if spec.ipv6_targets {
        hasher.update(b"ipv6");
    }
    let hash: String = hasher.finalize().iter().map(|b| format!("{b:02x}")).collect();
    format!("{}{}", name_prefix(&spec.namespace, &spec.name), &hash[..10])
}

/// The managed security group's name, as upstream: `k8s-<namespace:8>-<name:8>-<hash:10>`, the hash being
/// sha256 hex of `<cluster name><name><namespace><uid>` (`cluster_name` is the controller's `--cluster-name`).
pub fn managed_group_name(cluster_name: &str, namespace: &str, name: &str, uid: &str) -> String {
    let hash = sha256_hex(&format!("{cluster_name}{name}{namespace}{uid}"));
    format!("{}{}", name_prefix(namespace, name), &hash[..10])
}

/// The name a target group takes when its upstream name ([`target_group_name`]) belongs to a group that another
/// load balancer uses: in practice the NLB of a previous Service of the same namespace, name and ports, deleted
/// and re-created (its finalizer stripped) while that NLB is still being deleted. Upstream's names carry no
/// Service UID, so both incarnations want the same name; the new one must neither take over nor wait for the
/// old one's group. Same prefix, the hash being the first 10 hex digits of sha1 over the upstream name and the
/// load balancer's own name (which carries the Service UID). The upstream name stays the first choice, so
/// groups made by the Go controller are still found after a migration.
pub fn successor_target_group_name(upstream: &str, load_balancer: &str) -> String {
    let mut hasher = Sha1::new();
    hasher.update(upstream.as_bytes());
    hasher.update(b"/");
    hasher.update(load_balancer.as_bytes());
    let hash: String = hasher.finalize().iter().map(|b| format!("{b:02x}")).collect();
    let prefix = upstream.rsplit_once('-').map_or(upstream, |(prefix, _)| prefix);
    format!("{prefix}-{}", &hash[..10])
}
