//! What the deploy-manifest tests share: YAML loading, `kubectl kustomize`, server-side-apply dry runs, and RBAC
//! rules in a comparable form.
#![allow(dead_code)] // each test crate uses part of it

use std::{collections::BTreeSet, path::Path, process::Command};

use kube::{
    Api,
    api::{DynamicObject, GroupVersionKind, Patch, PatchParams},
    discovery::{self, Scope},
};
use serde_json::Value;

pub fn repo() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

pub fn yaml_docs(text: &str) -> Vec<Value> {
    serde_saphyr::from_multiple::<Value>(text)
        .expect("valid YAML")
        .into_iter()
        .filter(|v| !v.is_null())
        .collect()
}

pub fn yaml_file(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("{}: invalid YAML: {e}", path.display()))
}

/// `kubectl kustomize deploy/kustomize/<dir>`, parsed.
pub fn kustomize(dir: &str) -> Vec<Value> {
    let kubectl = std::env::var("KUBECTL").unwrap_or_else(|_| "kubectl".to_owned());
    let dir = repo().join("deploy/kustomize").join(dir);
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

pub fn find<'a>(objects: &'a [Value], kind: &str, name: &str) -> &'a Value {
    objects
        .iter()
        .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind} {name} in the kustomize output"))
}

/// Every field of `sent` is in `got` with the same value (`got` may have more: defaults, status).
pub fn assert_kept(sent: &Value, got: &Value, path: &str) {
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
pub async fn dry_run_apply(client: &kube::Client, obj: &Value) -> Value {
    server_side_apply(client, obj, true).await
}

/// Dry-runs `objects` one by one and asserts that the apiserver kept every field of each; `context` (the values
/// files, say) leads each failure's path.
pub async fn assert_all_kept(client: &kube::Client, objects: &[Value], context: &str) {
    for obj in objects {
        let got = dry_run_apply(client, obj).await;
        let what = format!("{context}{} {}", obj["kind"], obj["metadata"]["name"]);
        assert_kept(obj, &got, &what);
    }
}

/// Server-side apply, stored (forced, so that reapplying the same object is idempotent).
pub async fn apply(client: &kube::Client, obj: &Value) -> Value {
    server_side_apply(client, obj, false).await
}

async fn server_side_apply(client: &kube::Client, obj: &Value, dry_run: bool) -> Value {
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
    params.dry_run = dry_run;
    let got = api
        .patch(name, &params, &Patch::Apply(obj))
        .await
        .unwrap_or_else(|e| panic!("the apiserver rejected {kind} {name}: {e}"));
    serde_json::to_value(got).unwrap()
}

/// Helm's coalescing of a user's values onto the defaults: maps merge, anything else replaces.
pub fn coalesce(into: &mut Value, from: &Value) {
    match (into, from) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, v) in b {
                match a.get_mut(k) {
                    Some(slot) if slot.is_object() && v.is_object() => coalesce(slot, v),
                    _ => {
                        a.insert(k.clone(), v.clone());
                    }
                }
            }
        }
        (slot, v) => *slot = v.clone(),
    }
}

/// (apiGroup, resource, resourceNames, verb): RBAC rules in a form where equal grants compare equal.
pub type Grant = (String, String, String, String);

pub fn grants(rules: &Value) -> BTreeSet<Grant> {
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
