//! Drift detection against moto: a Classic ELB and an NLB changed by hand (a listener deleted, an instance
//! deregistered, a target group's health check changed) are reported by one bulk pass, naming what changed; the
//! next ensure repairs them and the following pass reports nothing.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::too_many_lines)]

use ccm_aws_api::{Elb, Elbv2, InstanceId, elbv2::TargetGroupHealthCheck};
use ccm_cloud_provider::{LoadBalancer, NodeView};
use ccm_load_balancers::annotations::Key;
use ccm_testing::lb_world::{service, uid};

const CLUSTER: &str = "kubernetes";

#[tokio::test]
async fn changes_by_hand_are_found_in_one_pass_and_repaired_by_an_ensure() {
    let w = ccm_testing::lb_world::world(113, "drift", false).await;
    let lbs = w.lbs(w.config.clone());
    let nodes: Vec<NodeView> = w.nodes();
    let refs: Vec<&NodeView> = nodes.iter().collect();
    let classic = service(&uid(), &[(80, 30080), (443, 30443)], &[]);
    let nlb = service(&uid(), &[(80, 30081)], &[(Key::Type, "nlb")]);
    for svc in [&classic, &nlb] {
        lbs.ensure_load_balancer(CLUSTER, svc, &refs).await.unwrap();
    }
    let both = [&classic, &nlb];
    assert_eq!(
        lbs.drifted(CLUSTER, &both, &refs).await.unwrap(),
        [],
        "as ensured: no drift"
    );

    // By hand: the Classic ELB loses a listener and an instance; the NLB's target group gets another check.
    let name = lbs.load_balancer_name(CLUSTER, &classic);
    w.adapter.elb().delete_listeners(&name, &[443]).await.unwrap();
    let gone = InstanceId::new(w.instances[0].clone());
    w.adapter
        .elb()
        .deregister_instances(&name, &[gone])
        .await
        .unwrap();
    let nlb_name = lbs.load_balancer_name(CLUSTER, &nlb);
    let arn = w
        .adapter
        .elbv2()
        .load_balancer(&nlb_name)
        .await
        .unwrap()
        .unwrap()
        .arn;
    let group = w.adapter.elbv2().target_groups(&arn).await.unwrap().remove(0);
    // (A threshold, which an ensure changes in place; an interval change moves the listener to a new group.)
    let check = TargetGroupHealthCheck {
        healthy_threshold: Some(7),
        ..group.health_check.clone()
    };
    w.adapter
        .elbv2()
        .modify_target_group(&group.arn, &check)
        .await
        .unwrap();

    let metrics = w.adapter.metrics().clone();
    let before: u64 = metrics.snapshot().values().map(|s| s.attempts).sum();
    let drifts = lbs.drifted(CLUSTER, &both, &refs).await.unwrap();
    let after: u64 = metrics.snapshot().values().map(|s| s.attempts).sum();
    assert_eq!(
        after - before,
        3,
        "one listing per kind, whatever the number of Services"
    );
    assert_eq!(drifts.len(), 2, "{drifts:?}");
    assert_eq!(drifts[0].service, "moto/web");
    assert_eq!(
        drifts[0].what,
        [
            "listener 443 missing".to_owned(),
            format!("instances {} not registered", w.instances[0])
        ]
    );
    assert_eq!(
        drifts[1].what,
        [format!("health check of target group {} changed", group.name)]
    );

    for svc in [&classic, &nlb] {
        lbs.ensure_load_balancer(CLUSTER, svc, &refs).await.unwrap();
    }
    let left = lbs.drifted(CLUSTER, &both, &refs).await.unwrap();
    assert_eq!(left, [], "repaired: {left:?}");
    // Both Services are `moto/web` here (two UIDs): the Classic one's deletion sweeps the NLB side by that
    // name, and must leave the live NLB's target groups (attached) alone.
    lbs.ensure_load_balancer_deleted(CLUSTER, &classic).await.unwrap();
    assert!(
        w.adapter
            .elbv2()
            .target_group(&group.name)
            .await
            .unwrap()
            .is_some()
    );
    lbs.ensure_load_balancer_deleted(CLUSTER, &nlb).await.unwrap();
    assert!(
        w.adapter
            .elbv2()
            .load_balancer(&nlb_name)
            .await
            .unwrap()
            .is_none()
    );
}
