//! End to end: `custom-provider`, a distribution with its own provider picked by `--cloud-provider` through the
//! registry, against the real kube-apiserver. A Node of one of its machines gets the provider ID, addresses and
//! labels from the in-memory cloud and loses the uninitialized taint; a Node it does not know is left alone; an
//! unknown `--cloud-provider` and a bad cloud config line are refused with errors naming what is accepted.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::too_many_lines)]

use std::{path::PathBuf, process::Command, time::Duration};

use ccm_testing::{TestEnv, unique_name};
use k8s_openapi::api::core::v1::Node;
use kube::{
    Api,
    api::{DeleteParams, PostParams},
};
use serde_json::json;

const UNINITIALIZED: &str = "node.cloudprovider.kubernetes.io/uninitialized";

fn binary() -> Command {
    Command::new(env!("CARGO_BIN_EXE_custom-provider"))
}

fn config_file(content: &str) -> PathBuf {
    let path = std::env::temp_dir().join(format!("{}.conf", unique_name("custom-provider")));
    std::fs::write(&path, content).unwrap();
    path
}

/// Kills the binary when the test ends, passed or failed.
struct Running(std::process::Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn uninitialized_node(name: &str) -> Node {
    serde_json::from_value(json!({
        "metadata": { "name": name },
        "spec": { "taints": [{ "key": UNINITIALIZED, "value": "true", "effect": "NoSchedule" }] },
    }))
    .unwrap()
}

#[tokio::test]
async fn e2e_custom_provider_initializes_its_nodes_only() {
    let env = TestEnv::get();
    let nodes: Api<Node> = Api::all(env.kube_client().await.unwrap());
    let (ours, foreign) = (unique_name("mem-node"), unique_name("other-node"));
    let config = config_file(&format!("# node zone type ip\n{ours} zone-a m1.small 10.9.0.7\n"));
    for name in [&ours, &foreign] {
        nodes
            .create(&PostParams::default(), &uninitialized_node(name))
            .await
            .unwrap();
    }
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    // Only the cloud-node controller: the shared apiserver holds other tests' Nodes, which node-lifecycle
    // would judge by this provider's machines.
    let mut child = Running(
        binary()
            .args([
                "--cloud-provider=in-memory".to_owned(),
                format!("--cloud-config={}", config.display()),
                format!("--kubeconfig={}", env.kubeconfig.display()),
                "--controllers=cloud-node".to_owned(),
                format!("--leader-elect-resource-name={}", unique_name("custom-provider")),
                "--bind-address=127.0.0.1".to_owned(),
                format!("--secure-port={port}"),
            ])
            .spawn()
            .unwrap(),
    );

    let mut initialized = None;
    for _ in 0..150 {
        let node = nodes.get(&ours).await.unwrap();
        let spec = node.spec.clone().unwrap_or_default();
        // The addresses are written right after the taint goes (a second write, as upstream): wait for both.
        let addressed = node
            .status
            .as_ref()
            .and_then(|s| s.addresses.as_ref())
            .is_some_and(|a| !a.is_empty());
        if addressed
            && !spec
                .taints
                .unwrap_or_default()
                .iter()
                .any(|t| t.key == UNINITIALIZED)
        {
            initialized = Some(node);
            break;
        }
        assert!(
            child.0.try_wait().unwrap().is_none(),
            "custom-provider exited early"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let foreign_node = nodes.get(&foreign).await.unwrap();
    drop(child);
    for name in [&ours, &foreign] {
        nodes.delete(name, &DeleteParams::default()).await.unwrap();
    }

    let node = initialized
        .expect("the in-memory machine's Node lost its uninitialized taint and got addresses within 30 s");
    assert_eq!(
        node.spec.unwrap().provider_id.as_deref(),
        Some(format!("in-memory://{ours}").as_str())
    );
    let labels = node.metadata.labels.unwrap_or_default();
    assert_eq!(
        labels.get("node.kubernetes.io/instance-type").map(String::as_str),
        Some("m1.small")
    );
    assert_eq!(
        labels.get("topology.kubernetes.io/zone").map(String::as_str),
        Some("zone-a")
    );
    assert_eq!(
        labels.get("topology.kubernetes.io/region").map(String::as_str),
        Some("memory")
    );
    let addresses = node.status.unwrap().addresses.unwrap_or_default();
    assert!(
        addresses
            .iter()
            .any(|a| a.type_ == "InternalIP" && a.address == "10.9.0.7"),
        "{addresses:?}"
    );
    // A Node of no known machine keeps its taint and gets no provider ID.
    let spec = foreign_node.spec.unwrap();
    assert!(spec.provider_id.is_none(), "{spec:?}");
    assert!(
        spec.taints
            .unwrap_or_default()
            .iter()
            .any(|t| t.key == UNINITIALIZED)
    );
}

#[test]
fn e2e_custom_provider_refuses_an_unknown_provider_naming_the_known_ones() {
    let env = TestEnv::get();
    let output = binary()
        .args([
            "--cloud-provider=acme".to_owned(),
            format!("--kubeconfig={}", env.kubeconfig.display()),
        ])
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains(r#"unknown cloud provider "acme": this binary knows in-memory"#),
        "{stderr}"
    );
}

#[test]
fn e2e_custom_provider_refuses_a_bad_cloud_config_line() {
    let env = TestEnv::get();
    let config = config_file("node-1 zone-a m1.small\n");
    let output = binary()
        .args([
            "--cloud-provider=in-memory".to_owned(),
            format!("--cloud-config={}", config.display()),
            format!("--kubeconfig={}", env.kubeconfig.display()),
        ])
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("cloud config line 1: expected `<node> <zone> <instance-type> <internal-ip>`"),
        "{stderr}"
    );
}
