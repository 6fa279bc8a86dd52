//! The NLB as a [`LoadBalancerFlavour`] and a [`HostMemoryFlavour`].

use ccm_aws_api::{AwsError, CatalogLookup, Ec2, Elb, Elbv2, SubnetId, Tags};
use ccm_cloud_provider::NodeView;

use super::{HostMemoryFlavour, LoadBalancerFlavour, Ports, Scope};
use crate::{
    Error, LoadBalancerConfig,
    dry_run::{Changes, DesiredModel, DryRun},
    memory::{self, Facts, Ids, Learnt, NetworkMemory, Remembered},
    nlb,
    ownership::Claim,
    spec::ServiceSpec,
};

/// NLBs, with instance or IP targets.
pub(crate) struct Network;

impl LoadBalancerFlavour for Network {
    const KIND: &'static str = "NLB";
    const OTHER: &'static str = "a Classic ELB";

    type Desired = nlb::Desired;
    type Observed = nlb::Observed;
    type Change = nlb::Change;
    type Applied = nlb::Applied;

    fn build(
        spec: &ServiceSpec,
        nodes: &[&NodeView],
        config: &LoadBalancerConfig,
        cluster_name: &str,
        subnets: &[SubnetId],
    ) -> Result<Self::Desired, Error> {
        nlb::build(spec, nodes, config, cluster_name, subnets)
    }

    /// Built without subnets (the node rules take the NLB's own): the per-subnet addresses do not matter here.
    fn hosts_spec(mut spec: ServiceSpec) -> ServiceSpec {
        spec.eip_allocations.clear();
        spec.private_ipv4_addresses.clear();
        spec
    }

    fn name(desired: &Self::Desired) -> &str {
        &desired.name
    }

    fn adopt(desired: &mut Self::Desired) {
        desired
            .tags
            .insert(crate::shared::ADOPTED_TAG.to_owned(), "true".to_owned());
    }

    fn found(observed: &Self::Observed) -> Option<&Tags> {
        static UNTAGGED: Tags = Tags::new();
        let lb = observed.load_balancer.as_ref()?;
        Some(observed.tags.get(&lb.arn).unwrap_or(&UNTAGGED))
    }

    async fn observe<E: CatalogLookup + Sync, L: Elb + Sync, V: Elbv2 + Sync>(
        ports: &Ports<'_, E, L, V>,
        desired: &Self::Desired,
        scope: Scope,
    ) -> Result<Self::Observed, Error> {
        nlb::observe(ports.ec2, ports.elb, ports.elbv2, ports.config, desired, scope).await
    }

    fn exists(observed: &Self::Observed) -> bool {
        observed.load_balancer.is_some()
    }

    fn plan(desired: &Self::Desired, observed: &Self::Observed) -> Vec<Self::Change> {
        nlb::plan(desired, observed)
    }

    fn check_plan(
        desired: &Self::Desired,
        observed: &Self::Observed,
        changes: &[Self::Change],
    ) -> Result<(), Error> {
        nlb::plan::protected_recreation(desired, observed, changes)
    }

    async fn apply<E: Ec2 + Sync, L: Elb + Sync, V: Elbv2 + Sync>(
        ports: &Ports<'_, E, L, V>,
        claim: &Claim,
        observed: &Self::Observed,
        changes: &[Self::Change],
    ) -> Result<Self::Applied, Error> {
        nlb::apply(ports.ec2, ports.elbv2, ports.config, claim, observed, changes).await
    }

    fn hostname(observed: Self::Observed, applied: Self::Applied) -> Result<String, Error> {
        match &applied.created.or(observed.load_balancer) {
            Some(lb) => Ok(nlb::status_hostname(lb)?.unwrap_or_default()),
            None => Ok(String::new()),
        }
    }

    async fn other_exists<E: Ec2 + Sync, L: Elb + Sync, V: Elbv2 + Sync>(
        ports: &Ports<'_, E, L, V>,
        name: &str,
    ) -> Result<bool, Error> {
        Ok(ports
            .elb
            .load_balancer(name)
            .await
            .map_err(Error::aws("reading the load balancer"))?
            .is_some())
    }

    async fn load_balancer_tags<E: Ec2 + Sync, L: Elb + Sync, V: Elbv2 + Sync>(
        ports: &Ports<'_, E, L, V>,
        _name: &str,
        observed: &Self::Observed,
    ) -> Result<Tags, AwsError> {
        let Some(lb) = &observed.load_balancer else {
            return Ok(Tags::new());
        };
        let arns = [lb.arn.clone()];
        let mut tags = ports.elbv2.tags(&arns).await?;
        Ok(tags.remove(&arns[0]).unwrap_or_default())
    }

    fn dry_run(spec: ServiceSpec, desired: Self::Desired, changes: Vec<Self::Change>) -> DryRun {
        DryRun {
            spec,
            desired: DesiredModel::Network(desired),
            recreation: super::recreation_of(&changes),
            changes: Changes::Network(changes),
            waiting_ports: Vec::new(),
        }
    }

    fn provisional(observed: &Self::Observed) -> bool {
        observed
            .node_rules
            .as_ref()
            .is_some_and(|n| !n.subnets_without_interfaces.is_empty())
    }

    fn skipped(observed: &Self::Observed) -> std::collections::BTreeMap<String, String> {
        observed
            .node_rules
            .as_ref()
            .map(|n| n.skipped.clone())
            .unwrap_or_default()
    }
}

impl HostMemoryFlavour for Network {
    fn remember(
        desired: &Self::Desired,
        observed: &Self::Observed,
        applied: &Self::Applied,
        changes: &[Self::Change],
        ids: &Ids,
    ) -> Option<Remembered> {
        NetworkMemory::after(desired, observed, applied, changes, ids)
            .map(|m| Remembered::Network(Box::new(m)))
    }

    fn recall(desired: &Self::Desired, remembered: &Remembered, facts: &Facts) -> Option<Self::Observed> {
        match remembered {
            Remembered::Network(m) => m.recall(desired, facts),
            Remembered::Classic(_) => None,
        }
    }

    fn fact_instances(desired: &Self::Desired) -> &[String] {
        match &desired.node_access {
            Some(access) => &access.instances,
            None => &[],
        }
    }

    fn learnt(observed: &Self::Observed) -> Learnt {
        memory::network_learnt(observed)
    }

    fn fingerprint(desired: &Self::Desired) -> u64 {
        memory::network_fingerprint(desired)
    }

    fn from_memory(change: &Self::Change) -> bool {
        matches!(
            change,
            nlb::Change::RegisterTargets { .. } | nlb::Change::DeregisterTargets { .. }
        )
    }
}
