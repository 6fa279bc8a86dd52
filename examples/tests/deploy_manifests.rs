//! The deployment artefacts in `deploy/` are valid:
//! - the kustomize base and the `superset-role` overlay, rendered by `kubectl kustomize` (Debian's
//!   `kubernetes-client`, installed by scripts/setup.sh; `KUBECTL` overrides the binary), are accepted object by
//!   object by the real kube-apiserver with a server-side-apply dry run, and no field we send is dropped (1.20
//!   prunes unknown fields silently);
//! - the Helm chart's values.yaml and its example values pass values.schema.json, which rejects typos;
//! - the base's image is a placeholder (no image is published), its kustomization.yaml says how to set yours, and
//!   an overlay as docs/getting-started.md shows replaces it;
//! - the chart agrees with the kustomize base where they must (RBAC, leader election, placement, resources,
//!   security, neither having a default image), and its templates only read values the schema declares.
//!   Rendering the chart: deploy_helm.rs.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::too_many_lines)]

mod support;

use std::{
    collections::BTreeSet,
    path::{Path, PathBuf},
    process::Command,
};
use support::manifests;

use ccm_testing::TestEnv;
use manifests::*;
use serde_json::{Value, json};

fn chart() -> PathBuf {
    repo().join("deploy/helm/aws-cloud-controller-manager")
}

fn kustomize_base() -> Vec<Value> {
    kustomize("base")
}

#[tokio::test]
async fn kustomize_base_is_accepted_by_the_apiserver() {
    let objects = kustomize_base();
    let kinds: BTreeSet<&str> = objects.iter().filter_map(|o| o["kind"].as_str()).collect();
    for want in [
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "Role",
        "RoleBinding",
        "DaemonSet",
    ] {
        assert!(
            kinds.contains(want),
            "no {want} in the kustomize output: {kinds:?}"
        );
    }
    let client = TestEnv::get().kube_client().await.expect("kube client");
    assert_all_kept(&client, &objects, "").await;

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
    assert_eq!(
        container["image"], PLACEHOLDER_IMAGE,
        "the images: transformer set the placeholder (no image is published)"
    );
}

/// The kustomize base's image until the operator sets theirs: no registry of that name exists.
const PLACEHOLDER_IMAGE: &str = "REPLACE-ME/aws-cloud-controller-manager:v0.1.0";

/// `..` for each component of `from` below the common prefix, then the rest of `to`.
fn relative(from: &Path, to: &Path) -> PathBuf {
    let (from, to) = (from.canonicalize().unwrap(), to.canonicalize().unwrap());
    let common = from
        .components()
        .zip(to.components())
        .take_while(|(a, b)| a == b)
        .count();
    let mut out = PathBuf::new();
    for _ in from.components().skip(common) {
        out.push("..");
    }
    out.extend(to.components().skip(common));
    out
}

#[test]
fn kustomize_base_says_how_to_set_the_image_and_an_overlay_replaces_the_placeholder() {
    let text = std::fs::read_to_string(repo().join("deploy/kustomize/base/kustomization.yaml")).unwrap();
    for needle in [
        "kustomize edit set image aws-cloud-controller-manager=",
        "scripts/images.sh",
        "docker buildx",
        "REPLACE-ME/aws-cloud-controller-manager",
    ] {
        assert!(
            text.contains(needle),
            "the base's kustomization.yaml lacks {needle:?}"
        );
    }
    // The overlay docs/getting-started.md shows, with the base referenced by a relative path.
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("image-overlay-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let base = relative(&dir, &repo().join("deploy/kustomize/base"));
    let image = "123456789012.dkr.ecr.eu-west-1.amazonaws.com/aws-cloud-controller-manager";
    let overlay = format!(
        "resources:
- {}
images:
- name: REPLACE-ME/aws-cloud-controller-manager
  newName: {image}
  newTag: v0.1.0
",
        base.display()
    );
    std::fs::write(dir.join("kustomization.yaml"), overlay).unwrap();
    let kubectl = std::env::var("KUBECTL").unwrap_or_else(|_| "kubectl".to_owned());
    let out = Command::new(&kubectl)
        .arg("kustomize")
        .arg(&dir)
        .output()
        .expect("run kubectl kustomize");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let objects = yaml_docs(&String::from_utf8(out.stdout).unwrap());
    let ds = find(&objects, "DaemonSet", "aws-cloud-controller-manager");
    assert_eq!(
        ds["spec"]["template"]["spec"]["containers"][0]["image"],
        format!("{image}:v0.1.0")
    );
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
    // Helm validates the merge of the defaults and the user's file.
    for file in ["ci/example-values.yaml", "ci/irsa-values.yaml"] {
        let mut merged = defaults.clone();
        coalesce(&mut merged, &yaml_file(&chart().join(file)));
        assert_eq!(errors(&merged), Vec::<String>::new(), "{file}");
    }

    for (key, bad) in [
        ("nodeSelecter", json!({"a": "b"})),
        ("args", json!("--v=2")),
        ("hostNetworking", json!("yes")),
        ("env", json!({"AWS_REGION": "eu-west-1"})),
        ("image", json!({"repository": "x"})),
        ("dnsPolicy", json!("Host")),
        ("cloudConfig", json!({"global": {"KubernetesClusterId": "typo"}})),
        ("cloudConfig", json!({"global": {"NodeIPFamilies": ["ipv5"]}})),
        (
            "cloudConfig",
            json!({"global": {"ClusterServiceSharedLoadBalancerHealthProbePort": 70000}}),
        ),
        (
            "cloudConfig",
            json!({"serviceOverrides": {"ec2": {"Service": "EC2", "Region": "us-east-1"}}}),
        ),
        ("cloudConfig", json!({"Global": {}})),
        ("cloudConfig", json!(["[Global]"])),
        (
            "leaderElection",
            json!({"namespace": "kube-system", "leaseNames": [], "roleName": "x"}),
        ),
        ("metrics", json!({"serviceMonitor": {"enabled": "yes"}})),
        ("metrics", json!({"serviceMonitor": {"interval": "30"}})),
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
    // Leader election: a namespaced Role limited by name in both, the same rules, and nowhere else.
    let leases = |g: &BTreeSet<Grant>| g.iter().filter(|(_, r, _, _)| r == "leases").count();
    assert_eq!(leases(&union), 0, "the kustomize ClusterRoles grant Leases");
    assert_eq!(leases(&helm), 0, "the chart's clusterRoleRules grant Leases");
    let lease_role = find(&objects, "Role", "cloud-controller-manager:leader-election");
    assert_eq!(
        lease_role["metadata"]["namespace"],
        values["leaderElection"]["namespace"]
    );
    assert_eq!(
        values["leaderElection"]["roleName"], lease_role["metadata"]["name"],
        "the chart's lease Role has the kustomize name"
    );
    let lease_grants = grants(&lease_role["rules"]);
    let names = "cloud-controller-manager,cloud-provider-extraction-migration";
    let want: BTreeSet<Grant> = [("create", ""), ("get", names), ("update", names)]
        .into_iter()
        .map(|(verb, n)| {
            (
                "coordination.k8s.io".to_owned(),
                "leases".to_owned(),
                n.to_owned(),
                verb.to_owned(),
            )
        })
        .collect();
    assert_eq!(
        lease_grants, want,
        "get and update only on the two Leases, create (cannot be limited)"
    );
    let mut chart_names: Vec<&str> = values["leaderElection"]["leaseNames"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    chart_names.sort_unstable();
    assert_eq!(chart_names.join(","), names);
    let binding = find(
        &objects,
        "RoleBinding",
        "cloud-controller-manager:leader-election",
    );
    assert_eq!(binding["roleRef"]["name"], lease_role["metadata"]["name"]);
    assert_eq!(binding["subjects"][0]["name"], values["serviceAccountName"]);

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
    // The chart's probe takes its port from --secure-port (10258 unless args set it): deploy_helm_go.rs.
    let mut probe = values["livenessProbe"].clone();
    probe["httpGet"]["port"] = json!(10258);
    assert_eq!(container["livenessProbe"], probe);
    // The image: neither has a usable default, since none is published. The chart's repository is empty (its
    // template requires one, see deploy_helm.rs), the base's a placeholder; the tag is the same.
    assert_eq!(
        values["image"]["repository"], "",
        "the chart has no default image repository"
    );
    assert_eq!(container["image"], PLACEHOLDER_IMAGE);
    let tag = values["image"]["tag"].as_str().unwrap();
    assert!(
        PLACEHOLDER_IMAGE.ends_with(&format!(":{tag}")),
        "the base's tag is the chart's, {tag}"
    );
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

#[tokio::test]
async fn superset_role_overlay_is_accepted_and_grants_the_charts_rules() {
    let objects = kustomize("overlays/superset-role");
    let client = TestEnv::get().kube_client().await.expect("kube client");
    assert_all_kept(&client, &objects, "").await;
    let roles: Vec<&Value> = objects.iter().filter(|o| o["kind"] == "ClusterRole").collect();
    assert_eq!(
        roles.len(),
        1,
        "only the manager's ClusterRole is left: {roles:?}"
    );
    assert!(
        !objects.iter().any(
            |o| o["kind"] == "ClusterRoleBinding" && o["roleRef"]["name"] != roles[0]["metadata"]["name"]
        ),
        "the per-controller bindings are removed"
    );
    let values = yaml_file(&chart().join("values.yaml"));
    assert_eq!(
        grants(&roles[0]["rules"]),
        grants(&values["clusterRoleRules"]),
        "the overlay's ClusterRole is the chart's (the union of the controllers' roles)"
    );
    find(&objects, "Role", "cloud-controller-manager:leader-election");
    let ds = find(&objects, "DaemonSet", "aws-cloud-controller-manager");
    let args = &ds["spec"]["template"]["spec"]["containers"][0]["args"];
    assert!(
        args.as_array()
            .unwrap()
            .contains(&json!("--use-service-account-credentials=false")),
        "{args}"
    );
    assert!(
        !args
            .to_string()
            .contains("--use-service-account-credentials=true"),
        "{args}"
    );
}
