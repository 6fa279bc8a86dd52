//! The fixture shared by the AwsCloud integration tests: a VPC in moto, the CCM's own instance tagged for a fresh
//! cluster, `AwsCloud` on the real adapter, and Nodes labelled per test so that the controllers, which select that
//! label, never see another test's nodes.
#![allow(clippy::unwrap_used, clippy::expect_used, dead_code, unused_imports)]

use std::{sync::Arc, time::Duration};

use ccm_aws::{AwsCloud, CloudConfig, cloud::discover};
use ccm_aws_sdk::{Adapter, AdapterOptions, RateLimits, RetryPolicy};
use ccm_controllers::keys;
use ccm_testing::{TestEnv, ec2, unique_name};
use k8s_openapi::api::core::v1::Node;
use kube::{
    Api,
    api::{DeleteParams, ListParams, Patch, PostParams},
};
use serde_json::json;

pub use ccm_testing::nodes::{is_initialized as initialized, label, taint_keys as taints};

const GROUP_LABEL: &str = "ccm-test/group";

pub struct Fixture {
    pub adapter: Adapter,
    pub cloud: Arc<AwsCloud>,
    pub raw: aws_sdk_ec2::Client,
    pub nodes: Api<Node>,
    pub network: ccm_testing::world::World,
    pub cluster_id: String,
    pub group: String,
}

pub async fn fixture() -> Fixture {
    fixture_at(None).await
}

/// [`fixture`] with `AwsCloud` calling AWS at `endpoint` (a `FaultProxy` in front of moto) instead of moto.
pub async fn fixture_at(endpoint: Option<&str>) -> Fixture {
    fixture_with(endpoint, "[Global]\n", None).await
}

/// [`fixture_at`] with the cloud config `config` and the world's `octet` (else one derived from the cluster ID).
pub async fn fixture_with(endpoint: Option<&str>, config: &str, octet: Option<u8>) -> Fixture {
    let env = TestEnv::get();
    let sdk = env.aws_config().await;
    // Faults injected by the tests' proxies are retried quickly.
    let retry = RetryPolicy::quick(2);
    let mut options = AdapterOptions::default()
        .with_rate_limits(RateLimits::unlimited())
        .with_retry(retry);
    if let Some(endpoint) = endpoint {
        options = options.with_endpoint_url(endpoint);
    }
    let adapter = Adapter::new(&sdk, options);
    let raw = aws_sdk_ec2::Client::new(&sdk);
    let cluster_id = unique_name("awscloud");
    // A fresh CIDR per run, so that private DNS names (node names) never collide with a previous run's nodes.
    let network = ccm_testing::world::World::builder(octet.unwrap_or_else(|| ec2::octet_for(&cluster_id)))
        .subnet("us-east-1a", &[])
        .build(&raw)
        .await
        .unwrap();
    let self_instance = network
        .launch(1, &[(&format!("kubernetes.io/cluster/{cluster_id}"), "owned")])
        .await
        .unwrap();
    // The cluster and VPC come from the CCM's own instance, as on a real control-plane node.
    let config = CloudConfig::parse(config).unwrap();
    let self_id = ccm_aws_api::InstanceId::from(self_instance[0].id.as_str());
    let environment = discover(&config, adapter.ec2(), env.aws_region.clone(), Some(&self_id))
        .await
        .unwrap();
    assert_eq!(environment.cluster.id(), cluster_id);
    assert_eq!(
        environment.vpc_id.as_ref().map(|v| v.as_str().to_owned()),
        Some(network.vpc.clone())
    );
    let cloud = Arc::new(
        AwsCloud::new(
            &config,
            adapter.ec2().clone(),
            adapter.elb().clone(),
            adapter.elbv2().clone(),
            environment,
        )
        .unwrap(),
    );
    let client = env.kube_client().await.unwrap();
    Fixture {
        adapter,
        cloud,
        raw,
        nodes: Api::all(client),
        network,
        group: unique_name("awsgrp"),
        cluster_id,
    }
}

impl Fixture {
    pub async fn launch(&self, count: i32) -> Vec<ec2::Launched> {
        let key = format!("kubernetes.io/cluster/{}", self.cluster_id);
        self.network.launch(count, &[(&key, "owned")]).await.unwrap()
    }

    pub async fn create_node(&self, name: &str) {
        let node: Node = serde_json::from_value(json!({
            "metadata": { "name": name, "labels": { GROUP_LABEL: self.group } },
            "spec": { "taints": [{ "key": keys::TAINT_UNINITIALIZED, "value": "true", "effect": "NoSchedule" }] },
        }))
        .unwrap();
        self.nodes.create(&PostParams::default(), &node).await.unwrap();
    }

    /// Launches `count` instances and registers an initialized Node (its provider ID set) for each.
    pub async fn launch_nodes(&self, count: i32) -> Vec<ec2::Launched> {
        let launched = self.launch(count).await;
        for l in &launched {
            let node: Node = serde_json::from_value(json!({
                "metadata": { "name": l.id, "labels": { GROUP_LABEL: self.group } },
                "spec": { "providerID": format!("aws:///{}/{}", l.zone, l.id) },
            }))
            .unwrap();
            self.nodes.create(&PostParams::default(), &node).await.unwrap();
        }
        launched
    }

    /// Runs the generic service controller over `AwsCloud` for this fixture's Services and Nodes (cluster name
    /// `kubernetes`), with `tweak` applied to its configuration; it stops when the returned sender is used or
    /// dropped.
    pub fn run_service_controller(
        &self,
        client: &kube::Client,
        tweak: impl FnOnce(&mut ccm_controllers::service::ServiceConfig),
    ) -> tokio::sync::oneshot::Sender<()> {
        let mut config = ccm_controllers::service::ServiceConfig::default();
        config.cluster_name = "kubernetes".into();
        config.service_selector = Some(self.selector());
        config.node_selector = Some(self.selector());
        tweak(&mut config);
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(ccm_controllers::service::run(
            client.clone(),
            self.cloud.clone(),
            config,
            async {
                stopped.await.ok();
            },
        ));
        stop
    }

    pub async fn set_ready(&self, name: &str, ready: &str) {
        let status =
            json!({ "status": { "conditions": [{ "type": "Ready", "status": ready, "reason": "Test" }] } });
        self.nodes
            .patch_status(name, &Default::default(), &Patch::Strategic(&status))
            .await
            .unwrap();
    }

    pub fn selector(&self) -> String {
        format!("{GROUP_LABEL}={}", self.group)
    }

    pub async fn cleanup(&self) {
        let lp = ListParams::default().labels(&self.selector());
        let _ = self.nodes.delete_collection(&DeleteParams::default(), &lp).await;
    }

    pub fn describes(&self) -> u64 {
        self.adapter.metrics().attempts("ec2", "DescribeInstances")
    }
}

pub async fn eventually(what: &str, secs: u64, mut check: impl AsyncFnMut() -> bool) {
    for _ in 0..secs * 10 {
        if check().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("timed out after {secs} s waiting for {what}");
}
