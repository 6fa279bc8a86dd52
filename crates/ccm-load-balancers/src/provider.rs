//! [`AwsLoadBalancers`]: the `LoadBalancer` capability over the EC2, Classic ELB and ELBv2 ports, and
//! [`plan_for`], the dry run over the same code.

use std::{sync::Arc, time::Duration};

use ccm_aws_api::{Catalog, Ec2, Elb, Elbv2, InstanceCatalog, ec2::AvailabilityZone};
use ccm_cloud_provider::{
    Backends, CloudError, Ensured, LoadBalancer, LoadBalancerStatus, NodeView, Notice, ServiceEndpoints,
};
use k8s_openapi::api::core::v1::{LoadBalancerIngress, Service};
use notices::{annotation_notices, skipped_notices};
use tokio::sync::OnceCell;

use crate::{
    Error, LoadBalancerConfig,
    annotations::{Annotations, Key},
    flavour::{self, Classic, HostMemoryFlavour, Network, Ports, Scope},
    memory::HostMemory,
    nlb,
    ownership::{self, Claimant, Purpose},
    shared,
    spec::{Flavour, ServiceSpec, flavour_change, parse_service_with},
    targets::{NodeTargets, Targets},
};

/// The controller manager's `--cluster-name` default, for dry runs told no other (`lb-plan --cluster-name`).
pub const DEFAULT_CLUSTER_NAME: &str = "kubernetes";

/// Classic ELBs and NLBs for Services of type `LoadBalancer` (`nlb-ip` and `external` are implemented
/// elsewhere: the AWS Load Balancer Controller).
#[derive(Debug)]
pub struct AwsLoadBalancers<E, L, V> {
    /// The EC2 port with the instance catalog in front: instances read by one ensure answer the next ones for
    /// half a minute (see [`instance_reads`](crate::instance_reads)).
    ec2: Catalog<E>,
    elb: L,
    elbv2: V,
    config: LoadBalancerConfig,
    zones: OnceCell<Vec<AvailabilityZone>>,
    /// What this process knows of its load balancers between calls: which are ours, the targets each was last
    /// given, what they and their instances looked like after the last ensure or update. Node changes then cost
    /// only their writes, and nothing for a load balancer whose targets they leave as they are.
    memory: HostMemory,
    /// Which of the Nodes given may be targets: every method taking Nodes asks first.
    targets: Targets,
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

// === impl AwsLoadBalancers ===

impl<E: Ec2 + Send + Sync, L: Elb + Send + Sync, V: Elbv2 + Send + Sync> AwsLoadBalancers<E, L, V> {
    /// Load balancers over the EC2, Classic ELB and ELBv2 ports.
    ///
    /// Their instance reads go through a catalog of their own, keeping instances for
    /// [`REUSE_FOR`](crate::instance_reads::REUSE_FOR); give them the catalog every reader shares with
    /// [`AwsLoadBalancers::with_instance_catalog`].
    pub fn new(ec2: E, elb: L, elbv2: V, config: LoadBalancerConfig) -> Self {
        let catalog =
            Arc::new(InstanceCatalog::new().with_retention(crate::instance_reads::REUSE_FOR, Duration::ZERO));
        catalog.start_expiry();
        Self {
            ec2: catalog.over(ec2),
            elb,
            elbv2,
            config,
            zones: OnceCell::new(),
            memory: HostMemory::default(),
            targets: Targets::default(),
        }
    }

    /// Reads instances through `catalog`, shared with the other controllers (which must keep instances for
    /// [`REUSE_FOR`](crate::instance_reads::REUSE_FOR) at least), instead of a catalog of their own.
    #[must_use]
    pub fn with_instance_catalog(mut self, catalog: &Arc<InstanceCatalog>) -> Self {
        let (ec2, _) = self.ec2.into_parts();
        self.ec2 = catalog.over(ec2);
        self
    }

    /// Serves only the Nodes that `targets` keeps (see [`NodeTargets`]; by default every Node given).
    #[must_use]
    pub fn with_node_targets(mut self, targets: impl NodeTargets + 'static) -> Self {
        self.targets = Targets::new(targets);
        self
    }

    /// Consent to recreation for every Service when `allowed` (`--allow-load-balancer-recreation`; see
    /// [`LoadBalancerConfig::allow_recreation`]).
    #[must_use]
    pub fn with_recreation_allowed(mut self, allowed: bool) -> Self {
        self.config.allow_recreation = allowed;
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

    /// The subnets, and the spec they serve: a Service that only prefers dual-stack, in subnets without IPv6,
    /// gets an IPv4 NLB and a Warning rather than an error (one that requires it gets the error), from one read.
    async fn subnets_or_ipv4<'a>(
        &self,
        spec: &'a ServiceSpec,
    ) -> Result<(std::borrow::Cow<'a, ServiceSpec>, Vec<ccm_aws_api::SubnetId>), Error> {
        let zones = if spec.subnets.is_none() {
            self.zones().await?
        } else {
            &[]
        };
        let (ids, lacking) = shared::resolve_subnets_and_ipv6(&self.ec2, &self.config, spec, zones).await?;
        if lacking.is_empty() {
            return Ok((std::borrow::Cow::Borrowed(spec), ids));
        }
        if !spec.dual_stack_preferred {
            return Err(Error::SubnetsWithoutIpv6 { subnets: lacking });
        }
        tracing::warn!(service = %spec.key(), subnets = ?lacking, "dual-stack preferred, subnets lack IPv6: IPv4 NLB");
        let mut ipv4 = spec.clone();
        ipv4.ip_address_type = crate::spec::IpAddressType::Ipv4;
        ipv4.dual_stack_preferred = false;
        ipv4.warnings.push(crate::annotations::Warning {
            field: "spec.ipFamilyPolicy".to_owned(),
            value: "PreferDualStack".to_owned(),
            message: format!(
                "the NLB is IPv4 only: its subnets {} have no IPv6 CIDR block",
                lacking.join(", ")
            ),
        });
        Ok((std::borrow::Cow::Owned(ipv4), ids))
    }

    fn ports(&self) -> Ports<'_, Catalog<E>, L, V> {
        Ports {
            ec2: &self.ec2,
            elb: &self.elb,
            elbv2: &self.elbv2,
            config: &self.config,
        }
    }

    /// Ensure for the Nodes that may be targets, with the notices of those left out.
    async fn ensure(
        &self,
        cluster_name: &str,
        service: &Service,
        nodes: &[&NodeView],
        endpoints: Option<&ServiceEndpoints>,
    ) -> Result<Ensured, CloudError> {
        let (nodes, refused) = self.targets.of(nodes).await?;
        let mut ensured = self
            .ensure_targets(cluster_name, service, &nodes, endpoints)
            .await?;
        ensured.notices.extend(refused);
        Ok(ensured)
    }

    /// Ensure for `nodes`, all of which may be targets.
    #[tracing::instrument(level = "debug", skip_all, fields(namespace = service.metadata.namespace.as_deref(), name = service.metadata.name.as_deref()))]
    async fn ensure_targets(
        &self,
        cluster_name: &str,
        service: &Service,
        nodes: &[&NodeView],
        endpoints: Option<&ServiceEndpoints>,
    ) -> Result<Ensured, CloudError> {
        let uid = service.metadata.uid.as_deref();
        let spec = parse_service_with(service, &self.config.attribute_keys)
            .map_err(Error::from)
            .inspect_err(|_| self.memory.settle_targets::<()>(uid, None))?
            .with_endpoints(endpoints);
        let result = if spec.flavour == Flavour::External {
            Err(CloudError::ImplementedElsewhere)
        } else {
            Box::pin(self.ensure_named(cluster_name, service, spec.clone(), nodes)).await
        };
        let targets = shared::target_key(nodes, &spec);
        self.memory.settle_targets(uid, result.is_ok().then_some(targets));
        result
    }

    /// Ensure under the name the Service's load balancer has (or should have, see `names`), with the notice
    /// of a name change.
    async fn ensure_named(
        &self,
        cluster_name: &str,
        service: &Service,
        spec: ServiceSpec,
        nodes: &[&NodeView],
    ) -> Result<Ensured, CloudError> {
        let (spec, rename) = self.rename_of(service, spec).await?;
        // Boxed: the NLB path's state (large with the SDK adapter's futures) lives on the heap.
        if spec.flavour == Flavour::Network {
            Box::pin(self.ensure_with::<Network>(cluster_name, service, &spec, rename, nodes)).await
        } else {
            Box::pin(self.ensure_with::<Classic>(cluster_name, service, &spec, rename, nodes)).await
        }
    }

    /// Ensure for one flavour: build, (a pending rename), observe, plan, apply; the status and the Warning
    /// notices.
    async fn ensure_with<F: HostMemoryFlavour>(
        &self,
        cluster_name: &str,
        service: &Service,
        spec: &ServiceSpec,
        rename: Option<names::Rename>,
        nodes: &[&NodeView],
    ) -> Result<Ensured, CloudError> {
        let ports = self.ports();
        let (spec, subnets) = self.subnets_or_ipv4(spec).await?;
        let spec = &*spec;
        let mut desired = F::build(spec, nodes, &self.config, cluster_name, &subnets)?;
        // Only now may a consented rename delete the old load balancer: the new one's subnets are resolved and
        // its model built, so a Service that cannot get one (a subnet that does not exist, an address outside
        // its subnet) keeps the one it has.
        let renamed = self.renaming(cluster_name, service, &spec.key(), rename).await?;
        let name = &*F::name(&desired).to_owned();
        // Taken out now: an ensure that fails or is abandoned leaves no memory behind.
        let ticket = self.memory.begin(name);
        let read_at = tokio::time::Instant::now();
        let observed = F::observe(&ports, &desired, Scope::Full).await?;
        // The one gate: nothing is written unless the name is free or its load balancer is this Service's.
        let claimant = Claimant::new(name, &spec.key(), &spec.uid).with_adopt(spec.adopt);
        let claim = ownership::claim(&self.config, &claimant, F::found(&observed), Purpose::Serve)?;
        if claim.adopted() {
            F::adopt(&mut desired);
        }
        // Before creating: the Service must not have the other flavour's load balancer (one call, on creation
        // only).
        if !F::exists(&observed) && F::other_exists(&ports, name).await? {
            return Err(Error::from(flavour_change::refusal(spec, F::OTHER)).into());
        }
        let changes = F::plan(&desired, &observed);
        F::check_plan(&desired, &observed, &changes)?;
        let mut notices = annotation_notices(spec, &self.config);
        notices.extend(skipped_notices(name, nodes, &F::skipped(&observed)));
        let recreation = flavour::recreation_reason(&changes);
        if let Some(reason) = recreation {
            let message = shared::recreation_notice(F::KIND, name, reason);
            tracing::warn!(service = %spec.key(), load_balancer = %name, %message, "recreating {}", F::KIND);
            notices.push(Notice::warning("RecreatingLoadBalancer", message));
        }
        if let Some(reason) = flavour::recreation_withheld(&changes) {
            let message = shared::recreation_withheld_notice(F::KIND, name, reason);
            tracing::warn!(service = %spec.key(), load_balancer = %name, %message, "{} recreation withheld", F::KIND);
            notices.push(Notice::warning("LoadBalancerRecreationRequired", message));
        }
        if !changes.is_empty() {
            tracing::info!(service = %spec.key(), load_balancer = %name, changes = changes.len(), "reconciling {}", F::KIND);
        }
        // A recreation that failed part-way still tells the Service's users why its load balancer is gone (the
        // notice itself is only posted with a status).
        let applied = F::apply(&ports, &claim, &observed, &changes)
            .await
            .map_err(|e| match recreation {
                Some(reason) => recreation_failed(F::KIND, reason, e),
                None => e.into(),
            })?;
        self.memory.hold(claim);
        self.memory.set_provisional(name, F::provisional(&observed));
        let outcome = hosts::Outcome::<F> {
            desired: &desired,
            observed: &observed,
            applied: &applied,
            changes: &changes,
            read_at,
            fresh: true,
        };
        let fingerprint = self.hosts_fingerprint::<F>(cluster_name, spec, nodes);
        self.keep(ticket, fingerprint, &outcome);
        // A failed NLB fails the ensure: nothing is remembered of it.
        let hostname = F::hostname(observed, applied).inspect_err(|_| self.memory.forget(name))?;
        notices.extend(renamed);
        Ok(Ensured::new(status(&hostname), notices))
    }

    #[tracing::instrument(level = "debug", skip_all, fields(namespace = service.metadata.namespace.as_deref(), name = service.metadata.name.as_deref()))]
    async fn update(
        &self,
        cluster_name: &str,
        service: &Service,
        nodes: &[&NodeView],
        endpoints: Option<&ServiceEndpoints>,
    ) -> Result<(), CloudError> {
        let (nodes, _) = self.targets.of(nodes).await?;
        let nodes = nodes.as_slice();
        let uid = service.metadata.uid.as_deref();
        let spec = parse_service_with(service, &self.config.attribute_keys)
            .map_err(Error::from)
            .inspect_err(|_| self.memory.settle_targets::<()>(uid, None))?
            .with_endpoints(endpoints);
        let wanted = shared::service_load_balancer_name(&spec)?;
        if !shared::renamed_from(service, &wanted).is_empty() {
            // A name change pending (or withheld): the full ensure knows which load balancer serves.
            return self
                .ensure_targets(cluster_name, service, nodes, endpoints)
                .await
                .map(drop);
        }
        let claimant = ownership::Claimant::new(&wanted, &spec.key(), &spec.uid);
        let targets = shared::target_key(nodes, &spec);
        if self.memory.same_targets(uid, &targets) {
            tracing::debug!(
                targets = targets.0.len(),
                "host update leaves the load balancer's targets as they are; nothing to do"
            );
            return Ok(());
        }
        let result = match spec.flavour {
            Flavour::External => Err(CloudError::ImplementedElsewhere),
            Flavour::Network => {
                Box::pin(self.update_with::<Network>(cluster_name, &claimant, spec, nodes)).await
            }
            Flavour::Classic => {
                Box::pin(self.update_with::<Classic>(cluster_name, &claimant, spec, nodes)).await
            }
        };
        self.memory.settle_targets(uid, result.is_ok().then_some(targets));
        result
    }

    async fn get(&self, service: &Service) -> Result<Option<LoadBalancerStatus>, CloudError> {
        let uid_name = shared::load_balancer_name(service.metadata.uid.as_deref().unwrap_or_default())?;
        let raw = service.metadata.annotations.clone().unwrap_or_default();
        let nlb_first = Annotations::parse(&raw).text(Key::Type) == Some("nlb");
        for name in names::all_names(service) {
            let mut network_first = nlb_first;
            if name != uid_name {
                // A chosen name proves nothing: only this Service's load balancer under it is its status.
                match self
                    .probe(&Claimant::of_service(&name, service), Purpose::Serve)
                    .await?
                {
                    names::Probe::Ours(flavour) => network_first = flavour == Flavour::Network,
                    _ => continue,
                }
            }
            if let Some(status) = self.status_of(&name, network_first).await? {
                return Ok(Some(status));
            }
        }
        Ok(None)
    }

    /// The status of the load balancer under `name`, the NLB looked up first when `nlb_first`.
    async fn status_of(&self, name: &str, nlb_first: bool) -> Result<Option<LoadBalancerStatus>, CloudError> {
        for network in [nlb_first, !nlb_first] {
            if network {
                let lb = self
                    .elbv2
                    .load_balancer(name)
                    .await
                    .map_err(Error::aws("reading the NLB"))?
                    .filter(|lb| lb.lb_type == "network");
                if let Some(lb) = lb {
                    return Ok(Some(status(&nlb::status_hostname(&lb)?.unwrap_or_default())));
                }
            } else {
                let lb = self
                    .elb
                    .load_balancer(name)
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
        names::wanted_name(service).unwrap_or_default()
    }

    async fn ensure_load_balancer(
        &self,
        cluster_name: &str,
        service: &Service,
        nodes: &[&NodeView],
    ) -> ccm_cloud_provider::Result<LoadBalancerStatus> {
        Ok(self.ensure(cluster_name, service, nodes, None).await?.status)
    }

    async fn ensure_load_balancer_reporting(
        &self,
        cluster_name: &str,
        service: &Service,
        nodes: &[&NodeView],
    ) -> ccm_cloud_provider::Result<Ensured> {
        self.ensure(cluster_name, service, nodes, None).await
    }

    async fn update_load_balancer(
        &self,
        cluster_name: &str,
        service: &Service,
        nodes: &[&NodeView],
    ) -> ccm_cloud_provider::Result<()> {
        self.update(cluster_name, service, nodes, None).await
    }

    fn follows_endpoints(&self, service: &Service) -> bool {
        endpoints::follows_endpoints(&self.config, service)
    }

    async fn ensure_load_balancer_with(
        &self,
        cluster_name: &str,
        service: &Service,
        backends: Backends<'_>,
    ) -> ccm_cloud_provider::Result<Ensured> {
        let nodes = endpoints::backend_nodes(&self.config, service, backends);
        self.ensure(cluster_name, service, &nodes, backends.endpoints)
            .await
    }

    async fn update_load_balancer_with(
        &self,
        cluster_name: &str,
        service: &Service,
        backends: Backends<'_>,
    ) -> ccm_cloud_provider::Result<()> {
        let nodes = endpoints::backend_nodes(&self.config, service, backends);
        self.update(cluster_name, service, &nodes, backends.endpoints)
            .await
    }

    async fn ensure_load_balancer_deleted(
        &self,
        cluster_name: &str,
        service: &Service,
    ) -> ccm_cloud_provider::Result<()> {
        self.delete(cluster_name, service).await
    }

    async fn ensure_predecessor_load_balancer_deleted(
        &self,
        cluster_name: &str,
        predecessor: &Service,
        successor: &Service,
    ) -> ccm_cloud_provider::Result<()> {
        self.delete_predecessor(cluster_name, predecessor, successor)
            .await
    }

    async fn drifted(
        &self,
        cluster_name: &str,
        services: &[&Service],
        nodes: &[&NodeView],
    ) -> ccm_cloud_provider::Result<Vec<ccm_cloud_provider::Drift>> {
        let (nodes, _) = self.targets.of(nodes).await?;
        let nodes = nodes.as_slice();
        let drifts = crate::drift::drifted(
            &self.elb,
            &self.elbv2,
            &self.config,
            cluster_name,
            services,
            nodes,
        );
        let mut drifts = Box::pin(drifts).await?;
        self.provisional_drifts(services, &mut drifts);
        // A drifted load balancer is re-ensured from reads; its memory (maybe what went wrong) goes.
        self.drift_checked(services, nodes, &drifts);
        Ok(drifts)
    }

    async fn plan_load_balancer(
        &self,
        cluster_name: &str,
        service: &Service,
        nodes: &[&NodeView],
    ) -> ccm_cloud_provider::Result<Option<ccm_cloud_provider::LoadBalancerPlan>> {
        self.plan_load_balancer_with(cluster_name, service, Backends::nodes(nodes))
            .await
    }

    async fn plan_load_balancer_with(
        &self,
        cluster_name: &str,
        service: &Service,
        backends: Backends<'_>,
    ) -> ccm_cloud_provider::Result<Option<ccm_cloud_provider::LoadBalancerPlan>> {
        // The nodes the ensure would target: with the endpoints, those that run one.
        let nodes = endpoints::backend_nodes(&self.config, service, backends);
        let (nodes, _) = self.targets.of(&nodes).await?;
        let run = Box::pin(self.dry_run_for(cluster_name, service, &nodes, backends.endpoints)).await?;
        // lb-plan's lines, header included, when anything is pending; none when the Service is up to date.
        let pending = !run.changes.is_empty() || !run.waiting_ports.is_empty();
        let changes = if pending {
            run.to_string().lines().map(str::to_owned).collect()
        } else {
            Vec::new()
        };
        let replaces = run.recreation.as_ref().is_some_and(|r| r.replaces);
        Ok(Some(ccm_cloud_provider::LoadBalancerPlan::new(changes, replaces)))
    }
}

mod delete;
mod endpoints;
mod hosts;
mod names;
mod notices;
pub(crate) mod plan;
#[cfg(test)]
mod tests;
