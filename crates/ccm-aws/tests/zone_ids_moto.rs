//! `NodeZoneLabel = ZoneID` (kubernetes/cloud-provider-aws#1185) against moto and the real kube-apiserver: the
//! cloud-node controller labels Nodes with the zone ID in `topology.kubernetes.io/zone` (the region and the
//! provider ID keep their names), and the start-up check refuses a form other than the one the Nodes carry,
//! naming the Node, the value and the key. World octet 182.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::too_many_lines)]

mod common;

use ccm_aws::{ZoneLabelCheck, ZoneLabelError};
use ccm_controllers::{cloud_node, keys};
use ccm_instances::ZoneForm;
use ccm_testing::{TestEnv, ec2, unique_name};
use common::{eventually, fixture_with, initialized, label};
use k8s_openapi::api::core::v1::Node;
use kube::api::{DeleteParams, ListParams, PostParams};
use serde_json::json;
use tokio::sync::oneshot;

const OCTET: u8 = 182;

#[tokio::test]
async fn nodes_get_the_zone_id_as_their_zone_and_the_check_holds_to_it() {
    let f = fixture_with(None, "[Global]\nNodeZoneLabel = ZoneID\n", Some(OCTET)).await;
    let launched = f.launch(2).await;
    let zone_id = ec2::zone_id(&f.raw, "us-east-1a").await.unwrap().unwrap();
    for l in &launched {
        f.create_node(&l.id).await;
    }
    let mut config = cloud_node::CloudNodeConfig::default();
    config.node_selector = Some(f.selector());
    let client = TestEnv::get().kube_client().await.unwrap();
    let (stop, stopped) = oneshot::channel::<()>();
    let task = tokio::spawn(cloud_node::run(client.clone(), f.cloud.clone(), config, async {
        let _ = stopped.await;
    }));
    eventually("both nodes initialized", 30, async || {
        let list = f
            .nodes
            .list(&ListParams::default().labels(&f.selector()))
            .await
            .unwrap();
        list.items.len() == 2 && list.items.iter().all(initialized)
    })
    .await;
    for l in &launched {
        let n = f.nodes.get(&l.id).await.unwrap();
        assert_eq!(label(&n, keys::LABEL_ZONE), Some(zone_id.as_str()), "{}", l.id);
        assert_eq!(label(&n, keys::LABEL_ZONE_BETA), Some(zone_id.as_str()));
        assert_eq!(label(&n, "topology.k8s.aws/zone-id"), Some(zone_id.as_str()));
        assert_eq!(label(&n, keys::LABEL_REGION), Some("us-east-1"));
        assert_eq!(
            n.spec.as_ref().unwrap().provider_id.as_deref(),
            Some(format!("aws:///us-east-1a/{}", l.id).as_str()),
            "the provider ID names the zone by name, as every reader expects"
        );
    }
    let _ = stop.send(());
    task.await.unwrap().unwrap();

    // The same form starts; going back to zone names is refused.
    let by_id = ZoneLabelCheck::new(ZoneForm::Id).with_node_selector(f.selector());
    by_id.run(client.clone()).await.unwrap();
    let by_name = ZoneLabelCheck::new(ZoneForm::Name).with_node_selector(f.selector());
    let err = by_name.run(client).await.unwrap_err();
    match &err {
        ZoneLabelError::OtherForm {
            node, value, found, ..
        } => {
            assert!(launched.iter().any(|l| &l.id == node), "{err}");
            assert_eq!((value.as_str(), *found), (zone_id.as_str(), ZoneForm::Id));
        }
        other => panic!("{other:?}"),
    }
    let text = err.to_string();
    assert!(
        text.contains("NodeZoneLabel is ZoneName") && text.contains("set NodeZoneLabel = ZoneID"),
        "{text}"
    );
    assert!(text.contains("and so do 1 other Node(s)"), "{text}");
    f.cleanup().await;
}

/// Nodes initialized by name (as by the Go controller or this one before the switch): zone IDs are refused,
/// naming the Node, its label and value; a zone label of neither form, written by hand, is left alone.
#[tokio::test]
async fn zone_ids_are_refused_over_nodes_labelled_by_name() {
    let client = TestEnv::get().kube_client().await.unwrap();
    let nodes: kube::Api<Node> = kube::Api::all(client.clone());
    let group = unique_name("zoneform");
    let selector = format!("ccm-test/zone-form={group}");
    let create = async |name: &str, labels: serde_json::Value| {
        let mut labels = labels;
        labels["ccm-test/zone-form"] = json!(group);
        let node: Node =
            serde_json::from_value(json!({ "metadata": { "name": name, "labels": labels } })).unwrap();
        nodes.create(&PostParams::default(), &node).await.unwrap();
    };
    let hand = format!("{group}-hand");
    create(&hand, json!({ "topology.kubernetes.io/zone": "rack-a" })).await;
    let check = ZoneLabelCheck::new(ZoneForm::Id).with_node_selector(&selector);
    check.run(client.clone()).await.unwrap();

    let old = format!("{group}-old");
    create(
        &old,
        json!({ "failure-domain.beta.kubernetes.io/zone": "us-east-1a" }),
    )
    .await;
    let err = check.run(client.clone()).await.unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains(&format!(
            "Node {old:?} carries failure-domain.beta.kubernetes.io/zone=\"us-east-1a\", a zone name"
        )) && text.contains("NodeZoneLabel is ZoneID")
            && text.contains("set NodeZoneLabel = ZoneName"),
        "{text}"
    );
    ZoneLabelCheck::new(ZoneForm::Name)
        .with_node_selector(&selector)
        .run(client)
        .await
        .unwrap();
    let lp = ListParams::default().labels(&selector);
    nodes
        .delete_collection(&DeleteParams::default(), &lp)
        .await
        .unwrap();
}
