//! The dry run of [`AwsLoadBalancers`] (the model and the plan, reading only), and [`plan_for`]: that of a
//! Service manifest, for tools (`lb-plan`).

use ccm_aws_api::{Ec2, Elb, Elbv2};
use ccm_cloud_provider::{Backends, NodeView, ServiceEndpoints};
use k8s_openapi::api::core::v1::Service;

use super::AwsLoadBalancers;
use crate::{
    Error,
    dry_run::{DryRun, ports_without_node_port},
    flavour::{Classic, LoadBalancerFlavour, Network, Scope},
    ownership::{self, Claimant, Purpose},
    spec::{Flavour, ServiceSpec, parse_service_with},
};

/// Dry run for a Service manifest (JSON, as `kubectl get svc -o json` prints it) and nodes: the desired model
/// and the plan an ensure with `cluster_name` (the controller's `--cluster-name`) would apply, reading AWS through the ports and writing nothing. `Display` prints
/// one numbered change per line; `serde_json` gives the whole result.
pub async fn plan_for<E: Ec2 + Send + Sync, L: Elb + Send + Sync, V: Elbv2 + Send + Sync>(
    load_balancers: &AwsLoadBalancers<E, L, V>,
    cluster_name: &str,
    service_json: &str,
    nodes: &[NodeView],
) -> Result<DryRun, PlanForError> {
    plan_with_endpoints_for(load_balancers, cluster_name, service_json, nodes, None).await
}

/// [`plan_for`] given the Service's endpoints (as its EndpointSlices say; `lb-plan` reads them from the
/// cluster): a Service whose load balancer follows them is planned for the nodes its ensure would target,
/// those that run a ready endpoint. Without endpoints, or for another Service, the same as [`plan_for`].
pub async fn plan_with_endpoints_for<E: Ec2 + Send + Sync, L: Elb + Send + Sync, V: Elbv2 + Send + Sync>(
    load_balancers: &AwsLoadBalancers<E, L, V>,
    cluster_name: &str,
    service_json: &str,
    nodes: &[NodeView],
    endpoints: Option<&ServiceEndpoints>,
) -> Result<DryRun, PlanForError> {
    let service: Service = serde_json::from_str(service_json).map_err(PlanForError::Manifest)?;
    let nodes: Vec<&NodeView> = nodes.iter().collect();
    let backends = Backends::new(&nodes, endpoints);
    let nodes = super::endpoints::backend_nodes(&load_balancers.config, &service, backends);
    Ok(load_balancers
        .dry_run_for(cluster_name, &service, &nodes, endpoints)
        .await?)
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

impl<E: Ec2 + Send + Sync, L: Elb + Send + Sync, V: Elbv2 + Send + Sync> AwsLoadBalancers<E, L, V> {
    /// The dry run: the desired model and the plan against the current AWS state, reading only. `cluster_name`
    /// is the controller's `--cluster-name`, as ensure is given it (it names an NLB's managed security group).
    /// Plans for `nodes` as given; the contract's `plan_load_balancer` gives it only those
    /// [`NodeTargets`](crate::NodeTargets) keeps.
    pub async fn dry_run(
        &self,
        cluster_name: &str,
        service: &Service,
        nodes: &[&NodeView],
    ) -> Result<DryRun, Error> {
        self.dry_run_for(cluster_name, service, nodes, None).await
    }

    /// [`Self::dry_run`] given the Service's endpoints (IP targets are planned from them; without them the
    /// registered ones are left as they are).
    pub(crate) async fn dry_run_for(
        &self,
        cluster_name: &str,
        service: &Service,
        nodes: &[&NodeView],
        endpoints: Option<&ServiceEndpoints>,
    ) -> Result<DryRun, Error> {
        let spec = parse_service_with(service, &self.config.attribute_keys)?.with_endpoints(endpoints);
        // IP targets wait for no node port.
        let needs_node_ports = !spec.ip_targets;
        let (spec, rename) = if spec.flavour == Flavour::External {
            (spec, None)
        } else {
            self.rename_of(service, spec).await?
        };
        let mut run = if spec.flavour == Flavour::Network {
            Box::pin(self.dry_run_with::<Network>(cluster_name, spec, nodes)).await?
        } else {
            self.dry_run_with::<Classic>(cluster_name, spec, nodes).await?
        };
        if needs_node_ports {
            run.waiting_ports = ports_without_node_port(service);
        }
        if let Some(rename) = rename {
            // The rename first: with consent the plan is the new load balancer's, made once the old one is gone.
            run.recreation = Some(crate::dry_run::Recreation {
                replaces: rename.consent,
                reason: rename.reason,
            });
        }
        Ok(run)
    }

    async fn dry_run_with<F: LoadBalancerFlavour>(
        &self,
        cluster_name: &str,
        spec: ServiceSpec,
        nodes: &[&NodeView],
    ) -> Result<DryRun, Error> {
        let (spec, subnets) = self.subnets_or_ipv4(&spec).await?;
        let mut desired = F::build(&spec, nodes, &self.config, cluster_name, &subnets)?;
        let observed = F::observe(&self.ports(), &desired, Scope::Full).await?;
        // The plan an ensure would apply, so refused as an ensure would be: never a plan against another's.
        let claimant = Claimant::new(F::name(&desired), &spec.key(), &spec.uid).with_adopt(spec.adopt);
        if ownership::claim(&self.config, &claimant, F::found(&observed), Purpose::Serve)?.adopted() {
            F::adopt(&mut desired);
        }
        let changes = F::plan(&desired, &observed);
        // Refused as the ensure refuses it (a protected NLB's recreation): a plan that AWS would stop part-way
        // is no plan to show.
        F::check_plan(&desired, &observed, &changes)?;
        Ok(F::dry_run(spec.into_owned(), desired, changes))
    }
}
