use std::{
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use ccm_aws_api::{
    AwsError, ErrorKind, Filter, NetworkInterfaceId, Tags,
    ec2::{AvailabilityZone, Instance, InstanceNetworkInterface, InstanceTopology, MockEc2},
};
use ccm_cloud_provider::{NodeAddress, NodeAddressType};

use super::*;
use crate::UNSUPPORTED_TTL;

pub(super) const REGION: &str = "us-west-2";

pub(super) fn node(name: &str, provider_id: Option<&str>, labels: &[(&str, &str)]) -> NodeView {
    let mut node = NodeView::named(name);
    node.provider_id = provider_id.map(str::to_owned);
    node.labels = labels.iter().copied().collect();
    node
}

pub(super) fn instance(id: &str, state: InstanceState, instance_type: &str) -> Instance {
    let mut i = Instance::new(InstanceId::new(id), state);
    i.instance_type = instance_type.to_owned();
    i.availability_zone = Some("us-west-2a".into());
    i.private_ip = Some("192.168.0.1".into());
    i.private_dns_name = Some(format!("ip-{id}.ec2.internal"));
    let mut eni = InstanceNetworkInterface::new(NetworkInterfaceId::new(format!("eni-{id}")), Some(0));
    eni.private_ips = vec!["192.168.0.1".into()];
    i.network_interfaces = vec![eni];
    i
}

pub(super) fn ok<T: Send + 'static>(
    value: T,
) -> std::pin::Pin<Box<dyn Future<Output = ccm_aws_api::Result<T>> + Send>> {
    Box::pin(async move { Ok(value) })
}

fn aws_err(kind: ErrorKind, op: &'static str, code: &str) -> AwsError {
    AwsError::new(kind, "ec2", op).with_code(code)
}

fn zones(ec2: &mut MockEc2) {
    ec2.expect_availability_zones().returning(|| {
        ok(vec![
            AvailabilityZone::new("us-west-2a", "usw2-az1", "availability-zone", REGION),
            AvailabilityZone::new("us-west-2b", "usw2-az2", "availability-zone", REGION),
        ])
    });
}

/// A mock answering `instances_by_id` from `known`, counting calls.
fn by_id(ec2: &mut MockEc2, known: Vec<Instance>) -> Arc<AtomicUsize> {
    let calls = Arc::new(AtomicUsize::new(0));
    let counter = calls.clone();
    ec2.expect_instances_by_id().returning(move |ids| {
        counter.fetch_add(1, Ordering::SeqCst);
        assert!(ids.len() <= IDS_PER_LOOKUP, "{} IDs in one lookup", ids.len());
        ok(known.iter().filter(|i| ids.contains(&i.id)).cloned().collect())
    });
    calls
}

fn no_topology(ec2: &mut MockEc2) {
    ec2.expect_instance_topology().returning(|_| ok(Vec::new()));
}

fn aws(ec2: MockEc2) -> AwsInstances<MockEc2> {
    AwsInstances::new(ec2, InstancesConfig::new(REGION))
}

fn label_map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

#[tokio::test]
async fn metadata_by_provider_id_keeps_it_and_reports_everything() {
    let mut ec2 = MockEc2::new();
    let mut i = instance("i-self", InstanceState::Running, "p4d.24xlarge");
    i.public_ip = Some("1.2.3.4".into());
    i.private_dns_name = Some("ip-172-20-0-100.ec2.internal".into());
    by_id(&mut ec2, vec![i]);
    zones(&mut ec2);
    ec2.expect_instance_topology()
        .withf(|ids| ids == [InstanceId::new("i-self")])
        .times(1)
        .returning(|ids| {
            ok(vec![InstanceTopology::new(
                ids[0].clone(),
                "p4d.24xlarge",
                vec!["nn-a".into(), "nn-b".into(), "nn-c".into()],
            )])
        });
    let aws = aws(ec2);
    let n = node("ip-172-20-0-100.ec2.internal", Some("aws:////i-self"), &[]);
    let meta = aws.instance_metadata(&n).await.unwrap().unwrap();
    assert_eq!(
        meta,
        InstanceMetadata {
            provider_id: "aws:////i-self".into(),
            instance_type: "p4d.24xlarge".into(),
            node_addresses: vec![
                NodeAddress::new(NodeAddressType::InternalIp, "192.168.0.1"),
                NodeAddress::new(NodeAddressType::ExternalIp, "1.2.3.4"),
                NodeAddress::new(NodeAddressType::InternalDns, "ip-172-20-0-100.ec2.internal"),
                NodeAddress::new(NodeAddressType::Hostname, "ip-172-20-0-100.ec2.internal"),
            ],
            zone: "us-west-2a".into(),
            region: REGION.into(),
            additional_labels: label_map(&[
                ("topology.k8s.aws/network-node-layer-1", "nn-a"),
                ("topology.k8s.aws/network-node-layer-2", "nn-b"),
                ("topology.k8s.aws/network-node-layer-3", "nn-c"),
                ("topology.k8s.aws/zone-id", "usw2-az1"),
            ]),
            not_in_cluster: None,
        }
    );
}

#[tokio::test]
async fn metadata_says_when_the_instance_lacks_the_cluster_tag() {
    let mut ec2 = MockEc2::new();
    let mut own = instance("i-own", InstanceState::Running, "m5.large");
    own.tags
        .insert("kubernetes.io/cluster/prod".into(), "shared".into());
    by_id(
        &mut ec2,
        vec![own, instance("i-db", InstanceState::Running, "m5.large")],
    );
    zones(&mut ec2);
    no_topology(&mut ec2);
    let cluster = ClusterTags::new("prod", false).unwrap();
    let aws = AwsInstances::new(ec2, InstancesConfig::new(REGION).with_cluster(cluster));
    let nodes = [
        node("own", Some("aws:///us-west-2a/i-own"), &[]),
        node("forged", Some("aws:///us-west-2a/i-db"), &[]),
    ];
    let refs: Vec<&NodeView> = nodes.iter().collect();
    let out = aws.metadata(&refs).await;
    let own = out[0].as_ref().unwrap().as_ref().unwrap();
    assert_eq!(own.not_in_cluster, None);
    let forged = out[1].as_ref().unwrap().as_ref().unwrap();
    let why = forged.not_in_cluster.as_deref().unwrap();
    assert!(
        why.starts_with("instance i-db carries neither the tag kubernetes.io/cluster/prod"),
        "{why}"
    );
    assert!(why.ends_with(crate::NOT_IN_CLUSTER_CONSEQUENCE), "{why}");
    assert_eq!(forged.instance_type, "m5.large", "still read");
}

#[tokio::test]
async fn metadata_by_instance_id_name_produces_the_upstream_provider_id() {
    for name in ["i-0abc", "i-0abc.us-west-2.compute.internal"] {
        let mut ec2 = MockEc2::new();
        let calls = by_id(
            &mut ec2,
            vec![instance("i-0abc", InstanceState::Running, "m5.large")],
        );
        zones(&mut ec2);
        no_topology(&mut ec2);
        let meta = aws(ec2)
            .instance_metadata(&node(name, None, &[]))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(meta.provider_id, "aws:///us-west-2a/i-0abc", "{name}");
        assert_eq!(meta.instance_type, "m5.large");
        assert_eq!(calls.load(Ordering::SeqCst), 1);
    }
}

#[tokio::test]
async fn metadata_by_private_dns_name_filters_live_cluster_instances() {
    let cluster = ClusterTags::new("kube", false).unwrap();
    let tagged = |id: &str, dns: &str| {
        let mut i = instance(id, InstanceState::Running, "m5.large");
        i.private_dns_name = Some(dns.into());
        i.tags = Tags::from([(cluster.key(), "owned".to_owned())]);
        i
    };
    let mut foreign = instance("i-foreign", InstanceState::Running, "m5.large");
    foreign.private_dns_name = Some("ip-10-0-0-1.ec2.internal".into());
    let answer = vec![
        tagged("i-one", "ip-10-0-0-1.ec2.internal"),
        foreign,
        tagged("i-two", "ip-10-0-0-2.ec2.internal"),
        tagged("i-dup", "ip-10-0-0-2.ec2.internal"),
    ];
    let mut ec2 = MockEc2::new();
    ec2.expect_instances()
        .withf(|filters| {
            filters.len() == 2
                && filters[0]
                    == Filter::new(
                        "private-dns-name",
                        [
                            "ip-10-0-0-1.ec2.internal",
                            "ip-10-0-0-2.ec2.internal",
                            "ip-10-0-0-3.ec2.internal",
                        ],
                    )
                && filters[1]
                    == Filter::new(
                        "instance-state-name",
                        ["pending", "running", "shutting-down", "stopping", "stopped"],
                    )
        })
        .times(1)
        .returning(move |_| ok(answer.clone()));
    zones(&mut ec2);
    no_topology(&mut ec2);
    let aws = AwsInstances::new(ec2, InstancesConfig::new(REGION).with_cluster(cluster));
    let nodes = [
        node("ip-10-0-0-1.ec2.internal", None, &[]),
        node("ip-10-0-0-2.ec2.internal", None, &[]),
        node("ip-10-0-0-3.ec2.internal", None, &[]),
    ];
    let refs: Vec<&NodeView> = nodes.iter().collect();
    let out = aws.metadata(&refs).await;
    assert_eq!(
        out[0].as_ref().unwrap().as_ref().unwrap().provider_id,
        "aws:///us-west-2a/i-one"
    );
    let err = out[1].as_ref().unwrap_err().to_string();
    assert!(
        err.contains("multiple instances found") && err.contains("i-two") && err.contains("i-dup"),
        "{err}"
    );
    assert!(matches!(out[2], Err(InstancesError::InstanceNotFound { .. })));
    let cloud: CloudError = out.into_iter().nth(2).unwrap().unwrap_err().into();
    assert!(cloud.is_instance_not_found());
}

#[tokio::test]
async fn metadata_of_a_missing_or_terminated_instance_is_instance_not_found() {
    let mut ec2 = MockEc2::new();
    by_id(
        &mut ec2,
        vec![instance("i-gone", InstanceState::Terminated, "m5.large")],
    );
    let aws = aws(ec2);
    for id in ["aws:///us-west-2a/i-gone", "aws:///us-west-2a/i-never"] {
        let err = aws
            .instance_metadata(&node("n", Some(id), &[]))
            .await
            .unwrap_err();
        assert!(err.is_instance_not_found(), "{id}: {err}");
    }
}

#[tokio::test]
async fn exists_is_false_only_when_terminated_or_not_found() {
    let states = [
        (InstanceState::Pending, true),
        (InstanceState::Running, true),
        (InstanceState::ShuttingDown, true),
        (InstanceState::Stopping, true),
        (InstanceState::Stopped, true),
        (InstanceState::Unknown(String::new()), true),
        (InstanceState::Terminated, false),
    ];
    let known: Vec<Instance> = states
        .iter()
        .enumerate()
        .map(|(n, (s, _))| instance(&format!("i-{n:08}"), s.clone(), "m5.large"))
        .collect();
    let mut ec2 = MockEc2::new();
    let calls = by_id(&mut ec2, known);
    let aws = aws(ec2);
    let mut nodes: Vec<NodeView> = (0..states.len())
        .map(|n| {
            node(
                &format!("node-{n}"),
                Some(&format!("aws:///us-west-2a/i-{n:08}")),
                &[],
            )
        })
        .collect();
    nodes.push(node("gone", Some("aws:///us-west-2a/i-0000ffff"), &[]));
    let refs: Vec<&NodeView> = nodes.iter().collect();
    let out = aws.instance_exists_batch(&refs).await;
    let want: Vec<bool> = states.iter().map(|(_, e)| *e).chain([false]).collect();
    let got: Vec<bool> = out.into_iter().map(Result::unwrap).collect();
    assert_eq!(got, want);
    assert_eq!(calls.load(Ordering::SeqCst), 1, "one lookup for the whole batch");
}

#[tokio::test]
async fn exists_never_says_false_on_errors_or_bad_provider_ids() {
    let mut ec2 = MockEc2::new();
    ec2.expect_instances_by_id().times(1).returning(|_| {
        Box::pin(async {
            Err(
                aws_err(ErrorKind::Throttled, "DescribeInstances", "RequestLimitExceeded")
                    .with_retry_after(Duration::from_secs(3)),
            )
        })
    });
    let aws = aws(ec2);
    let err = aws
        .instance_exists(&node("n", Some("aws:///us-west-2a/i-00000001"), &[]))
        .await
        .unwrap_err();
    assert_eq!(err.retry_delay(), Some(Duration::from_secs(3)), "{err}");
    assert!(
        err.to_string()
            .contains("failed to get instance by ID i-00000001"),
        "{err}"
    );
    // A malformed instance ID is refused before any lookup (EC2 would answer InvalidInstanceID.Malformed,
    // which the ID lookup reads as unknown, i.e. gone); the mock allows the one call above only.
    for bad in ["i-missing", "i-123", "i-0123456789ABCDEF0", "i-0123456789abcdef"] {
        let err = aws
            .instance_exists(&node("n", Some(&format!("aws:///us-west-2a/{bad}")), &[]))
            .await
            .unwrap_err();
        assert!(err.to_string().contains(bad), "{err}");
    }
    let err = aws
        .instance_exists(&node("n", Some("aws:///us-west-2a/vol-1"), &[]))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("\"aws:///us-west-2a/vol-1\""), "{err}");
    let err = aws
        .instance_shutdown(&node("n", Some("gce://p/z/i"), &[]))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("scheme"), "{err}");
}

#[tokio::test]
async fn shutdown_is_true_when_stopped_or_stopping() {
    let states = [
        (InstanceState::Pending, false),
        (InstanceState::Running, false),
        (InstanceState::ShuttingDown, false),
        (InstanceState::Stopping, true),
        (InstanceState::Stopped, true),
        (InstanceState::Terminated, false),
    ];
    let known: Vec<Instance> = states
        .iter()
        .enumerate()
        .map(|(n, (s, _))| instance(&format!("i-{n}"), s.clone(), "m5.large"))
        .collect();
    let mut ec2 = MockEc2::new();
    let calls = by_id(&mut ec2, known);
    let aws = aws(ec2);
    let mut nodes: Vec<NodeView> = (0..states.len())
        .map(|n| node(&format!("i-{n}"), None, &[]))
        .collect();
    nodes.push(node("i-missing", None, &[]));
    nodes.push(node("fargate", Some("aws:///us-west-2a/fargate-10.0.0.1"), &[]));
    let refs: Vec<&NodeView> = nodes.iter().collect();
    let got: Vec<bool> = aws
        .instance_shutdown_batch(&refs)
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect();
    let want: Vec<bool> = states.iter().map(|(_, s)| *s).chain([false, false]).collect();
    assert_eq!(got, want);
    assert_eq!(calls.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn fargate_nodes_use_their_interface_and_are_never_shut_down() {
    let mut eni = NetworkInterface::new(NetworkInterfaceId::new("eni-f"));
    eni.availability_zone = Some("us-west-2b".into());
    eni.private_ips = vec!["192.168.164.88".into()];
    eni.private_dns_name = Some("ip-192-168-164-88.us-west-2.compute.internal".into());
    let mut ec2 = MockEc2::new();
    ec2.expect_network_interfaces()
        .withf(|f| {
            f == [
                Filter::new("attachment.status", ["attached"]),
                Filter::new("private-ip-address", ["192.168.164.88", "192.168.164.89"]),
                Filter::new("vpc-id", ["vpc-1"]),
            ]
        })
        .times(2)
        .returning(move |_| ok(vec![eni.clone()]));
    zones(&mut ec2);
    let aws = AwsInstances::new(ec2, InstancesConfig::new(REGION).with_vpc_id(VpcId::new("vpc-1")));
    let nodes = [
        node(
            "fargate-ip-192-168-164-88.us-west-2.compute.internal",
            Some("aws:///us-west-2b/fargate-ip-192-168-164-88.us-west-2.compute.internal"),
            &[],
        ),
        node("fargate-192.168.164.89", None, &[]),
    ];
    let refs: Vec<&NodeView> = nodes.iter().collect();
    let metas = aws.instance_metadata_batch(&refs).await;
    let meta = metas[0].as_ref().unwrap().as_ref().unwrap();
    assert_eq!(
        meta.provider_id,
        "aws:///us-west-2b/fargate-ip-192-168-164-88.us-west-2.compute.internal"
    );
    assert_eq!(meta.zone, "us-west-2b");
    assert_eq!(meta.instance_type, "");
    assert_eq!(
        meta.node_addresses,
        vec![
            NodeAddress::new(NodeAddressType::InternalIp, "192.168.164.88"),
            NodeAddress::new(
                NodeAddressType::InternalDns,
                "ip-192-168-164-88.us-west-2.compute.internal"
            ),
        ]
    );
    assert_eq!(
        meta.additional_labels,
        label_map(&[("topology.k8s.aws/zone-id", "usw2-az2")])
    );
    assert!(metas[1].as_ref().unwrap_err().is_instance_not_found());
    let exists: Vec<bool> = aws
        .instance_exists_batch(&refs)
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect();
    assert_eq!(exists, [true, false]);
    // No expectation is left for a third network_interfaces call: shutdown asks nothing.
    let shut: Vec<bool> = aws
        .instance_shutdown_batch(&refs)
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect();
    assert_eq!(shut, [false, false]);
}

/// EKS Fargate nodes carry a segment between the zone and the pod; the instance is the last segment, as upstream
/// reads it (it was refused as "too many path segments", so such a node could never be looked up).
#[tokio::test]
async fn an_eks_fargate_provider_id_with_a_middle_segment_is_looked_up() {
    let provider_id = "aws:///us-west-2b/1abc-2def/fargate-ip-192-168-164-88.us-west-2.compute.internal";
    let mut eni = NetworkInterface::new(NetworkInterfaceId::new("eni-f"));
    eni.availability_zone = Some("us-west-2b".into());
    eni.private_ips = vec!["192.168.164.88".into()];
    let mut ec2 = MockEc2::new();
    ec2.expect_network_interfaces()
        .withf(|f| f.contains(&Filter::new("private-ip-address", ["192.168.164.88"])))
        .times(2)
        .returning(move |_| ok(vec![eni.clone()]));
    zones(&mut ec2);
    let aws = AwsInstances::new(ec2, InstancesConfig::new(REGION).with_vpc_id(VpcId::new("vpc-1")));
    let nodes = [node("fargate-ip-192-168-164-88", Some(provider_id), &[])];
    let refs: Vec<&NodeView> = nodes.iter().collect();
    let metas = aws.instance_metadata_batch(&refs).await;
    let meta = metas[0].as_ref().unwrap().as_ref().unwrap();
    assert_eq!(
        (meta.provider_id.as_str(), meta.zone.as_str()),
        (provider_id, "us-west-2b")
    );
    let exists = aws.instance_exists_batch(&refs).await;
    assert!(matches!(exists.as_slice(), [Ok(true)]), "{exists:?}");
}

pub(super) fn counted(ec2: &mut MockEc2) -> (Arc<AtomicUsize>, Arc<AtomicUsize>) {
    let topo = Arc::new(AtomicUsize::new(0));
    let azs = Arc::new(AtomicUsize::new(0));
    let t = topo.clone();
    ec2.expect_instance_topology().returning(move |_| {
        t.fetch_add(1, Ordering::SeqCst);
        ok(Vec::new())
    });
    let a = azs.clone();
    ec2.expect_availability_zones().returning(move || {
        a.fetch_add(1, Ordering::SeqCst);
        ok(vec![AvailabilityZone::new(
            "us-west-2a",
            "usw2-az1",
            "availability-zone",
            REGION,
        )])
    });
    (topo, azs)
}

#[tokio::test]
async fn a_batch_costs_one_lookup_per_thousand_ids() {
    for (n, lookups) in [(1, 1), (1000, 1), (1001, 2), (2500, 3)] {
        let known: Vec<Instance> = (0..n)
            .map(|k| instance(&format!("i-{k:08}"), InstanceState::Running, "m5.large"))
            .collect();
        let mut ec2 = MockEc2::new();
        let calls = by_id(&mut ec2, known);
        let (topo, azs) = counted(&mut ec2);
        let aws = aws(ec2);
        let nodes: Vec<NodeView> = (0..n).map(|k| node(&format!("i-{k:08}"), None, &[])).collect();
        let refs: Vec<&NodeView> = nodes.iter().collect();
        let out = aws.instance_metadata_batch(&refs).await;
        assert!(out.iter().all(|r| matches!(r, Ok(Some(_)))));
        assert_eq!(calls.load(Ordering::SeqCst), lookups, "{n} nodes");
        assert_eq!(
            (topo.load(Ordering::SeqCst), azs.load(Ordering::SeqCst)),
            (1, 1),
            "{n} nodes"
        );
        calls.store(0, Ordering::SeqCst);
        assert!(
            aws.instance_exists_batch(&refs)
                .await
                .iter()
                .all(|r| matches!(r, Ok(true)))
        );
        assert!(
            aws.instance_shutdown_batch(&refs)
                .await
                .iter()
                .all(|r| matches!(r, Ok(false)))
        );
        assert_eq!(calls.load(Ordering::SeqCst), 2 * lookups, "{n} nodes");
        // The instance type is negatively cached, the zone positively: a second batch asks neither.
        aws.instance_metadata_batch(&refs).await;
        assert_eq!(
            (topo.load(Ordering::SeqCst), azs.load(Ordering::SeqCst)),
            (1, 1),
            "{n} nodes"
        );
    }
}

#[tokio::test]
async fn a_batch_of_dns_names_costs_one_listing_with_the_cluster_tag_else_one_call_per_200() {
    let cluster = ClusterTags::new("kube", false).unwrap();
    let known: Vec<Instance> = (0..1000)
        .map(|k| {
            let mut i = instance(&format!("i-{k:05}"), InstanceState::Running, "m5.large");
            i.tags = Tags::from([(cluster.key(), "owned".to_owned())]);
            i
        })
        .collect();
    let nodes: Vec<NodeView> = known
        .iter()
        .map(|i| node(i.private_dns_name.as_deref().unwrap(), None, &[]))
        .collect();
    let refs: Vec<&NodeView> = nodes.iter().collect();
    for (with_cluster, calls_wanted) in [(true, 1), (false, 5)] {
        let mut ec2 = MockEc2::new();
        let calls = Arc::new(AtomicUsize::new(0));
        let counter = calls.clone();
        let answer = known.clone();
        let key = cluster.key();
        ec2.expect_instances().returning(move |filters| {
            counter.fetch_add(1, Ordering::SeqCst);
            assert!(filters.iter().all(|f| f.values.len() <= VALUES_PER_FILTER));
            let found = if filters[0] == Filter::tag_key(key.clone()) {
                answer.clone()
            } else {
                assert_eq!(filters[0].name, "private-dns-name");
                answer
                    .iter()
                    .filter(|i| filters[0].values.contains(i.private_dns_name.as_ref().unwrap()))
                    .cloned()
                    .collect()
            };
            ok(found)
        });
        counted(&mut ec2);
        let mut config = InstancesConfig::new(REGION);
        if with_cluster {
            config = config.with_cluster(cluster.clone());
        }
        let aws = AwsInstances::new(ec2, config);
        let out = aws.instance_exists_batch(&refs).await;
        assert!(out.iter().all(|r| matches!(r, Ok(true))));
        assert_eq!(
            calls.load(Ordering::SeqCst),
            calls_wanted,
            "cluster tag known: {with_cluster}"
        );
    }
}

#[tokio::test]
async fn zone_ids_are_cached_refreshed_on_a_new_zone_and_skipped_when_labelled() {
    let mut ec2 = MockEc2::new();
    let mut b = instance("i-b", InstanceState::Running, "m5.large");
    b.availability_zone = Some("us-west-2b".into());
    let mut c = instance("i-c", InstanceState::Running, "m5.large");
    c.availability_zone = Some("us-west-2z".into());
    by_id(
        &mut ec2,
        vec![instance("i-a", InstanceState::Running, "m5.large"), b, c],
    );
    no_topology(&mut ec2);
    let azs = Arc::new(AtomicUsize::new(0));
    let a = azs.clone();
    ec2.expect_availability_zones().returning(move || {
        // The first answer lacks us-west-2b (a zone enabled later).
        let n = a.fetch_add(1, Ordering::SeqCst);
        let mut list = vec![AvailabilityZone::new(
            "us-west-2a",
            "usw2-az1",
            "availability-zone",
            REGION,
        )];
        if n > 0 {
            list.push(AvailabilityZone::new(
                "us-west-2b",
                "usw2-az2",
                "availability-zone",
                REGION,
            ));
        }
        ok(list)
    });
    let aws = aws(ec2);
    let zone_id = |m: Option<InstanceMetadata>| m.unwrap().additional_labels.get(ZONE_ID_LABEL).cloned();
    let a_node = node("i-a", None, &[]);
    assert_eq!(
        zone_id(aws.instance_metadata(&a_node).await.unwrap()),
        Some("usw2-az1".into())
    );
    assert_eq!(
        zone_id(aws.instance_metadata(&a_node).await.unwrap()),
        Some("usw2-az1".into())
    );
    assert_eq!(azs.load(Ordering::SeqCst), 1, "cached");
    let labelled = node("i-b", None, &[(ZONE_ID_LABEL, "usw2-az2")]);
    assert_eq!(zone_id(aws.instance_metadata(&labelled).await.unwrap()), None);
    assert_eq!(azs.load(Ordering::SeqCst), 1, "an existing label needs no lookup");
    assert_eq!(
        zone_id(aws.instance_metadata(&node("i-b", None, &[])).await.unwrap()),
        Some("usw2-az2".into())
    );
    assert_eq!(azs.load(Ordering::SeqCst), 2, "refreshed for a new zone");
    // A zone AWS does not list: no label, but the node still initializes.
    assert_eq!(
        zone_id(aws.instance_metadata(&node("i-c", None, &[])).await.unwrap()),
        None
    );
}

#[tokio::test]
async fn zone_lookup_failures_fail_initialization() {
    let mut ec2 = MockEc2::new();
    by_id(
        &mut ec2,
        vec![instance("i-a", InstanceState::Running, "m5.large")],
    );
    no_topology(&mut ec2);
    ec2.expect_availability_zones().returning(|| {
        Box::pin(async { Err(aws_err(ErrorKind::Transient, "DescribeAvailabilityZones", "")) })
    });
    let err = aws(ec2)
        .instance_metadata(&node("i-a", None, &[]))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("availability zones"), "{err}");
}

/// Upstream's topology cases: supported types get layers; unsupported types and regions are remembered for a
/// day; errors fail only the types that must have a topology.
#[tokio::test(start_paused = true)]
async fn topology_labels_and_negative_cache() {
    let known = vec![
        instance("i-p4d", InstanceState::Running, "p4d.24xlarge"),
        instance("i-p5", InstanceState::Running, "p5.48xlarge"),
        instance("i-m5", InstanceState::Running, "m5.large"),
        instance("i-m5b", InstanceState::Running, "m5.large"),
        instance("i-untyped", InstanceState::Running, ""),
    ];
    let mut ec2 = MockEc2::new();
    by_id(&mut ec2, known);
    zones(&mut ec2);
    let asked: Arc<std::sync::Mutex<Vec<Vec<String>>>> = Arc::default();
    let log = asked.clone();
    ec2.expect_instance_topology().returning(move |ids| {
        let ids: Vec<String> = ids.iter().map(ToString::to_string).collect();
        log.lock().unwrap().push(ids);
        // Only p4d has a topology (p5 not yet: AWS may report it later).
        ok(vec![InstanceTopology::new(
            InstanceId::new("i-p4d"),
            "p4d.24xlarge",
            vec!["nn-1".into()],
        )])
    });
    let aws = aws(ec2);
    let nodes = [
        node("i-p4d", None, &[]),
        node("i-p5", None, &[]),
        node("i-m5", None, &[]),
        node("i-untyped", None, &[]),
        node(
            "i-labelled",
            Some("aws:///us-west-2a/i-m5b"),
            &[("topology.k8s.aws/network-node-layer-1", "x")],
        ),
    ];
    let refs: Vec<&NodeView> = nodes.iter().collect();
    let layers = |m: &InstanceMetadata| {
        m.additional_labels
            .keys()
            .filter(|k| k.starts_with(NETWORK_NODE_LAYER_PREFIX))
            .count()
    };
    let out = aws.metadata(&refs).await;
    let metas: Vec<InstanceMetadata> = out.into_iter().map(|r| r.unwrap().unwrap()).collect();
    assert_eq!(metas.iter().map(layers).collect::<Vec<_>>(), [1, 0, 0, 0, 0]);
    assert_eq!(*asked.lock().unwrap(), [vec!["i-p4d", "i-p5", "i-m5"]]);

    // Within the day: m5.large (type) and i-p5 (ID) are not asked again; a new p5 instance is.
    let again = [
        node("i-p5", None, &[]),
        node("i-m5", None, &[]),
        node("i-p4d", None, &[]),
    ];
    let refs: Vec<&NodeView> = again.iter().collect();
    aws.metadata(&refs).await;
    assert_eq!(asked.lock().unwrap().last().unwrap(), &vec!["i-p4d"]);
    tokio::time::advance(UNSUPPORTED_TTL).await;
    aws.metadata(&refs).await;
    assert_eq!(
        asked.lock().unwrap().last().unwrap(),
        &vec!["i-p5", "i-m5", "i-p4d"]
    );
}

#[tokio::test(start_paused = true)]
async fn a_slow_topology_does_not_hold_up_types_that_need_none() {
    let known = vec![instance("i-m5", InstanceState::Running, "m5.large")];
    let nodes = [node("i-m5", None, &[])];
    let refs: Vec<&NodeView> = nodes.iter().collect();
    let mut ec2 = MockEc2::new();
    by_id(&mut ec2, known);
    zones(&mut ec2);
    // An answer only after a minute (an outage with retries).
    ec2.expect_instance_topology().returning(|_| {
        Box::pin(async {
            tokio::time::sleep(Duration::from_secs(60)).await;
            Ok(Vec::new())
        })
    });
    let started = tokio::time::Instant::now();
    let out = aws(ec2).metadata(&refs).await;
    let meta = out[0].as_ref().unwrap().as_ref().unwrap();
    assert!(
        !meta
            .additional_labels
            .keys()
            .any(|k| k.contains("network-node-layer"))
    );
    assert_eq!(
        started.elapsed(),
        BEST_EFFORT_TOPOLOGY,
        "initialized after the best-effort bound"
    );

    // A type that needs its topology waits for the answer.
    let known = vec![instance("i-p4d", InstanceState::Running, "p4d.24xlarge")];
    let nodes = [node("i-p4d", None, &[])];
    let refs: Vec<&NodeView> = nodes.iter().collect();
    let mut ec2 = MockEc2::new();
    by_id(&mut ec2, known);
    zones(&mut ec2);
    ec2.expect_instance_topology().returning(|ids| {
        let id = ids[0].clone();
        Box::pin(async move {
            tokio::time::sleep(Duration::from_secs(60)).await;
            Ok(vec![InstanceTopology::new(
                id,
                "p4d.24xlarge",
                vec!["nn-1".into()],
            )])
        })
    });
    let started = tokio::time::Instant::now();
    let out = aws(ec2).metadata(&refs).await;
    assert!(out[0].is_ok());
    assert_eq!(started.elapsed(), Duration::from_secs(60));
}

#[tokio::test(start_paused = true)]
async fn topology_errors() {
    let known = vec![
        instance("i-p4d", InstanceState::Running, "p4d.24xlarge"),
        instance("i-m5", InstanceState::Running, "m5.large"),
    ];
    let nodes = [node("i-p4d", None, &[]), node("i-m5", None, &[])];
    let refs: Vec<&NodeView> = nodes.iter().collect();

    // Throttled: the type that must have a topology fails (initialization retries), the other initializes.
    let mut ec2 = MockEc2::new();
    by_id(&mut ec2, known.clone());
    zones(&mut ec2);
    ec2.expect_instance_topology().times(2).returning(|_| {
        Box::pin(async {
            Err(aws_err(
                ErrorKind::Throttled,
                "DescribeInstanceTopology",
                "RequestLimitExceeded",
            ))
        })
    });
    let throttled = aws(ec2);
    let out = throttled.metadata(&refs).await;
    let err = out[0].as_ref().unwrap_err().to_string();
    assert!(err.contains("topology of instance i-p4d"), "{err}");
    assert!(matches!(out[1], Ok(Some(_))));
    let out = throttled.metadata(&refs).await;
    assert!(out[0].is_err(), "not cached: asked again");

    // Unsupported in the region (or not allowed): no labels, no question for a day.
    for code in ["UnsupportedOperation", "UnauthorizedOperation"] {
        let mut ec2 = MockEc2::new();
        by_id(&mut ec2, known.clone());
        zones(&mut ec2);
        let kind = if code == "UnauthorizedOperation" {
            ErrorKind::AccessDenied
        } else {
            ErrorKind::Invalid
        };
        ec2.expect_instance_topology().times(2).returning(move |_| {
            Box::pin(async move { Err(aws_err(kind, "DescribeInstanceTopology", code)) })
        });
        let aws = aws(ec2);
        for _ in 0..3 {
            let out = aws.metadata(&refs).await;
            assert!(
                out.iter()
                    .all(|r| matches!(r, Ok(Some(m)) if m.additional_labels.len() == 1)),
                "{code}"
            );
        }
        tokio::time::advance(UNSUPPORTED_TTL).await;
        aws.metadata(&refs).await;
    }
}

#[tokio::test]
async fn node_ip_families_order_the_addresses() {
    let mut i = instance("i-1", InstanceState::Running, "m5.large");
    i.network_interfaces[0].ipv6_addresses = vec!["2001:db8::1".into()];
    let mut ec2 = MockEc2::new();
    by_id(&mut ec2, vec![i]);
    zones(&mut ec2);
    no_topology(&mut ec2);
    let config = InstancesConfig::new(REGION).with_node_ip_families(vec![IpFamily::Ipv6, IpFamily::Ipv4]);
    let meta = AwsInstances::new(ec2, config)
        .instance_metadata(&node("i-1", None, &[]))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        meta.node_addresses[0],
        NodeAddress::new(NodeAddressType::InternalIp, "2001:db8::1")
    );
    assert_eq!(
        meta.node_addresses[1],
        NodeAddress::new(NodeAddressType::InternalIp, "192.168.0.1")
    );
}

#[test]
fn the_default_topology_pattern_matches_the_upstream_types() {
    let p = InstancesConfig::new(REGION).topology_instance_types;
    for t in [
        "p4d.24xlarge",
        "p5.48xlarge",
        "trn1.32xlarge",
        "trn1n.32xlarge",
        "hpc6a.48xlarge",
        "p3dn.24xlarge",
    ] {
        assert!(p.is_match(t), "{t}");
    }
    for t in ["m5.large", "g5.xlarge", "c7gn.16xlarge", ""] {
        assert!(!p.is_match(t), "{t}");
    }
}

#[tokio::test]
async fn a_mixed_batch_costs_one_call_per_kind_and_errors_stay_per_node() {
    let mut ec2 = MockEc2::new();
    let id_calls = by_id(
        &mut ec2,
        vec![instance("i-00000001", InstanceState::Running, "m5.large")],
    );
    ec2.expect_instances().times(1).returning(|_| {
        Box::pin(async {
            Err(aws_err(
                ErrorKind::Transient,
                "DescribeInstances",
                "InternalError",
            ))
        })
    });
    let mut v6 = NetworkInterface::new(NetworkInterfaceId::new("eni-v6"));
    v6.ipv6_addresses = vec!["2600:1f14:0:0::7".into()];
    let twins = [
        NetworkInterface::new(NetworkInterfaceId::new("eni-a")),
        NetworkInterface::new(NetworkInterfaceId::new("eni-b")),
    ]
    .map(|mut e| {
        e.private_ips = vec!["10.0.0.7".into()];
        e
    });
    ec2.expect_network_interfaces()
        .withf(|f| f.len() == 2 && f[1].name == "private-ip-address" && f[1].values == ["10.0.0.7"])
        .times(1)
        .returning(move |_| ok(twins.to_vec()));
    ec2.expect_network_interfaces()
        .withf(|f| f.len() == 2 && f[1] == Filter::new("ipv6-addresses.ipv6-address", ["2600:1f14::7"]))
        .times(1)
        .returning(move |_| ok(vec![v6.clone()]));
    let aws = aws(ec2);
    let nodes = [
        node("i-00000001", None, &[]),
        node("n", Some("aws:///us-west-2a/i-00000001"), &[]),
        node("ip-10-0-0-9.ec2.internal", None, &[]),
        node("f4", Some("aws:///us-west-2a/fargate-10.0.0.7"), &[]),
        node("f6", Some("aws:///us-west-2a/fargate-2600:1f14::7"), &[]),
        node("bad", Some("aws:///us-west-2a/eni-1"), &[]),
    ];
    let refs: Vec<&NodeView> = nodes.iter().collect();
    let out = aws.exists(&refs).await;
    assert!(matches!(out[0], Ok(true)) && matches!(out[1], Ok(true)));
    let err = out[2].as_ref().unwrap_err().to_string();
    assert!(err.contains("private DNS name ip-10-0-0-9.ec2.internal"), "{err}");
    let err = out[3].as_ref().unwrap_err().to_string();
    assert!(err.contains("eni-a") && err.contains("eni-b"), "{err}");
    assert!(matches!(out[4], Ok(true)));
    assert!(matches!(out[5], Err(InstancesError::InvalidProviderId { .. })));
    assert_eq!(
        id_calls.load(Ordering::SeqCst),
        1,
        "two nodes of one instance: one lookup"
    );
}

/// `NodeZoneLabel = ZoneID`: the zone reported is the zone ID, for instances and Fargate interfaces alike, also
/// for a node that already carries the zone-ID label; the provider ID keeps the zone name.
#[tokio::test]
async fn zones_are_reported_by_id_when_configured() {
    let mut ec2 = MockEc2::new();
    let mut b = instance("i-b", InstanceState::Running, "m5.large");
    b.availability_zone = Some("us-west-2b".into());
    by_id(
        &mut ec2,
        vec![instance("i-a", InstanceState::Running, "m5.large"), b],
    );
    let mut eni = NetworkInterface::new(NetworkInterfaceId::new("eni-f"));
    eni.availability_zone = Some("us-west-2b".into());
    eni.private_ips = vec!["192.168.164.88".into()];
    ec2.expect_network_interfaces()
        .returning(move |_| ok(vec![eni.clone()]));
    no_topology(&mut ec2);
    zones(&mut ec2);
    let config = InstancesConfig::new(REGION).with_zone_form(ZoneForm::Id);
    let aws = AwsInstances::new(ec2, config);
    let nodes = [
        node("i-a", None, &[]),
        node("i-b", None, &[(ZONE_ID_LABEL, "usw2-az2")]),
        node("fargate-192.168.164.88", None, &[]),
    ];
    let refs: Vec<&NodeView> = nodes.iter().collect();
    let metas: Vec<InstanceMetadata> = aws
        .instance_metadata_batch(&refs)
        .await
        .into_iter()
        .map(|m| m.unwrap().unwrap())
        .collect();
    let got: Vec<(&str, &str, &str)> = metas
        .iter()
        .map(|m| (m.zone.as_str(), m.provider_id.as_str(), m.region.as_str()))
        .collect();
    assert_eq!(
        got,
        [
            ("usw2-az1", "aws:///us-west-2a/i-a", REGION),
            ("usw2-az2", "aws:///us-west-2b/i-b", REGION),
            ("usw2-az2", "aws:///us-west-2b/fargate-192.168.164.88", REGION),
        ]
    );
    assert_eq!(
        metas[0].additional_labels,
        label_map(&[(ZONE_ID_LABEL, "usw2-az1")])
    );
    assert!(
        metas[1].additional_labels.is_empty(),
        "an existing zone-ID label is not written again"
    );
}

/// By ID, a zone `DescribeAvailabilityZones` does not list fails the node (retried) instead of labelling it with
/// the zone name among zone IDs; by name the same node initializes (see above).
#[tokio::test]
async fn a_zone_without_an_id_fails_the_node_by_id() {
    let mut ec2 = MockEc2::new();
    let mut z = instance("i-z", InstanceState::Running, "m5.large");
    z.availability_zone = Some("us-west-2z".into());
    by_id(&mut ec2, vec![z]);
    no_topology(&mut ec2);
    zones(&mut ec2);
    let aws = AwsInstances::new(ec2, InstancesConfig::new(REGION).with_zone_form(ZoneForm::Id));
    let err = aws
        .metadata(&[&node("i-z", None, &[])])
        .await
        .remove(0)
        .unwrap_err();
    assert!(
        matches!(&err, InstancesError::NoZoneId { node, zone } if node == "i-z" && zone == "us-west-2z"),
        "{err:?}"
    );
    assert!(err.to_string().contains("NodeZoneLabel = ZoneID"), "{err}");
    assert!(!CloudError::from(err).is_instance_not_found());
}
