//! `lb-plan`: the dry run of a Service of type LoadBalancer. Prints the plan the CCM would apply for a Service
//! manifest against the current AWS state, writing nothing (AWS is only read). Nodes come from a JSON NodeList
//! file (`kubectl get nodes -o json`) or, with `--kubeconfig`, from the cluster.
//!
//! ```text
//! kubectl get svc web -o json > web.json
//! lb-plan --cloud-config /etc/kubernetes/cloud.conf --service web.json --kubeconfig ~/.kube/config
//! ```
//! Off EC2, the cloud config needs `Region`, `VPC`, `SubnetID` and `KubernetesClusterID` (no IMDS lookups).

use std::process::ExitCode;

use ccm_aws::{AwsCloud, CloudConfig};
use ccm_aws_sdk::AdapterOptions;
use ccm_cloud_provider::CloudProvider;
use clap::Parser;
use k8s_openapi::{List, api::core::v1::Node};

#[derive(Parser)]
#[command(
    name = "lb-plan",
    version,
    about = "Print the load-balancer plan for a Service, changing nothing"
)]
struct Cli {
    /// The cloud config, as given to the CCM.
    #[arg(long)]
    cloud_config: String,
    /// The Service manifest (JSON).
    #[arg(long)]
    service: String,
    /// A NodeList (JSON) to take the nodes from.
    #[arg(long, conflicts_with = "kubeconfig")]
    nodes: Option<String>,
    /// A kubeconfig to list the cluster's nodes with.
    #[arg(long)]
    kubeconfig: Option<String>,
    /// The cluster name, as given to the CCM (`--cluster-name`): it names NLBs' managed security groups.
    #[arg(long, default_value = ccm_load_balancers::DEFAULT_CLUSTER_NAME)]
    cluster_name: String,
    /// Print the spec, the desired model and the changes as JSON.
    #[arg(long)]
    json: bool,
}

#[tokio::main]
async fn main() -> ExitCode {
    match run(Cli::parse()).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("lb-plan: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn run(cli: Cli) -> anyhow::Result<()> {
    let config = CloudConfig::load(&cli.cloud_config)?;
    let service = std::fs::read_to_string(&cli.service)?;
    let nodes: Vec<Node> = match (&cli.nodes, &cli.kubeconfig) {
        (Some(file), _) => serde_json::from_str::<List<Node>>(&std::fs::read_to_string(file)?)?.items,
        (None, Some(path)) => {
            let kubeconfig = kube::config::Kubeconfig::read_from(path)?;
            let options = kube::config::KubeConfigOptions::default();
            let client_config = kube::Config::from_custom_kubeconfig(kubeconfig, &options).await?;
            let client = kube::Client::try_from(client_config)?;
            kube::Api::<Node>::all(client)
                .list(&Default::default())
                .await?
                .items
        }
        (None, None) => Vec::new(),
    };
    let (cloud, _adapter) = AwsCloud::connect(&config, AdapterOptions::default()).await?;
    let lbs = cloud
        .load_balancer()
        .ok_or_else(|| anyhow::anyhow!("no VPC known: set VPC in the cloud config"))?;
    // As the controller does: a Node whose instance lacks the cluster tag is no target.
    let refs: Vec<&Node> = nodes.iter().collect();
    let nodes: Vec<Node> = cloud
        .membership()
        .member_nodes(&refs)
        .await?
        .into_iter()
        .cloned()
        .collect();
    let plan = ccm_load_balancers::plan_for(lbs, &cli.cluster_name, &service, &nodes).await?;
    if cli.json {
        println!("{}", serde_json::to_string_pretty(&plan)?);
    } else {
        print!("{plan}");
    }
    Ok(())
}
