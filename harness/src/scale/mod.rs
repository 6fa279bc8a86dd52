//! `scale`: the release `aws-cloud-controller-manager` at scale beside the real Go controller (1.20.2 with its
//! in-tree AWS provider, built by scripts/build-kubernetes.sh; its calls counted by the proxy in front of moto).
//! For each: the write floor (the same burst initialized by `custom-provider`, whose in-memory cloud answers at once) and a burst of `--nodes` Nodes, `--services` LoadBalancer Services of both flavours (each targeting a
//! pool of `--pool` Nodes, as the per-load-balancer instance quotas require at 5,000 Nodes), a steady window
//! with no change (AWS calls by operation scaled to an hour), a Node joining and leaving, peak RSS and CPU.
//! AWS is moto; Kubernetes the real apiserver. With `--upstream-env FILE` (a second `scripts/testenv.sh`
//! environment) both run at once, else one after the other in this environment. `--write PAGE` puts the table
//! into the page between its markers (docs/performance.md) and `--chart` (default: beside the page) draws both
//! columns as an SVG chart. Figures are printed, never asserted.
//!
//! By default each column's AWS calls go through a proxy that throttles them as AWS does (its documented token
//! buckets for one account, `ccm_testing::Throttling::aws_documented`), and this CCM runs with its client-side
//! limiter; `--unthrottled` lets every call through to moto at once (the old run, for profiling) and turns this
//! CCM's limiter off (`--aws-client-rate-limits-off`).

mod aws;
mod ccm;
mod chart;
mod cluster;
mod figures;
mod meta;
mod phases;
mod report;
mod trace;

use std::{path::PathBuf, time::Duration};

use anyhow::Context;
use ccm_testing::TestEnv;
use clap::Parser;
use phases::Pattern;

#[derive(Parser)]
#[command(
    name = "scale",
    about = "The CCM at scale beside the Go controller; prints figures"
)]
struct Cli {
    /// Nodes (and instances) of the burst.
    #[arg(long, default_value_t = 5000)]
    nodes: usize,
    /// LoadBalancer Services, in steps; the steady window and the join and leave follow the first step.
    #[arg(long, value_delimiter = ',', default_value = "500,1000")]
    services: Vec<usize>,
    /// Nodes per pool; each Service's load balancer targets one pool.
    #[arg(long, default_value_t = 100)]
    pool: usize,
    /// Seconds of the steady window.
    #[arg(long, default_value_t = 900)]
    steady_secs: u64,
    /// Seconds the CCM is left to settle before the steady window.
    #[arg(long, default_value_t = 30)]
    settle_secs: u64,
    /// Seconds without a load-balancer call that end a join or leave.
    #[arg(long, default_value_t = 15)]
    quiet_secs: u64,
    /// The longest any phase may wait. Under AWS's rate limits 500 load balancers take at least 21 minutes (41
    /// with this CCM's limiter at half of AWS's rate, until 2026-11-30), and the Go controller's 5,000-Node burst
    /// had 4,554 Nodes initialized after 40 (run of 2026-11-30): 90 minutes by default.
    #[arg(long, default_value_t = 5400)]
    limit_secs: u64,
    /// The longest a Node joining or leaving waits for the load balancers' membership (default: the phase
    /// limit); what is not done by then is recorded as such.
    #[arg(long)]
    lag_limit_secs: Option<u64>,
    /// The env file of a second test environment, for the Go controller at the same time.
    #[arg(long, conflicts_with = "ours_only")]
    upstream_env: Option<PathBuf>,
    /// Runs this CCM's column only; the Go controller's says "not run". For sizes the Go controller cannot
    /// finish within a run (at 20,000 Nodes its burst alone is some 100,000 `DescribeInstances`).
    #[arg(long)]
    ours_only: bool,
    /// The CCM binary; default: `aws-cloud-controller-manager` next to this one.
    #[arg(long)]
    ccm: Option<PathBuf>,
    /// Writes the table into this page between its markers.
    #[arg(long)]
    write: Option<PathBuf>,
    /// Draws the chart of both columns into this SVG file; default with `--write`: the page's path with `.svg`.
    #[arg(long)]
    chart: Option<PathBuf>,
    /// The commit named on the page; default: `git rev-parse --short HEAD` here.
    #[arg(long)]
    commit: Option<String>,
    /// A flag given to this CCM (repeatable), e.g. `--aws-client-rate-limits-off` for a
    /// memory run that creates its load balancers in minutes; the page names it.
    #[arg(long = "ccm-flag", value_name = "FLAG", allow_hyphen_values = true)]
    ccm_flags: Vec<String>,
    /// Lets every AWS call through to moto, which never throttles (the run before AWS's rate limits were in the
    /// loop, for profiling), and gives this CCM `--aws-client-rate-limits-off`. Default: both columns are
    /// throttled as AWS documents it, and this CCM keeps its client-side limiter.
    #[arg(long)]
    unthrottled: bool,
    /// Writes each column's AWS calls second by second (and its memory every ten seconds) into `trace.log`
    /// beside its logs; the phase lines printed carry the same UTC times.
    #[arg(long)]
    trace: bool,
}

/// AWS's default quota of inbound rules per security group. Each load balancer adds one rule to the group of the
/// pool it targets (the harness gives every pool a group of its own).
const RULES_PER_GROUP: usize = 60;

/// Refuses sizes whose load balancers cannot all be allowed into their pool's group: the run would wait out its
/// limit while AWS (and moto) refuse the rest with `RulesPerSecurityGroupLimitExceeded`, whatever the controller.
fn check_rules_per_group(nodes: usize, pool: usize, services: &[usize]) -> anyhow::Result<()> {
    let pools = nodes.div_ceil(pool.max(1)).max(1);
    let most = services.iter().copied().max().unwrap_or(0);
    let per_group = most.div_ceil(pools);
    anyhow::ensure!(
        per_group <= RULES_PER_GROUP,
        "--services {most} over {pools} pools (--nodes {nodes}, --pool {pool}) puts {per_group} load balancers' \
         rules on a pool's security group; AWS allows {RULES_PER_GROUP} rules per group: use a --pool of at most \
         {} or fewer Services",
        nodes / most.div_ceil(RULES_PER_GROUP).max(1)
    );
    Ok(())
}

/// This CCM's flag that turns its client-side AWS limiter off, given with `--unthrottled`.
const LIMITER_OFF: &str = "--aws-client-rate-limits-off";

/// The Kubernetes pace of the Go controller, for its write floor: client-go's default limits (20 QPS, burst 30),
/// one Node at a time (its cloud-node controller initializes in the informer's handler), one service worker.
const GO_FLOOR_FLAGS: [&str; 4] = [
    "--kube-api-qps=20",
    "--kube-api-burst=30",
    "--concurrent-node-syncs=1",
    "--concurrent-service-syncs=1",
];

/// What every pattern is run with.
struct Params {
    nodes: usize,
    services: Vec<usize>,
    pool: usize,
    steady: Duration,
    settle: Duration,
    quiet: Duration,
    limit: Duration,
    lag_limit: Duration,
    /// Whether each column's calls are throttled as AWS does (else moto answers every call).
    throttled: bool,
    /// Services and Nodes removed at the end (needed when the patterns share an environment).
    cleanup: bool,
    /// Whether each column's calls are traced second by second (`--trace`).
    trace: bool,
}

/// Runs the scale harness with the process's arguments (`scale --help`).
pub async fn run() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let bin = match &cli.ccm {
        Some(path) => path.clone(),
        None => std::env::current_exe()?.with_file_name("aws-cloud-controller-manager"),
    };
    check_rules_per_group(cli.nodes, cli.pool, &cli.services)?;
    let ours_env = TestEnv::from_env()?;
    let up_env = cli.upstream_env.as_deref().map(meta::env_file).transpose()?;
    let params = Params {
        nodes: cli.nodes,
        services: cli.services.clone(),
        pool: cli.pool,
        steady: Duration::from_secs(cli.steady_secs),
        settle: Duration::from_secs(cli.settle_secs),
        quiet: Duration::from_secs(cli.quiet_secs),
        limit: Duration::from_secs(cli.limit_secs),
        lag_limit: Duration::from_secs(cli.lag_limit_secs.unwrap_or(cli.limit_secs)),
        throttled: !cli.unthrottled,
        cleanup: up_env.is_none(),
        trace: cli.trace,
    };
    if !cli.ours_only {
        ccm_testing::GoCcm::binary().context("the Go controller (scripts/setup.sh builds it)")?;
    }
    let columns = match (&up_env, cli.ours_only) {
        (_, true) => meta::Columns::OursOnly,
        (Some(_), false) => meta::Columns::Together,
        (None, false) => meta::Columns::OneAfterTheOther,
    };
    let mut flags = cli.ccm_flags.clone();
    if cli.unthrottled && !flags.iter().any(|f| f == LIMITER_OFF) {
        flags.push(LIMITER_OFF.to_owned());
    }
    let ours = Pattern {
        label: "this CCM",
        flags,
        go: false,
    };
    let upstream = Pattern {
        label: "Go 1.20.2",
        flags: GO_FLOOR_FLAGS.map(str::to_owned).to_vec(),
        go: true,
    };
    let progress = report::Progress {
        page: cli.write.clone(),
        chart: cli
            .chart
            .clone()
            .or_else(|| cli.write.as_ref().map(|page| page.with_extension("svg"))),
        meta: report::Meta {
            commit: cli.commit.clone().unwrap_or_else(meta::commit),
            date: meta::command("date", &["-u", "+%Y-%m-%d %H:%M UTC"]),
            machine: meta::machine(),
            setup: meta::setup(&params, &bin, &ours.flags, &upstream.flags, columns),
            throttled: params.throttled,
        },
        figures: Default::default(),
    };
    let (a, b) = run_columns(
        columns,
        (&ours_env, up_env.as_ref()),
        &bin,
        [&ours, &upstream],
        &params,
        &progress,
    )
    .await;
    // The page already holds whatever was reached, even when a pattern failed.
    let (a, b) = (a.context("this CCM")?, b.context("the Go controller")?);
    println!("\n{}", report::markdown(&a, &b, &progress.meta));
    Ok(())
}

/// Runs both patterns (or this CCM's only) as `columns` says, `envs` this CCM's and the Go controller's own
/// (if any), publishing each one's figures after every phase.
async fn run_columns(
    columns: meta::Columns,
    (ours_env, up_env): (&TestEnv, Option<&TestEnv>),
    bin: &std::path::Path,
    [ours, upstream]: [&Pattern; 2],
    params: &Params,
    progress: &report::Progress,
) -> (anyhow::Result<figures::Figures>, anyhow::Result<figures::Figures>) {
    let ours_report = |f: &figures::Figures| progress.publish(0, f);
    let up_report = |f: &figures::Figures| progress.publish(1, f);
    match (columns, up_env) {
        (meta::Columns::Together, Some(env)) => tokio::join!(
            phases::run(ours_env, bin, ours, params, &ours_report),
            phases::run(env, bin, upstream, params, &up_report)
        ),
        (meta::Columns::OursOnly, _) => {
            let mut not_run = figures::Figures::new(upstream.label, params.nodes);
            not_run.phase = figures::Phase::NotRun;
            up_report(&not_run);
            let a = phases::run(ours_env, bin, ours, params, &ours_report).await;
            (a, Ok(not_run))
        }
        _ => {
            let a = phases::run(ours_env, bin, ours, params, &ours_report).await;
            (a, phases::run(ours_env, bin, upstream, params, &up_report).await)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::check_rules_per_group;

    #[test]
    fn sizes_past_the_rules_a_group_holds_are_refused_with_the_pool_that_fits() {
        assert!(
            check_rules_per_group(5000, 100, &[500, 1000]).is_ok(),
            "20 a group"
        );
        assert!(
            check_rules_per_group(1000, 50, &[500, 1000]).is_ok(),
            "50 a group"
        );
        let error = check_rules_per_group(1000, 100, &[500, 1000])
            .unwrap_err()
            .to_string();
        assert!(error.contains("puts 100 load balancers' rules"), "{error}");
        assert!(error.contains("use a --pool of at most 58"), "{error}");
    }
}
