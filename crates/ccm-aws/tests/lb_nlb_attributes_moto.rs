//! `aws-load-balancer-attributes` on NLBs against moto, which refuses to delete a protected NLB as AWS does
//! (scripts/moto-server.py): attributes set in place, deletion kept back by deletion protection until the
//! Service turns it off, an unknown attribute key refused before any write (AWS's refusal of one the operator
//! allows quoted), and the TCP idle timeout of a listener.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::too_many_lines)]

use std::collections::BTreeSet;

use ccm_aws_api::Elbv2;
use ccm_cloud_provider::{LoadBalancer, NodeView};
use ccm_load_balancers::annotations::Key;
use ccm_testing::lb_world::{Lbs, World, uid};
use k8s_openapi::api::core::v1::Service;

const CLUSTER_NAME: &str = "kubernetes";

fn service(uid: &str, attributes: &str) -> Service {
    ccm_testing::lb_world::service(
        uid,
        &[(80, 30080)],
        &[(Key::Type, "nlb"), (Key::LoadBalancerAttributes, attributes)],
    )
}

/// The error with its causes, as the service controller's Events show it.
fn chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        out = format!("{out}: {c}");
        cause = c.source();
    }
    out
}

/// The ARNs of the target groups in this world's VPC.
async fn target_groups(w: &World) -> BTreeSet<String> {
    let all = w.adapter.elbv2().all_target_groups().await.unwrap();
    all.into_iter()
        .filter(|g| g.vpc_id.as_ref().is_some_and(|v| v.as_str() == w.vpc))
        .map(|g| g.arn)
        .collect()
}

async fn ensure(lbs: &Lbs, svc: &Service, nodes: &[NodeView]) -> Result<(), String> {
    let nodes: Vec<&NodeView> = nodes.iter().collect();
    lbs.ensure_load_balancer(CLUSTER_NAME, svc, &nodes)
        .await
        .map(|_| ())
        .map_err(|e| chain(&e))
}

async fn attribute(w: &World, name: &str, key: &str) -> Option<String> {
    let lb = w.adapter.elbv2().load_balancer(name).await.unwrap()?;
    w.adapter
        .elbv2()
        .load_balancer_attributes(&lb.arn)
        .await
        .unwrap()
        .get(key)
        .cloned()
}

async fn node_rule_count(w: &World) -> usize {
    w.group(&w.node_group)
        .await
        .unwrap()
        .ingress
        .iter()
        .map(|p| p.ip_ranges.len() + p.source_groups.len())
        .sum()
}

#[tokio::test]
async fn deletion_protection_keeps_the_nlb_until_the_service_turns_it_off() {
    let w = ccm_testing::lb_world::world(162, "attr", true).await;
    let lbs = w.lbs(w.config.clone());
    let uid = uid();
    let protected = service(
        &uid,
        "deletion_protection.enabled=true,load_balancing.cross_zone.enabled=true",
    );
    let name = lbs.load_balancer_name(CLUSTER_NAME, &protected);
    ensure(&lbs, &protected, &w.nodes()).await.unwrap();
    assert_eq!(
        attribute(&w, &name, "deletion_protection.enabled")
            .await
            .as_deref(),
        Some("true")
    );
    assert_eq!(
        attribute(&w, &name, "load_balancing.cross_zone.enabled")
            .await
            .as_deref(),
        Some("true")
    );
    let rules = node_rule_count(&w).await;
    assert!(rules > 0);

    // Deleting the Service: refused before anything changes, the error naming deletion protection.
    let e = chain(
        &lbs.ensure_load_balancer_deleted(CLUSTER_NAME, &protected)
            .await
            .unwrap_err(),
    );
    assert!(
        e.contains("deletion protection") && e.contains("deletion_protection.enabled=false"),
        "{e}"
    );
    assert!(
        attribute(&w, &name, "deletion_protection.enabled")
            .await
            .is_some(),
        "the NLB is kept"
    );
    assert_eq!(node_rule_count(&w).await, rules, "its nodes' rules too");
    // Repeated (the controller retries): the same.
    assert!(
        lbs.ensure_load_balancer_deleted(CLUSTER_NAME, &protected)
            .await
            .is_err()
    );

    // The annotation turns it off: protection goes, then the NLB and everything made for it.
    let groups = target_groups(&w).await;
    assert_eq!(groups.len(), 1);
    let unprotected = service(&uid, "deletion_protection.enabled=false");
    lbs.ensure_load_balancer_deleted(CLUSTER_NAME, &unprotected)
        .await
        .unwrap();
    assert_eq!(
        attribute(&w, &name, "deletion_protection.enabled").await,
        None,
        "the NLB is gone"
    );
    assert_eq!(node_rule_count(&w).await, 0);
    assert_eq!(
        target_groups(&w).await.intersection(&groups).count(),
        0,
        "its target group too"
    );
}

#[tokio::test]
async fn an_unknown_key_is_refused_before_any_write_and_one_aws_refuses_is_reported_with_its_words() {
    let w = ccm_testing::lb_world::world(163, "attr", true).await;
    let lbs = w.lbs(w.config.clone());
    let svc = service(&uid(), "routing.bogus.enabled=true");
    let groups = target_groups(&w).await;
    let e = ensure(&lbs, &svc, &w.nodes()).await.unwrap_err();
    assert!(
        e.contains("\"routing.bogus.enabled\" is unknown") && e.contains("ExtraLoadBalancerAttributeKeys"),
        "refused by the annotation check: {e}"
    );
    let name = lbs.load_balancer_name(CLUSTER_NAME, &svc);
    assert_eq!(
        attribute(&w, &name, "deletion_protection.enabled").await,
        None,
        "no NLB made"
    );
    assert_eq!(target_groups(&w).await, groups, "no target group made");
    // A key the operator allows reaches AWS, whose refusal is quoted.
    let lbs = w.lbs(
        w.config
            .clone()
            .with_extra_attribute_keys(["routing.bogus.enabled"]),
    );
    let result = ensure(&lbs, &svc, &w.nodes()).await;
    if ccm_testing::TestEnv::get().emulator == ccm_testing::Emulator::Ministack {
        // ministack 1.5.33 stores any key ModifyLoadBalancerAttributes is given; AWS refuses a key that is not
        // one of the documented attributes (InvalidConfigurationRequest), whose words are what is checked here.
        result.unwrap();
    } else {
        let e = result.unwrap_err();
        assert!(
            e.contains("routing.bogus.enabled") && e.contains("not valid"),
            "AWS's words quoted: {e}"
        );
    }
    // A removed key is left as it is; the valid annotation converges.
    let svc = service(
        svc.metadata.uid.as_deref().unwrap(),
        "deletion_protection.enabled=false",
    );
    ensure(&lbs, &svc, &w.nodes()).await.unwrap();
    lbs.ensure_load_balancer_deleted(CLUSTER_NAME, &svc)
        .await
        .unwrap();
}

async fn idle_timeout(w: &World, name: &str) -> String {
    let lb = w.adapter.elbv2().load_balancer(name).await.unwrap().unwrap();
    let listeners = w.adapter.elbv2().listeners(&lb.arn).await.unwrap();
    let attributes = w
        .adapter
        .elbv2()
        .listener_attributes(&listeners[0].arn)
        .await
        .unwrap();
    attributes["tcp.idle_timeout.seconds"].clone()
}

#[tokio::test]
async fn the_tcp_idle_timeout_of_a_listener_is_set_in_place_and_left_once_unannotated() {
    let w = ccm_testing::lb_world::world(164, "attr", true).await;
    let lbs = w.lbs(w.config.clone());
    let metrics = w.adapter.metrics().clone();
    let uid = uid();
    let key = format!(
        "{}TCP-80",
        ccm_load_balancers::annotations::LISTENER_ATTRIBUTES_PREFIX
    );
    let with = |seconds: Option<&str>| {
        let mut svc = ccm_testing::lb_world::service(&uid, &[(80, 30080)], &[(Key::Type, "nlb")]);
        if let Some(s) = seconds {
            let annotations = svc.metadata.annotations.get_or_insert_default();
            annotations.insert(key.clone(), format!("tcp.idle_timeout.seconds={s}"));
        }
        svc
    };
    let name = lbs.load_balancer_name(CLUSTER_NAME, &with(None));
    ensure(&lbs, &with(Some("600")), &w.nodes()).await.unwrap();
    assert_eq!(idle_timeout(&w, &name).await, "600", "set on the new listener");
    let before = ccm_testing::lb_world::mutation_counts(&metrics);
    ensure(&lbs, &with(Some("600")), &w.nodes()).await.unwrap();
    assert_eq!(
        ccm_testing::lb_world::diff(&ccm_testing::lb_world::mutation_counts(&metrics), &before),
        Default::default()
    );
    ensure(&lbs, &with(Some("1200")), &w.nodes()).await.unwrap();
    assert_eq!(idle_timeout(&w, &name).await, "1200", "changed in place");
    ensure(&lbs, &with(None), &w.nodes()).await.unwrap();
    assert_eq!(
        idle_timeout(&w, &name).await,
        "1200",
        "left as it is once the annotation goes"
    );
    lbs.ensure_load_balancer_deleted(CLUSTER_NAME, &with(None))
        .await
        .unwrap();
}

/// A consented recreation (a scheme change) of a protected NLB stops as its deletion would, with the same error
/// and nothing changed; once the Service's attributes turn protection off, the NLB is recreated.
#[tokio::test]
async fn a_protected_nlb_is_recreated_only_once_the_service_turns_protection_off() {
    let w = ccm_testing::lb_world::world(179, "attrr", true).await;
    let lbs = w.lbs(w.config.clone());
    let uid = uid();
    let protected = service(&uid, "deletion_protection.enabled=true");
    let name = lbs.load_balancer_name(CLUSTER_NAME, &protected);
    ensure(&lbs, &protected, &w.nodes()).await.unwrap();
    let arn = w.adapter.elbv2().load_balancer(&name).await.unwrap().unwrap().arn;
    let with = |attributes: &str| {
        let mut svc = service(&uid, attributes);
        let annotations = svc.metadata.annotations.as_mut().unwrap();
        annotations.insert(Key::Internal.name().to_owned(), "true".to_owned());
        annotations.insert(Key::AllowRecreation.name().to_owned(), "true".to_owned());
        svc
    };
    let metrics = w.adapter.metrics().clone();
    let before = ccm_testing::lb_world::mutation_counts(&metrics);
    let e = ensure(&lbs, &with("deletion_protection.enabled=true"), &w.nodes())
        .await
        .unwrap_err();
    assert!(
        e.contains("deletion protection") && e.contains("deletion_protection.enabled=false"),
        "{e}"
    );
    let after = ccm_testing::lb_world::mutation_counts(&metrics);
    assert_eq!(
        ccm_testing::lb_world::diff(&after, &before),
        Default::default(),
        "nothing written"
    );
    let kept = w.adapter.elbv2().load_balancer(&name).await.unwrap().unwrap();
    assert_eq!((kept.arn.as_str(), kept.internal), (arn.as_str(), false));
    // The dry run (`--dry-run`, `lb-plan`) says what the ensure would: the same refusal, not a plan.
    let nodes = w.nodes();
    let refs: Vec<&NodeView> = nodes.iter().collect();
    let refused = lbs
        .dry_run(CLUSTER_NAME, &with("deletion_protection.enabled=true"), &refs)
        .await
        .unwrap_err();
    assert!(refused.to_string().contains("deletion protection"), "{refused}");

    // The Service turns protection off: protection goes, then the NLB is made again, internal.
    let consented = with("deletion_protection.enabled=false");
    ensure(&lbs, &consented, &w.nodes()).await.unwrap();
    let made = w.adapter.elbv2().load_balancer(&name).await.unwrap().unwrap();
    assert!(made.internal && made.arn != arn, "{made:?}");
    lbs.ensure_load_balancer_deleted(CLUSTER_NAME, &consented)
        .await
        .unwrap();
    assert_eq!(w.adapter.elbv2().load_balancer(&name).await.unwrap(), None);
}
