//! Event correlation against the real kube-apiserver: identical Events become one object whose count and
//! lastTimestamp are patched; distinct messages are distinct objects.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::too_many_lines)]

use ccm_controllers::{
    Clock, ControllerMetrics,
    events::{EventRecorder, EventType},
};
use ccm_testing::{TestEnv, unique_name};
use k8s_openapi::api::core::v1::{Event, ObjectReference};
use kube::{
    Api,
    api::{DeleteParams, ListParams},
};

const N: i32 = 7;

#[tokio::test]
async fn identical_events_are_one_object_with_their_count() {
    let client = TestEnv::get().kube_client().await.unwrap();
    let name = unique_name("ev");
    let object = ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Service".into()),
        name: Some(name.clone()),
        namespace: Some("default".into()),
        uid: Some(format!("{name}-uid")),
        ..Default::default()
    };
    let recorder = EventRecorder::new(
        client.clone(),
        "events-test",
        Clock::system(),
        ControllerMetrics::default(),
    );
    for _ in 0..N {
        recorder
            .publish(
                &object,
                EventType::Warning,
                "SyncLoadBalancerFailed",
                "the same failure",
            )
            .await;
    }
    recorder
        .publish(
            &object,
            EventType::Warning,
            "SyncLoadBalancerFailed",
            "another failure",
        )
        .await;

    let events: Api<Event> = Api::namespaced(client, "default");
    let list = events
        .list(&ListParams::default().fields(&format!("involvedObject.name={name}")))
        .await
        .unwrap();
    let mut counts: Vec<(String, i32)> = list
        .items
        .iter()
        .map(|e| (e.message.clone().unwrap_or_default(), e.count.unwrap_or(0)))
        .collect();
    counts.sort();
    assert_eq!(
        counts,
        [
            ("another failure".to_owned(), 1),
            ("the same failure".to_owned(), N)
        ]
    );
    let same = list
        .items
        .iter()
        .find(|e| e.message.as_deref() == Some("the same failure"))
        .unwrap();
    assert!(same.last_timestamp.as_ref().unwrap().0 >= same.first_timestamp.as_ref().unwrap().0);
    for e in &list.items {
        let _ = events
            .delete(e.metadata.name.as_deref().unwrap(), &DeleteParams::default())
            .await;
    }
}
