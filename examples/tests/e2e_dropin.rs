//! End to end: `aws-cloud-controller-manager` as a drop-in for the Go binary. It runs with the Go Helm chart's
//! and kustomize's argument lists (flag names with `_` too), prints `--version` as Kubernetes does, writes klog's
//! text format without ANSI codes into a pipe, serves the Go controller's metric names on /metrics, and serves a
//! Service whose annotations carry Go-era values (`internal: "False"` is internal in Go, `"True"` and empty
//! booleans) instead of failing it.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::too_many_lines)]

mod common;

use std::{
    collections::BTreeMap,
    io::{BufRead, BufReader},
    process::{Child, Command, Stdio},
    sync::{Arc, Mutex},
    time::Duration,
};

use ccm_testing::{TestEnv, unique_name};
use common::{
    Ccm, World, eventually, free_port,
    lb::{Elb, lb_name, public_subnet, service},
    metrics,
};
use k8s_openapi::api::core::v1::Service;
use kube::{
    Api,
    api::{DeleteParams, PostParams},
};

const BIN: &str = env!("CARGO_BIN_EXE_aws-cloud-controller-manager");

/// The Go chart's `args` (charts/aws-cloud-controller-manager/values.yaml).
const HELM_ARGS: &[&str] = &["--v=2", "--cloud-provider=aws"];
/// The Go kustomize DaemonSet's args (examples/existing-cluster/base).
const KUSTOMIZE_ARGS: &[&str] = &[
    "--v=2",
    "--cloud-provider=aws",
    "--use-service-account-credentials=true",
    "--configure-cloud-routes=false",
];

/// Samples the Go binary serves (cloud-provider-aws `aws_metrics.go`, component-base workqueue, restclient and
/// process metrics, client-go leader election), as Prometheus ingests them.
const UPSTREAM_SAMPLES: &[&str] = &[
    "cloudprovider_aws_api_request_duration_seconds_bucket{le=\"10.0\",request=\"describe_instance\"}",
    "cloudprovider_aws_api_request_duration_seconds_count{request=\"describe_instance\"}",
    "workqueue_depth{name=\"service\"}",
    "workqueue_adds_total{name=\"service\"}",
    "workqueue_adds_total{name=\"Nodes\"}",
    "workqueue_queue_duration_seconds_bucket{le=\"+Inf\",name=\"service\"}",
    "workqueue_work_duration_seconds_sum{name=\"service\"}",
    "workqueue_unfinished_work_seconds{name=\"Nodes\"}",
    "workqueue_longest_running_processor_seconds{name=\"service\"}",
    "workqueue_retries_total{name=\"service\"}",
    "rest_client_requests_total{code=\"200\",method=\"GET\"",
    "rest_client_request_duration_seconds_bucket{le=\"60.0\",verb=\"GET\"",
    "process_cpu_seconds_total ",
    "process_resident_memory_bytes ",
    "process_open_fds ",
    "process_start_time_seconds ",
];

fn base_args(world: &World, port: u16, lease: &str) -> Vec<String> {
    let env = TestEnv::get();
    vec![
        format!("--cloud-config={}", world.cloud_config.display()),
        format!("--kubeconfig={}", env.kubeconfig.display()),
        // `_` in flag names, as Go's flag normalization accepts.
        format!("--leader_elect_resource_name={lease}"),
        "--bind_address=127.0.0.1".to_owned(),
        format!("--secure-port={port}"),
        "--authorization-always-allow-paths=/healthz,/metrics".to_owned(),
    ]
}

/// The binary with its stderr in a pipe, read line by line.
struct Piped {
    child: Child,
    lines: Arc<Mutex<Vec<String>>>,
}

impl Piped {
    fn start(args: &[String]) -> Self {
        let mut child = common::ccm_command(BIN)
            .args(args)
            .stderr(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        let lines = Arc::new(Mutex::new(Vec::new()));
        let stderr = child.stderr.take().unwrap();
        let sink = lines.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                sink.lock().unwrap().push(line);
            }
        });
        Self { child, lines }
    }

    fn log(&self) -> String {
        self.lines.lock().unwrap().join("\n")
    }

    async fn wait_for(&mut self, what: &str, secs: u64, check: impl AsyncFnMut() -> bool) {
        let lines = self.lines.clone();
        let log = || lines.lock().unwrap().join("\n");
        common::while_running(&mut self.child, log, what, secs, check).await;
    }
}

impl Drop for Piped {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `/metrics` once the server answers.
async fn metrics_if_up(port: u16) -> Option<String> {
    let client = reqwest::Client::builder()
        .danger_accept_invalid_certs(true)
        .timeout(Duration::from_secs(5))
        .build()
        .ok()?;
    let r = client
        .get(format!("https://127.0.0.1:{port}/metrics"))
        .send()
        .await
        .ok()?;
    r.text().await.ok()
}

/// klog's header: `Lmmdd hh:mm:ss.uuuuuu <pid padded to 7> file:line] `.
fn is_klog_line(line: &str) -> bool {
    let b = line.as_bytes();
    b.len() > 32
        && matches!(b[0], b'I' | b'W' | b'E' | b'F')
        && b[1..5].iter().all(u8::is_ascii_digit)
        && b[5] == b' '
        && b[8] == b':'
        && b[14] == b'.'
        && b[15..21].iter().all(u8::is_ascii_digit)
        && b[21] == b' '
        && line[22..29].trim_start().parse::<u32>().is_ok()
        && line[30..].contains(".rs:")
        && line.contains("] \"")
}

#[tokio::test]
async fn e2e_the_go_argument_lists_logs_metrics_and_annotation_values_work() {
    let env = TestEnv::get();
    let world = World::new("").await;
    public_subnet(&world).await;
    let launched = world.launch(1).await;
    world.register_node(&launched[0].id, None).await;

    // --version: the program and its version (and `_`-named flags beside it are fine).
    let out = Command::new(BIN).args(["--v=2", "--version"]).output().unwrap();
    assert!(out.status.success());
    let version = String::from_utf8(out.stdout).unwrap();
    assert_eq!(
        version.trim(),
        format!("aws-cloud-controller-manager v{}", env!("CARGO_PKG_VERSION"))
    );
    let raw = Command::new(BIN).arg("--version=raw").output().unwrap();
    assert!(String::from_utf8_lossy(&raw.stdout).starts_with("version.Info{Major:"));

    // The Helm chart's arguments, stderr into a pipe.
    let port = free_port();
    let lease = format!("ccm-{}", world.cluster_id);
    let mut args: Vec<String> = HELM_ARGS.iter().map(|s| (*s).to_owned()).collect();
    args.extend(base_args(&world, port, &lease));
    let mut ccm = Piped::start(&args);
    let nodes = world.nodes.clone();
    let node = launched[0].id.clone();
    ccm.wait_for("the node initialized", 60, async || {
        nodes.get(&node).await.is_ok_and(|n| common::initialized(&n))
    })
    .await;

    // A Service with Go-era values: "False" meant internal in Go, "True" is a Go boolean, empty means unset.
    let client = env.kube_client().await.unwrap();
    let services: Api<Service> = Api::namespaced(client, "default");
    let name = unique_name("dropin");
    let annotations = BTreeMap::from([
        ("service.beta.kubernetes.io/aws-load-balancer-internal", "False"),
        (
            "service.beta.kubernetes.io/aws-load-balancer-cross-zone-load-balancing-enabled",
            "True",
        ),
        (
            "service.beta.kubernetes.io/aws-load-balancer-connection-draining-enabled",
            "",
        ),
        ("service.beta.kubernetes.io/aws-load-balancer-security-groups", ""),
        (
            "service.beta.kubernetes.io/aws-load-balancer-additional-resource-tags",
            "team=web,=stray",
        ),
    ]);
    let created = services
        .create(&PostParams::default(), &service(&name, &[80], &annotations))
        .await
        .unwrap();
    let lb = lb_name(created.metadata.uid.as_deref().unwrap());
    let elb = Elb(aws_sdk_elasticloadbalancing::Client::new(&env.aws_config().await));
    ccm.wait_for("the Classic ELB, internal as in Go", 90, async || {
        elb.describe(&lb)
            .await
            .is_some_and(|d| d.scheme() == Some("internal"))
    })
    .await;
    // Its attributes are set after it is created: wait for the ensure to get that far.
    ccm.wait_for("the Classic ELB's attributes", 30, async || {
        elb.0
            .describe_load_balancer_attributes()
            .load_balancer_name(&lb)
            .send()
            .await
            .ok()
            .and_then(|a| a.load_balancer_attributes()?.cross_zone_load_balancing().cloned())
            .is_some_and(|c| c.enabled())
    })
    .await;
    let attributes = elb
        .0
        .describe_load_balancer_attributes()
        .load_balancer_name(&lb)
        .send()
        .await
        .unwrap();
    let attributes = attributes.load_balancer_attributes().unwrap();
    assert!(
        attributes
            .cross_zone_load_balancing()
            .is_some_and(|c| c.enabled())
    );

    // The Go controller's metric names.
    let text = metrics(port).await;
    for sample in UPSTREAM_SAMPLES {
        assert!(
            text.lines().any(|l| l.starts_with(sample)),
            "{sample} not served:\n{text}"
        );
    }
    let leading = format!("leader_election_master_status{{name=\"{lease}\"}} 1");
    assert!(
        text.contains(&leading),
        "{leading} (the `_` flag name was read):\n{text}"
    );

    // klog's text format from a pipe: every line, no ANSI escapes, and the Go-era value warned about.
    let log = ccm.log();
    assert!(!log.contains('\u{1b}'), "ANSI escapes in a piped log:\n{log}");
    for line in log.lines().filter(|l| !l.starts_with(['\t', ' '])) {
        assert!(is_klog_line(line), "not klog's format: {line:?}");
    }
    assert!(
        log.lines().any(|l| l.starts_with('W')
            && l.contains("served as internal")
            && l.contains("annotation=\"service.beta.kubernetes.io/aws-load-balancer-internal\"")),
        "no warning about internal=\"False\":\n{log}"
    );
    services.delete(&name, &DeleteParams::default()).await.unwrap();
    ccm.wait_for("the Classic ELB deleted", 60, async || {
        elb.describe(&lb).await.is_none()
    })
    .await;
    drop(ccm);

    // The kustomize DaemonSet's arguments: per-controller credentials, no route controller.
    let mut ccm = Ccm::start(&world, KUSTOMIZE_ARGS);
    let port = ccm.port;
    eventually(&mut ccm, "leading with the kustomize arguments", 60, async || {
        metrics_if_up(port)
            .await
            .is_some_and(|t| t.contains("running_managed_controllers{name=\"service\""))
    })
    .await;
    let text = ccm.metrics().await;
    assert!(
        !text.contains("running_managed_controllers{name=\"route\""),
        "{text}"
    );
    assert!(
        ccm.log_text().lines().next().is_some_and(is_klog_line),
        "{}",
        ccm.log_text()
    );
    let status = ccm.terminate().await;
    assert!(status.success(), "{status}\n{}", ccm.log_text());
    world.cleanup().await;
}
