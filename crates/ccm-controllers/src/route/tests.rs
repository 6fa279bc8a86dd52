use std::collections::BTreeMap;

use ccm_cloud_provider::{NodeAddress, NodeAddressType::InternalIp};
use k8s_openapi::api::core::v1::NodeCondition;
use k8s_openapi::jiff::Timestamp;

use kube::runtime::reflector;

use super::*;
use crate::keys::CONDITION_NETWORK_UNAVAILABLE;
use ccm_testing::fixtures::NodeBuilder;

fn config() -> RouteConfig {
    RouteConfig::new("k", "10.120.0.0/16,fd00:10:120::/48").unwrap()
}

fn node(name: &str, cidrs: &[&str], ip: &str) -> NodeView {
    NodeView::from(k8s_node(name, cidrs, ip))
}

fn k8s_node(name: &str, cidrs: &[&str], ip: &str) -> Node {
    let mut n = NodeBuilder::new(name)
        .uid(&format!("uid-{name}"))
        .pod_cidrs(cidrs)
        .address("InternalIP", ip)
        .build();
    // Only the list: the route controller reads `podCIDRs`.
    n.spec.get_or_insert_default().pod_cidr = None;
    n
}

fn route(node: &str, cidr: &str) -> Route {
    Route {
        name: format!("{node}-{cidr}"),
        target_node: node.into(),
        destination_cidr: cidr.into(),
        ..Default::default()
    }
}

fn with_addresses(mut r: Route, ip: &str) -> Route {
    r.enable_node_addresses = true;
    r.target_node_addresses = vec![NodeAddress::new(InternalIp, ip)];
    r
}

fn created(plan: &RoutePlan) -> Vec<(String, String)> {
    let mut v: Vec<_> = plan
        .create
        .iter()
        .map(|p| (p.route.target_node.clone(), p.route.destination_cidr.clone()))
        .collect();
    v.sort();
    v
}

fn deleted(plan: &RoutePlan) -> Vec<(String, String)> {
    let mut v: Vec<_> = plan
        .delete
        .iter()
        .map(|r| (r.target_node.clone(), r.destination_cidr.clone()))
        .collect();
    v.sort();
    v
}

fn pairs(v: &[(&str, &str)]) -> Vec<(String, String)> {
    v.iter()
        .map(|(a, b)| ((*a).to_owned(), (*b).to_owned()))
        .collect()
}

#[test]
fn cluster_cidr_validation() {
    assert!(RouteConfig::new("k", "10.0.0.0/8").is_ok());
    assert!(RouteConfig::new("k", "10.0.0.0/8, fd00::/48").is_ok());
    for bad in [
        "",
        "10.0.0.0",
        "10.0.0.0/33",
        "10.0.0.0/8,11.0.0.0/8",
        "10.0.0.0/8,fd00::/48,fd01::/48",
    ] {
        let err = RouteConfig::new("k", bad).unwrap_err().to_string();
        assert!(err.starts_with("invalid cluster-cidr"), "{bad}: {err}");
    }
}

#[test]
fn responsibility_by_network_or_last_address() {
    let c = RouteConfig::new("k", "10.120.0.0/16").unwrap();
    for (cidr, want) in [
        ("10.120.1.0/24", true),
        ("10.121.1.0/24", false),
        ("10.0.0.0/8", false), // contains the cluster CIDR, but neither end is inside it
        ("10.120.255.0/24", true),
        ("not-a-cidr", false),
        ("fd00::/64", false),
    ] {
        assert_eq!(c.is_responsible_for(&route("n", cidr)), want, "{cidr}");
    }
    // Network address outside, last address inside.
    let upper_half = RouteConfig::new("k", "10.120.128.0/17").unwrap();
    assert!(upper_half.is_responsible_for(&route("n", "10.120.0.0/16")));
}

#[test]
fn reconcile_table() {
    let c = config();
    let n1 = node("node-1", &["10.120.0.0/24"], "10.1.0.1");
    let n2 = node("node-2", &["10.120.1.0/24"], "10.1.0.2");
    let dual = node("node-d", &["10.120.2.0/24", "fd00:10:120:2::/64"], "10.1.0.3");
    let no_cidr = node("node-none", &[], "10.1.0.4");
    let dup = node("node-dup", &["10.120.3.0/24", "10.120.3.0/24"], "10.1.0.5");
    let mut blackhole = route("node-1", "10.120.0.0/24");
    blackhole.blackhole = true;
    let mut out_of_range_blackhole = route("gone", "192.168.0.0/24");
    out_of_range_blackhole.blackhole = true;

    // (name, nodes, routes, creates, deletes)
    type Case<'a> = (
        &'a str,
        Vec<&'a NodeView>,
        Vec<Route>,
        Vec<(&'a str, &'a str)>,
        Vec<(&'a str, &'a str)>,
    );
    let cases: Vec<Case<'_>> = vec![
        (
            "all present",
            vec![&n1, &n2],
            vec![route("node-1", "10.120.0.0/24"), route("node-2", "10.120.1.0/24")],
            vec![],
            vec![],
        ),
        (
            "one missing",
            vec![&n1, &n2],
            vec![route("node-1", "10.120.0.0/24")],
            vec![("node-2", "10.120.1.0/24")],
            vec![],
        ),
        (
            "none present",
            vec![&n1, &n2],
            vec![],
            vec![("node-1", "10.120.0.0/24"), ("node-2", "10.120.1.0/24")],
            vec![],
        ),
        (
            "dual stack: one route per CIDR",
            vec![&dual],
            vec![],
            vec![("node-d", "10.120.2.0/24"), ("node-d", "fd00:10:120:2::/64")],
            vec![],
        ),
        (
            "extra route of an unknown node",
            vec![&n1],
            vec![route("node-1", "10.120.0.0/24"), route("gone", "10.120.9.0/24")],
            vec![],
            vec![("gone", "10.120.9.0/24")],
        ),
        (
            "wrong CIDR for a node",
            vec![&n1],
            vec![route("node-1", "10.120.7.0/24")],
            vec![("node-1", "10.120.0.0/24")],
            vec![("node-1", "10.120.7.0/24")],
        ),
        (
            "route outside the cluster CIDR is left alone",
            vec![&n1],
            vec![route("node-1", "10.120.0.0/24"), route("x", "172.16.0.0/24")],
            vec![],
            vec![],
        ),
        (
            "node without CIDR: its route goes",
            vec![&no_cidr],
            vec![route("node-none", "10.120.5.0/24")],
            vec![],
            vec![("node-none", "10.120.5.0/24")],
        ),
        (
            "blackhole in range is replaced",
            vec![&n1],
            vec![blackhole],
            vec![],
            vec![("node-1", "10.120.0.0/24")],
        ),
        (
            "blackhole out of range is kept",
            vec![&n1],
            vec![route("node-1", "10.120.0.0/24"), out_of_range_blackhole],
            vec![],
            vec![],
        ),
        (
            "empty target node in range",
            vec![&n1],
            vec![route("node-1", "10.120.0.0/24"), route("", "10.120.8.0/24")],
            vec![],
            vec![("", "10.120.8.0/24")],
        ),
        (
            "duplicate pod CIDR once",
            vec![&dup],
            vec![],
            vec![("node-dup", "10.120.3.0/24")],
            vec![],
        ),
    ];
    for (name, nodes, routes, creates, deletes) in cases {
        let p = plan(&c, &nodes, &routes);
        assert_eq!(created(&p), pairs(&creates), "{name}: creates");
        assert_eq!(deleted(&p), pairs(&deletes), "{name}: deletes");
    }
}

#[test]
fn blackhole_for_a_node_is_deleted_and_recreated() {
    // The plan keeps the (node, CIDR) pair, so no create is planned in the same pass; the next pass adds it.
    let n1 = node("node-1", &["10.120.0.0/24"], "10.1.0.1");
    let mut b = route("node-1", "10.120.0.0/24");
    b.blackhole = true;
    let p = plan(&config(), &[&n1], &[b]);
    assert_eq!(deleted(&p), pairs(&[("node-1", "10.120.0.0/24")]));
    let next = plan(&config(), &[&n1], &[]);
    assert_eq!(created(&next), pairs(&[("node-1", "10.120.0.0/24")]));
}

#[test]
fn node_address_changes_update_routes_only_when_tracked() {
    let n1 = node("node-1", &["10.120.0.0/24"], "10.1.0.9");
    // Untracked addresses: keep.
    let p = plan(&config(), &[&n1], &[route("node-1", "10.120.0.0/24")]);
    assert!(p.create.is_empty() && p.delete.is_empty() && !p.deletes_first);
    // Tracked and equal: keep.
    let p = plan(
        &config(),
        &[&n1],
        &[with_addresses(route("node-1", "10.120.0.0/24"), "10.1.0.9")],
    );
    assert!(p.create.is_empty() && p.delete.is_empty());
    // Tracked and changed: delete, then create with the new address.
    let p = plan(
        &config(),
        &[&n1],
        &[with_addresses(route("node-1", "10.120.0.0/24"), "10.1.0.1")],
    );
    assert_eq!(deleted(&p), pairs(&[("node-1", "10.120.0.0/24")]));
    assert_eq!(created(&p), pairs(&[("node-1", "10.120.0.0/24")]));
    assert!(p.deletes_first);
    assert_eq!(
        p.create[0].route.target_node_addresses,
        vec![NodeAddress::new(InternalIp, "10.1.0.9")]
    );
    assert_eq!(p.create[0].name_hint, "uid-node-1");
}

#[test]
fn condition_targets() {
    let n1 = node("node-1", &["10.120.0.0/24"], "10.1.0.1");
    let no_cidr = node("node-none", &[], "10.1.0.4");
    let untouched = node("node-other", &[], "10.1.0.5");
    let p = plan(
        &config(),
        &[&n1, &no_cidr, &untouched],
        &[route("node-none", "10.120.5.0/24")],
    );
    assert_eq!(
        p.nodes,
        BTreeMap::from([("node-1".to_owned(), true), ("node-none".to_owned(), false)])
    );
}

fn with_condition(status: &str, reason: &str) -> NodeView {
    let mut n = k8s_node("n", &["10.120.0.0/24"], "10.1.0.1");
    n.status.as_mut().unwrap().conditions = Some(vec![NodeCondition {
        type_: CONDITION_NETWORK_UNAVAILABLE.into(),
        status: status.into(),
        reason: Some(reason.into()),
        ..Default::default()
    }]);
    NodeView::from(n)
}

#[test]
fn network_condition_skip_rule() {
    let clock = Clock::fixed(Timestamp::UNIX_EPOCH);
    // Already equivalent: no write.
    assert!(network_condition(&with_condition("False", "RouteCreated"), true, &clock).is_none());
    assert!(network_condition(&with_condition("True", "NoRouteCreated"), false, &clock).is_none());
    // A CNI's condition (Calico) is overwritten.
    let c = network_condition(&with_condition("False", "CalicoIsUp"), true, &clock).unwrap();
    assert_eq!(
        (c.status.as_str(), c.reason.as_deref()),
        ("False", Some("RouteCreated"))
    );
    assert_eq!(c.message.as_deref(), Some("RouteController created a route"));
    let c = network_condition(&node("n", &[], "1.1.1.1"), false, &clock).unwrap();
    assert_eq!(
        (c.status.as_str(), c.reason.as_deref()),
        ("True", Some("NoRouteCreated"))
    );
    assert!(c.last_heartbeat_time.is_some() && c.last_transition_time.is_some());
}

/// Upstream `TestReconcile…WithCalicoScenario`, through a whole pass against a scripted API: the skip rule
/// needs both status and reason to be ours (reference §5.4), so a `NetworkUnavailable` condition written by a
/// CNI (`CalicoIsUp`, status False) is replaced by `RouteCreated` once the route exists, and by
/// `NoRouteCreated` when creating the route fails; a node already carrying our condition is left alone.
#[tokio::test]
async fn calico_condition_is_replaced_through_a_whole_pass() {
    use ccm_testing::provider::{FakeProvider, Method};

    use crate::mock_api::mock_api;

    let calico = |name: &str, cidr: &str| {
        let mut n = k8s_node(name, &[cidr], "10.1.0.1");
        n.status.as_mut().unwrap().conditions = Some(vec![NodeCondition {
            type_: CONDITION_NETWORK_UNAVAILABLE.into(),
            status: "False".into(),
            reason: Some("CalicoIsUp".into()),
            message: Some("Calico is running on this node".into()),
            ..Default::default()
        }]);
        NodeView::from(n)
    };
    let mut ours = k8s_node("node-ours", &["10.120.2.0/24"], "10.1.0.3");
    ours.status.as_mut().unwrap().conditions = Some(vec![NodeCondition {
        type_: CONDITION_NETWORK_UNAVAILABLE.into(),
        status: "False".into(),
        reason: Some("RouteCreated".into()),
        ..Default::default()
    }]);
    let nodes = [
        // Route already there: nothing to create, the condition is still rewritten.
        calico("node-routed", "10.120.0.0/24"),
        // Route created in this pass.
        calico("node-new", "10.120.1.0/24"),
        // Route creation fails.
        calico("node-failing", "10.120.3.0/24"),
        NodeView::from(ours),
    ];

    let api = mock_api(|_| None);
    let provider = FakeProvider::new();
    provider.add_route("k", route("node-routed", "10.120.0.0/24"));
    provider.add_route("k", route("node-ours", "10.120.2.0/24"));
    provider.fail_for(Method::CreateRoute, "10.120.3.0/24", None, || {
        ccm_cloud_provider::CloudError::other("quota exceeded")
    });
    let (store, mut writer) = reflector::store();
    for n in nodes {
        writer.apply_watcher_event(&kube::runtime::watcher::Event::Apply(CachedNode(n)));
    }
    let config = RouteConfig {
        clock: Clock::fixed(Timestamp::UNIX_EPOCH),
        ..config()
    };
    let ctx = Ctx {
        client: api.client.clone(),
        provider: Arc::new(provider.clone()),
        recorder: EventRecorder::new(
            api.client.clone(),
            "route_controller",
            config.clock.clone(),
            config.metrics.clone(),
        ),
        config,
        store,
        selected: Default::default(),
    };
    reconcile_routes(&ctx).await.unwrap();

    let mut created: Vec<String> = provider
        .calls()
        .into_iter()
        .filter(|c| c.method == Method::CreateRoute)
        .map(|c| c.subject)
        .collect();
    created.sort();
    assert_eq!(created, ["10.120.1.0/24", "10.120.3.0/24"]);
    assert_eq!(provider.count(Method::DeleteRoute), 0);

    let mut patches: Vec<(String, String, String, String)> = api
        .writes()
        .into_iter()
        .map(|r| {
            assert_eq!(r.method, "PATCH", "{r:?}");
            assert_eq!(r.content_type, "application/strategic-merge-patch+json");
            let conditions = r.body["status"]["conditions"].as_array().unwrap().clone();
            assert_eq!(conditions.len(), 1, "only our condition is sent: {r:?}");
            let c = &conditions[0];
            assert_eq!(c["type"], "NetworkUnavailable");
            assert_eq!(c["lastTransitionTime"], "1970-01-01T00:00:00Z");
            (
                r.path,
                c["status"].as_str().unwrap().to_owned(),
                c["reason"].as_str().unwrap().to_owned(),
                c["message"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    patches.sort();
    let patch = |node: &str, status: &str, reason: &str, message: &str| {
        (
            format!("/api/v1/nodes/{node}/status"),
            status.to_owned(),
            reason.to_owned(),
            message.to_owned(),
        )
    };
    assert_eq!(
        patches,
        vec![
            patch(
                "node-failing",
                "True",
                "NoRouteCreated",
                "RouteController failed to create a route"
            ),
            patch(
                "node-new",
                "False",
                "RouteCreated",
                "RouteController created a route"
            ),
            patch(
                "node-routed",
                "False",
                "RouteCreated",
                "RouteController created a route"
            ),
        ],
        "node-ours already has our condition: no write"
    );
    assert_eq!(api.event_reasons(), ["FailedToCreateRoute"]);
}

/// A pass whose provider stops answering is abandoned at its deadline with an error, not waited on forever.
#[tokio::test(start_paused = true)]
async fn a_pass_that_outlasts_its_deadline_is_abandoned() {
    use ccm_testing::provider::FakeProvider;

    use crate::mock_api::mock_api;

    let api = mock_api(|_| None);
    let provider = FakeProvider::new();
    provider.set_delay(Duration::from_secs(3600));
    let (store, mut writer) = reflector::store();
    writer.apply_watcher_event(&kube::runtime::watcher::Event::Apply(CachedNode(node(
        "n",
        &["10.120.0.0/24"],
        "10.1.0.1",
    ))));
    let config = RouteConfig {
        pass_deadline: Duration::from_secs(60),
        ..config()
    };
    let ctx = Ctx {
        client: api.client.clone(),
        provider: Arc::new(provider),
        recorder: EventRecorder::new(
            api.client.clone(),
            "route_controller",
            config.clock.clone(),
            config.metrics.clone(),
        ),
        config,
        store,
        selected: Default::default(),
    };
    let start = tokio::time::Instant::now();
    let err = reconcile_within_deadline(&ctx).await.unwrap_err();
    assert!(matches!(err, Error::DeadlineExceeded { .. }), "{err}");
    assert_eq!(start.elapsed(), Duration::from_secs(60));
}
