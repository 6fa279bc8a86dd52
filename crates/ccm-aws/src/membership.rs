//! Cluster membership of the instances behind Nodes: the guard that keeps a forged or foreign Node (one whose
//! `spec.providerID` names an instance without this cluster's tag, as a leaked kubelet credential may create)
//! from steering the controller to a resource the cluster does not own. Load balancer targets and the rules on
//! the nodes' security groups ([`Membership`] is the load balancers'
//! [`NodeTargets`](ccm_load_balancers::NodeTargets) port), routes and the source/destination check (the routes'
//! [`RouteTargets`](ccm_routes::RouteTargets) port) and the tagging controller act only for members; reads (node
//! initialization, addresses, existence) stay as they are, and the cloud-node controller warns about such Nodes
//! (the instances provider reports [`InstanceMetadata::not_in_cluster`]).
//!
//! A member carries the cluster tag `kubernetes.io/cluster/<id>` (`owned` or `shared`) or the legacy
//! `KubernetesCluster=<id>` ([`ClusterTags::not_member`]), as docs/tagging-requirements.md asks of every
//! instance. Membership is read from the instance catalog ([`ccm_aws_api::catalog`]), which every reader of
//! instances teaches (node initialization and the periodic address refresh describe each instance anyway),
//! otherwise from one `DescribeInstances` for the instances of a call the catalog does not hold fresh enough (the
//! adapter coalesces concurrent callers). A member's read is trusted for [`MEMBER_TTL`], an outsider's for
//! [`OUTSIDER_TTL`] (an instance may be tagged just after launch), and that EC2 does not show an instance (a
//! made-up ID, one of a Region that does not exist or of another Region) for [`ABSENT_TTL`]: a forged Node
//! naming one costs one lookup, not one per ensure, host update and drift pass.
//!
//! A member instance is still only its own Node's: a Node naming an instance that an older Node names is refused
//! like a Node of an outsider ([`Elder`], the claims in `claims`), and the older Node's labels (its exclusion from
//! load balancers) decide.

use std::{
    collections::{BTreeMap, BTreeSet},
    sync::{Arc, Mutex, PoisonError},
    time::Duration,
};

use ccm_aws_api::{AwsError, Catalog, CatalogInstance, CatalogLookup, Ec2, Freshness, InstanceId};
use ccm_cloud_provider::{
    CloudError, InstanceMetadata, InstancesV2, NodeView, Notice, Result as CloudResult,
};
use ccm_instances::AwsInstances;
use ccm_load_balancers::shared::node_instance_id;
use ccm_tagging::ClusterTags;
use futures::future::BoxFuture;

mod claims;
mod ports;

pub use claims::{CLAIM_TTL, Elder};

/// How long an instance found to carry the cluster tag is trusted without reading it again.
pub const MEMBER_TTL: Duration = Duration::from_secs(3600);

/// How long an instance found without the cluster tag stays refused without reading it again.
pub const OUTSIDER_TTL: Duration = Duration::from_secs(60);

/// How long an instance EC2 does not show stays absent without asking again. Instance IDs are never reused, so
/// only a brand-new instance (EC2 reads are eventually consistent) could be absent wrongly, and the cloud-node
/// controller's read at its Node's initialization teaches its membership at once.
pub const ABSENT_TTL: Duration = Duration::from_secs(600);

/// The Event reason of a Node refused by the load balancers or the cloud-node controller (the same as for an
/// instance without the cluster tag: nothing is done for the Node either way, and one alert covers both).
pub const REFUSED_NODE_REASON: &str = "InstanceNotInCluster";

/// The membership of instances in the cluster, remembered (cheap to share behind an [`Arc`]).
#[derive(Debug)]
pub struct Membership<E> {
    ec2: E,
    cluster: ClusterTags,
    claims: Mutex<claims::Claims>,
}

// === impl Membership ===

impl<E: CatalogLookup + Send + Sync> Membership<E> {
    /// Membership in `cluster`, read through `ec2` (the instance catalog's port) when not known.
    pub fn new(ec2: E, cluster: ClusterTags) -> Self {
        Self {
            ec2,
            cluster,
            claims: Mutex::default(),
        }
    }

    /// The cluster's tags.
    pub fn cluster(&self) -> &ClusterTags {
        &self.cluster
    }

    /// Records which instance each of `nodes` names (see [`Elder`]).
    pub fn observe(&self, nodes: &[&NodeView]) {
        self.claims
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .observe(nodes);
    }

    /// The older Node naming the instance of the Node `name` (seen before through [`Membership::observe`]): the
    /// instance is that Node's, and nothing is done for this one.
    pub fn elder(&self, name: &str) -> Option<Elder> {
        self.claims
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .elder(name)
    }

    /// The members among `ids`: remembered answers, then one lookup of the rest. An instance EC2 does not know
    /// is no member (nothing can be done for it anyway).
    pub async fn members(&self, ids: &[InstanceId]) -> Result<BTreeSet<InstanceId>, AwsError> {
        Ok(self
            .answers(ids)
            .await?
            .into_iter()
            .filter_map(|(id, member)| member.then_some(id))
            .collect())
    }

    /// Whether each of `ids` is a member, from the instance catalog: a member read within [`MEMBER_TTL`], an
    /// outsider within [`OUTSIDER_TTL`] (an instance may be tagged just after launch), the rest read in one
    /// lookup. The instances EC2 does not show are left out (and not asked again for [`ABSENT_TTL`]).
    pub async fn answers(&self, ids: &[InstanceId]) -> Result<BTreeMap<InstanceId, bool>, AwsError> {
        let mut answers = BTreeMap::new();
        let patient = Freshness::within(MEMBER_TTL).with_absent(ABSENT_TTL);
        let mut outsiders = Vec::new();
        let first = self.ec2.lookup(ids, patient).await?;
        for instance in &first.found {
            if self.is_member(instance, &first.read) {
                answers.insert(instance.id.clone(), true);
            } else if first.read.contains(&instance.id) {
                answers.insert(instance.id.clone(), false);
            } else {
                outsiders.push(instance.id.clone());
            }
        }
        if !outsiders.is_empty() {
            // An outsider is trusted for less: read again unless recent (by any reader of the catalog).
            let again = self
                .ec2
                .lookup(&outsiders, Freshness::within(OUTSIDER_TTL))
                .await?;
            for instance in &again.found {
                answers.insert(instance.id.clone(), self.is_member(instance, &again.read));
            }
        }
        for id in &first.absent {
            tracing::debug!(instance = %id, "instance not found; not asking again for a while");
        }
        Ok(answers)
    }

    /// Whether `instance` carries the cluster tag; warns about an outsider when `read` (read from EC2 just
    /// now, so once per read, not once per answer).
    fn is_member(&self, instance: &CatalogInstance, read: &BTreeSet<InstanceId>) -> bool {
        let why = self
            .cluster
            .not_member(&format!("instance {}", instance.id), &instance.cluster_tags());
        if let Some(why) = &why
            && read.contains(&instance.id)
        {
            tracing::warn!(instance = %instance.id, reason = why.as_str(), "not acting for an instance outside the cluster");
        }
        why.is_none()
    }

    /// `nodes` without those whose EC2 instance is not a member and those whose instance an older Node names
    /// (see [`Membership::targets`]).
    pub async fn member_nodes<'a>(&self, nodes: &[&'a NodeView]) -> CloudResult<Vec<&'a NodeView>> {
        Ok(self.targets(nodes).await?.0)
    }

    /// `nodes` without those whose EC2 instance is not a member, and without those whose instance an older Node
    /// names (all of `nodes` and every Node seen before are considered), with a Warning notice on each of the
    /// latter. Nodes without an EC2 provider ID (Fargate, none yet) are kept: nothing acts for them through an
    /// instance.
    pub async fn targets<'a>(&self, nodes: &[&'a NodeView]) -> CloudResult<(Vec<&'a NodeView>, Vec<Notice>)> {
        self.observe(nodes);
        let mut notices = Vec::new();
        let mut claimed = Vec::with_capacity(nodes.len());
        for node in nodes {
            let name = node.name.as_str();
            match self.elder(name) {
                Some(elder) => {
                    tracing::warn!(node = name, instance = %elder.instance, elder = elder.node.as_str(), "not serving a Node whose instance an older Node names");
                    notices.push(Notice::warning_on_node(name, REFUSED_NODE_REASON, elder.reason()));
                }
                None => claimed.push(*node),
            }
        }
        let ids: Vec<InstanceId> = claimed.iter().filter_map(|n| node_instance_id(n)).collect();
        if ids.is_empty() {
            return Ok((claimed, notices));
        }
        let members = self.members(&ids).await.map_err(|e| {
            CloudError::with_source(
                "failed to read whether the nodes' instances carry the cluster tag",
                e,
            )
        })?;
        let kept = claimed
            .into_iter()
            .filter(|n| node_instance_id(n).is_none_or(|id| members.contains(&id)))
            .collect();
        Ok((kept, notices))
    }
}

/// Which instances are the cluster's: [`Membership`] behind a trait object, for the controllers that only ask
/// (the tagging controller), whatever port they hold.
pub trait Members: Send + Sync {
    /// Whether each of `ids` is a member (see [`Membership::answers`]).
    fn answers<'a>(
        &'a self,
        ids: &'a [InstanceId],
    ) -> BoxFuture<'a, Result<BTreeMap<InstanceId, bool>, AwsError>>;

    /// The older Node naming the instance of the Node `node`, when that Node is refused for it (see
    /// [`Membership::elder`]). `None` by default: a member instance is acted for whichever Node names it.
    fn elder(&self, node: &str) -> Option<Elder> {
        let _ = node;
        None
    }
}

impl<E: CatalogLookup + Send + Sync> Members for Membership<E> {
    fn answers<'a>(
        &'a self,
        ids: &'a [InstanceId],
    ) -> BoxFuture<'a, Result<BTreeMap<InstanceId, bool>, AwsError>> {
        Box::pin(Membership::answers(self, ids))
    }

    fn elder(&self, node: &str) -> Option<Elder> {
        Membership::elder(self, node)
    }
}

/// The instances provider, telling [`Membership`] which instance each Node names (what every read shows, the
/// catalog learns; the provider reports [`InstanceMetadata::not_in_cluster`] from the instance's tags); a Node whose
/// instance an older Node names is reported not in the cluster (the cloud-node controller warns about it).
#[derive(Debug)]
pub struct MemberInstances<E> {
    inner: AwsInstances<E>,
    membership: Arc<Membership<Catalog<E>>>,
}

impl<E: Ec2 + Send + Sync + 'static> MemberInstances<E> {
    /// `inner`, telling `membership` which instance each Node names.
    pub fn new(inner: AwsInstances<E>, membership: Arc<Membership<Catalog<E>>>) -> Self {
        Self { inner, membership }
    }

    /// The wrapped provider.
    pub fn inner(&self) -> &AwsInstances<E> {
        &self.inner
    }

    /// Refuses the Node if an older Node names its instance (the instance itself is a member all the same; the
    /// catalog learnt what the read showed).
    fn refuse_claimed(&self, node: &NodeView, result: &mut CloudResult<Option<InstanceMetadata>>) {
        let Ok(Some(meta)) = result else {
            return;
        };
        if let Some(elder) = self
            .membership
            .elder(&node.name)
            .filter(|_| meta.not_in_cluster.is_none())
        {
            meta.not_in_cluster = Some(elder.reason());
        }
    }
}

impl<E: Ec2 + Send + Sync + 'static> InstancesV2 for MemberInstances<E> {
    async fn instance_exists(&self, node: &NodeView) -> CloudResult<bool> {
        self.membership.observe(&[node]);
        self.inner.instance_exists(node).await
    }

    async fn instance_shutdown(&self, node: &NodeView) -> CloudResult<bool> {
        self.membership.observe(&[node]);
        self.inner.instance_shutdown(node).await
    }

    async fn instance_metadata(&self, node: &NodeView) -> CloudResult<Option<InstanceMetadata>> {
        self.membership.observe(&[node]);
        let mut result = self.inner.instance_metadata(node).await;
        self.refuse_claimed(node, &mut result);
        result
    }

    async fn instance_metadata_batch(
        &self,
        nodes: &[&NodeView],
    ) -> Vec<CloudResult<Option<InstanceMetadata>>> {
        self.membership.observe(nodes);
        let mut results = self.inner.instance_metadata_batch(nodes).await;
        for (node, result) in nodes.iter().zip(&mut results) {
            self.refuse_claimed(node, result);
        }
        results
    }

    async fn instance_exists_batch(&self, nodes: &[&NodeView]) -> Vec<CloudResult<bool>> {
        self.membership.observe(nodes);
        self.inner.instance_exists_batch(nodes).await
    }

    async fn instance_shutdown_batch(&self, nodes: &[&NodeView]) -> Vec<CloudResult<bool>> {
        self.membership.observe(nodes);
        self.inner.instance_shutdown_batch(nodes).await
    }
}

#[cfg(test)]
mod tests;
