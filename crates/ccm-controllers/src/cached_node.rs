//! [`CachedNode`]: what the controllers' Node stores hold, a [`NodeView`] that kube-runtime's store can key.

use std::{borrow::Cow, ops::Deref};

use ccm_cloud_provider::NodeView;
use k8s_openapi::api::core::v1::Node;
use kube::runtime::reflector::Lookup;

use crate::watch::Watched;

/// A Node as the controllers' stores keep it: its [`NodeView`] (reached through `Deref`), in place of the whole
/// object, which at 5,000 Nodes cost three times the memory.
///
/// A type of this crate's own because kube-runtime's store needs its `Lookup` trait, which the provider
/// contract's crate does not know.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CachedNode(pub NodeView);

impl CachedNode {
    /// The view.
    pub fn view(&self) -> &NodeView {
        &self.0
    }
}

impl Deref for CachedNode {
    type Target = NodeView;

    fn deref(&self) -> &NodeView {
        &self.0
    }
}

impl From<Node> for CachedNode {
    fn from(node: Node) -> Self {
        Self(NodeView::from(node))
    }
}

impl From<NodeView> for CachedNode {
    fn from(view: NodeView) -> Self {
        Self(view)
    }
}

impl Watched for CachedNode {
    type Object = Node;

    fn keep(object: Node) -> Self {
        Self::from(object)
    }
}

impl Lookup for CachedNode {
    type DynamicType = ();

    fn kind(_: &()) -> Cow<'_, str> {
        "Node".into()
    }

    fn group(_: &()) -> Cow<'_, str> {
        "".into()
    }

    fn version(_: &()) -> Cow<'_, str> {
        "v1".into()
    }

    fn plural(_: &()) -> Cow<'_, str> {
        "nodes".into()
    }

    fn name(&self) -> Option<Cow<'_, str>> {
        Some(self.0.name.as_str().into())
    }

    fn namespace(&self) -> Option<Cow<'_, str>> {
        None
    }

    fn resource_version(&self) -> Option<Cow<'_, str>> {
        self.0.resource_version.as_deref().map(Cow::from)
    }

    fn uid(&self) -> Option<Cow<'_, str>> {
        self.0.uid.as_deref().map(Cow::from)
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::Resource;
    use kube::runtime::reflector::ObjectRef;

    use super::*;

    #[test]
    fn a_cached_node_is_keyed_as_its_node() {
        let mut node = Node::default();
        node.metadata.name = Some("n1".into());
        node.metadata.uid = Some("u1".into());
        let cached = CachedNode::keep(node.clone());
        assert_eq!(ObjectRef::from_obj(&cached), ObjectRef::<CachedNode>::new("n1"));
        let from_node = ObjectRef::from_obj(&node);
        let from_cached = ObjectRef::from_obj(&cached);
        assert_eq!(
            (
                from_node.name.as_str(),
                from_node.namespace.as_deref(),
                from_node.extra.uid.as_deref()
            ),
            (
                from_cached.name.as_str(),
                from_cached.namespace.as_deref(),
                from_cached.extra.uid.as_deref()
            )
        );
        assert_eq!(CachedNode::kind(&()), Node::KIND);
        assert_eq!(CachedNode::api_version(&()), Node::API_VERSION);
        assert_eq!(CachedNode::plural(&()), Node::URL_PATH_SEGMENT);
    }
}
