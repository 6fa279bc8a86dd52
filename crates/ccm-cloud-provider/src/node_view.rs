//! [`NodeView`]: what a controller or a provider reads of a Node, and all that the controllers keep of one.
//!
//! A cluster of 5,000 Nodes kept as whole `Node` objects costs some 3 KB each in the controllers' cache (an
//! object of 1.5 KB before its first string, every label key and value its own allocation), most of it fields no
//! controller reads. A view keeps the fields below and packs the labels into two allocations.

use std::{collections::BTreeMap, fmt};

use k8s_openapi::{
    api::core::v1::{Node, NodeAddress, Taint},
    apimachinery::pkg::apis::meta::v1::Time,
};

/// The annotation a kubelet started with `--node-ip` and an external cloud provider sets on its Node.
pub const ANNOTATION_PROVIDED_NODE_IP: &str = "alpha.kubernetes.io/provided-node-ip";

/// A Node as the controllers see it: its name and identity, labels, the one annotation they read, the spec's
/// provider ID, pod CIDRs and taints, and the status's addresses and conditions (type, status and reason).
///
/// Built from a Node with [`From`]; what it leaves out (other annotations, `managedFields`, capacity, images,
/// system info, the conditions' messages and times) no controller or provider reads. Taints are kept whole
/// because a patch of `spec.taints` writes the list back whole.
#[derive(Clone, Debug, Default, PartialEq)]
#[non_exhaustive]
pub struct NodeView {
    /// `metadata.name`.
    pub name: String,
    /// `metadata.uid`.
    pub uid: Option<String>,
    /// `metadata.resourceVersion`: the precondition of a patch written from this view.
    pub resource_version: Option<String>,
    /// `metadata.creationTimestamp`.
    pub creation_timestamp: Option<Time>,
    /// `metadata.deletionTimestamp`.
    pub deletion_timestamp: Option<Time>,
    /// `metadata.labels`.
    pub labels: Labels,
    /// The annotation [`ANNOTATION_PROVIDED_NODE_IP`].
    pub provided_node_ip: Option<String>,
    /// `spec.providerID`.
    pub provider_id: Option<String>,
    /// `spec.podCIDRs`, or `spec.podCIDR` alone where the list is empty (clusters before 1.16).
    pub pod_cidrs: Vec<String>,
    /// `spec.taints`, whole.
    pub taints: Vec<Taint>,
    /// `status.addresses`.
    pub addresses: Vec<NodeAddress>,
    /// `status.conditions`: each condition's type, status and reason.
    pub conditions: Vec<NodeConditionView>,
}

/// A Node condition's type, status (`"True"`, `"False"` or `"Unknown"`) and reason.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct NodeConditionView {
    /// `type`, e.g. `Ready`.
    pub type_: String,
    /// `status`.
    pub status: String,
    /// `reason`.
    pub reason: Option<String>,
}

/// A Node's labels, sorted by key, packed into one string and one table of offsets: two allocations where a
/// `BTreeMap<String, String>` makes one per key and per value beside its own nodes.
#[derive(Clone, Default, PartialEq, Eq, Hash)]
pub struct Labels {
    /// Each key followed by its value.
    text: Box<str>,
    /// For each label, where its key ends and where its value ends in `text` (the next key starts there).
    ends: Box<[(u32, u32)]>,
}

// === impl NodeView ===

impl NodeView {
    /// A view of a Node named `name` with nothing else set; for tests and for building views field by field.
    pub fn named(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            ..Self::default()
        }
    }

    /// The status of the condition of type `type_`, if the Node reports it.
    pub fn condition(&self, type_: &str) -> Option<&str> {
        self.conditions
            .iter()
            .find(|c| c.type_ == type_)
            .map(|c| c.status.as_str())
    }

    /// The label `key`'s value.
    pub fn label(&self, key: &str) -> Option<&str> {
        self.labels.get(key)
    }
}

impl From<Node> for NodeView {
    /// Moves what the view keeps out of `node` (no string is copied).
    fn from(node: Node) -> Self {
        let mut meta = node.metadata;
        let spec = node.spec.unwrap_or_default();
        let status = node.status.unwrap_or_default();
        let mut pod_cidrs = spec.pod_cidrs.unwrap_or_default();
        if pod_cidrs.is_empty()
            && let Some(cidr) = spec.pod_cidr
        {
            pod_cidrs.push(cidr);
        }
        let conditions = status.conditions.unwrap_or_default().into_iter();
        Self {
            name: meta.name.unwrap_or_default(),
            uid: meta.uid,
            resource_version: meta.resource_version,
            creation_timestamp: meta.creation_timestamp,
            deletion_timestamp: meta.deletion_timestamp,
            labels: meta.labels.as_ref().map(Labels::from).unwrap_or_default(),
            provided_node_ip: meta
                .annotations
                .as_mut()
                .and_then(|a| a.remove(ANNOTATION_PROVIDED_NODE_IP)),
            provider_id: spec.provider_id,
            pod_cidrs,
            taints: spec.taints.unwrap_or_default(),
            addresses: status.addresses.unwrap_or_default(),
            conditions: conditions
                .map(|c| NodeConditionView {
                    type_: c.type_,
                    status: c.status,
                    reason: c.reason,
                })
                .collect(),
        }
    }
}

impl From<&Node> for NodeView {
    fn from(node: &Node) -> Self {
        Self::from(node.clone())
    }
}

impl fmt::Display for NodeView {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name)
    }
}

// === impl Labels ===

impl Labels {
    /// The value of `key`.
    pub fn get(&self, key: &str) -> Option<&str> {
        let (mut low, mut high) = (0, self.ends.len());
        while low < high {
            let mid = low + (high - low) / 2;
            match self.key(mid).cmp(key) {
                std::cmp::Ordering::Less => low = mid + 1,
                std::cmp::Ordering::Greater => high = mid,
                std::cmp::Ordering::Equal => return Some(self.value(mid)),
            }
        }
        None
    }

    /// Whether `key` is set.
    pub fn contains_key(&self, key: &str) -> bool {
        self.get(key).is_some()
    }

    /// The labels, by key.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = (&str, &str)> + '_ {
        (0..self.ends.len()).map(|i| (self.key(i), self.value(i)))
    }

    /// How many labels there are.
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// The labels as a map, as `metadata.labels` holds them.
    pub fn to_map(&self) -> BTreeMap<String, String> {
        self.iter().map(|(k, v)| (k.to_owned(), v.to_owned())).collect()
    }

    fn start(&self, i: usize) -> usize {
        if i == 0 { 0 } else { self.ends[i - 1].1 as usize }
    }

    fn key(&self, i: usize) -> &str {
        &self.text[self.start(i)..self.ends[i].0 as usize]
    }

    fn value(&self, i: usize) -> &str {
        &self.text[self.ends[i].0 as usize..self.ends[i].1 as usize]
    }
}

impl<K: AsRef<str>, V: AsRef<str>> FromIterator<(K, V)> for Labels {
    /// Labels from pairs in any order; of two pairs with the same key the last wins, as in a map.
    fn from_iter<I: IntoIterator<Item = (K, V)>>(pairs: I) -> Self {
        let sorted: BTreeMap<String, String> = pairs
            .into_iter()
            .map(|(k, v)| (k.as_ref().to_owned(), v.as_ref().to_owned()))
            .collect();
        Self::from(&sorted)
    }
}

impl From<&BTreeMap<String, String>> for Labels {
    fn from(map: &BTreeMap<String, String>) -> Self {
        let mut text = String::with_capacity(map.iter().map(|(k, v)| k.len() + v.len()).sum());
        let mut ends = Vec::with_capacity(map.len());
        for (k, v) in map {
            text.push_str(k);
            let key_end = text.len();
            text.push_str(v);
            ends.push((offset(key_end), offset(text.len())));
        }
        Self {
            text: text.into_boxed_str(),
            ends: ends.into_boxed_slice(),
        }
    }
}

/// An offset into a Node's labels: far below 4 GiB, as the API server stores objects of at most 1.5 MiB.
fn offset(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

impl fmt::Debug for Labels {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::{
        api::core::v1::{NodeCondition, NodeSpec, NodeStatus},
        apimachinery::pkg::apis::meta::v1::ObjectMeta,
    };

    use super::*;

    #[test]
    fn labels_answer_like_the_map_they_came_from() {
        let map: BTreeMap<String, String> = [
            ("b", "2"),
            ("a", "1"),
            ("topology.kubernetes.io/zone", "us-east-1a"),
            ("empty", ""),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        let labels = Labels::from(&map);
        for (k, v) in &map {
            assert_eq!(labels.get(k), Some(v.as_str()), "{k}");
        }
        assert_eq!(labels.get("c"), None);
        assert_eq!(labels.get(""), None);
        assert_eq!(labels.get("topology"), None);
        assert_eq!(labels.len(), 4);
        assert_eq!(labels.to_map(), map);
        assert_eq!(
            labels.iter().map(|(k, _)| k).collect::<Vec<_>>(),
            ["a", "b", "empty", "topology.kubernetes.io/zone"]
        );
        assert_eq!(format!("{labels:?}"), format!("{map:?}"));
        assert!(Labels::default().is_empty());
        assert_eq!(Labels::default().get("a"), None);
        assert_eq!(Labels::from_iter([("x", "1"), ("x", "2")]).get("x"), Some("2"));
    }

    #[test]
    fn a_view_keeps_what_is_read_and_drops_the_rest() {
        let node = Node {
            metadata: ObjectMeta {
                name: Some("n1".into()),
                uid: Some("u1".into()),
                resource_version: Some("7".into()),
                labels: Some([("k".to_owned(), "v".to_owned())].into()),
                annotations: Some(
                    [
                        (ANNOTATION_PROVIDED_NODE_IP.to_owned(), "10.0.0.1".to_owned()),
                        ("other".into(), "x".into()),
                    ]
                    .into(),
                ),
                ..ObjectMeta::default()
            },
            spec: Some(NodeSpec {
                provider_id: Some("aws:///us-east-1a/i-1".into()),
                pod_cidr: Some("10.1.0.0/24".into()),
                ..NodeSpec::default()
            }),
            status: Some(NodeStatus {
                conditions: Some(vec![NodeCondition {
                    type_: "Ready".into(),
                    status: "True".into(),
                    message: Some("kubelet is posting ready status".into()),
                    ..NodeCondition::default()
                }]),
                ..NodeStatus::default()
            }),
        };
        let view = NodeView::from(&node);
        assert_eq!(view.name, "n1");
        assert_eq!(view.uid.as_deref(), Some("u1"));
        assert_eq!(view.resource_version.as_deref(), Some("7"));
        assert_eq!(view.label("k"), Some("v"));
        assert_eq!(view.provided_node_ip.as_deref(), Some("10.0.0.1"));
        assert_eq!(view.provider_id.as_deref(), Some("aws:///us-east-1a/i-1"));
        assert_eq!(view.pod_cidrs, ["10.1.0.0/24"]);
        assert_eq!(view.condition("Ready"), Some("True"));
        assert_eq!(view.condition("NetworkUnavailable"), None);
        // The list wins over the single CIDR when both are set, as the API server keeps them (the first of the
        // list is `podCIDR`).
        let mut both = node;
        both.spec.as_mut().unwrap().pod_cidrs = Some(vec!["10.1.0.0/24".into(), "fd00::/64".into()]);
        assert_eq!(NodeView::from(&both).pod_cidrs, ["10.1.0.0/24", "fd00::/64"]);
    }
}
