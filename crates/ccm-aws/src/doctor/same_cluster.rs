//! `--delete`'s guard against a kubeconfig and a cloud config of different clusters. The report is about the
//! cloud config's cluster ID, but "leaked" means "no object of the apiserver owns it": against another cluster's
//! apiserver every load balancer of this cluster looks leaked. The Nodes' instances tell which cluster the
//! apiserver is: at least one must carry this cluster's tag.

use std::collections::BTreeSet;

use ccm_load_balancers::shared::node_instance_id;
use ccm_tagging::{CLUSTER_TAG_PREFIX, LEGACY_CLUSTER_TAG};

use super::{DoctorError, Scope, Snapshot, observe::Inventory};

/// Why the apiserver is taken to be the cloud config's cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum SameCluster {
    /// The instance of at least one Node carries the cluster tag.
    Tagged,
    /// No Node names an EC2 instance (`aws:///<zone>/i-...`): nothing to compare with.
    NoNodes,
}

/// Whether the Nodes of `snapshot` are the cluster's of `scope`, by their instances' tags in `inventory` (its
/// `instances` and `node_instances`): an error when Nodes name EC2 instances and none of them carries the cluster
/// tag (`owned` or `shared`, or the legacy `KubernetesCluster=<id>`). One tagged instance is enough: untagged
/// Nodes of the right cluster are findings of their own, not a sign of the wrong apiserver.
pub(super) fn check(
    scope: &Scope,
    inventory: &Inventory,
    snapshot: &Snapshot,
) -> Result<SameCluster, DoctorError> {
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
            return Ok(SameCluster::Tagged);
        }
        tagged_for.extend(instance.tags.iter().filter_map(
            |(k, v)| match k.strip_prefix(CLUSTER_TAG_PREFIX) {
                Some(other) => Some(other.to_owned()),
                None => (k == LEGACY_CLUSTER_TAG).then(|| v.clone()),
            },
        ));
    }
    if nodes == 0 {
        return Ok(SameCluster::NoNodes);
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
