//! `--dry-run` against the real apiserver: with `--leader-elect=true` it takes no Lease, an uninitialized Node is
//! left as it is, the write the cloud-node controller would have made is recorded under its name, the route
//! controller reports the routes it would create, and the service controller plans (again when the Nodes
//! change) instead of ensuring.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::too_many_lines)]

use std::{sync::Arc, time::Duration};

use ccm_controller_manager::{Options, Runtime};
use ccm_testing::{
    TestEnv,
    fixtures::{NodeBuilder, ServiceBuilder},
    nodes::UNINITIALIZED,
    provider::{FakeInstance, FakeProvider, Method},
    unique_name,
};
use k8s_openapi::api::{
    coordination::v1::Lease,
    core::v1::{Node, Service},
};
use kube::{Api, api::PostParams};

const FINALIZER: &str = "service.kubernetes.io/load-balancer-cleanup";
use tokio::time::Instant;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dry_run_takes_no_lease_and_writes_nothing() {
    let env = TestEnv::get();
    let client = env.kube_client().await.unwrap();
    let nodes: Api<Node> = Api::all(client.clone());
    let group = unique_name("dry");
    let name = unique_name("dry-node");
    let node = NodeBuilder::new(&name)
        .label("ccm-test-dry-run", &group)
        .taint(UNINITIALIZED, "NoSchedule")
        .pod_cidrs(&["10.244.7.0/24"])
        .build();
    nodes.create(&PostParams::default(), &node).await.unwrap();
    let provider = Arc::new(FakeProvider::new());
    let services: Api<Service> = Api::namespaced(client.clone(), "default");
    let svc_name = unique_name("dry-svc");
    let svc = ServiceBuilder::new("default", &svc_name)
        .label("ccm-test-dry-run", &group)
        .port(80, "TCP", None)
        .build();
    services.create(&PostParams::default(), &svc).await.unwrap();
    provider.add_instance(FakeInstance::new(&name, "fake:///zone-a/i-1"));

    let lease = unique_name("dry-lease");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let options = Options::try_parse_from([
        "--cloud-provider=fake".to_owned(),
        format!("--kubeconfig={}", env.kubeconfig.display()),
        "--bind-address=127.0.0.1".to_owned(),
        format!("--secure-port={port}"),
        // The report and the gauge without a token, for this test (they are authorized as /metrics otherwise).
        "--authorization-always-allow-paths=/healthz,/dry-run,/metrics".to_owned(),
        "--dry-run".to_owned(),
        "--leader-elect=true".to_owned(),
        format!("--leader-elect-resource-name={lease}"),
        "--controllers=cloud-node,service,route".to_owned(),
        "--configure-cloud-routes=true".to_owned(),
        "--cluster-cidr=10.244.0.0/16".to_owned(),
        "--route-reconciliation-period=1s".to_owned(),
    ])
    .unwrap();
    let selector = format!("ccm-test-dry-run={group}");
    let runtime = Runtime::new(options).with_selectors(Some(selector.clone()), Some(selector));
    let log = runtime.dry_run_log();
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(runtime.run_until(provider.clone(), async {
        let _ = rx.await;
    }));

    let path = format!("/api/v1/nodes/{name}");
    let t0 = Instant::now();
    while !log.writes().iter().any(|w| w.path == path) {
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "no write recorded: {:?}",
            log.writes()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let write = log.writes().into_iter().find(|w| w.path == path).unwrap();
    assert_eq!(write.controller, "cloud-node");
    assert_eq!(log.pending_objects().get("cloud-node"), Some(&1));

    // The report and the gauge on the secure port.
    let https = reqwest::Client::builder()
        .danger_accept_invalid_certs(true)
        .build()
        .unwrap();
    let get = async |path: &str| {
        let url = format!("https://127.0.0.1:{port}{path}");
        https.get(url).send().await.unwrap().text().await.unwrap()
    };
    let report: serde_json::Value = serde_json::from_str(&get("/dry-run").await).unwrap();
    assert_eq!(report["pending_objects"]["cloud-node"], 1, "{report}");
    let writes = report["writes"].as_array().unwrap();
    assert!(writes.iter().any(|w| w["path"] == path.as_str()), "{report}");
    let metrics = get("/metrics").await;
    assert!(
        metrics.contains("cloud_controller_dry_run_pending_changes{controller=\"cloud-node\"} 1"),
        "{metrics}"
    );

    // The service controller planned instead of ensuring: the plan is in the report, the Service has no
    // finalizer and no status, and the provider was never asked to ensure.
    let key = format!("default/{svc_name}");
    let t0 = Instant::now();
    while !log.plans().contains_key(&key) {
        assert!(t0.elapsed() < Duration::from_secs(30), "no plan recorded");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let report: serde_json::Value = serde_json::from_str(&get("/dry-run").await).unwrap();
    let lbs = report["load_balancers"].as_array().unwrap();
    assert!(lbs.iter().any(|l| l["service"] == key.as_str()), "{report}");
    assert_eq!(provider.count(Method::EnsureLoadBalancer), 0);
    // A Node joins: the plan is made again, against the new host set.
    let first = log.plans()[&key].changes.clone();
    let joined = unique_name("dry-node");
    let node2 = NodeBuilder::new(&joined)
        .label("ccm-test-dry-run", &group)
        .provider_id("fake:///zone-a/i-2")
        .build();
    nodes.create(&PostParams::default(), &node2).await.unwrap();
    let t0 = Instant::now();
    while log.plans()[&key].changes == first {
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "not planned again: {first:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // The route controller reports the route it would create, and creates none.
    let t0 = Instant::now();
    while !log
        .route_changes()
        .get(&name)
        .is_some_and(|c| c.iter().any(|l| l.contains("create route 10.244.7.0/24")))
    {
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "no route planned: {:?}",
            log.route_changes()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(provider.count(Method::CreateRoute), 0);
    assert_eq!(log.pending_objects().get("route"), Some(&1));
    let now = services.get(&svc_name).await.unwrap();
    assert_eq!(now.metadata.finalizers, None);
    let ingress = now.status.and_then(|s| s.load_balancer).and_then(|l| l.ingress);
    assert!(ingress.unwrap_or_default().is_empty());
    // The Service deleted: nothing pending for it any more (the report follows the cluster).
    services.delete(&svc_name, &Default::default()).await.unwrap();
    let t0 = Instant::now();
    while log.plans().contains_key(&key) {
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "the deleted Service's plan stays"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // A ClusterIP Service still carrying our finalizer (its load balancer gone): the finalizer's removal is
    // what is pending, and it is not removed.
    let left = unique_name("dry-left");
    let leftover = ServiceBuilder::new("default", &left)
        .label("ccm-test-dry-run", &group)
        .type_("ClusterIP")
        .finalizer(FINALIZER)
        .port(80, "TCP", None)
        .build();
    services.create(&PostParams::default(), &leftover).await.unwrap();
    let left_key = format!("default/{left}");
    let t0 = Instant::now();
    while !log.plans().contains_key(&left_key) {
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "no plan for the finalizer"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let changes = log.plans()[&left_key].changes.clone();
    assert_eq!(
        changes,
        [format!("remove the finalizer {FINALIZER} from {left_key}")]
    );
    let now = services.get(&left).await.unwrap();
    assert_eq!(now.metadata.finalizers, Some(vec![FINALIZER.to_owned()]));
    let unfinalize = serde_json::json!({ "metadata": { "finalizers": null } });
    services
        .patch(
            &left,
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(&unfinalize),
        )
        .await
        .unwrap();
    services.delete(&left, &Default::default()).await.unwrap();

    // Nothing was written: the Node keeps its taint and has no provider ID, and no Lease exists.
    let now = nodes.get(&name).await.unwrap();
    let spec = now.spec.unwrap_or_default();
    assert_eq!(spec.provider_id, None);
    assert!(
        spec.taints
            .unwrap_or_default()
            .iter()
            .any(|t| t.key == UNINITIALIZED)
    );
    let leases: Api<Lease> = Api::namespaced(client, "kube-system");
    assert!(
        leases.get_opt(&lease).await.unwrap().is_none(),
        "a Lease was taken"
    );

    tx.send(()).unwrap();
    task.await.unwrap().unwrap();
    nodes.delete(&name, &Default::default()).await.unwrap();
    nodes.delete(&joined, &Default::default()).await.unwrap();
}
