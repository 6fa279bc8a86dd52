//! `AwsCloud` on the real adapter (moto) driven by the generic cloud-node and node-lifecycle controllers against
//! the real kube-apiserver: nodes named by private DNS name and by instance ID are initialized; a terminated
//! instance's NotReady node is deleted; a stopped one is tainted, and untainted once Ready again. (The 1,000-node
//! burst is in `e2e_node_burst.rs`, run alone because it loads moto with 1,000 instances.)
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::too_many_lines)]

mod common;

use std::time::Duration;

use ccm_controllers::{cloud_node, keys, node_lifecycle};
use ccm_testing::{TestEnv, ec2};
use common::{eventually, fixture, initialized, label, taints};
use kube::api::ListParams;
use tokio::sync::oneshot;

#[tokio::test]
async fn nodes_are_initialized_and_retired() {
    let f = fixture().await;
    let launched = f.launch(4).await;
    let zone_id = ec2::zone_id(&f.raw, "us-east-1a").await.unwrap().unwrap();
    let names = [
        launched[0].private_dns.clone(),
        launched[1].id.clone(),
        launched[2].id.clone(),
        launched[3].private_dns.clone(),
    ];
    for name in &names {
        f.create_node(name).await;
    }

    let (stop, stopped) = oneshot::channel::<()>();
    let (stop2, stopped2) = oneshot::channel::<()>();
    let mut node_config = cloud_node::CloudNodeConfig::default();
    node_config.node_selector = Some(f.selector());
    let mut lifecycle_config = node_lifecycle::NodeLifecycleConfig::default();
    lifecycle_config.node_selector = Some(f.selector());
    lifecycle_config.node_monitor_period = Duration::from_millis(500);
    let client = TestEnv::get().kube_client().await.unwrap();
    let node_task = tokio::spawn(cloud_node::run(
        client.clone(),
        f.cloud.clone(),
        node_config,
        async {
            let _ = stopped.await;
        },
    ));
    let lifecycle_task = tokio::spawn(node_lifecycle::run(
        client,
        f.cloud.clone(),
        lifecycle_config,
        async {
            let _ = stopped2.await;
        },
    ));

    eventually("all four nodes initialized", 30, async || {
        let list = f
            .nodes
            .list(&ListParams::default().labels(&f.selector()))
            .await
            .unwrap();
        list.items.len() == 4 && list.items.iter().all(initialized)
    })
    .await;
    for (name, l) in names.iter().zip(&launched) {
        let n = f.nodes.get(name).await.unwrap();
        assert_eq!(
            n.spec.as_ref().unwrap().provider_id.as_deref(),
            Some(format!("aws:///us-east-1a/{}", l.id).as_str())
        );
        assert_eq!(label(&n, keys::LABEL_REGION), Some("us-east-1"));
        assert_eq!(label(&n, keys::LABEL_ZONE), Some("us-east-1a"));
        assert_eq!(label(&n, keys::LABEL_INSTANCE_TYPE), Some("m5.large"));
        assert_eq!(label(&n, "topology.k8s.aws/zone-id"), Some(zone_id.as_str()));
        let addresses: Vec<(String, String)> = n
            .status
            .as_ref()
            .and_then(|s| s.addresses.as_ref())
            .unwrap()
            .iter()
            .map(|a| (a.type_.clone(), a.address.clone()))
            .collect();
        assert!(
            addresses.contains(&("InternalIP".into(), l.private_ip.clone())),
            "{addresses:?}"
        );
        assert!(
            addresses.contains(&("InternalDNS".into(), l.private_dns.clone())),
            "{addresses:?}"
        );
        assert!(
            addresses.contains(&("Hostname".into(), l.private_dns.clone())),
            "{addresses:?}"
        );
    }

    // The kubelets of the third and fourth nodes stop reporting; the third instance is terminated, the fourth
    // stopped.
    f.set_ready(&names[2], "False").await;
    f.set_ready(&names[3], "Unknown").await;
    f.raw
        .terminate_instances()
        .instance_ids(&launched[2].id)
        .send()
        .await
        .unwrap();
    f.raw
        .stop_instances()
        .instance_ids(&launched[3].id)
        .send()
        .await
        .unwrap();
    eventually("the terminated instance's node deleted", 20, async || {
        f.nodes.get_opt(&names[2]).await.unwrap().is_none()
    })
    .await;
    eventually("the stopped instance's node tainted", 20, async || {
        let n = f.nodes.get(&names[3]).await.unwrap();
        taints(&n).iter().any(|t| t == keys::TAINT_SHUTDOWN)
    })
    .await;
    // The Ready nodes are untouched by the lifecycle controller.
    assert!(f.nodes.get_opt(&names[0]).await.unwrap().is_some());

    // Started again, the kubelet reports Ready and the taint goes.
    f.raw
        .start_instances()
        .instance_ids(&launched[3].id)
        .send()
        .await
        .unwrap();
    f.set_ready(&names[3], "True").await;
    eventually("the shutdown taint removed", 20, async || {
        let n = f.nodes.get(&names[3]).await.unwrap();
        !taints(&n).iter().any(|t| t == keys::TAINT_SHUTDOWN)
    })
    .await;

    let _ = (stop.send(()), stop2.send(()));
    node_task.await.unwrap().unwrap();
    lifecycle_task.await.unwrap().unwrap();
    f.cleanup().await;
}
