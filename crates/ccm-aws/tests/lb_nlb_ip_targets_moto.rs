//! NLB IP targets (`aws-load-balancer-nlb-target-type: ip`) against moto through the real adapter: target groups
//! of type `ip` on the target port, the ready pods of the endpoint-slice controller's slices registered (never
//! an address of a hand-written slice), a rollout costing one deregistration and one registration, updates
//! without endpoints leaving the targets alone, the nodes' rules on the pods' port, a switch back to instance
//! targets under the same NLB, and a clean deletion.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::too_many_lines)]

use std::{collections::BTreeMap, net::IpAddr};

use ccm_aws_api::{Elbv2, elbv2::TargetGroup};
use ccm_cloud_provider::{Backends, Endpoint, EndpointPort, LoadBalancer, NodeView, ServiceEndpoints};
use ccm_load_balancers::{annotations::Key, nlb::node_rules};
use ccm_testing::lb_world::{Lbs, World, diff, mutation_counts, uid};
use k8s_openapi::api::core::v1::Service;

const CLUSTER_NAME: &str = "kubernetes";
const OCTET: u8 = 180;

/// A pod at `10.180.0.<last>` serving the Service's one port (`p80-tcp`) on 8080.
fn pod(last: u8) -> Endpoint {
    let ports = vec![EndpointPort::new("p80-tcp", 8080, "TCP")];
    Endpoint::ready(IpAddr::from([10, OCTET, 0, last]), None, ports)
}

fn terminating(last: u8) -> Endpoint {
    pod(last).with_conditions(false, true, true)
}

/// The mutating calls of `run`.
async fn calls<F: Future<Output = ()>>(w: &World, run: F) -> BTreeMap<&'static str, u64> {
    let metrics = w.adapter.metrics().clone();
    let before = mutation_counts(&metrics);
    run.await;
    diff(&mutation_counts(&metrics), &before)
}

async fn ensure(lbs: &Lbs, w: &World, svc: &Service, pods: &[Endpoint]) -> BTreeMap<&'static str, u64> {
    let nodes = w.nodes();
    let nodes: Vec<&NodeView> = nodes.iter().collect();
    let endpoints = ServiceEndpoints::new(pods.iter().cloned());
    calls(w, async {
        let backends = Backends::with_endpoints(&nodes, &endpoints);
        lbs.ensure_load_balancer_with(CLUSTER_NAME, svc, backends)
            .await
            .unwrap();
    })
    .await
}

async fn update(
    lbs: &Lbs,
    w: &World,
    svc: &Service,
    pods: Option<&[Endpoint]>,
) -> BTreeMap<&'static str, u64> {
    let nodes = w.nodes();
    let nodes: Vec<&NodeView> = nodes.iter().collect();
    let endpoints = pods.map(|p| ServiceEndpoints::new(p.iter().cloned()));
    calls(w, async {
        let backends = Backends::new(&nodes, endpoints.as_ref());
        lbs.update_load_balancer_with(CLUSTER_NAME, svc, backends)
            .await
            .unwrap();
    })
    .await
}

/// The target groups of the world's VPC (one NLB per world).
async fn groups(w: &World) -> Vec<TargetGroup> {
    let all = w.adapter.elbv2().all_target_groups().await.unwrap();
    all.into_iter()
        .filter(|g| g.vpc_id.as_ref().is_some_and(|v| v.as_str() == w.vpc))
        .collect()
}

/// The targets of `group` that are not leaving, as `address:port`, sorted.
async fn targets(w: &World, group: &TargetGroup) -> Vec<String> {
    let health = w.adapter.elbv2().target_health(&group.arn).await.unwrap();
    let mut out: Vec<String> = health
        .into_iter()
        .filter(|h| h.state != "draining")
        .map(|h| format!("{}:{}", h.target.id, h.target.port))
        .collect();
    out.sort();
    out
}

/// The TCP ports the nodes' group opens for load balancer `name` (client and health rules), from `sources`
/// (all when empty).
async fn node_ports_from(w: &World, name: &str, sources: &[&str]) -> Vec<i32> {
    let group = w.group(&w.node_group).await.unwrap();
    let mut ports: Vec<i32> = node_rules::described_rules(&group)
        .into_iter()
        .filter(|r| r.description.ends_with(name))
        .filter(|r| sources.is_empty() || sources.contains(&r.rule.source.as_str()))
        .map(|r| r.rule.from_port)
        .collect();
    ports.sort_unstable();
    ports.dedup();
    ports
}

async fn node_ports(w: &World, name: &str) -> Vec<i32> {
    node_ports_from(w, name, &[]).await
}

fn address(last: u8) -> String {
    format!("10.{OCTET}.0.{last}:8080")
}

#[tokio::test]
async fn an_nlb_with_ip_targets_follows_its_pods_and_is_deleted_clean() {
    let w = ccm_testing::lb_world::world(OCTET, "iptargets", true).await;
    let lbs = w.lbs(w.config.clone());
    let svc = ccm_testing::lb_world::service(
        &uid(),
        &[(80, 30080)],
        &[(Key::Type, "nlb"), (Key::NlbTargetType, "ip")],
    );
    let name = lbs.load_balancer_name(CLUSTER_NAME, &svc);
    // Two pods, and an address only a hand-written slice lists (a Service without a selector could name any).
    let pods = [pod(10), pod(11), pod(99).managed(false)];
    let made = ensure(&lbs, &w, &svc, &pods).await;
    assert_eq!(made.get("RegisterTargets"), Some(&1), "{made:?}");
    let [group] = &groups(&w).await[..] else { panic!() };
    assert_eq!((group.target_type.as_str(), group.port), ("ip", 8080));
    assert_eq!(group.health_check.port.as_deref(), Some("traffic-port"));
    assert_eq!(targets(&w, group).await, [address(10), address(11)]);
    assert_eq!(
        node_ports(&w, &name).await,
        [8080],
        "the pods' port, not the node port"
    );
    // From the NLB's subnets only: without client IP preservation no client reaches the pods directly.
    let world_open = node_ports_from(&w, &name, &["0.0.0.0/0"]).await;
    assert!(world_open.is_empty(), "{world_open:?}");
    assert_eq!(ensure(&lbs, &w, &svc, &pods).await, BTreeMap::new(), "steady");

    // A rollout step: pod 11 terminating, pod 12 ready: one deregistration, one registration.
    let step = [pod(10), terminating(11), pod(12)];
    assert_eq!(
        update(&lbs, &w, &svc, Some(&step)).await,
        BTreeMap::from([("DeregisterTargets", 1), ("RegisterTargets", 1)])
    );
    assert_eq!(targets(&w, group).await, [address(10), address(12)]);
    // The same endpoints again, and an update that knows none (a plain node sync): nothing.
    assert_eq!(update(&lbs, &w, &svc, Some(&step)).await, BTreeMap::new());
    assert_eq!(update(&lbs, &w, &svc, None).await, BTreeMap::new());
    assert_eq!(targets(&w, group).await, [address(10), address(12)]);

    // Back to instance targets: a new group swapped in under the same NLB, the IP group deleted.
    let arn = w.adapter.elbv2().load_balancer(&name).await.unwrap().unwrap().arn;
    let instance = {
        let mut svc = svc.clone();
        let annotations = svc.metadata.annotations.as_mut().unwrap();
        annotations.remove(Key::NlbTargetType.name());
        svc
    };
    let made = ensure(&lbs, &w, &instance, &step).await;
    assert_eq!(made.get("DeleteLoadBalancer"), None, "{made:?}");
    assert_eq!(made.get("DeleteTargetGroup"), Some(&1), "{made:?}");
    assert_eq!(
        w.adapter.elbv2().load_balancer(&name).await.unwrap().unwrap().arn,
        arn
    );
    let [group] = &groups(&w).await[..] else { panic!() };
    assert_eq!((group.target_type.as_str(), group.port), ("instance", 30080));
    assert_eq!(targets(&w, group).await.len(), w.instances.len());
    assert_eq!(node_ports(&w, &name).await, [30080]);
    assert_eq!(
        node_ports_from(&w, &name, &["0.0.0.0/0"]).await,
        [30080],
        "instance targets see the clients"
    );

    // IP targets again, then the deletion: nothing of the NLB is left, on AWS or on the nodes' group.
    ensure(&lbs, &w, &svc, &step).await;
    let made = calls(&w, async {
        lbs.ensure_load_balancer_deleted(CLUSTER_NAME, &svc)
            .await
            .unwrap();
    })
    .await;
    assert_eq!(made.get("DeleteLoadBalancer"), Some(&1), "{made:?}");
    assert!(w.adapter.elbv2().load_balancer(&name).await.unwrap().is_none());
    let left = groups(&w).await;
    assert!(left.is_empty(), "{left:?}");
    assert_eq!(node_ports(&w, &name).await, Vec::<i32>::new());
}

/// `allocateLoadBalancerNodePorts: false`: a Service without node ports is served with IP targets (the pods are
/// reached directly), where instance targets refuse it.
#[tokio::test]
async fn ip_targets_serve_a_service_without_node_ports() {
    let w = ccm_testing::lb_world::world(181, "ipnoport", true).await;
    let lbs = w.lbs(w.config.clone());
    let mut svc = ccm_testing::lb_world::service(
        &uid(),
        &[(80, 30080)],
        &[(Key::Type, "nlb"), (Key::NlbTargetType, "ip")],
    );
    let spec = svc.spec.as_mut().unwrap();
    spec.allocate_load_balancer_node_ports = Some(false);
    spec.ports.as_mut().unwrap()[0].node_port = None;
    let pods = [pod(10)];
    let made = ensure(&lbs, &w, &svc, &pods).await;
    assert_eq!(made.get("CreateLoadBalancer"), Some(&1), "{made:?}");
    let [group] = &groups(&w).await[..] else { panic!() };
    assert_eq!(targets(&w, group).await, [address(10)]);
    lbs.ensure_load_balancer_deleted(CLUSTER_NAME, &svc)
        .await
        .unwrap();
    assert!(groups(&w).await.is_empty());
}
