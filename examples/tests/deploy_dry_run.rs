//! The dry run as shipped (docs/migration-from-go.md, step 0): the chart's `dryRun.enabled` and the kustomize
//! overlay `deploy/kustomize/overlays/dry-run` render one-replica Deployments of the controller's pod with
//! `--dry-run`, on a port and probes that cannot collide with the running DaemonSet's pods on the same nodes'
//! network, selected by nothing that selects the controller's pods, and a ClusterRole that grants `get` on
//! `/dry-run`; the real apiserver accepts every object (server-side-apply dry run, no field dropped). Also the
//! chart keys operators of the AWS Load Balancer Controller's chart expect (`affinity`, `updateStrategy`,
//! `fullnameOverride`). The rendered flags against the running binary: e2e_deploy_dry_run.rs.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::too_many_lines)]

mod support;

use ccm_testing::TestEnv;
use helm::{chart, object, schema, template, values_file};
use manifests::{assert_all_kept, find, kustomize};
use serde_json::{Value, json};
use support::{helm, manifests};

fn strings(v: &Value) -> Vec<&str> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect()
}

/// The flags with a name among `names` in `args`, in either form (`--x=v` or `--x v`).
fn flags<'a>(args: &[&'a str], name: &str) -> Vec<&'a str> {
    args.iter()
        .filter(|a| a.split('=').next().unwrap().replace('_', "-") == name)
        .copied()
        .collect()
}

/// What a dry-run Deployment must be beside `daemonset` (the running controller).
fn assert_beside(dry: &Value, daemonset: &Value, port: u64) {
    let what = dry["metadata"]["name"].as_str().unwrap();
    assert_eq!(
        dry["spec"]["replicas"], 1,
        "{what}: a dry run takes no Lease: one replica"
    );
    assert_eq!(dry["spec"]["strategy"]["type"], "Recreate", "{what}");
    let pod = &dry["spec"]["template"]["spec"];
    let ds_pod = &daemonset["spec"]["template"]["spec"];
    for key in [
        "serviceAccountName",
        "hostNetwork",
        "nodeSelector",
        "tolerations",
        "securityContext",
        "dnsPolicy",
    ] {
        assert_eq!(pod[key], ds_pod[key], "{what}: {key} as the controller's");
    }
    assert!(
        pod.get("priorityClassName").is_none(),
        "{what}: a dry run must not preempt"
    );
    let c = &pod["containers"][0];
    let ds_c = &ds_pod["containers"][0];
    assert_eq!(c["image"], ds_c["image"]);
    assert_eq!(c["resources"], ds_c["resources"]);
    let args = strings(&c["args"]);
    let ds_args = strings(&ds_c["args"]);
    assert_eq!(flags(&args, "--dry-run"), ["--dry-run"], "{what}: {args:?}");
    let port_flag = format!("--secure-port={port}");
    assert_eq!(
        flags(&args, "--secure-port"),
        [port_flag.as_str()],
        "{what}: {args:?}"
    );
    let rest: Vec<&str> = args
        .iter()
        .copied()
        .filter(|a| *a != "--dry-run" && *a != port_flag)
        .collect();
    // The controller's flags but its own --secure-port (either form) and any --dry-run.
    let mut want = Vec::new();
    let mut skip = false;
    for a in &ds_args {
        let name = a.split('=').next().unwrap();
        if std::mem::take(&mut skip) || name == "--dry-run" {
            continue;
        }
        if name == "--secure-port" {
            skip = !a.contains('=');
            continue;
        }
        want.push(*a);
    }
    assert_eq!(rest, want, "{what}: otherwise the controller's flags");
    // Its own port, probed there; the controller's pods hold theirs on the same nodes.
    assert_eq!(c["ports"][0]["containerPort"], port);
    assert_ne!(
        c["ports"][0]["containerPort"], ds_c["ports"][0]["containerPort"],
        "{what}: the same node port"
    );
    for (probe, path) in [("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")] {
        let get = &c[probe]["httpGet"];
        assert_eq!(
            (get["port"].as_u64(), get["path"].as_str(), get["scheme"].as_str()),
            (Some(port), Some(path), Some("HTTPS")),
            "{what}: {probe}"
        );
    }
    // Selected by nothing that selects the controller's pods (the DaemonSet, the metrics Service).
    let labels = &dry["spec"]["template"]["metadata"]["labels"];
    for (k, v) in daemonset["spec"]["selector"]["matchLabels"].as_object().unwrap() {
        assert_ne!(
            &labels[k], v,
            "{what}: the DaemonSet's selector matches the dry run's pods"
        );
    }
}

/// The dry run's account may check its readers' tokens (the built-in system:auth-delegator), which a Go-era
/// account may not.
fn assert_auth_delegator(binding: &Value, dry: &Value) {
    assert_eq!(binding["roleRef"]["name"], "system:auth-delegator");
    assert_eq!(
        binding["subjects"],
        json!([{"kind": "ServiceAccount", "name": dry["spec"]["template"]["spec"]["serviceAccountName"],
                "namespace": dry["metadata"]["namespace"]}])
    );
}

fn assert_reader(role: &Value) {
    assert_eq!(
        role["rules"],
        json!([{"nonResourceURLs": ["/dry-run"], "verbs": ["get"]}])
    );
}

/// NOTES.txt says how to read the report, and dryRun.readers (set with port 10400 here) are bound.
fn assert_notes_and_readers(objects: &[Value], notes: &str, port: u64) {
    for needle in [
        "kubectl -n kube-system port-forward deploy/aws-cloud-controller-manager-dry-run",
        &format!("https://127.0.0.1:{port}/dry-run"),
        "aws-cloud-controller-manager-dry-run-reader",
    ] {
        assert!(
            notes.contains(needle),
            "port {port}: NOTES.txt lacks {needle:?}:\n{notes}"
        );
    }
    let binding = objects.iter().find(|o| {
        o["kind"] == "ClusterRoleBinding"
            && o["roleRef"]["name"] == "aws-cloud-controller-manager-dry-run-reader"
    });
    assert_eq!(
        binding.is_some(),
        port == 10400,
        "a binding only for dryRun.readers"
    );
    if let Some(b) = binding {
        assert_eq!(b["subjects"][0]["name"], "jane");
    }
}

#[tokio::test]
async fn the_charts_dry_run_is_a_deployment_beside_the_daemonset() {
    let client = TestEnv::get().kube_client().await.expect("kube client");
    let go_values = chart().join("ci/example-values.yaml");
    let enabled = values_file("dry-run-on", &json!({"dryRun": {"enabled": true}}));
    let readers = values_file(
        "dry-run-readers",
        &json!({"dryRun": {"enabled": true, "securePort": 10400,
                "readers": [{"kind": "User", "name": "jane", "apiGroup": "rbac.authorization.k8s.io"}]},
                "args": ["--cloud-provider=aws", "--secure-port", "10300", "--dry-run=false", "--v=2"],
                "metrics": {"service": {"enabled": true}}}),
    );
    for (files, port) in [
        (vec![enabled.as_path()], 10268),
        (vec![go_values.as_path(), enabled.as_path()], 10268),
        (vec![readers.as_path()], 10400),
    ] {
        let (objects, notes) = template(&files).unwrap_or_else(|e| panic!("{files:?}: {e}"));
        assert_all_kept(&client, &objects, &format!("{files:?}: ")).await;
        let dry = object(
            &objects,
            "Deployment",
            Some("aws-cloud-controller-manager-dry-run"),
        );
        assert_beside(dry, object(&objects, "DaemonSet", None), port);
        if let Some(svc) = objects.iter().find(|o| o["kind"] == "Service") {
            let labels = &dry["spec"]["template"]["metadata"]["labels"];
            for (k, v) in svc["spec"]["selector"].as_object().unwrap() {
                assert_ne!(&labels[k], v, "the metrics Service selects the dry run");
            }
        }
        assert_reader(object(
            &objects,
            "ClusterRole",
            Some("aws-cloud-controller-manager-dry-run-reader"),
        ));
        assert_auth_delegator(
            object(
                &objects,
                "ClusterRoleBinding",
                Some("aws-cloud-controller-manager-dry-run:auth-delegator"),
            ),
            dry,
        );
        assert_notes_and_readers(&objects, &notes, port);
    }
    // Off by default; on the controller's own port it fails, saying why.
    let (objects, _) = template(&[]).unwrap();
    assert!(!objects.iter().any(|o| o["kind"] == "Deployment"));
    let clash = values_file(
        "dry-run-clash",
        &json!({"dryRun": {"enabled": true, "securePort": 10258}}),
    );
    let err = template(&[&clash]).expect_err("the controller's port");
    assert!(
        err.contains("dryRun.securePort 10258 is the controller's own --secure-port"),
        "{err}"
    );
}

#[tokio::test]
async fn the_kustomize_dry_run_overlay_is_the_base_pod_with_dry_run() {
    let client = TestEnv::get().kube_client().await.expect("kube client");
    let objects = kustomize("overlays/dry-run");
    assert_all_kept(&client, &objects, "").await;
    let dry = find(&objects, "Deployment", "aws-cloud-controller-manager-dry-run");
    let mut kinds: Vec<&str> = objects.iter().filter_map(|o| o["kind"].as_str()).collect();
    kinds.sort_unstable();
    assert_eq!(
        kinds,
        ["ClusterRole", "ClusterRoleBinding", "Deployment"],
        "the Deployment, its reader role and its auth-delegator binding only (the base is not re-applied)"
    );
    assert_auth_delegator(
        find(
            &objects,
            "ClusterRoleBinding",
            "aws-cloud-controller-manager-dry-run:auth-delegator",
        ),
        dry,
    );
    let base = kustomize("base");
    let ds = find(&base, "DaemonSet", "aws-cloud-controller-manager");
    assert_beside(dry, ds, 10268);
    assert_eq!(
        dry["spec"]["template"]["spec"]["containers"][0]["image"],
        "REPLACE-ME/aws-cloud-controller-manager:v0.1.0",
        "the base's placeholder until the operator sets an image"
    );
    assert_reader(find(
        &objects,
        "ClusterRole",
        "aws-cloud-controller-manager-dry-run-reader",
    ));
    // The service account it runs as is the base's.
    find(
        &base,
        "ServiceAccount",
        dry["spec"]["template"]["spec"]["serviceAccountName"]
            .as_str()
            .unwrap(),
    );
}

#[tokio::test]
async fn affinity_update_strategy_and_fullname_override_are_rendered() {
    let client = TestEnv::get().kube_client().await.expect("kube client");
    let affinity = json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "kubernetes.io/arch", "operator": "In", "values": ["arm64", "amd64"]}]}]}}});
    let values = values_file(
        "lbc-keys",
        &json!({"affinity": affinity, "fullnameOverride": "ccm",
                "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 2}},
                "dryRun": {"enabled": true}, "cloudConfig": "[Global]\n", "metrics": {"service": {"enabled": true}}}),
    );
    let (objects, _) = template(&[&values]).unwrap();
    assert_all_kept(&client, &objects, "").await;
    let ds = object(&objects, "DaemonSet", Some("ccm"));
    assert_eq!(ds["spec"]["updateStrategy"]["rollingUpdate"]["maxUnavailable"], 2);
    assert_eq!(ds["spec"]["template"]["spec"]["affinity"], affinity);
    assert_eq!(ds["spec"]["template"]["spec"]["containers"][0]["name"], "ccm");
    let dry = object(&objects, "Deployment", Some("ccm-dry-run"));
    assert_eq!(dry["spec"]["template"]["spec"]["affinity"], affinity);
    object(&objects, "ConfigMap", Some("ccm-cloud-config"));
    object(&objects, "Service", Some("ccm-metrics"));
    object(&objects, "ClusterRole", Some("ccm-dry-run-reader"));
    // The schema refuses a surge (the new pod would bind the port the old one holds).
    let schema = schema();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let mut v = manifests::yaml_file(&chart().join("values.yaml"));
    v["updateStrategy"] = json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}});
    assert!(!validator.is_valid(&v));
    v["updateStrategy"] = json!({"type": "OnDelete"});
    assert!(validator.is_valid(&v));
}
