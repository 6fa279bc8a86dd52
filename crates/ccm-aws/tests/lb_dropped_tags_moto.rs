//! Keys dropped from `aws-load-balancer-additional-resource-tags` are removed from every resource that got them
//! (against moto, both flavours): the Classic ELB and its group, the NLB, its listener and target group and its
//! managed group; tags added by hand, and the controller's own, stay.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::too_many_lines)]

use ccm_aws_api::{Ec2, Elb, Elbv2, SecurityGroupId, Tags};
use ccm_cloud_provider::{LoadBalancer, NodeView};
use ccm_load_balancers::annotations::Key;
use ccm_testing::lb_world::{Lbs, World, uid};
use k8s_openapi::api::core::v1::Service;

const CLUSTER_NAME: &str = "kubernetes";
const RECORD: &str = "kubernetes.io/additional-resource-tags";
/// The Go controller's record (its pull request #1447), comma separated, on NLBs and their listeners and groups.
const GO_RECORD: &str = "kubernetes.io/cloud-controller/managed-tags";

fn service(uid: &str, nlb: bool, tags: Option<&str>) -> Service {
    let mut annotations = Vec::new();
    if nlb {
        annotations.push((Key::Type, "nlb"));
    }
    if let Some(t) = tags {
        annotations.push((Key::AdditionalResourceTags, t));
    }
    ccm_testing::lb_world::service(uid, &[(80, 30080)], &annotations)
}

async fn ensure(lbs: &Lbs, svc: &Service, w: &World) {
    let nodes = w.nodes();
    let nodes: Vec<&NodeView> = nodes.iter().collect();
    lbs.ensure_load_balancer(CLUSTER_NAME, svc, &nodes).await.unwrap();
}

async fn group_tags(w: &World, id: &str) -> Tags {
    w.group(id).await.unwrap().tags
}

/// The keys of `tags` that are not the controller's ownership tags, sorted.
fn keys(tags: &Tags) -> Vec<&str> {
    tags.keys()
        .map(String::as_str)
        .filter(|k| !k.starts_with("kubernetes.io/cluster/"))
        .collect()
}

#[tokio::test]
async fn dropped_keys_leave_the_nlb_its_listener_target_group_and_managed_group() {
    let w = ccm_testing::lb_world::world(166, "tags", true).await;
    let lbs = w.lbs(w.config.clone().with_nlb_managed_security_groups(true));
    let uid = uid();
    ensure(&lbs, &service(&uid, true, Some("team=a,env=prod")), &w).await;
    let name = lbs.load_balancer_name(CLUSTER_NAME, &service(&uid, true, None));
    let elbv2 = w.adapter.elbv2();
    let lb = elbv2.load_balancer(&name).await.unwrap().unwrap();
    let listener = elbv2.listeners(&lb.arn).await.unwrap()[0].arn.clone();
    let group = elbv2.target_groups(&lb.arn).await.unwrap()[0].arn.clone();
    let arns = vec![lb.arn.clone(), listener, group];
    let managed = lb.security_groups[0].to_string();
    let by_hand = Tags::from([("by-hand".to_owned(), "x".to_owned())]);
    elbv2.add_tags(&arns, &by_hand).await.unwrap();
    w.adapter
        .ec2()
        .create_tags(std::slice::from_ref(&managed), &by_hand)
        .await
        .unwrap();
    let all = [
        "by-hand",
        "env",
        RECORD,
        GO_RECORD,
        "kubernetes.io/service-name",
        "kubernetes.io/service-uid",
        "team",
    ];
    for tags in elbv2.tags(&arns).await.unwrap().values() {
        assert_eq!(keys(tags), all);
        assert_eq!(
            (tags[RECORD].as_str(), tags[GO_RECORD].as_str()),
            ("env team", "env,team")
        );
    }

    // `env` dropped: gone everywhere, `team` changed, the hand tag kept.
    ensure(&lbs, &service(&uid, true, Some("team=b")), &w).await;
    let kept = [
        "by-hand",
        RECORD,
        GO_RECORD,
        "kubernetes.io/service-name",
        "kubernetes.io/service-uid",
        "team",
    ];
    for tags in elbv2.tags(&arns).await.unwrap().values() {
        assert_eq!(
            (keys(tags), tags["team"].as_str(), tags[RECORD].as_str()),
            (kept.to_vec(), "b", "team")
        );
    }
    // The managed group carries our record only (the Go controller tags no group with its own).
    let tags = group_tags(&w, &managed).await;
    let kept_on_group: Vec<&str> = kept.iter().copied().filter(|k| *k != GO_RECORD).collect();
    assert_eq!((keys(&tags), tags["team"].as_str()), (kept_on_group, "b"));

    // The annotation gone: its keys and the record go; steady afterwards.
    let plain = service(&uid, true, None);
    ensure(&lbs, &plain, &w).await;
    let left = [
        "by-hand",
        "kubernetes.io/service-name",
        "kubernetes.io/service-uid",
    ];
    for tags in elbv2.tags(&arns).await.unwrap().values() {
        assert_eq!(keys(tags), left);
    }
    assert_eq!(keys(&group_tags(&w, &managed).await), left);
    let before = ccm_testing::lb_world::mutation_counts(w.adapter.metrics());
    ensure(&lbs, &plain, &w).await;
    assert_eq!(
        ccm_testing::lb_world::diff(
            &ccm_testing::lb_world::mutation_counts(w.adapter.metrics()),
            &before
        ),
        Default::default()
    );
    lbs.ensure_load_balancer_deleted(CLUSTER_NAME, &plain)
        .await
        .unwrap();
}

/// An NLB as a Go controller with its pull request #1447 leaves it (its record, not ours): a key dropped after the
/// takeover is removed all the same, and both records are current afterwards.
#[tokio::test]
async fn keys_the_go_controllers_record_names_are_removed_after_a_takeover() {
    let w = ccm_testing::lb_world::world(190, "gotags", true).await;
    let lbs = w.lbs(w.config.clone());
    let uid = uid();
    ensure(&lbs, &service(&uid, true, Some("team=a,env=prod")), &w).await;
    let name = lbs.load_balancer_name(CLUSTER_NAME, &service(&uid, true, None));
    let elbv2 = w.adapter.elbv2();
    let lb = elbv2.load_balancer(&name).await.unwrap().unwrap();
    let listener = elbv2.listeners(&lb.arn).await.unwrap()[0].arn.clone();
    let group = elbv2.target_groups(&lb.arn).await.unwrap()[0].arn.clone();
    let arns = vec![lb.arn.clone(), listener, group];
    elbv2.remove_tags(&arns, &[RECORD.to_owned()]).await.unwrap();

    ensure(&lbs, &service(&uid, true, Some("team=b")), &w).await;
    for tags in elbv2.tags(&arns).await.unwrap().values() {
        assert!(!tags.contains_key("env"), "{tags:?}");
        assert_eq!(
            (
                tags["team"].as_str(),
                tags[RECORD].as_str(),
                tags[GO_RECORD].as_str()
            ),
            ("b", "team", "team")
        );
    }
    lbs.ensure_load_balancer_deleted(CLUSTER_NAME, &service(&uid, true, None))
        .await
        .unwrap();
}

#[tokio::test]
async fn dropped_keys_leave_the_classic_elb_and_its_group() {
    let w = ccm_testing::lb_world::world(167, "tags", true).await;
    let lbs = w.lbs(w.config.clone());
    let uid = uid();
    ensure(&lbs, &service(&uid, false, Some("team=a,env=prod")), &w).await;
    let name = lbs.load_balancer_name(CLUSTER_NAME, &service(&uid, false, None));
    let elb = w.adapter.elb();
    let lb = elb.load_balancer(&name).await.unwrap().unwrap();
    let group: SecurityGroupId = lb.security_groups[0].clone();
    let by_hand = Tags::from([("by-hand".to_owned(), "x".to_owned())]);
    elb.add_tags(&name, &by_hand).await.unwrap();
    w.adapter
        .ec2()
        .create_tags(&[group.to_string()], &by_hand)
        .await
        .unwrap();

    ensure(&lbs, &service(&uid, false, Some("team=b")), &w).await;
    let kept = [
        "by-hand",
        RECORD,
        "kubernetes.io/service-name",
        "kubernetes.io/service-uid",
        "team",
    ];
    let tags = elb.tags(&name).await.unwrap();
    assert_eq!((keys(&tags), tags["team"].as_str()), (kept.to_vec(), "b"));
    let tags = group_tags(&w, group.as_str()).await;
    assert_eq!((keys(&tags), tags["team"].as_str()), (kept.to_vec(), "b"));

    let plain = service(&uid, false, None);
    ensure(&lbs, &plain, &w).await;
    let left = [
        "by-hand",
        "kubernetes.io/service-name",
        "kubernetes.io/service-uid",
    ];
    assert_eq!(keys(&elb.tags(&name).await.unwrap()), left);
    assert_eq!(keys(&group_tags(&w, group.as_str()).await), left);
    lbs.ensure_load_balancer_deleted(CLUSTER_NAME, &plain)
        .await
        .unwrap();
}
