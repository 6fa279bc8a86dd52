//! End to end: `lb-plan` prints the plan for a Service manifest against moto, for a control plane outside AWS
//! (Region, VPC, SubnetID and KubernetesClusterID in the cloud config, no IMDS), for a Classic ELB and an NLB,
//! and writes nothing. Then as an operator runs it against a cluster: the Service by `NAMESPACE/NAME` (or `NAME`
//! and `-n`), the cloud config from a ConfigMap as the Helm chart renders it, the Nodes from the apiserver, a
//! YAML manifest; a warning when it plans without Nodes (none, or none of the cluster's); errors naming the
//! missing file, Service or ConfigMap.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::too_many_lines)]

mod common;

use std::{path::Path, process::Output};

use ccm_testing::{TestEnv, unique_name};
use common::{
    World,
    lb::{Elb, lb_name, public_subnet},
};
use serde_json::json;

/// Runs `lb-plan` for a Service manifest and a NodeList file.
fn lb_plan(config: &Path, service: &Path, nodes: &Path) -> Output {
    let args = [
        format!("--cloud-config={}", config.display()),
        format!("--service={}", service.display()),
        format!("--nodes={}", nodes.display()),
    ];
    run(&args)
}

/// Runs `lb-plan` with `args`, the AWS credentials of any machine off EC2, and no kubeconfig but the arguments'.
fn run<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> Output {
    common::off_ec2(env!("CARGO_BIN_EXE_lb-plan"))
        .args(args)
        .env_remove("KUBECONFIG")
        .output()
        .unwrap()
}

/// The world's cloud config for a control plane outside AWS.
async fn external_world() -> (World, std::path::PathBuf) {
    let world = World::new("").await;
    public_subnet(&world).await;
    world.outside_aws()
}

#[tokio::test]
async fn e2e_lb_plan_prints_the_creation_and_changes_nothing() {
    let env = TestEnv::get();
    let (external_world, config) = external_world().await;
    let launched = external_world.launch(1).await;
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

#[tokio::test]
async fn e2e_lb_plan_reads_the_service_nodes_and_cloud_config_from_the_cluster() {
    use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Node, Service};
    use kube::{Api, api::PostParams};
    let env = TestEnv::get();
    let (world, config) = external_world().await;
    let launched = world.launch(1).await;
    let client = env.kube_client().await.unwrap();
    let namespace = unique_name("lbplan");
    let post = PostParams::default();
    let ns: Namespace = serde_json::from_value(json!({ "metadata": { "name": namespace } })).unwrap();
    Api::<Namespace>::all(client.clone())
        .create(&post, &ns)
        .await
        .unwrap();
    // The cloud config as the Helm chart renders it: the ConfigMap <name>-cloud-config, key cloud.conf.
    let text = std::fs::read_to_string(&config).unwrap();
    let cm: ConfigMap = serde_json::from_value(json!({
        "metadata": { "name": "ccm-cloud-config" }, "data": { "cloud.conf": text },
    }))
    .unwrap();
    Api::<ConfigMap>::namespaced(client.clone(), &namespace)
        .create(&post, &cm)
        .await
        .unwrap();
    // NodePort, so that no controller of another test ever acts on it; the apiserver gives it its node port.
    let svc: Service = serde_json::from_value(json!({
        "metadata": { "name": "web" },
        "spec": { "type": "NodePort", "ports": [{ "port": 80, "protocol": "TCP" }] },
    }))
    .unwrap();
    let svc = Api::<Service>::namespaced(client.clone(), &namespace)
        .create(&post, &svc)
        .await
        .unwrap();
    let uid = svc.metadata.uid.clone().unwrap();
    let node_port = svc.spec.as_ref().unwrap().ports.as_ref().unwrap()[0]
        .node_port
        .unwrap();
    let node: Node = serde_json::from_value(json!({
        "metadata": { "name": launched[0].id, "labels": { "e2e-cluster": world.cluster_id } },
        "spec": { "providerID": format!("aws:///us-east-1a/{}", launched[0].id) },
    }))
    .unwrap();
    world.nodes.create(&post, &node).await.unwrap();

    let kubeconfig = format!("--kubeconfig={}", env.kubeconfig.display());
    let configmap = format!("--cloud-config-configmap={namespace}/ccm-cloud-config");
    let by_name = format!("{namespace}/web");
    for args in [
        vec![by_name.as_str(), configmap.as_str(), kubeconfig.as_str()],
        vec![
            "web",
            "-n",
            namespace.as_str(),
            configmap.as_str(),
            kubeconfig.as_str(),
            "--json=false",
        ],
    ] {
        let out = run(&args);
        let (stdout, stderr) = (
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
        );
        assert!(out.status.success(), "{args:?}: {stdout}\n{stderr}");
        assert!(
            stdout.starts_with(&format!(
                "Service {namespace}/web -> Classic ELB {}",
                lb_name(&uid)
            )),
            "{args:?}: {stdout}"
        );
        for expected in [&launched[0].id, &format!("TCP:{node_port}")] {
            assert!(stdout.contains(expected.as_str()), "{expected} not in:\n{stdout}");
        }
        assert!(
            stderr.contains("is of type NodePort, not LoadBalancer"),
            "{stderr}"
        );
        assert!(!stderr.contains("no Nodes"), "{stderr}");
    }

    // A YAML manifest and a NodeList without Nodes: planned, with the warning that nothing is a target.
    let dir = &world.dir;
    let yaml = format!(
        "apiVersion: v1\nkind: Service\nmetadata:\n  name: edge\n  namespace: {namespace}\n  uid: {uid}\n\
         spec:\n  type: LoadBalancer\n  ports:\n  - port: 443\n    protocol: TCP\n    nodePort: 30443\n"
    );
    std::fs::write(dir.join("edge.yaml"), yaml).unwrap();
    std::fs::write(
        dir.join("none.yaml"),
        "apiVersion: v1\nkind: NodeList\nitems: []\n",
    )
    .unwrap();
    let empty = run(&[
        format!("-f={}", dir.join("edge.yaml").display()),
        format!("--nodes={}", dir.join("none.yaml").display()),
        format!("--cloud-config={}", config.display()),
    ]);
    let (stdout, stderr) = (
        String::from_utf8_lossy(&empty.stdout),
        String::from_utf8_lossy(&empty.stderr),
    );
    assert!(empty.status.success(), "{stdout}\n{stderr}");
    assert!(
        stdout.starts_with(&format!("Service {namespace}/edge -> Classic ELB")),
        "{stdout}"
    );
    assert!(stdout.contains("TCP:30443"), "{stdout}");
    assert!(stderr.contains("warning: no Nodes in the NodeList"), "{stderr}");
    // Nodes, none of them the cluster's (an instance without its tag): the same warning's other form.
    let untagged = world.network.launch(1, &[]).await.unwrap().remove(0);
    let foreign = json!({ "kind": "List", "items": [{ "metadata": { "name": "elsewhere" },
        "spec": { "providerID": format!("aws:///us-east-1a/{}", untagged.id) } }] });
    std::fs::write(dir.join("foreign.json"), foreign.to_string()).unwrap();
    let out = run(&[
        format!("--filename={}", dir.join("edge.yaml").display()),
        format!("--nodes={}", dir.join("foreign.json").display()),
        format!("--cloud-config={}", config.display()),
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "none of the 1 Nodes of the NodeList {} is an instance of cluster {}",
            dir.join("foreign.json").display(),
            world.cluster_id
        )),
        "{stderr}"
    );

    // Errors name what was missing: the file's path, the Service, the ConfigMap.
    let missing = dir.join("nope").join("web.yaml");
    let gone = format!("{namespace}/gone");
    let no_cm = format!("--cloud-config-configmap={namespace}/nope");
    for (args, words) in [
        (
            vec![
                format!("-f={}", missing.display()),
                format!("--cloud-config={}", config.display()),
            ],
            format!(
                "lb-plan: reading {}: No such file or directory",
                missing.display()
            ),
        ),
        (
            vec![gone.clone(), configmap.clone(), kubeconfig.clone()],
            format!("lb-plan: Service {gone} not found"),
        ),
        (
            vec![by_name.clone(), no_cm.clone(), kubeconfig.clone()],
            format!("lb-plan: {no_cm}: no such ConfigMap"),
        ),
        (
            vec![
                by_name.clone(),
                format!("--cloud-config={}", config.display()),
                "--kubeconfig=/nonexistent/kc".into(),
            ],
            "lb-plan: reading --kubeconfig=/nonexistent/kc: ".to_owned(),
        ),
    ] {
        let out = run(&args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(stderr.contains(&words), "{args:?}: {words:?} not in {stderr}");
    }

    world
        .nodes
        .delete(&launched[0].id, &Default::default())
        .await
        .unwrap();
    Api::<Namespace>::all(client)
        .delete(&namespace, &Default::default())
        .await
        .unwrap();
}

/// A Service whose NLB follows its endpoints (`target-nodes-with-endpoints`): `lb-plan` reads its EndpointSlices
/// from the cluster, as the controller does, and plans targets only on the node with a ready endpoint; where it
/// cannot read them, it says so and plans every node.
#[tokio::test]
async fn e2e_lb_plan_targets_only_the_nodes_with_endpoints_of_a_service_that_follows_them() {
    use k8s_openapi::api::core::v1::{Namespace, Node, Service};
    use kube::{
        Api,
        api::{ApiResource, DynamicObject, GroupVersionKind, PostParams},
    };
    let env = TestEnv::get();
    let (world, config) = external_world().await;
    let launched = world.launch(2).await;
    let client = env.kube_client().await.unwrap();
    let namespace = unique_name("lbpeps");
    let post = PostParams::default();
    let ns: Namespace = serde_json::from_value(json!({ "metadata": { "name": namespace } })).unwrap();
    Api::<Namespace>::all(client.clone())
        .create(&post, &ns)
        .await
        .unwrap();
    for instance in &launched {
        let node: Node = serde_json::from_value(json!({
            "metadata": { "name": instance.id, "labels": { "e2e-cluster": world.cluster_id } },
            "spec": { "providerID": format!("aws:///us-east-1a/{}", instance.id) },
        }))
        .unwrap();
        world.nodes.create(&post, &node).await.unwrap();
    }
    // NodePort, so that no controller of another test acts on it.
    let svc: Service = serde_json::from_value(json!({
        "metadata": { "name": "web", "annotations": {
            "service.beta.kubernetes.io/aws-load-balancer-type": "nlb",
            "service.beta.kubernetes.io/aws-load-balancer-target-nodes-with-endpoints": "true",
        } },
        "spec": { "type": "NodePort", "externalTrafficPolicy": "Local",
                  "ports": [{ "name": "http", "port": 80, "protocol": "TCP", "targetPort": 8080 }] },
    }))
    .unwrap();
    Api::<Service>::namespaced(client.clone(), &namespace)
        .create(&post, &svc)
        .await
        .unwrap();
    // Its slice as the 1.20 EndpointSlice controller writes it: one ready pod, on the second node.
    let gvk = GroupVersionKind::gvk("discovery.k8s.io", "v1beta1", "EndpointSlice");
    let resource = ApiResource::from_gvk_with_plural(&gvk, "endpointslices");
    let slice: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "discovery.k8s.io/v1beta1", "kind": "EndpointSlice",
        "metadata": { "name": "web-1", "labels": { "kubernetes.io/service-name": "web" } },
        "addressType": "IPv4",
        "endpoints": [{ "addresses": ["10.7.0.1"], "conditions": { "ready": true },
                        "topology": { "kubernetes.io/hostname": launched[1].id } }],
        "ports": [{ "name": "http", "port": 8080, "protocol": "TCP" }],
    }))
    .unwrap();
    Api::<DynamicObject>::namespaced_with(client.clone(), &namespace, &resource)
        .create(&post, &slice)
        .await
        .unwrap();

    let out = run(&[
        format!("{namespace}/web"),
        format!("--cloud-config={}", config.display()),
        format!("--kubeconfig={}", env.kubeconfig.display()),
    ]);
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("register_targets"), "{stdout}");
    assert!(stdout.contains(&launched[1].id), "{stdout}");
    assert!(
        !stdout.contains(&launched[0].id),
        "a node without an endpoint: {stdout}"
    );

    // The same Service from a file, the Nodes from a file, no cluster to read the slices from: every node, and
    // a warning that says why.
    let dir = &world.dir;
    let service = Api::<Service>::namespaced(client.clone(), &namespace)
        .get("web")
        .await
        .unwrap();
    std::fs::write(dir.join("follows.json"), serde_json::to_string(&service).unwrap()).unwrap();
    let nodes = json!({ "kind": "List", "items": launched.iter().map(|i| json!({
        "metadata": { "name": i.id },
        "spec": { "providerID": format!("aws:///us-east-1a/{}", i.id) },
    })).collect::<Vec<_>>() });
    std::fs::write(dir.join("two.json"), nodes.to_string()).unwrap();
    let out = run(&[
        format!("-f={}", dir.join("follows.json").display()),
        format!("--nodes={}", dir.join("two.json").display()),
        format!("--cloud-config={}", config.display()),
        "--kubeconfig=/nonexistent/kc".to_owned(),
    ]);
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(
        stderr.contains("follows its EndpointSlices, which could not be read"),
        "{stderr}"
    );
    for instance in &launched {
        assert!(stdout.contains(&instance.id), "{stdout}");
    }

    for instance in &launched {
        world
            .nodes
            .delete(&instance.id, &Default::default())
            .await
            .unwrap();
    }
    Api::<Namespace>::all(client)
        .delete(&namespace, &Default::default())
        .await
        .unwrap();
}
