use serde_json::json;

use super::*;

fn slice(api_version: &str, name: &str, service: Option<&str>, data: serde_json::Value) -> DynamicObject {
    let mut obj = json!({
        "apiVersion": api_version,
        "kind": "EndpointSlice",
        "metadata": { "name": name, "namespace": "shop" },
    });
    if let Some(service) = service {
        obj["metadata"]["labels"] =
            json!({ SERVICE_NAME_LABEL: service, MANAGED_BY_LABEL: SLICE_CONTROLLER });
    }
    for (k, v) in data.as_object().unwrap() {
        obj[k] = v.clone();
    }
    serde_json::from_value(obj).unwrap()
}

/// As the EndpointSlice controller of Kubernetes 1.20 writes them: node and zone in `topology`, no `serving`.
fn v1beta1(name: &str, ready: bool) -> DynamicObject {
    slice(
        "discovery.k8s.io/v1beta1",
        name,
        Some("web"),
        json!({
            "addressType": "IPv4",
            "endpoints": [{
                "addresses": ["10.1.0.7"],
                "conditions": { "ready": ready },
                "topology": { "kubernetes.io/hostname": "node-a", "topology.kubernetes.io/zone": "us-east-1a" },
            }],
            "ports": [{ "name": "http", "port": 8080, "protocol": "TCP" }],
        }),
    )
}

fn ip(text: &str) -> IpAddr {
    text.parse().unwrap()
}

#[test]
fn a_v1beta1_slice_reads_its_node_and_zone_from_topology() {
    let read = read_slice(&v1beta1("web-abc", true)).unwrap();
    assert_eq!(read.service, "web");
    let [endpoint] = read.endpoints.as_slice() else {
        panic!("{read:?}")
    };
    assert_eq!(endpoint.address, ip("10.1.0.7"));
    assert_eq!(endpoint.node_name.as_deref(), Some("node-a"));
    assert_eq!(endpoint.zone.as_deref(), Some("us-east-1a"));
    assert!(endpoint.ready && endpoint.serving && !endpoint.terminating);
    assert!(endpoint.managed);
    assert_eq!(
        endpoint.port("http"),
        Some(&EndpointPort::new("http", 8080, "TCP"))
    );
}

#[test]
fn a_v1_slice_reads_node_name_zone_and_terminating() {
    let obj = slice(
        "discovery.k8s.io/v1",
        "web-v1",
        Some("web"),
        json!({
            "addressType": "IPv6",
            "endpoints": [
                { "addresses": ["fd00::7"], "nodeName": "node-b", "zone": "us-east-1b",
                  "conditions": { "ready": false, "serving": true, "terminating": true } },
                { "addresses": ["not-an-ip"] },
            ],
            "ports": [{ "port": 443 }, { "name": "all" }],
        }),
    );
    let read = read_slice(&obj).unwrap();
    let [endpoint] = read.endpoints.as_slice() else {
        panic!("{read:?}")
    };
    assert_eq!(endpoint.address, ip("fd00::7"));
    assert_eq!(endpoint.node_name.as_deref(), Some("node-b"));
    assert_eq!(endpoint.zone.as_deref(), Some("us-east-1b"));
    assert!(!endpoint.ready && endpoint.serving && endpoint.terminating);
    // The port without a number ("all ports") cannot be registered; the unnamed one defaults to TCP.
    assert_eq!(endpoint.ports, [EndpointPort::new("", 443, "TCP")]);
}

#[test]
fn slices_without_a_service_or_of_fqdns_give_no_endpoints() {
    assert!(
        read_slice(&slice(
            "discovery.k8s.io/v1",
            "x",
            None,
            json!({ "addressType": "IPv4" })
        ))
        .is_none()
    );
    let fqdn = slice(
        "discovery.k8s.io/v1",
        "f",
        Some("web"),
        json!({ "addressType": "FQDN", "endpoints": [{ "addresses": ["example.com"] }] }),
    );
    assert!(read_slice(&fqdn).unwrap().endpoints.is_empty());
}

#[test]
fn only_the_endpoint_slice_controllers_slices_list_managed_endpoints() {
    // A selector-less Service's slices: written by hand, or mirrored from an Endpoints object anybody wrote.
    for managed_by in [
        None,
        Some("endpointslicemirroring-controller.k8s.io"),
        Some("tenant"),
    ] {
        let mut obj = v1beta1("web-hand", true);
        let labels = obj.metadata.labels.as_mut().unwrap();
        match managed_by {
            Some(value) => labels.insert(MANAGED_BY_LABEL.to_owned(), value.to_owned()),
            None => labels.remove(MANAGED_BY_LABEL),
        };
        let read = read_slice(&obj).unwrap();
        assert!(
            read.endpoints.iter().all(|e| !e.managed),
            "{managed_by:?}: {read:?}"
        );
        assert_eq!(read.endpoints.len(), 1);
    }
}

fn changed(slices: &EndpointSlices) -> Vec<ServiceName> {
    let mut changed: Vec<ServiceName> = slices.take_changed().into_iter().collect();
    changed.sort();
    changed
}

fn web() -> ServiceName {
    ("shop".to_owned(), "web".to_owned())
}

#[test]
fn events_change_the_service_only_when_what_is_kept_changes() {
    let slices = EndpointSlices::default();
    let mut relist = None;
    slices.apply(watcher::Event::Init, &mut relist);
    slices.apply(watcher::Event::InitApply(v1beta1("web-1", true)), &mut relist);
    slices.apply(watcher::Event::InitDone, &mut relist);
    assert_eq!(changed(&slices), [web()]);
    assert_eq!(
        lock(&slices.projection)
            .endpoints_of("shop", "web")
            .ready()
            .count(),
        1
    );

    // The same slice again (a new resourceVersion, nothing kept changed): no change.
    slices.apply(watcher::Event::Apply(v1beta1("web-1", true)), &mut relist);
    assert!(changed(&slices).is_empty());
    // The pod is no longer ready.
    slices.apply(watcher::Event::Apply(v1beta1("web-1", false)), &mut relist);
    assert_eq!(changed(&slices), [web()]);
    assert_eq!(
        lock(&slices.projection)
            .endpoints_of("shop", "web")
            .ready()
            .count(),
        0
    );
    slices.apply(watcher::Event::Delete(v1beta1("web-1", false)), &mut relist);
    assert_eq!(changed(&slices), [web()]);
    assert!(lock(&slices.projection).by_service.is_empty());
    assert!(lock(&slices.projection).by_slice.is_empty());
}

#[test]
fn a_relist_drops_slices_deleted_while_the_watch_was_down() {
    let slices = EndpointSlices::default();
    let mut relist = None;
    slices.apply(watcher::Event::Apply(v1beta1("web-1", true)), &mut relist);
    slices.apply(watcher::Event::Apply(v1beta1("web-2", true)), &mut relist);
    let _ = slices.take_changed();
    slices.apply(watcher::Event::Init, &mut relist);
    slices.apply(watcher::Event::InitApply(v1beta1("web-2", true)), &mut relist);
    // Until the relist ends, the projection is the old one.
    assert_eq!(lock(&slices.projection).by_slice.len(), 2);
    slices.apply(watcher::Event::InitDone, &mut relist);
    assert_eq!(changed(&slices), [web()]);
    let projection = lock(&slices.projection);
    assert_eq!(projection.by_slice.len(), 1);
    assert_eq!(
        projection.by_service[&web()].keys().collect::<Vec<_>>(),
        ["web-2"]
    );
}

#[test]
fn a_slice_that_loses_its_service_label_leaves_that_service() {
    let slices = EndpointSlices::default();
    let mut relist = None;
    slices.apply(watcher::Event::Apply(v1beta1("web-1", true)), &mut relist);
    let _ = slices.take_changed();
    let unlabelled = slice(
        "discovery.k8s.io/v1beta1",
        "web-1",
        None,
        json!({ "addressType": "IPv4" }),
    );
    slices.apply(watcher::Event::Apply(unlabelled), &mut relist);
    assert_eq!(changed(&slices), [web()]);
    assert_eq!(lock(&slices.projection).endpoints_of("shop", "web").endpoints, []);
}

#[tokio::test(start_paused = true)]
async fn a_first_listing_that_never_comes_fails_the_sync_naming_the_rbac_it_needs() {
    let slices = EndpointSlices::default();
    // No watch runs (as when the service controller may not list EndpointSlices): the wait is bounded.
    let error = slices.of("shop", "web").await.unwrap_err();
    let message = error.to_string();
    assert!(
        message.contains("`endpointslices`") && message.contains("30s"),
        "{message}"
    );
    assert!(*slices.start.borrow(), "the watch was asked to start");

    let mut relist = None;
    slices.apply(watcher::Event::Init, &mut relist);
    slices.apply(watcher::Event::InitApply(v1beta1("web-1", true)), &mut relist);
    slices.apply(watcher::Event::InitDone, &mut relist);
    assert_eq!(slices.of("shop", "web").await.unwrap().ready().count(), 1);
}
