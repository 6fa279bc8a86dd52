//! The shape both load balancer flavours share: a desired model built from the Service, the observed AWS state,
//! and the ordered changes between them, whose host changes `UpdateLoadBalancer` applies and whose recreation
//! is reported as a Warning. `LoadBalancerFlavour` (crate-private) gives the provider one ensure, update and dry
//! run generic over the flavour (`Classic`, `Network`); `HostMemoryFlavour` what host updates remember of it.

use std::future::Future;

use ccm_aws_api::{AwsError, CatalogLookup, Ec2, Elb, Elbv2, SubnetId, Tags};
use ccm_cloud_provider::NodeView;
use serde::Serialize;

use crate::{
    Error, LoadBalancerConfig,
    dry_run::{DryRun, Recreation},
    memory::{Facts, Ids, Learnt, Remembered},
    ownership::Claim,
    spec::ServiceSpec,
};

mod classic;
mod network;

pub(crate) use classic::Classic;
pub(crate) use network::Network;

/// What an observation reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Everything a full ensure needs.
    Full,
    /// Only what the back-end hosts need (the load balancer, the targets, the nodes' groups):
    /// `UpdateLoadBalancer`.
    Hosts,
}

/// One step of a flavour's plan.
pub trait PlannedChange {
    /// Whether the change only concerns the back-end hosts (what `UpdateLoadBalancer` may do).
    fn is_host_change(&self) -> bool;

    /// Why the change deletes the load balancer to create it again (`None`: it does not).
    fn recreate_because(&self) -> Option<&str>;

    /// What only a new load balancer could apply, kept back for want of consent (`None`: nothing). Such a
    /// change writes nothing.
    fn recreation_withheld(&self) -> Option<&str> {
        None
    }
}

/// What changed that makes a plan recreate the load balancer (`None`: no recreation).
pub fn recreation_reason<C: PlannedChange>(changes: &[C]) -> Option<&str> {
    changes.iter().find_map(PlannedChange::recreate_because)
}

/// The recreation `changes` make or keep back, if any, as a dry run reports it.
pub(crate) fn recreation_of<C: PlannedChange>(changes: &[C]) -> Option<Recreation> {
    let recreation = |reason: &str, replaces| Recreation {
        replaces,
        reason: reason.to_owned(),
    };
    recreation_reason(changes)
        .map(|r| recreation(r, true))
        .or_else(|| recreation_withheld(changes).map(|r| recreation(r, false)))
}

/// What a plan keeps back because only a new load balancer could apply it and the Service has not consented
/// (`None`: nothing is kept back).
pub fn recreation_withheld<C: PlannedChange>(changes: &[C]) -> Option<&str> {
    changes.iter().find_map(PlannedChange::recreation_withheld)
}

/// The ports and configuration a flavour works through (each flavour uses the load balancer API it needs).
pub(crate) struct Ports<'a, E, L, V> {
    pub(crate) ec2: &'a E,
    pub(crate) elb: &'a L,
    pub(crate) elbv2: &'a V,
    pub(crate) config: &'a LoadBalancerConfig,
}

/// A load balancer flavour: its desired model, observed state and changes, so that the provider's ensure,
/// update and dry run are written once for both.
pub(crate) trait LoadBalancerFlavour {
    /// What the flavour is called in logs and notices (`Classic ELB`, `NLB`).
    const KIND: &'static str;
    /// The other flavour's load balancer, as the refusal of a flavour change names it (`an NLB`).
    const OTHER: &'static str;

    /// The desired load balancer.
    type Desired: Serialize + Send + Sync;
    /// The AWS state a plan is made against.
    type Observed: Send + Sync;
    /// One step of a plan.
    type Change: PlannedChange + Serialize + std::fmt::Debug + Send + Sync;
    /// What applying a plan reports.
    type Applied;

    /// The desired load balancer (pure); `cluster_name` is the controller's `--cluster-name`.
    fn build(
        spec: &ServiceSpec,
        nodes: &[&NodeView],
        config: &LoadBalancerConfig,
        cluster_name: &str,
        subnets: &[SubnetId],
    ) -> Result<Self::Desired, Error>;

    /// The spec a host update builds from, without subnets (by default the spec itself).
    fn hosts_spec(spec: ServiceSpec) -> ServiceSpec {
        spec
    }

    /// The load balancer's name.
    fn name(desired: &Self::Desired) -> &str;

    /// The desired state of a load balancer being adopted ([`crate::ownership::Claim::adopted`]): its tags
    /// also record the adoption ([`crate::shared::ADOPTED_TAG`]), written with the Service's own tags.
    fn adopt(desired: &mut Self::Desired);

    /// The tags of the load balancer a full observation found (`None`: there is none), from which the provider
    /// claims it ([`crate::ownership::claim`]). A host-scope observation reads no tags: it is not asked.
    fn found(observed: &Self::Observed) -> Option<&Tags>;

    /// Reads what the plan needs (no mutation).
    fn observe<E: CatalogLookup + Sync, L: Elb + Sync, V: Elbv2 + Sync>(
        ports: &Ports<'_, E, L, V>,
        desired: &Self::Desired,
        scope: Scope,
    ) -> impl Future<Output = Result<Self::Observed, Error>> + Send;

    /// Whether the load balancer exists.
    fn exists(observed: &Self::Observed) -> bool;

    /// The ordered plan (pure).
    fn plan(desired: &Self::Desired, observed: &Self::Observed) -> Vec<Self::Change>;

    /// A plan's refusal before any write (a recreation that deletion protection forbids); `Ok` by default.
    fn check_plan(
        desired: &Self::Desired,
        observed: &Self::Observed,
        changes: &[Self::Change],
    ) -> Result<(), Error> {
        let _ = (desired, observed, changes);
        Ok(())
    }

    /// Runs the changes in order (the only mutation), under the claim of the load balancer's name.
    fn apply<E: Ec2 + Sync, L: Elb + Sync, V: Elbv2 + Sync>(
        ports: &Ports<'_, E, L, V>,
        claim: &Claim,
        observed: &Self::Observed,
        changes: &[Self::Change],
    ) -> impl Future<Output = Result<Self::Applied, Error>> + Send;

    /// The status hostname after a plan was applied (empty: none yet).
    fn hostname(observed: Self::Observed, applied: Self::Applied) -> Result<String, Error>;

    /// Whether the other flavour's load balancer exists under `name` (the flavour-change check on creation).
    fn other_exists<E: Ec2 + Sync, L: Elb + Sync, V: Elbv2 + Sync>(
        ports: &Ports<'_, E, L, V>,
        name: &str,
    ) -> impl Future<Output = Result<bool, Error>> + Send;

    /// The existing load balancer's tags, for the claim of a host update this process holds none for (a
    /// host-scope observation reads none).
    fn load_balancer_tags<E: Ec2 + Sync, L: Elb + Sync, V: Elbv2 + Sync>(
        ports: &Ports<'_, E, L, V>,
        name: &str,
        observed: &Self::Observed,
    ) -> impl Future<Output = Result<Tags, AwsError>> + Send;

    /// The dry run's result.
    fn dry_run(spec: ServiceSpec, desired: Self::Desired, changes: Vec<Self::Change>) -> DryRun;

    /// The target instances skipped because their security group cannot be chosen, with why.
    fn skipped(observed: &Self::Observed) -> std::collections::BTreeMap<String, String>;

    /// Whether the nodes' rules planned from `observed` are stand-ins that a later full ensure narrows (an NLB's
    /// subnet CIDRs while its network interfaces are not seen); drift detection then asks for that ensure.
    fn provisional(_observed: &Self::Observed) -> bool {
        false
    }
}

/// What a flavour's host updates keep between node changes (crate `memory`): a load balancer as an apply left
/// it, so that the next host update is planned without reading it again. Apart from the pipeline, so that each
/// trait says one thing.
pub(crate) trait HostMemoryFlavour: LoadBalancerFlavour {
    /// The host memory of the load balancer after `changes` were applied to `observed`, its instance IDs held
    /// in `ids` (`None`: nothing to remember, the next host update observes).
    fn remember(
        desired: &Self::Desired,
        observed: &Self::Observed,
        applied: &Self::Applied,
        changes: &[Self::Change],
        ids: &Ids,
    ) -> Option<Remembered>;

    /// The observed state a host plan of `desired` starts from, from memory (`None`: observe instead).
    fn recall(desired: &Self::Desired, remembered: &Remembered, facts: &Facts) -> Option<Self::Observed>;

    /// The instances whose facts [`recall`](Self::recall) needs (none when the nodes' rules are not managed).
    fn fact_instances(desired: &Self::Desired) -> &[String];

    /// What an observation learnt about the target instances.
    fn learnt(observed: &Self::Observed) -> Learnt;

    /// The fingerprint of `desired` without its instances: a memory made for another one is not used.
    fn fingerprint(desired: &Self::Desired) -> u64;

    /// Whether a host change may be planned from memory (registrations; never the nodes' rules).
    fn from_memory(change: &Self::Change) -> bool;
}
