//! End to end: the `aws-cloud-controller-manager` binary against moto and the real kube-apiserver, configured as an
//! operator would (cloud config with endpoint overrides, the region and its own instance from IMDS, the cluster ID
//! from that instance's tags). Nodes named by private DNS name and by instance ID get their provider ID,
//! addresses and labels and lose the uninitialized taint; a terminated instance's NotReady node is deleted; a
//! stopped instance's node gets the shutdown taint and loses it when the instance runs and the node is Ready
//! again; /metrics shows the AWS calls; SIGTERM stops the CCM cleanly and releases its lease.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::too_many_lines)]

mod common;

use ccm_testing::{TestEnv, ec2};
use common::{Ccm, World, eventually, initialized, label, taint_keys};
use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;

const SHUTDOWN_TAINT: &str = "node.cloudprovider.kubernetes.io/shutdown";

#[tokio::test]
async fn e2e_nodes_are_initialized_and_retired_by_the_ccm_binary() {
    let world = World::new("").await;
    let launched = world.launch(4).await;
    let zone_id = ec2::zone_id(&world.raw, "us-east-1a").await.unwrap().unwrap();
    let names = [
        launched[0].private_dns.clone(),
        launched[1].id.clone(),
        launched[2].id.clone(),
        launched[3].private_dns.clone(),
    ];
    for name in &names {
        world.register_node(name, None).await;
    }
    let mut ccm = Ccm::start(&world, &[]);

    let nodes = world.nodes.clone();
    eventually(&mut ccm, "the four nodes initialized", 60, async || {
        let mut all = true;
        for name in &names {
            all &= nodes.get(name).await.is_ok_and(|n| initialized(&n));
        }
        all
    })
    .await;
    for (name, l) in names.iter().zip(&launched) {
        let n = nodes.get(name).await.unwrap();
        let provider_id = n.spec.as_ref().unwrap().provider_id.clone();
        assert_eq!(provider_id, Some(format!("aws:///us-east-1a/{}", l.id)), "{name}");
        assert_eq!(label(&n, "topology.kubernetes.io/region"), Some("us-east-1"));
        assert_eq!(label(&n, "topology.kubernetes.io/zone"), Some("us-east-1a"));
        assert_eq!(label(&n, "node.kubernetes.io/instance-type"), Some("m5.large"));
        assert_eq!(label(&n, "topology.k8s.aws/zone-id"), Some(zone_id.as_str()));
        let addresses: Vec<(String, String)> = n
            .status
            .as_ref()
            .and_then(|s| s.addresses.as_ref())
            .unwrap()
            .iter()
            .map(|a| (a.type_.clone(), a.address.clone()))
            .collect();
        for expected in [
            ("InternalIP", &l.private_ip),
            ("InternalDNS", &l.private_dns),
            ("Hostname", &l.private_dns),
        ] {
            let expected = (expected.0.to_owned(), expected.1.clone());
            assert!(addresses.contains(&expected), "{name}: {addresses:?}");
        }
    }

    // Kubelets stop reporting: the third instance is terminated, the fourth stopped.
    world.set_ready(&names[2], "False").await;
    world.set_ready(&names[3], "Unknown").await;
    world.terminate(&launched[2].id).await;
    world
        .raw
        .stop_instances()
        .instance_ids(&launched[3].id)
        .send()
        .await
        .unwrap();
    eventually(
        &mut ccm,
        "the terminated instance's node deleted",
        30,
        async || nodes.get_opt(&names[2]).await.unwrap().is_none(),
    )
    .await;
    eventually(&mut ccm, "the stopped instance's node tainted", 30, async || {
        let n = nodes.get(&names[3]).await.unwrap();
        taint_keys(&n).iter().any(|t| t == SHUTDOWN_TAINT)
    })
    .await;
    assert!(
        nodes.get_opt(&names[0]).await.unwrap().is_some(),
        "a Ready node stays"
    );

    world
        .raw
        .start_instances()
        .instance_ids(&launched[3].id)
        .send()
        .await
        .unwrap();
    world.set_ready(&names[3], "True").await;
    eventually(&mut ccm, "the shutdown taint removed", 30, async || {
        let n = nodes.get(&names[3]).await.unwrap();
        !taint_keys(&n).iter().any(|t| t == SHUTDOWN_TAINT)
    })
    .await;

    // The AWS calls and the controllers are on /metrics.
    let describes = ccm
        .sample("aws_api_requests_total", &["operation=\"DescribeInstances\""])
        .await;
    assert!(describes.is_some_and(|n| n >= 1.0), "{}", ccm.metrics().await);
    let metrics = ccm.metrics().await;
    for name in ["cloud-node", "cloud-node-lifecycle"] {
        let running = metrics.lines().any(|l| {
            l.starts_with("running_managed_controllers{")
                && l.contains(&format!("\"{name}\""))
                && l.ends_with(" 1")
        });
        assert!(running, "{name} not running: {metrics}");
    }

    // SIGTERM: a clean exit that hands the lease over at once.
    let status = ccm.terminate().await;
    assert!(status.success(), "{status}\n{}", ccm.log_text());
    let leases: Api<Lease> = Api::namespaced(TestEnv::get().kube_client().await.unwrap(), "kube-system");
    let lease = leases.get(&ccm.lease).await.unwrap();
    let holder = lease.spec.and_then(|s| s.holder_identity).unwrap_or_default();
    assert!(
        holder.is_empty(),
        "the lease is released on SIGTERM, held by {holder:?}"
    );
    world.cleanup().await;
}
