//! `doctor`: the leak report. Lists what the cluster owns in AWS (tag `kubernetes.io/cluster/<id>=owned`) but no
//! Kubernetes object owns any more (load balancers, target groups, security groups, node group rules, routes),
//! Nodes stuck uninitialized and Services whose load balancer is failing. Reads only, unless `--delete`.
//!
//! ```text
//! doctor --cloud-config /etc/kubernetes/cloud.conf --kubeconfig ~/.kube/config [--json] [--delete]
//!        [--allow-empty-cluster]
//! doctor --cloud-config-configmap kube-system/aws-cloud-controller-manager-cloud-config
//! ```
//! Exit status: 0 when nothing is found (or `--delete` removed everything), 1 when something is found or left,
//! 2 on error. See docs/doctor.md and docs/operations.md.

use std::{process::ExitCode, time::SystemTime};

use anyhow::Context as _;
use ccm_aws::{
    AwsCloud,
    doctor::{self, EmptyCluster, Ports, Scope, Snapshot},
};
use ccm_aws_api::RouteTableId;
use ccm_aws_sdk::AdapterOptions;
use ccm_examples::{
    cli::doctor::Cli,
    tools::{self, Cluster},
};
use clap::Parser;
use k8s_openapi::api::core::v1::{Event, Node, Service};
use kube::{Api, api::ListParams};

#[tokio::main]
async fn main() -> ExitCode {
    // Warnings (a check that could not be made, a load balancer left alone) go to stderr beside the report.
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .with_max_level(tracing_subscriber::filter::LevelFilter::WARN)
        .init();
    let args = ccm_controller_manager::normalize_flag_names(std::env::args_os());
    match run(Cli::parse_from(args)).await {
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
    anyhow::ensure!(
        cli.delete || !cli.allow_empty_cluster,
        "--allow-empty-cluster is a condition of --delete: give both, or neither"
    );
    let cluster = Cluster::new(cli.kubeconfig.clone(), cli.context.clone());
    let mut config = tools::cloud_config(
        "doctor",
        cli.cloud_config.as_deref(),
        cli.cloud_config_configmap.as_ref(),
        &cluster,
    )
    .await?;
    if let Some(id) = cli.cluster_id {
        config.global.kubernetes_cluster_id = Some(id);
    }
    let client = cluster.client().await?;
    // Without --delete the adapter refuses every AWS call that changes anything.
    let options = AdapterOptions::default().with_read_only(!cli.delete);
    let (cloud, adapter) = AwsCloud::connect(&config, options).await?;
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

/// Services, Nodes and Events of the whole cluster, listed now.
async fn snapshot(client: &kube::Client) -> anyhow::Result<Snapshot> {
    let lp = ListParams::default();
    let services = Api::<Service>::all(client.clone()).list(&lp).await;
    let nodes = Api::<Node>::all(client.clone()).list(&lp).await;
    let events = Api::<Event>::all(client.clone()).list(&lp).await;
    Ok(Snapshot {
        services: services.context("listing the cluster's Services")?.items,
        nodes: nodes.context("listing the cluster's Nodes")?.items,
        events: events.context("listing the cluster's Events")?.items,
    })
}
