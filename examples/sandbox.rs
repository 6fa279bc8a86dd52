//! `sandbox [NODES]`: the CCM at work on a local cluster. Seeds moto with a VPC, a control-plane instance and NODES
//! worker instances (default 4) tagged for a cluster, registers the workers as Nodes the way kubelets with
//! `--cloud-provider=external` do (tainted uninitialized, half named by private DNS name, half by instance ID),
//! runs `aws-cloud-controller-manager` (next to this binary) with an IMDS emulator and a cloud config pointing at
//! moto, and prints the Nodes before and after and the CCM's peak memory. Needs the environment of
//! `scripts/testenv.sh` (`scripts/sandbox.sh` provides it). `sandbox 1000` is the scale run.

use std::{process::Stdio, time::Duration};

use anyhow::Context;
use ccm_testing::{
    ImdsEmulator, TestEnv, ec2,
    nodes::{self, UNINITIALIZED, is_initialized},
    unique_name,
};
use k8s_openapi::api::core::v1::Node;
use kube::{
    Api,
    api::{DeleteParams, ListParams, PostParams},
};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let arg = std::env::args().nth(1);
    let workers: i32 = arg
        .map_or(Ok(4), |n| n.parse())
        .context("usage: sandbox [NODES]")?;
    let env = TestEnv::from_env()?;
    let raw = ec2::client(&env).await;
    let cluster = unique_name("sandbox");
    let key = format!("kubernetes.io/cluster/{cluster}");
    let network = ec2::network(&raw, ec2::octet_for(&cluster)).await?;
    let control_plane = ec2::launch(&raw, &network, 1, &[(&key, "owned")])
        .await?
        .remove(0);
    let mut instances = Vec::new();
    for first in (0..workers).step_by(250) {
        let count = (workers - first).min(250);
        instances.extend(ec2::launch(&raw, &network, count, &[(&key, "owned")]).await?);
    }
    println!(
        "moto: VPC {} with {} instances tagged {key}=owned",
        network.vpc_id,
        workers + 1
    );

    let imds = ImdsEmulator::start(&control_plane.id, "us-east-1a", &env.aws_region).await?;
    let dir = std::env::temp_dir().join(&cluster);
    std::fs::create_dir_all(&dir)?;
    let config = ec2::cloud_config(&env.aws_region, &env.aws_endpoint, &imds.endpoint(), "");
    std::fs::write(dir.join("cloud.conf"), config)?;

    let api: Api<Node> = Api::all(env.kube_client().await?);
    for (k, instance) in instances.iter().enumerate() {
        let name = if k % 2 == 0 {
            &instance.private_dns
        } else {
            &instance.id
        };
        let node: Node = serde_json::from_value(serde_json::json!({
            "metadata": { "name": name, "labels": { "sandbox": cluster } },
            "spec": { "taints": [{ "key": UNINITIALIZED, "value": "true", "effect": "NoSchedule" }] },
        }))?;
        api.create(&PostParams::default(), &node).await?;
    }
    let lp = ListParams::default().labels(&format!("sandbox={cluster}"));
    println!("\nbefore:");
    show(&api.list(&lp).await?.items);

    let ccm_path = std::env::current_exe()?.with_file_name("aws-cloud-controller-manager");
    let log = dir.join("ccm.log");
    let mut ccm = std::process::Command::new(&ccm_path)
        .args([
            "--cloud-provider=aws",
            "--v=2",
            "--secure-port=0",
            "--leader-elect=false",
        ])
        .arg(format!("--cloud-config={}", dir.join("cloud.conf").display()))
        .arg(format!("--kubeconfig={}", env.kubeconfig.display()))
        .env("AWS_ACCESS_KEY_ID", "sandbox")
        .env("AWS_SECRET_ACCESS_KEY", "sandbox")
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&log)?)
        .stderr(std::fs::File::create(dir.join("ccm.err"))?)
        .spawn()
        .with_context(|| format!("starting {} (build it first)", ccm_path.display()))?;
    println!("\nstarted aws-cloud-controller-manager (log: {})", log.display());

    let started = tokio::time::Instant::now();
    let mut after = Vec::new();
    for _ in 0..150 + workers {
        after = api.list(&lp).await?.items;
        if after.iter().all(is_initialized) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    println!("\nafter ({:.1} s):", started.elapsed().as_secs_f64());
    show(&after);
    let status = std::fs::read_to_string(format!("/proc/{}/status", ccm.id())).unwrap_or_default();
    let kib = |key: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .unwrap_or("?")
            .trim()
            .to_owned()
    };
    println!(
        "\naws-cloud-controller-manager memory: peak {} (VmHWM), now {}",
        kib("VmHWM:"),
        kib("VmRSS:")
    );
    std::process::Command::new("kill")
        .args(["-TERM", &ccm.id().to_string()])
        .status()?;
    println!("aws-cloud-controller-manager stopped ({})", ccm.wait()?);
    api.delete_collection(&DeleteParams::default(), &lp).await?;
    anyhow::ensure!(
        after.iter().all(is_initialized),
        "nodes left uninitialized; see {}",
        log.display()
    );
    Ok(())
}

/// One line per Node; a count beyond 10 Nodes.
fn show(items: &[Node]) {
    if items.len() > 10 {
        let done = items.iter().filter(|n| is_initialized(n)).count();
        return println!("  {} Nodes, {done} initialized", items.len());
    }
    for n in items {
        println!("  {}", nodes::summary(n));
    }
}
