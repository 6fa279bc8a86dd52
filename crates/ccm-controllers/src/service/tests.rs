use std::time::Duration;

use k8s_openapi::{
    api::core::v1::{LoadBalancerIngress, Node, ServicePort, ServiceSpec, SessionAffinityConfig, Taint},
    apimachinery::pkg::{apis::meta::v1::Time, util::intstr::IntOrString},
    jiff::Timestamp,
};

use kube::runtime::reflector;

use super::*;
use crate::keys::{FINALIZER_LB_CLEANUP, LABEL_EXCLUDE_FROM_LB, TAINT_TO_BE_DELETED};
use ccm_cloud_provider::CloudError;
use ccm_testing::fixtures::{NodeBuilder, ServiceBuilder};
use serde_json::json;

/// The work-queue key written `text`.
fn key(text: &str) -> ServiceKey {
    text.parse().expect("a service key")
}

fn lb_service() -> Service {
    ServiceBuilder::new("ns", "svc")
        .uid("uid-1")
        .port(80, "TCP", Some(30080))
        .build()
}

fn with(f: impl FnOnce(&mut Service)) -> Service {
    let mut s = lb_service();
    f(&mut s);
    s
}

fn spec(s: &mut Service) -> &mut ServiceSpec {
    s.spec.as_mut().unwrap()
}

#[test]
fn load_balancer_class_means_not_ours() {
    // spec.loadBalancerClass (1.21+) is pruned by the 1.20 test apiserver, so this is covered here.
    assert!(wants_load_balancer(&lb_service()));
    let classed = with(|s| spec(s).load_balancer_class = Some("example.com/other".into()));
    assert!(!wants_load_balancer(&classed));
    assert!(!needs_cleanup(&classed), "without our finalizer: never touched");
    let classed_with_finalizer = with(|s| {
        spec(s).load_balancer_class = Some("x".into());
        s.metadata.finalizers = Some(vec![FINALIZER_LB_CLEANUP.into()]);
    });
    assert!(!wants_load_balancer(&classed_with_finalizer));
    assert!(
        !needs_cleanup(&classed_with_finalizer),
        "still type LoadBalancer, not deleting"
    );
    assert!(!wants_load_balancer(&with(
        |s| spec(s).type_ = Some("ClusterIP".into())
    )));
}

#[test]
fn needs_cleanup_table() {
    let finalized = |f: &mut Service| f.metadata.finalizers = Some(vec![FINALIZER_LB_CLEANUP.into()]);
    let deleting = |f: &mut Service| f.metadata.deletion_timestamp = Some(Time(Timestamp::UNIX_EPOCH));
    let cluster_ip = |f: &mut Service| spec(f).type_ = Some("ClusterIP".into());
    assert!(!needs_cleanup(&lb_service()));
    assert!(!needs_cleanup(&with(finalized)));
    assert!(needs_cleanup(&with(|s| {
        finalized(s);
        deleting(s);
    })));
    assert!(needs_cleanup(&with(|s| {
        finalized(s);
        cluster_ip(s);
    })));
    assert!(!needs_cleanup(&with(deleting)), "no finalizer: not ours to clean");
}

#[test]
fn needs_update_table() {
    let base = lb_service();
    let cases: Vec<(&str, Service, Service, bool)> = vec![
        ("unchanged", base.clone(), base.clone(), false),
        (
            "both not LB",
            with(|s| spec(s).type_ = Some("ClusterIP".into())),
            with(|s| spec(s).type_ = Some("NodePort".into())),
            false,
        ),
        (
            "type to LB",
            with(|s| spec(s).type_ = Some("ClusterIP".into())),
            base.clone(),
            true,
        ),
        (
            "type from LB",
            base.clone(),
            with(|s| spec(s).type_ = Some("NodePort".into())),
            true,
        ),
        (
            "source ranges",
            base.clone(),
            with(|s| spec(s).load_balancer_source_ranges = Some(vec!["10.0.0.0/8".into()])),
            true,
        ),
        (
            "port added",
            base.clone(),
            with(|s| {
                spec(s).ports.as_mut().unwrap().push(ServicePort {
                    port: 443,
                    ..Default::default()
                })
            }),
            true,
        ),
        (
            "node port",
            base.clone(),
            with(|s| spec(s).ports.as_mut().unwrap()[0].node_port = Some(30081)),
            true,
        ),
        (
            "target port",
            base.clone(),
            with(|s| spec(s).ports.as_mut().unwrap()[0].target_port = Some(IntOrString::Int(9090))),
            true,
        ),
        (
            "app protocol",
            base.clone(),
            with(|s| spec(s).ports.as_mut().unwrap()[0].app_protocol = Some("http".into())),
            true,
        ),
        (
            "session affinity",
            base.clone(),
            with(|s| spec(s).session_affinity = Some("ClientIP".into())),
            true,
        ),
        (
            "session affinity config",
            base.clone(),
            with(|s| spec(s).session_affinity_config = Some(SessionAffinityConfig::default())),
            true,
        ),
        (
            "load balancer IP",
            base.clone(),
            with(|s| spec(s).load_balancer_ip = Some("1.2.3.4".into())),
            true,
        ),
        (
            "external IPs",
            base.clone(),
            with(|s| spec(s).external_ips = Some(vec!["1.1.1.1".into()])),
            true,
        ),
        (
            "annotations",
            base.clone(),
            with(|s| s.metadata.annotations = Some([("a".to_owned(), "b".to_owned())].into())),
            true,
        ),
        (
            "UID",
            base.clone(),
            with(|s| s.metadata.uid = Some("uid-2".into())),
            true,
        ),
        (
            "traffic policy",
            base.clone(),
            with(|s| spec(s).external_traffic_policy = Some("Local".into())),
            true,
        ),
        (
            "health check node port",
            base.clone(),
            with(|s| spec(s).health_check_node_port = Some(31000)),
            true,
        ),
        (
            "ip families count",
            base.clone(),
            with(|s| spec(s).ip_families = Some(vec!["IPv4".into(), "IPv6".into()])),
            true,
        ),
        (
            "labels only",
            base.clone(),
            with(|s| s.metadata.labels = Some([("a".to_owned(), "b".to_owned())].into())),
            false,
        ),
        (
            "finalizers only",
            base.clone(),
            with(|s| s.metadata.finalizers = Some(vec!["x".into()])),
            false,
        ),
        (
            "selector only",
            base.clone(),
            with(|s| spec(s).selector = Some([("app".to_owned(), "x".to_owned())].into())),
            false,
        ),
        (
            "ip family policy",
            base,
            with(|s| spec(s).ip_family_policy = Some("PreferDualStack".into())),
            false,
        ),
    ];
    for (name, old, new, want) in cases {
        assert_eq!(needs_update(&old, &new), want, "{name}");
        // What the controller keeps of a Service instead of a copy answers the same.
        let (seen_old, seen_new) = (SeenService::of(&old), SeenService::of(&new));
        assert_eq!(seen_old.needs_update_to(&seen_new), want, "{name}: SeenService");
        assert_eq!(
            seen_new.needs_update_to(&seen_old),
            want,
            "{name}: SeenService, reversed"
        );
    }
}

fn node(f: impl FnOnce(&mut Node)) -> NodeView {
    let mut n = NodeBuilder::new("n").provider_id("fake://1").build();
    f(&mut n);
    NodeView::from(n)
}

fn label(n: &mut Node, v: &str) {
    n.metadata.labels = Some([(LABEL_EXCLUDE_FROM_LB.to_owned(), v.to_owned())].into());
}

#[test]
fn node_predicates_table() {
    let cases: Vec<(&str, NodeView, bool)> = vec![
        ("plain", node(|_| {}), true),
        ("exclusion true", node(|n| label(n, "true")), false),
        ("exclusion T", node(|n| label(n, "T")), false),
        ("exclusion false", node(|n| label(n, "false")), true),
        ("exclusion 0", node(|n| label(n, "0")), true),
        ("exclusion empty", node(|n| label(n, "")), false),
        ("exclusion garbage", node(|n| label(n, "yes")), false),
        (
            "deleting",
            node(|n| n.metadata.deletion_timestamp = Some(Time(Timestamp::UNIX_EPOCH))),
            false,
        ),
        (
            "autoscaler taint",
            node(|n| {
                n.spec.as_mut().unwrap().taints = Some(vec![Taint {
                    key: TAINT_TO_BE_DELETED.into(),
                    effect: "NoSchedule".into(),
                    ..Default::default()
                }])
            }),
            false,
        ),
        ("no provider ID", node(|n| n.spec = None), true),
        (
            "not ready",
            node(|n| {
                n.status = Some(k8s_openapi::api::core::v1::NodeStatus {
                    conditions: Some(vec![k8s_openapi::api::core::v1::NodeCondition {
                        type_: "Ready".into(),
                        status: "False".into(),
                        ..Default::default()
                    }]),
                    ..Default::default()
                })
            }),
            true,
        ),
        (
            "unschedulable",
            node(|n| n.spec.as_mut().unwrap().unschedulable = Some(true)),
            true,
        ),
    ];
    for (name, n, want) in cases {
        assert_eq!(in_stable_node_set(&n), want, "{name}");
    }
}

#[test]
fn only_membership_and_provider_id_changes_sync_nodes() {
    let base = NodeSummary::of(&node(|_| {}));
    let changes: Vec<(&str, NodeView, bool)> = vec![
        ("spurious", node(|_| {}), false),
        (
            "readiness",
            node(|n| n.metadata.labels = Some([("other".to_owned(), "x".to_owned())].into())),
            false,
        ),
        ("exclusion", node(|n| label(n, "true")), true),
        (
            "provider ID",
            node(|n| n.spec.as_mut().unwrap().provider_id = Some("fake://2".into())),
            true,
        ),
        (
            "deleting",
            node(|n| n.metadata.deletion_timestamp = Some(Time(Timestamp::UNIX_EPOCH))),
            true,
        ),
    ];
    for (name, new, want) in changes {
        assert_eq!(
            should_sync_updated_node(&base, &NodeSummary::of(&new)),
            want,
            "{name}"
        );
    }
}

#[test]
fn host_sets_compare_names_and_provider_ids() {
    let a = node(|_| {});
    let b = node(|n| n.spec.as_mut().unwrap().provider_id = Some("fake://2".into()));
    assert_ne!(
        host_set(&[&a]),
        host_set(&[&b]),
        "TestNodesNotEqual: providerID differs"
    );
    assert_eq!(host_set(&[&a]), host_set(&[&node(|_| {})]));
}

#[test]
fn ingress_comparison_treats_absent_as_empty() {
    let ip = |ip: &str| {
        vec![LoadBalancerIngress {
            ip: Some(ip.into()),
            ..Default::default()
        }]
    };
    assert!(ingress_equal(None, Some(&vec![])));
    assert!(ingress_equal(Some(&ip("1.1.1.1")), Some(&ip("1.1.1.1"))));
    assert!(!ingress_equal(None, Some(&ip("1.1.1.1"))));
    // ipMode (1.29+, pruned by the 1.20 test apiserver) is part of the comparison.
    let mut vip = ip("1.1.1.1");
    vip[0].ip_mode = Some("VIP".into());
    assert!(!ingress_equal(Some(&ip("1.1.1.1")), Some(&vip)));
}

#[test]
fn the_uid_precondition_goes_into_metadata() {
    assert_eq!(
        with_uid_precondition(finalizer_patch(true), Some("u-1")),
        json!({ "metadata": { "uid": "u-1", "finalizers": [FINALIZER_LB_CLEANUP] } })
    );
    assert_eq!(
        with_uid_precondition(status_patch(&LoadBalancerStatus::default()), Some("u-1")),
        json!({ "metadata": { "uid": "u-1" }, "status": { "loadBalancer": { "ingress": null } } })
    );
    assert_eq!(
        with_uid_precondition(finalizer_patch(false), None),
        finalizer_patch(false),
        "a Service without a UID (never from an apiserver) gets none"
    );
}

#[test]
fn patches_touch_only_our_finalizer_and_the_status() {
    assert_eq!(
        finalizer_patch(true),
        json!({ "metadata": { "finalizers": [FINALIZER_LB_CLEANUP] } })
    );
    assert_eq!(
        finalizer_patch(false),
        json!({ "metadata": { "$deleteFromPrimitiveList/finalizers": [FINALIZER_LB_CLEANUP] } })
    );
    assert_eq!(
        status_patch(&LoadBalancerStatus::default()),
        json!({ "status": { "loadBalancer": { "ingress": null } } })
    );
    let status = LoadBalancerStatus {
        ingress: Some(vec![LoadBalancerIngress {
            ip: Some("1.2.3.4".into()),
            ip_mode: Some("VIP".into()),
            ..Default::default()
        }]),
    };
    assert_eq!(
        status_patch(&status),
        json!({ "status": { "loadBalancer": { "ingress": [{ "ip": "1.2.3.4", "ipMode": "VIP" }] } } })
    );
}

#[test]
fn retry_after_is_honoured_exactly_and_not_counted() {
    // TestServiceQueueDelay: a RetryError requeues after exactly its delay; a plain error backs off.
    let backoff = Backoff::<String>::new(Duration::from_secs(5), Duration::from_secs(300));
    let retry = Error::cloud(
        "failed to ensure load balancer",
        "ns/svc",
        CloudError::retry_after("creating", Duration::from_secs(42)),
    );
    assert_eq!(retry.retry_delay(&backoff, "ns/svc"), Duration::from_secs(42));
    assert_eq!(backoff.failures("ns/svc"), 0);
    let plain = Error::cloud(
        "failed to ensure load balancer",
        "ns/svc",
        CloudError::other("boom"),
    );
    assert_eq!(plain.retry_delay(&backoff, "ns/svc"), Duration::from_secs(5));
    assert_eq!(plain.retry_delay(&backoff, "ns/svc"), Duration::from_secs(10));
    assert_eq!(backoff.failures("ns/svc"), 2);
}

// === Whole-sync tests against a scripted API (exact requests) and the fake cloud ===

mod seen;

mod scripted {
    use ccm_testing::provider::{FakeProvider, Method};
    use kube::runtime::reflector::store::Writer;

    use super::*;
    use crate::mock_api::{MockApi, Recorded, mock_api, status_error};

    const STATUS_PATH: &str = "/api/v1/namespaces/ns/services/svc/status";

    struct Harness {
        ctx: Ctx<FakeProvider>,
        api: MockApi,
        provider: FakeProvider,
        services: Writer<Service>,
        nodes: Writer<CachedNode>,
    }

    impl Harness {
        /// The provider's calls so far, as method and subject.
        fn calls(&self) -> Vec<(Method, String)> {
            self.provider
                .calls()
                .into_iter()
                .map(|c| (c.method, c.subject))
                .collect()
        }
    }

    fn named_node(name: &str) -> Node {
        NodeBuilder::new(name)
            .provider_id(&format!("fake://{name}"))
            .build()
    }

    fn harness(
        respond: impl Fn(&Recorded) -> Option<(u16, serde_json::Value)> + Send + 'static,
        services: Vec<Service>,
        nodes: Vec<Node>,
    ) -> Harness {
        let api = mock_api(respond);
        let provider = FakeProvider::new();
        let (service_store, mut service_writer) = reflector::store();
        let (node_store, mut node_writer) = reflector::store();
        for s in services {
            service_writer.apply_watcher_event(&watcher::Event::Apply(s));
        }
        for n in nodes {
            node_writer.apply_watcher_event(&watcher::Event::Apply(CachedNode::from(n)));
        }
        let config = ServiceConfig {
            clock: Clock::fixed(Timestamp::UNIX_EPOCH),
            ..ServiceConfig::default()
        };
        let ctx = Ctx {
            client: api.client.clone(),
            provider: Arc::new(provider.clone()),
            backoff: Backoff::new(config.min_retry_delay, config.max_retry_delay),
            recorder: EventRecorder::new(
                api.client.clone(),
                "service-controller",
                config.clock.clone(),
                config.metrics.clone(),
            ),
            config,
            services: service_store,
            nodes: node_store,
            queue: WorkQueue::default(),
            states: Default::default(),
            latest_hosts: Mutex::default(),
            endpoints: Default::default(),
            changes: Default::default(),
            node_sync: Notify::new(),
        };
        Harness {
            ctx,
            api,
            provider,
            services: service_writer,
            nodes: node_writer,
        }
    }

    /// A finalized LoadBalancer Service `ns/<name>` with its own UID.
    fn svc(name: &str) -> Service {
        with(|s| {
            s.metadata.name = Some(name.into());
            s.metadata.uid = Some(format!("uid-{name}"));
            finalized(s);
        })
    }

    fn finalized(s: &mut Service) {
        s.metadata.finalizers = Some(vec![FINALIZER_LB_CLEANUP.into()]);
    }

    fn ingress(s: &mut Service, ip: &str) {
        s.status = Some(k8s_openapi::api::core::v1::ServiceStatus {
            load_balancer: Some(k8s_openapi::api::core::v1::LoadBalancerStatus {
                ingress: Some(vec![LoadBalancerIngress {
                    ip: Some(ip.into()),
                    ports: Some(vec![k8s_openapi::api::core::v1::PortStatus {
                        port: 80,
                        protocol: "TCP".into(),
                        error: None,
                    }]),
                    ..Default::default()
                }]),
            }),
            ..Default::default()
        });
    }

    /// The Event posted with `reason` (the first one).
    fn event(api: &MockApi, reason: &str) -> Recorded {
        api.requests()
            .into_iter()
            .find(|r| r.is_event() && r.body["reason"] == reason)
            .unwrap_or_else(|| panic!("no {reason} Event in {:?}", api.event_reasons()))
    }

    /// The PATCHes of the Service, as (content type, body), each without its UID precondition (which must be
    /// there: see `every_patch_carries_the_services_uid`).
    fn patches(api: &MockApi) -> Vec<(String, serde_json::Value)> {
        api.writes()
            .into_iter()
            .map(|r| {
                assert!(r.is_patch_of(STATUS_PATH), "unexpected request {r:?}");
                let mut body = r.body;
                let metadata = body["metadata"].as_object_mut().expect("metadata");
                assert!(
                    metadata.remove("uid").is_some(),
                    "no UID precondition in {metadata:?}"
                );
                if metadata.is_empty() {
                    body.as_object_mut().unwrap().remove("metadata");
                }
                (r.content_type, body)
            })
            .collect()
    }

    const STRATEGIC: &str = "application/strategic-merge-patch+json";
    const MERGE: &str = "application/merge-patch+json";

    /// The status patch for what the fake cloud reports (its ingress carries the Service's ports).
    fn status_body(ip: Option<&str>) -> serde_json::Value {
        match ip {
            Some(ip) => json!({ "status": { "loadBalancer": { "ingress": [
                { "ip": ip, "ports": [{ "port": 80, "protocol": "TCP" }] }
            ] } } }),
            None => json!({ "status": { "loadBalancer": { "ingress": null } } }),
        }
    }

    /// Upstream `TestProcessServiceCreateOrUpdateK8sError`: a Conflict on the status patch fails the sync
    /// (no retry within the sync, Warning `SyncLoadBalancerFailed`, the key is retried with backoff); a
    /// NotFound (the Service vanished) is success.
    #[tokio::test]
    async fn status_patch_conflict_fails_the_sync_and_not_found_is_ignored() {
        for (code, reason) in [(409, "Conflict"), (404, "NotFound")] {
            let h = harness(
                move |r| r.is_patch_of(STATUS_PATH).then(|| status_error(code, reason)),
                vec![with(finalized)],
                vec![named_node("n1")],
            );
            let result = sync_service(&h.ctx, &key("ns/svc")).await;
            assert_eq!(
                patches(&h.api),
                vec![(MERGE.to_owned(), status_body(Some("192.0.2.10")))],
                "{reason}: exactly one status patch, not retried"
            );
            assert_eq!(h.provider.count(Method::EnsureLoadBalancer), 1, "{reason}");
            let events = h.api.event_reasons();
            if code == 409 {
                let error = result.expect_err("a Conflict must fail the sync");
                assert!(
                    ErrorChain(&error)
                        .to_string()
                        .contains("failed to update load balancer status"),
                    "{}",
                    ErrorChain(&error)
                );
                assert!(error.retry_after().is_none(), "plain backoff, not retry-after");
                assert_eq!(
                    events,
                    [
                        "EnsuringLoadBalancer",
                        "EnsuredLoadBalancer",
                        "SyncLoadBalancerFailed"
                    ]
                );
                assert!(
                    h.ctx.states.read(&key("ns/svc"), |s| s.cached().is_some()),
                    "still tracked for node syncs"
                );
            } else {
                result.expect("a NotFound on the status patch is success");
                assert_eq!(events, ["EnsuringLoadBalancer", "EnsuredLoadBalancer"]);
            }
        }
    }

    /// A Conflict on the finalizer patch fails before any cloud call.
    #[tokio::test]
    async fn finalizer_patch_conflict_fails_before_the_cloud_is_called() {
        let h = harness(
            |r| r.is_patch_of(STATUS_PATH).then(|| status_error(409, "Conflict")),
            vec![lb_service()],
            vec![named_node("n1")],
        );
        let error = sync_service(&h.ctx, &key("ns/svc")).await.expect_err("conflict");
        assert!(
            ErrorChain(&error)
                .to_string()
                .contains("failed to add load balancer cleanup finalizer")
        );
        assert_eq!(h.provider.total_calls(), 0);
        assert_eq!(patches(&h.api).len(), 1);
    }

    /// Upstream `TestSyncLoadBalancerIfNeeded`: which patches each case sends, and which cloud calls.
    #[tokio::test]
    async fn sync_load_balancer_if_needed_patch_counts() {
        let deleting = |s: &mut Service| s.metadata.deletion_timestamp = Some(Time(Timestamp::UNIX_EPOCH));
        let cluster_ip = |s: &mut Service| spec(s).type_ = Some("ClusterIP".into());
        let add_finalizer = (STRATEGIC.to_owned(), finalizer_patch(true));
        let remove_finalizer = (STRATEGIC.to_owned(), finalizer_patch(false));
        let set_status = (MERGE.to_owned(), status_body(Some("192.0.2.10")));
        let clear_status = (MERGE.to_owned(), status_body(None));
        #[allow(clippy::type_complexity)]
        let cases: Vec<(&str, Service, Op, Vec<(String, serde_json::Value)>, Vec<Method>)> = vec![
            (
                "new LoadBalancer: finalizer first, then status",
                lb_service(),
                Op::Ensure,
                vec![add_finalizer.clone(), set_status.clone()],
                vec![Method::EnsureLoadBalancer],
            ),
            (
                "finalizer present, no status yet: status only",
                with(finalized),
                Op::Ensure,
                vec![set_status],
                vec![Method::EnsureLoadBalancer],
            ),
            (
                "finalizer present, status unchanged: no patch",
                with(|s| {
                    finalized(s);
                    ingress(s, "192.0.2.10");
                }),
                Op::Ensure,
                vec![],
                vec![Method::EnsureLoadBalancer],
            ),
            (
                "status present, finalizer missing: finalizer only",
                with(|s| ingress(s, "192.0.2.10")),
                Op::Ensure,
                vec![add_finalizer],
                vec![Method::EnsureLoadBalancer],
            ),
            (
                "another class, never ours: no patch, no ensure or delete",
                with(|s| spec(s).load_balancer_class = Some("example.com/other".into())),
                Op::Delete,
                vec![],
                vec![Method::GetLoadBalancer],
            ),
            (
                "finalizer on a ClusterIP with status: clear status, then remove finalizer",
                with(|s| {
                    finalized(s);
                    ingress(s, "192.0.2.10");
                    cluster_ip(s);
                }),
                Op::Delete,
                vec![clear_status.clone(), remove_finalizer.clone()],
                vec![Method::EnsureLoadBalancerDeleted],
            ),
            (
                "deleting with finalizer and status: clear status, then remove finalizer",
                with(|s| {
                    finalized(s);
                    ingress(s, "192.0.2.10");
                    deleting(s);
                }),
                Op::Delete,
                vec![clear_status, remove_finalizer],
                vec![Method::EnsureLoadBalancerDeleted],
            ),
        ];
        for (name, svc, want_op, want_patches, want_calls) in cases {
            let h = harness(|_| None, vec![svc.clone()], vec![named_node("n1")]);
            // For the delete cases a load balancer exists in the cloud.
            if want_calls.contains(&Method::EnsureLoadBalancerDeleted) {
                let lb = h.provider.load_balancer().unwrap();
                lb.ensure_load_balancer("kubernetes", &lb_service(), &[])
                    .await
                    .unwrap();
                h.provider.clear_calls();
            }
            let lb = h.provider.load_balancer().unwrap();
            let op = sync_load_balancer_if_needed(&h.ctx, lb, &svc).await.expect(name);
            assert_eq!(op, want_op, "{name}");
            assert_eq!(patches(&h.api), want_patches, "{name}");
            let calls: Vec<Method> = h.provider.calls().iter().map(|c| c.method).collect();
            assert_eq!(calls, want_calls, "{name}");
        }
    }

    /// The provider's notices become Events on the Service, in order, between `EnsuringLoadBalancer` and
    /// `EnsuredLoadBalancer`.
    #[tokio::test]
    async fn provider_notices_become_events_on_the_service() {
        let h = harness(|_| None, vec![with(finalized)], vec![named_node("n1")]);
        h.provider.set_load_balancer_notices(vec![
            ccm_cloud_provider::Notice::warning("RecreatingLoadBalancer", "scheme changed: new DNS name"),
            ccm_cloud_provider::Notice::normal("Other", "fine"),
        ]);
        let lb = h.provider.load_balancer().unwrap();
        sync_load_balancer_if_needed(&h.ctx, lb, &with(finalized))
            .await
            .unwrap();
        assert_eq!(
            h.api.event_reasons(),
            [
                "EnsuringLoadBalancer",
                "RecreatingLoadBalancer",
                "Other",
                "EnsuredLoadBalancer"
            ]
        );
        let warning = event(&h.api, "RecreatingLoadBalancer");
        assert_eq!(warning.body["type"], "Warning");
        assert_eq!(warning.body["message"], "scheme changed: new DNS name");
    }

    /// A Service switched to another controller (`ImplementedElsewhere`) while its status still shows this
    /// provider's load balancer gets a Warning that the load balancer is left behind; one showing another
    /// controller's address gets none.
    #[tokio::test]
    async fn a_load_balancer_left_behind_by_a_switch_is_a_warning() {
        let served = with(|s| {
            finalized(s);
            ingress(s, "192.0.2.10");
        });
        let h = harness(|_| None, vec![served.clone()], vec![named_node("n1")]);
        let lb = h.provider.load_balancer().unwrap();
        sync_load_balancer_if_needed(&h.ctx, lb, &served).await.unwrap();
        h.provider.fail(Method::EnsureLoadBalancer, None, || {
            CloudError::ImplementedElsewhere
        });
        sync_load_balancer_if_needed(&h.ctx, lb, &served).await.unwrap();
        assert_eq!(
            h.api.event_reasons().last().map(String::as_str),
            Some("LoadBalancerLeftBehind")
        );
        let warning = event(&h.api, "LoadBalancerLeftBehind");
        assert_eq!(warning.body["type"], "Warning");
        assert!(warning.body["message"].as_str().unwrap().contains("192.0.2.10"));
        // Another controller's address in the status: not ours, no Warning.
        let theirs = with(|s| {
            finalized(s);
            ingress(s, "198.51.100.1");
        });
        let before = h.api.event_reasons().len();
        sync_load_balancer_if_needed(&h.ctx, lb, &theirs).await.unwrap();
        assert!(!h.api.event_reasons()[before..].contains(&"LoadBalancerLeftBehind".to_owned()));
    }

    /// A notice about a Node (a target the provider skipped) is an Event on that Node; one about a Node that is
    /// gone is dropped.
    #[tokio::test]
    async fn provider_notices_about_a_node_go_on_the_node() {
        let h = harness(|_| None, vec![with(finalized)], vec![named_node("n1")]);
        h.provider.set_load_balancer_notices(vec![
            ccm_cloud_provider::Notice::warning_on_node("n1", "AmbiguousSecurityGroups", "two groups"),
            ccm_cloud_provider::Notice::warning_on_node("gone", "AmbiguousSecurityGroups", "two groups"),
        ]);
        let lb = h.provider.load_balancer().unwrap();
        sync_load_balancer_if_needed(&h.ctx, lb, &with(finalized))
            .await
            .unwrap();
        assert_eq!(
            h.api.event_reasons(),
            [
                "EnsuringLoadBalancer",
                "AmbiguousSecurityGroups",
                "EnsuredLoadBalancer"
            ]
        );
        let warning = event(&h.api, "AmbiguousSecurityGroups");
        assert_eq!(warning.body["involvedObject"]["kind"], "Node");
        assert_eq!(warning.body["involvedObject"]["name"], "n1");
    }

    /// The leak of kubernetes#79994: a deleting Service whose load balancer is already gone (an earlier attempt
    /// deleted it, then failed on its security group) still gets the provider's delete, which removes the
    /// leftovers, before the finalizer goes.
    #[tokio::test]
    async fn a_deleting_service_without_a_load_balancer_still_gets_the_providers_delete() {
        let deleting = with(|s| {
            finalized(s);
            s.metadata.deletion_timestamp = Some(Time(Timestamp::UNIX_EPOCH));
        });
        let h = harness(|_| None, vec![deleting.clone()], vec![named_node("n1")]);
        let lb = h.provider.load_balancer().unwrap();
        assert_eq!(lb.get_load_balancer("kubernetes", &deleting).await.unwrap(), None);
        h.provider.clear_calls();
        let op = sync_load_balancer_if_needed(&h.ctx, lb, &deleting).await.unwrap();
        assert_eq!(op, Op::Delete);
        let calls: Vec<Method> = h.provider.calls().iter().map(|c| c.method).collect();
        assert_eq!(calls, [Method::EnsureLoadBalancerDeleted]);
        assert_eq!(patches(&h.api), [(STRATEGIC.to_owned(), finalizer_patch(false))]);
    }

    /// A deletion that waits on the cloud keeps the finalizer, says what it waits for once (Normal), retries
    /// with a growing delay capped at a minute, turns into a Warning with slow retries after the patience, and
    /// finishes (finalizer removed) when the provider is done.
    #[tokio::test(start_paused = true)]
    async fn a_deletion_waiting_on_the_cloud_keeps_the_finalizer_until_the_provider_is_done() {
        let deleting = with(|s| {
            finalized(s);
            s.metadata.deletion_timestamp = Some(Time(Timestamp::UNIX_EPOCH));
        });
        let h = harness(|_| None, vec![deleting.clone()], vec![named_node("n1")]);
        let what = "security group sg-1 of load balancer a1 to be released";
        h.provider
            .fail(Method::EnsureLoadBalancerDeleted, Some(9), move || {
                CloudError::waiting(what, Duration::from_secs(10))
            });
        let lb = h.provider.load_balancer().unwrap();
        let mut delays = Vec::new();
        for _ in 0..7 {
            match sync_load_balancer_if_needed(&h.ctx, lb, &deleting).await {
                Err(Error::Waiting {
                    after, waiting_for, ..
                }) => {
                    assert_eq!(waiting_for, what);
                    delays.push(after.as_secs());
                    tokio::time::advance(after).await;
                }
                other => panic!("expected a wait, got {other:?}"),
            }
        }
        assert!(patches(&h.api).is_empty(), "the finalizer stays while waiting");
        assert_eq!(
            delays,
            [10, 10, 20, 40, 60, 60, 60],
            "backoff from the provider's delay, capped"
        );
        assert_eq!(
            h.api.event_reasons(),
            ["DeletingLoadBalancer", "LoadBalancerDeletionPending"],
            "one Normal Event for the whole wait"
        );

        // Past the patience (15 minutes): a Warning, then retries every max_retry_delay.
        tokio::time::advance(Duration::from_secs(15 * 60)).await;
        let Err(Error::Waiting { after, .. }) = sync_load_balancer_if_needed(&h.ctx, lb, &deleting).await
        else {
            panic!("expected a wait");
        };
        assert_eq!(after, Duration::from_secs(300));
        let warning = event(&h.api, "LoadBalancerDeletionStuck");
        assert_eq!(warning.body["type"], "Warning");
        assert!(
            warning.body["message"].as_str().unwrap().contains(what),
            "{warning:?}"
        );
        assert!(patches(&h.api).is_empty());

        // The provider is done: the finalizer goes.
        h.provider.clear_failures();
        let op = sync_load_balancer_if_needed(&h.ctx, lb, &deleting).await.unwrap();
        assert_eq!(op, Op::Delete);
        assert_eq!(patches(&h.api), [(STRATEGIC.to_owned(), finalizer_patch(false))]);
        assert_eq!(
            h.api.event_reasons().last().map(String::as_str),
            Some("DeletedLoadBalancer")
        );
        assert!(!h.ctx.states.any(|s| s.is_waiting()));
    }

    /// A drift pass asks the provider once about every ensured Service, re-ensures only the drifted one, and
    /// says what was repaired once the ensure succeeded; a pass without drift changes nothing.
    #[tokio::test]
    async fn drift_detection_re_ensures_only_drifted_load_balancers() {
        let h = harness(|_| None, vec![svc("svc1"), svc("svc2")], vec![named_node("n1")]);
        sync_service(&h.ctx, &key("ns/svc1")).await.unwrap();
        sync_service(&h.ctx, &key("ns/svc2")).await.unwrap();
        h.provider.clear_calls();

        drift::detect(&h.ctx).await;
        assert_eq!(
            h.provider.batch_sizes(Method::DriftedLoadBalancers),
            [2],
            "one call for both"
        );
        assert_eq!(h.ctx.queue.len(), 0, "no drift, nothing queued");

        h.provider
            .set_drift("ns/svc2", vec!["listener 443 missing".into()]);
        drift::detect(&h.ctx).await;
        let queued = h.ctx.queue.next_batch(10, Duration::ZERO).await.unwrap();
        assert_eq!(queued, [key("ns/svc2")]);
        for key in &queued {
            sync_service(&h.ctx, key).await.unwrap();
            h.ctx.queue.done(key);
        }
        let calls = h.calls();
        assert_eq!(
            calls,
            [
                (Method::DriftedLoadBalancers, String::new()),
                (Method::DriftedLoadBalancers, String::new()),
                (Method::EnsureLoadBalancer, "ns/svc2".to_owned())
            ]
        );
        let repaired = event(&h.api, "LoadBalancerDriftRepaired");
        assert_eq!(repaired.body["type"], "Normal");
        assert!(
            repaired.body["message"]
                .as_str()
                .unwrap()
                .contains("listener 443 missing")
        );
        assert_eq!(repaired.body["involvedObject"]["name"], "svc2");

        // Repaired: the next pass finds nothing.
        drift::detect(&h.ctx).await;
        assert_eq!(h.ctx.queue.len(), 0);
    }

    /// Found by the 5,000-Node scale run: a drift pass beside the creation of a load balancer listed the
    /// region before the creation and re-ensured the new load balancer as "gone", with an Event telling of a
    /// repair. A pass judges only load balancers settled when it began and not changed before it ended.
    #[tokio::test(start_paused = true)]
    async fn drift_detection_leaves_out_load_balancers_being_changed() {
        let h = harness(|_| None, vec![svc("svc1"), svc("svc2")], vec![named_node("n1")]);
        sync_service(&h.ctx, &key("ns/svc1")).await.unwrap();
        h.provider.clear_calls();

        // svc2's first ensure is in flight when the pass begins: only svc1 is asked about.
        h.provider.set_delay(Duration::from_secs(10));
        let svc2 = key("ns/svc2");
        let ensure = sync_service(&h.ctx, &svc2);
        let pass = async {
            tokio::time::sleep(Duration::from_secs(1)).await;
            drift::detect(&h.ctx).await;
        };
        let (ensured, ()) = tokio::join!(ensure, pass);
        ensured.unwrap();
        assert_eq!(h.provider.batch_sizes(Method::DriftedLoadBalancers), [1]);

        // svc1 is ensured again while the pass lists: what the listing shows of it is not judged.
        h.provider.clear_calls();
        h.provider
            .set_drift("ns/svc1", vec!["Classic ELB of svc1 is gone".into()]);
        let pass = drift::detect(&h.ctx);
        let ensure = async {
            tokio::time::sleep(Duration::from_secs(1)).await;
            sync_service(&h.ctx, &key("ns/svc1")).await.unwrap();
        };
        tokio::join!(pass, ensure);
        assert_eq!(h.provider.batch_sizes(Method::DriftedLoadBalancers), [2]);
        assert_eq!(h.ctx.queue.len(), 0, "nothing queued");
        assert!(!h.ctx.states.any(|s| s.has_drift()), "no repair to tell of");

        // Settled again: the next pass judges both.
        h.provider.set_delay(Duration::ZERO);
        h.provider.clear_calls();
        h.provider
            .set_drift("ns/svc2", vec!["listener 80 missing".into()]);
        drift::detect(&h.ctx).await;
        assert_eq!(h.provider.batch_sizes(Method::DriftedLoadBalancers), [2]);
        assert_eq!(h.ctx.queue.len(), 1);
    }

    /// Found by the 5,000-Node scale run: the controller kept a copy of the whole host set per Service (about
    /// 650 KB at 5,000 Nodes), so its memory grew by that much with every load balancer. Services given the
    /// same nodes now share one set, by ensure and by host update alike.
    #[tokio::test]
    async fn services_given_the_same_nodes_share_one_host_set() {
        let mut h = harness(|_| None, vec![svc("svc1"), svc("svc2")], vec![named_node("n1")]);
        sync_service(&h.ctx, &key("ns/svc1")).await.unwrap();
        sync_service(&h.ctx, &key("ns/svc2")).await.unwrap();
        let hosts = |h: &Harness, k: &str| {
            h.ctx
                .states
                .read(&key(k), |s| s.hosts().cloned())
                .expect("ensured")
        };
        let shared = |h: &Harness| Arc::ptr_eq(&hosts(h, "ns/svc1"), &hosts(h, "ns/svc2"));
        assert!(shared(&h), "after their ensures");

        h.nodes
            .apply_watcher_event(&watcher::Event::Apply(CachedNode::from(named_node("n2"))));
        node_sync::sync_nodes(&h.ctx).await;
        assert_eq!(hosts(&h, "ns/svc1").len(), 2);
        assert!(shared(&h), "after a host update of both");
        drop(h.services);
    }

    /// Found by the NLB end-to-end test on a loaded machine: a Node labelled for a Service's
    /// `target-node-labels` after its load balancer was made stayed out of it, since host sets were compared by
    /// name and provider ID only (as upstream) and a label change woke no node sync. Now the Node event wakes
    /// one and the load balancer gets its hosts again; a change of nothing the hosts carry does neither.
    #[tokio::test]
    async fn a_label_change_gives_the_load_balancers_their_hosts_again() {
        let mut h = harness(|_| None, vec![svc("svc1")], vec![named_node("n1")]);
        sync_service(&h.ctx, &key("ns/svc1")).await.unwrap();
        let mut changes = NodeChanges::default();
        let mut on_node = |n: Node| changes.observe(&watcher::Event::Apply(Arc::new(CachedNode::from(n))));
        assert!(on_node(named_node("n1")), "a new Node");
        let mut with_address = named_node("n1");
        with_address.status = Some(Default::default());
        assert!(!on_node(with_address), "nothing the hosts carry changed");
        h.provider.clear_calls();
        node_sync::sync_nodes(&h.ctx).await;
        assert!(h.provider.calls().is_empty(), "{:?}", h.provider.calls());

        let mut labelled = named_node("n1");
        labelled.metadata.labels = Some([("pool".to_owned(), "a".to_owned())].into());
        assert!(on_node(labelled.clone()), "a label change wakes the node sync");
        h.nodes
            .apply_watcher_event(&watcher::Event::Apply(CachedNode::from(labelled)));
        node_sync::sync_nodes(&h.ctx).await;
        let calls = h.calls();
        assert_eq!(calls, [(Method::UpdateLoadBalancer, "ns/svc1".to_owned())]);
        drop(h.services);
    }

    /// A provider that stops answering holds a sync only until the reconcile deadline: the sync fails (and is
    /// retried), so the worker is free for the other Services.
    #[tokio::test(start_paused = true)]
    async fn a_sync_that_outlasts_the_deadline_is_abandoned() {
        let h = harness(|_| None, vec![with(finalized)], vec![named_node("n1")]);
        h.provider.set_delay(Duration::from_secs(3600));
        let started = tokio::time::Instant::now();
        let result = sync_within_deadline(&h.ctx, &key("ns/svc")).await;
        assert!(
            matches!(
                result,
                Err(Error::DeadlineExceeded {
                    what: "service sync",
                    ..
                })
            ),
            "{result:?}"
        );
        assert_eq!(started.elapsed(), h.ctx.config.reconcile_deadline);
        h.provider.set_delay(Duration::ZERO);
        sync_within_deadline(&h.ctx, &key("ns/svc")).await.unwrap();
    }

    /// Upstream `TestSlowNodeSync`: while a node-sync pass is stuck in a slow `UpdateLoadBalancer`, a Service
    /// sync still runs (with the newest nodes), the pass does not push an older host set over it, and the node
    /// added meanwhile reaches every load balancer on the next pass.
    #[tokio::test(start_paused = true)]
    async fn slow_node_sync_neither_blocks_nor_loses_later_changes() {
        let mut h = harness(|_| None, vec![svc("svc1"), svc("svc2")], vec![named_node("n1")]);
        sync_service(&h.ctx, &key("ns/svc1")).await.unwrap();
        sync_service(&h.ctx, &key("ns/svc2")).await.unwrap();
        // The pass visits the services in this order (the cache is not modified in between).
        let order: Vec<String> = h
            .ctx
            .states
            .cached()
            .into_iter()
            .map(|(key, ..)| key.to_string())
            .collect();
        let (first, impacted) = (order[0].clone(), order[1].clone());
        h.provider.clear_calls();

        h.nodes
            .apply_watcher_event(&watcher::Event::Apply(CachedNode::from(named_node("n2"))));
        h.provider.set_delay(Duration::from_secs(10));
        let pass = node_sync::sync_nodes(&h.ctx);
        let meanwhile = async {
            tokio::time::sleep(Duration::from_secs(1)).await;
            h.nodes
                .apply_watcher_event(&watcher::Event::Apply(CachedNode::from(named_node("n3"))));
            // Runs while the pass is inside the first service's update (it started at 0 s and takes 10 s).
            sync_service(&h.ctx, &key(&impacted)).await.unwrap();
        };
        tokio::join!(pass, meanwhile);
        let calls: Vec<(Method, String, usize)> = h
            .provider
            .calls()
            .into_iter()
            .map(|c| (c.method, c.subject, c.batch_size))
            .collect();
        assert_eq!(
            calls,
            vec![
                (Method::UpdateLoadBalancer, first.clone(), 2),
                (Method::EnsureLoadBalancer, impacted.clone(), 3),
            ],
            "no stale update of the service that was just ensured with three nodes"
        );

        // The next pass (the node event during the pass asked for one) brings n3 to the first service only.
        h.provider.clear_calls();
        node_sync::sync_nodes(&h.ctx).await;
        let calls: Vec<(Method, String, usize)> = h
            .provider
            .calls()
            .into_iter()
            .map(|c| (c.method, c.subject, c.batch_size))
            .collect();
        assert_eq!(calls, vec![(Method::UpdateLoadBalancer, first, 3)]);
        let hosts: Vec<Vec<String>> = h
            .provider
            .load_balancers()
            .values()
            .map(|lb| {
                let mut hosts = lb.hosts.clone();
                hosts.sort();
                hosts
            })
            .collect();
        assert_eq!(hosts, vec![vec!["n1", "n2", "n3"]; 2]);
        drop(h.services);
    }

    /// Found by the chaos soak: a node-sync pass that took a Service from the cache before its deletion began
    /// updated the hosts of the load balancer beside (and after) the deletion, adding back an NLB's node rules.
    /// The host update now waits for the Service's sync and skips a Service that is being deleted or gone.
    #[tokio::test(start_paused = true)]
    async fn a_host_update_never_runs_beside_or_after_the_deletion() {
        let mut h = harness(|_| None, vec![with(finalized)], vec![named_node("n1")]);
        sync_service(&h.ctx, &key("ns/svc")).await.unwrap();
        h.provider.clear_calls();

        h.services.apply_watcher_event(&watcher::Event::Apply(with(|s| {
            finalized(s);
            s.metadata.deletion_timestamp = Some(Time(Timestamp::UNIX_EPOCH));
        })));
        h.nodes
            .apply_watcher_event(&watcher::Event::Apply(CachedNode::from(named_node("n2"))));
        h.provider.set_delay(Duration::from_secs(10));
        let deleting = key("ns/svc");
        let deletion = sync_service(&h.ctx, &deleting);
        let pass = async {
            // Starts while the deletion is inside the provider (it takes 10 s).
            tokio::time::sleep(Duration::from_secs(1)).await;
            node_sync::sync_nodes(&h.ctx).await;
        };
        let (deleted, ()) = tokio::join!(deletion, pass);
        deleted.unwrap();
        let methods: Vec<Method> = h.provider.calls().into_iter().map(|c| c.method).collect();
        assert_eq!(
            methods,
            vec![Method::EnsureLoadBalancerDeleted],
            "no host update of a deleted load balancer"
        );
        drop(h.services);
    }

    mod ownership;
    mod waiting;
}
