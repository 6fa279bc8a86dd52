//! A Service deleted and re-created under the same name while its NLB is still being deleted (the operator
//! stripped the cleanup finalizer and applied the manifest again, node port included), with the generic service
//! controller driving `AwsCloud` against the real apiserver and moto behind a fault proxy that refuses
//! `DeleteLoadBalancer` for a while. Upstream's target group names carry no Service UID, so both incarnations want
//! the same names: the new NLB must get groups of its own at once (never the old NLB's), and the old one's
//! deletion must never take the new one's.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::too_many_lines)]

mod common;

use std::time::Duration;

use ccm_aws_api::{Elbv2, elbv2::TargetGroup};
use ccm_testing::{Fault, FaultProxy, TestEnv};
use common::{eventually, fixture_at};
use k8s_openapi::api::core::v1::Service;
use kube::{
    Api, ResourceExt,
    api::{DeleteParams, Patch, PostParams},
};
use serde_json::json;

/// The NLB name of a Service UID (`a` + the UID without dashes, 32 characters).
fn nlb_name(uid: &str) -> String {
    format!("a{}", uid.replace('-', "").chars().take(31).collect::<String>())
}

/// Creates the Service from `manifest`, trying other node ports while the one asked for is taken by another
/// test's Service in the shared apiserver.
async fn create(services: &Api<Service>, manifest: &serde_json::Value) -> Service {
    let mut manifest = manifest.clone();
    for _ in 0..20 {
        let svc: Service = serde_json::from_value(manifest.clone()).unwrap();
        match services.create(&PostParams::default(), &svc).await {
            Ok(created) => return created,
            Err(kube::Error::Api(e)) if e.code == 422 && e.message.contains("allocated") => {
                let port = manifest["spec"]["ports"][0]["nodePort"].as_i64().unwrap();
                manifest["spec"]["ports"][0]["nodePort"] = json!(30000 + (port - 30000 + 1) % 2700);
            }
            Err(e) => panic!("creating the Service: {e}"),
        }
    }
    panic!("no free node port");
}

#[tokio::test]
async fn a_recreated_nlb_service_gets_its_own_target_groups_beside_its_predecessor() {
    let proxy = FaultProxy::start(&TestEnv::get().aws_endpoint).await.unwrap();
    let f = fixture_at(Some(&proxy.url())).await;
    let client = TestEnv::get().kube_client().await.unwrap();
    f.launch_nodes(2).await;
    let stop = f.run_service_controller(&client, |config| {
        config.node_sync_window = Duration::from_millis(200);
        config.min_retry_delay = Duration::from_millis(200);
        config.max_retry_delay = Duration::from_secs(2);
    });

    let services: Api<Service> = Api::namespaced(client.clone(), "default");
    let node_port = 30000
        + i64::from(
            f.group
                .bytes()
                .fold(7u16, |h, b| h.wrapping_mul(31).wrapping_add(u16::from(b)))
                % 2700,
        );
    let manifest = json!({
        "metadata": {
            "name": f.group,
            "labels": { "ccm-test/group": f.group },
            "annotations": {
                "service.beta.kubernetes.io/aws-load-balancer-type": "nlb",
                "service.beta.kubernetes.io/aws-load-balancer-internal": "true",
            },
        },
        "spec": { "type": "LoadBalancer", "ports": [{ "port": 80, "protocol": "TCP", "nodePort": node_port }] },
    });
    let served = async |uid: &str| {
        services.get_opt(&f.group).await.unwrap().is_some_and(|s| {
            s.metadata.uid.as_deref() == Some(uid)
                && s.status
                    .and_then(|s| s.load_balancer)
                    .and_then(|l| l.ingress)
                    .is_some_and(|i| i.iter().any(|i| i.hostname.is_some()))
        })
    };
    let first = create(&services, &manifest).await;
    let first_uid = first.uid().unwrap();
    let node_port = first.spec.as_ref().unwrap().ports.as_ref().unwrap()[0]
        .node_port
        .unwrap();
    let mut manifest = manifest;
    manifest["spec"]["ports"][0]["nodePort"] = json!(node_port);
    eventually("the first NLB served", 60, async || served(&first_uid).await).await;

    // The first NLB's deletion is refused for now; the operator strips the finalizer and applies again.
    proxy.inject(
        "DeleteLoadBalancer",
        Fault::error(503, "ServiceUnavailable"),
        100_000,
    );
    services.delete(&f.group, &DeleteParams::default()).await.unwrap();
    eventually("the first NLB's deletion tried", 60, async || {
        proxy.requests("DeleteLoadBalancer") > 0
    })
    .await;
    services
        .patch(
            &f.group,
            &Default::default(),
            &Patch::Merge(&json!({"metadata": {"finalizers": null}})),
        )
        .await
        .unwrap();
    eventually("the first Service gone", 30, async || {
        services.get_opt(&f.group).await.unwrap().is_none()
    })
    .await;
    let second = create(&services, &manifest).await;
    let second_uid = second.uid().unwrap();
    assert_eq!(
        second.spec.as_ref().unwrap().ports.as_ref().unwrap()[0].node_port,
        Some(node_port),
        "the same node port, so the same upstream target group name"
    );
    eventually("the re-created NLB served at once", 60, async || {
        served(&second_uid).await
    })
    .await;

    let elbv2 = f.adapter.elbv2().clone();
    let nlb = async |uid: &str| elbv2.load_balancer(&nlb_name(uid)).await.unwrap();
    let groups_of = async |arn: &str| -> Vec<TargetGroup> {
        let all = elbv2.all_target_groups().await.unwrap();
        all.into_iter()
            .filter(|g| g.load_balancer_arns.iter().any(|a| a == arn))
            .collect()
    };
    let old = nlb(&first_uid)
        .await
        .expect("the first NLB, its deletion refused");
    let new = nlb(&second_uid).await.expect("the second NLB");
    let old_groups = groups_of(&old.arn).await;
    let new_groups = groups_of(&new.arn).await;
    assert_eq!(
        (old_groups.len(), new_groups.len()),
        (1, 1),
        "{old_groups:?} {new_groups:?}"
    );
    assert_ne!(
        old_groups[0].arn, new_groups[0].arn,
        "the new NLB never takes the old one's group"
    );
    let listeners = elbv2.listeners(&new.arn).await.unwrap();
    assert_eq!(listeners[0].default_target_groups, [new_groups[0].arn.clone()]);

    // AWS lets the old NLB go: its group goes with it, the new NLB keeps its own, still forwarding to it.
    proxy.clear("DeleteLoadBalancer");
    eventually("the first NLB and its group gone", 60, async || {
        nlb(&first_uid).await.is_none()
            && !elbv2
                .all_target_groups()
                .await
                .unwrap()
                .iter()
                .any(|g| g.arn == old_groups[0].arn)
    })
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        groups_of(&new.arn).await,
        new_groups,
        "the new NLB's group untouched"
    );
    assert_eq!(
        elbv2.listeners(&new.arn).await.unwrap()[0].default_target_groups,
        [new_groups[0].arn.clone()]
    );
    assert!(served(&second_uid).await);

    // The new Service's deletion takes its group, under whichever name it has.
    services.delete(&f.group, &DeleteParams::default()).await.unwrap();
    eventually("the second Service gone", 60, async || {
        services.get_opt(&f.group).await.unwrap().is_none()
    })
    .await;
    assert!(nlb(&second_uid).await.is_none());
    assert!(
        !elbv2
            .all_target_groups()
            .await
            .unwrap()
            .iter()
            .any(|g| g.arn == new_groups[0].arn),
        "the second NLB's group deleted with it"
    );
    stop.send(()).ok();
    f.cleanup().await;
}
