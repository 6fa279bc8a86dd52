//! The release plan of an NLB (`aws-load-balancer-release-on-deletion`): hand-over tag first, the Service's
//! claim on it removed last, nothing deleted but leftover groups no listener uses.

use super::*;
use ccm_aws_api::{
    InstanceId, SecurityGroupId, Tags,
    elbv2::{ListenerV2, LoadBalancerV2, Target, TargetGroup, TargetHealth},
};

fn health(instance: &str) -> TargetHealth {
    TargetHealth {
        target: Target::instance(InstanceId::new(instance), 30080),
        state: "healthy".to_owned(),
        reason: None,
    }
}

#[test]
fn a_release_hands_over_first_deregisters_and_untags_last() {
    let lb = LoadBalancerV2::new("arn:lb", NAME, "x");
    // Used by the listener (not yet listed with the NLB, as AWS shows a moved listener's group late), and a
    // leftover no listener uses.
    let used = TargetGroup::new("arn:tg", "k8s-prod-web-x", "TCP", 30080);
    let leftover = TargetGroup::new("arn:old", "k8s-prod-web-y", "TCP", 30081);
    let deleted = DeleteObserved {
        load_balancer: Some(lb.clone()),
        target_groups: vec![used.clone(), leftover.clone()],
        managed_group: Some(SecurityGroupId::new("sg-m")),
        adopted: true,
        ..DeleteObserved::default()
    };
    let found = Observed {
        load_balancer: Some(lb),
        listeners: vec![ListenerV2::new("arn:l80", "arn:lb", 80, "TCP", "arn:tg")],
        target_groups: vec![
            ObservedTargetGroup {
                group: used,
                attributes: BTreeMap::new(),
                targets: vec![health("i-1"), health("i-2")],
            },
            ObservedTargetGroup {
                group: leftover,
                attributes: BTreeMap::new(),
                targets: Vec::new(),
            },
        ],
        managed_group: Some(ccm_aws_api::ec2::SecurityGroup::new(
            SecurityGroupId::new("sg-m"),
            "",
            None,
            Tags::new(),
        )),
        ..Observed::default()
    };
    let keys = vec![
        "kubernetes.io/cluster/c1".to_owned(),
        "kubernetes.io/service-name".to_owned(),
    ];
    let changes = plan_release(
        NAME,
        ("kubernetes.io/hand-over/c1", "prod/web"),
        &keys,
        &deleted,
        &found,
    );
    assert_eq!(
        kinds(&changes),
        [
            "add_tags",
            "deregister_targets",
            "delete_target_group",
            "remove_tags",
            "tag_security_group",
            "remove_tags"
        ]
    );
    assert!(matches!(&changes[0], Change::AddTags { arns, tags }
        if arns == &["arn:lb"] && tags["kubernetes.io/hand-over/c1"] == "prod/web"));
    assert!(matches!(&changes[1], Change::DeregisterTargets { name, targets }
        if name == "k8s-prod-web-x" && targets.len() == 2));
    assert!(matches!(&changes[2], Change::DeleteTargetGroup { arn, .. } if arn == "arn:old"));
    assert!(matches!(&changes[3], Change::RemoveTags { arns, keys: k }
        if arns == &["arn:l80", "arn:tg"] && k == &keys));
    assert!(matches!(&changes[5], Change::RemoveTags { arns, .. } if arns == &["arn:lb"]));
    // Nothing to release without the NLB.
    assert_eq!(
        plan_release(
            NAME,
            ("k", "v"),
            &keys,
            &DeleteObserved::default(),
            &Observed::default()
        ),
        []
    );
}

/// A consented recreation deletes the NLB: an adopted one is released, never deleted, unless the Service says
/// `aws-load-balancer-release-on-deletion: "false"`.
#[test]
fn an_adopted_nlb_is_recreated_only_when_its_deletion_would_delete_it() {
    let mut d = desired(&[], &[(80, 30080)]);
    let lb = LoadBalancerV2::new("arn:lb", NAME, "x");
    let mut o = Observed {
        load_balancer: Some(lb),
        ..Observed::default()
    };
    let recreate = [Change::DeleteLoadBalancer {
        name: NAME.to_owned(),
        arn: "arn:lb".to_owned(),
        recreate_because: Some("the scheme".to_owned()),
    }];
    assert!(crate::nlb::plan::protected_recreation(&d, &o, &recreate).is_ok());
    o.tags.insert(
        "arn:lb".to_owned(),
        Tags::from([("kubernetes.io/adopted".to_owned(), "true".to_owned())]),
    );
    let e = crate::nlb::plan::protected_recreation(&d, &o, &recreate).unwrap_err();
    assert!(matches!(e, crate::Error::AdoptedNotRecreated(_)), "{e}");
    assert!(
        e.to_string().contains("aws-load-balancer-release-on-deletion"),
        "{e}"
    );
    d.release_on_deletion = Some(false);
    assert!(crate::nlb::plan::protected_recreation(&d, &o, &recreate).is_ok());
}
