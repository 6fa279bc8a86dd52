//! Keys of the AWS Load Balancer Controller served on NLBs, against moto through the real adapter: several
//! certificates on a TLS listener (the first the default, the others its certificate list, owned while several
//! are given), health check success codes (the target group's matcher, owned while given), and proxy protocol v2,
//! turned on only with the Service's consent. Each change costs only its own calls; a steady ensure none.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::too_many_lines)]

use std::collections::BTreeMap;

use ccm_aws_api::Elbv2;
use ccm_cloud_provider::{LoadBalancer, NodeView};
use ccm_load_balancers::annotations::Key;
use ccm_testing::lb_world::{Lbs, World, acm_certificate, diff, mutation_counts, uid};
use ccm_testing::unique_name;
use k8s_openapi::api::core::v1::Service;

const CLUSTER_NAME: &str = "kubernetes";

fn service(uid: &str, ports: &[(i32, i32)], annotations: &[(Key, &str)]) -> Service {
    let mut all = annotations.to_vec();
    all.push((Key::Type, "nlb"));
    ccm_testing::lb_world::service(uid, ports, &all)
}

/// Ensures `svc`, and the mutating calls it made.
async fn ensure(lbs: &Lbs, w: &World, svc: &Service) -> BTreeMap<&'static str, u64> {
    let metrics = w.adapter.metrics().clone();
    let before = mutation_counts(&metrics);
    let nodes = w.nodes();
    let nodes: Vec<&NodeView> = nodes.iter().collect();
    lbs.ensure_load_balancer(CLUSTER_NAME, svc, &nodes).await.unwrap();
    diff(&mutation_counts(&metrics), &before)
}

/// The default certificate and the list of the NLB's one listener.
async fn certificates(w: &World, name: &str) -> (String, Vec<String>) {
    let elbv2 = w.adapter.elbv2();
    let lb = elbv2.load_balancer(name).await.unwrap().unwrap();
    let listeners = elbv2.listeners(&lb.arn).await.unwrap();
    assert_eq!(listeners.len(), 1);
    let mut list = elbv2.listener_certificates(&listeners[0].arn).await.unwrap();
    list.sort();
    (listeners[0].certificates[0].clone(), list)
}

#[tokio::test]
async fn several_certificates_reach_the_tls_listener_and_follow_the_annotation() {
    let w = ccm_testing::lb_world::world(177, "certs", true).await;
    let lbs = w.lbs(w.config.clone());
    let uid = uid();
    let mut certs = Vec::new();
    for _ in 0..3 {
        certs.push(acm_certificate(&format!("{}.example.com", unique_name("sni"))).await);
    }
    let with = |list: &[&String]| {
        let value = list.iter().map(|c| c.as_str()).collect::<Vec<_>>().join(",");
        service(&uid, &[(443, 30443)], &[(Key::SslCert, &value)])
    };
    let (c1, c2, c3) = (&certs[0], &certs[1], &certs[2]);
    let first = with(&[c1, c2]);
    let name = lbs.load_balancer_name(CLUSTER_NAME, &first);
    let made = ensure(&lbs, &w, &first).await;
    assert_eq!(made.get("AddListenerCertificates"), Some(&1), "{made:?}");
    assert_eq!(certificates(&w, &name).await, (c1.clone(), vec![c2.clone()]));
    assert_eq!(ensure(&lbs, &w, &first).await, BTreeMap::new(), "steady");

    // One certificate for another: one added, one removed, nothing else.
    let second = with(&[c1, c3]);
    assert_eq!(
        ensure(&lbs, &w, &second).await,
        BTreeMap::from([("AddListenerCertificates", 1), ("RemoveListenerCertificates", 1)])
    );
    assert_eq!(certificates(&w, &name).await, (c1.clone(), vec![c3.clone()]));
    assert_eq!(ensure(&lbs, &w, &second).await, BTreeMap::new());

    // The default swapped with the other: the listener's default changes, the old default joins the list.
    let swapped = with(&[c3, c1]);
    let made = ensure(&lbs, &w, &swapped).await;
    assert_eq!(made.get("ModifyListener"), Some(&1), "{made:?}");
    assert_eq!(made.get("RemoveListenerCertificates"), None, "{made:?}");
    let (default, list) = certificates(&w, &name).await;
    assert_eq!(default, *c3);
    assert!(list.contains(c1), "{list:?}");
    assert_eq!(ensure(&lbs, &w, &swapped).await, BTreeMap::new());

    // One certificate again: the list is no longer read, so left as it is (as the Go controller left it).
    assert_eq!(ensure(&lbs, &w, &with(&[c3])).await, BTreeMap::new());
    assert!(certificates(&w, &name).await.1.contains(c1));

    lbs.ensure_load_balancer_deleted(CLUSTER_NAME, &swapped)
        .await
        .unwrap();
    assert_eq!(w.adapter.elbv2().load_balancer(&name).await.unwrap(), None);
}

#[tokio::test]
async fn proxy_protocol_waits_for_consent_and_success_codes_reach_the_target_group() {
    let w = ccm_testing::lb_world::world(178, "ppv2", true).await;
    let lbs = w.lbs(w.config.clone());
    let elbv2 = w.adapter.elbv2();
    let uid = uid();
    let asked = [
        (Key::ProxyProtocol, "*"),
        (Key::HealthcheckProtocol, "HTTP"),
        (Key::HealthcheckSuccessCodes, "200-299"),
    ];
    let svc = service(&uid, &[(80, 30080)], &asked);
    let name = lbs.load_balancer_name(CLUSTER_NAME, &svc);
    let nodes = w.nodes();
    let refs: Vec<&NodeView> = nodes.iter().collect();
    let ensured = lbs
        .ensure_load_balancer_reporting(CLUSTER_NAME, &svc, &refs)
        .await
        .unwrap();
    let warnings: Vec<&str> = ensured
        .notices
        .iter()
        .filter(|n| n.warning)
        .map(|n| n.message.as_str())
        .collect();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].contains(Key::AllowProxyProtocol.name()),
        "{warnings:?}"
    );
    let lb = elbv2.load_balancer(&name).await.unwrap().unwrap();
    let groups = elbv2.target_groups(&lb.arn).await.unwrap();
    assert_eq!(groups.len(), 1);
    assert_eq!(groups[0].health_check.matcher.as_deref(), Some("200-299"));
    let proxy = || async {
        let attributes = elbv2.target_group_attributes(&groups[0].arn).await.unwrap();
        attributes.get("proxy_protocol_v2.enabled").cloned()
    };
    assert_ne!(proxy().await.as_deref(), Some("true"), "no consent, no header");
    assert_eq!(ensure(&lbs, &w, &svc).await, BTreeMap::new(), "steady");

    // Consent: proxy protocol v2 on the same target group, and nothing else.
    let mut consented = asked.to_vec();
    consented.push((Key::AllowProxyProtocol, "true"));
    let consented = service(&uid, &[(80, 30080)], &consented);
    assert_eq!(
        ensure(&lbs, &w, &consented).await,
        BTreeMap::from([("ModifyTargetGroupAttributes", 1)])
    );
    assert_eq!(proxy().await.as_deref(), Some("true"));
    // Other codes: the same group, modified in place.
    let mut recoded = asked.to_vec();
    recoded[2] = (Key::HealthcheckSuccessCodes, "200,202");
    recoded.push((Key::AllowProxyProtocol, "true"));
    let recoded = service(&uid, &[(80, 30080)], &recoded);
    assert_eq!(
        ensure(&lbs, &w, &recoded).await,
        BTreeMap::from([("ModifyTargetGroup", 1)])
    );
    let now = elbv2.target_groups(&lb.arn).await.unwrap();
    assert_eq!(now[0].arn, groups[0].arn);
    assert_eq!(now[0].health_check.matcher.as_deref(), Some("200,202"));
    assert_eq!(ensure(&lbs, &w, &recoded).await, BTreeMap::new());

    lbs.ensure_load_balancer_deleted(CLUSTER_NAME, &recoded)
        .await
        .unwrap();
    assert_eq!(elbv2.load_balancer(&name).await.unwrap(), None);
}
