//! Go-era settings in the Helm chart (docs/migration-from-go.md, "Go-era values"), each of which used to break
//! silently:
//! - the liveness probe follows `--secure-port` and `--bind-address` in `args` (any form the binary reads), and
//!   a probe that cannot reach the controller fails the render with what to change;
//! - a cloud config read from a hostPath by pods that run as uid 65532 is named in NOTES.txt with the fixes,
//!   until one of them is applied;
//! - `helm upgrade --reuse-values` from a release of the Go chart (rendered with that chart's defaults in place
//!   of ours) passes the schema and renders the objects the apiserver accepts, with our defaults filled in;
//!   `templates/_defaults.tpl` is values.yaml verbatim;
//! - the Go chart's older `extraArgs` is accepted, rendered into the arguments and named in NOTES.txt; other
//!   unknown keys are still refused by the schema (deploy_manifests.rs).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::too_many_lines)]

mod support;

use std::path::PathBuf;

use ccm_testing::TestEnv;
use helm::{IMAGE_REPOSITORY, chart, object, template, template_reusing, values_file};
use manifests::{assert_all_kept, coalesce, yaml_file};
use serde_json::{Value, json};
use support::{helm, manifests};

fn go_defaults() -> PathBuf {
    manifests::repo().join("examples/tests/support/go-chart-values.yaml")
}

fn container(objects: &[Value]) -> &Value {
    &object(objects, "DaemonSet", None)["spec"]["template"]["spec"]["containers"][0]
}

fn args(values: &Value) -> Result<(Vec<Value>, String), String> {
    template(&[&values_file("go-era", values)])
}

#[test]
fn liveness_probe_follows_secure_port_and_bind_address() {
    for (given, port, host) in [
        (vec!["--secure-port=10300"], 10300, None),
        (vec!["--secure-port", "10301"], 10301, None),
        (vec!["--secure_port=10302"], 10302, None),
        (vec!["--secure-port=10303", "--secure-port=10304"], 10304, None),
        (vec!["--bind-address=127.0.0.1"], 10258, Some("127.0.0.1")),
        (
            vec!["--bind-address", "10.0.0.5", "--secure-port=10305"],
            10305,
            Some("10.0.0.5"),
        ),
        (vec!["--bind-address=0.0.0.0"], 10258, None),
    ] {
        let mut list = vec!["--cloud-provider=aws"];
        list.extend(&given);
        let (objects, _) = args(&json!({"args": list})).unwrap_or_else(|e| panic!("{given:?}: {e}"));
        let c = container(&objects);
        let probe = &c["livenessProbe"]["httpGet"];
        assert_eq!(probe["port"], port, "{given:?}: {c:#}");
        assert_eq!(c["ports"][0]["containerPort"], port, "{given:?}");
        assert_eq!(probe["host"].as_str(), host, "{given:?}: {c:#}");
        assert_eq!(
            (probe["scheme"].as_str(), probe["path"].as_str()),
            (Some("HTTPS"), Some("/healthz"))
        );
    }
    // The metrics Service follows the port too.
    let (objects, _) = args(&json!({"args": ["--cloud-provider=aws", "--secure-port=10310"],
                                    "metrics": {"service": {"enabled": true}}}))
    .unwrap();
    let svc = object(&objects, "Service", None);
    assert_eq!(svc["spec"]["ports"][0]["port"], 10310);
    // --secure-port=0 serves nothing: no port, no probe.
    let (objects, _) = args(&json!({"args": ["--cloud-provider=aws", "--secure-port=0"]})).unwrap();
    let c = container(&objects);
    assert!(
        c.get("livenessProbe").is_none() && c.get("ports").is_none(),
        "{c:#}"
    );
    // A probe of the user's own stays as given where it agrees (the port named, or the same number).
    let (objects, _) = args(
        &json!({"livenessProbe": {"httpGet": {"scheme": "HTTPS", "port": "https", "path": "/livez"},
                                                     "periodSeconds": 30}}),
    )
    .unwrap();
    let probe = &container(&objects)["livenessProbe"];
    assert_eq!(probe["httpGet"]["port"], 10258);
    assert_eq!(
        (probe["httpGet"]["path"].as_str(), &probe["periodSeconds"]),
        (Some("/livez"), &json!(30))
    );
    let (objects, _) = args(&json!({"livenessProbe": null})).unwrap();
    assert!(
        container(&objects).get("livenessProbe").is_none(),
        "null disables it"
    );
}

#[test]
fn a_probe_that_cannot_reach_the_controller_fails_saying_what_to_change() {
    for (values, needles) in [
        (
            json!({"args": ["--cloud-provider=aws", "--bind-address=127.0.0.1"], "hostNetworking": false}),
            vec![
                "--bind-address=127.0.0.1",
                "hostNetworking",
                "Remove --bind-address",
            ],
        ),
        (
            json!({"args": ["--cloud-provider=aws", "--secure-port=10300"],
                   "livenessProbe": {"httpGet": {"scheme": "HTTPS", "port": 10258, "path": "/healthz"}}}),
            vec![
                "livenessProbe.httpGet.port is 10258",
                "10300",
                "remove livenessProbe.httpGet.port",
            ],
        ),
        (
            json!({"args": ["--cloud-provider=aws", "--secure-port=http"]}),
            vec!["--secure-port=http is not a port number"],
        ),
        (
            json!({"args": ["--cloud-provider=aws", "--bind-address=127.0.0.1"], "metrics": {"service": {"enabled": true}}}),
            vec!["metrics.service.enabled", "--bind-address=127.0.0.1"],
        ),
    ] {
        let err = args(&values).expect_err(&values.to_string());
        for needle in needles {
            assert!(
                err.contains(needle),
                "{values}: the error lacks {needle:?}: {err}"
            );
        }
    }
}

#[test]
fn a_host_path_cloud_config_read_as_non_root_is_named_with_its_fixes() {
    let go_values = chart().join("ci/example-values.yaml");
    let (objects, notes) = template(&[&go_values]).unwrap();
    for needle in [
        "WARNING: --cloud-config is read from the node's /etc/kubernetes/cloud-config (hostPath)",
        "uid\n65532",
        "Permission denied",
        "supplementalGroups",
        "cloudConfig",
        "runAsUser: 0",
    ] {
        assert!(notes.contains(needle), "NOTES.txt lacks {needle:?}:\n{notes}");
    }
    let pod = &object(&objects, "DaemonSet", None)["spec"]["template"]["spec"];
    assert_eq!(pod["securityContext"]["runAsUser"], 65532);
    // Each documented fix silences it, and renders what it says.
    let root = json!({"podSecurityContext": {"runAsNonRoot": false, "runAsUser": 0, "runAsGroup": 0}});
    let group = json!({"podSecurityContext": {"runAsNonRoot": true, "runAsUser": 65532, "runAsGroup": 65532,
                                              "supplementalGroups": [1001]}});
    for (fix, check) in [
        (root, ("runAsUser", json!(0))),
        (group, ("supplementalGroups", json!([1001]))),
    ] {
        let (objects, notes) = template(&[&go_values, &values_file("fix", &fix)]).unwrap();
        assert!(!notes.contains("Permission denied"), "{fix}: {notes}");
        let pod = &object(&objects, "DaemonSet", None)["spec"]["template"]["spec"];
        assert_eq!(pod["securityContext"][check.0], check.1);
    }
    // Without a hostPath (cloudConfig, the chart's ConfigMap) there is nothing to say.
    let (_, notes) = template(&[&values_file("cm", &json!({"cloudConfig": "[Global]\n"}))]).unwrap();
    assert!(!notes.contains("Permission denied"), "{notes}");
}

#[tokio::test]
async fn reuse_values_from_a_go_release_passes_the_schema_and_renders() {
    let schema: Value =
        serde_json::from_str(&std::fs::read_to_string(chart().join("values.schema.json")).unwrap()).unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let client = TestEnv::get().kube_client().await.expect("kube client");
    let image = values_file("reuse-image", &json!({"image": {"repository": IMAGE_REPOSITORY}}));
    let go_values = chart().join("ci/example-values.yaml");
    // The Go release as installed with its chart's defaults only, and with an operator's values file; the
    // upgrade passes the image (and, the second time, keeps the Go chart's image: NOTES.txt says so).
    for (release, upgrade) in [
        (None, Some(&image)),
        (Some(&go_values), Some(&image)),
        (None, None),
    ] {
        let mut values = yaml_file(&go_defaults());
        let mut files = Vec::new();
        for file in [release, upgrade].into_iter().flatten() {
            coalesce(&mut values, &yaml_file(file));
            files.push(file.as_path());
        }
        let errors: Vec<String> = validator
            .iter_errors(&values)
            .map(|e| format!("{e} at {}", e.instance_path()))
            .collect();
        assert_eq!(
            errors,
            Vec::<String>::new(),
            "{files:?}: Helm validates the reused values"
        );
        let (objects, notes) =
            template_reusing(&go_defaults(), &files).unwrap_or_else(|e| panic!("{files:?}: {e}"));
        assert_all_kept(&client, &objects, &format!("{files:?}: ")).await;
        // Our defaults where the Go chart has none: the probe, the lease Role, the node network.
        let ds = object(&objects, "DaemonSet", None);
        let c = &ds["spec"]["template"]["spec"]["containers"][0];
        assert_eq!(c["livenessProbe"]["httpGet"]["port"], 10258, "{files:?}");
        assert_eq!(ds["spec"]["template"]["spec"]["hostNetwork"], true);
        let role = object(&objects, "Role", Some("cloud-controller-manager:leader-election"));
        assert_eq!(role["metadata"]["namespace"], "kube-system");
        // The Go chart's own values are kept; its empty maps get our keys, as Helm merges a values file.
        let pod = &ds["spec"]["template"]["spec"];
        assert_eq!(pod["nodeSelector"]["node-role.kubernetes.io/control-plane"], "");
        assert_eq!(pod["dnsPolicy"], "Default");
        assert_eq!(
            pod["securityContext"]["runAsUser"], 65532,
            "the Go chart's podSecurityContext: {{}}, merged"
        );
        if upgrade.is_none() {
            assert!(
                c["image"]
                    .as_str()
                    .unwrap()
                    .starts_with("registry.k8s.io/provider-aws/")
            );
            assert!(
                notes.contains("WARNING: image.repository is the Go controller's image"),
                "{notes}"
            );
        } else {
            assert!(!notes.contains("Go controller's image"), "{notes}");
        }
    }
}

#[test]
fn defaults_template_is_values_yaml_verbatim() {
    let values = std::fs::read_to_string(chart().join("values.yaml")).unwrap();
    let tpl = std::fs::read_to_string(chart().join("templates/_defaults.tpl")).unwrap();
    let body = tpl
        .split_once("{{- define \"cloud-controller-manager.defaults\" -}}\n")
        .and_then(|(_, rest)| rest.strip_suffix("{{- end -}}\n"))
        .expect("_defaults.tpl defines cloud-controller-manager.defaults");
    assert!(
        body == values,
        "templates/_defaults.tpl is not values.yaml: regenerate it with the command in its header"
    );
}

#[test]
fn the_go_charts_extra_args_are_rendered_and_named() {
    let (objects, notes) = args(&json!({"extraArgs": {"configure-cloud-routes": false, "v": 4}})).unwrap();
    let list = container(&objects)["args"].clone();
    assert_eq!(
        list,
        json!([
            "--v=2",
            "--cloud-provider=aws",
            "--configure-cloud-routes=false",
            "--v=4"
        ]),
        "after args, sorted by key"
    );
    assert!(
        notes.contains("WARNING: extraArgs is the Go chart's older key")
            && notes.contains("--configure-cloud-routes=false --v=4")
            && notes.contains("Move them to args"),
        "{notes}"
    );
    let (_, notes) = template(&[]).unwrap();
    assert!(!notes.contains("WARNING"), "{notes}");
}
