//! The scripts under `scripts/` read their arguments and check the system before doing any work: `--help` prints
//! the usage, a typo or an unsupported system fails at once, naming what is accepted, without installing or
//! building anything. Each script runs with a `PATH` whose package managers and build tools (apt-get, pip,
//! python3, go, cargo, rustup, sudo, buildah, curl) are stubs that record being called, and with an empty cache
//! directory: nothing may be called, and the cache directory must not be created.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::too_many_lines)]

use std::{
    path::{Path, PathBuf},
    process::{Command, Output, Stdio},
    time::Duration,
};

use tokio::time::Instant;

/// Long enough for bash to parse arguments on a loaded machine, far too short for any install or build.
const FAST: Duration = Duration::from_secs(10);

/// The package managers and build tools a script must not call before it has read its arguments.
const STUBS: [&str; 12] = [
    "apt-get", "apt", "pip", "pip3", "python3", "go", "cargo", "rustup", "sudo", "buildah", "curl", "git",
];

/// Every script that takes arguments or none, and the exit status of a refused argument.
const SCRIPTS: [&str; 11] = [
    "sandbox.sh",
    "test.sh",
    "setup.sh",
    "testenv.sh",
    "images.sh",
    "build-kubernetes.sh",
    "check-crates.sh",
    "consumer-check.sh",
    "semver-check.sh",
    "fuzz-smoke.sh",
    "rehearse-fresh-machine.sh",
];

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// A scratch world: stubbed tools, a call log, a cache directory that does not exist yet.
struct World {
    dir: PathBuf,
}

impl World {
    fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("scripts-cli-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let bin = dir.join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        for stub in STUBS {
            let path = bin.join(stub);
            std::fs::write(
                &path,
                "#!/bin/sh\necho \"$(basename \"$0\") $*\" >> \"$STUB_LOG\"\nexit 1\n",
            )
            .unwrap();
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        std::fs::write(dir.join("calls.log"), "").unwrap();
        Self { dir }
    }

    fn cache(&self) -> PathBuf {
        self.dir.join("cache")
    }

    /// Runs `scripts/<script> args` with the stubs first on `PATH`, killed after [`FAST`].
    fn run(&self, script: &str, args: &[&str], env: &[(&str, &str)]) -> (Output, Duration) {
        let path = format!("{}:/usr/sbin:/usr/bin:/sbin:/bin", self.dir.join("bin").display());
        let mut command = Command::new("/bin/bash");
        command
            .arg(repo().join("scripts").join(script))
            .args(args)
            .env_clear()
            .env("PATH", path)
            .env("HOME", &self.dir)
            .env("CCM_CACHE_DIR", self.cache())
            .env("STUB_LOG", self.dir.join("calls.log"))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for (k, v) in env {
            command.env(k, v);
        }
        let started = Instant::now();
        let mut child = command.spawn().unwrap();
        while child.try_wait().unwrap().is_none() {
            if started.elapsed() > FAST {
                let _ = child.kill();
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let output = child.wait_with_output().unwrap();
        (output, started.elapsed())
    }

    /// What the stubs were called with, and whether the cache directory was made: both must stay empty.
    fn assert_nothing_done(&self, what: &str) {
        let calls = std::fs::read_to_string(self.dir.join("calls.log")).unwrap();
        assert!(calls.is_empty(), "{what} ran tools before refusing:\n{calls}");
        assert!(
            !self.cache().exists(),
            "{what} created the cache directory {} before refusing",
            self.cache().display()
        );
    }
}

impl Drop for World {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn an_unknown_argument_is_refused_before_any_work() {
    for script in SCRIPTS {
        let world = World::new("bogus");
        let (out, took) = world.run(script, &["--bogus"], &[]);
        let stderr = text(&out.stderr);
        assert!(took < FAST, "{script} --bogus was still running after {took:?}");
        assert!(!out.status.success(), "{script} --bogus succeeded");
        assert!(
            stderr.contains("--bogus") && stderr.contains("--help"),
            "{script} --bogus: the message names the argument and --help:\n{stderr}"
        );
        world.assert_nothing_done(&format!("{script} --bogus"));
    }
}

#[test]
fn help_prints_the_usage_and_does_nothing_else() {
    for script in SCRIPTS {
        let world = World::new("help");
        let (out, took) = world.run(script, &["--help"], &[]);
        assert!(took < FAST, "{script} --help was still running after {took:?}");
        assert!(
            out.status.success(),
            "{script} --help failed: {}",
            text(&out.stderr)
        );
        assert!(
            text(&out.stdout).lines().count() >= 3,
            "{script} --help prints its usage:\n{}",
            text(&out.stdout)
        );
        world.assert_nothing_done(&format!("{script} --help"));
    }
    let world = World::new("sandbox-help");
    let (out, _) = world.run("sandbox.sh", &["--help"], &[]);
    let usage = text(&out.stdout);
    for needle in [
        "scripts/sandbox.sh [NODES] [--pause | --compare]",
        "Debian 12 (bookworm)",
    ] {
        assert!(
            usage.contains(needle),
            "sandbox.sh --help lacks {needle:?}:\n{usage}"
        );
    }
}

#[test]
fn sandbox_arguments_are_checked_before_any_work() {
    for (args, says) in [
        (&["--pasue"][..], "unknown flag --pasue"),
        (&["four"][..], "NODES must be a positive number"),
        (&["4", "5"][..], "one NODES only"),
        (&["--pause", "--compare"][..], "exclude each other"),
    ] {
        let world = World::new("sandbox");
        let (out, took) = world.run("sandbox.sh", args, &[]);
        assert!(
            took < FAST,
            "sandbox.sh {args:?} was still running after {took:?}"
        );
        assert!(!out.status.success(), "sandbox.sh {args:?} succeeded");
        let stderr = text(&out.stderr);
        assert!(
            stderr.contains(says),
            "sandbox.sh {args:?}: {says:?} in\n{stderr}"
        );
        world.assert_nothing_done(&format!("sandbox.sh {args:?}"));
    }
}

#[test]
fn another_system_is_refused_naming_the_supported_one() {
    let world = World::new("os");
    let release = world.dir.join("os-release");
    std::fs::write(
        &release,
        "PRETTY_NAME=\"Ubuntu 24.04.1 LTS\"\nID=ubuntu\nVERSION_ID=\"24.04\"\n",
    )
    .unwrap();
    let release = release.to_str().unwrap().to_owned();
    for (script, args) in [
        ("sandbox.sh", &[][..]),
        ("test.sh", &[][..]),
        ("setup.sh", &["--environment"][..]),
        ("build-kubernetes.sh", &[][..]),
        ("images.sh", &["build"][..]),
    ] {
        let (out, took) = world.run(script, args, &[("CCM_OS_RELEASE", &release)]);
        assert!(took < FAST, "{script} was still running after {took:?}");
        assert!(!out.status.success(), "{script} ran on Ubuntu");
        let stderr = text(&out.stderr);
        assert!(
            stderr.contains("Ubuntu 24.04.1 LTS") && stderr.contains("Debian 12 (bookworm) only"),
            "{script}: the message names this system and the supported one:\n{stderr}"
        );
        world.assert_nothing_done(&format!("{script} on Ubuntu"));
    }
    // Debian 12 passes the check (the scripts then go on to work, which this test does not run).
    let debian = world.dir.join("debian");
    std::fs::write(
        &debian,
        "PRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\nID=debian\nVERSION_ID=\"12\"\n",
    )
    .unwrap();
    let check = Command::new("/bin/bash")
        .arg("-c")
        .arg(format!(". {}/scripts/lib.sh && check_os", repo().display()))
        .env("CCM_OS_RELEASE", &debian)
        .output()
        .unwrap();
    assert!(check.status.success(), "{}", text(&check.stderr));
}
