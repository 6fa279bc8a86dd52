//! The service controller's pure rules (upstream `wantsLoadBalancer`, `needsCleanup`, `needsUpdate`, the stable
//! node-set predicates, `shouldSyncUpdatedNode`, `nodesSufficientlyEqual`).

use ccm_cloud_provider::NodeView;
use std::{
    collections::BTreeMap,
    hash::{Hash, Hasher},
};

use k8s_openapi::{
    api::core::v1::{LoadBalancerIngress, Service, ServiceSpec, SessionAffinityConfig},
    apimachinery::pkg::util::intstr::IntOrString,
};

use crate::{
    instances::{name_of, provider_id_of},
    keys::{FINALIZER_LB_CLEANUP, LABEL_EXCLUDE_FROM_LB, TAINT_TO_BE_DELETED},
};

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

/// What of a Service its load balancer depends on: the fields [`needs_update`] compares, borrowed, absent lists
/// and maps counting as empty (upstream `needsUpdate`). One list for both the comparison and the fingerprint
/// the Service watch keeps ([`SeenService`]).
#[derive(PartialEq)]
struct UpdateKey<'a> {
    source_ranges: &'a [String],
    ports: Vec<PortKey<'a>>,
    session_affinity: Option<&'a str>,
    session_affinity_config: Option<&'a SessionAffinityConfig>,
    load_balancer_ip: Option<&'a str>,
    external_ips: &'a [String],
    /// `None` when empty.
    annotations: Option<&'a BTreeMap<String, String>>,
    uid: Option<&'a str>,
    external_traffic_policy: Option<&'a str>,
    health_check_node_port: Option<i32>,
    ip_families: usize,
}

/// What of a port the load balancer depends on.
#[derive(PartialEq)]
struct PortKey<'a> {
    name: Option<&'a str>,
    protocol: Option<&'a str>,
    port: i32,
    node_port: Option<i32>,
    target_port: Option<&'a IntOrString>,
    app_protocol: Option<&'a str>,
}

impl<'a> UpdateKey<'a> {
    fn of(svc: &'a Service, spec: &'a ServiceSpec) -> Self {
        Self {
            source_ranges: spec.load_balancer_source_ranges.as_deref().unwrap_or_default(),
            ports: (spec.ports.iter().flatten())
                .map(|p| PortKey {
                    name: p.name.as_deref(),
                    protocol: p.protocol.as_deref(),
                    port: p.port,
                    node_port: p.node_port,
                    target_port: p.target_port.as_ref(),
                    app_protocol: p.app_protocol.as_deref(),
                })
                .collect(),
            session_affinity: spec.session_affinity.as_deref(),
            session_affinity_config: spec.session_affinity_config.as_ref(),
            load_balancer_ip: spec.load_balancer_ip.as_deref(),
            external_ips: spec.external_ips.as_deref().unwrap_or_default(),
            annotations: svc.metadata.annotations.as_ref().filter(|a| !a.is_empty()),
            uid: svc.metadata.uid.as_deref(),
            external_traffic_policy: spec.external_traffic_policy.as_deref(),
            health_check_node_port: spec.health_check_node_port,
            ip_families: spec.ip_families.as_ref().map_or(0, Vec::len),
        }
    }
}

impl Hash for UpdateKey<'_> {
    fn hash<H: Hasher>(&self, h: &mut H) {
        self.source_ranges.hash(h);
        self.ports.len().hash(h);
        for p in &self.ports {
            (p.name, p.protocol, p.port, p.node_port, p.app_protocol).hash(h);
            match p.target_port {
                None => 0u8.hash(h),
                Some(IntOrString::Int(i)) => (1u8, i).hash(h),
                Some(IntOrString::String(s)) => (2u8, s).hash(h),
            }
        }
        (self.session_affinity, self.load_balancer_ip).hash(h);
        // No `Hash` on the generated type: its JSON, which is equal exactly when the values are.
        (self.session_affinity_config)
            .map(|c| serde_json::to_string(c).unwrap_or_default())
            .hash(h);
        (self.external_ips, self.annotations, self.uid).hash(h);
        (
            self.external_traffic_policy,
            self.health_check_node_port,
            self.ip_families,
        )
            .hash(h);
    }
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
    UpdateKey::of(old, o) != UpdateKey::of(new, n)
}

/// What the service controller remembers of each Service it has seen, for [`needs_update`] and
/// [`needs_cleanup`] on its next event: a hash of the fields `needs_update` compares instead of a whole copy of
/// the Service (about 4 KB each, the third copy beside the shared store's and the processed version's).
///
/// `SeenService::of(old).needs_update_to(&SeenService::of(new)) == needs_update(old, new)` for any two Services,
/// but for a 64-bit hash collision between two versions of one Service.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SeenService {
    wants_load_balancer: bool,
    needs_cleanup: bool,
    /// Of the fields `needs_update` compares; 0 when the Service wants no load balancer.
    fingerprint: u64,
}

impl SeenService {
    /// What `svc` shows now.
    pub fn of(svc: &Service) -> Self {
        let wants = wants_load_balancer(svc);
        Self {
            wants_load_balancer: wants,
            needs_cleanup: needs_cleanup(svc),
            fingerprint: if wants { update_fingerprint(svc) } else { 0 },
        }
    }

    /// Whether the Service wants a load balancer or its cleanup: whether a first sight of it is queued.
    pub fn is_of_interest(&self) -> bool {
        self.wants_load_balancer || self.needs_cleanup
    }

    /// [`needs_update`] from the version this was taken of to the one `new` was.
    pub fn needs_update_to(&self, new: &Self) -> bool {
        (self.wants_load_balancer || new.wants_load_balancer)
            && (self.wants_load_balancer != new.wants_load_balancer || self.fingerprint != new.fingerprint)
    }

    /// Whether the Service's cleanup starts with `new` ([`needs_cleanup`] was false and is true).
    pub fn cleanup_starts(&self, new: &Self) -> bool {
        new.needs_cleanup && !self.needs_cleanup
    }
}

/// A hash of what [`needs_update`] compares.
fn update_fingerprint(svc: &Service) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    if let Some(spec) = &svc.spec {
        UpdateKey::of(svc, spec).hash(&mut h);
    }
    h.finish()
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
pub fn node_included(node: &NodeView) -> bool {
    match node.labels.get(LABEL_EXCLUDE_FROM_LB) {
        None => true,
        Some(v) => parse_bool(v) == Some(false),
    }
}

/// The stable node set: not being deleted, included, not tainted `ToBeDeletedByClusterAutoscaler`. Readiness
/// does not matter (left to the load balancer's health checks).
pub fn in_stable_node_set(node: &NodeView) -> bool {
    node.deletion_timestamp.is_none()
        && node_included(node)
        && !node.taints.iter().any(|t| t.key == TAINT_TO_BE_DELETED)
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
    pub fn of(node: &NodeView) -> Self {
        Self {
            included: node_included(node),
            stable: in_stable_node_set(node),
            provider_id: node.provider_id.clone().unwrap_or_default(),
        }
    }
}

/// Whether an updated node can change any load balancer's hosts (upstream `shouldSyncUpdatedNode`). The service
/// controller also syncs on a change of a Node's labels, which a provider may pick targets by.
pub fn should_sync_updated_node(old: &NodeSummary, new: &NodeSummary) -> bool {
    old != new
}

/// Node name to provider ID of a host set; two sets are "sufficiently equal" when these maps are equal.
pub fn host_set(nodes: &[&NodeView]) -> BTreeMap<String, String> {
    nodes
        .iter()
        .map(|n| (n.name.clone(), n.provider_id.clone().unwrap_or_default()))
        .collect()
}

/// A host as the service controller compares host sets: its provider ID, as [`host_set`], and a fingerprint of its
/// labels. A provider may pick a load balancer's targets by label (AWS's
/// `service.beta.kubernetes.io/aws-load-balancer-target-node-labels`), so a label change is a host change:
/// compared by name and provider ID alone (as upstream since 1.26), a Node labelled after its Service's load
/// balancer was made stayed out of it until something else changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Host {
    provider_id: String,
    labels: u64,
}

/// The hosts of `nodes` by name (see [`Host`]).
pub(crate) fn hosts_of(nodes: &[&NodeView]) -> BTreeMap<String, Host> {
    nodes
        .iter()
        .map(|n| {
            let host = Host {
                provider_id: provider_id_of(n).to_owned(),
                labels: labels_fingerprint(n),
            };
            (name_of(n).to_owned(), host)
        })
        .collect()
}

/// A fingerprint of `node`'s labels, the same for the same labels within the process (absent equals empty).
pub(crate) fn labels_fingerprint(node: &NodeView) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    for (key, value) in node.labels.iter() {
        key.hash(&mut h);
        value.hash(&mut h);
    }
    h.finish()
}

/// Upstream `LoadBalancerStatusEqual` with `Semantic.DeepEqual`: only the ingress list, absent equals empty.
pub fn ingress_equal(a: Option<&Vec<LoadBalancerIngress>>, b: Option<&Vec<LoadBalancerIngress>>) -> bool {
    let empty = Vec::new();
    a.unwrap_or(&empty) == b.unwrap_or(&empty)
}
