//! The deployment artefacts in `deploy/` are valid:
//! - the kustomize base, rendered by `kubectl kustomize` (Debian's `kubernetes-client`, installed by
//!   scripts/setup.sh; `KUBECTL` overrides the binary), is accepted object by object by the real kube-apiserver
//!   with a server-side-apply dry run, and no field we send is dropped (1.20 prunes unknown fields silently);
//! - the Helm chart's values.yaml and its example values pass values.schema.json, which rejects typos;
//! - the chart agrees with the kustomize base where they must (RBAC, placement, resources, security), and its
//!   templates only read values the schema declares. No Helm binary exists here, so the chart is not rendered.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::{
    collections::BTreeSet,
    path::{Path, PathBuf},
    process::Command,
};

use ccm_testing::TestEnv;
use kube::{
    Api,
    api::{DynamicObject, GroupVersionKind, Patch, PatchParams},
    discovery::{self, Scope},
};
use serde_json::{Value, json};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn chart() -> PathBuf {
    repo().join("deploy/helm/aws-cloud-controller-manager")
}

fn yaml_docs(text: &str) -> Vec<Value> {
    serde_saphyr::from_multiple::<Value>(text)
        .expect("valid YAML")
        .into_iter()
        .filter(|v| !v.is_null())
        .collect()
}

fn yaml_file(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("{}: invalid YAML: {e}", path.display()))
}

/// `kubectl kustomize deploy/kustomize/base`, parsed.
fn kustomize_base() -> Vec<Value> {
    let kubectl = std::env::var("KUBECTL").unwrap_or_else(|_| "kubectl".to_owned());
    let dir = repo().join("deploy/kustomize/base");
    let out = Command::new(&kubectl).arg("kustomize").arg(&dir).output().unwrap_or_else(|e| {
        panic!(
            "cannot run `{kubectl} kustomize`: {e}. Install Debian's kubernetes-client package (scripts/setup.sh \
             does) or point KUBECTL at a kubectl binary"
        )
    });
    assert!(
        out.status.success(),
        "`{kubectl} kustomize {}` failed: {}",
        dir.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    yaml_docs(&String::from_utf8(out.stdout).unwrap())
}

fn find<'a>(objects: &'a [Value], kind: &str, name: &str) -> &'a Value {
    objects
        .iter()
        .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind} {name} in the kustomize output"))
}

/// Every field of `sent` is in `got` with the same value (`got` may have more: defaults, status).
fn assert_kept(sent: &Value, got: &Value, path: &str) {
    match (sent, got) {
        (Value::Object(s), Value::Object(g)) => {
            for (k, v) in s {
                let p = format!("{path}.{k}");
                let Some(gv) = g.get(k) else {
                    panic!(
                        "the apiserver dropped {p} (a field it does not know: too new for 1.20, or misspelt)"
                    )
                };
                assert_kept(v, gv, &p);
            }
        }
        (Value::Array(s), Value::Array(g)) => {
            assert_eq!(s.len(), g.len(), "{path}: {s:?} came back as {g:?}");
            for (i, (a, b)) in s.iter().zip(g).enumerate() {
                assert_kept(a, b, &format!("{path}[{i}]"));
            }
        }
        (s, g) => assert_eq!(s, g, "{path} changed"),
    }
}

/// Server-side apply with dry run: validation, defaulting and admission, nothing stored.
async fn dry_run_apply(client: &kube::Client, obj: &Value) -> Value {
    let api_version = obj["apiVersion"].as_str().expect("apiVersion");
    let kind = obj["kind"].as_str().expect("kind");
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let name = obj["metadata"]["name"].as_str().expect("metadata.name");
    let (ar, caps) = discovery::pinned_kind(client, &GroupVersionKind::gvk(group, version, kind))
        .await
        .unwrap_or_else(|e| panic!("{api_version} {kind} is not served by the apiserver: {e}"));
    let api: Api<DynamicObject> = match caps.scope {
        Scope::Namespaced => Api::namespaced_with(
            client.clone(),
            obj["metadata"]["namespace"]
                .as_str()
                .unwrap_or_else(|| panic!("{kind} {name} has no namespace")),
            &ar,
        ),
        Scope::Cluster => Api::all_with(client.clone(), &ar),
    };
    let mut params = PatchParams::apply("deploy-manifests-test").force();
    params.dry_run = true;
    let got = api
        .patch(name, &params, &Patch::Apply(obj))
        .await
        .unwrap_or_else(|e| panic!("the apiserver rejected {kind} {name}: {e}"));
    serde_json::to_value(got).unwrap()
}

#[tokio::test]
async fn kustomize_base_is_accepted_by_the_apiserver() {
    let objects = kustomize_base();
    let kinds: BTreeSet<&str> = objects.iter().filter_map(|o| o["kind"].as_str()).collect();
    for want in [
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "RoleBinding",
        "DaemonSet",
    ] {
        assert!(
            kinds.contains(want),
            "no {want} in the kustomize output: {kinds:?}"
        );
    }
    let client = TestEnv::get().kube_client().await.expect("kube client");
    for obj in &objects {
        let got = dry_run_apply(&client, obj).await;
        let what = format!("{} {}", obj["kind"], obj["metadata"]["name"]);
        assert_kept(obj, &got, &what);
    }

    let ds = find(&objects, "DaemonSet", "aws-cloud-controller-manager");
    let pod = &ds["spec"]["template"]["spec"];
    assert_eq!(ds["metadata"]["namespace"], "kube-system");
    assert_eq!(pod["serviceAccountName"], "cloud-controller-manager");
    assert_eq!(pod["hostNetwork"], true);
    assert_eq!(
        pod["nodeSelector"],
        json!({"node-role.kubernetes.io/control-plane": ""})
    );
    let container = &pod["containers"][0];
    let args: Vec<&str> = container["args"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(
        args,
        [
            "--v=2",
            "--cloud-provider=aws",
            "--use-service-account-credentials=true",
            "--configure-cloud-routes=false"
        ],
        "the Go kustomize base's arguments"
    );
    let image = container["image"].as_str().unwrap();
    assert!(
        image.ends_with(":v0.1.0") && image.contains("/aws-cloud-controller-manager"),
        "the images: transformer set the image: {image}"
    );
}

/// (apiGroup, resource, resourceNames, verb): RBAC rules in a form where equal grants compare equal.
type Grant = (String, String, String, String);

fn grants(rules: &Value) -> BTreeSet<Grant> {
    let strings = |v: &Value| -> Vec<String> {
        v.as_array()
            .map(|a| a.iter().map(|s| s.as_str().unwrap().to_owned()).collect())
            .unwrap_or_default()
    };
    let mut out = BTreeSet::new();
    for rule in rules.as_array().expect("rules is a list") {
        assert!(
            rule.get("nonResourceURLs").is_none(),
            "no non-resource rules expected: {rule}"
        );
        let mut names = strings(&rule["resourceNames"]);
        names.sort();
        let names = names.join(",");
        for g in strings(&rule["apiGroups"]) {
            for r in strings(&rule["resources"]) {
                for v in strings(&rule["verbs"]) {
                    assert_ne!(v, "*", "no wildcard verbs: {rule}");
                    out.insert((g.clone(), r.clone(), names.clone(), v));
                }
            }
        }
    }
    out
}

#[test]
fn helm_values_pass_the_schema_and_typos_do_not() {
    let schema: Value =
        serde_json::from_str(&std::fs::read_to_string(chart().join("values.schema.json")).unwrap())
            .expect("values.schema.json is JSON");
    let validator = jsonschema::validator_for(&schema).expect("values.schema.json is a valid JSON schema");
    let errors = |v: &Value| -> Vec<String> {
        validator
            .iter_errors(v)
            .map(|e| format!("{e} at {}", e.instance_path()))
            .collect()
    };
    let defaults = yaml_file(&chart().join("values.yaml"));
    assert_eq!(errors(&defaults), Vec::<String>::new(), "values.yaml");
    // Helm validates the merge of the defaults and the user's file (top-level keys replaced here: enough for a
    // file whose keys are all top-level blocks).
    let example = yaml_file(&chart().join("ci/example-values.yaml"));
    let mut merged = defaults.clone();
    for (k, v) in example.as_object().unwrap() {
        merged[k] = v.clone();
    }
    assert_eq!(errors(&merged), Vec::<String>::new(), "ci/example-values.yaml");

    for (key, bad) in [
        ("nodeSelecter", json!({"a": "b"})),
        ("args", json!("--v=2")),
        ("hostNetworking", json!("yes")),
        ("env", json!({"AWS_REGION": "eu-west-1"})),
        ("image", json!({"repository": "x"})),
        ("dnsPolicy", json!("Host")),
    ] {
        let mut v = defaults.clone();
        v[key] = bad.clone();
        assert!(!errors(&v).is_empty(), "the schema accepted {key}: {bad}");
    }
}

#[test]
fn helm_chart_agrees_with_the_kustomize_base() {
    let objects = kustomize_base();
    let values = yaml_file(&chart().join("values.yaml"));

    // RBAC: the chart binds one ClusterRole to one account (no --use-service-account-credentials), so it must
    // grant the union of the kustomize roles, minus what only minting per-controller tokens needs.
    let mut union = BTreeSet::new();
    for role in objects.iter().filter(|o| o["kind"] == "ClusterRole") {
        union.extend(grants(&role["rules"]));
    }
    union.retain(|(_, r, _, _)| r != "serviceaccounts" && r != "serviceaccounts/token");
    let helm = grants(&values["clusterRoleRules"]);
    assert_eq!(
        helm.difference(&union).collect::<Vec<_>>(),
        Vec::<&Grant>::new(),
        "the chart grants more than the kustomize roles"
    );
    assert_eq!(
        union.difference(&helm).collect::<Vec<_>>(),
        Vec::<&Grant>::new(),
        "the chart lacks grants of the kustomize roles"
    );
    // Every kustomize ClusterRole is bound, and the chart's names are the kustomize ones.
    for role in objects.iter().filter(|o| o["kind"] == "ClusterRole") {
        let name = &role["metadata"]["name"];
        assert!(
            objects
                .iter()
                .any(|o| o["kind"] == "ClusterRoleBinding" && o["roleRef"]["name"] == *name),
            "ClusterRole {name} is not bound"
        );
    }
    find(
        &objects,
        "ClusterRole",
        values["clusterRoleName"].as_str().unwrap(),
    );
    find(
        &objects,
        "ServiceAccount",
        values["serviceAccountName"].as_str().unwrap(),
    );
    let rb = find(
        &objects,
        "RoleBinding",
        values["roleBindingName"].as_str().unwrap(),
    );
    assert_eq!(rb["roleRef"]["name"], values["roleName"]);

    // Placement, resources, security: the same pod.
    let ds = find(&objects, "DaemonSet", values["nameOverride"].as_str().unwrap());
    let pod = &ds["spec"]["template"]["spec"];
    let container = &pod["containers"][0];
    assert_eq!(pod["nodeSelector"], values["nodeSelector"]);
    for t in pod["tolerations"].as_array().unwrap() {
        assert!(
            values["tolerations"].as_array().unwrap().contains(t),
            "the chart does not tolerate {t}"
        );
    }
    assert_eq!(pod["priorityClassName"], values["priorityClassName"]);
    assert_eq!(pod["hostNetwork"], values["hostNetworking"]);
    assert_eq!(pod["dnsPolicy"], values["dnsPolicy"]);
    assert_eq!(pod["securityContext"], values["podSecurityContext"]);
    assert_eq!(container["securityContext"], values["securityContext"]);
    assert_eq!(container["resources"], values["resources"]);
    assert_eq!(container["livenessProbe"], values["livenessProbe"]);
    let image = format!(
        "{}:{}",
        values["image"]["repository"].as_str().unwrap(),
        values["image"]["tag"].as_str().unwrap()
    );
    assert_eq!(container["image"], image.as_str());
    let chart_meta = yaml_file(&chart().join("Chart.yaml"));
    assert_eq!(
        chart_meta["appVersion"], values["image"]["tag"],
        "Chart.yaml appVersion is the image tag"
    );
    assert!(
        values["args"]
            .as_array()
            .unwrap()
            .contains(&json!("--cloud-provider=aws")),
        "the binary refuses to start without --cloud-provider=aws"
    );
    assert!(
        !values["args"].as_array().unwrap().iter().any(|a| a
            .as_str()
            .unwrap()
            .starts_with("--use-service-account-credentials")),
        "the chart has no per-controller bindings: it must not use service-account credentials"
    );
}

#[test]
fn helm_templates_read_only_declared_values() {
    let schema: Value =
        serde_json::from_str(&std::fs::read_to_string(chart().join("values.schema.json")).unwrap()).unwrap();
    let declared = schema["properties"].as_object().unwrap();
    let values = yaml_file(&chart().join("values.yaml"));
    let mut seen = 0;
    for entry in std::fs::read_dir(chart().join("templates")).unwrap() {
        let path = entry.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(
            text.matches("{{").count(),
            text.matches("}}").count(),
            "{}: unbalanced template delimiters",
            path.display()
        );
        for (i, _) in text.match_indices(".Values.") {
            let key: String = text[i + ".Values.".len()..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric())
                .collect();
            assert!(
                declared.contains_key(&key),
                "{}: .Values.{key} is not in values.schema.json",
                path.display()
            );
            assert!(
                values.get(&key).is_some(),
                "{}: .Values.{key} has no default in values.yaml",
                path.display()
            );
            seen += 1;
        }
    }
    assert!(
        seen > 20,
        "the templates read the values ({seen} references found)"
    );
}

#[tokio::test]
async fn helm_cluster_role_is_accepted_by_the_apiserver() {
    // The one object the chart builds from a values list: its default rules must be a valid ClusterRole.
    let values = yaml_file(&chart().join("values.yaml"));
    let role = json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": values["clusterRoleName"]},
        "rules": values["clusterRoleRules"],
    });
    let client = TestEnv::get().kube_client().await.expect("kube client");
    let got = dry_run_apply(&client, &role).await;
    assert_kept(&role, &got, "ClusterRole (chart)");
}
