//! The sandbox's cluster in moto and the apiserver: a VPC with a public ELB subnet and a route table tagged for
//! the cluster, a control-plane instance named by an IMDS emulator, worker instances registered as Nodes the way
//! kubelets with `--cloud-provider=external` do, and the `aws-cloud-controller-manager` process with its memory
//! and its AWS calls.

use std::{collections::BTreeMap, path::PathBuf, process::Stdio};

use anyhow::Context;
use ccm_testing::{ImdsEmulator, TestEnv, ec2, metrics, nodes::UNINITIALIZED, unique_name, world::World};
use k8s_openapi::api::core::v1::Node;
use kube::{
    Api,
    api::{ListParams, PostParams},
};

/// Pod CIDRs come from this range (`--cluster-cidr`), a /24 per Node.
pub const CLUSTER_CIDR: &str = "10.244.0.0/16";

pub struct Cluster {
    pub id: String,
    pub key: String,
    pub workers: Vec<ec2::Launched>,
    pub route_table: String,
    pub network: World,
    pub nodes: Api<Node>,
    pub dir: PathBuf,
    /// The cloud config of an operator outside AWS (Region, VPC, SubnetID, KubernetesClusterID), for the tools.
    pub external_config: PathBuf,
    _imds: ImdsEmulator,
}

impl Cluster {
    /// Seeds moto with the VPC and `workers` + 1 instances tagged for a fresh cluster, and writes the configs.
    pub async fn create(env: &TestEnv, workers: i32) -> anyhow::Result<Self> {
        let raw = ec2::client(env).await;
        let id = unique_name("sandbox");
        let key = format!("kubernetes.io/cluster/{id}");
        let owned = [(key.as_str(), "owned")];
        let network = World::builder(ec2::octet_for(&id))
            .subnet("us-east-1a", &[owned[0], ("kubernetes.io/role/elb", "1")])
            .internet_gateway()
            .build(&raw)
            .await?;
        let route_table = network.route_table(&owned).await?;
        let control_plane = network.launch(1, &owned).await?.remove(0);
        let mut launched = Vec::new();
        for first in (0..workers).step_by(250) {
            launched.extend(network.launch((workers - first).min(250), &owned).await?);
        }
        println!(
            "moto: VPC {} with {} instances tagged {key}=owned, a public ELB subnet, route table {route_table}",
            network.vpc,
            workers + 1
        );
        let imds = ImdsEmulator::start(&control_plane.id, "us-east-1a", &env.aws_region).await?;
        let dir = std::env::temp_dir().join(&id);
        std::fs::create_dir_all(&dir)?;
        let config =
            |global: &str| ec2::cloud_config(&env.aws_region, &env.aws_endpoint, &imds.endpoint(), global);
        std::fs::write(dir.join("cloud.conf"), config(""))?;
        let external = format!(
            "Region = {}\nVPC = {}\nSubnetID = {}\nKubernetesClusterID = {id}",
            env.aws_region,
            network.vpc,
            network.subnet()
        );
        let external_config = dir.join("external.conf");
        std::fs::write(&external_config, config(&external))?;
        Ok(Self {
            nodes: Api::all(env.kube_client().await?),
            id,
            key,
            workers: launched,
            route_table,
            network,
            dir,
            external_config,
            _imds: imds,
        })
    }

    /// Registers every worker as a tainted Node (half named by private DNS name, half by instance ID; all by
    /// private DNS name when `dns_names`, as the Go controller needs), with pod CIDR `10.244.<k>.0/24` when
    /// `pod_cidrs`.
    pub async fn register_nodes(&self, pod_cidrs: bool, dns_names: bool) -> anyhow::Result<()> {
        for (k, instance) in self.workers.iter().enumerate() {
            let name = if k % 2 == 0 || dns_names {
                &instance.private_dns
            } else {
                &instance.id
            };
            let cidr = pod_cidrs.then(|| format!("10.244.{k}.0/24"));
            let node: Node = serde_json::from_value(serde_json::json!({
                "metadata": { "name": name, "labels": { "sandbox": self.id } },
                "spec": {
                    "podCIDR": cidr,
                    "taints": [{ "key": UNINITIALIZED, "value": "true", "effect": "NoSchedule" }],
                },
            }))?;
            self.nodes.create(&PostParams::default(), &node).await?;
        }
        Ok(())
    }

    pub fn node_selector(&self) -> ListParams {
        ListParams::default().labels(&format!("sandbox={}", self.id))
    }

    /// The instance routes of the cluster's route table, one line each.
    pub async fn routes(&self) -> anyhow::Result<Vec<String>> {
        let routes = self.network.instance_routes(&self.route_table).await?;
        Ok(routes
            .iter()
            .map(|(cidr, i)| format!("{cidr:<15} -> {i}"))
            .collect())
    }

    /// Marks every Node of the cluster Ready, as its kubelet would (the Go controller's service controller
    /// leaves other Nodes out).
    pub async fn set_ready(&self) -> anyhow::Result<()> {
        let ready =
            serde_json::json!({ "status": { "conditions": [{ "type": "Ready", "status": "True" }] } });
        for node in self.nodes.list(&self.node_selector()).await? {
            let name = node.metadata.name.unwrap_or_default();
            let patch = kube::api::Patch::Strategic(&ready);
            self.nodes
                .patch_status(&name, &Default::default(), &patch)
                .await?;
        }
        Ok(())
    }

    /// Starts `aws-cloud-controller-manager` (next to this binary) serving /metrics on a free port.
    pub fn start_ccm(&self, extra: &[String]) -> anyhow::Result<Ccm> {
        self.start_ccm_with(&self.dir.join("cloud.conf"), extra)
    }

    /// As [`Cluster::start_ccm`] with the cloud config `config`.
    pub fn start_ccm_with(&self, config: &std::path::Path, extra: &[String]) -> anyhow::Result<Ccm> {
        let path = std::env::current_exe()?.with_file_name("aws-cloud-controller-manager");
        let port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        let log = self.dir.join("ccm.log");
        let env = TestEnv::from_env()?;
        let child = std::process::Command::new(&path)
            .args([
                "--cloud-provider=aws",
                "--v=2",
                "--leader-elect=false",
                "--bind-address=127.0.0.1",
            ])
            .arg(format!("--secure-port={port}"))
            .arg("--authorization-always-allow-paths=/healthz,/metrics")
            .arg(format!("--cloud-config={}", config.display()))
            .arg(format!("--kubeconfig={}", env.kubeconfig.display()))
            .args(extra)
            .env("AWS_ACCESS_KEY_ID", "sandbox")
            .env("AWS_SECRET_ACCESS_KEY", "sandbox")
            .env("AWS_EC2_METADATA_DISABLED", "true")
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&log)?)
            .stderr(std::fs::File::create(self.dir.join("ccm.err"))?)
            .spawn()
            .with_context(|| format!("starting {} (build it first)", path.display()))?;
        let flags: String = extra.iter().map(|f| format!(" {f}")).collect();
        println!(
            "\nstarted aws-cloud-controller-manager{flags} (log: {})",
            log.display()
        );
        Ok(Ccm { child, port, log })
    }

    /// Runs the tool `bin` (next to this binary) with the external cloud config and `args`.
    pub fn tool(&self, bin: &str, args: &[String]) -> anyhow::Result<std::process::Output> {
        let path = std::env::current_exe()?.with_file_name(bin);
        std::process::Command::new(&path)
            .arg(format!("--cloud-config={}", self.external_config.display()))
            .args(args)
            .env("AWS_ACCESS_KEY_ID", "sandbox")
            .env("AWS_SECRET_ACCESS_KEY", "sandbox")
            .env("AWS_EC2_METADATA_DISABLED", "true")
            .output()
            .with_context(|| format!("running {} (build it first)", path.display()))
    }
}

pub struct Ccm {
    child: std::process::Child,
    pub port: u16,
    pub log: PathBuf,
}

impl Ccm {
    /// Its process ID.
    pub fn id(&self) -> u32 {
        self.child.id()
    }

    /// Peak and current resident memory (`VmHWM`, `VmRSS` of /proc/<pid>/status).
    pub fn memory(&self) -> (String, String) {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap_or_default();
        let kib = |key: &str| {
            let line = status.lines().find_map(|l| l.strip_prefix(key));
            line.unwrap_or("?").trim().to_owned()
        };
        (kib("VmHWM:"), kib("VmRSS:"))
    }

    /// AWS requests so far per operation, from /metrics.
    pub async fn aws_calls(&self) -> anyhow::Result<BTreeMap<String, f64>> {
        Ok(metrics::requests_by_operation(&metrics::scrape(self.port).await?))
    }

    /// SIGTERM and the exit status.
    pub fn stop(mut self) -> anyhow::Result<std::process::ExitStatus> {
        std::process::Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()?;
        Ok(self.child.wait()?)
    }
}
