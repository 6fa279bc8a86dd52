//! The node-target port: every contract method that takes Nodes asks it first and serves only the Nodes it keeps.

use std::sync::{
    Arc,
    atomic::{AtomicUsize, Ordering},
};

use ccm_cloud_provider::{NodeView, Notice};

use super::*;
use crate::{NodeTargets, TargetsFuture};

/// Keeps every Node but `refused`, with a Warning notice on it; counts the calls.
#[derive(Default)]
struct Refusing {
    refused: &'static str,
    asked: AtomicUsize,
}

impl NodeTargets for Refusing {
    fn targets<'a, 'n: 'a>(&'a self, nodes: &'a [&'n NodeView]) -> TargetsFuture<'a, 'n> {
        self.asked.fetch_add(1, Ordering::SeqCst);
        let (refused, kept): (Vec<&NodeView>, Vec<&NodeView>) =
            nodes.iter().partition(|n| n.name == self.refused);
        let notices = refused
            .iter()
            .map(|n| Notice::warning_on_node(n.name.clone(), "InstanceNotInCluster", "refused"))
            .collect();
        Box::pin(async move { Ok((kept, notices)) })
    }
}

/// A steady Classic ELB registering `i-1`, given `i-1`'s Node and a Node the port refuses: were the refused one
/// served by any method, its instance would be registered (a write the mocks do not expect), planned or reported
/// as drift.
#[tokio::test]
async fn every_method_taking_nodes_serves_only_the_targets_the_port_keeps() {
    let svc = service(&[], &[(80, 30080)]);
    let (own, forged) = (node("i-1"), node("i-forged"));
    let spec = crate::parse_service(&svc).unwrap();
    let mut c = config();
    c.manage_node_security_groups = false;
    let desired = crate::classic::build(&spec, &[&own], &c, &[SubnetId::new("subnet-a")]).unwrap();
    let (ec2, mut elb) = steady_classic_ports(&desired);
    let lb = steady_classic_lb(&desired);
    elb.expect_all_load_balancers().returning(move || {
        let lb = lb.clone();
        Box::pin(async move { Ok(vec![lb]) })
    });
    let port = Arc::new(Refusing {
        refused: "node-i-forged",
        ..Refusing::default()
    });
    let lbs = AwsLoadBalancers::new(ec2, elb, MockElbv2::new(), c).with_node_targets(port.clone());
    let nodes = [&own, &forged];

    lbs.ensure_load_balancer("k", &svc, &nodes).await.unwrap();
    let ensured = lbs
        .ensure_load_balancer_reporting("k", &svc, &nodes)
        .await
        .unwrap();
    assert_eq!(ensured.notices.len(), 1, "{:?}", ensured.notices);
    assert_eq!(ensured.notices[0].node.as_deref(), Some("node-i-forged"));
    // Forgotten, so the host update plans from reads rather than skipping as "the same targets".
    lbs.memory.settle_targets::<()>(svc.metadata.uid.as_deref(), None);
    lbs.update_load_balancer("k", &svc, &nodes).await.unwrap();
    assert_eq!(lbs.drifted("k", &[&svc], &nodes).await.unwrap(), []);
    let plan = lbs.plan_load_balancer("k", &svc, &nodes).await.unwrap().unwrap();
    assert!(plan.changes.is_empty(), "{plan:?}");
    assert_eq!(port.asked.load(Ordering::SeqCst), 5, "asked once per call");
}
