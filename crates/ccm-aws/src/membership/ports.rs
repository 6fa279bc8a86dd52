//! [`Membership`] as the ports of the load balancers and the routes: they ask it, before anything is built or
//! written, which Nodes may be targets and whether a route may point at a Node's instance.

use ccm_aws_api::{CatalogLookup, InstanceId};
use ccm_cloud_provider::NodeView;
use ccm_load_balancers::{NodeTargets, TargetsFuture};
use ccm_routes::{RefusalFuture, RouteTargets};

use super::Membership;

/// Load-balancer targets (and so the rules on the targets' security groups) are only the Nodes whose instance is
/// the cluster's and no older Node's: the others are left out of every ensure, host update, drift check and plan,
/// so an instance registered before is deregistered and its group's rule revoked on the next ensure. A Node left
/// out because an older Node names its instance gets a Warning Event from each ensure (a notice on the Node).
impl<E: CatalogLookup + Send + Sync> NodeTargets for Membership<E> {
    fn targets<'a, 'n: 'a>(&'a self, nodes: &'a [&'n NodeView]) -> TargetsFuture<'a, 'n> {
        Box::pin(Membership::targets(self, nodes))
    }
}

/// Routes never point at (nor disable the source/destination check of) an instance outside the cluster, nor at an
/// instance for a Node other than its own (one an older Node names). An instance the routes look up by private
/// DNS name is found among the cluster's tagged instances only, so only its Node is checked.
impl<E: CatalogLookup + Send + Sync> RouteTargets for Membership<E> {
    fn refusal<'a>(&'a self, node: &'a str, instance: Option<&'a InstanceId>) -> RefusalFuture<'a> {
        Box::pin(async move {
            if let Some(elder) = self.elder(node) {
                return Ok(Some(elder.reason()));
            }
            let Some(id) = instance else {
                return Ok(None);
            };
            let members = self.members(std::slice::from_ref(id)).await?;
            Ok((!members.contains(id)).then(|| {
                format!(
                    "its instance {id} does not carry the cluster tag {} (owned or shared); tag the instance if the \
                     Node is the cluster's",
                    self.cluster().key()
                )
            }))
        })
    }

    fn observe(&self, nodes: &[&NodeView]) {
        Membership::observe(self, nodes);
    }
}
