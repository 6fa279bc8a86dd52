//! Where and how the scale harness ran: the second environment's coordinates, the machine, the commit.

use std::path::Path;

use anyhow::Context;
use ccm_testing::{Emulator, TestEnv};

use crate::scale::Params;

/// A test environment from the `export NAME='value'` lines of its env file.
pub fn env_file(path: &Path) -> anyhow::Result<TestEnv> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let get = |name: &str| {
        text.lines()
            .filter_map(|l| l.strip_prefix("export ")?.split_once('='))
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.trim_matches('\'').to_owned())
            .with_context(|| format!("{name} missing in {}", path.display()))
    };
    Ok(TestEnv {
        kubeconfig: get("CCM_TEST_KUBECONFIG")?.into(),
        kube_apiserver: get("CCM_TEST_KUBE_APISERVER")?,
        aws_endpoint: get("CCM_TEST_AWS_ENDPOINT")?,
        aws_region: get("CCM_TEST_AWS_REGION").unwrap_or_else(|_| "us-east-1".to_owned()),
        // moto when the file names no emulator, as `TestEnv::get` does for an unset variable.
        emulator: match get("CCM_TEST_AWS_EMULATOR") {
            Ok(name) => Emulator::from_name(&name)
                .with_context(|| format!("unknown CCM_TEST_AWS_EMULATOR {name:?} in {}", path.display()))?,
            Err(_) => Emulator::Moto,
        },
    })
}

/// A command's trimmed standard output (empty when it could not run).
pub fn command(program: &str, args: &[&str]) -> String {
    std::process::Command::new(program)
        .args(args)
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_default()
}

/// The short commit of the checkout here, marked when files differ from it.
pub fn commit() -> String {
    let dirty = !command("git", &["status", "--porcelain", "--untracked-files=no"]).is_empty();
    format!(
        "{}{}",
        command("git", &["rev-parse", "--short", "HEAD"]),
        if dirty { " (with uncommitted changes)" } else { "" }
    )
}

/// Cores, CPU model and memory.
pub fn machine() -> String {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name"))
        .map(|m| m.trim_start_matches([' ', '\t', ':']));
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let mem = meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .map(str::trim);
    let cores = std::thread::available_parallelism().map_or(0, usize::from);
    format!(
        "{cores} cores ({}), {} RAM",
        model.unwrap_or("unknown CPU"),
        mem.unwrap_or("unknown")
    )
}

/// How the run was set up, for the page.
pub fn setup(p: &Params, bin: &Path, ours: &[String], flags: &[String], columns: Columns) -> String {
    let ours = if ours.is_empty() {
        "its defaults".to_owned()
    } else {
        format!("`{}`", ours.join(" "))
    };
    format!(
        "Binary `{}`; {} Nodes, Services {:?} (odd-numbered NLBs, even Classic ELBs, one TCP port each, \
         each targeting one pool of {} Nodes); steady window {} s after {} s of settling; at the end every \
         Service is deleted. A load balancer's cost is the calls made and moto's answer time (timed by the proxy \
         in front of it) while its step ran, less the steady window's rates, per load balancer. AWS: moto 5.2.5 \
         for every figure (no in-memory implementation was needed); Kubernetes: kube-apiserver 1.20.2 with etcd. \
         This CCM's flags: {ours}. The Go controller: 1.20.2 with its in-tree AWS provider, built from Debian's \
         source, its defaults (controllers cloud-node, cloud-node-lifecycle and service), its AWS calls counted \
         by the proxy in front of moto; its write floor ran with `{}` (its Kubernetes pace). {} {}",
        bin.file_name().map(|n| n.to_string_lossy()).unwrap_or_default(),
        p.nodes,
        p.services,
        p.pool,
        p.steady.as_secs(),
        p.settle.as_secs(),
        flags.join(" "),
        match columns {
            Columns::Together =>
                "Both patterns ran at the same time, each in its own environment (own moto and apiserver) on the same machine.",
            Columns::OneAfterTheOther => "The patterns ran one after the other in one environment.",
            Columns::OursOnly =>
                "**The Go controller's column was not run** (`--ours-only`: a size it cannot finish within a run).",
        },
        throttling(p.throttled)
    )
}

/// Which columns ran, and how.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Columns {
    /// Both at once, each in its own environment.
    Together,
    /// Both in one environment, this CCM first.
    OneAfterTheOther,
    /// This CCM's only.
    OursOnly,
}

/// What the page says of AWS's rate limits in the run.
fn throttling(throttled: bool) -> &'static str {
    if throttled {
        "AWS's rate limits: **throttled as AWS**. Each column's calls went through a proxy holding AWS's \
         documented token buckets for one account (docs/performance.md, \"AWS's rate limits in the loop\"), which \
         answered a call finding its bucket empty with the service's throttling error instead of forwarding it; \
         this CCM kept its client-side limiter, the Go controller retried as its SDK does."
    } else {
        "AWS's rate limits: **unthrottled** (`--unthrottled`): moto answered every call at once, which AWS never \
         does, and this CCM ran without its client-side limiter."
    }
}
