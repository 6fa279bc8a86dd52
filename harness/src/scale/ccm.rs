//! The controller under measurement: `aws-cloud-controller-manager` (or, for the write floor, `custom-provider`
//! with its in-memory cloud) started with a pattern's flags, or the Go controller (1.20.2, its in-tree AWS
//! provider). Read through `/metrics` (ours: AWS calls by operation) or the proxy in front of moto (Go's calls
//! by action), `/proc/<pid>/status` (peak memory) and `/proc/<pid>/stat` (CPU time).

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
    process::{Child, Stdio},
    sync::Arc,
    time::Duration,
};

use anyhow::Context;
use ccm_testing::{FaultProxy, GoCcm, GoCcmOptions, GoCloudConfig, TestEnv, metrics};

/// AWS requests per operation (`aws_api_requests_total`, every outcome and retry).
pub type Calls = BTreeMap<String, f64>;

/// Scrapes of `/metrics` per reading before the run gives up on the CCM.
const SCRAPE_ATTEMPTS: u32 = 12;

/// `after - before`, per operation, leaving out operations that did not move.
pub fn diff(after: &Calls, before: &Calls) -> Calls {
    after
        .iter()
        .map(|(op, n)| (op.clone(), n - before.get(op).copied().unwrap_or(0.0)))
        .filter(|(_, n)| *n > 0.0)
        .collect()
}

/// glibc's malloc settings of the CCM image (deploy/docker/aws-cloud-controller-manager.Dockerfile), so that the
/// harness measures the memory the image runs with.
pub const IMAGE_MALLOC: [(&str, &str); 2] = [("MALLOC_ARENA_MAX", "1"), ("MALLOC_MMAP_THRESHOLD_", "131072")];

/// Every operation's count together.
pub fn total(calls: &Calls) -> f64 {
    // Not `sum()`: the empty sum of floats is -0.0, which the page printed as "-0" calls.
    calls.values().fold(0.0, |a, b| a + b)
}

/// Resident memory of a process, KiB: the peak so far and what is resident now, split into anonymous pages
/// (heap, stacks: what the program allocated) and file pages (the binary's code and data as mapped).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Memory {
    pub peak: u64,
    pub anon: u64,
    pub file: u64,
}

impl Memory {
    /// Reads `VmHWM`, `RssAnon` and `RssFile` (plus `RssShmem` as file) of a `/proc/<pid>/status`.
    pub fn parse(status: &str) -> Self {
        let field = |name: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
                .unwrap_or(0)
        };
        Self {
            peak: field("VmHWM"),
            anon: field("RssAnon"),
            file: field("RssFile") + field("RssShmem"),
        }
    }
}

pub struct Ccm {
    process: Process,
    pub log: PathBuf,
}

enum Process {
    /// This repository's binary, its calls from its `/metrics` on `port`.
    Ours { child: Child, port: u16 },
    /// The Go controller, its calls counted by the proxy every one of them goes through.
    Go { go: Box<GoCcm>, proxy: Arc<FaultProxy> },
}

impl Ccm {
    /// Starts `bin` with `--cloud-provider=<provider>` against the environment with the cloud config `config`
    /// and `flags`, logging into `dir` (`<provider>.log`), and waits until `/metrics` answers.
    pub async fn start(
        bin: &Path,
        provider: &str,
        env: &TestEnv,
        config: &Path,
        dir: &Path,
        flags: &[String],
    ) -> anyhow::Result<Self> {
        let port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        let log = dir.join(format!("{provider}.log"));
        let child = std::process::Command::new(bin)
            .arg(format!("--cloud-provider={provider}"))
            .args([
                "--v=1",
                "--leader-elect=false",
                "--bind-address=127.0.0.1",
                "--configure-cloud-routes=false",
                "--authorization-always-allow-paths=/healthz,/metrics",
            ])
            .arg(format!("--secure-port={port}"))
            .arg(format!("--cloud-config={}", config.display()))
            .arg(format!("--kubeconfig={}", env.kubeconfig.display()))
            .args(flags)
            .env("AWS_ACCESS_KEY_ID", "scale")
            .env("AWS_SECRET_ACCESS_KEY", "scale")
            .env("AWS_EC2_METADATA_DISABLED", "true")
            .envs(IMAGE_MALLOC)
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&log)?)
            .stderr(std::fs::File::create(dir.join(format!("{provider}.err")))?)
            .spawn()
            .with_context(|| format!("starting {} (build it first)", bin.display()))?;
        let ccm = Self {
            process: Process::Ours { child, port },
            log,
        };
        for _ in 0..300 {
            if ccm.scrape_once().await.is_ok() {
                return Ok(ccm);
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        anyhow::bail!(
            "{} did not serve /metrics within 60 s; see {}",
            bin.display(),
            ccm.log.display()
        )
    }

    /// Starts the Go controller (cloud-node, cloud-node-lifecycle and service controllers, its own defaults
    /// otherwise) with `config`, logging into `dir`, whose AWS calls all go through `proxy`; waits until it
    /// leads.
    pub async fn start_go(
        env: &TestEnv,
        config: &GoCloudConfig,
        dir: &Path,
        proxy: Arc<FaultProxy>,
    ) -> anyhow::Result<Self> {
        let mut options = GoCcmOptions::new(dir, &format!("go-{}", config.cluster_id));
        options.controllers.push("cloud-node-lifecycle".to_owned());
        options
            .extra_args
            .push("--configure-cloud-routes=false".to_owned());
        let mut go = GoCcm::start(env, config, &options)?;
        go.wait_leading(Duration::from_secs(60)).await?;
        let log = go.log_path().to_owned();
        Ok(Self {
            process: Process::Go {
                go: Box::new(go),
                proxy,
            },
            log,
        })
    }

    fn pid(&self) -> u32 {
        match &self.process {
            Process::Ours { child, .. } => child.id(),
            Process::Go { go, .. } => go.id(),
        }
    }

    /// AWS requests so far per operation. A CCM busy with thousands of Nodes on a loaded machine may not answer
    /// one scrape within its 5 s timeout: a reading is asked for up to 12 times (about two minutes) before the
    /// run gives up.
    pub async fn calls(&self) -> anyhow::Result<Calls> {
        let mut last = None;
        for _ in 0..SCRAPE_ATTEMPTS {
            match self.scrape_once().await {
                Ok(calls) => return Ok(calls),
                Err(e) => last = Some(e),
            }
            tokio::time::sleep(Duration::from_secs(5)).await;
        }
        Err(last.unwrap_or_else(|| anyhow::anyhow!("no scrape attempted")))
    }

    async fn scrape_once(&self) -> anyhow::Result<Calls> {
        self.reader().calls().await
    }

    /// A handle that reads this CCM's calls and memory while it runs (for `--trace`).
    pub fn reader(&self) -> Reader {
        let source = match &self.process {
            Process::Ours { port, .. } => Source::Metrics(*port),
            Process::Go { proxy, .. } => Source::Proxy(proxy.clone()),
        };
        Reader {
            pid: self.pid(),
            source,
        }
    }

    /// Peak resident memory so far, KiB (`VmHWM`).
    pub fn peak_rss_kib(&self) -> u64 {
        self.memory().peak
    }

    /// The process's memory now (`/proc/<pid>/status`).
    pub fn memory(&self) -> Memory {
        self.reader().memory().unwrap_or_default()
    }

    /// User plus system CPU seconds so far (`utime` + `stime`, at the usual 100 ticks a second).
    pub fn cpu_secs(&self) -> f64 {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.pid())).unwrap_or_default();
        // The command name may hold spaces: the fields that follow come after its closing parenthesis.
        let fields: Vec<&str> = stat
            .rsplit_once(')')
            .map(|(_, rest)| rest.split_whitespace().collect())
            .unwrap_or_default();
        let ticks = |i: usize| fields.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
        // utime and stime are fields 14 and 15 of stat(5); after the parenthesis, the state is field 3.
        (ticks(11) + ticks(12)) / 100.0
    }

    /// Whether the process is still running.
    pub fn running(&mut self) -> bool {
        match &mut self.process {
            Process::Ours { child, .. } => matches!(child.try_wait(), Ok(None)),
            Process::Go { go, .. } => go.check_running().is_ok(),
        }
    }

    /// SIGTERM, and the exit status.
    pub async fn stop(self) -> anyhow::Result<std::process::ExitStatus> {
        match self.process {
            Process::Ours { mut child, .. } => {
                std::process::Command::new("kill")
                    .args(["-TERM", &child.id().to_string()])
                    .status()?;
                Ok(child.wait()?)
            }
            Process::Go { mut go, .. } => Ok(go.terminate().await?),
        }
    }
}

/// Reads a running CCM's AWS calls and memory, apart from the [`Ccm`] that owns the process.
pub struct Reader {
    pid: u32,
    source: Source,
}

enum Source {
    /// This repository's binary's `/metrics` on this port.
    Metrics(u16),
    /// The proxy every call of the Go controller goes through.
    Proxy(Arc<FaultProxy>),
}

impl Reader {
    /// AWS requests so far per operation, one reading.
    pub async fn calls(&self) -> anyhow::Result<Calls> {
        match &self.source {
            Source::Metrics(port) => Ok(metrics::requests_by_operation(&metrics::scrape(*port).await?)),
            // Every request the proxy forwarded, as `aws_api_requests_total` counts every attempt.
            #[allow(clippy::cast_precision_loss)]
            Source::Proxy(proxy) => Ok(proxy
                .requests_by_action()
                .into_iter()
                .map(|(action, n)| (action, n as f64))
                .collect()),
        }
    }

    /// The process's memory now (`/proc/<pid>/status`); `None` once the process is gone.
    pub fn memory(&self) -> Option<Memory> {
        std::fs::read_to_string(format!("/proc/{}/status", self.pid))
            .ok()
            .map(|status| Memory::parse(&status))
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_harness_runs_the_ccm_with_the_images_malloc_settings() {
        let dockerfile = include_str!("../../../deploy/docker/aws-cloud-controller-manager.Dockerfile");
        let settings: Vec<String> = super::IMAGE_MALLOC
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        assert!(
            dockerfile.contains(&format!("\nENV {}\n", settings.join(" "))),
            "the image's ENV line differs from {settings:?}"
        );
    }

    #[test]
    fn memory_is_read_from_the_status_file() {
        let status = "Name:\tccm\nVmHWM:\t   70000 kB\nVmRSS:\t   60000 kB\nRssAnon:\t   41000 kB\n\
                      RssFile:\t   18000 kB\nRssShmem:\t       1000 kB\n";
        let m = super::Memory::parse(status);
        assert_eq!(
            m,
            super::Memory {
                peak: 70000,
                anon: 41000,
                file: 19000
            }
        );
        assert_eq!(super::Memory::parse(""), super::Memory::default());
    }

    #[test]
    fn no_calls_print_as_zero() {
        assert_eq!(format!("{:.0}", super::total(&super::Calls::new())), "0");
    }
}
