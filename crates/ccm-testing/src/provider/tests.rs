use super::*;
use ccm_cloud_provider::NodeAddressType;

fn node(name: &str, provider_id: Option<&str>) -> NodeView {
    let mut n = NodeView::named(name);
    n.provider_id = provider_id.map(str::to_owned);
    n
}

#[tokio::test]
async fn instances_are_found_by_provider_id_first_then_by_name() {
    let cloud = FakeProvider::new();
    cloud.add_instance(
        FakeInstance::new("a", "fake://1")
            .instance_type("t3")
            .zone("z1", "r1"),
    );
    let v2 = cloud.instances_v2().unwrap();
    let by_name = v2.instance_metadata(&node("a", None)).await.unwrap().unwrap();
    assert_eq!(by_name.instance_type, "t3");
    assert_eq!(by_name.zone, "z1");
    assert!(
        v2.instance_exists(&node("other-name", Some("fake://1")))
            .await
            .unwrap()
    );
    assert!(
        !v2.instance_exists(&node("a", Some("fake://2"))).await.unwrap(),
        "provider ID wins over name"
    );
    assert!(matches!(
        v2.instance_metadata(&node("b", None)).await,
        Err(CloudError::InstanceNotFound)
    ));
}

#[tokio::test]
async fn batches_are_one_call_unless_batching_is_off() {
    let cloud = FakeProvider::new();
    for n in ["a", "b", "c"] {
        cloud.add_instance(FakeInstance::new(n, format!("fake://{n}")));
    }
    cloud.fail_for(Method::InstanceMetadata, "b", Some(1), || {
        CloudError::other("boom")
    });
    let nodes = [node("a", None), node("b", None), node("c", None)];
    let refs: Vec<&NodeView> = nodes.iter().collect();
    let out = cloud.instance_metadata_batch(&refs).await;
    assert!(out[0].is_ok() && out[1].is_err() && out[2].is_ok());
    assert_eq!(cloud.batch_sizes(Method::InstanceMetadataBatch), vec![3]);
    assert_eq!(cloud.count(Method::InstanceMetadata), 0);

    let naive = cloud.clone().without_batching();
    naive.clear_calls();
    let out = naive.instance_metadata_batch(&refs).await;
    assert!(out.iter().all(Result::is_ok), "the failure was used up");
    assert_eq!(naive.count(Method::InstanceMetadata), 3);
    assert_eq!(naive.count(Method::InstanceMetadataBatch), 0);
}

#[tokio::test]
async fn failures_count_down_and_calls_are_recorded() {
    let cloud = FakeProvider::new();
    cloud.fail(Method::ListRoutes, Some(2), || {
        CloudError::retry_after("slow", Duration::from_secs(1))
    });
    let routes = cloud.routes().unwrap();
    assert!(routes.list_routes("c").await.is_err());
    assert!(routes.list_routes("c").await.is_err());
    assert!(routes.list_routes("c").await.unwrap().is_empty());
    assert_eq!(cloud.count(Method::ListRoutes), 3);
}

#[tokio::test]
async fn routes_create_list_delete() {
    let cloud = FakeProvider::new();
    let r = cloud.routes().unwrap();
    let route = Route {
        target_node: "a".into(),
        destination_cidr: "10.0.1.0/24".into(),
        target_node_addresses: vec![NodeAddress::new(NodeAddressType::InternalIp, "10.1.0.1")],
        ..Default::default()
    };
    r.create_route("c", "uid", &route).await.unwrap();
    assert!(r.create_route("c", "uid", &route).await.is_err(), "duplicate");
    let listed = r.list_routes("c").await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].name, "c-a-10.0.1.0/24");
    assert!(r.list_routes("other").await.unwrap().is_empty());
    r.delete_route("c", &listed[0]).await.unwrap();
    assert!(r.delete_route("c", &listed[0]).await.is_err(), "already gone");
}

#[tokio::test]
async fn load_balancers_record_hosts() {
    let cloud = FakeProvider::new();
    let lb = cloud.load_balancer().unwrap();
    let mut svc = Service::default();
    svc.metadata.namespace = Some("ns".into());
    svc.metadata.name = Some("web".into());
    svc.metadata.uid = Some("1234-5678".into());
    let a = node("a", None);
    let status = lb.ensure_load_balancer("k", &svc, &[&a]).await.unwrap();
    assert_eq!(status.ingress.unwrap()[0].ip.as_deref(), Some("192.0.2.10"));
    assert_eq!(cloud.load_balancers()["ns/web"].hosts, vec!["a"]);
    assert_eq!(cloud.load_balancers()["ns/web"].name, "a12345678");
    lb.update_load_balancer("k", &svc, &[]).await.unwrap();
    assert!(cloud.load_balancers()["ns/web"].hosts.is_empty());
    assert!(lb.get_load_balancer("k", &svc).await.unwrap().is_some());
    lb.ensure_load_balancer_deleted("k", &svc).await.unwrap();
    assert!(lb.get_load_balancer("k", &svc).await.unwrap().is_none());
}

#[tokio::test]
async fn legacy_instances() {
    let cloud = FakeProvider::new();
    cloud.add_instance(
        FakeInstance::new("a", "fake://i-1")
            .instance_type("big")
            .shut_down(),
    );
    let i = cloud.instances().unwrap();
    assert_eq!(i.instance_id("a").await.unwrap(), "i-1");
    assert!(matches!(
        i.instance_id("b").await,
        Err(CloudError::InstanceNotFound)
    ));
    assert_eq!(i.instance_type_by_provider_id("fake://i-1").await.unwrap(), "big");
    assert!(i.instance_shutdown_by_provider_id("fake://i-1").await.unwrap());
    assert!(i.instance_shutdown_by_provider_id("").await.is_err());
    assert!(cloud.clone().without_instances().instances().is_none());
}
