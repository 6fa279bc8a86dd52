//! `--delete`'s guards against a kubeconfig of another cluster than the cloud config's: the Nodes' instances
//! (another cluster's: always refused), no Node naming an EC2 instance, and owned load balancers of which no
//! Service of the apiserver is the one they name (refused unless allowed); and the report's warnings for both.

use std::collections::BTreeMap;

use ccm_aws_api::{
    InstanceId, Tags,
    ec2::{Instance, InstanceState, MockEc2},
    elb::MockElb,
    elbv2::MockElbv2,
};
use ccm_testing::fixtures::NodeBuilder;
use k8s_openapi::api::core::v1::Node;
use serde_json::json;

use super::{LIVE_LB, OLD_LB, UID, classic, ids, owned, scope, service, tags};
use crate::doctor::{
    DeleteOutcome, DoctorError, Doubt, EmptyCluster, Kind, Ports, Report, Snapshot, analyze, delete, inspect,
    observe::Inventory, remove::Outcome, same_cluster,
};

fn node_of(name: &str, provider_id: &str) -> Node {
    NodeBuilder::new(name).provider_id(provider_id).build()
}

fn instance(id: &str, tags: Tags) -> Instance {
    let mut i = Instance::new(InstanceId::new(id), InstanceState::Running);
    i.tags = tags;
    i
}

fn by_id(instances: impl IntoIterator<Item = Instance>) -> BTreeMap<InstanceId, Instance> {
    instances.into_iter().map(|i| (i.id.clone(), i)).collect()
}

/// One Node whose instance carries the cluster tag is enough, whichever map holds it; none, and the error names
/// the cluster the instances are tagged for and counts those AWS does not know. No Node naming an EC2 instance
/// is no error, but a doubt.
#[test]
fn the_nodes_instances_tell_whether_the_apiserver_is_the_clusters() {
    let inventory = Inventory {
        instances: by_id([instance("i-own", tags(&[("kubernetes.io/cluster/c1", "shared")]))]),
        node_instances: by_id([
            instance("i-legacy", tags(&[("KubernetesCluster", "c1")])),
            instance("i-c2", tags(&[("kubernetes.io/cluster/c2", "owned")])),
            instance("i-c3", tags(&[("KubernetesCluster", "c3")])),
            instance("i-bare", Tags::new()),
        ]),
        ..Inventory::default()
    };
    let nodes = |ids: &[&str]| Snapshot {
        nodes: ids
            .iter()
            .map(|id| node_of(id, &format!("aws:///us-east-1a/{id}")))
            .collect(),
        ..Snapshot::default()
    };
    let check = |snapshot: &Snapshot| same_cluster::check(&scope(), &inventory, snapshot);
    let doubts = |snapshot: &Snapshot| same_cluster::doubts(&scope(), &inventory, snapshot);
    for tagged in [nodes(&["i-c2", "i-own"]), nodes(&["i-bare", "i-legacy"])] {
        check(&tagged).unwrap();
        assert_eq!(doubts(&tagged), []);
    }
    // No Node at all, or none naming an EC2 instance: nothing to compare with.
    check(&Snapshot::default()).unwrap();
    assert_eq!(doubts(&Snapshot::default()), [Doubt::NoEc2Nodes]);
    let fargate = Snapshot {
        nodes: vec![
            node_of("f", "aws:///us-east-1a/fargate-ip-10-0-0-1"),
            serde_json::from_value(json!({ "metadata": { "name": "bare" } })).unwrap(),
        ],
        ..Snapshot::default()
    };
    check(&fargate).unwrap();
    assert_eq!(doubts(&fargate), [Doubt::NoEc2Nodes]);
    let err = check(&nodes(&["i-c2", "i-c3", "i-bare", "i-gone"])).unwrap_err();
    let DoctorError::OtherCluster {
        cluster,
        nodes: n,
        not_found,
        tagged_for,
    } = &err
    else {
        panic!("{err:?}");
    };
    assert_eq!((cluster.as_str(), *n, *not_found), ("c1", 4, 1));
    assert_eq!(tagged_for, &["c2", "c3"]);
    let message = err.to_string();
    for part in [
        "refusing to delete",
        "cluster c1's (the cloud config's)",
        "its 4 Node(s)",
        "kubernetes.io/cluster/c1",
        "they are tagged for cluster c2, c3",
        "1 of the instances do not exist",
        "--kubeconfig and --cloud-config",
    ] {
        assert!(message.contains(part), "{part:?} not in {message}");
    }
    // Untagged and unknown instances only: no other cluster to name.
    let message = check(&nodes(&["i-bare"])).unwrap_err().to_string();
    assert!(!message.contains("tagged for"), "{message}");
}

/// The read-only ports of a fresh reading: two Classic ELBs that cluster c1 owns, `OLD_LB` of Service
/// `default/gone` (which no apiserver has) and `LIVE_LB` of Service `default/web` (with UID [`UID`], see
/// [`web`]), the cluster's instances `cluster` and the instances Nodes name `others`.
fn reading_ports(cluster: Vec<Instance>, others: Vec<Instance>) -> (MockEc2, MockElb, MockElbv2) {
    let (mut ec2, mut elb, mut elbv2) = (MockEc2::new(), MockElb::new(), MockElbv2::new());
    elb.expect_all_load_balancers()
        .returning(|| Box::pin(async { Ok(vec![classic(OLD_LB, &[]), classic(LIVE_LB, &[])]) }));
    elb.expect_tags_of().returning(|_| {
        let tags = BTreeMap::from([
            (OLD_LB.to_owned(), owned("default/gone")),
            (LIVE_LB.to_owned(), owned("default/web")),
        ]);
        Box::pin(async { Ok(tags) })
    });
    elbv2
        .expect_all_load_balancers()
        .returning(|| Box::pin(async { Ok(Vec::new()) }));
    elbv2
        .expect_all_target_groups()
        .returning(|| Box::pin(async { Ok(Vec::new()) }));
    ec2.expect_security_groups()
        .returning(|_| Box::pin(async { Ok(Vec::new()) }));
    ec2.expect_route_tables()
        .returning(|_| Box::pin(async { Ok(Vec::new()) }));
    ec2.expect_instances().returning(move |_| {
        let found = cluster.clone();
        Box::pin(async move { Ok(found) })
    });
    ec2.expect_instances_by_id().returning(move |ids| {
        let found: Vec<Instance> = others.iter().filter(|i| ids.contains(&i.id)).cloned().collect();
        Box::pin(async move { Ok(found) })
    });
    (ec2, elb, elbv2)
}

/// Service `default/web`, whose UID names `LIVE_LB`.
fn web() -> k8s_openapi::api::core::v1::Service {
    service("default", "web", UID, "LoadBalancer", &[])
}

/// Fails the test on any call that writes.
fn forbid_writes(ec2: &mut MockEc2, elb: &mut MockElb, elbv2: &mut MockElbv2) {
    elb.expect_delete_load_balancer().times(0);
    elbv2.expect_delete_load_balancer().times(0);
    elbv2.expect_delete_target_group().times(0);
    ec2.expect_revoke_ingress().times(0);
    ec2.expect_delete_security_group().times(0);
    ec2.expect_delete_route().times(0);
}

/// The cluster's instance, and a Node of it.
fn own_instance() -> (Instance, Node) {
    (
        instance("i-own", tags(&[("kubernetes.io/cluster/c1", "owned")])),
        node_of("own", "aws:///us-east-1a/i-own"),
    )
}

/// The report of [`reading_ports`]: its Classic ELB, deletable.
fn leaked_classic_report() -> Report {
    let inventory = Inventory {
        classic: vec![(classic(OLD_LB, &[]), owned("default/gone"))],
        ..Inventory::default()
    };
    let report = Report {
        cluster_id: "c1".into(),
        warnings: Vec::new(),
        findings: analyze::findings(&scope(), &inventory, &Snapshot::default(), &BTreeMap::new()),
    };
    assert_eq!(ids(&report.findings), [(Kind::ClassicLoadBalancer, OLD_LB)]);
    report
}

/// A kubeconfig of cluster c2 with the cloud config of c1: c1's load balancer has no Service there, but the
/// Nodes' instances are c2's, so `--delete` refuses and calls nothing that writes, `--allow-empty-cluster` or
/// not.
#[tokio::test]
async fn delete_refuses_when_the_apiserver_is_another_clusters() {
    let c2 = || tags(&[("kubernetes.io/cluster/c2", "owned")]);
    let (mut ec2, mut elb, mut elbv2) =
        reading_ports(Vec::new(), vec![instance("i-a", c2()), instance("i-b", c2())]);
    forbid_writes(&mut ec2, &mut elb, &mut elbv2);
    let fresh = Snapshot {
        nodes: vec![
            node_of("a", "aws:///us-east-1a/i-a"),
            node_of("b", "aws:///us-east-1b/i-b"),
        ],
        ..Snapshot::default()
    };
    let err = delete_with(&ec2, &elb, &elbv2, EmptyCluster::Allow, fresh)
        .await
        .unwrap_err();
    let DoctorError::OtherCluster {
        cluster, tagged_for, ..
    } = &err
    else {
        panic!("{err:?}");
    };
    assert_eq!(
        (cluster.as_str(), tagged_for.as_slice()),
        ("c1", ["c2".to_owned()].as_slice())
    );
}

/// The same leak with the cluster's apiserver (one Node's instance tagged c1, another's not; the Service of the
/// live load balancer): removed.
#[tokio::test]
async fn delete_goes_on_when_a_nodes_instance_is_the_clusters() {
    let (own, own_node) = own_instance();
    let (ec2, mut elb, elbv2) =
        reading_ports(vec![own], vec![instance("i-db", tags(&[("Name", "database")]))]);
    expect_deletion(&mut elb, OLD_LB);
    let fresh = Snapshot {
        nodes: vec![own_node, node_of("db", "aws:///us-east-1a/i-db")],
        services: vec![web()],
        ..Snapshot::default()
    };
    let outcome = delete_with(&ec2, &elb, &elbv2, EmptyCluster::Refuse, fresh)
        .await
        .unwrap();
    assert_eq!(removed(&outcome), [(OLD_LB, Outcome::Deleted)]);
}

/// A kind cluster's kubeconfig beside the production cloud config: no Node names an EC2 instance, so nothing
/// shows that the apiserver is c1's, and every load balancer of c1 would look leaked. `--delete` refuses, naming
/// the cause and the flag, and writes nothing; with `--allow-empty-cluster` it goes on.
#[tokio::test]
async fn delete_refuses_when_no_node_names_an_ec2_instance() {
    let fresh = Snapshot {
        nodes: vec![node_of(
            "kind-control-plane",
            "kind://docker/kind/kind-control-plane",
        )],
        services: vec![web()],
        ..Snapshot::default()
    };
    let (mut ec2, mut elb, mut elbv2) = reading_ports(Vec::new(), Vec::new());
    forbid_writes(&mut ec2, &mut elb, &mut elbv2);
    let err = delete_with(&ec2, &elb, &elbv2, EmptyCluster::Refuse, fresh.clone())
        .await
        .unwrap_err();
    assert!(
        matches!(&err, DoctorError::Unverified { cluster, doubt: Doubt::NoEc2Nodes } if cluster == "c1"),
        "{err:?}"
    );
    let message = err.to_string();
    for part in [
        "refusing to delete",
        "no Node of the apiserver names an EC2 instance",
        "--allow-empty-cluster",
    ] {
        assert!(message.contains(part), "{part:?} not in {message}");
    }

    let (ec2, mut elb, elbv2) = reading_ports(Vec::new(), Vec::new());
    expect_deletion(&mut elb, OLD_LB);
    let outcome = delete_with(&ec2, &elb, &elbv2, EmptyCluster::Allow, fresh)
        .await
        .unwrap();
    assert_eq!(removed(&outcome), [(OLD_LB, Outcome::Deleted)]);
}

/// The cluster's Nodes, but not one Service that an owned load balancer names (the kubeconfig of a cluster
/// rebuilt from scratch, or every LoadBalancer Service deleted): every owned load balancer looks leaked, so
/// `--delete` refuses and writes nothing. A Service that names one of them by its chosen name is enough.
#[tokio::test]
async fn delete_refuses_when_no_service_is_one_an_owned_load_balancer_names() {
    let unrelated = service("default", "kubernetes", "k-1", "ClusterIP", &[]);
    let (own, own_node) = own_instance();
    let (mut ec2, mut elb, mut elbv2) = reading_ports(vec![own.clone()], Vec::new());
    forbid_writes(&mut ec2, &mut elb, &mut elbv2);
    let fresh = Snapshot {
        nodes: vec![own_node.clone()],
        services: vec![unrelated.clone()],
        ..Snapshot::default()
    };
    let err = delete_with(&ec2, &elb, &elbv2, EmptyCluster::Refuse, fresh.clone())
        .await
        .unwrap_err();
    let DoctorError::Unverified {
        doubt: Doubt::NoServiceMatches { load_balancers },
        ..
    } = &err
    else {
        panic!("{err:?}");
    };
    assert_eq!(load_balancers, &[OLD_LB, LIVE_LB]);
    let message = err.to_string();
    for part in [
        "refusing to delete",
        "2 load balancer(s)",
        "no Service of the apiserver",
        "--allow-empty-cluster",
    ] {
        assert!(message.contains(part), "{part:?} not in {message}");
    }
    // Allowed: goes on.
    let (ec2, mut elb, elbv2) = reading_ports(vec![own.clone()], Vec::new());
    expect_deletion(&mut elb, OLD_LB);
    let outcome = delete_with(&ec2, &elb, &elbv2, EmptyCluster::Allow, fresh)
        .await
        .unwrap();
    assert_eq!(removed(&outcome), [(OLD_LB, Outcome::Deleted)]);

    // Refused no more once a Service names one of them (here by its chosen name).
    let renamed = ccm_testing::fixtures::ServiceBuilder::new("other", "renamed")
        .uid("22222222-2222-3333-4444-555555555555")
        .annotation("service.beta.kubernetes.io/aws-load-balancer-name", LIVE_LB)
        .build();
    let (ec2, mut elb, elbv2) = reading_ports(vec![own], Vec::new());
    expect_deletion(&mut elb, OLD_LB);
    let fresh = Snapshot {
        nodes: vec![own_node],
        services: vec![unrelated, renamed],
        ..Snapshot::default()
    };
    let outcome = delete_with(&ec2, &elb, &elbv2, EmptyCluster::Refuse, fresh)
        .await
        .unwrap();
    assert_eq!(removed(&outcome), [(OLD_LB, Outcome::Deleted)]);
}

/// Without `--delete` the report is unchanged, with a warning line for each of the two doubts; with the
/// cluster's Nodes and Services, none.
#[tokio::test]
async fn the_report_warns_when_the_apiserver_may_be_another_clusters() {
    let (ec2, elb, elbv2) = reading_ports(Vec::new(), Vec::new());
    let ports = Ports {
        ec2: &ec2,
        elb: &elb,
        elbv2: &elbv2,
    };
    let report = inspect(ports, &scope(), &Snapshot::default()).await.unwrap();
    assert_eq!(
        ids(&report.findings),
        [
            (Kind::ClassicLoadBalancer, OLD_LB),
            (Kind::ClassicLoadBalancer, LIVE_LB)
        ]
    );
    let text = report.to_string();
    let warnings: Vec<&str> = text.lines().filter(|l| l.starts_with("warning: ")).collect();
    assert_eq!(warnings.len(), 2, "{text}");
    assert!(
        warnings[0].contains("no Node of the apiserver names an EC2 instance"),
        "{text}"
    );
    assert!(warnings[1].contains("no Service of the apiserver"), "{text}");
    assert!(
        warnings.iter().all(|w| w.contains("--allow-empty-cluster")),
        "{text}"
    );
    let json = serde_json::to_value(&report).unwrap();
    assert_eq!(json["warnings"].as_array().map(Vec::len), Some(2), "{json}");

    let (own, own_node) = own_instance();
    let (ec2, elb, elbv2) = reading_ports(vec![own], Vec::new());
    let ports = Ports {
        ec2: &ec2,
        elb: &elb,
        elbv2: &elbv2,
    };
    let snapshot = Snapshot {
        nodes: vec![own_node],
        services: vec![web()],
        ..Snapshot::default()
    };
    let report = inspect(ports, &scope(), &snapshot).await.unwrap();
    assert!(!report.to_string().contains("warning"), "{report}");
    assert!(serde_json::to_value(&report).unwrap().get("warnings").is_none());
}

fn expect_deletion(elb: &mut MockElb, name: &'static str) {
    elb.expect_delete_load_balancer()
        .withf(move |n| n == name)
        .times(1)
        .returning(|_| Box::pin(async { Ok(()) }));
}

/// `delete` of [`leaked_classic_report`] with `fresh` as the fresh listing.
async fn delete_with(
    ec2: &MockEc2,
    elb: &MockElb,
    elbv2: &MockElbv2,
    empty: EmptyCluster,
    fresh: Snapshot,
) -> Result<DeleteOutcome, DoctorError> {
    let ports = Ports { ec2, elb, elbv2 };
    delete(ports, &scope(), &leaked_classic_report(), empty, || async {
        Ok::<_, std::io::Error>(fresh)
    })
    .await
}

fn removed(outcome: &DeleteOutcome) -> Vec<(&str, Outcome)> {
    outcome
        .removals
        .iter()
        .map(|r| (r.id.as_str(), r.outcome))
        .collect()
}
