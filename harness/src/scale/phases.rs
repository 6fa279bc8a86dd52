//! One call pattern measured end to end in one environment: the write floor, the node burst, the load
//! balancers, the steady window, a node joining and leaving, then more Services; each phase fills [`Figures`].

use std::{path::Path, time::Duration};

use anyhow::Context as _;
use ccm_testing::TestEnv;
use k8s_openapi::api::core::v1::{Node, Service};
use kube::{Api, api::ListParams};
use tokio::time::Instant;

use crate::scale::{
    Params,
    aws::Fleet,
    ccm::{Calls, Ccm, diff},
    cluster::{self, Lb},
    figures::{Costs, Figures, Phase, beyond},
    trace,
};

/// Prints a line of column `label`'s progress, with the UTC time the trace's lines carry (`--trace`).
fn say(label: &str, what: &str) {
    println!("{} [{label}] {what}", trace::utc_time_of_day());
}

/// Called with a pattern's figures after each of its phases.
pub type Report<'a> = &'a (dyn Fn(&Figures) + Sync);

/// Flags of `aws-cloud-controller-manager` alone, which the write floor's `custom-provider` does not take.
const AWS_ONLY_FLAGS: [&str; 1] = ["--aws-client-rate-limits-off"];

/// A controller under measurement: this repository's binary with `flags`, or the Go controller with its
/// defaults (`go`), whose write floor then runs with `flags`: the Kubernetes pace of Go's controllers.
pub struct Pattern {
    pub label: &'static str,
    pub flags: Vec<String>,
    pub go: bool,
}

/// Runs every phase of `pattern` in `env` with the CCM `bin`.
pub async fn run(
    env: &TestEnv,
    bin: &Path,
    pattern: &Pattern,
    p: &Params,
    report: Report<'_>,
) -> anyhow::Result<Figures> {
    let say = |what: &str| say(pattern.label, what);
    let mut f = Figures::new(pattern.label, p.nodes);
    let client = env.kube_client().await?;
    let (nodes, services): (Api<Node>, Api<Service>) =
        (Api::all(client.clone()), Api::namespaced(client, "default"));
    say(&format!("launching {} instances in moto", p.nodes));
    let fleet = Fleet::create(env, p.nodes, p.pool, p.throttled).await?;
    let report = with_throttled(&fleet, report);
    let group = fleet.id.clone();
    let selector = ListParams::default().labels(&format!("scale={group}"));
    let pools = (p.nodes / p.pool.max(1)).max(1);
    let manifests = |tainted: bool| -> anyhow::Result<Vec<Node>> {
        (0..p.nodes)
            .map(|i| {
                cluster::node(
                    &fleet.instances[i],
                    &group,
                    i / p.pool.max(1) % pools,
                    tainted,
                    true,
                )
            })
            .collect()
    };
    f.floor = write_floor(env, bin, &fleet, &nodes, manifests(true)?, pattern, p)
        .await?
        .as_secs_f64();
    cluster::delete_nodes(&nodes, &selector).await?;
    let mut ccm = start_ccm(env, bin, &fleet, pattern, f.floor, &say).await?;
    let tracer = start_trace(p, &fleet, &ccm, &say);
    let result = measure(
        &mut f,
        &mut ccm,
        &fleet,
        &nodes,
        &services,
        pools,
        manifests(true)?,
        p,
        &report,
    )
    .await;
    f.cpu_total = ccm.cpu_secs();
    f.throttled = fleet.throttled();
    if result.is_ok() {
        f.phase = Phase::Done;
        report(&f);
    }
    if let Err(e) = &result {
        say(&format!("failed: {e:#}; CCM log {}", ccm.log.display()));
        // The page says why this column stopped, with the calls throttled until then.
        f.failed = Some(format!("{e:#}"));
        report(&f);
    }
    let mut cleaned = Ok(());
    if p.cleanup {
        say("cleaning up: Services (their load balancers), then Nodes");
        cleaned = cluster::delete_services(&services, &group, p.limit).await;
        cleaned = cleaned.and(cluster::delete_nodes(&nodes, &selector).await);
    }
    if let Some(tracer) = tracer {
        tracer.abort();
    }
    let alive = ccm.running();
    let status = ccm.stop().await?;
    say(&format!("CCM stopped ({status})"));
    result?;
    cleaned?;
    anyhow::ensure!(alive, "the CCM exited during the run ({status})");
    Ok(f)
}

/// The controller of `pattern`, once the write floor (`floor` seconds) is measured.
async fn start_ccm(
    env: &TestEnv,
    bin: &Path,
    fleet: &Fleet,
    pattern: &Pattern,
    floor: f64,
    say: &dyn Fn(&str),
) -> anyhow::Result<Ccm> {
    if pattern.go {
        say(&format!("write floor {floor:.1} s; starting the Go controller"));
        Ccm::start_go(env, &fleet.go_config(env), &fleet.dir, fleet.proxy()).await
    } else {
        say(&format!(
            "write floor {floor:.1} s; starting the CCM {}",
            pattern.flags.join(" ")
        ));
        Ccm::start(bin, "aws", env, &fleet.config, &fleet.dir, &pattern.flags).await
    }
}

/// With `--trace`, the column's trace written beside its logs until the returned task is aborted. A trace that
/// cannot be written is said and the run goes on (the controller is running: an early return would leave it).
fn start_trace(
    p: &Params,
    fleet: &Fleet,
    ccm: &Ccm,
    say: &dyn Fn(&str),
) -> Option<tokio::task::JoinHandle<()>> {
    if !p.trace {
        return None;
    }
    let path = fleet.dir.join("trace.log");
    match trace::spawn(ccm.reader(), &path) {
        Ok(task) => {
            say(&format!("tracing AWS calls each second into {}", path.display()));
            Some(task)
        }
        Err(e) => {
            say(&format!("no trace: {} cannot be written: {e:#}", path.display()));
            None
        }
    }
}

/// `report` with the calls AWS's rate limits refused so far: every page written says how many.
fn with_throttled<'a>(fleet: &'a Fleet, report: Report<'a>) -> impl Fn(&Figures) + Sync + 'a {
    move |f| {
        let mut f = f.clone();
        f.throttled = fleet.throttled();
        report(&f);
    }
}

/// The write floor: the same burst initialized by the same controllers with the same flags (write
/// concurrency, client rate limits), but by `custom-provider`, whose in-memory cloud answers every lookup at
/// once: the Kubernetes writes of an initialization with no provider cost. From the first create until every
/// Node is initialized.
async fn write_floor(
    env: &TestEnv,
    bin: &Path,
    fleet: &Fleet,
    nodes: &Api<Node>,
    burst: Vec<Node>,
    pattern: &Pattern,
    p: &Params,
) -> anyhow::Result<Duration> {
    let machines: String = fleet
        .instances
        .iter()
        .map(|i| format!("{} {} m5.large {}\n", i.private_dns, i.zone, i.private_ip))
        .collect();
    let config = fleet.dir.join("machines");
    std::fs::write(&config, machines)?;
    // The runtime's flags are the same; the AWS binary's own (how it calls AWS) do not apply.
    let flags: Vec<String> = (pattern.flags.iter())
        .filter(|f| !AWS_ONLY_FLAGS.iter().any(|aws| f.starts_with(aws)))
        .cloned()
        .collect();
    let floor_bin = bin.with_file_name("custom-provider");
    let floor = Ccm::start(&floor_bin, "in-memory", env, &config, &fleet.dir, &flags).await?;
    let selector = ListParams::default().labels(&format!("scale={}", fleet.id));
    let started = Instant::now();
    let result = async {
        cluster::create_nodes(nodes, burst).await?;
        cluster::wait_initialized(nodes, &selector, p.nodes, p.limit).await
    }
    .await;
    let elapsed = started.elapsed();
    let status = floor.stop().await?;
    result.with_context(|| format!("the write floor (custom-provider: {status})"))?;
    Ok(elapsed)
}

#[allow(clippy::too_many_arguments)]
async fn measure(
    f: &mut Figures,
    ccm: &mut Ccm,
    fleet: &Fleet,
    nodes: &Api<Node>,
    services: &Api<Service>,
    pools: usize,
    burst: Vec<Node>,
    p: &Params,
    report: Report<'_>,
) -> anyhow::Result<()> {
    let label = f.label.clone();
    let say = |what: String| say(&label, &what);
    let group = fleet.id.as_str();
    let selector = ListParams::default().labels(&format!("scale={group}"));
    let (before, throttled) = (ccm.calls().await?, fleet.throttled());
    let started = Instant::now();
    cluster::create_nodes(nodes, burst).await?;
    cluster::wait_initialized(nodes, &selector, p.nodes, p.limit).await?;
    f.burst = started.elapsed().as_secs_f64();
    f.burst_calls = diff(&ccm.calls().await?, &before);
    f.burst_throttled = diff(&fleet.throttled(), &throttled);
    f.phase = Phase::Burst;
    f.memory.push(("the Node burst".into(), ccm.memory()));
    report(f);
    say(format!(
        "node burst {:.1} s, AWS calls {:?}, throttled {:?}",
        f.burst, f.burst_calls, f.burst_throttled
    ));
    let mut lbs = Vec::new();
    for (k, &count) in p.services.iter().enumerate() {
        let (started, before) = (Instant::now(), Reading::take(ccm, fleet).await?);
        let made = count.saturating_sub(lbs.len());
        lbs.extend(cluster::create_services(services, group, lbs.len()..count, pools).await?);
        let served = cluster::wait_hostnames(services, group, count, p.limit).await?;
        let secs = if served >= count {
            started.elapsed().as_secs_f64()
        } else {
            f64::INFINITY
        };
        f.ensure.push((count, secs, served));
        f.ensure_costs.push(before.costs(ccm, fleet, made).await?);
        report(f);
        say(format!(
            "{count} Services have load balancers after {:.1} s",
            started.elapsed().as_secs_f64()
        ));
        if k == 0 {
            steady(f, ccm, fleet, p).await?;
            f.phase = Phase::Steady;
            f.memory.push(("the steady window".into(), ccm.memory()));
            report(f);
            churn(f, ccm, fleet, nodes, &lbs, p, report).await?;
        } else {
            tokio::time::sleep(p.settle).await;
        }
        f.rss.push((count, ccm.peak_rss_kib()));
        f.memory.push((format!("{count} Services"), ccm.memory()));
        report(f);
    }
    f.deletion = Some(deletion(&label, ccm, fleet, services, lbs.len(), p).await?);
    report(f);
    Ok(())
}

/// Every Service deleted at once: seconds until all are gone (infinite: not within the run's limit, and the
/// run goes on) and what the `count` deletions cost.
async fn deletion(
    label: &str,
    ccm: &Ccm,
    fleet: &Fleet,
    services: &Api<Service>,
    count: usize,
    p: &Params,
) -> anyhow::Result<(f64, Costs)> {
    say(label, &format!("deleting the {count} Services"));
    let (started, before) = (Instant::now(), Reading::take(ccm, fleet).await?);
    let secs = match cluster::delete_services(services, &fleet.id, p.limit).await {
        Ok(()) => started.elapsed().as_secs_f64(),
        Err(e) => {
            say(label, &format!("deletion: {e:#}; going on"));
            f64::INFINITY
        }
    };
    say(label, &format!("{count} Services deleted after {secs:.1} s"));
    Ok((secs, before.costs(ccm, fleet, count).await?))
}

/// The counters a phase's [`Costs`] are the growth of: the controller's calls and moto's seconds.
struct Reading {
    at: Instant,
    calls: Calls,
    moto_secs: Calls,
    throttled: Calls,
}

impl Reading {
    async fn take(ccm: &Ccm, fleet: &Fleet) -> anyhow::Result<Self> {
        let calls = ccm.calls().await?;
        Ok(Self {
            at: Instant::now(),
            calls,
            moto_secs: fleet.moto_secs(),
            throttled: fleet.throttled(),
        })
    }

    /// What happened since this reading, for `load_balancers` made or deleted.
    async fn costs(&self, ccm: &Ccm, fleet: &Fleet, load_balancers: usize) -> anyhow::Result<Costs> {
        let now = Self::take(ccm, fleet).await?;
        Ok(Costs {
            load_balancers,
            secs: (now.at - self.at).as_secs_f64(),
            calls: diff(&now.calls, &self.calls),
            moto_secs: diff(&now.moto_secs, &self.moto_secs),
            throttled: diff(&now.throttled, &self.throttled),
        })
    }
}

/// The steady window: no change at all, after the CCM settled; calls scaled to an hour.
async fn steady(f: &mut Figures, ccm: &Ccm, fleet: &Fleet, p: &Params) -> anyhow::Result<()> {
    tokio::time::sleep(p.settle).await;
    let (before, cpu, moto) = (ccm.calls().await?, ccm.cpu_secs(), fleet.moto_secs());
    let started = Instant::now();
    tokio::time::sleep(p.steady).await;
    let secs = started.elapsed().as_secs_f64();
    let calls = diff(&ccm.calls().await?, &before);
    let hourly = |c: &Calls| -> Calls { c.iter().map(|(op, n)| (op.clone(), n * 3600.0 / secs)).collect() };
    f.steady_moto = hourly(&diff(&fleet.moto_secs(), &moto));
    f.steady_secs = secs;
    f.steady_cpu = ccm.cpu_secs() - cpu;
    f.steady = hourly(&calls);
    say(&f.label, &format!("steady {secs:.0} s: {calls:?}"));
    Ok(())
}

/// A Node joins pool 0 (its instance launched just before), then leaves: the calls each costs beyond the steady
/// rate, and the time until every load balancer of the pool has (then no longer has) the instance.
#[allow(clippy::too_many_arguments)]
async fn churn(
    f: &mut Figures,
    ccm: &Ccm,
    fleet: &Fleet,
    nodes: &Api<Node>,
    lbs: &[Lb],
    p: &Params,
    report: Report<'_>,
) -> anyhow::Result<()> {
    let instance = &fleet.launch_one().await?;
    let pool: Vec<&Lb> = lbs.iter().filter(|lb| lb.pool == 0).collect();
    f.affected = (pool.len(), pool.iter().filter(|lb| lb.nlb).count());
    // Registered NotReady, and Ready once initialized, as a kubelet usually is (its network plugin starts after
    // the cloud-node controller has answered). Created Ready, with its instance ID still unset, a Node is never
    // added by Go 1.20's service controller: it syncs when the set of Ready Nodes changes, and a provider ID
    // being set triggered no sync until 2023 (kubernetes/kubernetes#117388).
    let node = cluster::node(instance, &fleet.id, 0, true, false)?;
    let before = ccm.calls().await?;
    let started = Instant::now();
    cluster::create_nodes(nodes, vec![node]).await?;
    say(
        &f.label,
        &format!("join: Node {} ({}) created", instance.private_dns, instance.id),
    );
    let selector = ListParams::default().fields(&format!("metadata.name={}", instance.private_dns));
    cluster::wait_initialized(nodes, &selector, 1, p.limit).await?;
    f.join_init = started.elapsed().as_secs_f64();
    cluster::set_ready(nodes, &instance.private_dns).await?;
    f.join_lag = until_members(fleet, &pool, &instance.id, true, p.lag_limit).await?;
    if f.join_lag.is_finite() {
        // From the Node's creation, as the table says, not from its initialization.
        f.join_lag = started.elapsed().as_secs_f64();
    }
    f.join = quiet(ccm, &before, started, &f.steady, p).await?;
    say(
        &f.label,
        &format!("join: lag {:.1} s, calls {:?}", f.join_lag, f.join),
    );
    f.phase = Phase::Join;
    report(f);
    let before = ccm.calls().await?;
    let started = Instant::now();
    nodes.delete(&instance.private_dns, &Default::default()).await?;
    f.leave_lag = until_members(fleet, &pool, &instance.id, false, p.lag_limit).await?;
    f.leave = quiet(ccm, &before, started, &f.steady, p).await?;
    say(
        &f.label,
        &format!("leave: lag {:.1} s, calls {:?}", f.leave_lag, f.leave),
    );
    f.phase = Phase::Leave;
    report(f);
    Ok(())
}

/// Seconds until `instance` is (or, `present == false`, is not) a member of every load balancer in `lbs`;
/// infinite when that did not happen within `limit` (the table says so, and the run goes on).
async fn until_members(
    fleet: &Fleet,
    lbs: &[&Lb],
    instance: &str,
    present: bool,
    limit: Duration,
) -> anyhow::Result<f64> {
    let started = Instant::now();
    let mut pending: Vec<&Lb> = lbs.to_vec();
    while !pending.is_empty() {
        let mut left = Vec::new();
        for lb in pending {
            let member = fleet
                .members(&lb.name, lb.nlb)
                .await
                .iter()
                .any(|m| m == instance);
            if member != present {
                left.push(lb);
            }
        }
        pending = left;
        if !pending.is_empty() && started.elapsed() >= limit {
            println!(
                "{} load balancers still {} {instance} after {} s: going on",
                pending.len(),
                if present { "without" } else { "with" },
                limit.as_secs()
            );
            return Ok(f64::INFINITY);
        }
        if !pending.is_empty() {
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }
    Ok(started.elapsed().as_secs_f64())
}

/// Waits until no load-balancer call (anything but DescribeInstances, which the address refresh keeps making)
/// moved for `p.quiet`, and returns the calls since `before` less what the steady rate accounts for.
async fn quiet(
    ccm: &Ccm,
    before: &Calls,
    since: Instant,
    steady: &Calls,
    p: &Params,
) -> anyhow::Result<Calls> {
    let lb_calls = |c: &Calls| -> f64 {
        c.iter()
            .filter(|(op, _)| *op != "DescribeInstances")
            .map(|(_, n)| n)
            .sum()
    };
    let first = ccm.calls().await?;
    let mut last = (lb_calls(&first), Instant::now(), first);
    while last.1.elapsed() < p.quiet && since.elapsed() < p.limit {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let now = ccm.calls().await?;
        if lb_calls(&now) != last.0 {
            last = (lb_calls(&now), Instant::now(), now);
        }
    }
    // The quiet time itself is not the change's: the calls are counted up to the last one that moved.
    let secs = (last.1 - since).as_secs_f64();
    Ok(beyond(&diff(&last.2, before), steady, secs)
        .into_iter()
        .map(|(op, n)| (op, n.round()))
        .filter(|(_, n)| *n > 0.0)
        .collect())
}
