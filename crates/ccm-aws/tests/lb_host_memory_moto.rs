//! Host updates planned from memory, through the real adapter against moto: after an ensure, a node joining
//! costs one register call per Classic ELB and per NLB target group (and one `DescribeInstances` for the new
//! instance when the nodes' rules are managed, shared by every load balancer), a node leaving one deregister
//! call; after a failed apply, a drift report or in a fresh process the next host update reads again.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::too_many_lines)]

use std::collections::BTreeMap;

use ccm_aws_api::{Elb, InstanceId};
use ccm_aws_sdk::CallMetrics;
use ccm_cloud_provider::{LoadBalancer, NodeView};
use ccm_load_balancers::{AwsLoadBalancers, annotations::Key};
use ccm_testing::{
    crash::CrashAt,
    lb_world::{self as world, World, diff, uid},
};
use k8s_openapi::api::core::v1::Service;

const CLUSTER: &str = "kubernetes";

/// Calls so far, every operation, by operation.
fn calls(metrics: &CallMetrics) -> BTreeMap<&'static str, u64> {
    let mut out = BTreeMap::new();
    for (k, s) in metrics.snapshot() {
        *out.entry(k.operation).or_default() += s.attempts;
    }
    out
}

/// The calls `f` makes (boxed: the provider's futures are large in debug builds).
async fn counted<F: Future<Output = ()>>(w: &World, f: F) -> BTreeMap<&'static str, u64> {
    let before = calls(w.adapter.metrics());
    Box::pin(f).await;
    diff(&calls(w.adapter.metrics()), &before)
}

/// A one-port Service named `name` with `annotations`.
fn service(name: &str, annotations: &[(Key, &str)]) -> Service {
    let mut svc = world::service(&uid(), &[(80, 30080)], annotations);
    svc.metadata.name = Some(name.to_owned());
    svc
}

fn refs(nodes: &[NodeView]) -> Vec<&NodeView> {
    nodes.iter().collect()
}

async fn registered(w: &World, lbs: &impl LoadBalancer, svc: &Service) -> Vec<String> {
    let name = lbs.load_balancer_name(CLUSTER, svc);
    let lb = w.adapter.elb().load_balancer(&name).await.unwrap().unwrap();
    let mut ids: Vec<String> = lb.instances.iter().map(ToString::to_string).collect();
    ids.sort();
    ids
}

fn ops(pairs: &[(&'static str, u64)]) -> BTreeMap<&'static str, u64> {
    pairs.iter().copied().collect()
}

#[tokio::test]
async fn a_join_and_a_leave_after_ensures_cost_only_the_writes() {
    let w = world::world(150, "mem", false).await;
    let lbs = w.lbs(w.config.clone());
    let nodes = w.nodes();
    let (two, three) = (refs(&nodes[..2]), refs(&nodes));
    let services = [
        service("web-a", &[]),
        service("web-b", &[]),
        service("web-n", &[(Key::Type, "nlb")]),
    ];
    for svc in &services {
        lbs.ensure_load_balancer(CLUSTER, svc, &two).await.unwrap();
    }
    let join = counted(
        &w,
        Box::pin(async {
            for svc in &services {
                lbs.update_load_balancer(CLUSTER, svc, &three).await.unwrap();
            }
        }),
    )
    .await;
    // The new instance is described once for the three load balancers (its group is known from the ensures).
    let expected = ops(&[
        ("DescribeInstances", 1),
        ("RegisterInstancesWithLoadBalancer", 2),
        ("RegisterTargets", 1),
    ]);
    assert_eq!(join, expected);
    assert_eq!(registered(&w, &lbs, &services[0]).await, w.instances);

    let leave = counted(
        &w,
        Box::pin(async {
            for svc in &services {
                lbs.update_load_balancer(CLUSTER, svc, &two).await.unwrap();
            }
        }),
    )
    .await;
    let expected = ops(&[
        ("DeregisterInstancesFromLoadBalancer", 2),
        ("DeregisterTargets", 1),
    ]);
    assert_eq!(leave, expected);
    assert_eq!(registered(&w, &lbs, &services[1]).await, w.instances[..2]);

    // Without the nodes' rules, nothing about instances is needed: the writes alone.
    let lbs = w.lbs(w.config.clone().with_node_security_group_rules(false));
    let svc = service("web-c", &[]);
    lbs.ensure_load_balancer(CLUSTER, &svc, &two).await.unwrap();
    let join = counted(
        &w,
        Box::pin(async {
            lbs.update_load_balancer(CLUSTER, &svc, &three).await.unwrap();
        }),
    )
    .await;
    assert_eq!(join, ops(&[("RegisterInstancesWithLoadBalancer", 1)]));
    for svc in services.iter().chain([&svc]) {
        lbs.ensure_load_balancer_deleted(CLUSTER, svc).await.unwrap();
    }
}

#[tokio::test]
async fn after_a_failed_apply_the_next_update_reads_again() {
    let w = world::world(151, "mem", false).await;
    // Only the ELB's mutating calls are counted; the 1000th fails.
    let crash = CrashAt::new(1000);
    let lbs = AwsLoadBalancers::new(
        w.adapter.ec2().clone(),
        crash.guard(w.adapter.elb().clone()),
        w.adapter.elbv2().clone(),
        w.config.clone().with_node_security_group_rules(false),
    );
    let nodes = w.nodes();
    let (one, two, three) = (refs(&nodes[..1]), refs(&nodes[..2]), refs(&nodes));
    let svc = service("web", &[]);
    lbs.ensure_load_balancer(CLUSTER, &svc, &one).await.unwrap();
    let join = counted(
        &w,
        Box::pin(async {
            lbs.update_load_balancer(CLUSTER, &svc, &two).await.unwrap();
        }),
    )
    .await;
    assert_eq!(join, ops(&[("RegisterInstancesWithLoadBalancer", 1)]));

    // The next mutating call (the ELB's) fails, as if the process died before it.
    crash.fail_next();
    lbs.update_load_balancer(CLUSTER, &svc, &three).await.unwrap_err();
    let retry = counted(
        &w,
        Box::pin(async {
            lbs.update_load_balancer(CLUSTER, &svc, &three).await.unwrap();
        }),
    )
    .await;
    assert_eq!(retry.get("DescribeLoadBalancers"), Some(&1), "{retry:?}");
    assert_eq!(
        retry.get("RegisterInstancesWithLoadBalancer"),
        Some(&1),
        "{retry:?}"
    );
    assert_eq!(registered(&w, &lbs, &svc).await, w.instances);
    lbs.ensure_load_balancer_deleted(CLUSTER, &svc).await.unwrap();
}

#[tokio::test]
async fn drift_and_a_fresh_process_read_again() {
    let w = world::world(152, "mem", false).await;
    let lbs = w.lbs(w.config.clone());
    let nodes = w.nodes();
    let (two, three) = (refs(&nodes[..2]), refs(&nodes));
    let svc = service("web", &[]);
    let name = lbs.load_balancer_name(CLUSTER, &svc);
    lbs.ensure_load_balancer(CLUSTER, &svc, &two).await.unwrap();
    // By hand, behind the controller's back: the first instance is deregistered.
    let first = InstanceId::new(w.instances[0].clone());
    w.adapter
        .elb()
        .deregister_instances(&name, &[first])
        .await
        .unwrap();
    // Planned from memory, the join does not see it...
    let join = counted(
        &w,
        Box::pin(async {
            lbs.update_load_balancer(CLUSTER, &svc, &three).await.unwrap();
        }),
    )
    .await;
    assert_eq!(
        join,
        ops(&[("DescribeInstances", 1), ("RegisterInstancesWithLoadBalancer", 1)])
    );
    assert_eq!(registered(&w, &lbs, &svc).await, w.instances[1..]);
    // ...drift detection does, and the next host update reads again and repairs it.
    let drifts = Box::pin(lbs.drifted(CLUSTER, &[&svc], &three)).await.unwrap();
    assert_eq!(drifts.len(), 1, "{drifts:?}");
    let repair = counted(
        &w,
        Box::pin(async {
            lbs.update_load_balancer(CLUSTER, &svc, &three).await.unwrap();
        }),
    )
    .await;
    assert_eq!(repair.get("DescribeLoadBalancers"), Some(&1), "{repair:?}");
    assert_eq!(registered(&w, &lbs, &svc).await, w.instances);

    // A fresh process has no memory: its first host update reads, its next ones only describe the instance
    // it has not seen.
    let fresh = w.lbs(w.config.clone());
    let leave = counted(
        &w,
        Box::pin(async {
            fresh.update_load_balancer(CLUSTER, &svc, &two).await.unwrap();
        }),
    )
    .await;
    assert_eq!(leave.get("DescribeLoadBalancers"), Some(&1), "{leave:?}");
    assert_eq!(
        leave.get("DeregisterInstancesFromLoadBalancer"),
        Some(&1),
        "{leave:?}"
    );
    let join = counted(
        &w,
        Box::pin(async {
            fresh.update_load_balancer(CLUSTER, &svc, &three).await.unwrap();
        }),
    )
    .await;
    assert_eq!(
        join,
        ops(&[("DescribeInstances", 1), ("RegisterInstancesWithLoadBalancer", 1)])
    );
    assert_eq!(registered(&w, &fresh, &svc).await, w.instances);
    fresh.ensure_load_balancer_deleted(CLUSTER, &svc).await.unwrap();
}

/// A host update of each of `services` to `nodes`.
async fn update_each(lbs: &impl LoadBalancer, services: &[&Service], nodes: &[&NodeView]) {
    for svc in services {
        lbs.update_load_balancer(CLUSTER, svc, nodes).await.unwrap();
    }
}

/// With Nodes in pools (`target-node-labels`), a Node joining one pool costs the other pool's load balancer no
/// call at all, nor does a host update that leaves a load balancer's targets as they are. A Service this process
/// never ensured, or whose load balancer it deleted, is updated whatever its targets.
#[tokio::test]
async fn a_node_outside_a_services_targets_costs_that_load_balancer_nothing() {
    let w = world::world(153, "pool", false).await;
    let lbs = w.lbs(w.config.clone());
    let pool = |i: usize, p: &str| world::node(&w.instances[i], &[("pool", p)]);
    let (n0, n1, n2) = (pool(0, "a"), pool(1, "b"), pool(2, "a"));
    let a = service("pool-a", &[(Key::TargetNodeLabels, "pool=a")]);
    let b = service("pool-b", &[(Key::TargetNodeLabels, "pool=b")]);
    for svc in [&a, &b] {
        lbs.ensure_load_balancer(CLUSTER, svc, &[&n0, &n1]).await.unwrap();
    }
    let all = [&n0, &n1, &n2];
    // A Node of pool a joins: only a's load balancer hears of it.
    let join = counted(&w, update_each(&lbs, &[&a, &b], &all)).await;
    assert_eq!(
        join,
        ops(&[("DescribeInstances", 1), ("RegisterInstancesWithLoadBalancer", 1)])
    );
    assert_eq!(registered(&w, &lbs, &b).await, [w.instances[1].clone()]);
    // The same Nodes again: nothing to do for either.
    assert_eq!(counted(&w, update_each(&lbs, &[&a, &b], &all)).await, ops(&[]));

    // A fresh process knows no targets: it updates (reads) whatever they are.
    let fresh = w.lbs(w.config.clone());
    let first = counted(
        &w,
        Box::pin(async {
            fresh
                .update_load_balancer(CLUSTER, &b, &[&n0, &n1, &n2])
                .await
                .unwrap();
        }),
    )
    .await;
    assert_eq!(first.get("DescribeLoadBalancers"), Some(&1), "{first:?}");

    // Deleted: the targets are forgotten with the load balancer.
    lbs.ensure_load_balancer_deleted(CLUSTER, &a).await.unwrap();
    let gone = lbs.update_load_balancer(CLUSTER, &a, &[&n0, &n1, &n2]).await;
    assert!(gone.is_err(), "a deleted load balancer is not skipped: {gone:?}");
    lbs.ensure_load_balancer_deleted(CLUSTER, &b).await.unwrap();
}
