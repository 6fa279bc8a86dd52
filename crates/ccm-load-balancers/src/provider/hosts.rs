//! Host updates of [`AwsLoadBalancers`] (node changes): planned from the host memory (crate `memory`) when this
//! process ensured or updated the load balancer recently, else from reads, and what every ensure and update
//! leaves in that memory.

use std::collections::BTreeSet;

use tokio::time::Instant;

use ccm_aws_api::{Ec2, Elb, Elbv2};
use ccm_cloud_provider::{CloudError, Drift, NodeView};
use k8s_openapi::api::core::v1::Service;

use super::AwsLoadBalancers;
use crate::{
    Error,
    flavour::{HostMemoryFlavour, LoadBalancerFlavour, PlannedChange, Scope},
    memory::{Entry, Ticket},
    ownership::{self, Claim, Claimant, Purpose},
    shared,
    spec::ServiceSpec,
};

/// The state a host plan starts from, the plan, and when that state was read from AWS.
struct HostPlan<F: LoadBalancerFlavour> {
    observed: F::Observed,
    changes: Vec<F::Change>,
    read_at: Instant,
    /// Whether `observed` was read just now (what it says about instances is then learnt).
    fresh: bool,
}

impl<E: Ec2 + Send + Sync, L: Elb + Send + Sync, V: Elbv2 + Send + Sync> AwsLoadBalancers<E, L, V> {
    /// Node changes for one flavour: the targets and the nodes' rules only (no subnet discovery: built without
    /// subnets, with the controller's cluster name as ensure). Planned from memory when this process holds the
    /// claim of `claimant` (its ensure or update succeeded here) and remembers the load balancer; the writes alone
    /// are made then. Otherwise from reads, the claim made from the load balancer's tags read now.
    pub(super) async fn update_with<F: HostMemoryFlavour>(
        &self,
        cluster_name: &str,
        claimant: &Claimant,
        spec: ServiceSpec,
        nodes: &[&NodeView],
    ) -> Result<(), CloudError> {
        let ports = self.ports();
        let spec = F::hosts_spec(spec);
        let desired = F::build(&spec, nodes, &self.config, cluster_name, &[])?;
        let name = F::name(&desired);
        if claimant.load_balancer != name {
            // Built for another name than the one to claim (never: both come from the spec).
            return Err(ownership::unclaimed(name, &claimant.load_balancer).into());
        }
        let fingerprint = F::fingerprint(&desired);
        let held = self.memory.claim_of(claimant);
        let ticket = self.memory.begin(name);
        // Each step boxed: their futures are large, and nested inline they overflowed a worker's stack in
        // debug builds.
        let remembered = match ticket.entry.as_ref() {
            Some(entry) if entry.fingerprint == fingerprint && held.is_some() => {
                Box::pin(self.recall::<F>(&desired, entry)).await?
            }
            entry => {
                let reason = memory_miss(entry.map(|e| e.fingerprint == fingerprint));
                tracing::debug!(load_balancer = name, reason, "host update read from AWS");
                None
            }
        };
        let (plan, claim) = match (remembered, held) {
            (Some(plan), Some(claim)) => (plan, claim),
            (_, held) => Box::pin(self.observe_hosts::<F>(&desired, claimant, held)).await?,
        };
        let applied = Box::pin(F::apply(&ports, &claim, &plan.observed, &plan.changes)).await?;
        self.memory.hold(claim);
        self.settle::<F>(ticket, fingerprint, &desired, &plan, &applied);
        Ok(())
    }

    /// The host plan from memory, or `None` when it cannot be planned from memory (the nodes' rules change).
    async fn recall<F: HostMemoryFlavour>(
        &self,
        desired: &F::Desired,
        entry: &Entry,
    ) -> Result<Option<HostPlan<F>>, Error> {
        let ids = F::fact_instances(desired);
        let facts = if ids.is_empty() {
            Default::default()
        } else {
            self.memory.facts(&self.ec2, &self.config, ids).await?
        };
        let Some(observed) = F::recall(desired, &entry.state, &facts) else {
            tracing::debug!(
                load_balancer = F::name(desired),
                reason = "the nodes' security groups differ from those remembered",
                "host update read from AWS"
            );
            return Ok(None);
        };
        let changes = host_changes::<F>(desired, &observed);
        if !changes.iter().all(F::from_memory) {
            tracing::debug!(
                load_balancer = F::name(desired),
                reason = "a change beyond registering and deregistering targets",
                "host update read from AWS"
            );
            return Ok(None);
        }
        tracing::debug!(
            load_balancer = F::name(desired),
            changes = changes.len(),
            "host update planned from memory"
        );
        Ok(Some(HostPlan {
            observed,
            changes,
            read_at: entry.read_at,
            fresh: false,
        }))
    }

    /// The host plan from reads: the load balancer (which must exist), its targets and the nodes' groups; with
    /// the claim `held` by this process, else one made from the load balancer's tags, read now.
    async fn observe_hosts<F: LoadBalancerFlavour>(
        &self,
        desired: &F::Desired,
        claimant: &Claimant,
        held: Option<Claim>,
    ) -> Result<(HostPlan<F>, Claim), Error> {
        let ports = self.ports();
        let name = F::name(desired);
        let read_at = Instant::now();
        let observed = F::observe(&ports, desired, Scope::Hosts).await?;
        if !F::exists(&observed) {
            return Err(Error::NotFound(name.to_owned()));
        }
        let claim = match held {
            Some(claim) => claim,
            None => {
                let tags = F::load_balancer_tags(&ports, name, &observed)
                    .await
                    .map_err(Error::aws("reading the load balancer's tags"))?;
                ownership::claim(&self.config, claimant, Some(&tags), Purpose::Serve)?
            }
        };
        let changes = host_changes::<F>(desired, &observed);
        let plan = HostPlan {
            observed,
            changes,
            read_at,
            fresh: true,
        };
        Ok((plan, claim))
    }

    /// The fingerprint a host update of this Service would find: of the load balancer built as a host update
    /// builds it (without subnets); `None` when it cannot be built.
    pub(super) fn hosts_fingerprint<F: HostMemoryFlavour>(
        &self,
        cluster_name: &str,
        spec: &ServiceSpec,
        nodes: &[&NodeView],
    ) -> Option<u64> {
        let hosts = F::build(
            &F::hosts_spec(spec.clone()),
            nodes,
            &self.config,
            cluster_name,
            &[],
        );
        hosts.ok().map(|d| F::fingerprint(&d))
    }

    /// Remembers what `plan`, applied, left.
    fn settle<F: HostMemoryFlavour>(
        &self,
        ticket: Ticket,
        fingerprint: u64,
        desired: &F::Desired,
        plan: &HostPlan<F>,
        applied: &F::Applied,
    ) {
        let outcome = Outcome::<F> {
            desired,
            observed: &plan.observed,
            applied,
            changes: &plan.changes,
            read_at: plan.read_at,
            fresh: plan.fresh,
        };
        self.keep(ticket, Some(fingerprint), &outcome);
    }

    /// Ends the operation of `ticket` after a successful apply: learns what a fresh observation says about the
    /// instances and remembers the load balancer as the apply left it (with `fingerprint`; none: forgotten).
    pub(super) fn keep<F: HostMemoryFlavour>(
        &self,
        ticket: Ticket,
        fingerprint: Option<u64>,
        outcome: &Outcome<'_, F>,
    ) {
        if outcome.fresh {
            let (running, groups) = F::learnt(outcome.observed);
            self.memory.learn(running, groups);
        }
        let entry = fingerprint.and_then(|fingerprint| {
            let state = F::remember(
                outcome.desired,
                outcome.observed,
                outcome.applied,
                outcome.changes,
                self.memory.ids(),
            )?;
            Some(Entry {
                fingerprint,
                read_at: outcome.read_at,
                state,
            })
        });
        self.memory.finish(ticket, entry);
    }

    /// After a drift detection pass: forgets the drifted load balancers, and every load balancer and instance
    /// that is not among `services` and `nodes` (memory stays bounded by what exists).
    /// Adds a drift for each Service whose load balancer's last full ensure left its nodes' rules provisional
    /// (an NLB's health rules from its subnets' CIDRs while its network interfaces were not seen), so that the
    /// re-ensure narrows them: no bulk listing shows the nodes' rules.
    pub(super) fn provisional_drifts(&self, services: &[&Service], drifts: &mut Vec<Drift>) {
        for service in services {
            let (namespace, service_name) = crate::spec::namespace_and_name(service);
            let key = ccm_cloud_provider::namespaced_key(namespace, service_name);
            let provisional = super::names::all_names(service)
                .iter()
                .any(|name| self.memory.is_provisional(name));
            if !provisional {
                continue;
            }
            let what =
                "health check rules from the NLB's subnets until its network interfaces are seen".to_owned();
            match drifts.iter_mut().find(|d| d.service == key) {
                Some(drift) => drift.what.push(what),
                None => drifts.push(Drift::new(key, vec![what])),
            }
        }
    }

    pub(super) fn drift_checked(&self, services: &[&Service], nodes: &[&NodeView], drifts: &[Drift]) {
        let mut names = BTreeSet::new();
        for service in services {
            let (namespace, service_name) = crate::spec::namespace_and_name(service);
            let key = ccm_cloud_provider::namespaced_key(namespace, service_name);
            let drifted = drifts.iter().any(|d| d.service == key);
            for name in super::names::all_names(service) {
                if drifted {
                    // Its next host update reads again, whatever its targets, and so repairs what it can.
                    tracing::debug!(load_balancer = name, "forgotten: drift detection reported it");
                    self.memory.forget(&name);
                } else {
                    names.insert(name);
                }
            }
            if drifted {
                self.memory
                    .settle_targets::<()>(service.metadata.uid.as_deref(), None);
            }
        }
        let instances = shared::target_instances(nodes, &[])
            .into_iter()
            .map(|i| i.into_string())
            .collect();
        // Load balancers of Services gone without a deletion seen by this process are not ours to remember.
        self.memory.retain(&names, &instances);
    }
}

/// Why a host update cannot be planned from memory, for the debug log: `matches` is whether a fresh entry's
/// fingerprint matches the desired load balancer's (`None`: no fresh entry). Called only when memory cannot
/// serve, so a matching entry means the claim is not held.
fn memory_miss(matches: Option<bool>) -> &'static str {
    match matches {
        None => {
            "nothing fresh remembered (not ensured here within the hour, forgotten after drift, or another \
             operation on it overlapped)"
        }
        Some(false) => "its settings changed since it was remembered",
        Some(true) => "no ownership claim held for it",
    }
}

/// What an apply left: the desired load balancer, the state its plan started from (read at `read_at`, just now
/// when `fresh`), what the apply reported and the changes it made.
pub(super) struct Outcome<'a, F: LoadBalancerFlavour> {
    pub(super) desired: &'a F::Desired,
    pub(super) observed: &'a F::Observed,
    pub(super) applied: &'a F::Applied,
    pub(super) changes: &'a [F::Change],
    pub(super) read_at: Instant,
    pub(super) fresh: bool,
}

/// The host changes of the plan from `observed` to `desired`.
fn host_changes<F: LoadBalancerFlavour>(desired: &F::Desired, observed: &F::Observed) -> Vec<F::Change> {
    F::plan(desired, observed)
        .into_iter()
        .filter(PlannedChange::is_host_change)
        .collect()
}
