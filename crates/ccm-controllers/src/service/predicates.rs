//! The service controller's pure rules (upstream `wantsLoadBalancer`, `needsCleanup`, `needsUpdate`, the stable
//! node-set predicates, `shouldSyncUpdatedNode`, `nodesSufficientlyEqual`).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{LoadBalancerIngress, Node, Service, ServicePort};

use crate::keys::{FINALIZER_LB_CLEANUP, LABEL_EXCLUDE_FROM_LB, TAINT_TO_BE_DELETED};

/// Type `LoadBalancer` without a `spec.loadBalancerClass`: any class means another controller owns it.
pub fn wants_load_balancer(svc: &Service) -> bool {
    svc.spec
        .as_ref()
        .is_some_and(|s| s.type_.as_deref() == Some("LoadBalancer") && s.load_balancer_class.is_none())
}

/// Whether the Service carries this controller's finalizer.
pub fn has_finalizer(svc: &Service) -> bool {
    svc.metadata
        .finalizers
        .as_ref()
        .is_some_and(|f| f.iter().any(|f| f == FINALIZER_LB_CLEANUP))
}

/// Has our finalizer and is being deleted or no longer of type `LoadBalancer`.
pub fn needs_cleanup(svc: &Service) -> bool {
    has_finalizer(svc)
        && (svc.metadata.deletion_timestamp.is_some()
            || svc.spec.as_ref().and_then(|s| s.type_.as_deref()) != Some("LoadBalancer"))
}

fn ports_equal(a: &[ServicePort], b: &[ServicePort]) -> bool {
    a.len() == b.len()
        && a.iter().zip(b).all(|(x, y)| {
            x.name == y.name
                && x.protocol == y.protocol
                && x.port == y.port
                && x.node_port == y.node_port
                && x.target_port == y.target_port
                && x.app_protocol == y.app_protocol
        })
}

/// Whether a change from `old` to `new` needs the load balancer to be ensured again.
pub fn needs_update(old: &Service, new: &Service) -> bool {
    let (wo, wn) = (wants_load_balancer(old), wants_load_balancer(new));
    if !wo && !wn {
        return false;
    }
    if wo != wn {
        return true;
    }
    let (Some(o), Some(n)) = (old.spec.as_ref(), new.spec.as_ref()) else {
        return true;
    };
    let empty = Vec::new();
    let or_empty = |v: &Option<Vec<String>>| v.clone().unwrap_or_default();
    or_empty(&o.load_balancer_source_ranges) != or_empty(&n.load_balancer_source_ranges)
        || !ports_equal(
            o.ports.as_ref().unwrap_or(&Vec::new()),
            n.ports.as_ref().unwrap_or(&Vec::new()),
        )
        || o.session_affinity != n.session_affinity
        || o.session_affinity_config != n.session_affinity_config
        || o.load_balancer_ip != n.load_balancer_ip
        || or_empty(&o.external_ips) != or_empty(&n.external_ips)
        || old.metadata.annotations.clone().unwrap_or_default()
            != new.metadata.annotations.clone().unwrap_or_default()
        || old.metadata.uid != new.metadata.uid
        || o.external_traffic_policy != n.external_traffic_policy
        || o.health_check_node_port != n.health_check_node_port
        || o.ip_families.as_ref().unwrap_or(&empty).len() != n.ip_families.as_ref().unwrap_or(&empty).len()
}

/// Go's `strconv.ParseBool`.
fn parse_bool(s: &str) -> Option<bool> {
    match s {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Some(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Some(false),
        _ => None,
    }
}

/// `node.kubernetes.io/exclude-from-external-load-balancers` absent or false; any other value excludes.
pub fn node_included(node: &Node) -> bool {
    match node
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(LABEL_EXCLUDE_FROM_LB))
    {
        None => true,
        Some(v) => parse_bool(v) == Some(false),
    }
}

/// The stable node set: not being deleted, included, not tainted `ToBeDeletedByClusterAutoscaler`. Readiness
/// does not matter (left to the load balancer's health checks).
pub fn in_stable_node_set(node: &Node) -> bool {
    node.metadata.deletion_timestamp.is_none()
        && node_included(node)
        && !node
            .spec
            .as_ref()
            .and_then(|s| s.taints.as_ref())
            .is_some_and(|t| t.iter().any(|t| t.key == TAINT_TO_BE_DELETED))
}

/// What of a node matters for load balancer membership.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeSummary {
    /// Passes [`node_included`].
    pub included: bool,
    /// Passes [`in_stable_node_set`].
    pub stable: bool,
    /// `spec.providerID`.
    pub provider_id: String,
}

impl NodeSummary {
    /// The summary of a node.
    pub fn of(node: &Node) -> Self {
        Self {
            included: node_included(node),
            stable: in_stable_node_set(node),
            provider_id: node
                .spec
                .as_ref()
                .and_then(|s| s.provider_id.clone())
                .unwrap_or_default(),
        }
    }
}

/// Whether an updated node can change any load balancer's hosts (upstream `shouldSyncUpdatedNode`).
pub fn should_sync_updated_node(old: &NodeSummary, new: &NodeSummary) -> bool {
    old != new
}

/// Node name to provider ID of a host set; two sets are "sufficiently equal" when these maps are equal.
pub fn host_set(nodes: &[&Node]) -> BTreeMap<String, String> {
    nodes
        .iter()
        .map(|n| {
            (
                n.metadata.name.clone().unwrap_or_default(),
                n.spec
                    .as_ref()
                    .and_then(|s| s.provider_id.clone())
                    .unwrap_or_default(),
            )
        })
        .collect()
}

/// Upstream `LoadBalancerStatusEqual` with `Semantic.DeepEqual`: only the ingress list, absent equals empty.
pub fn ingress_equal(a: Option<&Vec<LoadBalancerIngress>>, b: Option<&Vec<LoadBalancerIngress>>) -> bool {
    let empty = Vec::new();
    a.unwrap_or(&empty) == b.unwrap_or(&empty)
}
