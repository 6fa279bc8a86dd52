//! The Go cloud controller manager as a test peer: Kubernetes 1.20.2's cloud controller manager with its in-tree
//! AWS provider (k8s.io/legacy-cloud-providers/aws, aws-sdk-go v1), which `scripts/setup.sh` builds into the cache
//! directory (docs/testing.md says how, and what its `main` changes) and `scripts/testenv.sh up` exports as
//! `CCM_TEST_GO_CCM` when it exists.
//!
//! [`GoCcm::start`] runs it against the test environment the way the end-to-end tests run ours: a cloud config in
//! the Go provider's format ([`GoCloudConfig`]), the upstream flags, its own Lease, HTTPS on a free loopback port,
//! its log in a file that the test reads back, static credentials in its environment; it is killed when dropped.
//! A test that needs it and cannot find it fails with [`GoCcmError::Missing`], which names the variable: the peer
//! is never skipped silently.

use std::{
    fs::File,
    path::{Path, PathBuf},
    process::{Child, Command, ExitStatus},
    time::Duration,
};

use crate::TestEnv;

/// The variable that names the Go controller's binary.
pub const GO_CCM_VAR: &str = "CCM_TEST_GO_CCM";

/// Why the Go controller could not be started or did not come up.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GoCcmError {
    /// `CCM_TEST_GO_CCM` is not set.
    #[error(
        "{GO_CCM_VAR} is not set: this test environment has no Go cloud controller manager. Run \
         `scripts/setup.sh` (it builds the Go controller into the cache directory), then `scripts/testenv.sh up` \
         and source the printed directory's `env` file, which exports {GO_CCM_VAR} when the binary exists"
    )]
    Missing,
    /// `CCM_TEST_GO_CCM` names no executable file.
    #[error("{GO_CCM_VAR}={path} is not an executable file: run `scripts/setup.sh` to build it again")]
    NotExecutable {
        /// The path the variable gave.
        path: PathBuf,
    },
    /// A file could not be written or the process not started.
    #[error("cannot {what} {path}: {source}")]
    Io {
        /// What was attempted.
        what: &'static str,
        /// The file or binary.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The process exited while it should be running.
    #[error("the Go cloud controller manager exited ({status}); its log ({path}):\n{log}")]
    Exited {
        /// Its exit status.
        status: ExitStatus,
        /// Its log file.
        path: PathBuf,
        /// The log's last lines.
        log: String,
    },
    /// It did not become the leader in time.
    #[error(
        "the Go cloud controller manager did not acquire its lease within {secs} s; its log ({path}):\n{log}"
    )]
    NotLeading {
        /// The time waited.
        secs: u64,
        /// Its log file.
        path: PathBuf,
        /// The log's last lines.
        log: String,
    },
}

/// The Go provider's cloud config (gcfg): a `[Global]` section that names the zone, VPC, subnet and cluster ID, so
/// that the provider never asks instance metadata (without `Zone` it does, even with the other three), and one
/// `[ServiceOverride]` per aws-sdk-go v1 endpoint ID: `ec2`, and `elasticloadbalancing`, which serves both the
/// ELB and the ELBv2 client. Our controller reads the same file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GoCloudConfig {
    /// `KubernetesClusterID`: the `kubernetes.io/cluster/<id>` tag key of the cluster's resources.
    pub cluster_id: String,
    /// `VPC`.
    pub vpc: String,
    /// `SubnetID`: the load balancers' fallback subnet.
    pub subnet_id: String,
    /// `Zone`, e.g. `us-east-1a`.
    pub zone: String,
    /// `Region` and `SigningRegion` of the overrides.
    pub region: String,
    /// `URL` of the overrides: moto, or a proxy in front of it.
    pub aws_endpoint: String,
    /// More `[Global]` lines (`key = value`, one a line), e.g. `DisableSecurityGroupIngress = true`.
    pub extra_global: String,
}

impl GoCloudConfig {
    /// A configuration for the test environment's moto and region, in `zone`.
    pub fn new(env: &TestEnv, cluster_id: &str, vpc: &str, subnet_id: &str, zone: &str) -> Self {
        Self {
            cluster_id: cluster_id.to_owned(),
            vpc: vpc.to_owned(),
            subnet_id: subnet_id.to_owned(),
            zone: zone.to_owned(),
            region: env.aws_region.clone(),
            aws_endpoint: env.aws_endpoint.clone(),
            extra_global: String::new(),
        }
    }

    /// The same configuration with every AWS service at `aws_endpoint` (e.g. a [`crate::FaultProxy`]).
    pub fn via(&self, aws_endpoint: &str) -> Self {
        Self {
            aws_endpoint: aws_endpoint.to_owned(),
            ..self.clone()
        }
    }

    /// The file's text.
    pub fn render(&self) -> String {
        let mut text = format!(
            "[Global]\nZone = {}\nVPC = {}\nSubnetID = {}\nKubernetesClusterID = {}\n",
            self.zone, self.vpc, self.subnet_id, self.cluster_id
        );
        for line in self.extra_global.lines().filter(|l| !l.trim().is_empty()) {
            text.push_str(line.trim());
            text.push('\n');
        }
        // Section names only need to differ; the provider matches on `Service`.
        for (n, service) in [(1, "ec2"), (2, "elasticloadbalancing")] {
            text.push_str(&format!(
                "\n[ServiceOverride \"{n}\"]\nService = {service}\nRegion = {region}\nURL = {url}\n\
                 SigningRegion = {region}\n",
                region = self.region,
                url = self.aws_endpoint,
            ));
        }
        text
    }

    /// Writes the file to `path`.
    pub fn write(&self, path: &Path) -> Result<(), GoCcmError> {
        std::fs::write(path, self.render()).map_err(|source| GoCcmError::Io {
            what: "write the cloud config",
            path: path.to_owned(),
            source,
        })
    }
}

/// Where and how to run the Go controller.
#[derive(Debug, Clone)]
pub struct GoCcmOptions {
    /// The directory of its cloud config (`go-ccm-<port>.conf`) and log (`go-ccm-<port>.log`).
    pub dir: PathBuf,
    /// `--leader-elect-resource-name`: unique per test, or ours' to hand the Lease over as in a real switch.
    pub lease: String,
    /// `--controllers`: by default the cloud-node and service controllers (route and cloud-node-lifecycle on
    /// request).
    pub controllers: Vec<String>,
    /// More flags, after the others (a later flag overrides an earlier one).
    pub extra_args: Vec<String>,
}

impl GoCcmOptions {
    /// The cloud-node and service controllers, `lease`, files in `dir`.
    pub fn new(dir: &Path, lease: &str) -> Self {
        Self {
            dir: dir.to_owned(),
            lease: lease.to_owned(),
            controllers: vec!["cloud-node".to_owned(), "service".to_owned()],
            extra_args: Vec::new(),
        }
    }
}

/// A running Go cloud controller manager, killed when dropped.
#[derive(Debug)]
pub struct GoCcm {
    child: Child,
    log: PathBuf,
    cloud_config: PathBuf,
    port: u16,
    lease: String,
}

impl GoCcm {
    /// The binary `CCM_TEST_GO_CCM` names.
    pub fn binary() -> Result<PathBuf, GoCcmError> {
        let path: PathBuf = std::env::var_os(GO_CCM_VAR)
            .filter(|v| !v.is_empty())
            .ok_or(GoCcmError::Missing)?
            .into();
        if is_executable(&path) {
            Ok(path)
        } else {
            Err(GoCcmError::NotExecutable { path })
        }
    }

    /// Starts the Go controller for `env` with `config` (written into `options.dir`) and `options`.
    pub fn start(env: &TestEnv, config: &GoCloudConfig, options: &GoCcmOptions) -> Result<Self, GoCcmError> {
        let binary = Self::binary()?;
        let port = free_port().map_err(|source| GoCcmError::Io {
            what: "find a free port on",
            path: "127.0.0.1".into(),
            source,
        })?;
        let cloud_config = options.dir.join(format!("go-ccm-{port}.conf"));
        config.write(&cloud_config)?;
        let log = options.dir.join(format!("go-ccm-{port}.log"));
        let io = |what, path: &Path| {
            let path = path.to_owned();
            move |source| GoCcmError::Io { what, path, source }
        };
        let out = File::create(&log).map_err(io("create the log", &log))?;
        let err = out.try_clone().map_err(io("share the log", &log))?;
        let mut args = vec![
            "--cloud-provider=aws".to_owned(),
            format!("--cloud-config={}", cloud_config.display()),
            format!("--kubeconfig={}", env.kubeconfig.display()),
            format!("--leader-elect-resource-name={}", options.lease),
            "--bind-address=127.0.0.1".to_owned(),
            format!("--secure-port={port}"),
            // /metrics without a token: its cloudprovider_aws_api_* series are what a comparison reads.
            "--authorization-always-allow-paths=/healthz,/metrics".to_owned(),
            format!("--controllers={}", options.controllers.join(",")),
            "--v=2".to_owned(),
        ];
        args.extend(options.extra_args.iter().cloned());
        let child = Command::new(&binary)
            .args(&args)
            // moto accepts any static credentials; the region is the environment's. Nothing may reach IMDS.
            .env("AWS_ACCESS_KEY_ID", "testing")
            .env("AWS_SECRET_ACCESS_KEY", "testing")
            .env("AWS_REGION", &config.region)
            .env("AWS_EC2_METADATA_DISABLED", "true")
            .env_remove("AWS_PROFILE")
            .env_remove("AWS_SESSION_TOKEN")
            .stdout(out)
            .stderr(err)
            .spawn()
            .map_err(io("start", &binary))?;
        Ok(Self {
            child,
            log,
            cloud_config,
            port,
            lease: options.lease.clone(),
        })
    }

    /// Waits until it holds its Lease (its log says so), failing at once, with its log, if it exits.
    pub async fn wait_leading(&mut self, timeout: Duration) -> Result<(), GoCcmError> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            self.check_running()?;
            if self.log_text().contains("successfully acquired lease") {
                return Ok(());
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(GoCcmError::NotLeading {
                    secs: timeout.as_secs(),
                    path: self.log.clone(),
                    log: self.log_tail(),
                });
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// `Err` with the log when the process has exited.
    pub fn check_running(&mut self) -> Result<(), GoCcmError> {
        match self.child.try_wait() {
            Ok(Some(status)) => Err(GoCcmError::Exited {
                status,
                path: self.log.clone(),
                log: self.log_tail(),
            }),
            _ => Ok(()),
        }
    }

    /// SIGTERM, then the exit status (SIGKILL after 20 s). 1.20.2 does not release its Lease on the way out: the
    /// next leader waits until it expires (`--leader-elect-lease-duration`, 15 s).
    pub async fn terminate(&mut self) -> Result<ExitStatus, GoCcmError> {
        let pid = self.child.id().to_string();
        let _ = Command::new("kill").args(["-TERM", &pid]).status();
        for _ in 0..200 {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Ok(status);
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let _ = self.child.kill();
        self.child.wait().map_err(|source| GoCcmError::Io {
            what: "wait for",
            path: self.log.clone(),
            source,
        })
    }

    /// The whole log so far.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The last 60 lines of the log, without the start-up `FLAG:` dump.
    pub fn log_tail(&self) -> String {
        let text = self.log_text();
        let lines: Vec<&str> = text.lines().filter(|l| !l.contains("] FLAG: ")).collect();
        lines[lines.len().saturating_sub(60)..].join("\n")
    }

    /// The log file.
    pub fn log_path(&self) -> &Path {
        &self.log
    }

    /// The cloud config it was started with.
    pub fn cloud_config(&self) -> &Path {
        &self.cloud_config
    }

    /// Its process ID (for [`crate::process::usage`]).
    pub fn id(&self) -> u32 {
        self.child.id()
    }

    /// Its `--secure-port` on 127.0.0.1 (`/healthz` and `/metrics` need no token).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Its `--leader-elect-resource-name` (in `kube-system`).
    pub fn lease(&self) -> &str {
        &self.lease
    }
}

impl Drop for GoCcm {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// A free TCP port on 127.0.0.1, chosen by the kernel.
fn free_port() -> std::io::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> GoCloudConfig {
        GoCloudConfig {
            cluster_id: "c1".to_owned(),
            vpc: "vpc-1".to_owned(),
            subnet_id: "subnet-1".to_owned(),
            zone: "us-east-1a".to_owned(),
            region: "us-east-1".to_owned(),
            aws_endpoint: "http://127.0.0.1:5000".to_owned(),
            extra_global: "DisableSecurityGroupIngress = true\n".to_owned(),
        }
    }

    #[test]
    fn the_config_names_everything_that_spares_a_metadata_lookup() {
        let text = config().via("http://127.0.0.1:6000").render();
        let expected = "[Global]\nZone = us-east-1a\nVPC = vpc-1\nSubnetID = subnet-1\nKubernetesClusterID = c1\n\
            DisableSecurityGroupIngress = true\n\
            \n[ServiceOverride \"1\"]\nService = ec2\nRegion = us-east-1\nURL = http://127.0.0.1:6000\n\
            SigningRegion = us-east-1\n\
            \n[ServiceOverride \"2\"]\nService = elasticloadbalancing\nRegion = us-east-1\n\
            URL = http://127.0.0.1:6000\nSigningRegion = us-east-1\n";
        assert_eq!(text, expected);
    }

    #[test]
    fn a_missing_binary_names_the_variable() {
        let message = GoCcmError::Missing.to_string();
        assert!(message.starts_with("CCM_TEST_GO_CCM is not set"), "{message}");
        let message = GoCcmError::NotExecutable {
            path: "/nonexistent".into(),
        }
        .to_string();
        assert!(message.contains("CCM_TEST_GO_CCM=/nonexistent"), "{message}");
    }
}
