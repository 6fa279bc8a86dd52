//! `sandbox --compare [NODES]`: the sandbox's workload through the Go controller (Kubernetes 1.20.2's cloud
//! controller manager with its in-tree AWS provider, which `scripts/setup.sh` builds) and then through
//! `aws-cloud-controller-manager`, each in a fresh cluster of the same shape with the same cloud config file, each
//! behind its own `FaultProxy` that counts the AWS calls it makes. Phases: start (until it leads or serves), NODES
//! Nodes initialised (registered by private DNS name, as the Go provider needs, and Ready), a Classic ELB and an
//! NLB served (hostnames set, every instance behind both), both deleted (Services gone, load balancers gone).
//! Prints wall time and AWS calls per phase, peak memory and CPU time side by side, then the calls by phase and
//! operation.

use std::collections::{BTreeMap, BTreeSet};

use anyhow::Context;
use ccm_testing::{
    FaultProxy, GoCcm, GoCcmOptions, GoCloudConfig, TestEnv, counts_since,
    load_balancers::LoadBalancers,
    metrics, nodes,
    process::{self, Usage},
    services::ingress_hostname,
};
use k8s_openapi::api::core::v1::Service;
use kube::{Api, api::DeleteParams};

use crate::sandbox::{
    cluster::{Ccm, Cluster},
    steps::{self, Lb, until},
};

const PHASES: [&str; 4] = [
    "start",
    "initialise Nodes",
    "serve a Classic ELB and an NLB",
    "delete both",
];

/// One controller's figures: each phase's wall time and AWS calls by operation, and its process's usage.
struct Figures {
    phases: Vec<(f64, BTreeMap<String, u64>)>,
    usage: Option<Usage>,
}

#[derive(Clone, Copy, PartialEq)]
enum Peer {
    Go,
    Ours,
}

enum Running {
    Go(Box<GoCcm>),
    Ours(Ccm),
}

impl Running {
    fn id(&self) -> u32 {
        match self {
            Self::Go(go) => go.id(),
            Self::Ours(ccm) => ccm.id(),
        }
    }

    fn log(&self) -> String {
        match self {
            Self::Go(go) => go.log_path().display().to_string(),
            Self::Ours(ccm) => ccm.log.display().to_string(),
        }
    }

    async fn stop(self) -> anyhow::Result<()> {
        match self {
            Self::Go(mut go) => drop(go.terminate().await?),
            Self::Ours(ccm) => drop(ccm.stop()?),
        }
        Ok(())
    }
}

/// Runs the workload through both controllers and prints the comparison.
pub async fn run(env: &TestEnv, workers: i32) -> anyhow::Result<()> {
    GoCcm::binary()?;
    println!("== The sandbox's workload: the Go controller 1.20.2, then aws-cloud-controller-manager ==");
    let go = measure(env, workers, Peer::Go).await?;
    let ours = measure(env, workers, Peer::Ours).await?;
    print(workers, &go, &ours);
    Ok(())
}

/// The time since the last mark and the calls made since, one phase.
struct Mark<'p> {
    proxy: &'p FaultProxy,
    at: tokio::time::Instant,
    calls: BTreeMap<String, u64>,
}

impl<'p> Mark<'p> {
    fn new(proxy: &'p FaultProxy) -> Self {
        Self {
            proxy,
            at: tokio::time::Instant::now(),
            calls: proxy.requests_by_action(),
        }
    }

    fn next(&mut self) -> (f64, BTreeMap<String, u64>) {
        let phase = counts_since(&self.calls, &self.proxy.requests_by_action());
        let secs = self.at.elapsed().as_secs_f64();
        *self = Self::new(self.proxy);
        (secs, phase)
    }
}

async fn measure(env: &TestEnv, workers: i32, peer: Peer) -> anyhow::Result<Figures> {
    let cluster = Cluster::create(env, workers).await?;
    let proxy = FaultProxy::start(&env.aws_endpoint).await?;
    let network = &cluster.network;
    let zone = &cluster.workers.first().context("at least one Node")?.zone;
    let config = GoCloudConfig::new(env, &cluster.id, &network.vpc, network.subnet(), zone);
    let config = config.via(&proxy.url());
    let services: Api<Service> = Api::namespaced(env.kube_client().await?, "default");
    let aws = LoadBalancers::connect(env).await;
    let mut mark = Mark::new(&proxy);
    let running = start(env, &cluster, &config, peer).await?;
    let mut phases = vec![mark.next()];
    cluster.register_nodes(false, true).await?;
    cluster.set_ready().await?;
    let lp = cluster.node_selector();
    let initialised = until(60 + u64::try_from(workers)?, || async {
        let items = cluster.nodes.list(&lp).await.map(|l| l.items).unwrap_or_default();
        items.len() == cluster.workers.len() && items.iter().all(nodes::is_initialized)
    })
    .await;
    phases.push(mark.next());
    let lbs = steps::create_services(&cluster, &services).await?;
    let served = until(90, || all_served(&cluster, &services, &aws, &lbs)).await;
    phases.push(mark.next());
    for lb in &lbs {
        services.delete(&lb.service, &DeleteParams::default()).await?;
    }
    let deleted = until(90, || async {
        let mut left = 0;
        for lb in &lbs {
            left += usize::from(services.get_opt(&lb.service).await.ok().flatten().is_some());
            left += usize::from(lb.seen(&aws).await.is_some());
        }
        left == 0
    })
    .await;
    phases.push(mark.next());
    let usage = process::usage(running.id());
    let log = running.log();
    running.stop().await?;
    cluster
        .nodes
        .delete_collection(&DeleteParams::default(), &lp)
        .await?;
    let failed: Vec<&str> = [initialised, served, deleted]
        .iter()
        .zip(&PHASES[1..])
        .filter(|(done, _)| !**done)
        .map(|(_, phase)| *phase)
        .collect();
    anyhow::ensure!(failed.is_empty(), "did not finish {failed:?} (log: {log})");
    Ok(Figures { phases, usage })
}

/// Starts `peer` for `cluster` with `config` and waits until it leads (Go) or serves its endpoints (ours, which
/// runs without leader election here).
async fn start(
    env: &TestEnv,
    cluster: &Cluster,
    config: &GoCloudConfig,
    peer: Peer,
) -> anyhow::Result<Running> {
    if peer == Peer::Go {
        let options = GoCcmOptions::new(&cluster.dir, &format!("go-{}", cluster.id));
        let mut go = GoCcm::start(env, config, &options)?;
        println!("\nstarted the Go controller (log: {})", go.log_path().display());
        go.wait_leading(std::time::Duration::from_secs(60)).await?;
        return Ok(Running::Go(Box::new(go)));
    }
    let file = cluster.dir.join("compare.conf");
    config.write(&file)?;
    let ccm = cluster.start_ccm_with(&file, &["--controllers=cloud-node,service".to_owned()])?;
    let up = until(30, || async { metrics::scrape(ccm.port).await.is_ok() }).await;
    anyhow::ensure!(
        up,
        "aws-cloud-controller-manager did not start (log: {})",
        ccm.log.display()
    );
    Ok(Running::Ours(ccm))
}

/// Both Services have a hostname and both load balancers every worker.
async fn all_served(cluster: &Cluster, services: &Api<Service>, aws: &LoadBalancers, lbs: &[Lb]) -> bool {
    let mut ids: Vec<String> = cluster.workers.iter().map(|w| w.id.clone()).collect();
    ids.sort();
    for lb in lbs {
        let svc = services.get(&lb.service).await.ok();
        let hostname = svc.as_ref().and_then(ingress_hostname);
        let members = lb.seen(aws).await.map(|s| s.members);
        if hostname.is_none() || members.as_ref() != Some(&ids) {
            return false;
        }
    }
    true
}

fn print(workers: i32, go: &Figures, ours: &Figures) {
    let name = if cfg!(debug_assertions) {
        "ours (debug build)"
    } else {
        "ours"
    };
    let row = |label: &str, a: String, b: String| println!("  {label:<36} {a:>14} {b:>20}");
    println!();
    row("", "Go 1.20.2".to_owned(), name.to_owned());
    for (i, phase) in PHASES.iter().enumerate() {
        let label = match i {
            1 => format!("initialise {workers} Nodes"),
            _ => (*phase).to_owned(),
        };
        let (g, o) = (&go.phases[i], &ours.phases[i]);
        row(&label, format!("{:.1} s", g.0), format!("{:.1} s", o.0));
        let total = |calls: &BTreeMap<String, u64>| calls.values().sum::<u64>().to_string();
        row("  AWS calls", total(&g.1), total(&o.1));
    }
    let mib = |u: &Option<Usage>| {
        u.map_or("?".to_owned(), |u| {
            format!("{:.1} MiB", u.peak_rss_kib as f64 / 1024.0)
        })
    };
    let cpu = |u: &Option<Usage>| u.map_or("?".to_owned(), |u| format!("{:.2} s", u.cpu_seconds));
    row("peak memory (VmHWM)", mib(&go.usage), mib(&ours.usage));
    row("CPU time (user + system)", cpu(&go.usage), cpu(&ours.usage));
    println!("\n  AWS calls by phase and operation (ELB and ELBv2 operations of one name counted together):");
    for (i, phase) in PHASES.iter().enumerate() {
        let (g, o) = (&go.phases[i].1, &ours.phases[i].1);
        let ops: BTreeSet<&String> = g.keys().chain(o.keys()).collect();
        if ops.is_empty() {
            continue;
        }
        println!("  {phase}:");
        for op in ops {
            let n = |calls: &BTreeMap<String, u64>| calls.get(op).copied().unwrap_or(0).to_string();
            row(&format!("  {op}"), n(g), n(o));
        }
    }
}
