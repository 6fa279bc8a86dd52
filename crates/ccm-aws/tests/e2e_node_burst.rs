//! A burst of 1,000 uninitialized nodes (as after a fail-over, or a cluster created at once), half named by
//! instance ID and half by private DNS name, initialized by the generic cloud-node controller on `AwsCloud`: at
//! most 2 DescribeInstances calls, counted by the adapter: the cluster (with the CCM's own instance) holds 1,001
//! instances, two listing pages of 1,000, which also answer the Nodes named by ID. Prints the calls and the wall
//! time. Named `e2e_*` so that it runs alone, after the parallel group: it loads moto with 1,000 instances.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::too_many_lines)]

mod common;

use ccm_controllers::cloud_node;
use ccm_testing::TestEnv;
use common::{eventually, fixture, initialized};
use kube::api::ListParams;
use tokio::sync::oneshot;

const NODES: usize = 1000;

#[tokio::test]
async fn a_burst_of_1000_nodes_costs_at_most_two_describe_instances() {
    let f = fixture().await;
    let mut launched = Vec::with_capacity(NODES);
    for _ in 0..NODES / 250 {
        launched.extend(f.launch(250).await);
    }
    let names: Vec<String> = launched
        .iter()
        .enumerate()
        .map(|(k, l)| {
            if k % 2 == 0 {
                l.id.clone()
            } else {
                l.private_dns.clone()
            }
        })
        .collect();
    let creates = futures::stream::iter(names.iter().map(|n| f.create_node(n)));
    futures::StreamExt::for_each_concurrent(creates, 32, |fut| fut).await;

    let before = f.describes();
    let started = tokio::time::Instant::now();
    let (stop, stopped) = oneshot::channel::<()>();
    let mut config = cloud_node::CloudNodeConfig::default();
    config.node_selector = Some(f.selector());
    let metrics = config.metrics.clone();
    let client = TestEnv::get().kube_client().await.unwrap();
    let task = tokio::spawn(cloud_node::run(client, f.cloud.clone(), config, async {
        let _ = stopped.await;
    }));
    eventually("1,000 nodes initialized", 300, async || {
        let list = f
            .nodes
            .list(&ListParams::default().labels(&f.selector()))
            .await
            .unwrap();
        list.items.iter().filter(|n| initialized(n)).count() == NODES
    })
    .await;
    let elapsed = started.elapsed();
    let describes = f.describes() - before;
    let _ = stop.send(());
    task.await.unwrap().unwrap();
    println!(
        "1,000-node burst: {describes} DescribeInstances, {} DescribeAvailabilityZones, {} cloud-node provider \
         calls, {} Kubernetes writes, {:.1} s until all initialized",
        f.adapter.metrics().attempts("ec2", "DescribeAvailabilityZones"),
        metrics.snapshot().provider_calls,
        metrics.snapshot().api_writes,
        elapsed.as_secs_f64()
    );
    // Cleaned up before the verdict: 1,000 Nodes left behind by a failure made every later e2e test's CCM
    // register them all.
    f.cleanup().await;
    assert!(
        describes <= 2,
        "{describes} DescribeInstances for a burst of {NODES} nodes"
    );
}
