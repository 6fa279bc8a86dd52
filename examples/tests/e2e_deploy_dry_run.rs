//! End to end: the dry run as shipped, run by the real binary with exactly the flags the manifests render.
//!
//! The Helm chart with `dryRun.enabled`, its RBAC applied for real under test names: the DaemonSet's process and
//! the dry-run Deployment's process run side by side on this machine's network, as the two pods share a control
//! plane node's (`hostNetwork`). The controller's `args` move it to another `--secure-port` (the split form) and
//! `--bind-address=127.0.0.1`, so its rendered liveness probe must follow both; the dry run gets its own port.
//! Each process answers its rendered probes there, both run as the chart's ServiceAccount with nothing
//! forbidden, and `/dry-run` answers a token bound by `dryRun.readers` to the rendered reader ClusterRole and
//! refuses one that is not. Then the kustomize overlay `deploy/kustomize/overlays/dry-run` beside a Go-era
//! account (the Go chart's rules without TokenReview and SubjectAccessReview, as the Go kustomize base grants):
//! the overlay's own auth-delegator binding lets it check its readers, it reads a new Node with that account's
//! rights, and the report answers a token bound by the command the overlay documents.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::too_many_lines)]

mod common;
mod support;

use std::{
    fs::File,
    path::{Path, PathBuf},
    process::{Child, Command},
    time::Duration,
};

use ccm_testing::{TestEnv, unique_name};
use common::{World, free_port};
use kube::Api;
use serde_json::{Value, json};
use support::{helm, manifests};

/// A process of the binary, started with the rendered container's arguments, killed when dropped.
struct Process {
    child: Child,
    log: PathBuf,
}

impl Process {
    /// `args` as rendered, then only what connects it to the test environment: the kubeconfig (in a pod, the
    /// service account's token) and the cloud config naming moto and the IMDS emulator.
    fn start(world: &World, name: &str, args: &[&str], kubeconfig: &Path) -> Self {
        let log = world.dir.join(format!("{name}.log"));
        let out = File::create(&log).unwrap();
        let child = common::ccm_command(env!("CARGO_BIN_EXE_aws-cloud-controller-manager"))
            .args(args)
            .arg(format!("--kubeconfig={}", kubeconfig.display()))
            .arg(format!("--cloud-config={}", world.cloud_config.display()))
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .spawn()
            .unwrap();
        Self { child, log }
    }

    fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Waits until `url` answers 200 (60 s), failing with the log if the process exits or never answers.
    async fn until_ok(&mut self, url: &str) {
        let log = self.log.clone();
        let log = || std::fs::read_to_string(&log).unwrap_or_default();
        let what = format!("{url} answered 200");
        common::while_running(&mut self.child, log, &what, 60, async || {
            get(url, None).await.is_some_and(|(status, _)| status == 200)
        })
        .await;
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// GET over HTTPS (self-signed serving certificate), with a bearer token if given: status and body.
async fn get(url: &str, token: Option<&str>) -> Option<(u16, String)> {
    let client = reqwest::Client::builder()
        .danger_accept_invalid_certs(true)
        .build()
        .unwrap();
    let mut request = client.get(url);
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let response = request.send().await.ok()?;
    let status = response.status().as_u16();
    Some((status, response.text().await.unwrap_or_default()))
}

/// This machine's address on its default route: what a host-network pod's IP is, the kubelet's default probe host.
fn node_ip() -> String {
    let socket = std::net::UdpSocket::bind("0.0.0.0:0").unwrap();
    // Connecting a UDP socket sends nothing: it only picks the route and so the source address.
    socket.connect("192.0.2.1:9").expect("a default route");
    let ip = socket.local_addr().unwrap().ip();
    assert!(
        !ip.is_loopback(),
        "{ip}: this machine has no address but loopback"
    );
    ip.to_string()
}

/// The URL the kubelet probes for `probe` of `container` (host: the probe's, else the pod's: with hostNetwork,
/// the node's address, this machine's).
fn probe_url(container: &Value, probe: &str) -> String {
    let get = &container[probe]["httpGet"];
    assert_eq!(get["scheme"], "HTTPS", "{probe}: {container:#}");
    format!(
        "https://{}:{}{}",
        get["host"].as_str().map_or_else(node_ip, str::to_owned),
        get["port"],
        get["path"].as_str().unwrap()
    )
}

fn args(container: &Value) -> Vec<&str> {
    container["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect()
}

fn container(obj: &Value) -> &Value {
    &obj["spec"]["template"]["spec"]["containers"][0]
}

async fn service_account(client: &kube::Client, name: &str) {
    let sa = json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name, "namespace": "kube-system"}});
    manifests::apply(client, &sa).await;
}

/// The dry run's report answers a reader's token (the rendered ClusterRole, bound) and refuses another one.
async fn assert_report_readable(port: u16, reader: &str, stranger: &str) {
    let url = format!("https://127.0.0.1:{port}/dry-run");
    let (status, body) = get(&url, Some(reader)).await.unwrap();
    assert_eq!(status, 200, "{body}");
    let report: Value = serde_json::from_str(&body).unwrap_or_else(|e| panic!("{e}: {body}"));
    assert!(report.get("pending_objects").is_some(), "{report:#}");
    let (status, body) = get(&url, Some(stranger)).await.unwrap();
    assert_eq!(status, 403, "a token without the reader role: {body}");
}

fn assert_nothing_forbidden(process: &Process) {
    let log = process.log_text();
    assert!(!log.to_lowercase().contains("forbidden"), "{log}");
}

#[tokio::test]
async fn e2e_the_charts_controller_and_dry_run_run_side_by_side() {
    let admin = TestEnv::get().kube_client().await.unwrap();
    let world = World::new("").await;
    let name = unique_name("e2e-chart");
    let (controller_port, dry_port) = (free_port(), free_port());
    let reader = format!("{name}-reader");
    let stranger = format!("{name}-stranger");
    let values = helm::values_file(
        "e2e-dry-run",
        &json!({
            "fullnameOverride": name,
            "serviceAccountName": name,
            "clusterRoleName": format!("{name}:controller"),
            "roleBindingName": format!("{name}:authentication-reader"),
            "leaderElection": {"namespace": "kube-system", "leaseNames": [name], "roleName": format!("{name}:leases")},
            "args": ["--v=2", "--cloud-provider=aws", "--secure-port", controller_port.to_string(),
                     "--bind-address=127.0.0.1", format!("--leader-elect-resource-name={name}")],
            "dryRun": {"enabled": true, "securePort": dry_port,
                       "readers": [{"kind": "ServiceAccount", "name": reader, "namespace": "kube-system"}]},
        }),
    );
    let (objects, _) = helm::template(&[&values]).unwrap();
    for obj in objects
        .iter()
        .filter(|o| o["kind"] != "DaemonSet" && o["kind"] != "Deployment")
    {
        manifests::apply(&admin, obj).await;
    }
    service_account(&admin, &reader).await;
    service_account(&admin, &stranger).await;
    let kubeconfig = world.service_account_kubeconfig(&admin, &name).await;

    let ds = helm::object(&objects, "DaemonSet", None);
    let dry = helm::object(&objects, "Deployment", None);
    let mut controller = Process::start(&world, "controller", &args(container(ds)), &kubeconfig);
    let mut dry_run = Process::start(&world, "dry-run", &args(container(dry)), &kubeconfig);
    controller
        .until_ok(&probe_url(container(ds), "livenessProbe"))
        .await;
    for probe in ["readinessProbe", "livenessProbe"] {
        dry_run.until_ok(&probe_url(container(dry), probe)).await;
    }
    assert!(probe_url(container(ds), "livenessProbe").contains(&format!("127.0.0.1:{controller_port}/")));
    assert_report_readable(
        dry_port,
        &common::service_account_token(&admin, &reader).await,
        &common::service_account_token(&admin, &stranger).await,
    )
    .await;
    // The controller leads (its Lease, through the chart's Role); the dry run takes none.
    let leases: Api<k8s_openapi::api::coordination::v1::Lease> =
        Api::namespaced(admin.clone(), "kube-system");
    for _ in 0..100 {
        if leases.get_opt(&name).await.unwrap().is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let lease = leases
        .get(&name)
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", controller.log_text()));
    let holder = lease.spec.unwrap().holder_identity.unwrap_or_default();
    assert!(!holder.is_empty(), "{}", controller.log_text());
    assert_nothing_forbidden(&controller);
    assert_nothing_forbidden(&dry_run);
    drop((controller, dry_run));
    world.cleanup().await;
}

/// The running controller's account as the Go kustomize base and older Go charts make it: the Go chart's rules
/// without tokenreviews and subjectaccessreviews (a fresh account, so that no other test's binding helps).
async fn go_era_account(admin: &kube::Client) -> String {
    let account = unique_name("e2e-go-account");
    service_account(admin, &account).await;
    let go = manifests::yaml_file(&manifests::repo().join("examples/tests/support/go-chart-values.yaml"));
    let rules: Vec<&Value> = go["clusterRoleRules"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| {
            !r["apiGroups"].to_string().contains("authentication.k8s.io")
                && !r["apiGroups"].to_string().contains("authorization.k8s.io")
        })
        .collect();
    let role = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                      "metadata": {"name": account}, "rules": rules});
    let binding = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                         "metadata": {"name": account},
                         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": account},
                         "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": "kube-system"}]});
    manifests::apply(admin, &role).await;
    manifests::apply(admin, &binding).await;
    account
}

/// The overlay as rendered, its account (the Deployment's and the auth-delegator binding's) renamed to `account`.
fn overlay_as(account: &str) -> Vec<Value> {
    let mut overlay = manifests::kustomize("overlays/dry-run");
    for obj in &mut overlay {
        if obj["kind"] == "Deployment" {
            assert_eq!(
                obj["spec"]["template"]["spec"]["serviceAccountName"],
                "cloud-controller-manager"
            );
            obj["spec"]["template"]["spec"]["serviceAccountName"] = json!(account);
        } else if obj["kind"] == "ClusterRoleBinding" {
            assert_eq!(
                obj["subjects"][0]["name"], "cloud-controller-manager",
                "the dry run's account"
            );
            obj["subjects"][0]["name"] = json!(account);
            obj["metadata"]["name"] = json!(format!("{account}:auth-delegator"));
        }
    }
    overlay
}

/// Waits until the report on `port` holds a cloud-node write for `node` (60 s).
async fn until_node_pending(process: &Process, port: u64, token: &str, node: &str) {
    let url = format!("https://127.0.0.1:{port}/dry-run");
    let path = format!("/api/v1/nodes/{node}");
    for _ in 0..300 {
        let (_, body) = get(&url, Some(token)).await.unwrap();
        let report: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
        if report["writes"].as_array().is_some_and(|w| {
            w.iter().any(|w| {
                w["controller"] == "cloud-node" && w["path"].as_str().is_some_and(|p| p.starts_with(&path))
            })
        }) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    panic!("the Node never showed up in the report\n{}", process.log_text());
}

#[tokio::test]
async fn e2e_the_kustomize_dry_run_overlay_runs_beside_a_go_era_account() {
    let admin = TestEnv::get().kube_client().await.unwrap();
    let world = World::new("").await;
    let account = go_era_account(&admin).await;
    let overlay = overlay_as(&account);
    for obj in overlay.iter().filter(|o| o["kind"] != "Deployment") {
        manifests::apply(&admin, obj).await;
    }
    let dry = manifests::find(&overlay, "Deployment", "aws-cloud-controller-manager-dry-run");
    // The binding, made as reader-role.yaml says (under a test name).
    let reader = unique_name("e2e-overlay-reader");
    let stranger = unique_name("e2e-overlay-stranger");
    service_account(&admin, &reader).await;
    service_account(&admin, &stranger).await;
    let kubectl = std::env::var("KUBECTL").unwrap_or_else(|_| "kubectl".to_owned());
    let out = Command::new(&kubectl)
        .arg(format!("--kubeconfig={}", TestEnv::get().kubeconfig.display()))
        .args([
            "create",
            "clusterrolebinding",
            &reader,
            "--clusterrole=aws-cloud-controller-manager-dry-run-reader",
        ])
        .arg(format!("--serviceaccount=kube-system:{reader}"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));

    let port = container(dry)["ports"][0]["containerPort"].as_u64().unwrap();
    assert!(
        std::net::TcpListener::bind(("0.0.0.0", u16::try_from(port).unwrap())).is_ok(),
        "port {port}, the overlay's, is taken on this machine: stop what holds it"
    );
    let kubeconfig = world.service_account_kubeconfig(&admin, &account).await;
    let mut dry_run = Process::start(&world, "overlay-dry-run", &args(container(dry)), &kubeconfig);
    for probe in ["readinessProbe", "livenessProbe"] {
        dry_run.until_ok(&probe_url(container(dry), probe)).await;
    }
    let reader_token = common::service_account_token(&admin, &reader).await;
    assert_report_readable(
        u16::try_from(port).unwrap(),
        &reader_token,
        &common::service_account_token(&admin, &stranger).await,
    )
    .await;
    // The controllers read with the Go-era account's rights: an uninitialized Node shows up as the cloud-node controller's
    // pending write, and none of their reads was forbidden.
    let node = world.launch(1).await.remove(0).id;
    world.register_node(&node, None).await;
    until_node_pending(&dry_run, port, &reader_token, &node).await;
    assert_nothing_forbidden(&dry_run);
    drop(dry_run);
    world.cleanup().await;
}
