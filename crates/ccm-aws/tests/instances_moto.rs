//! `AwsInstances` (ccm-instances) over the real adapter against moto: instances named by ID, by private DNS name and by
//! provider ID; stop and terminate; the number of DescribeInstances calls per batch from the adapter's metrics.
//! (the test environment's moto answers DescribeInstanceTopology with no instance, as AWS does for these instance
//! types: the mocks in the unit tests cover instances with a topology.)
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::too_many_lines)]

use ccm_aws_api::VpcId;
use ccm_cloud_provider::{InstancesV2, NodeAddressType, NodeView};
use ccm_instances::{AwsInstances, InstancesConfig, ZONE_ID_LABEL};
use ccm_tagging::ClusterTags;
use ccm_testing::{TestEnv, ec2, fixtures::NodeBuilder, unique_name, world::World};

fn node(name: &str, provider_id: Option<&str>) -> NodeView {
    let node = NodeBuilder::new(name);
    provider_id.map_or(node.clone(), |id| node.provider_id(id)).view()
}

#[tokio::test]
async fn nodes_by_id_dns_name_and_provider_id_against_moto() {
    let env = TestEnv::get();
    let sdk = env.aws_config().await;
    let adapter = ccm_testing::ec2::adapter(&sdk, Some(2));
    let raw = aws_sdk_ec2::Client::new(&sdk);
    let cluster_id = unique_name("inst");
    let cluster = ClusterTags::new(&cluster_id, false).unwrap();

    let world = World::builder(78)
        .subnet("us-east-1a", &[])
        .instances(3, &[(&cluster.key(), "owned")])
        .build(&raw)
        .await
        .unwrap();
    let (vpc_id, launched) = (&world.vpc, &world.instances);
    let zone_id = ec2::zone_id(&raw, "us-east-1a").await.unwrap().unwrap();

    let config = InstancesConfig::new(env.aws_region.clone())
        .with_cluster(cluster)
        .with_vpc_id(VpcId::new(vpc_id));
    let instances = AwsInstances::new(adapter.ec2().clone(), config);
    let nodes = [
        node(&launched[0].id, None),
        node(&launched[1].private_dns, None),
        node(
            "named-anyhow",
            Some(&format!("aws:///us-east-1a/{}", launched[2].id)),
        ),
    ];
    let refs: Vec<&NodeView> = nodes.iter().collect();
    let describes = || adapter.metrics().attempts("ec2", "DescribeInstances");

    let before = describes();
    let metas = instances.instance_metadata_batch(&refs).await;
    // The DNS name is asked first. ministack ignores the `private-dns-name` filter (docs/testing.md, "Two
    // emulators") and answers every instance: the catalog keeps them as just read, and the two IDs are answered
    // from it, as a read within `RECENT_READ` of any reader is (AWS answers the one named instance).
    let expected = if env.emulator == ccm_testing::Emulator::Ministack {
        1
    } else {
        2
    };
    assert_eq!(
        describes() - before,
        expected,
        "one lookup by DNS name, one by ID (two nodes) unless the first answered them"
    );
    for (k, meta) in metas.into_iter().enumerate() {
        let meta = meta.unwrap().unwrap();
        let l = &launched[k];
        assert_eq!(meta.provider_id, format!("aws:///us-east-1a/{}", l.id));
        assert_eq!(meta.instance_type, "m5.large");
        assert_eq!(meta.zone, "us-east-1a");
        assert_eq!(meta.region, env.aws_region);
        assert_eq!(
            meta.additional_labels.get(ZONE_ID_LABEL),
            Some(&zone_id),
            "{meta:?}"
        );
        let of = |t: NodeAddressType| {
            meta.node_addresses
                .iter()
                .filter(|a| a.type_ == t)
                .map(|a| a.address.clone())
                .collect::<Vec<_>>()
        };
        assert_eq!(
            of(NodeAddressType::InternalIp),
            std::slice::from_ref(&l.private_ip)
        );
        assert_eq!(
            of(NodeAddressType::InternalDns),
            std::slice::from_ref(&l.private_dns)
        );
        assert_eq!(
            of(NodeAddressType::Hostname),
            std::slice::from_ref(&l.private_dns)
        );
    }

    // Stop one, terminate another.
    raw.stop_instances()
        .instance_ids(&launched[0].id)
        .send()
        .await
        .unwrap();
    raw.terminate_instances()
        .instance_ids(&launched[2].id)
        .send()
        .await
        .unwrap();
    let exists: Vec<bool> = instances
        .instance_exists_batch(&refs)
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect();
    assert_eq!(exists, [true, true, false]);
    let shutdown: Vec<bool> = instances
        .instance_shutdown_batch(&refs)
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect();
    assert_eq!(shutdown, [true, false, false]);

    // An unknown instance does not exist; started again, the stopped one is not shut down any more.
    let unknown = node("gone", Some("aws:///us-east-1a/i-0123456789abcdef0"));
    assert!(!instances.instance_exists(&unknown).await.unwrap());
    raw.start_instances()
        .instance_ids(&launched[0].id)
        .send()
        .await
        .unwrap();
    assert!(!instances.instance_shutdown(&nodes[0]).await.unwrap());
    // A foreign instance (no cluster tag) is not found by DNS name.
    let foreign = world.launch(1, &[]).await.unwrap();
    let foreign_dns = foreign[0].private_dns.clone();
    assert!(
        !instances
            .instance_exists(&node(&foreign_dns, None))
            .await
            .unwrap()
    );
    let err = instances
        .instance_metadata(&node(&foreign_dns, None))
        .await
        .unwrap_err();
    assert!(err.is_instance_not_found(), "{err}");
}
