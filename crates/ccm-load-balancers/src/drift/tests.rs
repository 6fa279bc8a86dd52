use ccm_aws_api::{InstanceId, SecurityGroupId};

use super::*;
use crate::{
    annotations::Key,
    classic::tests::{converged as classic_converged, desired_for},
    nlb::tests::{converged as nlb_converged, desired as nlb_desired},
};

#[test]
fn a_classic_elb_as_ensured_has_no_drift_and_each_change_by_hand_is_named() {
    let desired = desired_for(&[], &[(80, 30080), (443, 30443)], &["i-1", "i-2"]);
    let lb = classic_converged(&desired).load_balancer.unwrap();
    assert_eq!(classic_differences(&desired, &lb), Vec::<String>::new());

    let mut changed = lb.clone();
    changed.listeners.retain(|l| l.load_balancer_port != 443);
    changed.listeners[0].instance_port = 31000;
    changed.instances.retain(|i| i.as_str() != "i-2");
    changed.instances.push(InstanceId::new("i-9"));
    changed.health_check.as_mut().unwrap().interval = 300;
    changed.security_groups.push(SecurityGroupId::new("sg-by-hand"));
    assert_eq!(
        classic_differences(&desired, &changed),
        [
            "listener 80 changed",
            "listener 443 missing",
            "health check changed",
            "security groups changed",
            "instances i-2 not registered",
            "instances i-9 registered by someone else",
        ]
    );
    // A scheme only a recreation changes is drift only where the Service consents to one.
    let mut internal = lb;
    internal.internal = true;
    assert_eq!(classic_differences(&desired, &internal), Vec::<String>::new());
    let mut consenting = desired;
    consenting.allow_recreation = true;
    assert_eq!(classic_differences(&consenting, &internal), ["scheme internal"]);
}

#[test]
fn an_nlb_as_ensured_has_no_drift_and_its_target_groups_are_checked() {
    let desired = nlb_desired(&[], &[(80, 30080), (443, 30443)]);
    let observed = nlb_converged(&desired);
    let lb = observed.load_balancer.unwrap();
    let groups: Vec<TargetGroup> = observed.target_groups.into_iter().map(|g| g.group).collect();
    assert_eq!(nlb_differences(&desired, &lb, &groups), Vec::<String>::new());

    let mut changed = groups.clone();
    changed[0].load_balancer_arns.clear();
    changed[1].health_check.interval_seconds = Some(300);
    let what = nlb_differences(&desired, &lb, &changed);
    assert_eq!(what.len(), 2, "{what:?}");
    assert!(
        what[0].ends_with("detached") && what[1].starts_with("health check"),
        "{what:?}"
    );
    assert_eq!(
        nlb_differences(&desired, &lb, &groups[..1]),
        [format!("target group {} is gone", groups[1].name)]
    );
}

/// A target group under its successor name (the upstream name held by a predecessor's NLB) is no drift; the
/// predecessor's group is not taken for this NLB's.
#[test]
fn an_nlb_whose_group_has_its_successor_name_has_no_drift() {
    let desired = nlb_desired(&[], &[(80, 30080)]);
    let observed = nlb_converged(&desired);
    let lb = observed.load_balancer.unwrap();
    let ours = observed.target_groups[0].group.clone();
    let mut predecessors = ours.clone();
    predecessors.arn = "arn:predecessor-group".into();
    predecessors.load_balancer_arns = vec!["arn:predecessor-nlb".into()];
    let mut renamed = ours;
    renamed.name = nlb::successor_target_group_name(&renamed.name, &desired.name);
    assert_eq!(
        nlb_differences(&desired, &lb, &[predecessors.clone(), renamed]),
        Vec::<String>::new()
    );
    let what = nlb_differences(&desired, &lb, &[predecessors]);
    assert!(what[0].ends_with("detached"), "{what:?}");
}

#[tokio::test]
async fn invalid_services_and_other_flavours_are_left_to_their_syncs() {
    let invalid = crate::classic::tests::service(&[(Key::ConnectionIdleTimeout, "0")], &[(80, 30080)]);
    let external = crate::classic::tests::service(&[(Key::Type, "nlb-ip")], &[(80, 30080)]);
    let elb = ccm_aws_api::elb::MockElb::new();
    let elbv2 = ccm_aws_api::elbv2::MockElbv2::new();
    let drifts = drifted(
        &elb,
        &elbv2,
        &crate::classic::tests::config(),
        "k",
        &[&invalid, &external],
        &[],
    )
    .await
    .unwrap();
    assert!(drifts.is_empty(), "no AWS call, no drift");
}
