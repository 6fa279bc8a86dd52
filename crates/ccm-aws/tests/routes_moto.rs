//! `AwsRoutes` (ccm-routes) over the real adapter against moto: two route tables tagged for a unique cluster, one of another
//! cluster and one untagged (both must stay untouched); create, list, fill-in of a missing table, conflicts,
//! delete; the source/destination check (DescribeInstanceAttribute); AWS calls counted from the adapter's
//! metrics; IPv6 pod routes of a dual-stack node next to its IPv4 ones. (moto never marks routes as blackholes:
//! blackhole replacement is covered by the unit tests.)
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::too_many_lines)]

use aws_sdk_ec2::types::InstanceAttributeName;
use ccm_aws_api::VpcId;
use ccm_aws_sdk::Adapter;
use ccm_cloud_provider::{Route, Routes};
use ccm_routes::{AwsRoutes, RoutesConfig, RoutesError};
use ccm_tagging::ClusterTags;
use ccm_testing::{TestEnv, unique_name, world::World};

/// The adapter (no rate limits, quick retries) and a raw EC2 client, both on moto.
async fn clients() -> (Adapter, aws_sdk_ec2::Client) {
    let sdk = TestEnv::get().aws_config().await;
    let adapter = ccm_testing::ec2::adapter(&sdk, Some(2));
    (adapter, aws_sdk_ec2::Client::new(&sdk))
}

fn route(node: &str, cidr: &str) -> Route {
    Route {
        target_node: node.to_owned(),
        destination_cidr: cidr.to_owned(),
        ..Route::default()
    }
}

async fn source_dest_check(raw: &aws_sdk_ec2::Client, instance: &str) -> Option<bool> {
    raw.describe_instance_attribute()
        .instance_id(instance)
        .attribute(InstanceAttributeName::SourceDestCheck)
        .send()
        .await
        .unwrap()
        .source_dest_check()
        .and_then(|v| v.value())
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

#[tokio::test]
async fn routes_in_tagged_tables_against_moto() {
    let (adapter, raw) = clients().await;
    let cluster_id = unique_name("routes");
    let cluster = ClusterTags::new(&cluster_id, false).unwrap();
    let other_cluster = ClusterTags::new(unique_name("routes-other"), false).unwrap();

    let world = World::builder(79)
        .subnet("us-east-1a", &[])
        .build(&raw)
        .await
        .unwrap();
    let ours = launch(&world, &cluster.key(), 2).await;
    let foreign = launch(&world, &other_cluster.key(), 1).await.remove(0).0;
    let table_a = world.route_table(&[(&cluster.key(), "owned")]).await.unwrap();
    let table_b = world.route_table(&[(&cluster.key(), "shared")]).await.unwrap();
    let table_other = world
        .route_table(&[(&other_cluster.key(), "owned")])
        .await
        .unwrap();
    let table_untagged = world.route_table(&[]).await.unwrap();
    for (table, cidr) in [
        (&table_other, "10.244.0.0/24"),
        (&table_untagged, "10.244.1.0/24"),
    ] {
        raw.create_route()
            .route_table_id(table)
            .destination_cidr_block(cidr)
            .instance_id(&foreign)
            .send()
            .await
            .unwrap();
    }
    // A route to a foreign instance in our table: never reported, never replaced.
    raw.create_route()
        .route_table_id(&table_a)
        .destination_cidr_block("10.244.99.0/24")
        .instance_id(&foreign)
        .send()
        .await
        .unwrap();
    let untouched = [
        (
            table_other.clone(),
            world.table_routes(&table_other).await.unwrap(),
        ),
        (
            table_untagged.clone(),
            world.table_routes(&table_untagged).await.unwrap(),
        ),
    ];

    let routes = AwsRoutes::new(
        adapter.ec2().clone(),
        RoutesConfig::new(cluster).with_vpc_id(VpcId::new(&world.vpc)),
    );
    let m = adapter.metrics();
    let count = |op: &str| m.attempts("ec2", op);
    let calls = |ops: &[&str]| ops.iter().map(|op| count(op)).collect::<Vec<u64>>();
    let ops = [
        "DescribeRouteTables",
        "DescribeInstances",
        "ModifyInstanceAttribute",
        "CreateRoute",
        "ReplaceRoute",
        "DeleteRoute",
    ];

    assert!(routes.list_routes("k").await.unwrap().is_empty());

    // Create: one route by private DNS name, one by an instance-ID node name with a domain.
    assert_eq!(source_dest_check(&raw, &ours[0].0).await, Some(true));
    let before = calls(&ops);
    routes
        .create_route("k", "uid-0", &route(&ours[0].1, "10.244.10.0/24"))
        .await
        .unwrap();
    routes
        .create_route(
            "k",
            "uid-1",
            &route(&format!("{}.ec2.internal", ours[1].0), "10.244.11.0/24"),
        )
        .await
        .unwrap();
    // A second CIDR for the first node: no second ModifyInstanceAttribute.
    routes
        .create_route("k", "uid-0", &route(&ours[0].1, "10.244.12.0/24"))
        .await
        .unwrap();
    let after = calls(&ops);
    let delta: Vec<u64> = after.iter().zip(&before).map(|(a, b)| a - b).collect();
    assert_eq!(
        delta,
        vec![0, 2, 2, 6, 0, 0],
        "tables reused from the list; DescribeInstances by DNS name for the two creates named so; \
         ModifyInstanceAttribute once per instance; 3 routes x 2 tables"
    );
    for (id, _) in &ours {
        assert_eq!(source_dest_check(&raw, id).await, Some(false), "{id}");
    }
    let expected = vec![
        ("10.244.10.0/24".to_owned(), ours[0].0.clone()),
        ("10.244.11.0/24".to_owned(), ours[1].0.clone()),
        ("10.244.12.0/24".to_owned(), ours[0].0.clone()),
    ];
    assert_eq!(world.table_routes(&table_b).await.unwrap(), expected);
    let mut with_foreign = expected.clone();
    with_foreign.push(("10.244.99.0/24".to_owned(), foreign.clone()));
    assert_eq!(world.table_routes(&table_a).await.unwrap(), with_foreign);

    // List: one DescribeRouteTables and one DescribeInstances; the next list only the former (names are
    // remembered, the foreign instance is described again since it has no name).
    let before = calls(&ops);
    let mut listed = routes.list_routes("k").await.unwrap();
    listed.sort_by(|a, b| a.destination_cidr.cmp(&b.destination_cidr));
    let summary: Vec<(&str, &str, &str)> = listed
        .iter()
        .map(|r| {
            (
                r.name.as_str(),
                r.destination_cidr.as_str(),
                r.target_node.as_str(),
            )
        })
        .collect();
    assert_eq!(
        summary,
        vec![
            ("k-10.244.10.0/24", "10.244.10.0/24", ours[0].1.as_str()),
            ("k-10.244.11.0/24", "10.244.11.0/24", ours[1].1.as_str()),
            ("k-10.244.12.0/24", "10.244.12.0/24", ours[0].1.as_str()),
        ]
    );
    assert_eq!(
        calls(&ops)[..2],
        [before[0] + 1, before[1] + 1],
        "one DescribeRouteTables, one DescribeInstances"
    );
    routes.list_routes("k").await.unwrap();
    assert_eq!(calls(&ops)[0], before[0] + 2);

    // A route missing from one table is reported absent; creating it fills in that table only.
    raw.delete_route()
        .route_table_id(&table_b)
        .destination_cidr_block("10.244.11.0/24")
        .send()
        .await
        .unwrap();
    let listed = routes.list_routes("k").await.unwrap();
    assert!(!listed.iter().any(|r| r.destination_cidr == "10.244.11.0/24"));
    let before = calls(&ops);
    routes
        .create_route("k", "uid-1", &route(&ours[1].0, "10.244.11.0/24"))
        .await
        .unwrap();
    assert_eq!(calls(&ops)[3], before[3] + 1, "one CreateRoute, in table B");
    assert_eq!(world.table_routes(&table_b).await.unwrap(), expected);

    // The foreign instance's route for a CIDR is a conflict, left alone.
    let err = routes
        .create_route("k", "uid-0", &route(&ours[0].1, "10.244.99.0/24"))
        .await
        .unwrap_err();
    assert!(err.to_string().contains(&foreign), "{err}");
    assert!(
        world
            .table_routes(&table_a)
            .await
            .unwrap()
            .contains(&("10.244.99.0/24".to_owned(), foreign.clone()))
    );

    // Delete: gone from both tables; deleting again is a no-op.
    let listed = routes.list_routes("k").await.unwrap();
    let ten = listed
        .iter()
        .find(|r| r.destination_cidr == "10.244.10.0/24")
        .unwrap();
    routes.delete_route("k", ten).await.unwrap();
    routes.delete_route("k", ten).await.unwrap();
    for table in [&table_a, &table_b] {
        assert!(
            !world
                .table_routes(table)
                .await
                .unwrap()
                .iter()
                .any(|(c, _)| c == "10.244.10.0/24")
        );
    }

    // A node name that matches no instance of the cluster.
    let err = routes
        .create("k", &route("ip-10-79-9-9.ec2.internal", "10.244.13.0/24"))
        .await
        .unwrap_err();
    assert!(matches!(err, RoutesError::InstanceNotFound { .. }), "{err}");

    for (table, routes) in untouched {
        assert_eq!(
            world.table_routes(&table).await.unwrap(),
            routes,
            "{table} untouched"
        );
    }
}

#[tokio::test]
async fn ipv6_pod_routes_of_a_dual_stack_node_against_moto() {
    let (adapter, raw) = clients().await;
    let cluster = ClusterTags::new(unique_name("routes6"), false).unwrap();
    let world = World::builder(78)
        .subnet("us-east-1a", &[])
        .build(&raw)
        .await
        .unwrap();
    let (instance, node) = launch(&world, &cluster.key(), 1).await.remove(0);
    let table = world.route_table(&[(&cluster.key(), "owned")]).await.unwrap();
    let routes = AwsRoutes::new(
        adapter.ec2().clone(),
        RoutesConfig::new(cluster).with_vpc_id(VpcId::new(&world.vpc)),
    );

    // A dual-stack node's two pod CIDRs: both routed to its instance, each in AWS's field for its family.
    for cidr in ["10.244.20.0/24", "fd00:10:244:20::/64"] {
        routes
            .create_route("k", "uid-0", &route(&node, cidr))
            .await
            .unwrap();
    }
    assert_eq!(
        world.table_routes(&table).await.unwrap(),
        [
            ("10.244.20.0/24".to_owned(), instance.clone()),
            ("fd00:10:244:20::/64".to_owned(), instance.clone()),
        ]
    );
    let mut listed: Vec<(String, String, String)> = routes
        .list_routes("k")
        .await
        .unwrap()
        .into_iter()
        .map(|r| (r.name, r.destination_cidr, r.target_node))
        .collect();
    listed.sort();
    assert_eq!(
        listed,
        [
            (
                "k-10.244.20.0/24".to_owned(),
                "10.244.20.0/24".to_owned(),
                node.clone()
            ),
            (
                "k-fd00:10:244:20::/64".to_owned(),
                "fd00:10:244:20::/64".to_owned(),
                node.clone()
            ),
        ]
    );
    // Creating it again changes nothing; deleting the IPv6 route leaves the IPv4 one.
    routes
        .create_route("k", "uid-0", &route(&node, "fd00:10:244:20::/64"))
        .await
        .unwrap();
    let v6 = routes
        .list_routes("k")
        .await
        .unwrap()
        .into_iter()
        .find(|r| r.destination_cidr.contains(':'))
        .unwrap();
    routes.delete_route("k", &v6).await.unwrap();
    assert_eq!(
        world.table_routes(&table).await.unwrap(),
        [("10.244.20.0/24".to_owned(), instance.clone())]
    );
}
