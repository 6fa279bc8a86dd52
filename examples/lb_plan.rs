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
use ccm_cloud_provider::CloudProvider;
use ccm_examples::{
    cli::lb_plan::Cli,
    tools::{self, Cluster},
};
use clap::Parser;
use k8s_openapi::api::core::v1::{Node, Service};

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
    let refs: Vec<&Node> = nodes.iter().collect();
    let members: Vec<Node> = cloud
        .membership()
        .member_nodes(&refs)
        .await
        .context("looking up the Nodes' instances")?
        .into_iter()
        .cloned()
        .collect();
    warn_without_targets(nodes.len(), members.len(), &source, cloud.cluster().id());
    warn_if_not_load_balancer(&service);
    let service_json = serde_json::to_string(&service)?;
    let plan = ccm_load_balancers::plan_for(lbs, &cli.cluster_name, &service_json, &members).await?;
    if cli.json {
        println!("{}", serde_json::to_string_pretty(&plan)?);
    } else {
        print!("{plan}");
    }
    Ok(())
}

/// A plan without Nodes registers no instance: say so, rather than print a load balancer without targets as if
/// that were the controller's plan.
fn warn_without_targets(listed: usize, members: usize, source: &str, cluster_id: &str) {
    if listed == 0 {
        eprintln!(
            "lb-plan: warning: no Nodes in {source}: the plan has no instances or targets (the controller plans \
             with the cluster's Nodes; pass --nodes FILE or a kubeconfig of the cluster)"
        );
    } else if members == 0 {
        eprintln!(
            "lb-plan: warning: none of the {listed} Nodes of {source} is an instance of cluster {cluster_id} (a \
             provider ID aws:///<zone>/i-... of an instance tagged kubernetes.io/cluster/{cluster_id}): the plan \
             has no instances or targets"
        );
    }
}

/// The controller plans only for Services of type LoadBalancer; any other is planned as if it were one.
fn warn_if_not_load_balancer(service: &Service) {
    let kind = service
        .spec
        .as_ref()
        .and_then(|s| s.type_.as_deref())
        .unwrap_or("ClusterIP");
    if kind != "LoadBalancer" {
        let (ns, name) = (
            service.metadata.namespace.as_deref(),
            service.metadata.name.as_deref(),
        );
        eprintln!(
            "lb-plan: warning: Service {}/{} is of type {kind}, not LoadBalancer: the controller makes no load \
             balancer for it; this is the plan it would make if the type were LoadBalancer",
            ns.unwrap_or("default"),
            name.unwrap_or_default()
        );
    }
}

/// The one Service of a manifest file.
fn service_from_file(path: &str) -> anyhow::Result<Service> {
    let objects = tools::objects(tools::read_manifest(path)?);
    let [object] = &objects[..] else {
        bail!("{path}: {} objects, not one Service", objects.len());
    };
    let kind = object["kind"].as_str().unwrap_or("no kind");
    if kind != "Service" {
        bail!("{path}: a {kind}, not a Service");
    }
    serde_json::from_value(object.clone()).with_context(|| format!("{path}: not a valid Service"))
}

/// The Nodes of a NodeList (or List, or one Node) file.
fn nodes_from_file(path: &str) -> anyhow::Result<Vec<Node>> {
    tools::objects(tools::read_manifest(path)?)
        .into_iter()
        .map(|node| serde_json::from_value(node).with_context(|| format!("{path}: not a list of Nodes")))
        .collect()
}

/// `NAMESPACE/NAME`, or `NAME` in `--namespace` (else the kubeconfig context's namespace).
async fn service_from_cluster(
    cluster: &Cluster,
    name: &str,
    namespace: Option<&str>,
) -> anyhow::Result<Service> {
    let client = cluster.client().await?;
    let (namespace, name) = match name.split_once('/') {
        Some((ns, n)) if !ns.is_empty() && !n.is_empty() && !n.contains('/') => (ns.to_owned(), n),
        Some(_) => bail!("{name:?} is not NAMESPACE/NAME or NAME"),
        None => (
            namespace.map_or_else(|| client.default_namespace().to_owned(), str::to_owned),
            name,
        ),
    };
    kube::Api::<Service>::namespaced(client, &namespace)
        .get_opt(name)
        .await
        .with_context(|| format!("reading Service {namespace}/{name}"))?
        .ok_or_else(|| anyhow!("Service {namespace}/{name} not found"))
}
