//! Invocation cost of the `ecr-credential-provider` binary, the way the kubelet pays it: a fresh process per
//! request, timed from spawn to the response on stdout and exit. Printed beside a trivial process start (`true`)
//! measured in the same run, since absolute times on a shared machine are noisy; plus the size of the stripped
//! binary.
//!
//! Four series:
//! - `true`: the floor of starting any process here;
//! - `refused`: the provider given a non-ECR image, which it refuses before loading any AWS configuration: its
//!   own start-up cost (runtime, parsing) without the network;
//! - `moto`: a full private-registry request against moto (one ECR `GetAuthorizationToken`), every response
//!   checked (password decodes from the token);
//! - `ecr call`: the same `GetAuthorizationToken` made in this process through `EcrAdapter` on a warm
//!   connection: the ECR call alone.
//!
//! The series are interleaved (each round runs each once) so that load from other processes falls on all alike.
//! The per-invocation overhead beyond the ECR call is `moto` less `ecr call` at the median: process start, AWS
//! configuration, client construction and the connection to the endpoint (goal: at most 5 ms). The size goal is
//! 10 MiB stripped.
//!
//! Run with the test environment's variables (`set -a; . <testenv>/env; set +a`):
//! `cargo build --profile release-small -p ccm-examples --bin ecr-credential-provider && cargo bench -p
//! ccm-benches --bench ecr-credential-provider -- --write docs/credential-provider.md` (the benchmark cannot build
//! the binary itself: cargo holds the target directory's lock while it runs). It measures the `release-small`
//! build (the profile the binary ships with) when there is one, else the `release` build, and names the profile
//! in its figures. `--write FILE` replaces the figures block of FILE. `ECR_CREDENTIAL_PROVIDER_BIN` measures
//! another build; `ECR_BENCH_RUNS` sets the runs per series (50).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)] // A benchmark measures wall time.

use std::{
    io::Write,
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::{Duration, Instant},
};

const IMAGE: &str = "123456789012.dkr.ecr.us-east-1.amazonaws.com/bench/app:1";

fn main() {
    let endpoint = std::env::var("CCM_TEST_AWS_ENDPOINT").expect(
        "CCM_TEST_AWS_ENDPOINT is not set: source the test environment's env file (scripts/testenv.sh up)",
    );
    let runs: usize = std::env::var("ECR_BENCH_RUNS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(50);
    let (binary, profile) = provider_binary();
    let home = std::env::temp_dir().join("ecr-bench-home");
    std::fs::create_dir_all(&home).unwrap();

    let request = |image: &str| {
        format!(
            r#"{{"apiVersion":"credentialprovider.kubelet.k8s.io/v1","kind":"CredentialProviderRequest","image":"{image}"}}"#
        )
    };
    let ok_request = request(IMAGE);
    let refused_request = request("docker.io/library/nginx:1.27");

    // Warm the page cache and moto before measuring.
    for _ in 0..3 {
        invoke(&binary, &home, &endpoint, &ok_request, true);
    }
    let mut start_true = || assert!(Command::new("true").status().unwrap().success());
    let mut refuse = || invoke(&binary, &home, &endpoint, &refused_request, false);
    let mut request_moto = || invoke(&binary, &home, &endpoint, &ok_request, true);
    let mut call_ecr = in_process_ecr_call();
    let [baseline, refused, moto, ecr_call] = interleaved(
        runs,
        [&mut start_true, &mut refuse, &mut request_moto, &mut call_ecr],
    );

    let size = std::fs::metadata(&binary).unwrap().len();
    let stripped = stripped_size(&binary).unwrap_or(size);
    let mut table = format!(
        "ecr-credential-provider invocation ({profile} build), {runs} interleaved runs per series\n\n"
    );
    table += &format!(
        "{:<10} {:>9} {:>9} {:>9} {:>9} {:>10}\n",
        "series", "p50", "p90", "p99", "mean", "p50/true"
    );
    let all = [
        ("true", &baseline),
        ("refused", &refused),
        ("moto", &moto),
        ("ecr call", &ecr_call),
    ];
    for (name, stats) in all {
        table += &format!(
            "{name:<10} {:>9} {:>9} {:>9} {:>9} {:>9.1}x\n",
            ms(stats.p50),
            ms(stats.p90),
            ms(stats.p99),
            ms(stats.mean),
            stats.p50.as_secs_f64() / baseline.p50.as_secs_f64()
        );
    }
    let overhead = moto.p50.saturating_sub(ecr_call.p50);
    table += &format!(
        "\noverhead per invocation beyond the ECR call (p50 moto - p50 ecr call): {} (goal <= 5 ms: {})\n",
        ms(overhead),
        verdict(overhead <= Duration::from_millis(5))
    );
    table += &format!(
        "binary size: {} stripped ({stripped} bytes; {size} bytes as built) (goal <= 10 MiB: {})\n",
        mib(stripped),
        verdict(stripped <= 10 * 1024 * 1024)
    );
    println!("binary {}\n{table}", binary.display());
    if let Some(doc) = write_target() {
        write_block(&doc, &table);
        println!("figures written to {}", doc.display());
    }
}

fn verdict(met: bool) -> &'static str {
    if met { "met" } else { "NOT met" }
}

/// The ECR call alone: `GetAuthorizationToken` through the adapter in this process, after one warm-up call so
/// that the connection to moto is open, as a long-running process would make it.
fn in_process_ecr_call() -> impl FnMut() {
    use ccm_aws_api::Ecr as _;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let env = ccm_testing::TestEnv::get();
    let config = runtime.block_on(env.aws_config());
    let adapter = ccm_aws_sdk::EcrAdapter::new(&config, ccm_aws_sdk::AdapterOptions::default());
    let call = move || {
        let token = runtime
            .block_on(adapter.ecr().authorization_token("us-east-1", None))
            .unwrap();
        assert!(!token.token.is_empty());
    };
    call();
    call
}

const BEGIN: &str = "<!-- BEGIN ecr-credential-provider bench: written by `cargo bench -p ccm-benches --bench \
                     ecr-credential-provider -- --write`; do not edit by hand -->";
const END: &str = "<!-- END ecr-credential-provider bench -->";

/// `--write FILE` among the arguments (cargo bench also passes `--bench`).
fn write_target() -> Option<PathBuf> {
    let args: Vec<String> = std::env::args().collect();
    let at = args.iter().position(|a| a == "--write")?;
    let file = args.get(at + 1).expect("--write needs a file");
    // cargo runs benchmarks in the package's directory: a relative path is taken from the workspace root.
    let path = PathBuf::from(file);
    Some(if path.is_absolute() {
        path
    } else {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(path)
    })
}

/// Replaces the figures block of `doc` (between [`BEGIN`] and [`END`]), or appends one.
fn write_block(doc: &Path, table: &str) {
    let old = std::fs::read_to_string(doc).unwrap();
    let block = format!("{BEGIN}\n\n```text\n{table}```\n\n{END}");
    let new = match (old.find(BEGIN), old.find(END)) {
        (Some(start), Some(end)) if start < end => {
            format!("{}{block}{}", &old[..start], &old[end + END.len()..])
        }
        _ => format!("{}\n{block}\n", old.trim_end()),
    };
    std::fs::write(doc, new).unwrap();
}

/// Runs the provider once with `request` on stdin; checks the outcome.
fn invoke(binary: &Path, home: &Path, endpoint: &str, request: &str, expect_ok: bool) {
    let mut child = Command::new(binary)
        .env_clear()
        .env("HOME", home)
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("AWS_ENDPOINT_URL", endpoint)
        .env("AWS_ACCESS_KEY_ID", "testing")
        .env("AWS_SECRET_ACCESS_KEY", "testing")
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(request.as_bytes()).unwrap();
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    if expect_ok {
        assert!(output.status.success(), "provider failed: {stderr}");
        let response: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
        let auth = &response["auth"]["123456789012.dkr.ecr.us-east-1.amazonaws.com"];
        assert_eq!(auth["username"], "AWS", "{response}");
        assert!(
            !auth["password"].as_str().unwrap_or_default().is_empty(),
            "{response}"
        );
    } else {
        assert_eq!(output.status.code(), Some(1), "refusal must exit 1: {stderr}");
    }
}

struct Stats {
    p50: Duration,
    p90: Duration,
    p99: Duration,
    mean: Duration,
}

/// Times `runs` rounds, each running every series once in turn: a burst of load from other processes then falls
/// on all series alike instead of on whichever ran at the time (the overhead is a difference of two series).
fn interleaved<const N: usize>(runs: usize, mut series: [&mut dyn FnMut(); N]) -> [Stats; N] {
    let mut samples: [Vec<Duration>; N] = std::array::from_fn(|_| Vec::with_capacity(runs));
    for _ in 0..runs {
        for (run, samples) in series.iter_mut().zip(samples.iter_mut()) {
            let start = Instant::now();
            run();
            samples.push(start.elapsed());
        }
    }
    samples.map(stats)
}

fn stats(mut samples: Vec<Duration>) -> Stats {
    samples.sort();
    let at = |q: f64| samples[((samples.len() as f64 * q).ceil() as usize).clamp(1, samples.len()) - 1];
    Stats {
        p50: at(0.50),
        p90: at(0.90),
        p99: at(0.99),
        mean: samples.iter().sum::<Duration>() / samples.len() as u32,
    }
}

/// The binary to measure and the name of its build: `ECR_CREDENTIAL_PROVIDER_BIN` ("given"), else the
/// `release-small` build of this target directory (the profile the binary ships with), else its `release` build.
/// It is not built from here: cargo holds the target directory's lock while a benchmark runs, so a nested build
/// would wait forever.
fn provider_binary() -> (PathBuf, String) {
    if let Some(path) = std::env::var_os("ECR_CREDENTIAL_PROVIDER_BIN") {
        return (PathBuf::from(path), "given".to_owned());
    }
    // This executable is <target>/release/deps/<name>-<hash>; the binaries are <target>/<profile>/<name>.
    let exe = std::env::current_exe().unwrap();
    let target = exe
        .parent()
        .and_then(Path::parent)
        .and_then(Path::parent)
        .expect("<target>/release/deps");
    let built = |profile: &str| target.join(profile).join("ecr-credential-provider");
    ["release-small", "release"]
        .into_iter()
        .find(|profile| built(profile).is_file())
        .map(|profile| (built(profile), profile.to_owned()))
        .unwrap_or_else(|| {
            panic!(
                "no ecr-credential-provider in {}/release-small or release: run `cargo build --profile \
                 release-small -p ccm-examples --bin ecr-credential-provider` first",
                target.display()
            )
        })
}

fn stripped_size(binary: &Path) -> Option<u64> {
    let copy = std::env::temp_dir().join("ecr-credential-provider.stripped");
    std::fs::copy(binary, &copy).ok()?;
    let ok = Command::new("strip").arg(&copy).status().ok()?.success();
    let size = std::fs::metadata(&copy).ok()?.len();
    let _ = std::fs::remove_file(&copy);
    ok.then_some(size)
}

fn ms(d: Duration) -> String {
    format!("{:.2}ms", d.as_secs_f64() * 1000.0)
}

fn mib(bytes: u64) -> String {
    format!("{:.2} MiB", bytes as f64 / (1024.0 * 1024.0))
}
