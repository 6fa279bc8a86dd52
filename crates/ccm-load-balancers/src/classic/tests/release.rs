//! The release plan of a Classic ELB (`aws-load-balancer-release-on-deletion`): hand-over tag first, the
//! Service's claim removed last, nothing deleted.

use super::*;

#[test]
fn a_release_hands_over_first_deregisters_and_untags_last() {
    let mut lb = ClassicLoadBalancer::new(NAME, "dns");
    lb.instances = vec![InstanceId::new("i-1"), InstanceId::new("i-2")];
    let observed = DeleteObserved {
        load_balancer: Some(lb),
        groups: vec![SecurityGroupId::new("sg-lb")],
        references: vec![(
            SecurityGroupId::new("sg-node"),
            SecurityGroupId::new("sg-lb"),
            vec![SourceRule::narrow(30080, NAME)],
        )],
        given_source: None,
        adopted: true,
    };
    let keys = vec!["kubernetes.io/cluster/c1".to_owned()];
    let changes = crate::classic::plan_release(("kubernetes.io/hand-over/c1", "prod/web"), &keys, &observed);
    let kinds: Vec<String> = changes
        .iter()
        .map(|c| {
            serde_json::to_value(c).unwrap()["change"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "add_tags",
            "revoke_node_access",
            "deregister_instances",
            "tag_security_group",
            "remove_tags"
        ]
    );
    assert!(
        matches!(&changes[0], Change::AddTags { tags } if tags["kubernetes.io/hand-over/c1"] == "prod/web")
    );
    assert!(matches!(&changes[2], Change::DeregisterInstances { instances } if instances.len() == 2));
    assert!(matches!(&changes[4], Change::RemoveTags { keys: k } if k == &keys));
    assert!(!changes.iter().any(|c| matches!(
        c,
        Change::DeleteLoadBalancer { .. } | Change::DeleteSecurityGroup { .. }
    )));
    let gone = DeleteObserved {
        load_balancer: None,
        ..observed
    };
    assert_eq!(crate::classic::plan_release(("k", "v"), &keys, &gone), []);
}

/// A consented recreation deletes the Classic ELB: an adopted one only when its Service says
/// `aws-load-balancer-release-on-deletion: "false"`.
#[test]
fn an_adopted_classic_elb_is_recreated_only_when_its_deletion_would_delete_it() {
    use crate::flavour::{Classic, LoadBalancerFlavour};
    let mut d = desired_for(
        &[(Key::Internal, "true"), (Key::AllowRecreation, "true")],
        &[(80, 30080)],
        &["i-1"],
    );
    let mut o = converged(&d);
    let recreate = [Change::DeleteLoadBalancer {
        name: NAME.to_owned(),
        recreate_because: Some("the scheme".to_owned()),
    }];
    assert!(Classic::check_plan(&d, &o, &recreate).is_ok());
    o.tags
        .insert("kubernetes.io/adopted".to_owned(), "true".to_owned());
    let e = Classic::check_plan(&d, &o, &recreate).unwrap_err();
    assert!(matches!(e, crate::Error::AdoptedNotRecreated(_)), "{e}");
    d.release_on_deletion = Some(false);
    assert!(Classic::check_plan(&d, &o, &recreate).is_ok());
}
