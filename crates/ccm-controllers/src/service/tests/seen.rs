//! The Service watch's handler: what it queues, remembering of each Service only a [`SeenService`].

use super::*;

fn finalized(s: &mut Service) {
    s.metadata.finalizers = Some(vec![FINALIZER_LB_CLEANUP.to_owned()]);
}

/// An Apply event as the informer hands it on: its Service behind an `Arc`.
fn applied(s: Service) -> watcher::Event<Arc<Service>> {
    watcher::Event::Apply(Arc::new(s))
}

/// The keys queued since the last call, each taken and done.
async fn taken(queue: &WorkQueue<ServiceKey>) -> usize {
    if queue.is_empty() {
        return 0;
    }
    let batch = queue.next_batch(100, Duration::ZERO).await.unwrap();
    batch.iter().for_each(|k| queue.done(k));
    batch.len()
}

#[tokio::test]
async fn a_service_is_queued_when_seen_first_and_when_its_load_balancer_must_change() {
    let queue = WorkQueue::default();
    let mut on_event = on_service_event(queue.clone());
    on_event(applied(lb_service()));
    assert_eq!(taken(&queue).await, 1, "seen first, wants a load balancer");

    on_event(applied(with(|s| {
        s.metadata.labels = Some([("a".to_owned(), "b".to_owned())].into());
    })));
    assert_eq!(taken(&queue).await, 0, "labels do not touch the load balancer");

    on_event(applied(with(|s| {
        spec(s).ports.as_mut().unwrap()[0].node_port = Some(30099);
    })));
    assert_eq!(taken(&queue).await, 1, "a new node port does");

    on_event(applied(with(|s| {
        spec(s).ports.as_mut().unwrap()[0].node_port = Some(30099);
        finalized(s);
    })));
    assert_eq!(taken(&queue).await, 0, "our finalizer added: nothing to do");

    let deleting = |s: &mut Service| {
        spec(s).ports.as_mut().unwrap()[0].node_port = Some(30099);
        finalized(s);
        s.metadata.deletion_timestamp = Some(Time(Timestamp::UNIX_EPOCH));
    };
    on_event(applied(with(deleting)));
    assert_eq!(taken(&queue).await, 1, "its cleanup starts");
    on_event(applied(with(|s| {
        deleting(s);
        s.metadata.labels = Some([("c".to_owned(), "d".to_owned())].into());
    })));
    let why = "queued once for its cleanup, not for an update that changes nothing of it";
    assert_eq!(taken(&queue).await, 0, "{why}");

    on_event(applied(with(|s| spec(s).type_ = Some("ClusterIP".into()))));
    assert_eq!(taken(&queue).await, 1, "no longer of type LoadBalancer");

    let mut plain = ServiceBuilder::new("ns", "plain").uid("uid-9").build();
    plain.spec.as_mut().unwrap().type_ = Some("ClusterIP".into());
    on_event(applied(plain));
    assert_eq!(
        taken(&queue).await,
        0,
        "a Service without a load balancer, seen first: not queued"
    );
}

#[test]
fn the_processed_version_gives_way_to_the_cached_one_only_when_its_load_balancer_would_not_change() {
    let processed = Arc::new(lb_service());
    let shared = |current: Service| {
        let mut state = state::ServiceState::default();
        state.remember_processed(processed.clone());
        let current = Arc::new(current);
        state.share_current(&current);
        Arc::ptr_eq(&state.cached().unwrap(), &current)
    };
    assert!(
        shared(with(|s| ingress(s, "1.2.3.4"))),
        "our status patch: one copy is kept, the cache's"
    );
    assert!(
        !shared(with(|s| spec(s).ports.as_mut().unwrap()[0].port = 81)),
        "a new port is not processed yet"
    );
    assert!(
        !shared(with(|s| s.metadata.uid = Some("uid-2".into()))),
        "another Service under the name"
    );
}

fn ingress(s: &mut Service, ip: &str) {
    s.status = Some(k8s_openapi::api::core::v1::ServiceStatus {
        load_balancer: Some(k8s_openapi::api::core::v1::LoadBalancerStatus {
            ingress: Some(vec![LoadBalancerIngress {
                ip: Some(ip.to_owned()),
                ..Default::default()
            }]),
        }),
        ..Default::default()
    });
}
