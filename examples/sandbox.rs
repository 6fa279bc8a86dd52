//! `sandbox`: the CCM at work on a local cluster. Seeds moto with a VPC, a control-plane instance and worker
//! instances tagged for a cluster, registers the workers as Nodes the way kubelets with `--cloud-provider=external`
//! do (tainted uninitialized, half named by private DNS name, half by instance ID), runs
//! `aws-cloud-controller-manager` (next to this binary) with an IMDS emulator and a cloud config pointing at moto,
//! and prints each Node before and after. Needs the environment of `scripts/testenv.sh` (`scripts/sandbox.sh`
//! provides it).

use std::{process::Stdio, time::Duration};

use anyhow::Context;
use ccm_testing::{ImdsEmulator, TestEnv, ec2, unique_name};
use k8s_openapi::api::core::v1::Node;
use kube::{
    Api,
    api::{DeleteParams, ListParams, PostParams},
};

const WORKERS: i32 = 4;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let env = TestEnv::from_env()?;
    let raw = ec2::client(&env).await;
    let cluster = unique_name("sandbox");
    let key = format!("kubernetes.io/cluster/{cluster}");
    let network = ec2::network(&raw, ec2::octet_for(&cluster)).await?;
    let control_plane = ec2::launch(&raw, &network, 1, &[(&key, "owned")])
        .await?
        .remove(0);
    let workers = ec2::launch(&raw, &network, WORKERS, &[(&key, "owned")]).await?;
    println!(
        "moto: VPC {} with {} instances tagged {key}=owned",
        network.vpc_id,
        WORKERS + 1
    );

    let imds = ImdsEmulator::start(&control_plane.id, "us-east-1a", &env.aws_region).await?;
    let dir = std::env::temp_dir().join(&cluster);
    std::fs::create_dir_all(&dir)?;
    let mut config = String::from("[Global]\n");
    for service in ["EC2", "Elastic Load Balancing", "Elastic Load Balancing v2"] {
        config += &format!(
            "[ServiceOverride \"{service}\"]\nService = {service}\nRegion = {r}\nURL = {u}\nSigningRegion = {r}\n",
            r = env.aws_region,
            u = env.aws_endpoint
        );
    }
    config += &format!(
        "[ServiceOverride \"imds\"]\nService = ec2imds\nRegion = {r}\nURL = {u}\nSigningRegion = {r}\n",
        r = env.aws_region,
        u = imds.endpoint()
    );
    std::fs::write(dir.join("cloud.conf"), config)?;

    let nodes: Api<Node> = Api::all(env.kube_client().await?);
    let names: Vec<String> = workers
        .iter()
        .enumerate()
        .map(|(k, w)| {
            if k % 2 == 0 {
                w.private_dns.clone()
            } else {
                w.id.clone()
            }
        })
        .collect();
    for name in &names {
        let node: Node = serde_json::from_value(serde_json::json!({
            "metadata": { "name": name, "labels": { "sandbox": cluster } },
            "spec": { "taints": [{ "key": "node.cloudprovider.kubernetes.io/uninitialized", "value": "true", "effect": "NoSchedule" }] },
        }))?;
        nodes.create(&PostParams::default(), &node).await?;
    }
    println!("\nbefore:");
    show(&nodes, &cluster).await?;

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

    let lp = ListParams::default().labels(&format!("sandbox={cluster}"));
    let mut done = false;
    for _ in 0..150 {
        let list = nodes.list(&lp).await?;
        done = list
            .items
            .iter()
            .all(|n| n.spec.as_ref().and_then(|s| s.provider_id.as_ref()).is_some());
        if done {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    println!("\nafter:");
    show(&nodes, &cluster).await?;
    std::process::Command::new("kill")
        .args(["-TERM", &ccm.id().to_string()])
        .status()?;
    let status = ccm.wait()?;
    println!("\naws-cloud-controller-manager stopped ({status})");
    nodes.delete_collection(&DeleteParams::default(), &lp).await?;
    anyhow::ensure!(
        done,
        "the nodes were not initialized within 30 s; see {}",
        log.display()
    );
    Ok(())
}

/// One line per Node: name, provider ID, zone, instance type, internal IP, taints.
async fn show(nodes: &Api<Node>, cluster: &str) -> anyhow::Result<()> {
    let lp = ListParams::default().labels(&format!("sandbox={cluster}"));
    for n in nodes.list(&lp).await?.items {
        let label = |k: &str| {
            n.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(k))
                .cloned()
                .unwrap_or("-".into())
        };
        let spec = n.spec.clone().unwrap_or_default();
        let ip = n
            .status
            .as_ref()
            .and_then(|s| s.addresses.as_ref())
            .and_then(|a| {
                a.iter()
                    .find(|a| a.type_ == "InternalIP")
                    .map(|a| a.address.clone())
            });
        let taints: Vec<String> = spec
            .taints
            .unwrap_or_default()
            .into_iter()
            .map(|t| t.key)
            .collect();
        println!(
            "  {:<30} providerID={:<36} zone={:<11} type={:<9} InternalIP={:<12} taints={taints:?}",
            n.metadata.name.unwrap_or_default(),
            spec.provider_id.unwrap_or("-".into()),
            label("topology.kubernetes.io/zone"),
            label("node.kubernetes.io/instance-type"),
            ip.unwrap_or("-".into()),
        );
    }
    Ok(())
}
