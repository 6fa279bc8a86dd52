//! Deletion and the ownership record of [`AwsLoadBalancers`]: both flavours' leftovers found by name and tag.

use std::collections::BTreeSet;

use ccm_aws_api::{Ec2, Elb, Elbv2, SecurityGroupId};
use ccm_cloud_provider::CloudError;
use k8s_openapi::api::core::v1::Service;

use super::AwsLoadBalancers;
use crate::{
    annotations::{Annotations, DELETION_PROTECTION, Key},
    classic, nlb,
    ownership::{Claimant, Purpose},
    shared,
    spec::parse_service_with,
};

impl<E: Ec2 + Send + Sync, L: Elb + Send + Sync, V: Elbv2 + Send + Sync> AwsLoadBalancers<E, L, V> {
    /// Deletes both flavours' resources under every name the Service's load balancer may have (its UID name,
    /// `aws-load-balancer-name`, the name its status shows), whatever the type annotation says now and whether
    /// or not the load balancer itself still exists: a Classic ELB or an NLB made by this controller (before a
    /// refused type change or a rename, say) and the groups, target groups and rules made for it must not
    /// outlive the Service. Each side finds its leftovers by deterministic names and ownership tags, so this
    /// can be repeated after a crash at any point. A resource AWS still holds makes it answer
    /// [`CloudError::Waiting`]. Under a name other than the UID name, a load balancer that does not name this
    /// Service is left alone with all that its name finds.
    #[tracing::instrument(level = "debug", skip_all, fields(namespace = service.metadata.namespace.as_deref(), name = service.metadata.name.as_deref()))]
    pub(super) async fn delete(&self, cluster_name: &str, service: &Service) -> Result<(), CloudError> {
        // A Service without a UID has no name of its own: refused, naming why.
        shared::load_balancer_name(service.metadata.uid.as_deref().unwrap_or_default())?;
        for name in super::names::all_names(service) {
            self.delete_guarded(cluster_name, service, &name).await?;
        }
        Ok(())
    }

    /// The deletion of `predecessor`, an earlier incarnation of `successor` (the same namespace and name, deleted
    /// and re-created while its cleanup waited): every name it may have, but those the successor may have.
    pub(super) async fn delete_predecessor(
        &self,
        cluster_name: &str,
        predecessor: &Service,
        successor: &Service,
    ) -> Result<(), CloudError> {
        // A Service without a UID has no name of its own: refused, naming why.
        shared::load_balancer_name(predecessor.metadata.uid.as_deref().unwrap_or_default())?;
        // A successor that wants no load balancer (of another type now) keeps no name from its predecessor.
        let wants = successor
            .spec
            .as_ref()
            .is_some_and(|s| s.type_.as_deref() == Some("LoadBalancer"));
        let wanted = if wants {
            super::names::all_names(successor)
        } else {
            Vec::new()
        };
        for name in super::names::all_names(predecessor) {
            if wanted.contains(&name) {
                tracing::info!(load_balancer = %name, "left to the re-created Service, which wants its name");
                continue;
            }
            self.delete_guarded(cluster_name, predecessor, &name).await?;
        }
        Ok(())
    }

    /// [`delete_named`](Self::delete_named), but under a chosen name (not the UID name) only when what is there
    /// is this Service's: a Service author must not delete another Service's load balancer, nor anything found
    /// under its name, by naming it.
    pub(super) async fn delete_guarded(
        &self,
        cluster_name: &str,
        service: &Service,
        name: &str,
    ) -> Result<(), CloudError> {
        let claimant = Claimant::of_service(name, service);
        if claimant.chosen
            && let super::names::Probe::Taken(refused) = self.probe(&claimant, Purpose::Delete).await?
        {
            tracing::warn!(load_balancer = name, %refused, "not deleting a load balancer of another Service");
            return Ok(());
        }
        self.delete_named(cluster_name, service, &claimant).await
    }

    /// Deletes both flavours' resources under the claimant's name (see [`delete`](Self::delete)).
    async fn delete_named(
        &self,
        cluster_name: &str,
        service: &Service,
        claimant: &Claimant,
    ) -> Result<(), CloudError> {
        let raw = service.metadata.annotations.clone().unwrap_or_default();
        let annotations = Annotations::parse(&raw);
        let keep: BTreeSet<String> = [Key::SecurityGroups, Key::ExtraSecurityGroups]
            .iter()
            .flat_map(|k| annotations.list(*k).unwrap_or_default().iter().cloned())
            .collect();
        let name = claimant.load_balancer.as_str();
        if self.memory.claim_of(claimant).is_some() {
            // Only this incarnation's memory: the load balancer may be another incarnation's now.
            self.memory.release(name);
            self.memory.forget(name);
        }
        self.memory
            .settle_targets::<()>(service.metadata.uid.as_deref(), None);
        // The flavour the Service names goes first. When its load balancer is there and this Service's, the other
        // flavour's side is not read: no load balancer of the other flavour can be under the same name (each
        // flavour's creation is refused while the other's is there), so all it could find is the leftovers of a
        // creation that failed before the type annotation changed (the region's target groups would be listed
        // for those at every deletion); `doctor` reports them. Otherwise (nothing of ours there, a crash after
        // the load balancer went, a refused type change) both sides are swept.
        if annotations.text(Key::Type) == Some("nlb") {
            let served =
                Box::pin(self.delete_network(cluster_name, service, claimant, &annotations, &keep)).await?;
            if !served {
                self.delete_classic(claimant, &annotations, &keep).await?;
            }
        } else if !self.delete_classic(claimant, &annotations, &keep).await? {
            // Its target groups and managed group can outlive the NLB (and the annotation).
            Box::pin(self.delete_network(cluster_name, service, claimant, &annotations, &keep)).await?;
        }
        Ok(())
    }

    /// The Classic ELB side of a deletion: whether the Classic ELB was there and this Service's.
    async fn delete_classic(
        &self,
        claimant: &Claimant,
        annotations: &Annotations,
        keep: &BTreeSet<String>,
    ) -> Result<bool, CloudError> {
        // The node rules' source when the load balancer is gone already: the first given group, else the
        // operator's `ElbSecurityGroup`.
        let source = match annotations.list(Key::SecurityGroups) {
            Some(given) => given.first().map(|g| SecurityGroupId::new(g.clone())),
            None => self.config.elb_security_group.clone(),
        };
        let (observed, claim) = Box::pin(classic::observe_delete(
            &self.ec2,
            &self.elb,
            &self.elbv2,
            &self.config,
            claimant,
            keep,
            source.as_ref(),
        ))
        .await?;
        if releases(annotations, observed.load_balancer.is_some(), observed.adopted) {
            tracing::info!(load_balancer = claim.name(), service = %claimant.service, adopted = observed.adopted,
                "releasing the Classic ELB instead of deleting it");
            let (hand_over, keys) = self.release_tags();
            let changes = classic::plan_release((&hand_over, &claimant.service), &keys, &observed);
            let managed = observed.groups.first().cloned();
            // Boxed, as every apply of a deletion: the futures are large, and a worker's stack is not.
            Box::pin(classic::apply(
                &self.ec2,
                &self.elb,
                &self.config,
                &claim,
                managed,
                &changes,
            ))
            .await?;
            return Ok(true);
        }
        let changes = classic::plan_delete(claim.name(), &observed);
        Box::pin(classic::apply(
            &self.ec2,
            &self.elb,
            &self.config,
            &claim,
            None,
            &changes,
        ))
        .await?;
        Ok(observed.load_balancer.is_some())
    }

    /// The NLB side of a deletion: the NLB under the claimant's name, and the Service's target groups and
    /// managed group; whether the NLB was there and this Service's.
    async fn delete_network(
        &self,
        cluster_name: &str,
        service: &Service,
        claimant: &Claimant,
        annotations: &Annotations,
        keep: &BTreeSet<String>,
    ) -> Result<bool, CloudError> {
        let uid = service.metadata.uid.as_deref().unwrap_or_default();
        let (namespace, service_name) = crate::spec::namespace_and_name(service);
        let target_groups: Vec<String> = parse_service_with(service, &self.config.attribute_keys)
            .map(|spec| {
                nlb::listeners(&spec, &self.config)
                    .into_iter()
                    .map(|l| l.target_group.name)
                    .collect()
            })
            .unwrap_or_default();
        let managed = nlb::managed_group_name(cluster_name, namespace, service_name, uid);
        let (observed, claim) = Box::pin(nlb::observe_delete(
            &self.ec2,
            &self.elb,
            &self.elbv2,
            &self.config,
            claimant,
            &target_groups,
            Some(&managed)
                .filter(|_| !keep.contains(&managed))
                .map(String::as_str),
        ))
        .await?;
        let name = claim.name();
        let release = releases(annotations, observed.load_balancer.is_some(), observed.adopted);
        if release && let Some(found) = Box::pin(nlb::observe_release(&self.elbv2, &observed)).await? {
            let key = &claimant.service;
            tracing::info!(load_balancer = name, service = %key, adopted = observed.adopted,
                "releasing the NLB instead of deleting it");
            let (hand_over, keys) = self.release_tags();
            let changes = nlb::plan_release(name, (&hand_over, key), &keys, &observed, &found);
            Box::pin(nlb::apply(
                &self.ec2,
                &self.elbv2,
                &self.config,
                &claim,
                &found,
                &changes,
            ))
            .await?;
            return Ok(true);
        }
        let consent = annotations
            .pairs(Key::LoadBalancerAttributes)
            .unwrap_or_default()
            .iter()
            .any(|(k, v)| k == DELETION_PROTECTION && v == "false");
        let mut changes: Vec<nlb::Change> = nlb::unprotect(name, &observed, consent)?.into_iter().collect();
        changes.extend(nlb::plan_delete(name, &observed));
        let found = nlb::Observed {
            load_balancer: observed.load_balancer.clone(),
            ..nlb::Observed::default()
        };
        Box::pin(nlb::apply(
            &self.ec2,
            &self.elbv2,
            &self.config,
            &claim,
            &found,
            &changes,
        ))
        .await?;
        Ok(observed.load_balancer.is_some())
    }

    /// The hand-over tag key and the tag keys a release removes, for this cluster.
    fn release_tags(&self) -> (String, Vec<String>) {
        (
            shared::hand_over_key(self.config.cluster.id()),
            shared::released_keys(&self.config.cluster),
        )
    }
}

/// Whether a deletion releases the load balancer found (`exists`) instead of deleting it: as
/// `aws-load-balancer-release-on-deletion` says, else when it was adopted.
fn releases(annotations: &Annotations, exists: bool, adopted: bool) -> bool {
    exists && annotations.bool(Key::ReleaseOnDeletion).unwrap_or(adopted)
}
