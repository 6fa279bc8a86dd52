//! Initializes 1,000 uninitialized Nodes in the real test apiserver with the cloud-node controller and the fake
//! provider, twice: with batched provider lookups (`InstancesV2::instance_metadata_batch`, as this workspace's
//! controller does) and with the naive one-call-per-node baseline (the fake's batching turned off, which is
//! what upstream's controller costs). Each provider call waits a simulated cloud latency.
//!
//! Prints provider calls, batch sizes, Kubernetes writes and wall time (first Node created to last one
//! initialized) for both, and their ratios. Needs the test environment's variables
//! (`set -a; . testenv.env; set +a`). Tunables: `BENCH_NODES` (1000), `BENCH_PROVIDER_LATENCY_MS` (20).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::{sync::Arc, time::Duration};

use ccm_cloud_provider::{NodeAddress, NodeAddressType};
use ccm_controllers::{cloud_node, keys};
use ccm_testing::{
    TestEnv,
    provider::{FakeInstance, FakeProvider, Method},
    unique_name,
};
use futures::{StreamExt, TryStreamExt, stream};
use k8s_openapi::api::core::v1::Node;
use kube::{
    Api, Client,
    api::{DeleteParams, ListParams, PostParams},
};
use serde_json::json;
use tokio::time::Instant;

struct Outcome {
    wall: Duration,
    calls: usize,
    single_calls: usize,
    batches: Vec<usize>,
    api_writes: u64,
}

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The fake provider with one instance per name, each call waiting `latency`.
fn provider(names: &[String], latency: Duration, batching: bool) -> FakeProvider {
    let mut cloud = FakeProvider::new();
    if !batching {
        cloud = cloud.without_batching();
    }
    cloud.set_delay(latency);
    for (i, name) in names.iter().enumerate() {
        cloud.add_instance(
            FakeInstance::new(name, format!("fake://i-{i:05}"))
                .instance_type("m5.large")
                .zone("zone-a", "region-1")
                .addresses(vec![NodeAddress::new(
                    NodeAddressType::InternalIp,
                    format!("10.{}.{}.{}", i / 65536, (i / 256) % 256, i % 256),
                )]),
        );
    }
    cloud
}

/// Creates the uninitialized Nodes `names` of `group`, 32 at a time.
async fn create_nodes(api: &Api<Node>, names: &[String], group: &str) {
    stream::iter(names.iter())
        .map(|name| {
            let api = api.clone();
            async move {
                let node: Node = serde_json::from_value(json!({
                    "metadata": { "name": name, "labels": { "ccm-test/group": group } },
                    "spec": { "taints": [{ "key": keys::TAINT_UNINITIALIZED, "value": "true", "effect": "NoSchedule" }] },
                }))
                .unwrap();
                api.create(&PostParams::default(), &node).await.map(|_| ())
            }
        })
        .buffer_unordered(32)
        .try_collect::<Vec<()>>()
        .await
        .unwrap();
}

/// Waits until all `nodes` Nodes of `group` are initialized (untainted, with a provider ID).
async fn wait_initialized(api: &Api<Node>, group: &str, nodes: usize, start: Instant) {
    let selector = ListParams::default().labels(&format!("ccm-test/group={group}"));
    loop {
        let list = api.list(&selector).await.unwrap();
        let pending = list
            .items
            .iter()
            .filter(|n| {
                n.spec
                    .as_ref()
                    .and_then(|s| s.taints.as_ref())
                    .is_some_and(|t| t.iter().any(|t| t.key == keys::TAINT_UNINITIALIZED))
                    || n.spec.as_ref().and_then(|s| s.provider_id.as_ref()).is_none()
            })
            .count();
        if list.items.len() == nodes && pending == 0 {
            return;
        }
        assert!(
            start.elapsed() < Duration::from_secs(600),
            "not initialized after 10 minutes: {pending} pending"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Deletes the Nodes `names`, 32 at a time.
async fn delete_nodes(api: &Api<Node>, names: &[String]) {
    stream::iter(names.iter())
        .map(|name| {
            let api = api.clone();
            async move { api.delete(name, &DeleteParams::default()).await.map(|_| ()) }
        })
        .buffer_unordered(32)
        .try_collect::<Vec<()>>()
        .await
        .unwrap();
}

async fn run(client: &Client, nodes: usize, latency: Duration, batching: bool) -> Outcome {
    let api: Api<Node> = Api::all(client.clone());
    let group = unique_name(if batching { "bench-batched" } else { "bench-naive" });
    let names: Vec<String> = (0..nodes).map(|i| format!("{group}-{i}")).collect();
    let cloud = provider(&names, latency, batching);
    let mut config = cloud_node::CloudNodeConfig::default();
    config.node_selector = Some(format!("ccm-test/group={group}"));
    let metrics = config.metrics.clone();
    let (stop, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(cloud_node::run(
        client.clone(),
        Arc::new(cloud.clone()),
        config,
        async {
            stop_rx.await.ok();
        },
    ));
    // Let the controller's watch start, so the Nodes arrive as a burst of events.
    tokio::time::sleep(Duration::from_millis(500)).await;

    let start = Instant::now();
    create_nodes(&api, &names, &group).await;
    wait_initialized(&api, &group, nodes, start).await;
    let wall = start.elapsed();
    stop.send(()).unwrap();
    task.await.unwrap().unwrap();
    let outcome = Outcome {
        wall,
        calls: cloud.total_calls(),
        single_calls: cloud.count(Method::InstanceMetadata),
        batches: cloud.batch_sizes(Method::InstanceMetadataBatch),
        api_writes: metrics.snapshot().api_writes,
    };
    delete_nodes(&api, &names).await;
    outcome
}

#[tokio::main]
async fn main() {
    let nodes = usize::try_from(env_or("BENCH_NODES", 1000)).unwrap();
    let latency = Duration::from_millis(env_or("BENCH_PROVIDER_LATENCY_MS", 20));
    let client = TestEnv::get().kube_client().await.unwrap();
    println!(
        "cloud-node initialization: {nodes} uninitialized Nodes created (32 at a time) in the real apiserver"
    );
    println!(
        "fake provider, {} ms simulated latency per provider call\n",
        latency.as_millis()
    );
    let batched = run(&client, nodes, latency, true).await;
    let naive = run(&client, nodes, latency, false).await;
    let row = |label: &str, o: &Outcome| {
        let (min, max) = (
            o.batches.iter().min().copied().unwrap_or(0),
            o.batches.iter().max().copied().unwrap_or(0),
        );
        println!(
            "{label:<28} provider calls {:>5} (batch calls {:>4}, sizes {min}..{max}; single calls {:>5})  k8s writes {:>5}  wall {:>7.2} s",
            o.calls,
            o.batches.len(),
            o.single_calls,
            o.api_writes,
            o.wall.as_secs_f64()
        );
    };
    row("batched (this controller)", &batched);
    row("one call per node (naive)", &naive);
    #[allow(clippy::cast_precision_loss)]
    let call_ratio = naive.calls as f64 / batched.calls.max(1) as f64;
    println!(
        "\nprovider calls: {} vs {} ({call_ratio:.1}x fewer); wall time ratio naive/batched: {:.2}",
        batched.calls,
        naive.calls,
        naive.wall.as_secs_f64() / batched.wall.as_secs_f64()
    );
}
