//! [`plan_for`]: the dry run of a Service manifest, for tools (`lb-plan`).

use ccm_aws_api::{Ec2, Elb, Elbv2};
use ccm_cloud_provider::{Backends, ServiceEndpoints};
use k8s_openapi::api::core::v1::{Node, Service};

use super::AwsLoadBalancers;
use crate::{Error, dry_run::DryRun};

/// Dry run for a Service manifest (JSON, as `kubectl get svc -o json` prints it) and nodes: the desired model
/// and the plan an ensure with `cluster_name` (the controller's `--cluster-name`) would apply, reading AWS through the ports and writing nothing. `Display` prints
/// one numbered change per line; `serde_json` gives the whole result.
pub async fn plan_for<E: Ec2 + Send + Sync, L: Elb + Send + Sync, V: Elbv2 + Send + Sync>(
    load_balancers: &AwsLoadBalancers<E, L, V>,
    cluster_name: &str,
    service_json: &str,
    nodes: &[Node],
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
    nodes: &[Node],
    endpoints: Option<&ServiceEndpoints>,
) -> Result<DryRun, PlanForError> {
    let service: Service = serde_json::from_str(service_json).map_err(PlanForError::Manifest)?;
    let nodes: Vec<&Node> = nodes.iter().collect();
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
