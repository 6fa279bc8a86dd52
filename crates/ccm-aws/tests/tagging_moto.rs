//! The tagging controller against the real kube-apiserver and moto (through the real adapter): 50 Nodes join
//! and their instances are tagged in a handful of `CreateTags` calls; each Node gets the checksum label; a deleted
//! Node's instance loses the tags; a restart with other tags retags every instance. The controller only watches
//! this test's Nodes (label selector), since the apiserver is shared.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::too_many_lines)]

use std::{collections::BTreeMap, sync::Arc, time::Duration};

use aws_sdk_ec2::types::{Filter, InstanceType};
use ccm_aws::tagging::{CHECKSUM_LABEL, TaggingConfig, TaggingController, TaggingMetrics, tags_checksum};
use ccm_aws_sdk::Adapter;
use ccm_testing::{TestEnv, fixtures::NodeBuilder, unique_name};
use k8s_openapi::api::core::v1::Node;
use kube::{
    Api,
    api::{DeleteParams, ListParams, PostParams},
};

const NODES: usize = 50;
const SELECTOR_KEY: &str = "ccm-test/tagging";

fn node(name: &str, run: &str, provider_id: &str) -> Node {
    NodeBuilder::new(name)
        .label(SELECTOR_KEY, run)
        .provider_id(provider_id)
        .build()
}

/// Instances of `ids` carrying `key=value`.
async fn tagged(raw: &aws_sdk_ec2::Client, ids: &[String], key: &str, value: &str) -> usize {
    let out = raw
        .describe_instances()
        .set_instance_ids(Some(ids.to_vec()))
        .filters(Filter::builder().name(format!("tag:{key}")).values(value).build())
        .send()
        .await
        .unwrap();
    out.reservations().iter().map(|r| r.instances().len()).sum()
}

/// Waits until `f` holds, polling every 100 ms for up to 60 s.
async fn eventually<F, Fut>(what: &str, f: F)
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    for _ in 0..600 {
        if f().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("timed out waiting until {what}");
}

/// Runs a controller with `tags` in the background; returns its stop switch.
fn start(
    client: kube::Client,
    adapter: &Adapter,
    tags: &[(&str, &str)],
    run: &str,
    metrics: TaggingMetrics,
) -> (tokio::sync::oneshot::Sender<()>, tokio::task::JoinHandle<()>) {
    let tags: BTreeMap<String, String> = tags
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    // The run names the cluster: the test's instances carry its tag.
    let cluster = ccm_tagging::ClusterTags::new(run, false).unwrap();
    let ec2 = Arc::new(adapter.ec2().clone());
    let controller = TaggingController::new(client, ec2, cluster, TaggingConfig::new(tags))
        .unwrap()
        .with_metrics(metrics)
        .with_node_selector(format!("{SELECTOR_KEY}={run}"));
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(controller.run(async move {
        let _ = stopped.await;
    }));
    (stop, task)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tags_joining_nodes_in_batches_untags_deleted_ones_and_retags_on_change() {
    let env = TestEnv::get();
    let sdk = env.aws_config().await;
    let adapter = ccm_testing::ec2::adapter(&sdk, None);
    let raw = aws_sdk_ec2::Client::new(&sdk);
    let client = env.kube_client().await.unwrap();
    let nodes: Api<Node> = Api::all(client.clone());
    let run = unique_name("tagging");
    let key = format!("team-{run}");

    let vpc = raw.create_vpc().cidr_block("10.81.0.0/16").send().await.unwrap();
    let subnet = raw
        .create_subnet()
        .vpc_id(vpc.vpc().unwrap().vpc_id().unwrap())
        .cidr_block("10.81.1.0/24")
        .availability_zone("us-east-1a")
        .send()
        .await
        .unwrap();
    let launched = raw
        .run_instances()
        .image_id("ami-12c6146b")
        .instance_type(InstanceType::T3Micro)
        .min_count(NODES as i32)
        .max_count(NODES as i32)
        .subnet_id(subnet.subnet().unwrap().subnet_id().unwrap())
        .tag_specifications(
            aws_sdk_ec2::types::TagSpecification::builder()
                .resource_type(aws_sdk_ec2::types::ResourceType::Instance)
                .tags(
                    aws_sdk_ec2::types::Tag::builder()
                        .key(format!("kubernetes.io/cluster/{run}"))
                        .value("owned")
                        .build(),
                )
                .build(),
        )
        .send()
        .await
        .unwrap();
    // Another system's instance (no cluster tag) behind a forged Node: never tagged, never untagged.
    let foreign = raw
        .run_instances()
        .image_id("ami-12c6146b")
        .instance_type(InstanceType::T3Micro)
        .min_count(1)
        .max_count(1)
        .subnet_id(subnet.subnet().unwrap().subnet_id().unwrap())
        .send()
        .await
        .unwrap()
        .instances()[0]
        .instance_id()
        .unwrap()
        .to_owned();
    let ids: Vec<String> = launched
        .instances()
        .iter()
        .map(|i| i.instance_id().unwrap().to_owned())
        .collect();
    let names: Vec<String> = (0..NODES).map(|n| format!("{run}-n{n}")).collect();
    for (name, id) in names.iter().zip(&ids) {
        nodes
            .create(
                &PostParams::default(),
                &node(name, &run, &format!("aws:///us-east-1a/{id}")),
            )
            .await
            .unwrap();
    }
    let forged = format!("{run}-forged");
    nodes
        .create(
            &PostParams::default(),
            &node(&forged, &run, &format!("aws:///us-east-1a/{foreign}")),
        )
        .await
        .unwrap();
    // Fargate: never tagged, never labelled.
    let fargate = format!("{run}-fargate");
    nodes
        .create(
            &PostParams::default(),
            &node(
                &fargate,
                &run,
                "aws:///us-east-1a/fargate-ip-10-81-1-99.ec2.internal",
            ),
        )
        .await
        .unwrap();

    let labelled = |checksum: String| {
        let nodes = nodes.clone();
        let run = run.clone();
        async move {
            let list = nodes
                .list(
                    &ListParams::default()
                        .labels(&format!("{SELECTOR_KEY}={run},{CHECKSUM_LABEL}={checksum}")),
                )
                .await
                .unwrap();
            list.items.len()
        }
    };
    let create_tags = || adapter.metrics().attempts("ec2", "CreateTags");
    let delete_tags = || adapter.metrics().attempts("ec2", "DeleteTags");

    // 1. The wave: every instance tagged, every node labelled, in a handful of CreateTags calls.
    let v1 = [(key.as_str(), "v1")];
    let checksum1 = tags_checksum(&[(key.clone(), "v1".to_owned())].into());
    let metrics = TaggingMetrics::default();
    let (stop, task) = start(client.clone(), &adapter, &v1, &run, metrics.clone());
    eventually("all nodes are labelled", || async {
        labelled(checksum1.clone()).await == NODES
    })
    .await;
    assert_eq!(tagged(&raw, &ids, &key, "v1").await, NODES);
    let calls = create_tags();
    println!("CreateTags calls for {NODES} joining nodes: {calls}");
    assert!(calls <= 3, "{calls} CreateTags calls for {NODES} nodes");
    // A batch's outcomes are counted once its last label is written: the labels can be seen first.
    eventually("every tag is counted done", || async {
        metrics.count("tag", "done") == NODES as u64
    })
    .await;
    let f = nodes.get(&fargate).await.unwrap();
    assert!(!f.metadata.labels.unwrap().contains_key(CHECKSUM_LABEL));
    eventually("the forged Node's instance is skipped", || async {
        metrics.count("tag", "skipped") == 1
    })
    .await;
    assert_eq!(tagged(&raw, std::slice::from_ref(&foreign), &key, "v1").await, 0);
    let f = nodes.get(&forged).await.unwrap();
    assert!(!f.metadata.labels.unwrap().contains_key(CHECKSUM_LABEL));

    // 2. A deleted node's instance loses the tags (one DeleteTags).
    nodes.delete(&names[0], &DeleteParams::default()).await.unwrap();
    eventually("the deleted node's instance is untagged", || async {
        tagged(&raw, &ids[..1], &key, "v1").await == 0
    })
    .await;
    assert_eq!(delete_tags(), 1);
    assert_eq!(tagged(&raw, &ids[1..], &key, "v1").await, NODES - 1);
    stop.send(()).unwrap();
    task.await.unwrap();

    // 3. Restarted with other tags: every remaining instance is retagged and relabelled.
    let v2 = [(key.as_str(), "v2"), ("env", "test")];
    let checksum2 = tags_checksum(
        &[
            (key.clone(), "v2".to_owned()),
            ("env".to_owned(), "test".to_owned()),
        ]
        .into(),
    );
    let before = create_tags();
    let (stop, task) = start(client.clone(), &adapter, &v2, &run, TaggingMetrics::default());
    eventually("all nodes are relabelled", || async {
        labelled(checksum2.clone()).await == NODES - 1
    })
    .await;
    assert_eq!(tagged(&raw, &ids[1..], &key, "v2").await, NODES - 1);
    assert_eq!(tagged(&raw, &ids[1..], "env", "test").await, NODES - 1);
    let calls = create_tags() - before;
    println!("CreateTags calls to retag {} nodes: {calls}", NODES - 1);
    assert!(calls <= 3, "{calls} CreateTags calls to retag");
    stop.send(()).unwrap();
    task.await.unwrap();

    for name in names.iter().skip(1).chain([&fargate, &forged]) {
        nodes.delete(name, &DeleteParams::default()).await.unwrap();
    }
}
