//! What the end-to-end tests of `aws-cloud-controller-manager` share: an AWS "world" in moto (a VPC, the CCM's own
//! instance tagged for a fresh cluster, an IMDS emulator that names that instance, and a cloud config that points
//! the CCM at both), and the CCM process itself with its log, metrics and graceful stop.
#![allow(clippy::unwrap_used, clippy::expect_used, dead_code, unused_imports)]

pub mod lb;
pub mod nlb;
pub mod nlb_world;
pub mod slices;

pub use ccm_testing::nodes::{is_initialized as initialized, label, taint_keys};

use std::{
    fs::File,
    path::PathBuf,
    process::{Child, Command, ExitStatus},
    time::Duration,
};

use ccm_testing::{ImdsEmulator, TestEnv, ec2, unique_name};
use k8s_openapi::api::core::v1::Node;
use kube::{
    Api,
    api::{Patch, PostParams},
};
use serde_json::json;

/// moto, an IMDS emulator and a cloud config for one test's cluster.
pub struct World {
    pub extra_config: String,
    pub raw: aws_sdk_ec2::Client,
    pub network: ccm_testing::world::World,
    pub cluster_id: String,
    pub self_instance: ec2::Launched,
    pub imds: ImdsEmulator,
    pub cloud_config: PathBuf,
    pub dir: PathBuf,
    pub nodes: Api<Node>,
}

impl World {
    /// A fresh cluster: VPC, the CCM's instance (tagged `kubernetes.io/cluster/<id>=owned`; the CCM finds its
    /// cluster ID there, as on a real control-plane node), IMDS naming it, and `extra_config` appended to the
    /// cloud config's `[Global]` section.
    pub async fn new(extra_config: &str) -> Self {
        Self::at_octet(extra_config, None).await
    }

    /// [`World::new`] in the VPC `10.<octet>.0.0/16` (else one derived from the cluster ID).
    pub async fn at_octet(extra_config: &str, octet: Option<u8>) -> Self {
        let env = TestEnv::get();
        let raw = aws_sdk_ec2::Client::new(&env.aws_config().await);
        let cluster_id = unique_name("e2e");
        let network =
            ccm_testing::world::World::builder(octet.unwrap_or_else(|| ec2::octet_for(&cluster_id)))
                .subnet("us-east-1a", &[])
                .build(&raw)
                .await
                .unwrap();
        let key = format!("kubernetes.io/cluster/{cluster_id}");
        let self_instance = network.launch(1, &[(&key, "owned")]).await.unwrap().remove(0);
        let imds = ImdsEmulator::start(&self_instance.id, "us-east-1a", &env.aws_region)
            .await
            .unwrap();
        let dir = std::env::temp_dir().join(&cluster_id);
        std::fs::create_dir_all(&dir).unwrap();
        let cloud_config = write_config(
            &dir,
            "cloud.conf",
            extra_config,
            &env.aws_endpoint,
            &imds.endpoint(),
        );
        let nodes: Api<Node> = Api::all(env.kube_client().await.unwrap());
        // The CCM sees every Node: remove those an earlier, failed run of an end-to-end test left behind (these
        // tests run one at a time, so none is in use).
        let stale = kube::api::ListParams::default().labels("e2e-cluster");
        nodes
            .delete_collection(&Default::default(), &stale)
            .await
            .unwrap();
        Self {
            extra_config: extra_config.to_owned(),
            raw,
            network,
            cluster_id,
            self_instance,
            imds,
            cloud_config,
            dir,
            nodes,
        }
    }

    /// Another cloud config for this world whose AWS endpoints are `aws_endpoint` (e.g. a fault proxy).
    pub fn config_via(&self, file: &str, aws_endpoint: &str) -> PathBuf {
        write_config(
            &self.dir,
            file,
            &self.extra_config,
            aws_endpoint,
            &self.imds.endpoint(),
        )
    }

    /// This world as a control plane outside AWS sees it: the cloud config names Region, VPC, SubnetID and
    /// KubernetesClusterID (no IMDS needed), written beside the world's own; the world and that file.
    pub fn outside_aws(self) -> (Self, PathBuf) {
        let env = TestEnv::get();
        let extra_config = format!(
            "Region = {}\nVPC = {}\nSubnetID = {}\nKubernetesClusterID = {}\n",
            env.aws_region,
            self.network.vpc,
            self.network.subnet(),
            self.cluster_id
        );
        let world = Self { extra_config, ..self };
        let config = world.config_via("external.conf", &env.aws_endpoint);
        (world, config)
    }

    /// A kubeconfig in the world's directory that authenticates as `kube-system/<account>` only, as the pod's
    /// mounted token does.
    pub async fn service_account_kubeconfig(&self, client: &kube::Client, account: &str) -> PathBuf {
        let token = service_account_token(client, account).await;
        let server = &TestEnv::get().kube_apiserver;
        let path = self.dir.join(format!("{account}.kubeconfig"));
        std::fs::write(
            &path,
            format!(
                "apiVersion: v1\nkind: Config\nclusters:\n- name: e2e\n  cluster:\n    server: {server}\n    \
                 insecure-skip-tls-verify: true\nusers:\n- name: sa\n  user:\n    token: {token}\ncontexts:\n- name: \
                 e2e\n  context:\n    cluster: e2e\n    user: sa\ncurrent-context: e2e\n"
            ),
        )
        .unwrap();
        path
    }

    pub fn cluster_key(&self) -> String {
        format!("kubernetes.io/cluster/{}", self.cluster_id)
    }

    /// Launches `count` instances of this cluster.
    pub async fn launch(&self, count: i32) -> Vec<ec2::Launched> {
        self.network
            .launch(count, &[(&self.cluster_key(), "owned")])
            .await
            .unwrap()
    }

    /// A Node as a kubelet with `--cloud-provider=external` registers it: tainted uninitialized, Ready.
    pub async fn register_node(&self, name: &str, pod_cidr: Option<&str>) {
        let node: Node = serde_json::from_value(json!({
            "metadata": { "name": name, "labels": { "e2e-cluster": self.cluster_id } },
            "spec": {
                "podCIDR": pod_cidr,
                "taints": [{ "key": "node.cloudprovider.kubernetes.io/uninitialized", "value": "true", "effect": "NoSchedule" }],
            },
        }))
        .unwrap();
        self.nodes.create(&PostParams::default(), &node).await.unwrap();
        self.set_ready(name, "True").await;
    }

    /// Terminates an instance, as a scale-in or a failed host would.
    pub async fn terminate(&self, instance: &str) {
        self.raw
            .terminate_instances()
            .instance_ids(instance)
            .send()
            .await
            .unwrap();
    }

    pub async fn set_ready(&self, name: &str, ready: &str) {
        let status =
            json!({ "status": { "conditions": [{ "type": "Ready", "status": ready, "reason": "E2E" }] } });
        self.nodes
            .patch_status(name, &Default::default(), &Patch::Strategic(&status))
            .await
            .unwrap();
    }

    /// Deletes this test's Nodes.
    pub async fn cleanup(&self) {
        let lp = kube::api::ListParams::default().labels(&format!("e2e-cluster={}", self.cluster_id));
        let _ = self.nodes.delete_collection(&Default::default(), &lp).await;
    }
}

/// Writes a cloud config: `[Global]` with `extra`, and overrides sending every AWS service to `aws_endpoint` and
/// IMDS to `imds`.
fn write_config(dir: &std::path::Path, file: &str, extra: &str, aws_endpoint: &str, imds: &str) -> PathBuf {
    let config = ec2::cloud_config(&TestEnv::get().aws_region, aws_endpoint, imds, extra);
    let path = dir.join(file);
    std::fs::write(&path, config).unwrap();
    path
}

/// A running `aws-cloud-controller-manager`, killed when dropped.
pub struct Ccm {
    child: Child,
    pub log: PathBuf,
    pub port: u16,
    pub lease: String,
}

impl Ccm {
    /// Starts the binary for `world` with the upstream flags an operator would pass, plus `extra` flags.
    pub fn start(world: &World, extra: &[&str]) -> Self {
        Self::start_with_config(world, &world.cloud_config, extra)
    }

    /// As [`Ccm::start`] with another cloud config (later flags in `extra` override earlier ones).
    pub fn start_with_config(world: &World, cloud_config: &std::path::Path, extra: &[&str]) -> Self {
        let env = TestEnv::get();
        let port = free_port();
        let lease = format!("ccm-{}", world.cluster_id);
        let log = world.dir.join(format!("ccm-{port}.log"));
        let out = File::create(&log).unwrap();
        let mut args = vec![
            "--cloud-provider=aws".to_owned(),
            format!("--cloud-config={}", cloud_config.display()),
            format!("--kubeconfig={}", env.kubeconfig.display()),
            format!("--leader-elect-resource-name={lease}"),
            "--bind-address=127.0.0.1".to_owned(),
            format!("--secure-port={port}"),
            "--authorization-always-allow-paths=/healthz,/metrics".to_owned(),
            "--node-monitor-period=1s".to_owned(),
            "--v=2".to_owned(),
        ];
        args.extend(extra.iter().map(|s| (*s).to_owned()));
        let child = ccm_command(env!("CARGO_BIN_EXE_aws-cloud-controller-manager"))
            .args(&args)
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .spawn()
            .unwrap();
        Self {
            child,
            log,
            port,
            lease,
        }
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// `/metrics` over HTTPS (self-signed certificate).
    pub async fn metrics(&self) -> String {
        metrics(self.port).await
    }

    /// The value of the first sample of `metric` whose labels contain every one of `labels`.
    pub async fn sample(&self, metric: &str, labels: &[&str]) -> Option<f64> {
        let text = self.metrics().await;
        text.lines()
            .filter(|l| l.starts_with(metric) && labels.iter().all(|x| l.contains(x)))
            .find_map(|l| l.rsplit(' ').next()?.parse().ok())
    }

    /// The AWS requests made so far per operation (`aws_api_requests_total`, every outcome and retry), keeping
    /// only mutating operations (all but `Describe*`, `Get*`, `List*`).
    pub async fn mutations(&self) -> std::collections::BTreeMap<String, f64> {
        mutations(self.port).await
    }

    /// Kills the process at once (no clean-up, the lease is left held), as a crash would.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// SIGTERM, then the exit status (killed after 20 s).
    pub async fn terminate(&mut self) -> ExitStatus {
        let pid = self.child.id().to_string();
        Command::new("kill").args(["-TERM", &pid]).status().unwrap();
        for _ in 0..200 {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let _ = self.child.kill();
        panic!("the CCM did not stop within 20 s of SIGTERM\n{}", self.log_text());
    }

    /// The exit status, once the process exits on its own within `secs` (`None` if it still runs).
    pub async fn exited_within(&mut self, secs: u64) -> Option<ExitStatus> {
        for _ in 0..secs * 10 {
            if let Some(status) = self.child.try_wait().unwrap() {
                return Some(status);
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        None
    }

    /// Fails with the CCM's log when it exited on its own.
    pub fn assert_running(&mut self) {
        if let Some(status) = self.child.try_wait().unwrap() {
            panic!("the CCM exited ({status})\n{}", self.log_text());
        }
    }
}

impl Drop for Ccm {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A free TCP port on 127.0.0.1.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Polls `check` every 200 ms for up to `secs`; on timeout fails with `what` and the CCM's log.
pub async fn eventually(ccm: &mut Ccm, what: &str, secs: u64, check: impl AsyncFnMut() -> bool) {
    let log = ccm.log.clone();
    let log = || std::fs::read_to_string(&log).unwrap_or_default();
    while_running(&mut ccm.child, log, what, secs, check).await;
}

/// Polls `check` every 200 ms for up to `secs` while `child` runs; fails with `what` and `log()` when it times out
/// or the process exits first.
pub async fn while_running(
    child: &mut Child,
    log: impl Fn() -> String,
    what: &str,
    secs: u64,
    mut check: impl AsyncFnMut() -> bool,
) {
    for _ in 0..secs * 5 {
        if check().await {
            return;
        }
        if let Some(status) = child.try_wait().unwrap() {
            panic!("the process exited ({status}) before {what}\nlog:\n{}", log());
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    panic!("timed out after {secs} s waiting for {what}\nlog:\n{}", log());
}

/// A token of the service account `kube-system/<account>` (an hour long).
pub async fn service_account_token(client: &kube::Client, account: &str) -> String {
    use k8s_openapi::api::{
        authentication::v1::{TokenRequest, TokenRequestSpec},
        core::v1::ServiceAccount,
    };
    let request = TokenRequest {
        spec: TokenRequestSpec {
            expiration_seconds: Some(3600),
            ..TokenRequestSpec::default()
        },
        ..TokenRequest::default()
    };
    Api::<ServiceAccount>::namespaced(client.clone(), "kube-system")
        .create_token_request(account, &PostParams::default(), &request)
        .await
        .unwrap()
        .status
        .unwrap()
        .token
}

/// `bin` as on any machine off EC2: static test credentials and no instance metadata (the cloud config names the
/// IMDS emulator where a test wants one).
pub fn off_ec2(bin: &str) -> Command {
    let mut command = Command::new(bin);
    command
        .env("AWS_ACCESS_KEY_ID", "testing")
        .env("AWS_SECRET_ACCESS_KEY", "testing")
        .env("AWS_EC2_METADATA_DISABLED", "true");
    command
}

/// `bin` as these tests run the CCM: off EC2, its Region from the cloud config and IMDS alone, its log level from
/// its flags alone.
pub fn ccm_command(bin: &str) -> Command {
    let mut command = off_ec2(bin);
    command
        .env_remove("AWS_REGION")
        .env_remove("AWS_DEFAULT_REGION")
        .env_remove("RUST_LOG");
    command
}

/// Whether `events` holds a Warning Event on the object `name` with `reason` whose message contains every one of
/// `texts`.
pub async fn has_warning(
    events: &Api<k8s_openapi::api::core::v1::Event>,
    name: &str,
    reason: &str,
    texts: &[&str],
) -> bool {
    let lp = kube::api::ListParams::default().fields(&format!("involvedObject.name={name}"));
    events.list(&lp).await.unwrap().items.iter().any(|e| {
        e.type_.as_deref() == Some("Warning")
            && e.reason.as_deref() == Some(reason)
            && e.message
                .as_deref()
                .is_some_and(|m| texts.iter().all(|t| m.contains(t)))
    })
}

/// `/metrics` of the CCM serving it on `port`, over HTTPS (self-signed certificate).
pub async fn metrics(port: u16) -> String {
    let client = reqwest::Client::builder()
        .danger_accept_invalid_certs(true)
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    let url = format!("https://127.0.0.1:{port}/metrics");
    let r = client.get(&url).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 200, "{url}");
    r.text().await.unwrap()
}

/// The mutating AWS requests (all but `Describe*`, `Get*`, `List*`) made so far by the CCM serving /metrics on
/// `port`, per operation. A call is counted when its response has arrived, so a test that sees a change in moto
/// must wait for its count too (see `mutated_since`).
pub async fn mutations(port: u16) -> std::collections::BTreeMap<String, f64> {
    let mut out = std::collections::BTreeMap::new();
    for line in metrics(port).await.lines() {
        let Some(rest) = line.strip_prefix("aws_api_requests_total{") else {
            continue;
        };
        let Some(op) = rest
            .split("operation=\"")
            .nth(1)
            .and_then(|r| r.split('"').next())
        else {
            continue;
        };
        if ["Describe", "Get", "List"].iter().any(|p| op.starts_with(p)) {
            continue;
        }
        let value: f64 = line
            .rsplit(' ')
            .next()
            .and_then(|v| v.parse().ok())
            .unwrap_or(0.0);
        *out.entry(op.to_owned()).or_insert(0.0) += value;
    }
    out
}

/// The mutating operations counted since `before` (see `mutations`), with how many times each.
pub fn changed(
    before: &std::collections::BTreeMap<String, f64>,
    after: &std::collections::BTreeMap<String, f64>,
) -> std::collections::BTreeMap<String, f64> {
    after
        .iter()
        .filter_map(|(op, n)| {
            let d = n - before.get(op).copied().unwrap_or(0.0);
            (d > 0.0).then(|| (op.clone(), d))
        })
        .collect()
}

/// Whether `operation` was counted on `port` since `before`.
pub async fn mutated_since(
    port: u16,
    before: &std::collections::BTreeMap<String, f64>,
    operation: &str,
) -> bool {
    changed(before, &mutations(port).await).contains_key(operation)
}

/// `path` on the secure port `port` of a CCM (self-signed certificate); `None` while it is not up.
pub async fn fetch(port: u16, path: &str) -> Option<String> {
    let client = reqwest::Client::builder()
        .danger_accept_invalid_certs(true)
        .build()
        .unwrap();
    let r = client
        .get(format!("https://127.0.0.1:{port}{path}"))
        .send()
        .await
        .ok()?;
    Some(r.text().await.unwrap_or_default())
}

/// `ccm_controller_reconciles_total` of `controller` on the CCM serving /metrics on `port` (0 while it is not up).
pub async fn reconciles(port: u16, controller: &str) -> f64 {
    let Some(text) = fetch(port, "/metrics").await else {
        return 0.0;
    };
    let label = format!("controller=\"{controller}\"");
    text.lines()
        .filter(|l| l.starts_with("ccm_controller_reconciles_total") && l.contains(&label))
        .find_map(|l| l.rsplit(' ').next()?.parse().ok())
        .unwrap_or(0.0)
}

/// Runs `doctor` with `config`, its Node checks scoped to the world's Nodes and its Service checks to a namespace
/// of its own (other tests' Services are not this one's business).
pub fn doctor(world: &World, config: &std::path::Path, extra: &[&str]) -> std::process::Output {
    let env = TestEnv::get();
    off_ec2(env!("CARGO_BIN_EXE_doctor"))
        .arg(format!("--cloud-config={}", config.display()))
        .arg(format!("--kubeconfig={}", env.kubeconfig.display()))
        .arg(format!("--node-selector=e2e-cluster={}", world.cluster_id))
        .arg(format!("--namespace={}", world.cluster_id))
        .args(extra)
        .output()
        .unwrap()
}

/// A tool's exit status, stdout and stderr, for assertion messages.
pub fn output_text(output: &std::process::Output) -> String {
    format!(
        "status {:?}\n{}\n{}",
        output.status.code(),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}
