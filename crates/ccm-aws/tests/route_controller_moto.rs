//! The generic route controller (`ccm-controllers`) driving `AwsRoutes` against the real kube-apiserver and moto:
//! Nodes with pod CIDRs get routes to their instances in both tables tagged for the cluster and
//! `NetworkUnavailable=False`; a deleted Node's route is removed; another cluster's table stays untouched; a steady
//! pass costs one `DescribeRouteTables` and nothing else. Node names are not DNS names, so the instance-to-Node
//! mapping comes from a `NodeIndex` (the wiring the composition uses).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::too_many_lines)]

use std::{sync::Arc, time::Duration};

use ccm_aws_api::VpcId;
use ccm_aws_sdk::AwsEc2;
use ccm_cloud_provider::{CloudProvider, Unsupported};
use ccm_controllers::route::{self, RouteConfig};
use ccm_routes::{AwsRoutes, NodeIndex, RoutesConfig};
use ccm_tagging::ClusterTags;
use ccm_testing::{TestEnv, unique_name, world::World};
use k8s_openapi::{
    api::core::v1::{Node, NodeSpec},
    apimachinery::pkg::apis::meta::v1::ObjectMeta,
};
use kube::{
    Api,
    api::{DeleteParams, PostParams},
};

const SELECTOR_KEY: &str = "ccm-test/routes";

struct Provider(AwsRoutes<AwsEc2, NodeIndex>);

impl CloudProvider for Provider {
    type InstancesV2 = Unsupported;
    type Instances = Unsupported;
    type Zones = Unsupported;
    type LoadBalancer = Unsupported;
    type Routes = AwsRoutes<AwsEc2, NodeIndex>;

    fn provider_name(&self) -> &str {
        "aws"
    }

    fn routes(&self) -> Option<&Self::Routes> {
        Some(&self.0)
    }
}

async fn eventually<F, Fut>(what: &str, f: F)
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    for _ in 0..300 {
        if f().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    panic!("timed out waiting until {what}");
}

/// `(ID, private DNS name)` of `count` new instances in `world`, tagged `<key>=owned`.
async fn launch(world: &World, key: &str, count: i32) -> Vec<(String, String)> {
    world
        .launch(count, &[(key, "owned")])
        .await
        .unwrap()
        .into_iter()
        .map(|l| (l.id, l.private_dns))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn route_controller_keeps_routes_in_every_tagged_table() {
    let env = TestEnv::get();
    let sdk = env.aws_config().await;
    let adapter = ccm_testing::ec2::adapter(&sdk, None);
    let raw = aws_sdk_ec2::Client::new(&sdk);
    let client = env.kube_client().await.unwrap();
    let nodes: Api<Node> = Api::all(client.clone());
    let run = unique_name("routes-rc");
    let cluster = ClusterTags::new(&run, false).unwrap();
    let other = ClusterTags::new(unique_name("routes-rc-other"), false).unwrap();

    let world = World::builder(83)
        .subnet("us-east-1a", &[])
        .build(&raw)
        .await
        .unwrap();
    let ids: Vec<String> = launch(&world, &cluster.key(), 3)
        .await
        .into_iter()
        .map(|(id, _)| id)
        .collect();
    let mut tables = Vec::new();
    for (key, value) in [
        (cluster.key(), "owned"),
        (cluster.key(), "shared"),
        (other.key(), "owned"),
    ] {
        tables.push(world.route_table(&[(&key, value)]).await.unwrap());
    }
    // The other cluster routes a CIDR inside our cluster CIDR: never ours to delete.
    raw.create_route()
        .route_table_id(&tables[2])
        .destination_cidr_block("10.244.200.0/24")
        .instance_id(&ids[0])
        .send()
        .await
        .unwrap();

    let names: Vec<String> = (0..3).map(|n| format!("{run}-n{n}")).collect();
    let index = NodeIndex::new();
    for (n, (name, id)) in names.iter().zip(&ids).enumerate() {
        let provider_id = format!("aws:///us-east-1a/{id}");
        let cidr = format!("10.244.{n}.0/24");
        nodes
            .create(
                &PostParams::default(),
                &Node {
                    metadata: ObjectMeta {
                        name: Some(name.clone()),
                        labels: Some([(SELECTOR_KEY.to_owned(), run.clone())].into()),
                        ..ObjectMeta::default()
                    },
                    spec: Some(NodeSpec {
                        provider_id: Some(provider_id.clone()),
                        pod_cidr: Some(cidr.clone()),
                        pod_cidrs: Some(vec![cidr]),
                        ..NodeSpec::default()
                    }),
                    status: None,
                },
            )
            .await
            .unwrap();
        index.upsert(name, Some(&provider_id));
    }

    let routes = AwsRoutes::new(
        adapter.ec2().clone(),
        RoutesConfig::new(cluster).with_vpc_id(VpcId::new(&world.vpc)),
    )
    .with_node_names(index.clone());
    let mut config = RouteConfig::new("k", "10.244.0.0/16").unwrap();
    config.route_reconciliation_period = Duration::from_millis(500);
    config.node_selector = Some(format!("{SELECTOR_KEY}={run}"));
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let controller = tokio::spawn(route::run(
        client.clone(),
        Arc::new(Provider(routes)),
        config,
        async move {
            let _ = stopped.await;
        },
    ));

    let expected: Vec<(String, String)> = ids
        .iter()
        .enumerate()
        .map(|(n, id)| (format!("10.244.{n}.0/24"), id.clone()))
        .collect();
    eventually("every node has its route in both tables", || async {
        world.table_routes(&tables[0]).await.unwrap() == expected
            && world.table_routes(&tables[1]).await.unwrap() == expected
    })
    .await;
    eventually("every node is NetworkUnavailable=False", || async {
        let mut all = true;
        for name in &names {
            let node = nodes.get_status(name).await.unwrap();
            let ok = node
                .status
                .and_then(|s| s.conditions)
                .unwrap_or_default()
                .iter()
                .any(|c| {
                    c.type_ == "NetworkUnavailable"
                        && c.status == "False"
                        && c.reason.as_deref() == Some("RouteCreated")
                });
            all &= ok;
        }
        all
    })
    .await;
    for id in &ids {
        let attr = raw
            .describe_instance_attribute()
            .instance_id(id)
            .attribute(aws_sdk_ec2::types::InstanceAttributeName::SourceDestCheck)
            .send()
            .await
            .unwrap();
        assert_eq!(
            attr.source_dest_check().and_then(|v| v.value()),
            Some(false),
            "{id}"
        );
    }

    // Steady state: passes cost one DescribeRouteTables each, nothing else.
    let m = adapter.metrics();
    let count = |op: &str| m.attempts("ec2", op);
    let ops = [
        "DescribeRouteTables",
        "DescribeInstances",
        "ModifyInstanceAttribute",
        "CreateRoute",
        "DeleteRoute",
    ];
    let before: Vec<u64> = ops.iter().map(|o| count(o)).collect();
    tokio::time::sleep(Duration::from_millis(2600)).await;
    let delta: Vec<u64> = ops.iter().zip(&before).map(|(o, b)| count(o) - b).collect();
    println!("steady passes over 2.6 s: {delta:?} ({ops:?})");
    assert!(delta[0] >= 2, "passes ran: {delta:?}");
    assert_eq!(
        delta[1..],
        [0, 0, 0, 0],
        "a steady pass is DescribeRouteTables only"
    );

    // A deleted node's route goes from both tables (its instance is still running: the index forgets the node,
    // the fallback names the instance by its DNS name, which is no Node's, so the controller deletes the route).
    nodes.delete(&names[0], &DeleteParams::default()).await.unwrap();
    index.remove(&names[0]);
    eventually("the deleted node's route is gone", || async {
        world.table_routes(&tables[0]).await.unwrap() == expected[1..]
            && world.table_routes(&tables[1]).await.unwrap() == expected[1..]
    })
    .await;
    assert_eq!(
        world.table_routes(&tables[2]).await.unwrap(),
        vec![("10.244.200.0/24".to_owned(), ids[0].clone())],
        "the other cluster's table is untouched"
    );

    stop.send(()).unwrap();
    controller.await.unwrap().unwrap();
    for name in &names[1..] {
        nodes.delete(name, &DeleteParams::default()).await.unwrap();
    }
}
