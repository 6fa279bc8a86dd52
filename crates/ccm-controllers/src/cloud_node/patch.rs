//! The initialization written as a JSON merge patch instead of an update of the whole cached Node.
//!
//! An update sends the Node back whole, so the cache had to keep every field of it (what the update lacked, it
//! would clear). The patch carries only what initialization changes, and the base's `resourceVersion`, which the
//! apiserver checks as a precondition (409 Conflict when the Node changed since it was read): as safe as the
//! update against a concurrent writer, and indifferent to what the cache left out.

use ccm_cloud_provider::NodeView;
use serde_json::{Map, Value, json};

/// The merge patch that turns `base` into `desired` (as [`initialize_node`](super::initialize_node) made it from
/// `base`): the labels it sets or changes, the provider ID if it changed, the taints if they changed (a merge
/// patch replaces a list whole, which the precondition makes safe), and `base`'s resourceVersion.
pub fn initialization_patch(base: &NodeView, desired: &NodeView) -> Value {
    let mut metadata = Map::new();
    metadata.insert("resourceVersion".into(), json!(base.resource_version));
    let labels: Map<String, Value> = desired
        .labels
        .iter()
        .filter(|(k, v)| base.labels.get(k) != Some(*v))
        .map(|(k, v)| (k.to_owned(), json!(v)))
        .collect();
    if !labels.is_empty() {
        metadata.insert("labels".into(), Value::Object(labels));
    }
    let mut spec = Map::new();
    if base.provider_id != desired.provider_id {
        spec.insert("providerID".into(), json!(desired.provider_id));
    }
    if base.taints != desired.taints {
        spec.insert("taints".into(), json!(desired.taints));
    }
    let mut patch = Map::new();
    patch.insert("metadata".into(), Value::Object(metadata));
    if !spec.is_empty() {
        patch.insert("spec".into(), Value::Object(spec));
    }
    Value::Object(patch)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(value: Value) -> NodeView {
        NodeView::from(serde_json::from_value::<k8s_openapi::api::core::v1::Node>(value).unwrap())
    }

    #[test]
    fn only_what_initialization_changes_and_the_precondition() {
        let base = node(json!({
            "metadata": {"name": "n", "resourceVersion": "41", "labels": {"keep": "1", "zone": "a"},
                         "annotations": {"big": "x"}},
            "spec": {"podCIDR": "10.0.0.0/24",
                     "taints": [{"key": "node.cloudprovider.kubernetes.io/uninitialized", "effect": "NoSchedule"},
                                {"key": "other", "effect": "NoSchedule"}]},
        }));
        let desired = node(json!({
            "metadata": {"name": "n", "resourceVersion": "41",
                         "labels": {"keep": "1", "zone": "b", "type": "m5.large"}, "annotations": {"big": "x"}},
            "spec": {"podCIDR": "10.0.0.0/24", "providerID": "aws:///a/i-1",
                     "taints": [{"key": "other", "effect": "NoSchedule"}]},
        }));
        assert_eq!(
            initialization_patch(&base, &desired),
            json!({
                "metadata": {"resourceVersion": "41", "labels": {"zone": "b", "type": "m5.large"}},
                "spec": {"providerID": "aws:///a/i-1", "taints": [{"key": "other", "effect": "NoSchedule"}]},
            })
        );
    }

    #[test]
    fn the_last_taint_removed_is_an_empty_list_and_nothing_else_is_sent() {
        let base = node(json!({
            "metadata": {"name": "n", "resourceVersion": "7"},
            "spec": {"providerID": "aws:///a/i-1",
                     "taints": [{"key": "node.cloudprovider.kubernetes.io/uninitialized", "effect": "NoSchedule"}]},
        }));
        let mut desired = base.clone();
        desired.taints = Vec::new();
        assert_eq!(
            initialization_patch(&base, &desired),
            json!({"metadata": {"resourceVersion": "7"}, "spec": {"taints": []}})
        );
    }
}
