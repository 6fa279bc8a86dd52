use k8s_openapi::jiff::Timestamp;

use super::*;
use crate::mock_api::{MockApi, mock_api, status_error};

fn recorder(api: &MockApi) -> EventRecorder {
    EventRecorder::new(
        api.client.clone(),
        "test-controller",
        Clock::fixed(Timestamp::from_second(1_800_000_000).unwrap()),
        ControllerMetrics::default(),
    )
}

fn service(name: &str) -> ObjectReference {
    ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Service".into()),
        name: Some(name.into()),
        namespace: Some("ns".into()),
        uid: Some(format!("uid-{name}")),
        ..Default::default()
    }
}

fn methods(api: &MockApi) -> Vec<(String, String)> {
    api.requests().into_iter().map(|r| (r.method, r.path)).collect()
}

#[tokio::test]
async fn identical_events_patch_the_count_of_one_event() {
    let api = mock_api(|_| None);
    let rec = recorder(&api);
    for _ in 0..3 {
        rec.publish(
            &service("a"),
            EventType::Warning,
            "SyncLoadBalancerFailed",
            "boom",
        )
        .await;
    }
    let requests = api.requests();
    assert_eq!(
        methods(&api),
        [
            ("POST".to_owned(), "/api/v1/namespaces/ns/events".to_owned()),
            ("PATCH".to_owned(), "/api/v1/namespaces/ns/events/x".to_owned()),
            ("PATCH".to_owned(), "/api/v1/namespaces/ns/events/x".to_owned()),
        ]
    );
    assert_eq!(requests[1].body["count"], 2);
    assert_eq!(requests[2].body["count"], 3);
    assert!(requests[2].body["lastTimestamp"].is_string());
}

#[tokio::test]
async fn another_message_reason_type_or_object_is_another_event() {
    let api = mock_api(|_| None);
    let rec = recorder(&api);
    rec.publish(&service("a"), EventType::Warning, "R", "m1").await;
    rec.publish(&service("a"), EventType::Warning, "R", "m2").await;
    rec.publish(&service("a"), EventType::Warning, "R2", "m1").await;
    rec.publish(&service("a"), EventType::Normal, "R", "m1").await;
    rec.publish(&service("b"), EventType::Warning, "R", "m1").await;
    assert_eq!(api.event_reasons().len(), 5);
    assert!(methods(&api).iter().all(|(m, _)| m == "POST"));
}

#[tokio::test]
async fn a_changed_resource_version_is_the_same_object() {
    let api = mock_api(|_| None);
    let rec = recorder(&api);
    let mut object = service("a");
    object.resource_version = Some("1".into());
    rec.publish(&object, EventType::Normal, "EnsuringLoadBalancer", "m")
        .await;
    object.resource_version = Some("2".into());
    rec.publish(&object, EventType::Normal, "EnsuringLoadBalancer", "m")
        .await;
    assert_eq!(api.event_reasons().len(), 1);
}

#[tokio::test]
async fn an_expired_event_is_created_again() {
    let api = mock_api(|r| (r.method == "PATCH").then(|| status_error(404, "NotFound")));
    let rec = recorder(&api);
    rec.publish(&service("a"), EventType::Warning, "R", "m").await;
    rec.publish(&service("a"), EventType::Warning, "R", "m").await;
    let m: Vec<String> = methods(&api).into_iter().map(|(m, _)| m).collect();
    assert_eq!(m, ["POST", "PATCH", "POST"]);
}

#[tokio::test]
async fn a_failed_create_is_forgotten() {
    let api = mock_api(|r| r.is_event().then(|| status_error(500, "InternalError")));
    let rec = recorder(&api);
    rec.publish(&service("a"), EventType::Warning, "R", "m").await;
    rec.publish(&service("a"), EventType::Warning, "R", "m").await;
    assert_eq!(api.event_reasons().len(), 2, "no patch of an Event never created");
}

#[tokio::test(start_paused = true)]
async fn the_spam_filter_allows_a_burst_per_object_then_one_per_refill() {
    let api = mock_api(|_| None);
    let rec = recorder(&api);
    for n in 0..SPAM_BURST + 10 {
        rec.publish(&service("a"), EventType::Warning, "R", &format!("m{n}"))
            .await;
    }
    assert_eq!(api.requests().len(), SPAM_BURST as usize);
    // Another object has a bucket of its own.
    rec.publish(&service("b"), EventType::Warning, "R", "m").await;
    assert_eq!(api.requests().len(), SPAM_BURST as usize + 1);
    // Duplicates count against the bucket too: nothing goes out until it refills.
    rec.publish(&service("a"), EventType::Warning, "R", "m0").await;
    assert_eq!(api.requests().len(), SPAM_BURST as usize + 1);
    tokio::time::advance(SPAM_REFILL).await;
    rec.publish(&service("a"), EventType::Warning, "R", "m0").await;
    rec.publish(&service("a"), EventType::Warning, "R", "m0").await;
    assert_eq!(
        api.requests().len(),
        SPAM_BURST as usize + 2,
        "one token per refill"
    );
    assert_eq!(api.requests().last().unwrap().method, "PATCH");
}

#[tokio::test]
async fn clones_share_the_correlation() {
    let api = mock_api(|_| None);
    let rec = recorder(&api);
    rec.publish(&service("a"), EventType::Warning, "R", "m").await;
    rec.clone()
        .publish(&service("a"), EventType::Warning, "R", "m")
        .await;
    assert_eq!(api.event_reasons().len(), 1);
}

#[test]
fn the_caches_are_bounded() {
    let mut c = Correlation::default();
    let now = Instant::now();
    for n in 0..CACHE_SIZE + 10 {
        let object = format!("o{n}");
        assert_eq!(c.decide(&object, &format!("{object}/k"), now), Decision::Create);
    }
    assert!(c.events.len() <= CACHE_SIZE && c.buckets.len() <= CACHE_SIZE);
}

/// A Warning quoting an annotation value of any length (the apiserver allows 256 KiB of annotations) posts at
/// most 1 KiB of message, cut on a character boundary and saying so.
#[tokio::test]
async fn long_messages_are_cut_at_one_kib_on_a_char_boundary() {
    let api = mock_api(|_| None);
    let rec = recorder(&api);
    // Two-byte characters after an odd prefix: a cut at a fixed byte count would split one.
    let value = "é".repeat(100_000);
    let message = format!("Error syncing load balancer: x={value:?}: an integer from 1 to 4000");
    rec.publish(
        &service("a"),
        EventType::Warning,
        "SyncLoadBalancerFailed",
        &message,
    )
    .await;
    rec.publish(
        &service("a"),
        EventType::Warning,
        "SyncLoadBalancerFailed",
        "short",
    )
    .await;
    let requests = api.requests();
    let posted = requests[0].body["message"].as_str().unwrap();
    assert!(posted.len() <= 1024, "{} bytes", posted.len());
    assert!(
        posted.len() > 1000,
        "as much as fits is kept: {} bytes",
        posted.len()
    );
    assert!(posted.ends_with("[message cut at 1 KiB]"), "{posted}");
    let kept = posted.trim_end_matches("... [message cut at 1 KiB]");
    assert!(message.starts_with(kept), "the start of the message is kept");
    assert_eq!(
        requests[1].body["message"], "short",
        "a short message is as it was"
    );
}
