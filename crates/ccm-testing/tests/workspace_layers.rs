//! The workspace's architecture, checked from `cargo metadata`: every crate of the layout in
//! docs/architecture.md exists, and the
//! dependency rules hold (only the adapter names the AWS SDK, domain crates do not import each other, the
//! contract has no I/O dependencies). A violation fails the build here instead of surfacing as a slow build
//! or a tangled API later.

#![allow(clippy::expect_used, clippy::too_many_lines)]

mod common;

use std::collections::BTreeMap;

use common::workspace_metadata;

const CRATES: &[&str] = &[
    "ccm-cloud-provider",
    "ccm-controllers",
    "ccm-tagging",
    "ccm-aws-api",
    "ccm-aws-sdk",
    "ccm-instances",
    "ccm-load-balancers",
    "ccm-routes",
    "ccm-ecr-credentials",
    "ccm-cloud-config",
    "ccm-aws",
    "ccm-testing",
    "ccm-controller-manager",
];
/// A declared dependency: (package, dependency, kind, optional); kind is "normal", "dev" or "build".
type Dep = (String, String, String, bool);

const DOMAIN: &[&str] = &[
    "ccm-instances",
    "ccm-load-balancers",
    "ccm-routes",
    "ccm-ecr-credentials",
];

/// What the shipped binaries (package ccm-examples) may depend on: the published library crates and the crates
/// their wiring uses. Nothing for tests (ccm-testing, reqwest, mockall, rand...), nothing of the harnesses.
const SHIPPED_DEPS: &[&str] = &[
    "ccm-cloud-provider",
    "ccm-aws-api",
    "ccm-aws-sdk",
    "ccm-load-balancers",
    "ccm-ecr-credentials",
    "ccm-aws",
    "ccm-controller-manager",
    // lb-plan reads a Service's EndpointSlices as the service controller does (its runtime already links it).
    "ccm-controllers",
    "kube",
    "k8s-openapi",
    "tokio",
    "anyhow",
    "clap",
    "serde_json",
    // lb-plan's YAML manifests: the parser ccm-controller-manager already links in (leader migration files).
    "serde-saphyr",
    "tracing",
    "tracing-subscriber",
];

/// Member names, and every declared dependency of every member.
fn dependencies() -> (Vec<String>, Vec<Dep>) {
    let meta = workspace_metadata();
    let mut names = Vec::new();
    let mut deps = Vec::new();
    for package in meta["packages"].as_array().expect("packages") {
        let name = package["name"].as_str().expect("name").to_owned();
        for dep in package["dependencies"].as_array().expect("dependencies") {
            let kind = dep["kind"].as_str().unwrap_or("normal").to_owned();
            let optional = dep["optional"].as_bool().unwrap_or(false);
            deps.push((
                name.clone(),
                dep["name"].as_str().expect("dep name").to_owned(),
                kind,
                optional,
            ));
        }
        names.push(name);
    }
    (names, deps)
}

fn is_aws_sdk(dep: &str) -> bool {
    dep.starts_with("aws-sdk-") || dep == "aws-config" || dep == "aws-types" || dep.starts_with("aws-smithy-")
}

#[test]
fn every_crate_of_the_design_is_a_workspace_member() {
    let (names, _) = dependencies();
    for krate in CRATES {
        assert!(
            names.iter().any(|n| n == krate),
            "{krate} is missing from the workspace"
        );
    }
}

#[test]
fn dependency_rules_hold() {
    let (_, deps) = dependencies();
    let mut violations = BTreeMap::new();
    let mut violation = |pkg: &str, dep: &str, why: &str| {
        violations.insert(format!("{pkg} -> {dep}"), why.to_owned());
    };
    for (pkg, dep, kind, optional) in &deps {
        let normal = kind == "normal";
        if normal && is_aws_sdk(dep) && pkg != "ccm-aws-sdk" && !(pkg == "ccm-testing" && *optional) {
            violation(pkg, dep, "only ccm-aws-sdk may depend on the AWS SDK");
        }
        let contract_deps = ["k8s-openapi", "thiserror", "async-trait"];
        if pkg == "ccm-cloud-provider" && normal && !contract_deps.contains(&dep.as_str()) {
            violation(
                pkg,
                dep,
                "the contract depends on k8s-openapi, thiserror and async-trait only",
            );
        }
        if DOMAIN.contains(&pkg.as_str()) && normal {
            if DOMAIN.contains(&dep.as_str()) {
                violation(pkg, dep, "domain crates do not import each other");
            }
            if [
                "ccm-aws-sdk",
                "ccm-aws",
                "ccm-controllers",
                "kube",
                "kube-runtime",
            ]
            .contains(&dep.as_str())
            {
                violation(
                    pkg,
                    dep,
                    "domain crates depend on the contract and the ports only",
                );
            }
        }
        // ccm-tagging holds the tag rules every domain crate uses, and the tagging controller behind its
        // `controller` feature: its Kubernetes dependencies stay optional so the domain crates never build kube.
        if pkg == "ccm-tagging"
            && normal
            && !optional
            && ["kube", "kube-runtime", "k8s-openapi"].contains(&dep.as_str())
        {
            violation(
                pkg,
                dep,
                "ccm-tagging's controller dependencies are optional (feature `controller`)",
            );
        }
        // The cloud config is read by tools and fuzzed without building an AWS client.
        if pkg == "ccm-cloud-config"
            && normal
            && (dep.starts_with("ccm-") || is_aws_sdk(dep) || dep.starts_with("k8s"))
        {
            violation(
                pkg,
                dep,
                "the cloud config parser depends on no AWS, Kubernetes or workspace crate",
            );
        }
        if pkg == "ccm-controllers" && normal && (dep.starts_with("ccm-aws") || is_aws_sdk(dep)) {
            violation(pkg, dep, "the generic controllers know nothing of AWS");
        }
        // The runtime composes the generic controllers for any provider: it reaches the contract and the
        // controllers only, never AWS (a provider's binary brings its own crates).
        if pkg == "ccm-controller-manager"
            && normal
            && ((dep.starts_with("ccm-")
                && !["ccm-cloud-provider", "ccm-controllers"].contains(&dep.as_str()))
                || dep.starts_with("aws-"))
        {
            violation(
                pkg,
                dep,
                "the runtime depends on ccm-cloud-provider and ccm-controllers only, nothing AWS",
            );
        }
        // The test support reaches the AWS crates (ports, adapter, load balancers) for its moto fixtures only
        // behind its `aws` feature, so that a crate testing without the SDK never builds them through it.
        if pkg == "ccm-testing"
            && normal
            && !optional
            && dep.starts_with("ccm-")
            && dep != "ccm-cloud-provider"
        {
            violation(
                pkg,
                dep,
                "ccm-testing depends on the contract; the AWS crates only behind its `aws` feature",
            );
        }
        if dep == "ccm-testing" && normal && !["ccm-harness", "ccm-benches"].contains(&pkg.as_str()) {
            violation(
                pkg,
                dep,
                "ccm-testing is only ever a dev-dependency (a dependency of the harnesses and benches only)",
            );
        }
        // The shipped binaries' package: the release images build it and nothing else, so it compiles no test
        // code (the harnesses that drive its binaries are the package ccm-harness).
        if pkg == "ccm-examples" && normal && !SHIPPED_DEPS.contains(&dep.as_str()) {
            violation(
                pkg,
                dep,
                "the shipped binaries depend on the libraries and their runtime crates only",
            );
        }
    }
    assert!(
        violations.is_empty(),
        "dependency rule violations: {violations:#?}"
    );
}

/// The crates whose `cargo test -p` must not build the AWS SDK: their tests use the port mocks, and their moto
/// tests live in the composition crate (`crates/ccm-aws/tests`).
const SDK_FREE_TESTS: &[&str] = &["ccm-instances", "ccm-routes", "ccm-load-balancers", "ccm-tagging"];

#[test]
fn domain_crate_tests_never_build_the_aws_sdk() {
    let meta = workspace_metadata();
    let mut violations = Vec::new();
    for package in meta["packages"].as_array().expect("packages") {
        let pkg = package["name"].as_str().expect("name");
        if !SDK_FREE_TESTS.contains(&pkg) {
            continue;
        }
        for dep in package["dependencies"].as_array().expect("dependencies") {
            let name = dep["name"].as_str().expect("dep name");
            let features: Vec<&str> = dep["features"]
                .as_array()
                .map(|f| f.iter().filter_map(serde_json::Value::as_str).collect())
                .unwrap_or_default();
            let kind = dep["kind"].as_str().unwrap_or("normal");
            if is_aws_sdk(name)
                || ["ccm-aws-sdk", "ccm-aws", "ccm-controller-manager"].contains(&name)
                || (name == "ccm-testing" && features.contains(&"aws"))
            {
                violations.push(format!("{pkg} -> {name} ({kind}, features {features:?})"));
            }
        }
    }
    assert!(
        violations.is_empty(),
        "these dependencies build the AWS SDK for the domain crates' tests (move the test to crates/ccm-aws/tests): \
         {violations:#?}"
    );
}

/// The fuzz crate (`fuzz/`, outside the workspace, built with nightly's sanitizers) names no crate that builds the
/// AWS SDK: its instrumented build of `aws-sdk-ec2` alone took 25 minutes and 12 GB on 2 cores.
#[test]
fn the_fuzz_targets_never_build_the_aws_sdk() {
    let manifest = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/Cargo.toml");
    let text = std::fs::read_to_string(&manifest).expect("read fuzz/Cargo.toml");
    let mut in_dependencies = false;
    let mut named = Vec::new();
    for line in text.lines().map(str::trim) {
        if line.starts_with('[') {
            in_dependencies = line.ends_with("dependencies]");
            continue;
        }
        if in_dependencies && let Some((name, _)) = line.split_once('=') {
            named.push(name.trim().to_owned());
        }
    }
    assert!(
        named.iter().any(|n| n == "libfuzzer-sys"),
        "no dependencies read from {manifest:?}: {named:?}"
    );
    let sdk: Vec<&String> = named
        .iter()
        .filter(|n| is_aws_sdk(n) || ["ccm-aws-sdk", "ccm-aws"].contains(&n.as_str()))
        .collect();
    assert!(
        sdk.is_empty(),
        "fuzz/Cargo.toml builds the AWS SDK through {sdk:?}: move the parser out of it"
    );
}
