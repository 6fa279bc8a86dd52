//! Cluster membership of the instances behind Nodes: the guard that keeps a forged or foreign Node (one whose
//! `spec.providerID` names an instance without this cluster's tag, as a leaked kubelet credential may create)
//! from steering the controller to a resource the cluster does not own. Load balancer targets and the rules on
//! the nodes' security groups ([`MemberLoadBalancers`]), routes and the source/destination check
//! ([`MemberRoutes`]) and the tagging controller act only for members; reads (node initialization, addresses,
//! existence) stay as they are, and the cloud-node controller warns about such Nodes (the instances provider
//! reports [`InstanceMetadata::not_in_cluster`]).
//!
//! A member carries the cluster tag `kubernetes.io/cluster/<id>` (`owned` or `shared`) or the legacy
//! `KubernetesCluster=<id>` ([`ClusterTags::not_member`]), as docs/tagging-requirements.md asks of every
//! instance. Membership is learnt from every instance the instances provider reads ([`MemberInstances`]: node
//! initialization and the periodic address refresh describe each instance anyway), otherwise from one
//! `DescribeInstances` for the unknown instances of a call (the adapter coalesces concurrent callers). Members
//! are remembered for [`MEMBER_TTL`], others for [`OUTSIDER_TTL`] (an instance may be tagged just after launch).

use std::{
    collections::{BTreeMap, BTreeSet, HashMap},
    sync::{Arc, Mutex, PoisonError},
    time::Duration,
};

use ccm_aws_api::{AwsError, Ec2, InstanceId};
use ccm_cloud_provider::{CloudError, InstanceMetadata, InstancesV2, Result as CloudResult};
use ccm_instances::AwsInstances;
use ccm_load_balancers::shared::node_instance_id;
use ccm_tagging::ClusterTags;
use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::Node;
use tokio::time::Instant;

mod wrappers;

pub use wrappers::{MemberLoadBalancers, MemberRoutes};

/// How long an instance found to carry the cluster tag is trusted without reading it again.
pub const MEMBER_TTL: Duration = Duration::from_secs(3600);

/// How long an instance found without the cluster tag stays refused without reading it again.
pub const OUTSIDER_TTL: Duration = Duration::from_secs(60);

/// The membership of instances in the cluster, remembered (cheap to share behind an [`Arc`]).
#[derive(Debug)]
pub struct Membership<E> {
    ec2: E,
    cluster: ClusterTags,
    known: Mutex<HashMap<InstanceId, (bool, Instant)>>,
}

// === impl Membership ===

impl<E: Ec2 + Send + Sync> Membership<E> {
    /// Membership in `cluster`, read through `ec2` when not known.
    pub fn new(ec2: E, cluster: ClusterTags) -> Self {
        Self {
            ec2,
            cluster,
            known: Mutex::new(HashMap::new()),
        }
    }

    /// The cluster's tags.
    pub fn cluster(&self) -> &ClusterTags {
        &self.cluster
    }

    /// Records what a read of `instance` showed.
    pub fn learn(&self, instance: InstanceId, member: bool) {
        self.known
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(instance, (member, Instant::now()));
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

    /// Whether each of `ids` is a member: remembered answers, then one lookup of the rest; the instances EC2
    /// does not show are absent.
    pub async fn answers(&self, ids: &[InstanceId]) -> Result<BTreeMap<InstanceId, bool>, AwsError> {
        let mut answers = BTreeMap::new();
        let mut unknown = BTreeSet::new();
        {
            let known = self.known.lock().unwrap_or_else(PoisonError::into_inner);
            for id in ids {
                match known.get(id) {
                    Some((member, at)) if at.elapsed() < ttl(*member) => {
                        answers.insert(id.clone(), *member);
                    }
                    _ => {
                        unknown.insert(id.clone());
                    }
                }
            }
        }
        if unknown.is_empty() {
            return Ok(answers);
        }
        let asked: Vec<InstanceId> = unknown.iter().cloned().collect();
        let found = self.ec2.instances_by_id(&asked).await?;
        let now = Instant::now();
        let mut known = self.known.lock().unwrap_or_else(PoisonError::into_inner);
        // Only here, where something new is learnt: what expired goes, so the map holds recent instances only.
        known.retain(|_, (member, at)| at.elapsed() < ttl(*member));
        for instance in found.iter().filter(|i| unknown.contains(&i.id)) {
            let why = self
                .cluster
                .not_member(&format!("instance {}", instance.id), &instance.tags);
            if let Some(why) = &why {
                tracing::warn!(instance = %instance.id, reason = why.as_str(), "not acting for an instance outside the cluster");
            }
            known.insert(instance.id.clone(), (why.is_none(), now));
            answers.insert(instance.id.clone(), why.is_none());
        }
        Ok(answers)
    }

    /// `nodes` without those whose EC2 instance is not a member. Nodes without an EC2 provider ID (Fargate,
    /// none yet) are kept: nothing acts for them through an instance.
    pub async fn member_nodes<'a>(&self, nodes: &[&'a Node]) -> CloudResult<Vec<&'a Node>> {
        let ids: Vec<InstanceId> = nodes.iter().filter_map(|n| node_instance_id(n)).collect();
        if ids.is_empty() {
            return Ok(nodes.to_vec());
        }
        let members = self.members(&ids).await.map_err(|e| {
            CloudError::with_source(
                "failed to read whether the nodes' instances carry the cluster tag",
                e,
            )
        })?;
        Ok(nodes
            .iter()
            .copied()
            .filter(|n| node_instance_id(n).is_none_or(|id| members.contains(&id)))
            .collect())
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
}

impl<E: Ec2 + Send + Sync> Members for Membership<E> {
    fn answers<'a>(
        &'a self,
        ids: &'a [InstanceId],
    ) -> BoxFuture<'a, Result<BTreeMap<InstanceId, bool>, AwsError>> {
        Box::pin(Membership::answers(self, ids))
    }
}

fn ttl(member: bool) -> Duration {
    if member { MEMBER_TTL } else { OUTSIDER_TTL }
}

/// The instances provider, teaching [`Membership`] what every read shows (the provider reports
/// [`InstanceMetadata::not_in_cluster`] from the instance's tags).
#[derive(Debug)]
pub struct MemberInstances<E> {
    inner: AwsInstances<E>,
    membership: Arc<Membership<E>>,
}

impl<E: Ec2 + Send + Sync> MemberInstances<E> {
    /// `inner`, learning into `membership`.
    pub fn new(inner: AwsInstances<E>, membership: Arc<Membership<E>>) -> Self {
        Self { inner, membership }
    }

    /// The wrapped provider.
    pub fn inner(&self) -> &AwsInstances<E> {
        &self.inner
    }

    fn learn(&self, node: &Node, result: &CloudResult<Option<InstanceMetadata>>) {
        if let (Some(id), Ok(Some(meta))) = (node_instance_id(node), result) {
            self.membership.learn(id, meta.not_in_cluster.is_none());
        }
    }
}

impl<E: Ec2 + Send + Sync> InstancesV2 for MemberInstances<E> {
    async fn instance_exists(&self, node: &Node) -> CloudResult<bool> {
        self.inner.instance_exists(node).await
    }

    async fn instance_shutdown(&self, node: &Node) -> CloudResult<bool> {
        self.inner.instance_shutdown(node).await
    }

    async fn instance_metadata(&self, node: &Node) -> CloudResult<Option<InstanceMetadata>> {
        let result = self.inner.instance_metadata(node).await;
        self.learn(node, &result);
        result
    }

    async fn instance_metadata_batch(&self, nodes: &[&Node]) -> Vec<CloudResult<Option<InstanceMetadata>>> {
        let results = self.inner.instance_metadata_batch(nodes).await;
        for (node, result) in nodes.iter().zip(&results) {
            self.learn(node, result);
        }
        results
    }

    async fn instance_exists_batch(&self, nodes: &[&Node]) -> Vec<CloudResult<bool>> {
        self.inner.instance_exists_batch(nodes).await
    }

    async fn instance_shutdown_batch(&self, nodes: &[&Node]) -> Vec<CloudResult<bool>> {
        self.inner.instance_shutdown_batch(nodes).await
    }
}

#[cfg(test)]
mod tests;
