//! Rendering the Helm chart in tests. No Helm binary can be installed here, so `support/helm-template/main.go`
//! (Go text/template with Sprig and Helm's own functions, Debian's Go packages, built offline in GOPATH mode)
//! renders it as `helm template` does, NOTES.txt included.
#![allow(dead_code)] // each test crate uses part of it

use std::{
    path::{Path, PathBuf},
    process::Command,
    sync::OnceLock,
};

use serde_json::Value;

pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

pub fn chart() -> PathBuf {
    repo().join("deploy/helm/aws-cloud-controller-manager")
}

/// The chart's `values.schema.json`, parsed.
pub fn schema() -> Value {
    serde_json::from_str(&std::fs::read_to_string(chart().join("values.schema.json")).unwrap()).unwrap()
}

/// The renderer binary, built once per test process (into a per-process file renamed into place, so that
/// parallel test processes never see a half-written binary).
fn renderer() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR"));
        let bin = dir.join("helm-template");
        let partial = dir.join(format!("helm-template.{}", std::process::id()));
        let out = Command::new("go")
            .args(["build", "-o"])
            .arg(&partial)
            .arg(".")
            .current_dir(repo().join("examples/tests/support/helm-template"))
            .env("GO111MODULE", "off")
            .env("GOPATH", "/usr/share/gocode")
            .env("GOFLAGS", "")
            .env("GOPROXY", "off")
            .env("GOTOOLCHAIN", "local")
            .output()
            .unwrap_or_else(|e| {
                panic!("cannot run `go` to build the chart renderer: {e}; install golang-go (scripts/setup.sh does)")
            });
        assert!(
            out.status.success(),
            "building the chart renderer failed (it needs Debian's golang-github-masterminds-sprig-dev and \
             golang-github-ghodss-yaml-dev, which scripts/setup.sh installs):\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        std::fs::rename(&partial, &bin).unwrap();
        bin
    })
}

/// The image repository the tests pass, as an operator passes the one they built: the chart has no default (no
/// image is published) and fails without one.
pub const IMAGE_REPOSITORY: &str =
    "123456789012.dkr.ecr.eu-west-1.amazonaws.com/aws-cloud-controller-manager";

/// `helm template` of the chart with an image (`image.repository` = [`IMAGE_REPOSITORY`], as
/// `--set image.repository=...` gives it) and then these values files (in order, so they may override it): the
/// objects, NOTES.txt's text, or the renderer's error message.
pub fn template(values: &[&Path]) -> Result<(Vec<Value>, String), String> {
    // Written once per process: tests running in parallel threads never read it half-written.
    static IMAGE: OnceLock<PathBuf> = OnceLock::new();
    let image = IMAGE.get_or_init(|| {
        values_file(
            "image",
            &serde_json::json!({"image": {"repository": IMAGE_REPOSITORY}}),
        )
    });
    let mut files = vec![image.as_path()];
    files.extend_from_slice(values);
    template_exactly(&files)
}

/// `helm template` of the chart with exactly these values files (in order), without the image [`template`]
/// passes: the objects, NOTES.txt's text, or the renderer's error message.
pub fn template_exactly(values: &[&Path]) -> Result<(Vec<Value>, String), String> {
    render(None, values)
}

/// `helm upgrade --reuse-values` of a release made by another chart: the chart rendered with `defaults` (that
/// chart's values.yaml) in place of its own values.yaml, then these values files (the release's and the upgrade's,
/// in order). The objects, NOTES.txt's text, or the renderer's error message.
pub fn template_reusing(defaults: &Path, values: &[&Path]) -> Result<(Vec<Value>, String), String> {
    render(Some(defaults), values)
}

fn render(defaults: Option<&Path>, values: &[&Path]) -> Result<(Vec<Value>, String), String> {
    let mut command = Command::new(renderer());
    if let Some(defaults) = defaults {
        command.arg("-defaults").arg(defaults);
    }
    for file in values {
        command.arg("-f").arg(file);
    }
    let out = command.arg(chart()).output().expect("run the chart renderer");
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    let text = String::from_utf8(out.stdout).unwrap();
    let (manifests, notes) =
        match text.split_once("# Source: aws-cloud-controller-manager/templates/NOTES.txt\n") {
            Some((m, n)) => (m.to_owned(), n.to_owned()),
            None => (text, String::new()),
        };
    let objects = serde_saphyr::from_multiple::<Value>(&manifests)
        .unwrap_or_else(|e| panic!("the chart rendered invalid YAML: {e}\n{manifests}"))
        .into_iter()
        .filter(|v| !v.is_null())
        .collect();
    Ok((objects, notes))
}

/// Writes `values` (JSON is YAML) to a file for [`template`].
pub fn values_file(name: &str, values: &Value) -> PathBuf {
    let path = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("{name}-{}.yaml", std::process::id()));
    std::fs::write(&path, serde_json::to_string_pretty(values).unwrap()).unwrap();
    path
}

/// The object of `kind` (and `name`, when given) among `objects`.
pub fn object<'a>(objects: &'a [Value], kind: &str, name: Option<&str>) -> &'a Value {
    objects
        .iter()
        .find(|o| o["kind"] == kind && name.is_none_or(|n| o["metadata"]["name"] == n))
        .unwrap_or_else(|| panic!("no {kind} {name:?} rendered"))
}
