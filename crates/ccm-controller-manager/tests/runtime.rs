//! Runtime behaviour beyond election and serving: the provider-name check, controllers skipped for missing
//! capabilities, and the client-side rate limiter.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::too_many_lines)]

use std::{sync::Arc, time::Duration};

use ccm_controller_manager::{Error, Options, Runtime};
use ccm_testing::{TestEnv, provider::FakeProvider, unique_name};
use tokio::time::Instant;

#[tokio::test]
async fn cloud_provider_must_name_the_provider() {
    // Checked before anything is contacted: no kubeconfig is needed.
    let options = Options::try_parse_from(["--cloud-provider=aws", "--secure-port=0"]).unwrap();
    let err = Runtime::new(options)
        .run_until(Arc::new(FakeProvider::new()), async {})
        .await
        .unwrap_err();
    assert!(matches!(err, Error::ProviderMismatch { .. }), "{err:?}");
    assert_eq!(
        err.to_string(),
        "unknown cloud provider \"aws\": this binary serves only --cloud-provider=fake"
    );
    let options = Options::try_parse_from(["--cloud-provider=fake", "--controllers=bogus"]).unwrap();
    let err = Runtime::new(options)
        .run_until(Arc::new(FakeProvider::new()), async {})
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("\"bogus\" is not in the list of known controllers"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn controllers_without_their_capability_are_skipped() {
    let env = TestEnv::get();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let selector = format!("ccm-test-runtime={}", unique_name("skip"));
    let options = Options::try_parse_from([
        "--cloud-provider=fake".to_owned(),
        format!("--kubeconfig={}", env.kubeconfig.display()),
        "--bind-address=127.0.0.1".to_owned(),
        format!("--secure-port={port}"),
        "--leader-elect=false".to_owned(),
        "--cluster-cidr=10.244.0.0/16".to_owned(),
        // Metrics without a token, for this test.
        "--authorization-always-allow-paths=/healthz,/metrics".to_owned(),
    ])
    .unwrap();
    let provider = FakeProvider::new().without_load_balancers().without_routes();
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(
        Runtime::new(options)
            .with_selectors(Some(selector.clone()), Some(selector))
            .run_until(Arc::new(provider), async {
                let _ = rx.await;
            }),
    );
    let client = reqwest::Client::builder()
        .danger_accept_invalid_certs(true)
        .build()
        .unwrap();
    let t0 = Instant::now();
    let body = loop {
        if let Ok(r) = client
            .get(format!("https://127.0.0.1:{port}/healthz?verbose"))
            .send()
            .await
        {
            let body = r.text().await.unwrap();
            if body.contains("cloud-node-lifecycle-controller") {
                break body;
            }
        }
        assert!(t0.elapsed() < Duration::from_secs(10), "not serving");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(body.contains("[+]cloud-node-controller ok"), "{body}");
    assert!(
        !body.contains("service-lb-controller") && !body.contains("node-route-controller"),
        "{body}"
    );
    assert!(
        !body.contains("leaderElection"),
        "no election check without --leader-elect: {body}"
    );
    let metrics = client
        .get(format!("https://127.0.0.1:{port}/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics.contains(
            "running_managed_controllers{name=\"cloud-node\",manager=\"cloud-controller-manager\"} 1"
        )
    );
    assert!(!metrics.contains("name=\"service\""), "{metrics}");
    tx.send(()).unwrap();
    task.await.unwrap().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kube_api_qps_paces_the_controllers_client() {
    let env = TestEnv::get();
    let options = Options::try_parse_from([
        "--cloud-provider=fake".to_owned(),
        format!("--kubeconfig={}", env.kubeconfig.display()),
        "--secure-port=0".to_owned(),
        "--leader-elect=false".to_owned(),
        "--controllers=caller".to_owned(),
        "--kube-api-qps=5".to_owned(),
        "--kube-api-burst=1".to_owned(),
    ])
    .unwrap();
    let (done_tx, mut done_rx) = tokio::sync::mpsc::unbounded_channel::<Duration>();
    let runtime = Runtime::new(options).with_controller("caller", false, move |ctx| {
        let done_tx = done_tx.clone();
        async move {
            let t0 = Instant::now();
            for _ in 0..6 {
                ctx.client.apiserver_version().await?;
            }
            let _ = done_tx.send(t0.elapsed());
            ctx.shutdown.cancelled().await;
            Ok(())
        }
    });
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(runtime.run_until(Arc::new(FakeProvider::new()), async {
        let _ = rx.await;
    }));
    let took = tokio::time::timeout(Duration::from_secs(20), done_rx.recv())
        .await
        .unwrap()
        .unwrap();
    println!("6 requests at --kube-api-qps=5 --kube-api-burst=1: {took:?}");
    // One token at start, then one every 200 ms: five waits.
    assert!(took >= Duration::from_millis(950), "{took:?}");
    tx.send(()).unwrap();
    task.await.unwrap().unwrap();
}
