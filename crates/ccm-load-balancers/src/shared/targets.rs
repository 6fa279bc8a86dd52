//! Target instances: the nodes a load balancer sends traffic to, by the instance ID of their provider ID.

use std::collections::BTreeSet;

use ccm_aws_api::{InstanceId, ProviderId};
use ccm_cloud_provider::NodeView;

/// The instance ID of a node, from its provider ID ([`ProviderId`]: `aws:///us-east-1a/i-0123...` and the other
/// forms upstream accepts); Fargate and malformed provider IDs give `None`.
pub fn node_instance_id(node: &NodeView) -> Option<InstanceId> {
    ProviderId::ec2_instance_of(node.provider_id.as_deref()?)
}

/// What a host update compares with the last one of a Service to skip an update that changes nothing: the
/// target instances, and with IP targets the endpoints they are made of (`None` when not known).
pub(crate) fn target_key(
    nodes: &[&NodeView],
    spec: &crate::spec::ServiceSpec,
) -> (Vec<InstanceId>, Option<Vec<ccm_cloud_provider::Endpoint>>) {
    (
        target_instances(nodes, &spec.target_node_labels),
        spec.pod_endpoints.clone(),
    )
}

/// The target instances: nodes with every label of `labels` (an empty value matches any value), by instance ID,
/// sorted and deduplicated.
pub fn target_instances(nodes: &[&NodeView], labels: &[(String, String)]) -> Vec<InstanceId> {
    let mut out: BTreeSet<InstanceId> = BTreeSet::new();
    for node in nodes {
        let matches = labels.iter().all(|(k, v)| {
            node.labels
                .get(k)
                .is_some_and(|actual| v.is_empty() || actual == v)
        });
        if !matches {
            continue;
        }
        match node_instance_id(node) {
            Some(id) => {
                out.insert(id);
            }
            None => tracing::debug!(
                node = node.name.as_str(),
                "node without an EC2 instance provider ID is not a target"
            ),
        }
    }
    out.into_iter().collect()
}
