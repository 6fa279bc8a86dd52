//! The Dockerfiles in `deploy/docker` build what `scripts/images.sh` builds and runs without Docker (its proof,
//! with buildah, skopeo, umoci and runc, needs a separate static build of several minutes, so it is a script,
//! documented in docs/testing.md, not part of this suite). Checked here:
//! - the build stage runs on `$BUILDPLATFORM` and cross-compiles for `$TARGETARCH` (amd64, arm64), statically
//!   (crt-static), with the locked dependencies;
//! - the image is `FROM scratch` with the binary at `/bin/<name>` as entrypoint, CA certificates (rustls reads the
//!   system bundle), and user 65532, which is what the manifests run as;
//! - `scripts/images.sh config` reads the same entrypoint and user from each Dockerfile, so the proven images and
//!   the Dockerfiles cannot drift apart.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::too_many_lines)]

mod support;

use std::process::Command;
use support::manifests;

use manifests::{kustomize, repo, yaml_file};

const IMAGES: [&str; 2] = ["aws-cloud-controller-manager", "ecr-credential-provider"];

fn dockerfile(name: &str) -> String {
    std::fs::read_to_string(repo().join(format!("deploy/docker/{name}.Dockerfile"))).unwrap()
}

/// The lines of the last stage (from its `FROM`).
fn last_stage(text: &str) -> Vec<&str> {
    let lines: Vec<&str> = text.lines().collect();
    let start = lines
        .iter()
        .rposition(|l| l.starts_with("FROM "))
        .expect("a FROM line");
    lines[start..].to_vec()
}

#[test]
fn dockerfiles_cross_compile_static_binaries_into_scratch_images() {
    for name in IMAGES {
        let text = dockerfile(name);
        let build = text
            .lines()
            .find(|l| l.starts_with("FROM ") && l.ends_with(" AS build"))
            .unwrap_or_else(|| panic!("{name}: no build stage"));
        assert!(
            build.starts_with("FROM --platform=$BUILDPLATFORM "),
            "{name}: the build stage must run on the build machine and cross-compile, not under emulation: {build}"
        );
        for needle in [
            "ARG TARGETARCH",
            "amd64) arch=x86_64",
            "arm64) arch=aarch64",
            "rustup target add \"$target\"",
            "-C target-feature=+crt-static",
            "--locked --target \"$target\"",
            "uname -m",
            "libc6-dev-$deb-cross",
            "linux-gnu-gcc",
            "/etc/ssl/certs/ca-certificates.crt",
        ] {
            assert!(text.contains(needle), "{name}.Dockerfile lacks {needle:?}");
        }
        let last = last_stage(&text);
        assert_eq!(last[0], "FROM scratch", "{name}: the image is FROM scratch");
        let entrypoint = format!("ENTRYPOINT [\"/bin/{name}\"]");
        assert!(
            last.contains(&entrypoint.as_str()),
            "{name}: {entrypoint} in the last stage"
        );
        assert!(
            last.contains(&"USER 65532:65532"),
            "{name}: USER 65532:65532 in the last stage"
        );
    }
}

#[test]
fn images_script_reads_the_dockerfiles_entrypoint_and_user() {
    for name in IMAGES {
        let path = repo().join(format!("deploy/docker/{name}.Dockerfile"));
        let out = Command::new("bash")
            .arg(repo().join("scripts/images.sh"))
            .arg("config")
            .arg(&path)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        assert_eq!(
            String::from_utf8(out.stdout).unwrap(),
            format!("entrypoint=[\"/bin/{name}\"]\nuser=65532:65532\n"),
            "{name}"
        );
    }
    // A Dockerfile without them is refused, naming what is missing.
    let bare = std::env::temp_dir().join(format!("bare-{}.Dockerfile", std::process::id()));
    std::fs::write(&bare, "FROM scratch\nCOPY x /x\n").unwrap();
    let out = Command::new("bash")
        .arg(repo().join("scripts/images.sh"))
        .args(["config"])
        .arg(&bare)
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("no ENTRYPOINT"));
}

#[test]
fn the_manifests_run_the_images_as_their_user_and_entrypoint() {
    let ds = kustomize("base")
        .into_iter()
        .find(|o| o["kind"] == "DaemonSet")
        .unwrap();
    let values = yaml_file(&repo().join("deploy/helm/aws-cloud-controller-manager/values.yaml"));
    let pod = &ds["spec"]["template"]["spec"];
    for (what, user) in [
        ("kustomize", &pod["securityContext"]["runAsUser"]),
        ("helm", &values["podSecurityContext"]["runAsUser"]),
    ] {
        assert_eq!(user, 65532, "{what}: runAsUser is the image's USER");
    }
    // Only `args`: the image's ENTRYPOINT is the binary.
    assert!(pod["containers"][0].get("command").is_none());
    let template = std::fs::read_to_string(
        repo().join("deploy/helm/aws-cloud-controller-manager/templates/daemonset.yaml"),
    )
    .unwrap();
    assert!(
        !template.contains("command:"),
        "the chart runs the image's entrypoint"
    );
}

/// The words after each `flag` in `text` (`--bin a --bin b` -> `[a, b]`).
fn values_of<'a>(text: &'a str, flag: &str) -> Vec<&'a str> {
    let words: Vec<&str> = text.split_whitespace().collect();
    words
        .windows(2)
        .filter(|w| w[0] == flag)
        .map(|w| w[1].trim_end_matches(['\\', ')', ';']))
        .collect()
}

/// The operator's tools (docs/lb-plan.md, docs/doctor.md) ship in the controller's image, from the same build,
/// and a `tools` target writes them out named as kubectl plugins; the script's image without Docker has them too.
#[test]
fn the_controller_image_carries_lb_plan_and_doctor() {
    let tools = ["lb-plan", "doctor"];
    let manifest = std::fs::read_to_string(repo().join("examples/Cargo.toml")).unwrap();
    let text = dockerfile("aws-cloud-controller-manager");
    let built = values_of(&text, "--bin");
    let installed_loop = text
        .lines()
        .find(|l| l.trim_start().starts_with("&& for bin in "))
        .expect("the loop installing the binaries");
    for tool in tools {
        assert!(
            manifest.contains(&format!("name = \"{tool}\"")),
            "{tool} is a binary of ccm-examples"
        );
        assert!(
            built.contains(&tool),
            "the image's cargo build lacks --bin {tool}: {built:?}"
        );
        assert!(
            installed_loop
                .split_whitespace()
                .any(|w| w.trim_end_matches(';') == tool),
            "{tool} is not installed into /out/bin: {installed_loop}"
        );
    }
    // The final stage copies /out/ whole, so the tools are at /bin/<tool> beside the entrypoint.
    assert!(last_stage(&text).contains(&"COPY --from=build /out/ /"));
    assert!(
        text.contains("\"/out/bin/$bin\""),
        "the loop installs into /out/bin"
    );

    // `--target tools --output type=local,dest=out`: kubectl plugins, named as kubectl looks them up
    // (`kubectl lb-plan` runs kubectl-lb_plan from PATH), as the docs tell operators.
    let lines: Vec<&str> = text.lines().collect();
    let stage = lines
        .iter()
        .position(|l| *l == "FROM scratch AS tools")
        .expect("a tools stage");
    assert_eq!(lines[stage + 1], "COPY --from=build /tools/ /");
    for (tool, plugin, doc) in [
        ("lb-plan", "lb-plan", "docs/lb-plan.md"),
        ("doctor", "ccm-doctor", "docs/doctor.md"),
    ] {
        let file = format!("kubectl-{}", plugin.replace('-', "_"));
        let install = format!("\"target/$target/release/{tool}\" /tools/bin/{file}");
        assert!(text.contains(&install), "the tools stage lacks {install}");
        let page = std::fs::read_to_string(repo().join(doc)).unwrap();
        for needle in [
            format!("out/bin/{file}"),
            format!("kubectl {plugin} "),
            format!("/bin/{tool}"),
        ] {
            assert!(page.contains(&needle), "{doc} lacks {needle:?}");
        }
    }

    let script = std::fs::read_to_string(repo().join("scripts/images.sh")).unwrap();
    assert!(
        script.contains("TOOLS=(lb-plan doctor)"),
        "scripts/images.sh lacks the tools"
    );
    // The script builds the tools with the images (one cargo build per profile and architecture).
    assert!(
        script.contains("local names=(\"${IMAGES[@]}\" \"${TOOLS[@]}\")")
            && script.contains("bins+=(--bin \"$name\")")
            && script.contains("-p ccm-examples \"${bins[@]}\""),
        "scripts/images.sh does not build the tools"
    );
    assert!(
        script.contains("buildah copy --quiet --chmod 0755 \"$ctr\" \"$OUT/bin/$arch/$tool\" \"/bin/$tool\""),
        "scripts/images.sh does not copy the tools into the controller's image"
    );
}
