//! Which instances a route may point at, beyond the cluster's route tables: the port through which the
//! composition refuses a route to a Node whose instance is not the cluster's, or not that Node's.

use std::{future::Future, pin::Pin, sync::Arc};

use ccm_aws_api::{AwsError, InstanceId};
use ccm_cloud_provider::NodeView;

/// The future of [`RouteTargets::refusal`]: why no route may point at the instance, `None` when one may.
pub type RefusalFuture<'a> = Pin<Box<dyn Future<Output = Result<Option<String>, AwsError>> + Send + 'a>>;

/// Which targets a route may have: asked by [`AwsRoutes`](crate::AwsRoutes) before it disables an instance's
/// source/destination check or creates a route to it, so a forged Node (one naming another system's instance, or
/// the instance of an older Node) gets neither. The composition answers from the instances' cluster tags and the
/// Nodes naming each instance (crate `ccm-aws`'s membership); [`AnyRouteTarget`], the default, refuses nothing.
pub trait RouteTargets: Send + Sync {
    /// Why no route may point at the instance of Node `node`: `instance` when the Node's provider ID or name
    /// names it; `None` when the routes look it up by private DNS name among the cluster's tagged instances (only
    /// the Node itself is then checked). `Ok(None)` allows the route.
    fn refusal<'a>(&'a self, node: &'a str, instance: Option<&'a InstanceId>) -> RefusalFuture<'a>;

    /// Every Node the route controller knows, before each of its passes (the default ignores them).
    fn observe(&self, nodes: &[&NodeView]) {
        let _ = nodes;
    }
}

/// Refuses nothing: routes point at any instance a Node names (the cluster's route tables still bound them).
#[derive(Debug, Clone, Copy, Default)]
pub struct AnyRouteTarget;

impl RouteTargets for AnyRouteTarget {
    fn refusal<'a>(&'a self, _node: &'a str, _instance: Option<&'a InstanceId>) -> RefusalFuture<'a> {
        Box::pin(async { Ok(None) })
    }
}

impl<T: RouteTargets + ?Sized> RouteTargets for Arc<T> {
    fn refusal<'a>(&'a self, node: &'a str, instance: Option<&'a InstanceId>) -> RefusalFuture<'a> {
        (**self).refusal(node, instance)
    }

    fn observe(&self, nodes: &[&NodeView]) {
        (**self).observe(nodes);
    }
}
