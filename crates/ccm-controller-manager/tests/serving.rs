//! `/healthz` and `/metrics` over HTTPS (self-signed certificate) from a runtime that leads and runs the four
//! built-in controllers (restricted by label selectors to objects of this test) against the real kube-apiserver.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::too_many_lines)]

use std::{sync::Arc, time::Duration};

use ccm_controller_manager::{Options, Runtime};
use ccm_testing::{TestEnv, provider::FakeProvider, unique_name};
use prometheus_client::metrics::counter::Counter;
use tokio::time::Instant;

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The test kubeconfig's bearer token (a `system:masters` user).
fn admin_token() -> String {
    let text = std::fs::read_to_string(&TestEnv::get().kubeconfig).unwrap();
    text.lines()
        .find_map(|l| l.trim().strip_prefix("token:"))
        .expect("the test kubeconfig has a token")
        .trim()
        .to_owned()
}

async fn get(client: &reqwest::Client, url: &str) -> (u16, String) {
    let r = client.get(url).send().await.unwrap();
    (r.status().as_u16(), r.text().await.unwrap())
}

/// Tokens of two new service accounts in `default`: the first bound to a ClusterRole allowing GET /metrics.
async fn metrics_reader_tokens() -> (String, String) {
    use k8s_openapi::api::{
        authentication::v1::{TokenRequest, TokenRequestSpec},
        core::v1::ServiceAccount,
        rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule, RoleRef, Subject},
    };
    use kube::{
        Api,
        api::{ObjectMeta, PostParams},
    };
    let client = TestEnv::get().kube_client().await.unwrap();
    let pp = PostParams::default();
    let name = unique_name("metrics-reader");
    let meta = |n: &str| ObjectMeta {
        name: Some(n.to_owned()),
        ..ObjectMeta::default()
    };
    let roles: Api<ClusterRole> = Api::all(client.clone());
    roles
        .create(
            &pp,
            &ClusterRole {
                metadata: meta(&name),
                rules: Some(vec![PolicyRule {
                    non_resource_urls: Some(vec!["/metrics".to_owned()]),
                    verbs: vec!["get".to_owned()],
                    ..PolicyRule::default()
                }]),
                ..ClusterRole::default()
            },
        )
        .await
        .unwrap();
    let bindings: Api<ClusterRoleBinding> = Api::all(client.clone());
    bindings
        .create(
            &pp,
            &ClusterRoleBinding {
                metadata: meta(&name),
                role_ref: RoleRef {
                    api_group: "rbac.authorization.k8s.io".to_owned(),
                    kind: "ClusterRole".to_owned(),
                    name: name.clone(),
                },
                subjects: Some(vec![Subject {
                    kind: "ServiceAccount".to_owned(),
                    name: name.clone(),
                    namespace: Some("default".to_owned()),
                    ..Subject::default()
                }]),
            },
        )
        .await
        .unwrap();
    let sas: Api<ServiceAccount> = Api::namespaced(client, "default");
    let mut tokens = Vec::new();
    for sa in [name.clone(), format!("{name}-x")] {
        sas.create(
            &pp,
            &ServiceAccount {
                metadata: meta(&sa),
                ..ServiceAccount::default()
            },
        )
        .await
        .unwrap();
        let req = TokenRequest {
            spec: TokenRequestSpec {
                expiration_seconds: Some(600),
                ..TokenRequestSpec::default()
            },
            ..TokenRequest::default()
        };
        let t = sas.create_token_request(&sa, &pp, &req).await.unwrap();
        tokens.push(t.status.unwrap().token);
    }
    (tokens.remove(0), tokens.remove(0))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn healthz_and_metrics_over_https() {
    let env = TestEnv::get();
    let port = free_port();
    let lease = unique_name("ccm-serving");
    let selector = format!("ccm-test-runtime={}", unique_name("sel"));
    let options = Options::try_parse_from([
        "--cloud-provider=fake".to_owned(),
        format!("--kubeconfig={}", env.kubeconfig.display()),
        "--bind-address=127.0.0.1".to_owned(),
        format!("--secure-port={port}"),
        format!("--leader-elect-resource-name={lease}"),
        "--cluster-cidr=10.244.0.0/16".to_owned(),
        "--route-reconciliation-period=1s".to_owned(),
        "--controllers=*,probe".to_owned(),
        "--profiling=false".to_owned(),
    ])
    .unwrap();
    let provider_metric = Counter::<u64>::default();
    provider_metric.inc_by(7);
    let mut runtime = Runtime::new(options)
        .with_selectors(Some(selector.clone()), Some(selector))
        .with_controller("probe", false, |ctx| async move {
            // A provider controller with a work queue, as the AWS tagging controller: its `workqueue_*` series
            // appear under the upstream name it gives its queue.
            ctx.metrics.set_queue_name("tagging-controller");
            let queue = ccm_controllers::WorkQueue::<String>::with_metrics(ctx.metrics.clone());
            queue.add("node-1");
            ctx.shutdown.cancelled().await;
            Ok(())
        });
    runtime.registry().register(
        "fake_provider_api_calls",
        "Calls the fake provider made",
        provider_metric,
    );
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(runtime.run_until(Arc::new(FakeProvider::new()), async {
        let _ = rx.await;
    }));

    let mut headers = reqwest::header::HeaderMap::new();
    headers.insert(
        reqwest::header::AUTHORIZATION,
        format!("Bearer {}", admin_token()).parse().unwrap(),
    );
    let client = reqwest::Client::builder()
        .danger_accept_invalid_certs(true)
        .timeout(Duration::from_secs(5))
        .default_headers(headers)
        .build()
        .unwrap();
    let anonymous = reqwest::Client::builder()
        .danger_accept_invalid_certs(true)
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    let base = format!("https://127.0.0.1:{port}");

    // Wait until leading: the controllers' checks appear once they are started.
    let t0 = Instant::now();
    let verbose = loop {
        if let Ok(r) = client.get(format!("{base}/healthz?verbose")).send().await {
            let body = r.text().await.unwrap();
            if body.contains("node-route-controller") {
                break body;
            }
        }
        assert!(t0.elapsed() < Duration::from_secs(20), "controllers not started");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    for check in [
        "[+]leaderElection ok",
        "[+]cloud-node-controller ok",
        "[+]cloud-node-lifecycle-controller ok",
        "[+]service-lb-controller ok",
        "[+]node-route-controller ok",
        "[+]probe ok",
    ] {
        assert!(verbose.contains(check), "{check} missing from {verbose}");
    }
    assert_eq!(
        get(&client, &format!("{base}/healthz")).await,
        (200, "ok".to_owned())
    );
    assert_eq!(
        get(&client, &format!("{base}/healthz/leaderElection")).await.0,
        200
    );
    assert_eq!(
        get(&client, &format!("{base}/healthz/service-lb-controller"))
            .await
            .0,
        200
    );
    assert_eq!(get(&client, &format!("{base}/healthz/nope")).await.0, 404);
    // The Go manager's other health endpoints (always allowed by default) and /configz.
    for endpoint in ["livez", "readyz"] {
        assert_eq!(
            get(&anonymous, &format!("{base}/{endpoint}")).await,
            (200, "ok".to_owned())
        );
        let (status, body) = get(&client, &format!("{base}/{endpoint}?verbose")).await;
        assert_eq!(status, 200);
        assert!(
            body.contains("[+]leaderElection ok") && body.ends_with(&format!("{endpoint} check passed\n")),
            "{body}"
        );
        assert_eq!(
            get(&client, &format!("{base}/{endpoint}/leaderElection")).await.0,
            200
        );
    }
    let (status, configz) = get(&client, &format!("{base}/configz")).await;
    assert_eq!(status, 200, "{configz}");
    let configz: serde_json::Value = serde_json::from_str(&configz).unwrap();
    let c = &configz["cloudcontrollermanager.config.k8s.io"];
    assert_eq!(c["kind"], "CloudControllerManagerConfiguration");
    assert_eq!(c["Generic"]["LeaderElection"]["ResourceName"], lease.as_str());
    assert_eq!(c["KubeCloudShared"]["ClusterCIDR"], "10.244.0.0/16");
    assert_eq!(
        get(&anonymous, &format!("{base}/configz")).await.0,
        403,
        "not always allowed"
    );
    assert_eq!(get(&client, &format!("{base}/debug/pprof/")).await.0, 404);

    // The route controller passes every second; wait for one to be counted.
    let t0 = Instant::now();
    let metrics = loop {
        let (status, body) = get(&client, &format!("{base}/metrics")).await;
        assert_eq!(status, 200);
        if body.contains("ccm_controller_reconciles_total{controller=\"node-route-controller\"} ")
            && !body.contains("ccm_controller_reconciles_total{controller=\"node-route-controller\"} 0")
        {
            break body;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(15),
            "no route pass counted:\n{body}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    for line in [
        "running_managed_controllers{name=\"cloud-node\",manager=\"cloud-controller-manager\"} 1",
        "running_managed_controllers{name=\"cloud-node-lifecycle\",manager=\"cloud-controller-manager\"} 1",
        "running_managed_controllers{name=\"service\",manager=\"cloud-controller-manager\"} 1",
        "running_managed_controllers{name=\"route\",manager=\"cloud-controller-manager\"} 1",
        "running_managed_controllers{name=\"probe\",manager=\"cloud-controller-manager\"} 1",
        "# TYPE ccm_controller_reconciles counter",
        "# TYPE ccm_controller_errors counter",
        "# TYPE ccm_controller_provider_calls counter",
        "# TYPE ccm_controller_api_writes counter",
        "# TYPE ccm_controller_queue_depth gauge",
        "ccm_controller_queue_depth{controller=\"cloud-node-controller\"} 0",
        "ccm_controller_errors_total{controller=\"service-lb-controller\"} 0",
        "ccm_controller_reconciles_total{controller=\"probe\"} 0",
        &format!("leader_election_master_status{{name=\"{lease}\"}} 1"),
        "fake_provider_api_calls_total 7",
    ] {
        assert!(metrics.contains(line), "{line} missing from\n{metrics}");
    }
    assert_upstream_names(&metrics);

    // Delegated authentication and authorization: /healthz is always allowed, /metrics needs a token allowed
    // the path (TokenReview, then SubjectAccessReview).
    assert_eq!(
        get(&anonymous, &format!("{base}/healthz")).await,
        (200, "ok".to_owned())
    );
    let (status, body) = get(&anonymous, &format!("{base}/metrics")).await;
    assert_eq!(status, 403, "{body}");
    assert!(body.contains("system:anonymous"), "{body}");
    assert_eq!(
        get(&anonymous, &format!("{base}/healthz/leaderElection")).await.0,
        403,
        "exact paths only"
    );
    let bad = anonymous
        .get(format!("{base}/metrics"))
        .bearer_auth("not-a-token")
        .send()
        .await
        .unwrap();
    assert_eq!(bad.status().as_u16(), 401);

    // A service account allowed GET /metrics by RBAC gets the metrics; one without the grant does not.
    let (allowed, denied) = metrics_reader_tokens().await;
    // RBAC reaches the apiserver's authorizer through its informers, and a denial is cached for 10 s: retry.
    let t0 = Instant::now();
    loop {
        let r = anonymous
            .get(format!("{base}/metrics"))
            .bearer_auth(&allowed)
            .send()
            .await
            .unwrap();
        if r.status().as_u16() == 200 {
            assert!(r.text().await.unwrap().contains("running_managed_controllers"));
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(25),
            "the bound service account is refused: {r:?}"
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let r = anonymous
        .get(format!("{base}/metrics"))
        .bearer_auth(&denied)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 403);

    tx.send(()).unwrap();
    task.await.unwrap().unwrap();
    // The server stops with the runtime.
    assert!(client.get(format!("{base}/healthz")).send().await.is_err());
}

/// The samples a Go cloud controller manager serves from component-base and client-go, as Prometheus ingests
/// them: `metrics/prometheus/workqueue/metrics.go` (per queue, the cloud-provider queue names `service` and
/// `Nodes`, and cloud-provider-aws's `tagging-controller`, its `TaggingControllerClientName`),
/// `metrics/prometheus/restclient/metrics.go`, the Prometheus process collector and client-go's
/// `leaderelection` metric (labelled with the Lease name).
const UPSTREAM_SAMPLES: &[&str] = &[
    "workqueue_depth{name=\"service\"}",
    "workqueue_depth{name=\"Nodes\"}",
    "workqueue_adds_total{name=\"service\"}",
    "workqueue_retries_total{name=\"Nodes\"}",
    "workqueue_queue_duration_seconds_bucket{le=\"+Inf\",name=\"service\"}",
    "workqueue_queue_duration_seconds_sum{name=\"Nodes\"}",
    "workqueue_work_duration_seconds_count{name=\"service\"}",
    "workqueue_unfinished_work_seconds{name=\"service\"}",
    "workqueue_longest_running_processor_seconds{name=\"Nodes\"}",
    "workqueue_depth{name=\"tagging-controller\"} 1",
    "workqueue_adds_total{name=\"tagging-controller\"} 1",
    "workqueue_queue_duration_seconds_count{name=\"tagging-controller\"}",
    "rest_client_requests_total{code=\"200\",method=\"GET\",host=",
    "rest_client_request_duration_seconds_bucket{le=\"60.0\",verb=\"GET\",host=",
    "rest_client_request_size_bytes_bucket{le=\"64.0\",verb=\"GET\",host=",
    "rest_client_response_size_bytes_bucket{le=\"16777216.0\",verb=\"GET\",host=",
    "process_cpu_seconds_total ",
    "process_resident_memory_bytes ",
    "process_virtual_memory_bytes ",
    "process_open_fds ",
    "process_max_fds ",
    "process_start_time_seconds ",
    "leader_election_master_status{name=\"",
];

fn assert_upstream_names(metrics: &str) {
    for sample in UPSTREAM_SAMPLES {
        assert!(
            metrics.lines().any(|l| l.starts_with(sample)),
            "the Go controller's {sample} is not served:\n{metrics}"
        );
    }
    for (family, kind) in [
        ("workqueue_adds", "counter"),
        ("workqueue_depth", "gauge"),
        ("workqueue_queue_duration_seconds", "histogram"),
        ("rest_client_requests", "counter"),
        ("rest_client_request_duration_seconds", "histogram"),
        ("rest_client_request_size_bytes", "histogram"),
        ("rest_client_response_size_bytes", "histogram"),
        ("process_start_time_seconds", "gauge"),
    ] {
        let line = format!("# TYPE {family} {kind}");
        assert!(metrics.contains(&line), "{line} missing");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn certificate_from_cert_dir_is_generated_then_reused() {
    let env = TestEnv::get();
    let dir = std::env::temp_dir().join(unique_name("ccm-cert-dir"));
    let run = |port: u16| {
        let options = Options::try_parse_from([
            "--cloud-provider=fake".to_owned(),
            format!("--kubeconfig={}", env.kubeconfig.display()),
            "--bind-address=127.0.0.1".to_owned(),
            format!("--secure-port={port}"),
            format!("--cert-dir={}", dir.display()),
            "--leader-elect=false".to_owned(),
            "--controllers=probe".to_owned(),
        ])
        .unwrap();
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let runtime = Runtime::new(options).with_controller("probe", false, |ctx| async move {
            ctx.shutdown.cancelled().await;
            Ok(())
        });
        let task = tokio::spawn(runtime.run_until(Arc::new(FakeProvider::new()), async {
            let _ = rx.await;
        }));
        (tx, task)
    };
    let client = reqwest::Client::builder()
        .danger_accept_invalid_certs(true)
        .build()
        .unwrap();
    let mut seen = Vec::new();
    for _ in 0..2 {
        let port = free_port();
        let (tx, task) = run(port);
        let t0 = Instant::now();
        loop {
            if let Ok(r) = client
                .get(format!("https://127.0.0.1:{port}/healthz"))
                .send()
                .await
            {
                assert_eq!(r.status().as_u16(), 200);
                break;
            }
            assert!(t0.elapsed() < Duration::from_secs(10), "not serving");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        seen.push(std::fs::read(dir.join("cloud-controller-manager.crt")).unwrap());
        tx.send(()).unwrap();
        task.await.unwrap().unwrap();
    }
    assert_eq!(
        seen[0], seen[1],
        "the certificate written to --cert-dir is reused"
    );
    assert!(String::from_utf8_lossy(&seen[0]).starts_with("-----BEGIN CERTIFICATE-----"));
    // The private key is readable by its owner only (it was world-readable with the umask's 0644).
    use std::os::unix::fs::PermissionsExt;
    let key = std::fs::metadata(dir.join("cloud-controller-manager.key")).unwrap();
    assert_eq!(key.permissions().mode() & 0o777, 0o600);
    let _ = std::fs::remove_dir_all(&dir);
}
