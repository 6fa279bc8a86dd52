//! `testenv-smoke`: connects to the running test environment (`scripts/testenv.sh`) and prints what it reached:
//! the apiserver's version and objects, and moto. The quickest check that an environment is usable; it fails
//! with a message naming what is missing.

use anyhow::Context;
use ccm_testing::TestEnv;
use k8s_openapi::api::core::v1::{Namespace, Node};
use kube::{Api, ResourceExt, api::ListParams};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let env = TestEnv::from_env()?;
    let client = env.kube_client().await?;
    let version = client.apiserver_version().await.context("apiserver /version")?;
    println!("kube-apiserver {} at {}", version.git_version, env.kube_apiserver);
    let namespaces = Api::<Namespace>::all(client.clone())
        .list(&ListParams::default())
        .await?;
    let names: Vec<_> = namespaces.items.iter().map(ResourceExt::name_any).collect();
    println!("  namespaces: {}", names.join(", "));
    let nodes = Api::<Node>::all(client).list(&ListParams::default()).await?;
    println!("  nodes: {}", nodes.items.len());
    env.aws_reachable().await.context("moto")?;
    println!(
        "moto (AWS emulator) at {}, region {}",
        env.aws_endpoint, env.aws_region
    );
    Ok(())
}
