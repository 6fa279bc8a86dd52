//! Events in `core/v1`, the API every supported apiserver accepts for every kind of object.

use ccm_cloud_provider::NodeView;
use k8s_openapi::{
    api::core::v1::{Event, EventSource, ObjectReference, Service},
    apimachinery::pkg::apis::meta::v1::ObjectMeta,
};
use std::{
    collections::HashMap,
    sync::{Arc, Mutex, PoisonError},
    time::Duration,
};

use kube::{
    Api, Client,
    api::{Patch, PatchParams, PostParams},
};
use serde_json::json;
use tokio::time::Instant;

use crate::{Clock, ControllerMetrics, TokenBucket};

/// `Normal` or `Warning`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    /// Something expected happened.
    Normal,
    /// Something failed or needs attention.
    Warning,
}

/// Posts `core/v1` Events, the API every apiserver version accepts, correlated as client-go's recorder does.
///
/// Events about cluster-scoped objects (Nodes) go to namespace `default`, as the kubelet and client-go's
/// recorder do: that is where `kubectl describe node` finds them. kube-runtime's recorder uses
/// `events.k8s.io/v1`, which a 1.20 apiserver rejects (422) for cluster-scoped objects; this one does not need it.
/// Failures to post are logged and otherwise ignored: an Event is never worth failing a reconcile.
///
/// Correlation (client-go's `EventCorrelator`), so that a reconcile failing on every retry does not post a new
/// object each time:
/// - an Event with the same involved object, type, reason, message and source as one already posted patches
///   that Event's `count` and `lastTimestamp` instead of creating another (client-go's `EventLogger`; up to
///   [`CACHE_SIZE`] distinct Events are remembered, the least recently seen forgotten first);
/// - a token bucket per source and involved object (client-go's `EventSourceObjectSpamFilter`: a burst of
///   [`SPAM_BURST`], then one every [`SPAM_REFILL`]) drops what exceeds it, patches included.
///
/// Clones share the correlation state.
#[derive(Clone)]
pub struct EventRecorder {
    client: Client,
    component: String,
    clock: Clock,
    metrics: ControllerMetrics,
    state: Arc<Mutex<Correlation>>,
}

/// How many distinct Events (and involved objects, for the spam filter) a recorder remembers (client-go's
/// `maxLruCacheEntries`).
pub const CACHE_SIZE: usize = 4096;
/// Events one object may get at once before the spam filter drops them (client-go's `defaultSpamBurst`).
pub const SPAM_BURST: u32 = 25;
/// How often the spam filter lets one more Event through once the burst is spent (client-go's
/// `defaultSpamQPS`, 1/300).
pub const SPAM_REFILL: Duration = Duration::from_secs(300);
/// The longest Event message posted, in bytes (1 KiB, [`CUT_MARKER`] included). Messages quote what Service
/// authors wrote (an annotation value of any length, up to the object's 256 KiB of annotations) and each
/// Event is kept for an hour: an Event says what is wrong, `kubectl get svc -o yaml` shows all of it.
pub const MAX_MESSAGE_BYTES: usize = 1024;
/// What ends a message cut to [`MAX_MESSAGE_BYTES`].
pub const CUT_MARKER: &str = "... [message cut at 1 KiB]";

/// What a recorder remembers.
#[derive(Default)]
struct Correlation {
    /// Posted Events by correlation key.
    events: HashMap<String, Posted>,
    /// Spam-filter buckets by source and involved object.
    buckets: HashMap<String, TokenBucket>,
}

/// One posted Event.
struct Posted {
    /// Its name once created; `None` while the create is in flight.
    name: Option<String>,
    count: i32,
    last_seen: Instant,
}

/// What to do with an Event after correlation.
#[derive(Debug, PartialEq)]
enum Decision {
    /// Dropped by the spam filter.
    Drop,
    /// New: create it (with count 1).
    Create,
    /// Seen: patch this Event to the count.
    Patch { name: String, count: i32 },
    /// Seen, and its create is still in flight: counted, sent with the next patch.
    Pending,
}

/// `message`, or, when longer than [`MAX_MESSAGE_BYTES`], its start (cut on a character boundary) followed by
/// [`CUT_MARKER`], at most [`MAX_MESSAGE_BYTES`] in all.
pub fn capped_message(message: &str) -> std::borrow::Cow<'_, str> {
    if message.len() <= MAX_MESSAGE_BYTES {
        return std::borrow::Cow::Borrowed(message);
    }
    let mut end = MAX_MESSAGE_BYTES - CUT_MARKER.len();
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    std::borrow::Cow::Owned(format!("{}{CUT_MARKER}", &message[..end]))
}

/// The `involvedObject` of an Event about `node`.
pub fn node_reference(node: &NodeView) -> ObjectReference {
    ObjectReference {
        api_version: Some("v1".to_owned()),
        kind: Some("Node".to_owned()),
        name: Some(node.name.clone()),
        uid: node.uid.clone(),
        ..Default::default()
    }
}

/// The `involvedObject` of an Event about `service`.
pub fn service_reference(service: &Service) -> ObjectReference {
    ObjectReference {
        api_version: Some("v1".to_owned()),
        kind: Some("Service".to_owned()),
        name: service.metadata.name.clone(),
        namespace: service.metadata.namespace.clone(),
        uid: service.metadata.uid.clone(),
        resource_version: service.metadata.resource_version.clone(),
        ..Default::default()
    }
}

// === impl Correlation ===

impl Correlation {
    /// Takes a token of `object`'s bucket; `false` when it is empty.
    fn allow(&mut self, object: &str, now: Instant) -> bool {
        let refill = 1.0 / SPAM_REFILL.as_secs_f64();
        let burst = f64::from(SPAM_BURST);
        if self.buckets.len() >= CACHE_SIZE && !self.buckets.contains_key(object) {
            // A full bucket forgets nothing; the stalest one goes.
            let stalest = self
                .buckets
                .iter()
                .min_by_key(|(_, b)| b.last_used())
                .map(|(k, _)| k.clone());
            if let Some(k) = stalest {
                self.buckets.remove(&k);
            }
        }
        self.buckets
            .entry(object.to_owned())
            .or_insert_with(|| TokenBucket::full_at(refill, burst, now))
            .try_take_at(now)
    }

    /// Correlates one Event: `object` keys the spam filter, `key` the Event.
    fn decide(&mut self, object: &str, key: &str, now: Instant) -> Decision {
        if !self.allow(object, now) {
            return Decision::Drop;
        }
        if let Some(posted) = self.events.get_mut(key) {
            posted.count = posted.count.saturating_add(1);
            posted.last_seen = now;
            return match &posted.name {
                Some(name) => Decision::Patch {
                    name: name.clone(),
                    count: posted.count,
                },
                None => Decision::Pending,
            };
        }
        if self.events.len() >= CACHE_SIZE {
            let stalest = self
                .events
                .iter()
                .min_by_key(|(_, p)| p.last_seen)
                .map(|(k, _)| k.clone());
            if let Some(k) = stalest {
                self.events.remove(&k);
            }
        }
        self.events.insert(
            key.to_owned(),
            Posted {
                name: None,
                count: 1,
                last_seen: now,
            },
        );
        Decision::Create
    }

    /// Records the name of a created Event; returns the count to patch if more came while it was created.
    fn created(&mut self, key: &str, name: String) -> Option<i32> {
        let posted = self.events.get_mut(key)?;
        posted.name = Some(name);
        (posted.count > 1).then_some(posted.count)
    }
}

/// The spam filter's key: the source and the involved object (client-go's `getSpamKey`).
fn object_key(component: &str, o: &ObjectReference) -> String {
    let field = |f: &Option<String>| f.clone().unwrap_or_default();
    format!(
        "{component}\u{1f}{}\u{1f}{}\u{1f}{}\u{1f}{}\u{1f}{}",
        field(&o.kind),
        field(&o.namespace),
        field(&o.name),
        field(&o.uid),
        field(&o.api_version)
    )
}

fn type_name(type_: EventType) -> &'static str {
    match type_ {
        EventType::Normal => "Normal",
        EventType::Warning => "Warning",
    }
}

// === impl EventRecorder ===

impl EventRecorder {
    /// A recorder that reports as `component` (the Event's `source.component`).
    pub fn new(client: Client, component: &str, clock: Clock, metrics: ControllerMetrics) -> Self {
        Self {
            client,
            component: component.to_owned(),
            clock,
            metrics,
            state: Arc::default(),
        }
    }

    /// Posts one Event, or counts it on the identical one posted before; errors are logged. The message is
    /// capped at [`MAX_MESSAGE_BYTES`] ([`capped_message`]).
    pub async fn publish(&self, object: &ObjectReference, type_: EventType, reason: &str, message: &str) {
        let message = &*capped_message(message);
        let namespace = object
            .namespace
            .clone()
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| "default".to_owned());
        let spam_key = object_key(&self.component, object);
        let key = format!(
            "{spam_key}\u{1e}{}\u{1e}{reason}\u{1e}{message}",
            type_name(type_)
        );
        let decision = self.lock().decide(&spam_key, &key, Instant::now());
        let name = object.name.clone().unwrap_or_default();
        match decision {
            Decision::Drop => {
                tracing::debug!(object = %name, reason, "Event dropped by the spam filter");
            }
            Decision::Pending => {}
            Decision::Patch { name: event, count } => {
                if !self.patch(&namespace, &event, count).await {
                    // Gone (Events expire after an hour): start over with a new one.
                    self.lock().events.remove(&key);
                    self.create(&key, object, &namespace, type_, reason, message)
                        .await;
                }
            }
            Decision::Create => {
                self.create(&key, object, &namespace, type_, reason, message)
                    .await
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Correlation> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Creates the Event of `key` and remembers its name; forgets the key if the create fails.
    async fn create(
        &self,
        key: &str,
        object: &ObjectReference,
        namespace: &str,
        type_: EventType,
        reason: &str,
        message: &str,
    ) {
        let now = self.clock.now();
        let name = object.name.clone().unwrap_or_default();
        let event = Event {
            metadata: ObjectMeta {
                generate_name: Some(format!("{name}.")),
                namespace: Some(namespace.to_owned()),
                ..Default::default()
            },
            involved_object: object.clone(),
            reason: Some(reason.to_owned()),
            message: Some(message.to_owned()),
            type_: Some(type_name(type_).to_owned()),
            source: Some(EventSource {
                component: Some(self.component.clone()),
                host: None,
            }),
            reporting_component: Some(self.component.clone()),
            reporting_instance: Some(self.component.clone()),
            first_timestamp: Some(now.clone()),
            last_timestamp: Some(now),
            count: Some(1),
            ..Default::default()
        };
        self.metrics.api_write();
        let api: Api<Event> = Api::namespaced(self.client.clone(), namespace);
        match api.create(&PostParams::default(), &event).await {
            Ok(created) => {
                let more = created.metadata.name.and_then(|event| {
                    self.lock()
                        .created(key, event.clone())
                        .map(|count| (event, count))
                });
                if let Some((event, count)) = more {
                    self.patch(namespace, &event, count).await;
                }
            }
            Err(error) => {
                self.lock().events.remove(key);
                tracing::warn!(%error, object = %name, reason, "could not post Event");
            }
        }
    }

    /// Sets a posted Event's count and last timestamp; `false` when the Event no longer exists.
    async fn patch(&self, namespace: &str, event: &str, count: i32) -> bool {
        let patch = json!({ "count": count, "lastTimestamp": self.clock.now() });
        self.metrics.api_write();
        let api: Api<Event> = Api::namespaced(self.client.clone(), namespace);
        match api
            .patch(event, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => true,
            Err(kube::Error::Api(s)) if s.is_not_found() => false,
            Err(error) => {
                tracing::warn!(%error, event, "could not update Event");
                true
            }
        }
    }
}

#[cfg(test)]
mod tests;
