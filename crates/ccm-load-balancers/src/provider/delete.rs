//! Deletion and the ownership record of [`AwsLoadBalancers`]: both flavours' leftovers found by name and tag.

use std::{collections::BTreeSet, future::Future};

use ccm_aws_api::{AwsError, Ec2, Elb, Elbv2, SecurityGroupId, Tags};
use ccm_cloud_provider::CloudError;
use k8s_openapi::api::core::v1::Service;

use super::AwsLoadBalancers;
use crate::{
    Error,
    annotations::{Annotations, DELETION_PROTECTION, Key},
    classic, nlb, ownership, shared,
    spec::parse_service,
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
        let uid_name = shared::load_balancer_name(service.metadata.uid.as_deref().unwrap_or_default())?;
        for name in super::names::all_names(service) {
            self.delete_guarded(cluster_name, service, &name, name != uid_name)
                .await?;
        }
        Ok(())
    }

    /// [`delete_named`](Self::delete_named), but under a `chosen` name (not the UID name) only when what is
    /// there is this Service's: a Service author must not delete another Service's load balancer by naming it.
    pub(super) async fn delete_guarded(
        &self,
        cluster_name: &str,
        service: &Service,
        name: &str,
        chosen: bool,
    ) -> Result<(), CloudError> {
        if chosen {
            let (namespace, service_name) = crate::spec::namespace_and_name(service);
            let key = ccm_cloud_provider::namespaced_key(namespace, service_name);
            if let super::names::Probe::Taken(refused) = self.probe(name, &key, true).await? {
                tracing::warn!(load_balancer = name, %refused, "not deleting a load balancer of another Service");
                return Ok(());
            }
        }
        self.delete_named(cluster_name, service, name).await
    }

    /// Deletes both flavours' resources under `name` (see [`delete`](Self::delete)).
    async fn delete_named(
        &self,
        cluster_name: &str,
        service: &Service,
        name: &str,
    ) -> Result<(), CloudError> {
        let raw = service.metadata.annotations.clone().unwrap_or_default();
        let annotations = Annotations::parse(&raw);
        let keep: BTreeSet<String> = [Key::SecurityGroups, Key::ExtraSecurityGroups]
            .iter()
            .flat_map(|k| annotations.list(*k).unwrap_or_default().iter().cloned())
            .collect();
        self.memory.verify(name, false);
        self.memory.settle_targets(service.metadata.uid.as_deref(), None);
        self.memory.forget(name);
        self.delete_classic(service, name, &annotations, &keep).await?;
        // The NLB side, always: its target groups and managed group can outlive the NLB (and the annotation).
        Box::pin(self.delete_network(cluster_name, service, name, &annotations, &keep)).await
    }

    /// The Classic ELB side of a deletion.
    async fn delete_classic(
        &self,
        service: &Service,
        name: &str,
        annotations: &Annotations,
        keep: &BTreeSet<String>,
    ) -> Result<(), CloudError> {
        let (namespace, service_name) = crate::spec::namespace_and_name(service);
        let key = ccm_cloud_provider::namespaced_key(namespace, service_name);
        // The node rules' source when the load balancer is gone already: the first given group, else the
        // operator's `ElbSecurityGroup`.
        let source = match annotations.list(Key::SecurityGroups) {
            Some(given) => given.first().map(|g| SecurityGroupId::new(g.clone())),
            None => self.config.elb_security_group.clone(),
        };
        let observed = classic::observe_delete(
            &self.ec2,
            &self.elb,
            &self.config,
            name,
            &key,
            keep,
            source.as_ref(),
        )
        .await?;
        let changes = classic::plan_delete(name, &observed);
        classic::apply(&self.ec2, &self.elb, &self.config, name, None, &changes).await?;
        Ok(())
    }

    /// The NLB side of a deletion: the NLB under `name`, and the Service's target groups and managed group.
    async fn delete_network(
        &self,
        cluster_name: &str,
        service: &Service,
        name: &str,
        annotations: &Annotations,
        keep: &BTreeSet<String>,
    ) -> Result<(), CloudError> {
        let uid = service.metadata.uid.as_deref().unwrap_or_default();
        let (namespace, service_name) = crate::spec::namespace_and_name(service);
        let target_groups: Vec<String> = parse_service(service)
            .map(|spec| {
                nlb::listeners(&spec, &self.config)
                    .into_iter()
                    .map(|l| l.target_group.name)
                    .collect()
            })
            .unwrap_or_default();
        let managed = nlb::managed_group_name(cluster_name, namespace, service_name, uid);
        let observed = Box::pin(nlb::observe_delete(
            &self.ec2,
            &self.elbv2,
            &self.config,
            name,
            (namespace, service_name),
            &target_groups,
            Some(&managed)
                .filter(|_| !keep.contains(&managed))
                .map(String::as_str),
        ))
        .await?;
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
        nlb::apply(&self.ec2, &self.elbv2, &self.config, name, &found, &changes).await?;
        Ok(())
    }

    /// The ownership check of an update, which reads no tags otherwise: `tags` is read only for a load balancer
    /// this process has not yet seen to be ours (and, under a chosen name, to name `claimant`).
    pub(super) async fn ours(
        &self,
        name: &str,
        claimant: Option<&str>,
        tags: impl Future<Output = Result<Tags, AwsError>>,
    ) -> Result<(), Error> {
        if self.memory.verified(name) {
            return Ok(());
        }
        let tags = tags
            .await
            .map_err(Error::aws("reading the load balancer's tags"))?;
        ownership::check(&self.config, name, &tags)?;
        if let Some(service) = claimant {
            ownership::check_claim(&self.config, name, &tags, service)?;
        }
        self.memory.verify(name, true);
        Ok(())
    }
}
