//! End to end: `doctor` as an operator runs it, configured by the CCM's cloud config (a control plane outside
//! AWS: Region, VPC, SubnetID and KubernetesClusterID, no IMDS) and a kubeconfig. A fresh cluster ID per run
//! isolates it in the shared moto (doctor only looks at resources tagged with it); `--node-selector` and
//! `--namespace` keep other tests' Nodes and Services out of the Node and Service checks.
//!
//! Clean: exit 0. Planted leaks of a Service that does not exist: exit 1, listed in text and in JSON. `--delete`
//! refuses (exit 2, nothing removed): no Service of the apiserver is the one the cluster's only load balancer
//! names, which is what another cluster's kubeconfig looks like. `--delete --allow-empty-cluster` removes them (a
//! `shared` group named for the same Service survives), exit 0; then clean again.
//!
//! As a kubectl plugin runs it: the cloud config from the chart's ConfigMap, Go's boolean forms, and errors
//! that name the missing file, kubeconfig or ConfigMap.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::too_many_lines)]

mod common;

use ccm_aws_api::{
    Ec2, Elb, Elbv2, Filter, SecurityGroupId, SubnetId, Tags, VpcId,
    ec2::NewSecurityGroup,
    elb::{ClassicListener, NewClassicLoadBalancer},
    elbv2::{NewTargetGroup, TargetGroupHealthCheck},
};
use ccm_aws_sdk::{Adapter, AdapterOptions};
use ccm_testing::{TestEnv, unique_name};
use common::World;

#[tokio::test]
async fn e2e_doctor_lists_planted_leaks_and_deletes_them() {
    let env = TestEnv::get();
    let (world, config) = World::new("").await.outside_aws();

    let clean = common::doctor(&world, &config, &[]);
    assert_eq!(clean.status.code(), Some(0), "{}", common::output_text(&clean));
    assert!(
        String::from_utf8_lossy(&clean.stdout).contains("nothing leaked"),
        "{}",
        common::output_text(&clean)
    );

    // Leaks of a Service that does not exist: a Classic ELB, its group, a target group; and a shared group
    // named for the same Service, which is never a leak.
    let adapter = Adapter::new(&env.aws_config().await, AdapterOptions::default());
    let vpc = VpcId::new(&world.network.vpc);
    let gone = format!("default/{}", unique_name("doctor-gone"));
    let key = world.cluster_key();
    let tagged = |value: &str| -> Tags {
        [
            (key.clone(), value.to_owned()),
            ("kubernetes.io/service-name".to_owned(), gone.clone()),
        ]
        .into()
    };
    // A generated-looking name (`a` + 31 hex digits) that no Service's UID gives: from the VPC, unique per run.
    let mut lb = format!("a{:0>31}", world.network.vpc.trim_start_matches("vpc-"));
    lb.truncate(32);
    let group = |name: String, tags: Tags| NewSecurityGroup {
        name,
        description: "doctor e2e".into(),
        vpc_id: vpc.clone(),
        tags,
    };
    let leak_sg = adapter
        .ec2()
        .create_security_group(&group(format!("k8s-elb-{lb}"), tagged("owned")))
        .await
        .unwrap();
    let shared_sg = adapter
        .ec2()
        .create_security_group(&group(unique_name("shared"), tagged("shared")))
        .await
        .unwrap();
    let classic = NewClassicLoadBalancer {
        name: lb.clone(),
        internal: true,
        subnets: vec![SubnetId::new(world.network.subnet())],
        security_groups: vec![leak_sg.clone()],
        listeners: vec![ClassicListener::new("TCP", 80, "TCP", 30080)],
        tags: tagged("owned"),
    };
    adapter.elb().create_load_balancer(&classic).await.unwrap();
    let tg_name = format!("k8s-{}", &lb[1..21]);
    let tg = NewTargetGroup {
        name: tg_name.clone(),
        protocol: "TCP".into(),
        port: 30080,
        vpc_id: vpc.clone(),
        target_type: ccm_aws_api::elbv2::TargetType::Instance,
        ip_address_type: ccm_aws_api::elbv2::TargetIpFamily::Ipv4,
        health_check: TargetGroupHealthCheck::default(),
        tags: tagged("owned"),
    };
    let tg_arn = adapter.elbv2().create_target_group(&tg).await.unwrap().arn;

    let found = common::doctor(&world, &config, &[]);
    assert_eq!(found.status.code(), Some(1), "{}", common::output_text(&found));
    let text = String::from_utf8_lossy(&found.stdout);
    for expected in [
        format!("classic-load-balancer {lb}"),
        format!("target-group {tg_arn}"),
        format!("security-group {leak_sg}"),
        format!("reason:   Service {gone} does not exist"),
    ] {
        assert!(text.contains(&expected), "{expected} not in:\n{text}");
    }
    assert!(
        !text.contains(shared_sg.as_str()),
        "a shared group is listed:\n{text}"
    );
    eprintln!("--- doctor output ---\n{text}");

    let json = common::doctor(&world, &config, &["--json"]);
    assert_eq!(json.status.code(), Some(1), "{}", common::output_text(&json));
    let report: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(report["cluster_id"], world.cluster_id.as_str());
    let mut kinds: Vec<&str> = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["kind"].as_str().unwrap())
        .collect();
    kinds.sort_unstable();
    assert_eq!(kinds, ["classic-load-balancer", "security-group", "target-group"]);

    let refused = common::doctor(&world, &config, &["--delete"]);
    assert_eq!(
        refused.status.code(),
        Some(2),
        "{}",
        common::output_text(&refused)
    );
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(
        err.contains("refusing to delete") && err.contains("--allow-empty-cluster"),
        "{}",
        common::output_text(&refused)
    );
    assert!(adapter.elb().load_balancer(&lb).await.unwrap().is_some());

    let deleted = common::doctor(&world, &config, &["--delete", "--allow-empty-cluster"]);
    assert_eq!(
        deleted.status.code(),
        Some(0),
        "{}",
        common::output_text(&deleted)
    );
    eprintln!(
        "--- doctor --delete output ---\n{}",
        String::from_utf8_lossy(&deleted.stdout)
    );
    assert!(adapter.elb().load_balancer(&lb).await.unwrap().is_none());
    assert!(adapter.elbv2().target_group(&tg_name).await.unwrap().is_none());
    let exists = |id: &SecurityGroupId| {
        let filter = [Filter::new("group-id", [id.as_str()])];
        let ec2 = adapter.ec2().clone();
        async move { !ec2.security_groups(&filter).await.unwrap().is_empty() }
    };
    assert!(!exists(&leak_sg).await, "the leaked group survived --delete");
    assert!(exists(&shared_sg).await, "--delete removed a shared group");

    let again = common::doctor(&world, &config, &[]);
    assert_eq!(again.status.code(), Some(0), "{}", common::output_text(&again));
}

#[tokio::test]
async fn e2e_doctor_reads_the_chart_configmap_and_names_what_is_missing() {
    use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
    use kube::{Api, api::PostParams};
    let env = TestEnv::get();
    let (world, config) = World::new("").await.outside_aws();
    let client = env.kube_client().await.unwrap();
    let namespace = unique_name("doctor-cm");
    let post = PostParams::default();
    let ns: Namespace =
        serde_json::from_value(serde_json::json!({ "metadata": { "name": namespace } })).unwrap();
    Api::<Namespace>::all(client.clone())
        .create(&post, &ns)
        .await
        .unwrap();
    // Any one key is taken when there is no cloud.conf.
    let cm: ConfigMap = serde_json::from_value(serde_json::json!({
        "metadata": { "name": "ccm-cloud-config" },
        "data": { "my.conf": std::fs::read_to_string(&config).unwrap() },
    }))
    .unwrap();
    Api::<ConfigMap>::namespaced(client.clone(), &namespace)
        .create(&post, &cm)
        .await
        .unwrap();

    let tool = |args: &[String]| {
        common::off_ec2(env!("CARGO_BIN_EXE_doctor"))
            .args(args)
            .arg(format!("--node-selector=e2e-cluster={}", world.cluster_id))
            .arg(format!("--namespace={}", world.cluster_id))
            .env_remove("KUBECONFIG")
            .output()
            .unwrap()
    };
    let kubeconfig = format!("--kubeconfig={}", env.kubeconfig.display());
    let configmap = format!("--cloud-config-configmap={namespace}/ccm-cloud-config");
    let clean = tool(&[
        configmap.clone(),
        kubeconfig.clone(),
        "--json=true".into(),
        "--delete=false".into(),
    ]);
    assert_eq!(clean.status.code(), Some(0), "{}", common::output_text(&clean));
    let report: serde_json::Value = serde_json::from_slice(&clean.stdout).unwrap();
    assert_eq!(
        report["cluster_id"],
        world.cluster_id.as_str(),
        "the ConfigMap's cluster ID"
    );

    let missing = world.dir.join("nope").join("cloud.conf");
    for (args, words) in [
        (
            vec![
                format!("--cloud-config={}", missing.display()),
                kubeconfig.clone(),
            ],
            format!(
                "doctor: --cloud-config={}: No such file or directory",
                missing.display()
            ),
        ),
        (
            vec![
                format!("--cloud-config={}", config.display()),
                "--kubeconfig=/nonexistent/kc".into(),
            ],
            "doctor: reading --kubeconfig=/nonexistent/kc: ".to_owned(),
        ),
        (
            vec![
                format!("--cloud-config-configmap={namespace}/nope"),
                kubeconfig.clone(),
            ],
            format!("doctor: --cloud-config-configmap={namespace}/nope: no such ConfigMap"),
        ),
        (
            vec![
                configmap.clone(),
                kubeconfig.clone(),
                "--allow-empty-cluster".into(),
            ],
            "doctor: --allow-empty-cluster is a condition of --delete".to_owned(),
        ),
    ] {
        let out = tool(&args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(&words), "{args:?}: {words:?} not in {stderr}");
    }
    Api::<Namespace>::all(client)
        .delete(&namespace, &Default::default())
        .await
        .unwrap();
}
