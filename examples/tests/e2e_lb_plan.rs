//! End to end: `lb-plan` prints the plan for a Service manifest against moto, for a control plane outside AWS
//! (Region, VPC, SubnetID and KubernetesClusterID in the cloud config, no IMDS), for a Classic ELB and an NLB,
//! and writes nothing.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::too_many_lines)]

mod common;

use std::{
    path::Path,
    process::{Command, Output},
};

use ccm_testing::TestEnv;
use common::{
    World,
    lb::{Elb, lb_name, public_subnet},
};
use serde_json::json;

/// Runs `lb-plan` for a Service manifest and a NodeList file.
fn lb_plan(config: &Path, service: &Path, nodes: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_lb-plan"))
        .arg(format!("--cloud-config={}", config.display()))
        .arg(format!("--service={}", service.display()))
        .arg(format!("--nodes={}", nodes.display()))
        .env("AWS_ACCESS_KEY_ID", "testing")
        .env("AWS_SECRET_ACCESS_KEY", "testing")
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .output()
        .unwrap()
}

#[tokio::test]
async fn e2e_lb_plan_prints_the_creation_and_changes_nothing() {
    let env = TestEnv::get();
    let world = World::new("").await;
    public_subnet(&world).await;
    let launched = world.launch(1).await;
    let external = format!(
        "Region = {}\nVPC = {}\nSubnetID = {}\nKubernetesClusterID = {}\n",
        env.aws_region,
        world.network.vpc,
        world.network.subnet(),
        world.cluster_id
    );
    let external_world = World {
        extra_config: external,
        ..world
    };
    let config = external_world.config_via("external.conf", &env.aws_endpoint);
    let uid = "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0";
    let service = json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": { "name": "web", "namespace": "default", "uid": uid },
        "spec": { "type": "LoadBalancer", "ports": [{ "port": 80, "protocol": "TCP", "nodePort": 30080 }] },
    });
    let nodes = json!({ "apiVersion": "v1", "kind": "NodeList", "items": [{
        "metadata": { "name": launched[0].id },
        "spec": { "providerID": format!("aws:///us-east-1a/{}", launched[0].id) },
    }] });
    let dir = &external_world.dir;
    std::fs::write(dir.join("svc.json"), service.to_string()).unwrap();
    std::fs::write(dir.join("nodes.json"), nodes.to_string()).unwrap();

    let output = lb_plan(&config, &dir.join("svc.json"), &dir.join("nodes.json"));
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stdout}\n{stderr}");
    let lb = lb_name(uid);
    assert!(
        stdout.starts_with(&format!("Service default/web -> Classic ELB {lb}")),
        "{stdout}"
    );
    for expected in [
        "create_load_balancer",
        "create_security_group",
        "TCP:30080",
        &launched[0].id,
    ] {
        assert!(stdout.contains(expected), "{expected} not in:\n{stdout}");
    }
    let elb = Elb(aws_sdk_elasticloadbalancing::Client::new(&env.aws_config().await));
    assert!(elb.describe(&lb).await.is_none(), "a dry run creates nothing");
    let groups = common::lb::managed_groups(&external_world, &lb).await;
    assert!(groups.is_empty(), "a dry run creates no group: {groups:?}");

    // An NLB Service: its listener, target group and targets planned, nothing created.
    let nlb_uid = "1f2e3d4c-5b6a-7988-9796-b5c4d3e2f1a0";
    let nlb_service = json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": { "name": "edge", "namespace": "default", "uid": nlb_uid,
                      "annotations": { "service.beta.kubernetes.io/aws-load-balancer-type": "nlb" } },
        "spec": { "type": "LoadBalancer", "ports": [{ "port": 53, "protocol": "UDP", "nodePort": 30053 }] },
    });
    std::fs::write(dir.join("nlb.json"), nlb_service.to_string()).unwrap();
    let output = lb_plan(&config, &dir.join("nlb.json"), &dir.join("nodes.json"));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let nlb_name = lb_name(nlb_uid);
    assert!(
        stdout.starts_with(&format!("Service default/edge -> NLB {nlb_name}")),
        "{stdout}"
    );
    for expected in [
        "create_target_group",
        "create_load_balancer",
        "create_listener",
        "\"UDP\"",
        "30053",
        &launched[0].id,
    ] {
        assert!(stdout.contains(expected), "{expected} not in:\n{stdout}");
    }
    let nlb = common::nlb::Nlb::connect().await;
    assert!(
        nlb.describe(&nlb_name).await.is_none(),
        "a dry run creates no NLB"
    );
}
