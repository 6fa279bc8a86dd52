//! `sandbox [NODES] [--pause | --compare]`: the CCM at work on a local cluster, every capability in one run. Seeds moto
//! with a VPC (a public ELB subnet, a route table tagged for the cluster), a control-plane instance and NODES
//! workers (default 4), registers the workers as Nodes the way kubelets with `--cloud-provider=external` do
//! (tainted uninitialized, half named by private DNS name, half by instance ID, with pod CIDRs), runs
//! `aws-cloud-controller-manager` (next to this binary) with `--configure-cloud-routes` against an IMDS emulator
//! and moto, and prints before and after of: the Nodes initialized; their pod CIDR routes; a Service getting a
//! Classic ELB and another an NLB; the `lb-plan` dry run of a change; the clean-up and `doctor` finding it
//! clean. Then the CCM's peak memory and its AWS calls by operation. More than 10 NODES is the scale run (Nodes
//! only): `sandbox 1000`. `--pause` waits for a line on stdin before the clean-up, to look around in moto.
//! `--compare` runs the Nodes and load balancers of the workload through the Go controller and then through
//! this one, and prints both columns (`sandbox/compare.rs`).
//! Needs the environment of `scripts/testenv.sh` (`scripts/sandbox.sh` provides it).

mod cluster;
mod compare;
mod steps;
mod tour;

use std::time::Duration;

use anyhow::Context;
use ccm_testing::{TestEnv, nodes};
use cluster::{CLUSTER_CIDR, Cluster};
use k8s_openapi::api::core::v1::{Node, Service};
use kube::{Api, api::DeleteParams};

/// Runs the sandbox with the process's arguments (`sandbox [NODES] [--pause | --compare]`).
pub async fn run() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: sandbox [NODES] [--pause | --compare]";
    if let Some(unknown) = args
        .iter()
        .find(|a| a.starts_with("--") && !["--pause", "--compare"].contains(&a.as_str()))
    {
        anyhow::bail!("unknown flag {unknown} ({usage})");
    }
    let flag = |name: &str| args.iter().any(|a| a == name);
    let nodes_arg = args.iter().find(|a| !a.starts_with("--"));
    let workers: i32 = nodes_arg.map_or(Ok(4), |n| n.parse()).context(usage)?;
    let env = TestEnv::from_env()?;
    if flag("--compare") {
        return compare::run(&env, workers).await;
    }
    let (pause, tour) = (flag("--pause"), workers <= 10);
    let cluster = Cluster::create(&env, workers).await?;
    cluster.register_nodes(tour, false).await?;
    let lp = cluster.node_selector();
    println!("\n== Nodes: initialized by the CCM ==\nbefore:");
    show(&cluster.nodes.list(&lp).await?.items);
    let routes_before = cluster.routes().await?;
    let flags = [
        "--configure-cloud-routes=true".to_owned(),
        format!("--cluster-cidr={CLUSTER_CIDR}"),
        "--route-reconciliation-period=2s".to_owned(),
    ];
    let ccm = cluster.start_ccm(if tour { &flags } else { &[] })?;
    let started = tokio::time::Instant::now();
    let mut after = Vec::new();
    for _ in 0..150 + workers {
        after = cluster.nodes.list(&lp).await?.items;
        if after.iter().all(nodes::is_initialized) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    println!("after ({:.1} s):", started.elapsed().as_secs_f64());
    show(&after);
    let services: Api<Service> = Api::namespaced(env.kube_client().await?, "default");
    if !tour {
        println!("\n(scale run: Nodes only)");
    }
    let toured = match tour {
        true => tour::run(&env, &cluster, &services, routes_before, pause).await,
        false => Ok(()),
    };
    let (peak, now) = ccm.memory();
    println!("\n== aws-cloud-controller-manager ==\nmemory: peak {peak} (VmHWM), now {now}");
    println!("AWS calls by operation (aws_api_requests_total):");
    for (op, n) in ccm.aws_calls().await.unwrap_or_default() {
        println!("  {op:<40} {n}");
    }
    let log = ccm.log.display().to_string();
    println!("aws-cloud-controller-manager stopped ({})", ccm.stop()?);
    cluster
        .nodes
        .delete_collection(&DeleteParams::default(), &lp)
        .await?;
    anyhow::ensure!(
        after.iter().all(nodes::is_initialized),
        "nodes left uninitialized; see {log}"
    );
    toured.with_context(|| format!("see {log}"))
}

/// One line per Node; a count beyond 10 Nodes.
fn show(items: &[Node]) {
    if items.len() > 10 {
        let done = items.iter().filter(|n| nodes::is_initialized(n)).count();
        return println!("  {} Nodes, {done} initialized", items.len());
    }
    for n in items {
        let cidr = n
            .spec
            .as_ref()
            .and_then(|s| s.pod_cidr.clone())
            .unwrap_or_else(|| "-".to_owned());
        println!("  {} podCIDR={cidr}", nodes::summary(n));
    }
}
