use ccm_cloud_provider::CloudError;
use ccm_testing::provider::{FakeInstance, FakeProvider, Method};

use super::*;
use ccm_testing::fixtures::NodeBuilder;

fn node(name: &str, provider_id: Option<&str>) -> NodeView {
    let node = NodeBuilder::new(name);
    provider_id.map_or(node.clone(), |id| node.provider_id(id)).view()
}

fn legacy() -> FakeProvider {
    let cloud = FakeProvider::new().without_instances_v2();
    cloud.add_instance(
        FakeInstance::new("a", "fake://12345")
            .instance_type("t1")
            .zone("z", "r"),
    );
    cloud.add_instance(FakeInstance::new("stopped", "fake://stopped").shut_down());
    cloud
}

#[tokio::test]
async fn v2_is_preferred_and_batched() {
    let cloud = FakeProvider::new();
    cloud.add_instance(FakeInstance::new("a", "fake://1"));
    let source = InstanceSource::of(&cloud).unwrap();
    assert!(source.is_v2());
    let (a, b) = (node("a", None), node("b", None));
    let m = ControllerMetrics::default();
    let out = source.metadata(&[&a, &b], &m).await;
    assert!(out[0].is_ok() && matches!(out[1], Err(CloudError::InstanceNotFound)));
    assert_eq!(cloud.count(Method::InstanceMetadataBatch), 1);
    assert_eq!(cloud.count(Method::InstanceId), 0, "legacy API not used");
    assert_eq!(m.snapshot().provider_calls, 1);
}

#[tokio::test]
async fn legacy_metadata_resolves_the_provider_id_by_name() {
    let cloud = legacy();
    let source = InstanceSource::of(&cloud).unwrap();
    assert!(!source.is_v2());
    let m = ControllerMetrics::default();
    let meta = source
        .metadata(&[&node("a", None)], &m)
        .await
        .remove(0)
        .unwrap()
        .unwrap();
    assert_eq!(meta.provider_id, "fake://12345");
    assert_eq!(
        (
            meta.instance_type.as_str(),
            meta.zone.as_str(),
            meta.region.as_str()
        ),
        ("t1", "z", "r")
    );
    assert_eq!(cloud.count(Method::InstanceId), 1);
    assert_eq!(cloud.count(Method::ZoneByProviderId), 1);
}

#[tokio::test]
async fn legacy_not_implemented_instance_ids_continue_without_one() {
    let cloud = legacy();
    cloud.fail(Method::InstanceId, None, || CloudError::NotImplemented);
    let source = InstanceSource::of(&cloud).unwrap();
    let meta = source
        .metadata(&[&node("a", None)], &ControllerMetrics::default())
        .await
        .remove(0)
        .unwrap()
        .unwrap();
    assert_eq!(meta.provider_id, "");
    assert_eq!(meta.instance_type, "t1", "looked up by name");
    assert_eq!(cloud.count(Method::ZoneByNodeName), 1);
}

#[tokio::test]
async fn legacy_exists_and_shutdown() {
    // Test_NodesShutdown / Test_NodesDeleted with the legacy API.
    let cloud = legacy();
    let source = InstanceSource::of(&cloud).unwrap();
    let m = ControllerMetrics::default();
    let (a, gone, stopped_by_name) = (
        node("a", Some("fake://12345")),
        node("gone", None),
        node("stopped", None),
    );
    let exists = source.exists(&[&a, &gone, &stopped_by_name], &m).await;
    assert!(matches!(exists[0], Ok(true)));
    assert!(
        matches!(exists[1], Ok(false)),
        "InstanceNotFound from InstanceID: gone"
    );
    assert!(
        matches!(exists[2], Ok(true)),
        "empty providerID resolved through InstanceID"
    );
    let shutdown = source.shutdown(&[&a, &stopped_by_name], &m).await;
    assert!(matches!(shutdown[0], Ok(false)));
    assert!(matches!(shutdown[1], Ok(true)));
    // An InstanceID error other than not-found: no decision.
    cloud.fail(Method::InstanceId, Some(1), || CloudError::other("boom"));
    assert!(source.exists(&[&stopped_by_name], &m).await[0].is_err());
    // NotImplemented shutdown: not shut down.
    cloud.fail(Method::InstanceShutdownByProviderId, Some(1), || {
        CloudError::NotImplemented
    });
    assert!(matches!(source.shutdown(&[&a], &m).await[0], Ok(false)));
}

#[test]
fn no_instances_capability() {
    let cloud = FakeProvider::new().without_instances_v2().without_instances();
    assert!(InstanceSource::of(&cloud).is_none());
}
