//! Events in `core/v1`, the API every supported apiserver accepts for every kind of object.

use k8s_openapi::{
    api::core::v1::{Event, EventSource, Node, ObjectReference, Service},
    apimachinery::pkg::apis::meta::v1::ObjectMeta,
};
use kube::{Api, Client, api::PostParams};

use crate::{Clock, ControllerMetrics};

/// `Normal` or `Warning`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    /// Something expected happened.
    Normal,
    /// Something failed or needs attention.
    Warning,
}

/// Posts `core/v1` Events, the API every apiserver version accepts.
///
/// Events about cluster-scoped objects (Nodes) go to namespace `default`, as the kubelet and client-go's
/// recorder do: that is where `kubectl describe node` finds them. kube-runtime's recorder uses
/// `events.k8s.io/v1`, which a 1.20 apiserver rejects (422) for cluster-scoped objects; this one does not need it.
/// Failures to post are logged and otherwise ignored: an Event is never worth failing a reconcile.
/// Unlike client-go there is no aggregation of repeated Events.
#[derive(Clone)]
pub struct EventRecorder {
    client: Client,
    component: String,
    clock: Clock,
    metrics: ControllerMetrics,
}

/// The `involvedObject` of an Event about `node`.
pub fn node_reference(node: &Node) -> ObjectReference {
    ObjectReference {
        api_version: Some("v1".to_owned()),
        kind: Some("Node".to_owned()),
        name: node.metadata.name.clone(),
        uid: node.metadata.uid.clone(),
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

// === impl EventRecorder ===

impl EventRecorder {
    /// A recorder that reports as `component` (the Event's `source.component`).
    pub fn new(client: Client, component: &str, clock: Clock, metrics: ControllerMetrics) -> Self {
        Self {
            client,
            component: component.to_owned(),
            clock,
            metrics,
        }
    }

    /// Posts one Event; errors are logged.
    pub async fn publish(&self, object: &ObjectReference, type_: EventType, reason: &str, message: &str) {
        let namespace = object
            .namespace
            .clone()
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| "default".to_owned());
        let now = self.clock.now();
        let name = object.name.clone().unwrap_or_default();
        let event = Event {
            metadata: ObjectMeta {
                generate_name: Some(format!("{name}.")),
                namespace: Some(namespace.clone()),
                ..Default::default()
            },
            involved_object: object.clone(),
            reason: Some(reason.to_owned()),
            message: Some(message.to_owned()),
            type_: Some(
                match type_ {
                    EventType::Normal => "Normal",
                    EventType::Warning => "Warning",
                }
                .to_owned(),
            ),
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
        let api: Api<Event> = Api::namespaced(self.client.clone(), &namespace);
        if let Err(error) = api.create(&PostParams::default(), &event).await {
            tracing::warn!(%error, object = %name, reason, "could not post Event");
        }
    }
}
