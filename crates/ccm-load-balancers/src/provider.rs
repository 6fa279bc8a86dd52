//! [`AwsLoadBalancers`]: the `LoadBalancer` capability over the EC2 and Classic ELB ports, and [`plan_for`], the
//! dry run over the same code.

use std::{collections::BTreeSet, fmt};

use ccm_aws_api::{Ec2, Elb, Elbv2, ec2::AvailabilityZone};
use ccm_cloud_provider::{CloudError, LoadBalancer, LoadBalancerStatus};
use k8s_openapi::api::core::v1::{LoadBalancerIngress, Node, Service};
use serde::Serialize;
use tokio::sync::OnceCell;

use crate::{
    Error, LoadBalancerConfig,
    annotations::{Annotations, Key},
    classic::{self, Change, Desired, Scope},
    shared,
    spec::{Flavour, ServiceSpec, parse_service},
};

/// Classic ELBs and NLBs for Services of type `LoadBalancer` (`nlb-ip` and `external` are implemented
/// elsewhere: the AWS Load Balancer Controller).
#[derive(Debug)]
pub struct AwsLoadBalancers<E, L, V> {
    ec2: E,
    elb: L,
    #[allow(dead_code, reason = "NLBs are being implemented on it")]
    elbv2: V,
    config: LoadBalancerConfig,
    zones: OnceCell<Vec<AvailabilityZone>>,
}

/// A dry run's result: the desired model and the plan against the current AWS state.
#[derive(Debug, Clone, Serialize)]
pub struct DryRun {
    /// The Service's spec.
    pub spec: ServiceSpec,
    /// The desired load balancer.
    pub desired: Desired,
    /// The ordered changes an ensure would make (empty: nothing to do).
    pub changes: Vec<Change>,
}

fn status(hostname: &str) -> LoadBalancerStatus {
    LoadBalancerStatus {
        ingress: (!hostname.is_empty()).then(|| {
            vec![LoadBalancerIngress {
                hostname: Some(hostname.to_owned()),
                ..LoadBalancerIngress::default()
            }]
        }),
    }
}

// === impl AwsLoadBalancers ===

impl<E: Ec2 + Send + Sync, L: Elb + Send + Sync, V: Elbv2 + Send + Sync> AwsLoadBalancers<E, L, V> {
    /// Load balancers over the EC2, Classic ELB and ELBv2 ports.
    pub fn new(ec2: E, elb: L, elbv2: V, config: LoadBalancerConfig) -> Self {
        Self {
            ec2,
            elb,
            elbv2,
            config,
            zones: OnceCell::new(),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &LoadBalancerConfig {
        &self.config
    }

    async fn zones(&self) -> Result<&[AvailabilityZone], Error> {
        // Zone types never change: read once per process.
        self.zones
            .get_or_try_init(|| async {
                self.ec2
                    .availability_zones()
                    .await
                    .map_err(Error::aws("reading availability zones"))
            })
            .await
            .map(Vec::as_slice)
    }

    /// The desired model of a valid Classic ELB Service.
    async fn desired(&self, spec: &ServiceSpec, nodes: &[&Node]) -> Result<Desired, Error> {
        let zones = if spec.subnets.is_none() {
            self.zones().await?
        } else {
            &[]
        };
        let subnets = shared::resolve_subnets(&self.ec2, &self.config, spec, zones).await?;
        classic::build(spec, nodes, &self.config, &subnets)
    }

    /// The dry run: the desired model and the plan against the current AWS state, reading only.
    pub async fn dry_run(&self, service: &Service, nodes: &[&Node]) -> Result<DryRun, Error> {
        let spec = parse_service(service)?;
        if spec.flavour == Flavour::Network {
            return Err(Error::NlbNotYetSupported);
        }
        let desired = self.desired(&spec, nodes).await?;
        let observed = classic::observe(&self.ec2, &self.elb, &self.config, &desired, Scope::Full).await?;
        let changes = classic::plan(&desired, &observed);
        Ok(DryRun {
            spec,
            desired,
            changes,
        })
    }

    #[tracing::instrument(level = "debug", skip_all, fields(namespace = service.metadata.namespace.as_deref(), name = service.metadata.name.as_deref()))]
    async fn ensure(&self, service: &Service, nodes: &[&Node]) -> Result<LoadBalancerStatus, CloudError> {
        let spec = parse_service(service).map_err(Error::from)?;
        match spec.flavour {
            Flavour::External => return Err(CloudError::ImplementedElsewhere),
            Flavour::Network => return Err(Error::NlbNotYetSupported.into()),
            Flavour::Classic => {}
        }
        let desired = self.desired(&spec, nodes).await?;
        let observed = classic::observe(&self.ec2, &self.elb, &self.config, &desired, Scope::Full).await?;
        let changes = classic::plan(&desired, &observed);
        let existing_dns = observed.load_balancer.as_ref().map(|lb| lb.dns_name.clone());
        if !changes.is_empty() {
            tracing::info!(service = %spec.key(), load_balancer = %desired.name, changes = changes.len(), "reconciling Classic ELB");
        }
        let applied = classic::apply(
            &self.ec2,
            &self.elb,
            &self.config,
            &desired.name,
            observed.managed_group.map(|g| g.id),
            &changes,
        )
        .await?;
        let dns = applied.created_dns_name.or(existing_dns).unwrap_or_default();
        Ok(status(&dns))
    }

    #[tracing::instrument(level = "debug", skip_all, fields(namespace = service.metadata.namespace.as_deref(), name = service.metadata.name.as_deref()))]
    async fn update(&self, service: &Service, nodes: &[&Node]) -> Result<(), CloudError> {
        let spec = parse_service(service).map_err(Error::from)?;
        match spec.flavour {
            Flavour::External => return Err(CloudError::ImplementedElsewhere),
            Flavour::Network => return Err(Error::NlbNotYetSupported.into()),
            Flavour::Classic => {}
        }
        // Subnets do not matter for the hosts: build with none and keep only host changes.
        let desired = classic::build(&spec, nodes, &self.config, &[])?;
        let observed = classic::observe(&self.ec2, &self.elb, &self.config, &desired, Scope::Hosts).await?;
        if observed.load_balancer.is_none() {
            return Err(Error::NotFound(desired.name).into());
        }
        let changes: Vec<Change> = classic::plan(&desired, &observed)
            .into_iter()
            .filter(classic::is_host_change)
            .collect();
        classic::apply(
            &self.ec2,
            &self.elb,
            &self.config,
            &desired.name,
            observed.managed_group.map(|g| g.id),
            &changes,
        )
        .await?;
        Ok(())
    }

    #[tracing::instrument(level = "debug", skip_all, fields(namespace = service.metadata.namespace.as_deref(), name = service.metadata.name.as_deref()))]
    async fn delete(&self, service: &Service) -> Result<(), CloudError> {
        // Whatever the type annotation says now: a Classic ELB under the Service's name was created by this
        // controller (before a refused type change, for example) and must not outlive the Service.
        let name = shared::load_balancer_name(service.metadata.uid.as_deref().unwrap_or_default())?;
        let raw = service.metadata.annotations.clone().unwrap_or_default();
        let annotations = Annotations::parse(&raw);
        let service_key = format!(
            "{}/{}",
            service.metadata.namespace.as_deref().unwrap_or("default"),
            service.metadata.name.as_deref().unwrap_or_default()
        );
        let keep: BTreeSet<String> = [Key::SecurityGroups, Key::ExtraSecurityGroups]
            .iter()
            .flat_map(|k| annotations.list(*k).unwrap_or_default().iter().cloned())
            .collect();
        let observed =
            classic::observe_delete(&self.ec2, &self.elb, &self.config, &name, &service_key, &keep).await?;
        let changes = classic::plan_delete(&name, &observed);
        classic::apply(&self.ec2, &self.elb, &self.config, &name, None, &changes).await?;
        Ok(())
    }
}

impl<E: Ec2 + Send + Sync, L: Elb + Send + Sync, V: Elbv2 + Send + Sync> LoadBalancer
    for AwsLoadBalancers<E, L, V>
{
    async fn get_load_balancer(
        &self,
        _cluster_name: &str,
        service: &Service,
    ) -> ccm_cloud_provider::Result<Option<LoadBalancerStatus>> {
        // Only Classic ELBs are ever created by this controller, and only under this name: whatever the type
        // annotation says now, such a load balancer is ours (an `nlb-ip` Service has none unless it was a Classic
        // one before).
        let name = shared::load_balancer_name(service.metadata.uid.as_deref().unwrap_or_default())?;
        let lb = self
            .elb
            .load_balancer(&name)
            .await
            .map_err(Error::aws("reading the load balancer"))?;
        Ok(lb.map(|lb| status(&lb.dns_name)))
    }

    fn load_balancer_name(&self, _cluster_name: &str, service: &Service) -> String {
        shared::load_balancer_name(service.metadata.uid.as_deref().unwrap_or_default()).unwrap_or_default()
    }

    async fn ensure_load_balancer(
        &self,
        _cluster_name: &str,
        service: &Service,
        nodes: &[&Node],
    ) -> ccm_cloud_provider::Result<LoadBalancerStatus> {
        self.ensure(service, nodes).await
    }

    async fn update_load_balancer(
        &self,
        _cluster_name: &str,
        service: &Service,
        nodes: &[&Node],
    ) -> ccm_cloud_provider::Result<()> {
        self.update(service, nodes).await
    }

    async fn ensure_load_balancer_deleted(
        &self,
        _cluster_name: &str,
        service: &Service,
    ) -> ccm_cloud_provider::Result<()> {
        self.delete(service).await
    }
}

// === impl DryRun ===

impl fmt::Display for DryRun {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "Service {} -> Classic ELB {}",
            self.spec.key(),
            self.desired.name
        )?;
        if self.changes.is_empty() {
            return writeln!(f, "up to date: no change");
        }
        for (i, change) in self.changes.iter().enumerate() {
            let line = serde_json::to_string(change).map_err(|_| fmt::Error)?;
            writeln!(f, "{:>3}. {line}", i + 1)?;
        }
        Ok(())
    }
}

/// Dry run for a Service manifest (JSON, as `kubectl get svc -o json` prints it) and nodes: the desired model
/// and the plan an ensure would apply, reading AWS through the ports and writing nothing. `Display` prints
/// one numbered change per line; `serde_json` gives the whole result.
pub async fn plan_for<E: Ec2 + Send + Sync, L: Elb + Send + Sync, V: Elbv2 + Send + Sync>(
    load_balancers: &AwsLoadBalancers<E, L, V>,
    service_json: &str,
    nodes: &[Node],
) -> Result<DryRun, PlanForError> {
    let service: Service = serde_json::from_str(service_json).map_err(PlanForError::Manifest)?;
    let nodes: Vec<&Node> = nodes.iter().collect();
    Ok(load_balancers.dry_run(&service, &nodes).await?)
}

/// Why [`plan_for`] failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PlanForError {
    /// The manifest is not a Service in JSON.
    #[error("the manifest is not a JSON Service: {0}")]
    Manifest(#[source] serde_json::Error),
    /// Planning failed.
    #[error(transparent)]
    Plan(#[from] Error),
}

#[cfg(test)]
mod tests;
