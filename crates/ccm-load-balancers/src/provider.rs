//! [`AwsLoadBalancers`]: the `LoadBalancer` capability over the EC2, Classic ELB and ELBv2 ports, and
//! [`plan_for`], the dry run over the same code.

use std::{collections::BTreeSet, fmt, sync::Mutex};

use ccm_aws_api::{Ec2, Elb, Elbv2, ec2::AvailabilityZone};
use ccm_cloud_provider::{CloudError, Ensured, LoadBalancer, LoadBalancerStatus, Notice};
use k8s_openapi::api::core::v1::{LoadBalancerIngress, Node, Service};
use serde::Serialize;
use tokio::sync::OnceCell;

use crate::{
    Error, LoadBalancerConfig,
    annotations::{Annotations, Key},
    classic, nlb, shared,
    spec::{Flavour, ServiceSpec, parse_service},
};

/// The cluster name used by dry runs when none is set (the controller manager's `--cluster-name` default).
pub const DEFAULT_CLUSTER_NAME: &str = "kubernetes";

/// Classic ELBs and NLBs for Services of type `LoadBalancer` (`nlb-ip` and `external` are implemented
/// elsewhere: the AWS Load Balancer Controller).
#[derive(Debug)]
pub struct AwsLoadBalancers<E, L, V> {
    ec2: E,
    elb: L,
    elbv2: V,
    config: LoadBalancerConfig,
    cluster_name: String,
    zones: OnceCell<Vec<AvailabilityZone>>,
    /// Load balancers this process has seen to be ours (made by it, or found with our tags by a full ensure), so
    /// that node-change updates need not read tags again before registering instances.
    verified: Mutex<BTreeSet<String>>,
}

/// The desired model of a dry run, by flavour.
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
pub enum DesiredModel {
    /// A Classic ELB.
    Classic(classic::Desired),
    /// An NLB.
    Network(nlb::Desired),
}

/// The changes of a dry run, by flavour.
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
pub enum Changes {
    /// A Classic ELB's.
    Classic(Vec<classic::Change>),
    /// An NLB's.
    Network(Vec<nlb::Change>),
}

/// A dry run's result: the desired model and the plan against the current AWS state.
#[derive(Debug, Clone, Serialize)]
pub struct DryRun {
    /// The Service's spec.
    pub spec: ServiceSpec,
    /// The desired load balancer.
    pub desired: DesiredModel,
    /// The ordered changes an ensure would make (empty: nothing to do).
    pub changes: Changes,
}

/// The error of a recreation that failed part-way: what was being done, then the failure, keeping its retry
/// delay.
fn recreation_failed(what: &str, why: &str, error: Error) -> CloudError {
    let error = CloudError::from(error);
    match error.retry_delay() {
        Some(after) => CloudError::retry_after(format!("recreating the {what} ({why}): {error}"), after),
        None => CloudError::with_source(format!("recreating the {what} ({why})"), error),
    }
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

/// The refusal of a flavour change after creation: `has` names the load balancer the Service already has.
fn flavour_change(spec: &ServiceSpec, has: &str) -> Error {
    Error::Invalid(crate::InvalidService {
        namespace: spec.namespace.clone(),
        name: spec.name.clone(),
        problems: vec![crate::annotations::Problem {
            field: Key::Type.name().to_owned(),
            value: if spec.flavour == Flavour::Network {
                "nlb".to_owned()
            } else {
                "(absent: classic)".to_owned()
            },
            accepted: format!(
                "the Service already has {has}: the type cannot change after creation; delete and re-create the \
                 Service (or restore the annotation)"
            ),
        }],
    })
}

/// A Warning notice per annotation value served with the Go controller's surprising meaning (the Service is
/// served all the same; see `annotations::go_compat`).
fn annotation_notices(spec: &ServiceSpec) -> Vec<Notice> {
    spec.warnings
        .iter()
        .map(|w| Notice::warning("UnexpectedAnnotationValue", w.to_string()))
        .collect()
}

fn service_key(service: &Service) -> (String, String) {
    (
        service
            .metadata
            .namespace
            .clone()
            .unwrap_or_else(|| "default".to_owned()),
        service.metadata.name.clone().unwrap_or_default(),
    )
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
            cluster_name: DEFAULT_CLUSTER_NAME.to_owned(),
            zones: OnceCell::new(),
            verified: Mutex::default(),
        }
    }

    /// Sets the cluster name dry runs use (`--cluster-name`; it names NLBs' managed security groups). Ensure
    /// update and delete use the name the controller passes.
    #[must_use]
    pub fn with_cluster_name(mut self, cluster_name: impl Into<String>) -> Self {
        self.cluster_name = cluster_name.into();
        self
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

    async fn subnets(&self, spec: &ServiceSpec) -> Result<Vec<ccm_aws_api::SubnetId>, Error> {
        let zones = if spec.subnets.is_none() {
            self.zones().await?
        } else {
            &[]
        };
        shared::resolve_subnets(&self.ec2, &self.config, spec, zones).await
    }

    /// The desired model of a valid Classic ELB Service.
    async fn desired(&self, spec: &ServiceSpec, nodes: &[&Node]) -> Result<classic::Desired, Error> {
        let subnets = self.subnets(spec).await?;
        classic::build(spec, nodes, &self.config, &subnets)
    }

    /// The desired model of a valid NLB Service.
    async fn nlb_desired(
        &self,
        cluster_name: &str,
        spec: &ServiceSpec,
        nodes: &[&Node],
    ) -> Result<nlb::Desired, Error> {
        let subnets = self.subnets(spec).await?;
        nlb::build(spec, nodes, &self.config, cluster_name, &subnets)
    }

    /// The dry run: the desired model and the plan against the current AWS state, reading only.
    pub async fn dry_run(&self, service: &Service, nodes: &[&Node]) -> Result<DryRun, Error> {
        let spec = parse_service(service)?;
        if spec.flavour == Flavour::Network {
            let desired = self.nlb_desired(&self.cluster_name, &spec, nodes).await?;
            let observed = Box::pin(nlb::observe(
                &self.ec2,
                &self.elbv2,
                &self.config,
                &desired,
                nlb::Scope::Full,
            ))
            .await?;
            let changes = nlb::plan(&desired, &observed);
            return Ok(DryRun {
                spec,
                desired: DesiredModel::Network(desired),
                changes: Changes::Network(changes),
            });
        }
        let desired = self.desired(&spec, nodes).await?;
        let observed =
            classic::observe(&self.ec2, &self.elb, &self.config, &desired, classic::Scope::Full).await?;
        let changes = classic::plan(&desired, &observed);
        Ok(DryRun {
            spec,
            desired: DesiredModel::Classic(desired),
            changes: Changes::Classic(changes),
        })
    }

    #[tracing::instrument(level = "debug", skip_all, fields(namespace = service.metadata.namespace.as_deref(), name = service.metadata.name.as_deref()))]
    async fn ensure(
        &self,
        cluster_name: &str,
        service: &Service,
        nodes: &[&Node],
    ) -> Result<Ensured, CloudError> {
        let spec = parse_service(service).map_err(Error::from)?;
        match spec.flavour {
            Flavour::External => return Err(CloudError::ImplementedElsewhere),
            // Boxed: the NLB path's state (large with the SDK adapter's futures) lives on the heap.
            Flavour::Network => {
                let mut ensured = Box::pin(self.ensure_nlb(cluster_name, &spec, nodes)).await?;
                ensured.notices.splice(0..0, annotation_notices(&spec));
                return Ok(ensured);
            }
            Flavour::Classic => {}
        }
        let desired = self.desired(&spec, nodes).await?;
        let observed =
            classic::observe(&self.ec2, &self.elb, &self.config, &desired, classic::Scope::Full).await?;
        if observed.load_balancer.is_none() && self.has_nlb(&desired.name).await? {
            return Err(flavour_change(&spec, "an NLB").into());
        }
        let changes = classic::plan(&desired, &observed);
        let existing_dns = observed.load_balancer.as_ref().map(|lb| lb.dns_name.clone());
        let mut notices = annotation_notices(&spec);
        if let Some(message) = classic::recreation(&desired.name, &changes) {
            tracing::warn!(service = %spec.key(), load_balancer = %desired.name, %message, "recreating Classic ELB");
            notices.push(Notice::warning("RecreatingLoadBalancer", message));
        }
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
        .await
        .map_err(|e| match classic::recreation_reason(&changes) {
            Some(reason) => recreation_failed("Classic ELB", reason, e),
            None => e.into(),
        })?;
        self.verify(&desired.name, true);
        let dns = applied.created_dns_name.or(existing_dns).unwrap_or_default();
        Ok(Ensured::new(status(&dns), notices))
    }

    async fn ensure_nlb(
        &self,
        cluster_name: &str,
        spec: &ServiceSpec,
        nodes: &[&Node],
    ) -> Result<Ensured, CloudError> {
        let desired = self.nlb_desired(cluster_name, spec, nodes).await?;
        let observed = nlb::observe(&self.ec2, &self.elbv2, &self.config, &desired, nlb::Scope::Full).await?;
        // Before creating an NLB: the Service must not have a Classic ELB (one call, on creation only).
        if observed.load_balancer.is_none()
            && self
                .elb
                .load_balancer(&desired.name)
                .await
                .map_err(Error::aws("reading the load balancer"))?
                .is_some()
        {
            return Err(flavour_change(spec, "a Classic ELB").into());
        }
        let changes = nlb::plan(&desired, &observed);
        let mut notices = Vec::new();
        if let Some(message) = nlb::recreation(&desired.name, &changes) {
            tracing::warn!(service = %spec.key(), load_balancer = %desired.name, %message, "recreating NLB");
            notices.push(Notice::warning("RecreatingLoadBalancer", message));
        }
        if !changes.is_empty() {
            tracing::info!(service = %spec.key(), load_balancer = %desired.name, changes = changes.len(), "reconciling NLB");
        }
        let applied = nlb::apply(
            &self.ec2,
            &self.elbv2,
            &self.config,
            &desired.name,
            &observed,
            &changes,
        )
        .await
        .map_err(|e| match nlb::recreation_reason(&changes) {
            // A recreation that failed part-way still tells the Service's users why its NLB is gone (the
            // notice itself is only posted with a status).
            Some(reason) => recreation_failed("NLB", reason, e),
            None => e.into(),
        })?;
        self.verify(&desired.name, true);
        let lb = applied.created.or(observed.load_balancer);
        let hostname = match &lb {
            Some(lb) => nlb::status_hostname(lb)?.unwrap_or_default(),
            None => String::new(),
        };
        Ok(Ensured::new(status(&hostname), notices))
    }

    #[tracing::instrument(level = "debug", skip_all, fields(namespace = service.metadata.namespace.as_deref(), name = service.metadata.name.as_deref()))]
    async fn update(&self, cluster_name: &str, service: &Service, nodes: &[&Node]) -> Result<(), CloudError> {
        let spec = parse_service(service).map_err(Error::from)?;
        match spec.flavour {
            Flavour::External => return Err(CloudError::ImplementedElsewhere),
            Flavour::Network => return Box::pin(self.update_nlb(cluster_name, spec, nodes)).await,
            Flavour::Classic => {}
        }
        // Subnets do not matter for the hosts: build with none and keep only host changes.
        let desired = classic::build(&spec, nodes, &self.config, &[])?;
        let observed = classic::observe(
            &self.ec2,
            &self.elb,
            &self.config,
            &desired,
            classic::Scope::Hosts,
        )
        .await?;
        if observed.load_balancer.is_none() {
            return Err(Error::NotFound(desired.name).into());
        }
        self.ours(&desired.name, self.elb.tags(&desired.name)).await?;
        let changes: Vec<classic::Change> = classic::plan(&desired, &observed)
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

    /// Node changes: targets and the nodes' rules only (no subnet discovery, no other reads).
    async fn update_nlb(
        &self,
        cluster_name: &str,
        mut spec: ServiceSpec,
        nodes: &[&Node],
    ) -> Result<(), CloudError> {
        // Built without subnets (the node rules take the NLB's own): the per-subnet addresses do not matter here.
        spec.eip_allocations.clear();
        spec.private_ipv4_addresses.clear();
        // The controller's cluster name, as ensure uses (it names the managed group).
        let desired = nlb::build(&spec, nodes, &self.config, cluster_name, &[])?;
        let observed =
            nlb::observe(&self.ec2, &self.elbv2, &self.config, &desired, nlb::Scope::Hosts).await?;
        let Some(lb) = &observed.load_balancer else {
            return Err(Error::NotFound(desired.name).into());
        };
        let arns = [lb.arn.clone()];
        let tags = async {
            let mut tags = self.elbv2.tags(&arns).await?;
            Ok(tags.remove(&arns[0]).unwrap_or_default())
        };
        self.ours(&desired.name, tags).await?;
        let changes: Vec<nlb::Change> = nlb::plan(&desired, &observed)
            .into_iter()
            .filter(nlb::is_host_change)
            .collect();
        nlb::apply(
            &self.ec2,
            &self.elbv2,
            &self.config,
            &desired.name,
            &observed,
            &changes,
        )
        .await?;
        Ok(())
    }

    async fn has_nlb(&self, name: &str) -> Result<bool, Error> {
        Ok(self
            .elbv2
            .load_balancer(name)
            .await
            .map_err(Error::aws("reading the NLB"))?
            .is_some_and(|lb| lb.lb_type == "network"))
    }

    async fn get(&self, service: &Service) -> Result<Option<LoadBalancerStatus>, CloudError> {
        let name = shared::load_balancer_name(service.metadata.uid.as_deref().unwrap_or_default())?;
        let raw = service.metadata.annotations.clone().unwrap_or_default();
        let nlb_first = Annotations::parse(&raw).text(Key::Type) == Some("nlb");
        for network in [nlb_first, !nlb_first] {
            if network {
                let lb = self
                    .elbv2
                    .load_balancer(&name)
                    .await
                    .map_err(Error::aws("reading the NLB"))?
                    .filter(|lb| lb.lb_type == "network");
                if let Some(lb) = lb {
                    return Ok(Some(status(&nlb::status_hostname(&lb)?.unwrap_or_default())));
                }
            } else {
                let lb = self
                    .elb
                    .load_balancer(&name)
                    .await
                    .map_err(Error::aws("reading the load balancer"))?;
                if let Some(lb) = lb {
                    return Ok(Some(status(&lb.dns_name)));
                }
            }
        }
        Ok(None)
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
        // Whatever the type annotation says now: the flavour it names is looked up first, then the other one
        // (an `nlb-ip` Service has none unless it had one of ours before).
        self.get(service).await
    }

    fn load_balancer_name(&self, _cluster_name: &str, service: &Service) -> String {
        shared::load_balancer_name(service.metadata.uid.as_deref().unwrap_or_default()).unwrap_or_default()
    }

    async fn ensure_load_balancer(
        &self,
        cluster_name: &str,
        service: &Service,
        nodes: &[&Node],
    ) -> ccm_cloud_provider::Result<LoadBalancerStatus> {
        Ok(self.ensure(cluster_name, service, nodes).await?.status)
    }

    async fn ensure_load_balancer_reporting(
        &self,
        cluster_name: &str,
        service: &Service,
        nodes: &[&Node],
    ) -> ccm_cloud_provider::Result<Ensured> {
        self.ensure(cluster_name, service, nodes).await
    }

    async fn update_load_balancer(
        &self,
        cluster_name: &str,
        service: &Service,
        nodes: &[&Node],
    ) -> ccm_cloud_provider::Result<()> {
        self.update(cluster_name, service, nodes).await
    }

    async fn ensure_load_balancer_deleted(
        &self,
        cluster_name: &str,
        service: &Service,
    ) -> ccm_cloud_provider::Result<()> {
        self.delete(cluster_name, service).await
    }

    async fn drifted(
        &self,
        cluster_name: &str,
        services: &[&Service],
        nodes: &[&Node],
    ) -> ccm_cloud_provider::Result<Vec<ccm_cloud_provider::Drift>> {
        let drifts = crate::drift::drifted(
            &self.elb,
            &self.elbv2,
            &self.config,
            cluster_name,
            services,
            nodes,
        );
        Ok(Box::pin(drifts).await?)
    }
}

// === impl DryRun ===

impl fmt::Display for DryRun {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (kind, name) = match &self.desired {
            DesiredModel::Classic(d) => ("Classic ELB", &d.name),
            DesiredModel::Network(d) => ("NLB", &d.name),
        };
        writeln!(f, "Service {} -> {kind} {name}", self.spec.key())?;
        let lines = match &self.changes {
            Changes::Classic(c) => c.iter().map(serde_json::to_string).collect::<Result<Vec<_>, _>>(),
            Changes::Network(c) => c.iter().map(serde_json::to_string).collect::<Result<Vec<_>, _>>(),
        }
        .map_err(|_| fmt::Error)?;
        if lines.is_empty() {
            return writeln!(f, "up to date: no change");
        }
        for (i, line) in lines.iter().enumerate() {
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

mod delete;
#[cfg(test)]
mod tests;
