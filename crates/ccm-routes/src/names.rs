use std::{
    collections::HashMap,
    sync::{Arc, RwLock},
};

use ccm_aws_api::{InstanceId, ProviderId};

/// What the cluster knows about which Node runs on which instance (from each Node's `spec.providerID`).
///
/// The `Routes` contract passes node *names* to `create_route` and expects node names back from `list_routes`,
/// but a route only names an instance. Upstream answers with its node informer; this crate cannot watch Nodes
/// (domain crates have no Kubernetes client), so the composition passes a `NodeNames` backed by its node cache.
///
/// Both methods answer from memory and must be cheap. `None` means "not known here": [`AwsRoutes`] then falls
/// back to EC2 (an `i-...` node name is an instance ID; another name is looked up as a private DNS name, and an
/// instance found by ID is named by its private DNS name). The fallback is exact only for clusters whose node
/// names are private DNS names, so clusters with resource-based (`i-...`) or custom node names must pass a real
/// `NodeNames`, synced before the route controller's first pass.
///
/// [`AwsRoutes`]: crate::AwsRoutes
pub trait NodeNames: Send + Sync {
    /// The name of the Node whose provider ID names `instance`.
    fn node_name(&self, instance: &InstanceId) -> Option<String>;

    /// The instance named by the provider ID of Node `node_name`.
    fn instance_id(&self, node_name: &str) -> Option<InstanceId>;

    /// Every Node the route controller knows (name, provider ID), before each of its passes. An index replaces
    /// its contents; the default ignores them.
    fn observe(&self, nodes: &[(&str, Option<&str>)]) {
        let _ = nodes;
    }
}

/// No knowledge: every lookup falls back to EC2 (node names are taken to be private DNS names or instance IDs).
#[derive(Debug, Clone, Copy, Default)]
pub struct NoNodeNames;

// === impl NoNodeNames ===

impl NodeNames for NoNodeNames {
    fn node_name(&self, _instance: &InstanceId) -> Option<String> {
        None
    }

    fn instance_id(&self, _node_name: &str) -> Option<InstanceId> {
        None
    }
}

/// A [`NodeNames`] kept current by the caller from a Node watch: [`NodeIndex::upsert`] on every added or changed
/// Node (cheap when nothing changed), [`NodeIndex::remove`] on deletion, [`NodeIndex::replace_all`] after a relist.
/// Cheap to clone; clones share the index.
#[derive(Debug, Clone, Default)]
pub struct NodeIndex(Arc<RwLock<Maps>>);

#[derive(Debug, Default)]
struct Maps {
    by_name: HashMap<String, InstanceId>,
    by_instance: HashMap<InstanceId, String>,
}

// === impl NodeIndex ===

impl NodeIndex {
    /// An empty index.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records Node `name` with its `spec.providerID` (a Node without an EC2 instance is forgotten).
    pub fn upsert(&self, name: &str, provider_id: Option<&str>) {
        let instance = instance_of_node(name, provider_id);
        if self.read().by_name.get(name) == instance.as_ref() {
            return;
        }
        let mut maps = self.write();
        maps.remove(name);
        if let Some(instance) = instance {
            maps.by_instance.insert(instance.clone(), name.to_owned());
            maps.by_name.insert(name.to_owned(), instance);
        }
    }

    /// Forgets Node `name`.
    pub fn remove(&self, name: &str) {
        self.write().remove(name);
    }

    /// Replaces the whole index with `nodes` (name, provider ID).
    pub fn replace_all<'a>(&self, nodes: impl IntoIterator<Item = (&'a str, Option<&'a str>)>) {
        let mut fresh = Maps::default();
        for (name, provider_id) in nodes {
            if let Some(instance) = instance_of_node(name, provider_id) {
                fresh.by_instance.insert(instance.clone(), name.to_owned());
                fresh.by_name.insert(name.to_owned(), instance);
            }
        }
        *self.write() = fresh;
    }

    /// How many Nodes with an EC2 instance are known.
    pub fn len(&self) -> usize {
        self.read().by_name.len()
    }

    /// Whether no Node is known.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Maps> {
        self.0.read().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Maps> {
        self.0.write().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl Maps {
    fn remove(&mut self, name: &str) {
        if let Some(instance) = self.by_name.remove(name)
            && self.by_instance.get(&instance).is_some_and(|n| n == name)
        {
            self.by_instance.remove(&instance);
        }
    }
}

impl NodeNames for NodeIndex {
    fn node_name(&self, instance: &InstanceId) -> Option<String> {
        self.read().by_instance.get(instance).cloned()
    }

    fn instance_id(&self, node_name: &str) -> Option<InstanceId> {
        self.read().by_name.get(node_name).cloned()
    }

    fn observe(&self, nodes: &[(&str, Option<&str>)]) {
        self.replace_all(nodes.iter().copied());
    }
}

/// The instance of Node `name`: from its provider ID, or, before the cloud-node controller has set one, from a
/// name that is an instance ID itself (`i-0123456789abcdef0`; resource-based host names such as
/// `i-0123456789abcdef0.us-west-2.compute.internal` are not IDs). Without this, a route to a Node named by its
/// instance ID would be named by the instance's private DNS name until the provider ID arrives, and the route
/// controller would delete it and create it again.
fn instance_of_node(name: &str, provider_id: Option<&str>) -> Option<InstanceId> {
    provider_id.and_then(ProviderId::ec2_instance_of).or_else(|| {
        let id = InstanceId::new(name);
        id.is_well_formed().then_some(id)
    })
}

impl<T: NodeNames + ?Sized> NodeNames for Arc<T> {
    fn node_name(&self, instance: &InstanceId) -> Option<String> {
        (**self).node_name(instance)
    }

    fn instance_id(&self, node_name: &str) -> Option<InstanceId> {
        (**self).instance_id(node_name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_the_route_controller_observes_replaces_the_index() {
        let index = NodeIndex::new();
        index.upsert("gone", Some("aws:///us-east-1a/i-9"));
        index.observe(&[("n1", Some("aws:///us-east-1a/i-1")), ("n2", None)]);
        assert_eq!(index.len(), 1);
        assert_eq!(index.node_name(&"i-1".into()).as_deref(), Some("n1"));
        assert_eq!(index.instance_id("gone"), None);
        // The fallback ignores what it is shown.
        NoNodeNames.observe(&[("n1", Some("aws:///us-east-1a/i-1"))]);
        assert_eq!(NoNodeNames.node_name(&"i-1".into()), None);
    }

    #[test]
    fn index_follows_upserts_removals_and_relists() {
        let index = NodeIndex::new();
        index.upsert("a", Some("aws:///us-east-1a/i-1"));
        index.upsert("b", Some("aws:////i-2"));
        index.upsert("f", Some("aws:///us-east-1a/fargate-ip-10-0-0-1"));
        index.upsert("x", None);
        assert_eq!(index.len(), 2);
        assert_eq!(index.node_name(&"i-1".into()).as_deref(), Some("a"));
        assert_eq!(index.instance_id("b"), Some("i-2".into()));
        assert_eq!(index.instance_id("f"), None);
        // A node moved to another instance; a node gone.
        index.upsert("a", Some("aws:///us-east-1a/i-3"));
        assert_eq!(index.node_name(&"i-1".into()), None);
        assert_eq!(index.node_name(&"i-3".into()).as_deref(), Some("a"));
        index.remove("b");
        assert_eq!(index.node_name(&"i-2".into()), None);
        let clone = index.clone();
        clone.replace_all([("c", Some("i-4")), ("d", Some("gce://p/z/i-5"))]);
        assert_eq!(index.len(), 1, "clones share");
        assert_eq!(index.instance_id("c"), Some("i-4".into()));
        assert!(index.instance_id("a").is_none());
    }

    /// A Node named by its instance ID is known before the cloud-node controller sets its provider ID, so a route
    /// to it is named by the Node, not by the instance's private DNS name (which made the route controller delete
    /// and re-create it). Names that only look like IDs are not taken for one.
    #[test]
    fn a_node_named_by_its_instance_id_is_known_without_a_provider_id() {
        let index = NodeIndex::new();
        index.observe(&[
            ("i-0123456789abcdef0", None),
            ("i-0a1b2c3d", None),
            ("i-0123456789abcdef1.us-west-2.compute.internal", None),
            ("i-not-hex", None),
            ("ip-10-0-0-1.ec2.internal", None),
        ]);
        assert_eq!(
            index.node_name(&"i-0123456789abcdef0".into()).as_deref(),
            Some("i-0123456789abcdef0")
        );
        assert_eq!(
            index.node_name(&"i-0a1b2c3d".into()).as_deref(),
            Some("i-0a1b2c3d")
        );
        assert_eq!(
            index.len(),
            2,
            "resource-based host names and other names are not IDs"
        );
        // The provider ID wins once set.
        index.upsert("i-0a1b2c3d", Some("aws:///us-east-1a/i-0ffffffff"));
        assert_eq!(index.instance_id("i-0a1b2c3d"), Some("i-0ffffffff".into()));
    }

    /// Provider IDs are read by `ProviderId` (ccm-aws-api): EC2 instances only, at any path depth, and a
    /// host-only `aws://i-...` (no path) names no instance.
    #[test]
    fn provider_ids() {
        for (id, want) in [
            ("aws:///us-east-1a/i-0123", Some("i-0123")),
            ("aws:////i-0123", Some("i-0123")),
            ("i-0123", Some("i-0123")),
            ("aws:///us-east-1a/i-0123/", Some("i-0123")),
            ("aws:///us-east-1a/fargate-ip-10-0-0-1.ec2.internal", None),
            ("gce://p/z/i-0123", None),
            ("aws://i-0123", None),
            ("aws:///us-east-1a/", None),
            ("", None),
        ] {
            let index = NodeIndex::new();
            index.upsert("n", Some(id));
            assert_eq!(
                index.instance_id("n").as_ref().map(InstanceId::as_str),
                want,
                "{id}"
            );
        }
    }
}
