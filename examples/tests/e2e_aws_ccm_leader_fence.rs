//! End to end, leadership fencing: two `aws-cloud-controller-manager` binaries with `--controllers=*,tagging` under
//! leader election (lease 6 s, renew deadline 4 s, retry 1 s), each talking to moto through a fault proxy of its
//! own (so that each replica's requests are counted apart). The leader's `CreateTags` is throttled, so that its
//! tagging controller is always in the middle of a batched call's retries; then the leader is cut off from the
//! apiserver (a TCP proxy holding everything it sends). Its lease lapses and its controllers stop, but the
//! process goes on as a candidate; from then on it must send no `CreateTags` at all, even once AWS answers again,
//! while the other replica takes over and tags the instances.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::too_many_lines)]

mod common;

use std::{collections::BTreeMap, time::Duration};

use aws_sdk_ec2::types::Filter;
use ccm_testing::{Fault, FaultProxy, TcpDelayProxy, TestEnv};
use common::{Ccm, World, eventually};
use tokio::time::Instant;

const NODES: i32 = 3;

/// How long the stopped leader is watched: longer than the retries of one batched call would take (5 attempts,
/// throttling back-off of at most 1 + 2 + 4 + 8 s).
const WATCH: Duration = Duration::from_secs(20);

fn flags(kubeconfig: Option<&std::path::Path>) -> Vec<String> {
    let mut out: Vec<String> = [
        "--leader-elect-lease-duration=6s",
        "--leader-elect-renew-deadline=4s",
        "--leader-elect-retry-period=1s",
        "--controllers=*,tagging",
        "--tags=team=e2e",
        "--resources=instance",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    if let Some(path) = kubeconfig {
        out.push(format!("--kubeconfig={}", path.display()));
    }
    out
}

fn start(world: &World, config: &std::path::Path, flags: &[String]) -> Ccm {
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    Ccm::start_with_config(world, config, &flags)
}

/// The value of the first sample of `metric` whose line contains `label`, on the CCM serving /metrics on `port`;
/// `None` while /metrics does not answer or has no such sample.
async fn gauge(port: u16, metric: &str, label: &str) -> Option<f64> {
    let client = reqwest::Client::builder()
        .danger_accept_invalid_certs(true)
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    let url = format!("https://127.0.0.1:{port}/metrics");
    let text = client.get(url).send().await.ok()?.text().await.ok()?;
    text.lines()
        .filter(|l| l.starts_with(&format!("{metric}{{")) && l.contains(label))
        .find_map(|l| l.rsplit(' ').next()?.parse().ok())
}

/// Whether the CCM serving /metrics on `port` holds `lease`.
async fn leading(port: u16, lease: &str) -> Option<bool> {
    let label = format!("name=\"{lease}\"");
    let value = gauge(port, "leader_election_master_status", &label).await?;
    Some(value > 0.0)
}

/// Whether the tagging controller runs (set to 0 once it has stopped or been aborted).
async fn tagging_runs(port: u16) -> Option<bool> {
    let value = gauge(port, "running_managed_controllers", "name=\"tagging\"").await?;
    Some(value > 0.0)
}

async fn tags_of(world: &World, instance: &str) -> BTreeMap<String, String> {
    let out = world
        .raw
        .describe_tags()
        .filters(Filter::builder().name("resource-id").values(instance).build())
        .send()
        .await
        .unwrap();
    out.tags()
        .iter()
        .filter_map(|t| Some((t.key()?.to_owned(), t.value()?.to_owned())))
        .collect()
}

/// A kubeconfig for the test apiserver reached through `proxy`.
fn kubeconfig_via(world: &World, proxy: &TcpDelayProxy) -> std::path::PathBuf {
    let env = TestEnv::get();
    let path = world.dir.join("partitioned.kubeconfig");
    let text = std::fs::read_to_string(&env.kubeconfig).unwrap();
    let proxied = text.replace(&env.kube_apiserver, &format!("https://{}", proxy.addr()));
    std::fs::write(&path, proxied).unwrap();
    path
}

/// Replica A (the apiserver through `apiserver`, AWS through `aws_a`) once it leads, and replica B (AWS through
/// `aws_b`) once it is up as a candidate.
async fn replicas(
    world: &World,
    apiserver: &TcpDelayProxy,
    aws_a: &FaultProxy,
    aws_b: &FaultProxy,
) -> (Ccm, Ccm) {
    let kubeconfig = kubeconfig_via(world, apiserver);
    let mut a = start(
        world,
        &world.config_via("a.conf", &aws_a.url()),
        &flags(Some(&kubeconfig)),
    );
    let (port_a, lease) = (a.port, a.lease.clone());
    eventually(&mut a, "A leads", 30, async || {
        leading(port_a, &lease).await == Some(true)
    })
    .await;
    let mut b = start(world, &world.config_via("b.conf", &aws_b.url()), &flags(None));
    let port_b = b.port;
    eventually(&mut b, "B is up as a candidate", 30, async || {
        leading(port_b, &lease).await == Some(false)
    })
    .await;
    (a, b)
}

#[tokio::test]
async fn e2e_a_partitioned_leader_sends_no_create_tags_after_its_controllers_stopped() {
    let env = TestEnv::get();
    let world = World::new("").await;
    let launched = world.launch(NODES).await;
    for l in &launched {
        world.register_node(&l.id, None).await;
    }
    let apiserver = TcpDelayProxy::start(env.kube_apiserver.trim_start_matches("https://"))
        .await
        .unwrap();
    let aws_a = FaultProxy::start(&env.aws_endpoint).await.unwrap();
    aws_a.inject("CreateTags", Fault::Throttle, 100_000);
    let aws_b = FaultProxy::start(&env.aws_endpoint).await.unwrap();

    let (mut a, mut b) = replicas(&world, &apiserver, &aws_a, &aws_b).await;
    let (port_a, port_b, lease) = (a.port, b.port, a.lease.clone());
    eventually(&mut a, "A tries to tag (throttled)", 60, async || {
        aws_a.requests("CreateTags") > 0
    })
    .await;

    let cut = Instant::now();
    apiserver.set_partitioned(true);
    eventually(&mut a, "A's tagging controller stopped", 20, async || {
        tagging_runs(port_a).await == Some(false)
    })
    .await;
    let stopped = Instant::now();
    let sent_before = aws_a.requests("CreateTags");
    // AWS answers again: a CreateTags from A would now reach moto and tag.
    aws_a.clear("CreateTags");
    println!(
        "A: {sent_before} throttled CreateTags; controllers stopped {:?} after the cut",
        stopped - cut
    );

    eventually(&mut b, "B leads", 30, async || {
        leading(port_b, &lease).await == Some(true)
    })
    .await;
    println!("B leads {:?} after the cut", cut.elapsed());
    eventually(&mut b, "every instance tagged by B", 60, async || {
        let mut all = true;
        for l in &launched {
            all &= tags_of(&world, &l.id).await.get("team").map(String::as_str) == Some("e2e");
        }
        all
    })
    .await;
    tokio::time::sleep_until(stopped + WATCH).await;

    a.assert_running();
    assert_eq!(
        leading(port_a, &lease).await,
        Some(false),
        "A leads again while cut off"
    );
    assert_eq!(
        aws_a.requests("CreateTags"),
        sent_before,
        "CreateTags from A after its controllers stopped\nA's log:\n{}",
        a.log_text()
    );
    assert!(aws_b.requests("CreateTags") > 0, "B did not tag");

    let status = b.terminate().await;
    assert!(status.success(), "{status}\n{}", b.log_text());
    a.kill();
    world.cleanup().await;
}
