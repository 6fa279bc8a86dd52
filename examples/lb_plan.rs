//! `lb-plan`: the dry run of a Service of type LoadBalancer. Prints the plan the CCM would apply for a Service
//! (the cluster's, `NAMESPACE/NAME`, or a YAML or JSON manifest) against the current AWS state, writing nothing
//! (AWS, and the cluster, are only read). Nodes come from the cluster or a NodeList file. See docs/lb-plan.md.
//!
//! ```text
//! lb-plan default/web --cloud-config-configmap kube-system/aws-cloud-controller-manager-cloud-config
//! kubectl get svc web -o yaml | lb-plan -f - --cloud-config cloud.conf --nodes nodes.yaml
//! ```
//! Off EC2, the cloud config needs `Region`, `VPC`, `SubnetID` and `KubernetesClusterID` (no IMDS lookups).

use std::process::ExitCode;

use anyhow::{Context as _, anyhow, bail};
use ccm_aws::AwsCloud;
use ccm_aws_sdk::AdapterOptions;
use ccm_cloud_provider::{CloudProvider, NodeView};
use ccm_examples::{
    cli::lb_plan::Cli,
    tools::{
        self, Cluster,
        lb_plan::{
            endpoints_if_followed, nodes_from_file, service_from_cluster, service_from_file,
            warn_if_not_load_balancer, warn_without_targets,
        },
    },
};
use clap::Parser;
use k8s_openapi::api::core::v1::Node;

#[tokio::main]
async fn main() -> ExitCode {
    let args = ccm_controller_manager::normalize_flag_names(std::env::args_os());
    match run(Cli::parse_from(args)).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // `{e:#}`: the whole chain, so that a missing file's path and the failing call are both named.
            eprintln!("lb-plan: {e:#}");
            ExitCode::FAILURE
        }
    }
}

async fn run(cli: Cli) -> anyhow::Result<()> {
    let cluster = Cluster::new(cli.kubeconfig.clone(), cli.context.clone());
    // The manifests first: a typo in a path fails before any network call.
    let file_service = cli.filename.as_deref().map(service_from_file).transpose()?;
    let file_nodes = cli.nodes.as_deref().map(nodes_from_file).transpose()?;
    let config = tools::cloud_config(
        "lb-plan",
        cli.cloud_config.as_deref(),
        cli.cloud_config_configmap.as_ref(),
        &cluster,
    )
    .await?;
    let service = match (file_service, &cli.service) {
        (Some(service), _) => service,
        (None, Some(name)) => service_from_cluster(&cluster, name, cli.namespace.as_deref()).await?,
        (None, None) => bail!("name a Service: NAMESPACE/NAME, or -f FILE"),
    };
    let (nodes, source) = match (file_nodes, &cli.nodes) {
        (Some(nodes), Some(path)) => (nodes, format!("the NodeList {path}")),
        _ => {
            let api = kube::Api::<Node>::all(cluster.client().await?);
            let nodes = api
                .list(&Default::default())
                .await
                .context("listing the cluster's Nodes")?;
            (nodes.items, "the cluster".to_owned())
        }
    };
    // Read-only: the adapter refuses every AWS call that changes anything, whatever the planner does.
    let options = AdapterOptions::default().with_read_only(true);
    let (cloud, _adapter) = AwsCloud::connect(&config, options).await?;
    let lbs = cloud
        .load_balancer()
        .ok_or_else(|| anyhow!("no VPC known: set VPC in the cloud config"))?;
    // As the controller does: a Node whose instance lacks the cluster tag is no target.
    let nodes: Vec<NodeView> = nodes.into_iter().map(NodeView::from).collect();
    let refs: Vec<&NodeView> = nodes.iter().collect();
    let members: Vec<NodeView> = cloud
        .membership()
        .member_nodes(&refs)
        .await
        .context("looking up the Nodes' instances")?
        .into_iter()
        .cloned()
        .collect();
    warn_without_targets(nodes.len(), members.len(), &source, cloud.cluster().id());
    warn_if_not_load_balancer(&service);
    let endpoints = endpoints_if_followed(lbs, &service, &cluster).await;
    let service_json = serde_json::to_string(&service)?;
    let plan = ccm_load_balancers::plan_with_endpoints_for(
        lbs,
        &cli.cluster_name,
        &service_json,
        &members,
        endpoints.as_ref(),
    )
    .await?;
    if cli.json {
        println!("{}", serde_json::to_string_pretty(&plan)?);
    } else {
        print!("{plan}");
    }
    Ok(())
}
