//! End to end: a forged Node (one whose `spec.providerID` names an instance of another system, as anyone holding
//! a kubelet credential may create) steers nothing. The `aws-cloud-controller-manager` binary with a Classic ELB
//! and an NLB Service, routes and the tagging controller on, against moto and the real kube-apiserver: the
//! cluster's own instances are registered, opened to the load balancers, routed to and tagged, while the untagged
//! instance behind the forged Node and its own untagged security group are left exactly as they were; the Node
//! gets a Warning Event `InstanceNotInCluster` and `ccm_nodes_not_in_cluster` counts it.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::too_many_lines)]

mod common;

use std::collections::BTreeMap;

use aws_sdk_ec2::types::Filter;
use ccm_testing::{TestEnv, unique_name};
use common::{
    Ccm, World, eventually,
    lb::{Elb, lb_name, public_subnet, security_group, service},
    nlb::{self, Nlb},
};
use k8s_openapi::api::core::v1::{Event, Node, Service};
use kube::{
    Api,
    api::{ListParams, PostParams},
};
use serde_json::json;

/// What the controller could have changed on an instance: its tags, its source/destination check, and the
/// ingress rules of its security group.
async fn footprint(
    world: &World,
    instance: &str,
    group: &str,
) -> (BTreeMap<String, String>, Option<bool>, usize) {
    let raw = &world.raw;
    let tags = raw
        .describe_tags()
        .filters(Filter::builder().name("resource-id").values(instance).build())
        .send()
        .await
        .unwrap();
    let tags = tags
        .tags()
        .iter()
        .filter_map(|t| Some((t.key()?.to_owned(), t.value()?.to_owned())))
        .collect();
    let described = raw
        .describe_instances()
        .instance_ids(instance)
        .send()
        .await
        .unwrap();
    let check = described.reservations()[0].instances()[0].source_dest_check();
    let groups = raw
        .describe_security_groups()
        .group_ids(group)
        .send()
        .await
        .unwrap();
    let rules = groups.security_groups()[0].ip_permissions().len();
    (tags, check, rules)
}

async fn routes_to(world: &World, table: &str) -> Vec<String> {
    let out = world
        .raw
        .describe_route_tables()
        .route_table_ids(table)
        .send()
        .await
        .unwrap();
    let mut targets: Vec<String> = out
        .route_tables()
        .iter()
        .flat_map(|t| t.routes())
        .filter_map(|r| r.instance_id().map(str::to_owned))
        .collect();
    targets.sort();
    targets
}

#[tokio::test]
async fn e2e_a_forged_node_steers_nothing() {
    let env = TestEnv::get();
    let world = World::new("").await;
    public_subnet(&world).await;
    let table = world
        .raw
        .create_route_table()
        .vpc_id(&world.network.vpc)
        .tag_specifications(
            aws_sdk_ec2::types::TagSpecification::builder()
                .resource_type(aws_sdk_ec2::types::ResourceType::RouteTable)
                .tags(
                    aws_sdk_ec2::types::Tag::builder()
                        .key(world.cluster_key())
                        .value("owned")
                        .build(),
                )
                .build(),
        )
        .send()
        .await
        .unwrap()
        .route_table()
        .unwrap()
        .route_table_id()
        .unwrap()
        .to_owned();

    // The cluster's two instances, and a database's: untagged, in an untagged group of its own.
    let own = world.launch(2).await;
    let mut own_ids: Vec<String> = own.iter().map(|l| l.id.clone()).collect();
    own_ids.sort();
    for (k, l) in own.iter().enumerate() {
        world
            .register_node(&l.id, Some(&format!("10.244.{k}.0/24")))
            .await;
    }
    let db_group = security_group(&world, &unique_name("database"), None).await;
    let db = world
        .raw
        .run_instances()
        .image_id("ami-12c6146b")
        .instance_type(aws_sdk_ec2::types::InstanceType::M5Large)
        .min_count(1)
        .max_count(1)
        .subnet_id(world.network.subnet())
        .security_group_ids(&db_group)
        .send()
        .await
        .unwrap()
        .instances()[0]
        .instance_id()
        .unwrap()
        .to_owned();
    let before = footprint(&world, &db, &db_group).await;
    // The forged Node, as a kubelet credential can create it: any name, the database's provider ID, a pod CIDR.
    let forged = unique_name("forged");
    let node: Node = serde_json::from_value(json!({
        "metadata": { "name": forged, "labels": { "e2e-cluster": world.cluster_id } },
        "spec": {
            "providerID": format!("aws:///us-east-1a/{db}"),
            "podCIDR": "10.244.9.0/24",
            "taints": [{ "key": "node.cloudprovider.kubernetes.io/uninitialized", "value": "true", "effect": "NoSchedule" }],
        },
    }))
    .unwrap();
    world.nodes.create(&PostParams::default(), &node).await.unwrap();
    world.set_ready(&forged, "True").await;

    let client = env.kube_client().await.unwrap();
    let services: Api<Service> = Api::namespaced(client.clone(), "default");
    let events: Api<Event> = Api::namespaced(client, "default");
    let mut ccm = Ccm::start(
        &world,
        &[
            "--configure-cloud-routes=true",
            "--allocate-node-cidrs=true",
            "--cluster-cidr=10.244.0.0/16",
            "--route-reconciliation-period=2s",
            "--controllers=*,tagging",
            "--tags=team=e2e",
            "--resources=instance",
        ],
    );
    let classic = unique_name("clb");
    let created = services
        .create(
            &PostParams::default(),
            &service(&classic, &[80], &BTreeMap::new()),
        )
        .await
        .unwrap();
    let classic_lb = lb_name(created.metadata.uid.as_deref().unwrap());
    let network = unique_name("nlb");
    let created = services
        .create(
            &PostParams::default(),
            &nlb::service(&network, &[(443, "TCP")], &BTreeMap::new()),
        )
        .await
        .unwrap();
    let network_lb = lb_name(created.metadata.uid.as_deref().unwrap());

    // The cluster's own instances are served by everything.
    let elb = Elb(aws_sdk_elasticloadbalancing::Client::new(&env.aws_config().await));
    let nlbs = Nlb::connect().await;
    eventually(
        &mut ccm,
        "the CLB targets the cluster's instances",
        90,
        async || elb.instances(&classic_lb).await == own_ids,
    )
    .await;
    eventually(
        &mut ccm,
        "the NLB targets the cluster's instances",
        90,
        async || {
            let Some(lb) = nlbs.describe(&network_lb).await else {
                return false;
            };
            let tgs = nlbs.target_groups(lb.load_balancer_arn().unwrap()).await;
            match tgs.first() {
                Some(tg) => nlbs.targets(tg.target_group_arn().unwrap()).await == own_ids,
                None => false,
            }
        },
    )
    .await;
    eventually(&mut ccm, "routes to the cluster's instances", 60, async || {
        routes_to(&world, &table).await == own_ids
    })
    .await;
    let raw = world.raw.clone();
    eventually(&mut ccm, "the cluster's instances tagged", 60, async || {
        let out = raw
            .describe_tags()
            .filters(Filter::builder().name("key").values("team").build())
            .filters(
                Filter::builder()
                    .name("resource-id")
                    .values(&own_ids[0])
                    .values(&own_ids[1])
                    .build(),
            )
            .send()
            .await
            .unwrap();
        out.tags().len() == 2
    })
    .await;

    // The forged Node is reported, and nothing of the database changed.
    let ev = events.clone();
    eventually(&mut ccm, "a Warning Event on the forged Node", 30, async || {
        let lp = ListParams::default().fields(&format!("involvedObject.name={forged}"));
        ev.list(&lp).await.unwrap().items.iter().any(|e| {
            e.type_.as_deref() == Some("Warning")
                && e.reason.as_deref() == Some("InstanceNotInCluster")
                && e.message
                    .as_deref()
                    .is_some_and(|m| m.contains(&db) && m.contains(&world.cluster_key()))
        })
    })
    .await;
    assert_eq!(ccm.sample("ccm_nodes_not_in_cluster", &[]).await, Some(1.0));
    // A full resync of routes and load balancers has passed with the forged Node in the node set.
    tokio::time::sleep(std::time::Duration::from_secs(5)).await;
    assert_eq!(
        footprint(&world, &db, &db_group).await,
        before,
        "the database is untouched"
    );
    assert_eq!(
        routes_to(&world, &table).await,
        own_ids,
        "no route to the database"
    );
    assert_eq!(elb.instances(&classic_lb).await, own_ids);

    for name in [&classic, &network] {
        services.delete(name, &Default::default()).await.unwrap();
    }
    let svcs = services.clone();
    eventually(
        &mut ccm,
        "both Services gone (finalizers removed)",
        90,
        async || {
            svcs.get_opt(&classic).await.unwrap().is_none() && svcs.get_opt(&network).await.unwrap().is_none()
        },
    )
    .await;
    assert!(ccm.terminate().await.success(), "{}", ccm.log_text());
    world.cleanup().await;
}
