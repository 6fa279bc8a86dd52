//! End to end, the rollback an operator needs when an upgrade goes wrong: ours (`aws-cloud-controller-manager`)
//! initialises three Nodes and serves a Classic ELB with two ports and an NLB (the Services of
//! `e2e_go_peer_takeover.rs`); it is stopped, and the real Go controller (Kubernetes 1.20.2's cloud controller
//! manager, `ccm_testing::GoCcm`) takes over with the same cloud config file and Lease, as in a switch of image
//! back, runs two rounds (a restart in between), and then deletes both Services.
//!
//! Required and asserted: the Go controller recreates nothing (names, ARNs, DNS names, target groups, Service
//! hostnames kept) and leaves the Nodes as ours initialised them; the resources change exactly as
//! docs/migration-from-go.md ("Rolling back to the Go controller") says, and the Go controller's AWS writes, read
//! from a `FaultProxy`'s request log and printed, are exactly those; its second round writes only what it writes
//! on every sync. Its deletion leaves exactly what that page says (ours' narrowed Classic node rules, and with
//! them, in AWS, the Classic ELB's group and a Service stuck in Terminating); the page's fix (`doctor --delete`)
//! lets the deletion complete, and the VPC then reads as before ours ran, nothing tagged for the cluster in ELBv2.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::too_many_lines)]

mod common;
mod go_peer;

use std::{collections::BTreeMap, time::Duration};

use aws_sdk_ec2::types::Tag;
use ccm_testing::{Fault, FaultProxy, GoCcm, GoCcmOptions, GoCloudConfig, TestEnv, ec2::Launched};
use common::{Ccm, World, eventually, initialized};
use go_peer::{
    Aws, Delta, Snapshot,
    cluster::{
        Served, assert_not_recreated, assert_serving, create_services, go_until, has_hostname, node_facts,
        node_group, subnet_cidr, wait_synced,
    },
    diff, list_requests, show, writes,
};
use k8s_openapi::api::core::v1::Service;
use kube::Api;

#[tokio::test]
async fn e2e_the_go_controller_takes_over_what_ours_made_and_deletes_it() {
    let env = TestEnv::get();
    let start = go_peer::cluster::start().await;
    let config = start.go_config();
    let go_peer::cluster::Start {
        world,
        services,
        launched,
        aws,
    } = start;
    tag_node_group(&world, &aws, &launched[0]).await;
    let baseline = aws.snapshot(&world.network.vpc).await;

    let served = ours_makes(&world, &config, &services, &launched).await;
    let ours_made = aws.snapshot(&world.network.vpc).await;
    assert_serving(&ours_made, &served, &launched);
    let nodes_before = node_facts(&world.nodes, &launched).await;

    let proxy = FaultProxy::start(&env.aws_endpoint).await.unwrap();
    let go_config = config.via(&proxy.url());
    let go = go_takes_over(&world, &go_config, &proxy, &services, &served, &ours_made).await;
    let nodes_after = node_facts(&world.nodes, &launched).await;
    let node_changes = diff(&nodes_before, &nodes_after);
    assert!(
        node_changes.is_empty(),
        "the Go controller changed the Nodes ours initialised:\n{}",
        show(&node_changes)
    );
    let mut go = second_round(go, &world, &go_config, &proxy, &served).await;

    go_deletes(&mut go, &proxy, &services, &served, &world, &baseline, &config).await;
    world.cleanup().await;
}

/// Phase 1: ours initialises the Nodes and serves both Services; stopped (SIGTERM, its Lease released) once both
/// have hostnames and it has nothing more to do.
async fn ours_makes(
    world: &World,
    config: &GoCloudConfig,
    services: &Api<Service>,
    launched: &[Launched],
) -> Served {
    // The file the Go controller reads later, with moto's endpoint: both controllers run on one cloud config.
    let ours_config = world.dir.join("ours.conf");
    config.write(&ours_config).unwrap();
    let mut ccm = Ccm::start_with_config(world, &ours_config, &["--controllers=cloud-node,service"]);
    let nodes = world.nodes.clone();
    eventually(&mut ccm, "ours to initialise the Nodes", 60, async || {
        let mut all = true;
        for l in launched {
            all &= nodes.get(&l.private_dns).await.is_ok_and(|n| initialized(&n));
        }
        all
    })
    .await;
    let (clb, nlb) = create_services(services).await;
    let mut hostnames = BTreeMap::new();
    for name in [&clb, &nlb].map(|s| s.metadata.name.clone().unwrap()) {
        eventually(&mut ccm, &format!("ours to serve {name}"), 90, async || {
            has_hostname(services, &name, &mut hostnames).await
        })
        .await;
    }
    wait_synced(&mut ccm, 30).await;
    assert!(ccm.terminate().await.success(), "{}", ccm.log_text());
    Served::read(services, &clb, &nlb, hostnames, launched).await
}

/// Phase 2: the Go controller starts on what ours made, with ours' Lease (released by ours on SIGTERM, so it leads
/// at once). The resources' difference and its writes must be exactly what the migration guide says a rollback
/// changes.
async fn go_takes_over(
    world: &World,
    go_config: &GoCloudConfig,
    proxy: &FaultProxy,
    services: &Api<Service>,
    served: &Served,
    ours_made: &Snapshot,
) -> GoCcm {
    let aws = Aws::connect().await;
    let mut go = start_go(world, go_config).await;
    wait_go_synced(&mut go, served).await;
    // A few more seconds of running: anything it would still change shows now.
    tokio::time::sleep(Duration::from_secs(10)).await;
    go.check_running().unwrap_or_else(|e| panic!("{e}"));
    let taken_over = aws.snapshot(&world.network.vpc).await;
    let changes = diff(ours_made, &taken_over);
    let written = writes(proxy);
    println!("AWS resources, ours -> Go:\n{}", show(&changes));
    println!(
        "the Go controller's writes on takeover {written:?}:\n{}",
        list_requests(proxy, &written)
    );

    let expected = expected_rollback(&aws, world, served).await;
    assert_eq!(
        changes,
        expected,
        "the rollback changed other things than the migration guide says\nactual:\n{}expected:\n{}Go's log:\n{}",
        show(&changes),
        show(&expected),
        go.log_tail()
    );
    // What writes these changes: one Authorize for the NLB health rule. The rest is what the Go controller writes
    // on every sync (`EVERY_SYNC`).
    let mut expected_writes = counts(&[("AuthorizeSecurityGroupIngress", 1)]);
    for (action, n) in counts(EVERY_SYNC) {
        *expected_writes.entry(action).or_default() += n;
    }
    assert_eq!(
        written,
        expected_writes,
        "the Go controller's writes on takeover:\n{}",
        list_requests(proxy, &written)
    );
    assert_not_recreated(ours_made, &taken_over, served, services).await;
    go
}

/// The changes the migration guide announces for this rollback, from what ours made.
async fn expected_rollback(aws: &Aws, world: &World, served: &Served) -> BTreeMap<String, Delta> {
    let node_group = &served.node_group;
    let subnet_cidr = subnet_cidr(aws, world.network.subnet()).await;
    // Nothing on the Classic side: the Go controller asks only whether some rule of the node group names the
    // Classic ELB's group as its source (filter `ip-permission.group-id`), and ours' narrowed rules do, so it
    // adds no all-traffic rule. Its NLB health rule, which ours leaves out where the client rule covers it, comes
    // back.
    let port = served.nlb_node_port;
    BTreeMap::from([(
        format!("sg {node_group} ingress tcp {port}-{port} from {subnet_cidr}"),
        Delta::Added(format!("kubernetes.io/rule/nlb/health={}", served.nlb)),
    )])
}

/// What the Go controller writes on every sync of these two Services, whoever made their load balancers: the
/// Classic ELB's attributes (it compares its four defaults with the whole set AWS answers, `reflect.DeepEqual`,
/// which never match: AWS answers the draining timeout and the desync mitigation mode besides).
const EVERY_SYNC: &[(&str, u64)] = &[("ModifyLoadBalancerAttributes", 1)];

/// A second round: the Go controller restarted syncs both Services again; it writes only what it writes on every
/// sync and changes nothing.
async fn second_round(
    mut go: GoCcm,
    world: &World,
    go_config: &GoCloudConfig,
    proxy: &FaultProxy,
    served: &Served,
) -> GoCcm {
    let aws = Aws::connect().await;
    let before_facts = aws.snapshot(&world.network.vpc).await;
    let before = writes(proxy);
    go.terminate().await.unwrap();
    drop(go);
    // 1.20.2 does not release its Lease: the new process waits for it to expire (up to 15 s).
    let mut go = start_go(world, go_config).await;
    wait_go_synced(&mut go, served).await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    let again = ccm_testing::counts_since(&before, &writes(proxy));
    println!(
        "the restarted Go controller's writes {again:?}:\n{}",
        list_requests(proxy, &again)
    );
    let changes = diff(&before_facts, &aws.snapshot(&world.network.vpc).await);
    assert!(
        changes.is_empty(),
        "the restarted Go controller changed:\n{}",
        show(&changes)
    );
    assert_eq!(
        again,
        counts(EVERY_SYNC),
        "the restarted Go controller's writes:\n{}",
        list_requests(proxy, &again)
    );
    go
}

/// Phase 3: the Go controller deletes both Services, the NLB's first. Its NLB deletion is complete. Its Classic
/// deletion revokes none of ours' narrowed rules, which still name the Classic ELB's group when it deletes that
/// group: AWS refuses to delete a group that another group's rule names (`DependencyViolation`), moto does not, so
/// the proxy answers AWS's refusal until those rules are revoked. The Service then stays Terminating (the Go
/// controller retries every 10 s for 10 minutes, then gives up and leaks the group); the fix, `doctor --delete`,
/// revokes the rules, the refusal ends with them, and the deletion completes: the VPC is as before ours ran.
async fn go_deletes(
    go: &mut GoCcm,
    proxy: &FaultProxy,
    services: &Api<Service>,
    served: &Served,
    world: &World,
    baseline: &Snapshot,
    config: &GoCloudConfig,
) {
    let aws = Aws::connect().await;
    let before_delete = aws.snapshot(&world.network.vpc).await;
    let managed = managed_group(&before_delete, served);
    let before = writes(proxy);
    delete_and_wait(go, services, &served.nlb_service).await;
    let refusal = Fault::error(400, "DependencyViolation")
        .with_message(&format!("resource {managed} has a dependent object"));
    proxy.inject("DeleteSecurityGroup", refusal, 1000);
    services
        .delete(&served.clb_service, &Default::default())
        .await
        .unwrap();
    // Two refused attempts: the Go controller keeps retrying (every 10 s) and the Service waits.
    go_until(
        go,
        "the Go controller's second attempt at the group",
        60,
        async || proxy.requests("DeleteSecurityGroup") >= 2,
    )
    .await;
    assert_stuck(services, served, &aws, world, baseline, &before_delete).await;

    doctor_fixes(world, config, served, &managed).await;
    proxy.clear("DeleteSecurityGroup");
    delete_and_wait(go, services, &served.clb_service).await;
    // Each refusal is one line of its log (counting the proxy's requests around `clear` could race an attempt).
    let refused = go
        .log_text()
        .matches("Ignoring DependencyViolation while deleting load-balancer security group")
        .count();
    assert_deletion_writes(proxy, &before, u64::try_from(refused).unwrap());
    let left = diff(baseline, &aws.snapshot(&world.network.vpc).await);
    assert!(
        left.is_empty(),
        "after the fix and the Go controller's deletion, the VPC differs from before ours ran:\n{}",
        show(&left)
    );
    let tagged = common::nlb::Nlb(aws.v2.clone())
        .cluster_resources(&world.cluster_key())
        .await;
    assert!(
        tagged.is_empty(),
        "ELBv2 resources still tagged for the cluster: {tagged:?}"
    );
}

/// Deletes `name` (unless it is being deleted) and waits until the Go controller has removed its finalizer.
async fn delete_and_wait(go: &mut GoCcm, services: &Api<Service>, name: &str) {
    let svc = services.get_opt(name).await.unwrap();
    if svc.is_some_and(|s| s.metadata.deletion_timestamp.is_none()) {
        services.delete(name, &Default::default()).await.unwrap();
    }
    go_until(go, &format!("{name} gone"), 60, async || {
        services.get_opt(name).await.unwrap().is_none()
    })
    .await;
}

/// While the Classic ELB's group is refused: the load balancers and the target group are gone, the NLB's rules
/// too; the Classic ELB's group and ours' narrowed rules naming it are left, and the Service waits in Terminating
/// with its finalizer.
async fn assert_stuck(
    services: &Api<Service>,
    served: &Served,
    aws: &Aws,
    world: &World,
    baseline: &Snapshot,
    before_delete: &Snapshot,
) {
    let managed = managed_group(before_delete, served);
    let group = format!("sg {managed} ");
    let mut expected: BTreeMap<String, Delta> = before_delete
        .iter()
        .filter(|(k, _)| k.starts_with(&group))
        .map(|(k, v)| (k.clone(), Delta::Added(v.clone())))
        .collect();
    let node_group = &served.node_group;
    for port in &served.clb_node_ports {
        expected.insert(
            format!("sg {node_group} ingress tcp {port}-{port} from {managed}"),
            Delta::Added(format!("kubernetes.io/rule/elb={}", served.clb)),
        );
    }
    let left = diff(baseline, &aws.snapshot(&world.network.vpc).await);
    assert_eq!(
        left,
        expected,
        "the Go controller's deletion left other things than the migration guide says\nactual:\n{}expected:\n{}",
        show(&left),
        show(&expected),
    );
    let svc = services.get(&served.clb_service).await.unwrap();
    let finalizers = svc.metadata.finalizers.clone().unwrap_or_default();
    assert!(
        svc.metadata.deletion_timestamp.is_some()
            && finalizers.contains(&"service.kubernetes.io/load-balancer-cleanup".to_owned()),
        "the Classic ELB's Service waits in Terminating: {:?}",
        svc.metadata
    );
}

/// The Go controller's writes on deletion: both load balancers, the target group, the NLB's three node rules
/// (health, client, MTU), the Classic ELB's group (`refused` times refused, then once more). No revocation of
/// ours' narrowed rules: it looks for its own all-traffic rule only.
fn assert_deletion_writes(proxy: &FaultProxy, before: &BTreeMap<String, u64>, refused: u64) {
    let deleted = ccm_testing::counts_since(before, &writes(proxy));
    println!(
        "the Go controller's writes on deletion {deleted:?}:\n{}",
        list_requests(proxy, &deleted)
    );
    let expected = counts(&[
        ("DeleteLoadBalancer", 2),
        ("DeleteSecurityGroup", refused + 1),
        ("DeleteTargetGroup", 1),
        ("RevokeSecurityGroupIngress", 3),
    ]);
    assert_eq!(
        deleted,
        expected,
        "the Go controller's writes on deletion:\n{}",
        list_requests(proxy, &deleted)
    );
}

/// The fix: `doctor` lists exactly ours' narrowed rules, for a Classic ELB that no longer exists (the group is not
/// listed: its Service still exists), and `doctor --delete` revokes them.
async fn doctor_fixes(world: &World, config: &GoCloudConfig, served: &Served, managed: &str) {
    let file = world.dir.join("doctor.conf");
    config.write(&file).unwrap();
    let report = common::doctor(world, &file, &["--json"]);
    println!(
        "doctor --json during the deletion:\n{}",
        common::output_text(&report)
    );
    assert_eq!(report.status.code(), Some(1), "{}", common::output_text(&report));
    let report: serde_json::Value = serde_json::from_slice(&report.stdout).unwrap();
    let mut rules: Vec<String> = served
        .clb_node_ports
        .iter()
        .map(|port| format!("rule: tcp {port} from {managed}"))
        .collect();
    rules.sort();
    let expected = serde_json::json!([{
        "kind": "node-group-rules",
        "id": format!("{} {}", served.node_group, served.clb),
        "name": "default",
        "reason": format!("rules for Classic ELB {}, which does not exist", served.clb),
        "details": rules,
        "deletable": true,
    }]);
    let mut findings = report["findings"].clone();
    if let Some(details) = findings[0]["details"].as_array_mut() {
        details.sort_by(|a, b| a.as_str().cmp(&b.as_str()));
    }
    assert_eq!(findings, expected, "doctor's findings during the deletion");
    let deleted = common::doctor(world, &file, &["--delete"]);
    println!("doctor --delete:\n{}", common::output_text(&deleted));
    assert_eq!(
        deleted.status.code(),
        Some(0),
        "{}",
        common::output_text(&deleted)
    );
}

/// Tags the nodes' group (the VPC's default group, untagged in moto) `owned` for the cluster, as installers tag
/// node groups (EKS, kops). The Go controller looks for its node rules only on cluster-tagged groups: on an
/// untagged one it adds its all-traffic Classic rule beside ours' narrowed ones on takeover, and its deletion
/// revokes none of the node rules, its own included (seen while writing this test). That is its behaviour
/// without ours too; tagged, only what ours adds to it shows.
async fn tag_node_group(world: &World, aws: &Aws, node: &Launched) {
    let group = node_group(aws, &node.id).await;
    let tag = Tag::builder().key(world.cluster_key()).value("owned").build();
    aws.ec2
        .create_tags()
        .resources(group)
        .tags(tag)
        .send()
        .await
        .unwrap();
}

/// Starts the Go controller with ours' Lease and waits until it leads.
async fn start_go(world: &World, go_config: &GoCloudConfig) -> GoCcm {
    let options = GoCcmOptions::new(&world.dir, &format!("ccm-{}", world.cluster_id));
    let mut go = GoCcm::start(TestEnv::get(), go_config, &options).unwrap();
    go.wait_leading(Duration::from_secs(60))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    go
}

/// Waits until this Go process has ensured both Services' load balancers (its Event `EnsuredLoadBalancer` for
/// each, in its log).
async fn wait_go_synced(go: &mut GoCcm, served: &Served) {
    let ensured = |log: &str, name: &str| {
        let object = format!("object=\"default/{name}\"");
        log.lines()
            .any(|l| l.contains(&object) && l.contains("reason=\"EnsuredLoadBalancer\""))
    };
    let (clb, nlb) = (served.clb_service.clone(), served.nlb_service.clone());
    let log = go.log_path().to_owned();
    go_until(go, "the Go controller to sync both Services", 60, async || {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        ensured(&text, &clb) && ensured(&text, &nlb)
    })
    .await;
}

/// The Classic ELB's (only) security group, as a snapshot read it.
fn managed_group(facts: &Snapshot, served: &Served) -> String {
    facts
        .get(&format!("clb {} security-groups", served.clb))
        .cloned()
        .expect("the Classic ELB's managed group")
}

fn counts(items: &[(&str, u64)]) -> BTreeMap<String, u64> {
    items.iter().map(|(a, n)| ((*a).to_owned(), *n)).collect()
}
