//! `--delete`'s guards against a kubeconfig and a cloud config of different clusters. The report is about the
//! cloud config's cluster ID, but "leaked" means "no object of the apiserver owns it": against another cluster's
//! apiserver every load balancer of this cluster looks leaked. Two kinds of evidence:
//!
//! - [`check`], the Nodes' instances: at least one must carry this cluster's tag when Nodes name EC2 instances,
//!   else the apiserver is another cluster's and `--delete` always refuses.
//! - [`doubts`], when the Nodes' instances cannot tell: no Node names an EC2 instance (a kind cluster's
//!   kubeconfig beside the production cloud config), or the cluster owns load balancers and not one Service of
//!   the apiserver is the one any of them names. Either is also what a cluster whose Nodes or LoadBalancer
//!   Services are all gone looks like, so `--delete` refuses unless `--allow-empty-cluster`
//!   ([`EmptyCluster::Allow`](super::EmptyCluster::Allow)) says that is the case; the report warns of both.

use std::collections::BTreeSet;

use ccm_load_balancers::shared::{SERVICE_NAME_TAG, all_names};
use ccm_tagging::{CLUSTER_TAG_PREFIX, LEGACY_CLUSTER_TAG};

use super::{DoctorError, Doubt, Scope, Snapshot, node_instance_id, observe::Inventory};

/// How many load balancers a message names (the rest are counted).
const NAMED_LOAD_BALANCERS: usize = 5;

/// Whether the Nodes of `snapshot` may be the cluster's of `scope`, by their instances' tags in `inventory` (its
/// `instances` and `node_instances`): an error when Nodes name EC2 instances and none of them carries the cluster
/// tag (`owned` or `shared`, or the legacy `KubernetesCluster=<id>`). One tagged instance is enough: untagged
/// Nodes of the right cluster are findings of their own, not a sign of the wrong apiserver.
pub(super) fn check(scope: &Scope, inventory: &Inventory, snapshot: &Snapshot) -> Result<(), DoctorError> {
    let mut nodes = 0;
    let mut not_found = 0;
    let mut tagged_for = BTreeSet::new();
    for id in snapshot.nodes.iter().filter_map(node_instance_id) {
        nodes += 1;
        let Some(instance) = inventory
            .instances
            .get(&id)
            .or_else(|| inventory.node_instances.get(&id))
        else {
            // Another account's or region's instance: AWS does not know it.
            not_found += 1;
            continue;
        };
        if scope.cluster.is_tagged(&instance.tags) {
            return Ok(());
        }
        tagged_for.extend(instance.tags.iter().filter_map(
            |(k, v)| match k.strip_prefix(CLUSTER_TAG_PREFIX) {
                Some(other) => Some(other.to_owned()),
                None => (k == LEGACY_CLUSTER_TAG).then(|| v.clone()),
            },
        ));
    }
    if nodes == 0 {
        // Nothing to compare with: one of the doubts.
        return Ok(());
    }
    Err(DoctorError::OtherCluster {
        cluster: scope.cluster.id().to_owned(),
        nodes,
        not_found,
        tagged_for: tagged_for.into_iter().collect(),
    })
}

/// The message of [`DoctorError::OtherCluster`].
pub(super) fn describe(cluster: &str, nodes: usize, not_found: usize, tagged_for: &[String]) -> String {
    let mut out = format!(
        "refusing to delete: the apiserver does not look like cluster {cluster}'s (the cloud config's): \
         none of the instances of its {nodes} Node(s) with an EC2 provider ID carries the tag \
         {CLUSTER_TAG_PREFIX}{cluster} (owned or shared) or {LEGACY_CLUSTER_TAG}={cluster}"
    );
    if !tagged_for.is_empty() {
        out.push_str(&format!(
            "; they are tagged for cluster {}",
            tagged_for.join(", ")
        ));
    }
    if not_found > 0 {
        out.push_str(&format!(
            "; {not_found} of the instances do not exist in this account and region"
        ));
    }
    out.push_str("; check that --kubeconfig and --cloud-config (or --cluster-id) name the same cluster");
    out
}

/// What leaves the apiserver of `snapshot` unverified as the cluster of `scope` (see the module documentation),
/// the Nodes' doubt first.
pub(super) fn doubts(scope: &Scope, inventory: &Inventory, snapshot: &Snapshot) -> Vec<Doubt> {
    let mut out = Vec::new();
    if !snapshot.nodes.iter().any(|n| node_instance_id(n).is_some()) {
        out.push(Doubt::NoEc2Nodes);
    }
    let load_balancers = unmatched_load_balancers(scope, inventory, snapshot);
    if !load_balancers.is_empty() {
        out.push(Doubt::NoServiceMatches { load_balancers });
    }
    out
}

/// The names of the load balancers the cluster owns (those with a `kubernetes.io/service-name` tag: the ones the
/// report judges) when not one of them is pointed to a Service of `snapshot` by that tag or by its name (a
/// Service's UID name, chosen name or status name); empty when one is, or when the cluster owns none. Any
/// Service counts, whatever its type: one is enough to show that the apiserver knows the cluster's objects.
fn unmatched_load_balancers(scope: &Scope, inventory: &Inventory, snapshot: &Snapshot) -> Vec<String> {
    let classic = inventory.classic.iter().map(|(lb, tags)| (&lb.name, tags));
    let network = inventory
        .v2
        .iter()
        .filter(|(lb, _)| lb.lb_type == "network")
        .map(|(lb, tags)| (&lb.name, tags));
    let owned: Vec<(&String, &String)> = classic
        .chain(network)
        .filter(|(_, tags)| scope.cluster.is_owned(tags))
        .filter_map(|(name, tags)| Some((name, tags.get(SERVICE_NAME_TAG)?)))
        .collect();
    let keys: BTreeSet<String> = snapshot
        .services
        .iter()
        .map(|s| ccm_cloud_provider::object_key(&s.metadata))
        .collect();
    let names: BTreeSet<String> = snapshot.services.iter().flat_map(all_names).collect();
    if owned
        .iter()
        .any(|(name, key)| keys.contains(*key) || names.contains(*name))
    {
        return Vec::new();
    }
    owned.into_iter().map(|(name, _)| name.clone()).collect()
}

/// The message of [`DoctorError::Unverified`].
pub(super) fn refusal(cluster: &str, doubt: &Doubt) -> String {
    let allow = match doubt {
        Doubt::NoEc2Nodes => "the cluster has no Node on EC2",
        Doubt::NoServiceMatches { .. } => "the cluster's LoadBalancer Services were all deleted",
    };
    format!(
        "refusing to delete: {}; check that --kubeconfig and --cloud-config (or --cluster-id) name the same \
         cluster, and pass --allow-empty-cluster only if {allow}",
        cause(cluster, doubt)
    )
}

/// The report's warning of `doubt`.
pub(super) fn warning(cluster: &str, doubt: &Doubt) -> String {
    format!(
        "{}; --delete refuses unless --allow-empty-cluster",
        cause(cluster, doubt)
    )
}

/// What `doubt` means, for both messages.
fn cause(cluster: &str, doubt: &Doubt) -> String {
    match doubt {
        Doubt::NoEc2Nodes => format!(
            "no Node of the apiserver names an EC2 instance (provider ID aws:///<zone>/i-...), so nothing shows \
             that it is cluster {cluster}'s: against another cluster's apiserver (a kind cluster's, say) every \
             load balancer of {cluster} looks leaked"
        ),
        Doubt::NoServiceMatches { load_balancers } => {
            let mut named = load_balancers
                .iter()
                .take(NAMED_LOAD_BALANCERS)
                .cloned()
                .collect::<Vec<_>>()
                .join(", ");
            if load_balancers.len() > NAMED_LOAD_BALANCERS {
                named.push_str(&format!(
                    " and {} more",
                    load_balancers.len() - NAMED_LOAD_BALANCERS
                ));
            }
            format!(
                "cluster {cluster} owns {} load balancer(s) ({named}) and no Service of the apiserver is the one \
                 any of them names (by its {SERVICE_NAME_TAG} tag or its name): every one looks leaked, as it \
                 does against another cluster's apiserver",
                load_balancers.len()
            )
        }
    }
}
