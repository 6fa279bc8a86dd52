//! Which Nodes a load balancer may serve: the port through which the composition keeps a Node out of the targets
//! (and so out of the rules on the targets' security groups) when its instance is not the cluster's, or not that
//! Node's.

use std::{fmt, future::Future, pin::Pin, sync::Arc};

use ccm_cloud_provider::{CloudError, NodeView, Notice};

/// The future of [`NodeTargets::targets`]: the Nodes kept, and a notice (a Warning Event on the Node) for each
/// Node left out that its operator should hear about.
pub type TargetsFuture<'a, 'n> =
    Pin<Box<dyn Future<Output = Result<(Vec<&'n NodeView>, Vec<Notice>), CloudError>> + Send + 'a>>;

/// Which of the Nodes the service controller gives may be targets: asked by [`AwsLoadBalancers`] once per
/// ensure, host update, drift pass and dry run, before anything is built from the Nodes, so no method of the
/// `LoadBalancer` contract can reach AWS with a Node left out. The composition answers from the instances'
/// cluster tags and the Nodes naming each instance (crate `ccm-aws`'s membership); [`AllNodes`], the default,
/// keeps every Node.
///
/// [`AwsLoadBalancers`]: crate::AwsLoadBalancers
pub trait NodeTargets: Send + Sync {
    /// `nodes` without those that may not be targets, in their order, with the notices of those left out.
    fn targets<'a, 'n: 'a>(&'a self, nodes: &'a [&'n NodeView]) -> TargetsFuture<'a, 'n>;
}

/// Keeps every Node: load balancers serve whichever Nodes they are given (the dry run of `lb-plan`, or a
/// distribution that vets its Nodes itself).
#[derive(Debug, Clone, Copy, Default)]
pub struct AllNodes;

impl NodeTargets for AllNodes {
    fn targets<'a, 'n: 'a>(&'a self, nodes: &'a [&'n NodeView]) -> TargetsFuture<'a, 'n> {
        let kept = nodes.to_vec();
        Box::pin(async move { Ok((kept, Vec::new())) })
    }
}

impl<T: NodeTargets + ?Sized> NodeTargets for Arc<T> {
    fn targets<'a, 'n: 'a>(&'a self, nodes: &'a [&'n NodeView]) -> TargetsFuture<'a, 'n> {
        (**self).targets(nodes)
    }
}

/// The port as [`AwsLoadBalancers`](crate::AwsLoadBalancers) holds it.
#[derive(Clone)]
pub(crate) struct Targets(Arc<dyn NodeTargets>);

impl Targets {
    pub(crate) fn new(targets: impl NodeTargets + 'static) -> Self {
        Self(Arc::new(targets))
    }

    /// The Nodes that may be targets, and the notices of those left out.
    pub(crate) async fn of<'n>(
        &self,
        nodes: &[&'n NodeView],
    ) -> Result<(Vec<&'n NodeView>, Vec<Notice>), CloudError> {
        self.0.targets(nodes).await
    }
}

impl Default for Targets {
    fn default() -> Self {
        Self::new(AllNodes)
    }
}

impl fmt::Debug for Targets {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("NodeTargets")
    }
}
