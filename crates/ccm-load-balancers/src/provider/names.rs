//! Which names a Service's load balancer goes by, and what a name change does: the name it should have
//! (`aws-load-balancer-name`, else the UID name), the one its status shows (made before a rename) and the UID
//! name; a load balancer under a name is looked up in both flavours and must be this Service's.

use ccm_aws_api::{Ec2, Elb, Elbv2, Tags};
use ccm_cloud_provider::{CloudError, Notice};
use k8s_openapi::api::core::v1::Service;

use super::AwsLoadBalancers;
pub(super) use crate::shared::{all_names, wanted_name};
use crate::{
    Error,
    ownership::{self, Claimant, Purpose},
    shared,
    spec::{Flavour, ServiceSpec},
};

/// A pending change of the load balancer's name.
#[derive(Debug)]
pub(super) struct Rename {
    /// The name the load balancer has.
    pub(super) from: String,
    /// What changes, for notices and dry runs.
    pub(super) reason: String,
    /// Whether the Service consents to the recreation.
    pub(super) consent: bool,
    /// With consent, the old names to delete.
    pub(super) leftovers: Vec<String>,
}

/// What is under a load balancer name.
#[derive(Debug)]
pub(super) enum Probe {
    /// No load balancer.
    Absent,
    /// This Service's load balancer, of that flavour.
    Ours(Flavour),
    /// A load balancer this Service must not touch: why.
    Taken(Error),
    /// Only an ELBv2 load balancer of another type (an ALB, of that type): no Classic ELB can be ours here, and
    /// no NLB can be made under the name ([`ownership::other_type`]).
    OtherType(String),
}

impl<E: Ec2 + Send + Sync, L: Elb + Send + Sync, V: Elbv2 + Send + Sync> AwsLoadBalancers<E, L, V> {
    /// What is under the claimant's name, for `purpose`: its claim decides ([`ownership::claim`]). An ELBv2 load
    /// balancer of another type (an ALB) is never claimed: the Classic ELB namespace is a separate one, so a
    /// Classic ELB under the name is still looked for; without one, [`Probe::OtherType`].
    pub(super) async fn probe(&self, claimant: &Claimant, purpose: Purpose) -> Result<Probe, Error> {
        let context = "reading a load balancer by name";
        let name = claimant.load_balancer.as_str();
        let decide =
            |tags: &Tags, flavour| match ownership::claim(&self.config, claimant, Some(tags), purpose) {
                Ok(_) => Probe::Ours(flavour),
                Err(refused) => Probe::Taken(refused),
            };
        let network = self
            .elbv2
            .load_balancer(name)
            .await
            .map_err(Error::aws(context))?;
        let other_type = match network {
            Some(lb) if lb.lb_type == "network" => {
                let arns = [lb.arn.clone()];
                let tags = self.elbv2.tags(&arns).await.map_err(Error::aws(context))?;
                let tags = tags.get(&lb.arn).cloned().unwrap_or_default();
                return Ok(decide(&tags, Flavour::Network));
            }
            Some(lb) => Some(lb.lb_type),
            None => None,
        };
        if self
            .elb
            .load_balancer(name)
            .await
            .map_err(Error::aws(context))?
            .is_none()
        {
            return Ok(other_type.map_or(Probe::Absent, Probe::OtherType));
        }
        let tags = self.elb.tags(name).await.map_err(Error::aws(context))?;
        Ok(decide(&tags, Flavour::Classic))
    }

    /// A name change of the Service's load balancer (its status shows another name than the wanted one), read
    /// only: the spec to serve (without consent, under the old name) and the rename, if one is pending. A
    /// wanted name taken by another Service's load balancer is refused here, before anything changes.
    pub(super) async fn rename_of(
        &self,
        service: &Service,
        mut spec: ServiceSpec,
    ) -> Result<(ServiceSpec, Option<Rename>), Error> {
        let wanted = shared::service_load_balancer_name(&spec)?;
        let old = shared::renamed_from(service, &wanted);
        if old.is_empty() {
            return Ok((spec, None));
        }
        let uid_name = shared::load_balancer_name(&spec.uid)?;
        let key = spec.key();
        match self
            .probe(
                &Claimant::new(&wanted, &key, &spec.uid).with_adopt(spec.adopt),
                Purpose::Serve,
            )
            .await?
        {
            Probe::Taken(refused) => return Err(refused),
            // Refused before the old load balancer goes: the new name can never be an NLB's.
            Probe::OtherType(lb_type) if spec.flavour == Flavour::Network => {
                return Err(ownership::other_type(&wanted, &lb_type));
            }
            // Made already (the old one was deleted before): ensure it as usual.
            Probe::Ours(_) => return Ok((spec, None)),
            Probe::Absent | Probe::OtherType(_) => {}
        }
        let serving = self.serving(&old, &key, &spec.uid).await?;
        let consent = spec.allow_recreation || self.config.allow_recreation;
        if !consent {
            let Some(from) = serving else {
                return Ok((spec, None));
            };
            spec.load_balancer_name = (from != uid_name).then(|| from.clone());
            let rename = Rename {
                reason: format!("the load balancer name {from} -> {wanted}"),
                from,
                consent,
                leftovers: Vec::new(),
            };
            return Ok((spec, Some(rename)));
        }
        // Every old candidate is deleted, found or not: a deletion that waited (a group AWS had not released)
        // left what only its name finds.
        let from = serving.unwrap_or_else(|| old[0].clone());
        let rename = Rename {
            reason: format!("the load balancer name {from} -> {wanted}"),
            from,
            consent,
            leftovers: old,
        };
        Ok((spec, Some(rename)))
    }

    /// What a name change of [`rename_of`](Self::rename_of) does in an ensure, once the new load balancer's
    /// desired state is built (its subnets resolved, every value checked): without consent the load balancer
    /// keeps its name (the spec `rename_of` gave names it) with a `LoadBalancerRecreationRequired` Warning; with
    /// consent the old one is deleted (all of it, before the new one is made: each step is then safe to repeat)
    /// with a `RecreatingLoadBalancer` Warning. A deletion that waits on AWS (the old one's security group
    /// still held) is [`CloudError::Waiting`], naming the rename: progress, reported as such, not a failure.
    pub(super) async fn renaming(
        &self,
        cluster_name: &str,
        service: &Service,
        key: &str,
        rename: Option<Rename>,
    ) -> Result<Option<Notice>, CloudError> {
        let Some(rename) = rename else {
            return Ok(None);
        };
        if !rename.consent {
            let message = shared::recreation_withheld_notice("load balancer", &rename.from, &rename.reason);
            tracing::warn!(service = %key, load_balancer = %rename.from, %message, "load balancer rename withheld");
            return Ok(Some(Notice::warning("LoadBalancerRecreationRequired", message)));
        }
        for name in &rename.leftovers {
            self.delete_guarded(cluster_name, service, name)
                .await
                .map_err(|e| match e {
                    CloudError::Waiting { waiting_for, after } => CloudError::waiting(
                        format!("{waiting_for}, before the rename ({}) goes on", rename.reason),
                        after,
                    ),
                    other => other,
                })?;
        }
        let message = shared::recreation_notice("load balancer", &rename.from, &rename.reason);
        tracing::warn!(service = %key, load_balancer = %rename.from, %message, "renaming the load balancer");
        Ok(Some(Notice::warning("RecreatingLoadBalancer", message)))
    }

    /// The first of `names` under which this Service's load balancer exists.
    async fn serving(&self, names: &[String], key: &str, uid: &str) -> Result<Option<String>, Error> {
        for name in names {
            match self.probe(&Claimant::new(name, key, uid), Purpose::Serve).await? {
                Probe::Ours(_) => return Ok(Some(name.clone())),
                Probe::Taken(refused) => {
                    tracing::warn!(service = %key, load_balancer = %name, %refused, "not this Service's load balancer");
                }
                Probe::Absent | Probe::OtherType(_) => {}
            }
        }
        Ok(None)
    }
}
