//! `doctor`: the leak report. Lists what the cluster owns in AWS (tag `kubernetes.io/cluster/<id>=owned`) but no
//! Kubernetes object owns any more (load balancers, target groups, security groups, node group rules, routes),
//! Nodes stuck uninitialized and Services whose load balancer is failing. Reads only, unless `--delete`.
//!
//! ```text
//! doctor --cloud-config /etc/kubernetes/cloud.conf --kubeconfig ~/.kube/config [--json] [--delete]
//!        [--allow-empty-cluster]
//! ```
//! Exit status: 0 when nothing is found (or `--delete` removed everything), 1 when something is found or left,
//! 2 on error. See docs/operations.md.

use std::{process::ExitCode, time::SystemTime};

use ccm_aws::{
    AwsCloud, CloudConfig,
    doctor::{self, EmptyCluster, Ports, Scope, Snapshot},
};
use ccm_aws_api::RouteTableId;
use ccm_aws_sdk::AdapterOptions;
use clap::Parser;
use k8s_openapi::api::core::v1::{Event, Node, Service};
use kube::{Api, api::ListParams};

#[derive(Parser)]
#[command(
    name = "doctor",
    version,
    about = "List AWS resources the cluster owns but no Kubernetes object owns any more"
)]
struct Cli {
    /// The cloud config, as given to the CCM (region, VPC, cluster ID, endpoint overrides).
    #[arg(long)]
    cloud_config: String,
    /// A kubeconfig for the cluster (else in-cluster or $KUBECONFIG).
    #[arg(long)]
    kubeconfig: Option<String>,
    /// The cluster ID, instead of the cloud config's KubernetesClusterID.
    #[arg(long)]
    cluster_id: Option<String>,
    /// Check only the Nodes with these labels (`key=value,...`) for stuck initialization.
    #[arg(long, value_parser = parse_labels, default_value = "")]
    node_selector: Labels,
    /// Check only this namespace's Services for failing load balancers.
    #[arg(long)]
    namespace: Option<String>,
    /// Remove the leaked resources that a fresh listing still finds leaked.
    #[arg(long)]
    delete: bool,
    /// With --delete: go on when no Node names an EC2 instance, or when no Service is the one any owned load
    /// balancer names (its kubernetes.io/service-name tag or its name): what another cluster's kubeconfig looks
    /// like. Only when the cluster really has no Node on EC2, or no LoadBalancer Service left.
    #[arg(long, requires = "delete")]
    allow_empty_cluster: bool,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

#[tokio::main]
async fn main() -> ExitCode {
    // Warnings (a check that could not be made, a load balancer left alone) go to stderr beside the report.
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .with_max_level(tracing_subscriber::filter::LevelFilter::WARN)
        .init();
    match run(Cli::parse()).await {
        Ok(true) => ExitCode::from(1),
        Ok(false) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("doctor: {e:#}");
            ExitCode::from(2)
        }
    }
}

/// Prints the report (and removes); returns whether something is found or left.
async fn run(cli: Cli) -> anyhow::Result<bool> {
    let mut config = CloudConfig::load(&cli.cloud_config)?;
    if let Some(id) = cli.cluster_id {
        config.global.kubernetes_cluster_id = Some(id);
    }
    let client = kube_client(cli.kubeconfig.as_deref()).await?;
    let (cloud, adapter) = AwsCloud::connect(&config, AdapterOptions::default()).await?;
    #[allow(clippy::disallowed_methods)]
    // The one place where real time enters: ages are measured against it.
    let now = SystemTime::now();
    let scope = Scope::new(cloud.cluster().clone(), now)
        .with_vpc_id(cloud.vpc_id().cloned())
        .with_route_table_ids(config.global.route_table_id.as_deref().map(RouteTableId::from))
        .with_node_labels(cli.node_selector)
        .with_service_namespace(cli.namespace);
    let ports = Ports {
        ec2: adapter.ec2(),
        elb: adapter.elb(),
        elbv2: adapter.elbv2(),
    };
    let report = doctor::inspect(ports, &scope, &snapshot(&client).await?).await?;
    if !cli.delete {
        if cli.json {
            println!("{}", serde_json::to_string_pretty(&report)?);
        } else {
            print!("{report}");
        }
        return Ok(!report.is_clean());
    }
    // The apiserver is listed again inside, after AWS is read: never the report's snapshot.
    let empty = if cli.allow_empty_cluster {
        EmptyCluster::Allow
    } else {
        EmptyCluster::Refuse
    };
    let outcome = doctor::delete(ports, &scope, &report, empty, || snapshot(&client)).await?;
    if cli.json {
        let both = serde_json::json!({ "report": report, "delete": outcome });
        println!("{}", serde_json::to_string_pretty(&both)?);
    } else {
        print!("{report}\n{outcome}");
    }
    anyhow::ensure!(!outcome.has_failures(), "some removals failed (see above)");
    Ok(outcome.has_leftovers() || report.findings.iter().any(|f| !f.deletable))
}

type Labels = Vec<(String, String)>;

fn parse_labels(text: &str) -> Result<Labels, String> {
    let pairs = text.split(',').filter(|p| !p.is_empty());
    pairs
        .map(|p| match p.split_once('=') {
            Some((k, v)) if !k.is_empty() => Ok((k.to_owned(), v.to_owned())),
            _ => Err(format!("{p:?} is not key=value")),
        })
        .collect()
}

async fn kube_client(kubeconfig: Option<&str>) -> anyhow::Result<kube::Client> {
    let config = match kubeconfig {
        Some(path) => {
            let kubeconfig = kube::config::Kubeconfig::read_from(path)?;
            kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default()).await?
        }
        None => kube::Config::infer().await?,
    };
    Ok(kube::Client::try_from(config)?)
}

/// Services, Nodes and Events of the whole cluster, listed now.
async fn snapshot(client: &kube::Client) -> anyhow::Result<Snapshot> {
    let lp = ListParams::default();
    Ok(Snapshot {
        services: Api::<Service>::all(client.clone()).list(&lp).await?.items,
        nodes: Api::<Node>::all(client.clone()).list(&lp).await?.items,
        events: Api::<Event>::all(client.clone()).list(&lp).await?.items,
    })
}
