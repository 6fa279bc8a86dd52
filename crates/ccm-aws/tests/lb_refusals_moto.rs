//! A listener AWS refuses is never reported as served. The generic service controller drives `AwsCloud` against
//! the real apiserver and moto behind a fault proxy whose `CreateListener` answers `InvalidConfigurationRequest`
//! (as ELBv2 does for a target group another load balancer uses) until the test stops it: the Service gets a
//! `SyncLoadBalancerFailed` Warning quoting AWS and no address while AWS refuses (however often the controller
//! retries), and its address once AWS accepts.
//! Before, the code was classed `Conflict` and a `Conflict` from `CreateListener` read as "already exists": the
//! Service got its address with no listener behind it.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::too_many_lines)]

mod common;

use std::time::Duration;

use ccm_aws_api::Elbv2;
use ccm_testing::{Fault, FaultProxy, TestEnv};
use common::{eventually, fixture_at};
use k8s_openapi::api::core::v1::{Event, Service};
use kube::{
    Api,
    api::{DeleteParams, ListParams, PostParams},
};
use serde_json::json;

fn ingress(s: &Service) -> bool {
    s.status
        .as_ref()
        .and_then(|s| s.load_balancer.as_ref())
        .and_then(|l| l.ingress.as_ref())
        .is_some_and(|i| !i.is_empty())
}

#[tokio::test]
async fn a_refused_listener_is_a_warning_and_no_address_until_aws_accepts() {
    let proxy = FaultProxy::start(&TestEnv::get().aws_endpoint).await.unwrap();
    let f = fixture_at(Some(&proxy.url())).await;
    let client = TestEnv::get().kube_client().await.unwrap();
    f.launch_nodes(1).await;
    let refusal = "The target group is associated with another load balancer";
    proxy.inject(
        "CreateListener",
        Fault::error(400, "InvalidConfigurationRequest").with_message(refusal),
        10_000,
    );
    let stop = f.run_service_controller(&client, |config| {
        config.min_retry_delay = Duration::from_millis(500);
    });
    let services: Api<Service> = Api::namespaced(client.clone(), "default");
    let svc: Service = serde_json::from_value(json!({
        "metadata": {
            "name": f.group,
            "labels": { "ccm-test/group": f.group },
            "annotations": {
                "service.beta.kubernetes.io/aws-load-balancer-type": "nlb",
                "service.beta.kubernetes.io/aws-load-balancer-internal": "true",
            },
        },
        "spec": { "type": "LoadBalancer", "ports": [{ "port": 80, "protocol": "TCP" }] },
    }))
    .unwrap();
    services.create(&PostParams::default(), &svc).await.unwrap();
    let events: Api<Event> = Api::namespaced(client.clone(), "default");
    let lp = ListParams::default().fields(&format!("involvedObject.name={}", f.group));
    eventually("a Warning quoting AWS's refusal", 60, async || {
        events.list(&lp).await.unwrap().items.iter().any(|e| {
            e.reason.as_deref() == Some("SyncLoadBalancerFailed")
                && e.message
                    .as_deref()
                    .is_some_and(|m| m.contains("InvalidConfigurationRequest") && m.contains(refusal))
        })
    })
    .await;
    // While AWS refuses, through several retries: no address, and no success reported.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let refused = proxy.requests("CreateListener");
    assert!(refused >= 2, "retried: {refused}");
    assert!(
        !ingress(&services.get(&f.group).await.unwrap()),
        "an address with no listener"
    );
    let reasons: Vec<String> = events
        .list(&lp)
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|e| e.reason)
        .collect();
    assert!(
        !reasons.contains(&"EnsuredLoadBalancer".to_owned()),
        "{reasons:?}"
    );
    // Once AWS accepts, the listener exists and the Service is served.
    proxy.clear("CreateListener");
    eventually("the address once AWS accepts", 60, async || {
        ingress(&services.get(&f.group).await.unwrap())
    })
    .await;
    let uid = services.get(&f.group).await.unwrap().metadata.uid.unwrap();
    let name: String = format!("a{}", uid.replace('-', "")).chars().take(32).collect();
    let lb = f
        .adapter
        .elbv2()
        .load_balancer(&name)
        .await
        .unwrap()
        .expect("the NLB");
    let listeners = f.adapter.elbv2().listeners(&lb.arn).await.unwrap();
    assert_eq!(listeners.len(), 1, "the listener AWS accepted serves the address");
    services.delete(&f.group, &DeleteParams::default()).await.unwrap();
    eventually("the Service gone", 90, async || {
        services.get_opt(&f.group).await.unwrap().is_none()
    })
    .await;
    stop.send(()).ok();
    f.cleanup().await;
}
