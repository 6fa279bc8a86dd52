//! The Classic ELB as a [`LoadBalancerFlavour`] and a [`HostMemoryFlavour`].

use ccm_aws_api::{AwsError, CatalogLookup, Ec2, Elb, Elbv2, SubnetId, Tags};
use ccm_cloud_provider::NodeView;

use super::{HostMemoryFlavour, LoadBalancerFlavour, Ports, Scope};
use crate::{
    Error, LoadBalancerConfig, classic,
    dry_run::{Changes, DesiredModel, DryRun},
    memory::{self, ClassicMemory, Facts, Ids, Learnt, Remembered},
    ownership::Claim,
    spec::ServiceSpec,
};

/// Classic ELBs.
pub(crate) struct Classic;

impl LoadBalancerFlavour for Classic {
    const KIND: &'static str = "Classic ELB";
    const OTHER: &'static str = "an NLB";

    type Desired = classic::Desired;
    type Observed = classic::Observed;
    type Change = classic::Change;
    type Applied = classic::Applied;

    fn build(
        spec: &ServiceSpec,
        nodes: &[&NodeView],
        config: &LoadBalancerConfig,
        _cluster_name: &str,
        subnets: &[SubnetId],
    ) -> Result<Self::Desired, Error> {
        classic::build(spec, nodes, config, subnets)
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
        observed.load_balancer.as_ref().map(|_| &observed.tags)
    }

    async fn observe<E: CatalogLookup + Sync, L: Elb + Sync, V: Elbv2 + Sync>(
        ports: &Ports<'_, E, L, V>,
        desired: &Self::Desired,
        scope: Scope,
    ) -> Result<Self::Observed, Error> {
        classic::observe(ports.ec2, ports.elb, ports.elbv2, ports.config, desired, scope).await
    }

    fn exists(observed: &Self::Observed) -> bool {
        observed.load_balancer.is_some()
    }

    fn plan(desired: &Self::Desired, observed: &Self::Observed) -> Vec<Self::Change> {
        classic::plan(desired, observed)
    }

    /// A consented recreation deletes the load balancer: an adopted one is released, never deleted, unless the
    /// Service says `aws-load-balancer-release-on-deletion: "false"`.
    fn check_plan(
        desired: &Self::Desired,
        observed: &Self::Observed,
        changes: &[Self::Change],
    ) -> Result<(), Error> {
        let recreates = changes.iter().any(|c| {
            matches!(
                c,
                classic::Change::DeleteLoadBalancer {
                    recreate_because: Some(_),
                    ..
                }
            )
        });
        let adopted = observed.load_balancer.is_some()
            && observed
                .tags
                .get(crate::shared::ADOPTED_TAG)
                .is_some_and(|v| v == "true");
        if recreates && adopted && desired.release_on_deletion != Some(false) {
            return Err(Error::AdoptedNotRecreated(desired.name.clone()));
        }
        Ok(())
    }

    async fn apply<E: Ec2 + Sync, L: Elb + Sync, V: Elbv2 + Sync>(
        ports: &Ports<'_, E, L, V>,
        claim: &Claim,
        observed: &Self::Observed,
        changes: &[Self::Change],
    ) -> Result<Self::Applied, Error> {
        let managed = observed.managed_group.as_ref().map(|g| g.id.clone());
        classic::apply(ports.ec2, ports.elb, ports.config, claim, managed, changes).await
    }

    fn hostname(observed: Self::Observed, applied: Self::Applied) -> Result<String, Error> {
        let existing = observed.load_balancer.map(|lb| lb.dns_name);
        Ok(applied.created_dns_name.or(existing).unwrap_or_default())
    }

    async fn other_exists<E: Ec2 + Sync, L: Elb + Sync, V: Elbv2 + Sync>(
        ports: &Ports<'_, E, L, V>,
        name: &str,
    ) -> Result<bool, Error> {
        Ok(ports
            .elbv2
            .load_balancer(name)
            .await
            .map_err(Error::aws("reading the NLB"))?
            .is_some_and(|lb| lb.lb_type == "network"))
    }

    async fn load_balancer_tags<E: Ec2 + Sync, L: Elb + Sync, V: Elbv2 + Sync>(
        ports: &Ports<'_, E, L, V>,
        name: &str,
        _observed: &Self::Observed,
    ) -> Result<Tags, AwsError> {
        ports.elb.tags(name).await
    }

    fn dry_run(spec: ServiceSpec, desired: Self::Desired, changes: Vec<Self::Change>) -> DryRun {
        DryRun {
            spec,
            desired: DesiredModel::Classic(desired),
            recreation: super::recreation_of(&changes),
            changes: Changes::Classic(changes),
            waiting_ports: Vec::new(),
        }
    }

    fn skipped(observed: &Self::Observed) -> std::collections::BTreeMap<String, String> {
        observed
            .node_groups
            .as_ref()
            .map(|n| n.instances.skipped.clone())
            .unwrap_or_default()
    }
}

impl HostMemoryFlavour for Classic {
    fn remember(
        _desired: &Self::Desired,
        observed: &Self::Observed,
        _applied: &Self::Applied,
        changes: &[Self::Change],
        ids: &Ids,
    ) -> Option<Remembered> {
        ClassicMemory::after(observed, changes, ids).map(Remembered::Classic)
    }

    fn recall(desired: &Self::Desired, remembered: &Remembered, facts: &Facts) -> Option<Self::Observed> {
        match remembered {
            Remembered::Classic(m) => m.recall(desired, facts),
            Remembered::Network(_) => None,
        }
    }

    fn fact_instances(desired: &Self::Desired) -> &[String] {
        if desired.manage_node_rules {
            &desired.instances
        } else {
            &[]
        }
    }

    fn learnt(observed: &Self::Observed) -> Learnt {
        memory::classic_learnt(observed)
    }

    fn fingerprint(desired: &Self::Desired) -> u64 {
        memory::classic_fingerprint(desired)
    }

    fn from_memory(change: &Self::Change) -> bool {
        matches!(
            change,
            classic::Change::RegisterInstances { .. } | classic::Change::DeregisterInstances { .. }
        )
    }
}
