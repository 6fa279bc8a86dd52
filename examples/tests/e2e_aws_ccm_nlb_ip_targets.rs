//! End to end: an NLB Service with `aws-load-balancer-nlb-target-type: ip` registers its ready pods' addresses
//! from the EndpointSlices the endpoint-slice controller writes (never those of a slice anybody else wrote),
//! follows a rollout with one deregistration and one registration per step, and is deleted clean, with the
//! `aws-cloud-controller-manager` binary against moto and the real kube-apiserver (1.20: `discovery.k8s.io/v1beta1`,
//! the slices written as its controller writes them, `common::slices`).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::too_many_lines)]

mod common;

use std::collections::BTreeMap;

use ccm_testing::{TestEnv, metrics::requests_by_operation, unique_name};
use common::{
    Ccm, eventually,
    nlb::{key, service},
    nlb_world::{hostname, start_world},
    slices::{self, endpoints},
};
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::json;

/// The target registrations and deregistrations the CCM has sent so far.
async fn target_calls(ccm: &Ccm) -> (f64, f64) {
    let by_op = requests_by_operation(&ccm.metrics().await);
    let of = |op: &str| by_op.get(op).copied().unwrap_or_default();
    (of("RegisterTargets"), of("DeregisterTargets"))
}

#[tokio::test]
async fn e2e_nlb_ip_targets_follow_the_pods_of_the_slice_controller() {
    let (world, instances, services, _events, nlb, mut ccm) = start_world("", 2).await;
    let client = TestEnv::get().kube_client().await.unwrap();
    let api = slices::slices_api(&client).await;
    let name = unique_name("nlb-ip");
    let port = "p80-tcp";

    // Two pods (one not ready yet), and a slice a tenant wrote by hand naming another address.
    let managed = format!("{name}-abc");
    let pods = endpoints(&[
        ("10.1.0.1", &instances[0], true, false),
        ("10.1.0.2", &instances[1], false, false),
    ]);
    slices::create(&api, &managed, &name, Some(slices::MANAGED_BY.1), port, pods).await;
    let by_hand = format!("{name}-hand");
    let foreign = endpoints(&[("10.1.0.99", &instances[0], true, false)]);
    slices::create(&api, &by_hand, &name, Some("tenant"), port, foreign).await;
    let annotations = BTreeMap::from([(key("nlb-target-type"), "ip".to_owned())]);
    let created = services
        .create(
            &PostParams::default(),
            &service(&name, &[(80, "TCP")], &annotations),
        )
        .await
        .unwrap();
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
    let groups = nlb.target_groups(&arn).await;
    let tg = groups[0].target_group_arn().unwrap().to_owned();
    assert_eq!(groups[0].target_type().map(|t| t.as_str()), Some("ip"));
    assert_eq!(groups[0].port(), Some(8080), "the target port");
    assert_eq!(nlb.targets(&tg).await, ["10.1.0.1"], "the ready pod only");

    // A rollout step: the first pod terminates, the second is ready, a third starts ready.
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    let before = target_calls(&ccm).await;
    let step = json!({ "endpoints": endpoints(&[
        ("10.1.0.1", &instances[0], false, true),
        ("10.1.0.2", &instances[1], true, false),
        ("10.1.0.3", &instances[0], true, false),
    ]) });
    api.0
        .patch(&managed, &PatchParams::default(), &Patch::Merge(&step))
        .await
        .unwrap();
    eventually(&mut ccm, "the targets following the pods", 30, async || {
        nlb.targets(&tg).await == ["10.1.0.2", "10.1.0.3"]
    })
    .await;
    tokio::time::sleep(std::time::Duration::from_secs(3)).await;
    let after = target_calls(&ccm).await;
    assert_eq!(
        (after.0 - before.0, after.1 - before.1),
        (1.0, 1.0),
        "one registration and one deregistration for the step\n{}",
        ccm.log_text()
    );

    services.delete(&name, &Default::default()).await.unwrap();
    eventually(&mut ccm, "the Service gone", 120, async || {
        services.get_opt(&name).await.unwrap().is_none()
    })
    .await;
    assert_eq!(
        nlb.cluster_resources(&world.cluster_key()).await,
        Vec::<String>::new()
    );
    for slice in [&managed, &by_hand] {
        api.0.delete(slice, &Default::default()).await.unwrap();
    }
    assert!(ccm.terminate().await.success());
    world.cleanup().await;
}
