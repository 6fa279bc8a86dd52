//! The operator's path in README.md stays complete and true: the Deploy steps name the artefacts that exist in
//! `deploy/`, and the compatibility matrix names the versions the repository really builds and tests with (read
//! from Cargo.lock, scripts/lib.sh and the chart), so bumping one of them without the README fails here.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::too_many_lines)]

mod support;

use manifests::{repo, yaml_file};
use support::manifests;

fn read(path: &str) -> String {
    std::fs::read_to_string(repo().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The text of README.md's section `## <title>` (up to the next `## `).
fn section<'a>(text: &'a str, title: &str) -> &'a str {
    let start = text
        .find(&format!("\n## {title}\n"))
        .unwrap_or_else(|| panic!("README.md has no section {title}"));
    let rest = &text[start + 1..];
    let end = rest[3..].find("\n## ").map_or(rest.len(), |i| i + 3);
    &rest[..end]
}

#[test]
fn readme_deploy_steps_name_existing_artefacts() {
    let readme = read("README.md");
    let deploy = section(&readme, "Deploy");
    for path in [
        "deploy/docker/aws-cloud-controller-manager.Dockerfile",
        "deploy/iam/control-plane.json",
        "deploy/iam/control-plane-hardened.json",
        "deploy/helm/aws-cloud-controller-manager",
        "deploy/kustomize/base",
        "deploy/kustomize/overlays/superset-role",
        "deploy/kustomize/overlays/dry-run",
        "scripts/images.sh",
        "docs/tagging-requirements.md",
    ] {
        assert!(deploy.contains(path), "the Deploy section does not name {path}");
        assert!(
            repo().join(path).exists(),
            "the Deploy section names {path}, which does not exist"
        );
    }
    for step in [
        "docker buildx build",
        "helm install",
        "kubectl apply -k",
        "kubectl create service loadbalancer",
        "lb-plan default/web --cloud-config-configmap",
        "docs/lb-plan.md",
        "docs/doctor.md",
        "--cloud-provider=external",
        "cloudConfig.global.KubernetesClusterID",
    ] {
        assert!(deploy.contains(step), "the Deploy section lacks {step:?}");
    }
    // The node-naming trap and the EKS note.
    for needle in [
        "private DNS name",
        "--provider-id=aws:///",
        "--hostname-override",
        "### On EKS",
    ] {
        assert!(deploy.contains(needle), "the Deploy section lacks {needle:?}");
    }
}

#[test]
fn readme_compatibility_matrix_matches_the_repository() {
    let readme = read("README.md");
    let deploy = section(&readme, "Deploy");
    // Built against: k8s-openapi's version (Cargo.lock) and the API level the workspace enables.
    let lock = read("Cargo.lock");
    let at = lock
        .find("name = \"k8s-openapi\"\nversion = \"")
        .expect("k8s-openapi in Cargo.lock");
    let version = lock[at..]
        .lines()
        .nth(1)
        .unwrap()
        .trim_start_matches("version = \"")
        .trim_end_matches('"');
    let minor = version.rsplit_once('.').unwrap().0;
    assert!(
        deploy.contains(&format!("k8s-openapi {minor}")),
        "README names k8s-openapi {minor}"
    );
    // Libraries leave the choice to the application: the binaries (examples/) select `earliest`, which the
    // workspace manifest documents as v1_33.
    let binaries = read("examples/Cargo.toml");
    let cargo = read("Cargo.toml");
    assert!(
        binaries.contains("k8s-openapi = { workspace = true, features = [\"earliest\"] }")
            && cargo.contains("`earliest` (v1_33)"),
        "the API level changed"
    );
    assert!(
        deploy.contains("the API of 1.33"),
        "README names the API level 1.33"
    );
    // Tested against: the kube-apiserver the test environment builds.
    let lib = read("scripts/lib.sh");
    let orig = lib
        .lines()
        .find_map(|l| l.strip_prefix("KUBE_ORIG_VERSION=\""))
        .expect("KUBE_ORIG_VERSION in scripts/lib.sh")
        .trim_end_matches('"');
    let tested = orig.rsplit("really").next().unwrap();
    assert!(
        deploy.contains(&format!("kube-apiserver {tested}")),
        "README names kube-apiserver {tested}"
    );
    // The chart's minimum.
    let chart = yaml_file(&repo().join("deploy/helm/aws-cloud-controller-manager/Chart.yaml"));
    let kube_version = chart["kubeVersion"].as_str().unwrap();
    assert!(
        deploy.contains(kube_version),
        "README names the chart's kubeVersion {kube_version}"
    );
}
