//! End to end: `NodeZoneLabel = ZoneID` in the cloud config of the `aws-cloud-controller-manager` binary, against
//! moto and the real kube-apiserver. Over a Node an earlier controller initialized with the zone name, the binary
//! refuses to start its controllers, exits non-zero and says which key to change; once no Node carries a zone name,
//! it initializes a new Node with the zone ID in `topology.kubernetes.io/zone`. World octet 183.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::too_many_lines)]

mod common;

use ccm_testing::ec2;
use common::{Ccm, World, eventually, initialized, label};
use kube::api::{DeleteParams, Patch, PatchParams};
use serde_json::json;

#[tokio::test]
async fn e2e_zone_ids_are_refused_over_zone_names_and_written_otherwise() {
    let world = World::at_octet("NodeZoneLabel = ZoneID\n", Some(183)).await;
    let launched = world.launch(1).await;
    let zone_id = ec2::zone_id(&world.raw, "us-east-1a").await.unwrap().unwrap();

    // A Node the Go controller (or this one before the switch) initialized: its zone label holds the name.
    let old = format!("{}-old", world.cluster_id);
    world.register_node(&old, None).await;
    let labels = json!({ "metadata": { "labels": { "topology.kubernetes.io/zone": "us-east-1a" } } });
    world
        .nodes
        .patch(&old, &PatchParams::default(), &Patch::Merge(&labels))
        .await
        .unwrap();
    let mut refused = Ccm::start(&world, &[]);
    let status = refused.exited_within(60).await;
    let log = refused.log_text();
    assert!(status.is_some_and(|s| !s.success()), "{status:?}\n{log}");
    for expected in [
        "start-up check zone-labels refused to start the controllers",
        "NodeZoneLabel is ZoneID",
        "set NodeZoneLabel = ZoneName",
    ] {
        assert!(log.contains(expected), "{expected:?} missing\n{log}");
    }
    assert!(
        !log.contains("starting controller"),
        "no controller may start before the check\n{log}"
    );

    // Without such a Node, the new Node gets the zone ID.
    world.nodes.delete(&old, &DeleteParams::default()).await.unwrap();
    let name = launched[0].id.clone();
    world.register_node(&name, None).await;
    let mut ccm = Ccm::start(&world, &[]);
    let nodes = world.nodes.clone();
    eventually(&mut ccm, "the node initialized", 60, async || {
        nodes.get(&name).await.is_ok_and(|n| initialized(&n))
    })
    .await;
    let n = nodes.get(&name).await.unwrap();
    assert_eq!(label(&n, "topology.kubernetes.io/zone"), Some(zone_id.as_str()));
    assert_eq!(
        label(&n, "failure-domain.beta.kubernetes.io/zone"),
        Some(zone_id.as_str())
    );
    assert_eq!(label(&n, "topology.kubernetes.io/region"), Some("us-east-1"));
    assert_eq!(
        n.spec.as_ref().unwrap().provider_id.as_deref(),
        Some(format!("aws:///us-east-1a/{name}").as_str())
    );
    assert!(ccm.terminate().await.success(), "{}", ccm.log_text());
    world.cleanup().await;
}
