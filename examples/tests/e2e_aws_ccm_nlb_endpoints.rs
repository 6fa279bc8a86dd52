//! End to end: an NLB Service with `aws-load-balancer-target-nodes-with-endpoints: "true"` and
//! `externalTrafficPolicy: Local` has as targets only the nodes that run a ready endpoint, following its
//! EndpointSlices, with the `aws-cloud-controller-manager` binary against moto and the real kube-apiserver (1.20:
//! `discovery.k8s.io/v1beta1`; the slices written as its EndpointSlice controller writes them, `common::slices`).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::too_many_lines)]

mod common;

use std::collections::BTreeMap;

use ccm_testing::{TestEnv, unique_name};
use common::{
    Ccm, eventually,
    nlb::{key, service},
    nlb_world::{hostname, start_world},
    slices::{self, endpoints},
};
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::json;

/// The ELBv2 requests the CCM made so far (`aws_api_requests_total`, all operations and outcomes). EC2's are
/// left out: the node controllers' periodic reads would make the count move on their own.
async fn elbv2_requests(ccm: &Ccm) -> f64 {
    ccm.metrics()
        .await
        .lines()
        .filter(|l| l.starts_with("aws_api_requests_total{service=\"elasticloadbalancingv2\""))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

#[tokio::test]
async fn e2e_nlb_targets_only_the_nodes_with_ready_endpoints() {
    let (world, instances, services, _events, nlb, mut ccm) = start_world("", 3).await;
    let client = TestEnv::get().kube_client().await.unwrap();
    let api = slices::slices_api(&client).await;
    let slices = api.0.clone();
    let name = unique_name("nlb-eps");

    // Pods: ready on the first node, starting on the second; none on the third.
    let slice_name = format!("{name}-abc");
    let pods = endpoints(&[
        ("10.1.0.1", &instances[0], true, false),
        ("10.1.0.2", &instances[1], false, false),
    ]);
    slices::create(&api, &slice_name, &name, Some(slices::MANAGED_BY.1), "", pods).await;
    let annotations = BTreeMap::from([(key("target-nodes-with-endpoints"), "true".to_owned())]);
    let mut svc = service(&name, &[(80, "TCP")], &annotations);
    svc.spec.as_mut().unwrap().external_traffic_policy = Some("Local".into());
    let created = services.create(&PostParams::default(), &svc).await.unwrap();
    let lb = common::lb::lb_name(created.metadata.uid.as_deref().unwrap());

    eventually(&mut ccm, "the NLB's hostname", 90, async || {
        hostname(&services, &name).await.is_some()
    })
    .await;
    let arn = nlb
        .describe(&lb)
        .await
        .unwrap()
        .load_balancer_arn()
        .unwrap()
        .to_owned();
    let tg = nlb.target_groups(&arn).await[0]
        .target_group_arn()
        .unwrap()
        .to_owned();
    assert_eq!(
        nlb.targets(&tg).await,
        [instances[0].clone()],
        "only the node with a ready pod"
    );

    // The second pod becomes ready and the first terminates: the second node registered, the first deregistered.
    let rollout = json!({ "endpoints": endpoints(&[
        ("10.1.0.1", &instances[0], false, true),
        ("10.1.0.2", &instances[1], true, false),
    ]) });
    let params = PatchParams::default();
    slices
        .patch(&slice_name, &params, &Patch::Merge(&rollout))
        .await
        .unwrap();
    eventually(&mut ccm, "the targets following the pods", 30, async || {
        nlb.targets(&tg).await == [instances[1].clone()]
    })
    .await;

    // A pod replaced on the same node (a new address, the same set of nodes): no load balancer call at all.
    tokio::time::sleep(std::time::Duration::from_secs(3)).await;
    let before = elbv2_requests(&ccm).await;
    assert!(before > 0.0, "the CCM's metrics count ELBv2 requests");
    let replaced = json!({ "endpoints": endpoints(&[("10.1.0.3", &instances[1], true, false)]) });
    slices
        .patch(&slice_name, &params, &Patch::Merge(&replaced))
        .await
        .unwrap();
    tokio::time::sleep(std::time::Duration::from_secs(4)).await;
    assert_eq!(elbv2_requests(&ccm).await, before, "{}", ccm.log_text());
    assert_eq!(nlb.targets(&tg).await, [instances[1].clone()]);

    services.delete(&name, &Default::default()).await.unwrap();
    eventually(&mut ccm, "the Service gone", 120, async || {
        services.get_opt(&name).await.unwrap().is_none()
    })
    .await;
    assert_eq!(
        nlb.cluster_resources(&world.cluster_key()).await,
        Vec::<String>::new()
    );
    slices.delete(&slice_name, &Default::default()).await.unwrap();
    assert!(ccm.terminate().await.success());
    world.cleanup().await;
}
