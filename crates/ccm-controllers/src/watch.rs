use std::{collections::HashSet, fmt::Debug, sync::Arc};

use futures::{StreamExt, TryStreamExt};
use kube::{
    Api, Resource,
    runtime::{
        WatchStreamExt, reflector,
        reflector::store::Writer,
        reflector::{Lookup, ObjectRef},
        watcher,
    },
};
use serde::de::DeserializeOwned;

/// A kind the controllers watch, and what their stores keep of each object of it.
///
/// Every Kubernetes resource type is `Watched` as itself, without its `managedFields` (a whole `Node` also
/// without the annotations and status no controller reads); the controllers watch Nodes as
/// [`CachedNode`](crate::CachedNode)s, views of what they read, a third of a whole Node's memory.
pub trait Watched: Lookup<DynamicType = ()> + Clone + Debug + Send + Sync + 'static {
    /// The object the API serves.
    type Object: Resource<DynamicType = ()> + Clone + Debug + DeserializeOwned + Send + Sync + 'static;

    /// What the store keeps of `object`.
    fn keep(object: Self::Object) -> Self;
}

impl<K> Watched for K
where
    K: Resource<DynamicType = ()> + Clone + Debug + DeserializeOwned + Send + Sync + 'static,
{
    type Object = K;

    fn keep(mut object: K) -> K {
        strip(&mut object);
        object
    }
}

/// Keeps `writer`'s store in sync with the objects of `api` and hands every watch event to `on_event` after
/// the store has it. Watch errors are logged and retried with kube-runtime's default backoff. Never returns.
///
/// An event's object is the store's own `Arc` where the store holds it (an applied object), so that handing it
/// on copies nothing: at 5,000 Nodes every subscriber's deep copy of every event was megabytes of churn.
///
/// A relist (the watch restarted after an expired resourceVersion, `410 Gone`, or a dropped connection) reports
/// only the objects that exist now: one deleted while the watch was down would raise no event at all. So each
/// relist is diffed against the store as it was before it, and every object missing from the new list is handed
/// to `on_event` as a [`watcher::Event::Delete`] before the relist's `InitDone`.
pub(crate) async fn reflect<K, F>(
    api: Api<K::Object>,
    selector: Option<&str>,
    writer: Writer<K>,
    mut on_event: F,
) where
    K: Watched,
    F: FnMut(watcher::Event<Arc<K>>),
{
    let mut config = watcher::Config::default();
    if let Some(selector) = selector {
        config = config.labels(selector);
    }
    let reader = writer.as_reader();
    let mut relist = Relist::default();
    let kept = watcher(api, config).default_backoff().map_ok(keep::<K>);
    let stream = reflector(writer, kept);
    let mut stream = std::pin::pin!(stream);
    while let Some(event) = stream.next().await {
        match event {
            Ok(event) => {
                for missed in relist.observe(&event, || reader.state()) {
                    on_event(watcher::Event::Delete(missed));
                }
                on_event(shared(event, |obj| reader.get(&ObjectRef::from_obj(obj))));
            }
            Err(error) => tracing::warn!(%error, "watch failed; retrying"),
        }
    }
}

/// `event` with what the store keeps of its object.
fn keep<K: Watched>(event: watcher::Event<K::Object>) -> watcher::Event<K> {
    match event {
        watcher::Event::Apply(obj) => watcher::Event::Apply(K::keep(obj)),
        watcher::Event::Delete(obj) => watcher::Event::Delete(K::keep(obj)),
        watcher::Event::InitApply(obj) => watcher::Event::InitApply(K::keep(obj)),
        watcher::Event::Init => watcher::Event::Init,
        watcher::Event::InitDone => watcher::Event::InitDone,
    }
}

/// `event` with its object behind an `Arc`: the one `stored` finds for an applied object (the store took its own
/// copy of it just before), a new one otherwise (a deleted object has left the store; a relist's objects wait in
/// the writer's buffer until `InitDone`).
pub(crate) fn shared<K>(
    event: watcher::Event<K>,
    stored: impl FnOnce(&K) -> Option<Arc<K>>,
) -> watcher::Event<Arc<K>> {
    match event {
        watcher::Event::Apply(obj) => watcher::Event::Apply(stored(&obj).unwrap_or_else(|| Arc::new(obj))),
        watcher::Event::Delete(obj) => watcher::Event::Delete(Arc::new(obj)),
        watcher::Event::InitApply(obj) => watcher::Event::InitApply(Arc::new(obj)),
        watcher::Event::Init => watcher::Event::Init,
        watcher::Event::InitDone => watcher::Event::InitDone,
    }
}

/// Drops what no controller reads before an object is cached: its `managedFields` (often the largest part of
/// an object) and, of a Node, what [`strip_node`] drops. No controller writes a cached object back whole: Nodes
/// are written with patches of the fields they change, under the cached `resourceVersion` as a precondition.
pub(crate) fn strip<K: Resource + 'static>(obj: &mut K) {
    obj.meta_mut().managed_fields = None;
    if let Some(node) = (obj as &mut dyn std::any::Any).downcast_mut::<k8s_openapi::api::core::v1::Node>() {
        strip_node(node);
    }
}

/// What is left of a Node in the cache (docs/controllers.md): its metadata without annotations but
/// `alpha.kubernetes.io/provided-node-ip`; its spec without the deprecated `configSource` and `externalID`; of its
/// status the addresses and the `Ready` and `NetworkUnavailable` conditions' type, status and reason. Gone are
/// the images on the node, its system info, capacity, volumes, daemon endpoints, the other conditions (the
/// kubelet's pressure reports) and the conditions' messages and times, which the kubelet rewrites at every
/// heartbeat.
fn strip_node(node: &mut k8s_openapi::api::core::v1::Node) {
    use crate::keys::{ANNOTATION_PROVIDED_NODE_IP, CONDITION_NETWORK_UNAVAILABLE};
    if let Some(annotations) = node.metadata.annotations.as_mut() {
        annotations.retain(|k, _| k == ANNOTATION_PROVIDED_NODE_IP);
        if annotations.is_empty() {
            node.metadata.annotations = None;
        }
    }
    if let Some(spec) = node.spec.as_mut() {
        spec.config_source = None;
        spec.external_id = None;
    }
    let Some(status) = node.status.take() else {
        return;
    };
    let conditions = status.conditions.map(|conditions| {
        conditions
            .into_iter()
            .filter(|c| c.type_ == "Ready" || c.type_ == CONDITION_NETWORK_UNAVAILABLE)
            .map(|c| k8s_openapi::api::core::v1::NodeCondition {
                type_: c.type_,
                status: c.status,
                reason: c.reason,
                ..Default::default()
            })
            .collect()
    });
    node.status = Some(k8s_openapi::api::core::v1::NodeStatus {
        addresses: status.addresses,
        conditions,
        ..Default::default()
    });
}

/// The objects a relist must account for: those known before it began, and those it has listed so far.
pub(crate) struct Relist<K: Lookup>
where
    K::DynamicType: Eq + std::hash::Hash,
{
    /// `None` outside a relist.
    before: Option<Vec<Arc<K>>>,
    listed: HashSet<ObjectRef<K>>,
}

impl<K: Lookup> Default for Relist<K>
where
    K::DynamicType: Eq + std::hash::Hash,
{
    fn default() -> Self {
        Self {
            before: None,
            listed: HashSet::new(),
        }
    }
}

impl<K> Relist<K>
where
    K: Lookup + Clone,
    K::DynamicType: Default + Eq + std::hash::Hash + Clone,
{
    /// Takes one event (already applied to the store); `known` reads the store. Returns the objects that the
    /// relist just completed by `event` did not list: deleted while the watch was down.
    ///
    /// The store still holds the old objects when `Init` arrives (the reflector swaps them at `InitDone`).
    pub(crate) fn observe(
        &mut self,
        event: &watcher::Event<K>,
        known: impl FnOnce() -> Vec<Arc<K>>,
    ) -> Vec<Arc<K>> {
        match event {
            watcher::Event::Init => {
                self.before = Some(known());
                self.listed.clear();
                Vec::new()
            }
            watcher::Event::InitApply(obj) => {
                if self.before.is_some() {
                    self.listed.insert(ObjectRef::from_obj(obj));
                }
                Vec::new()
            }
            watcher::Event::InitDone => {
                let before = self.before.take().unwrap_or_default();
                let listed = std::mem::take(&mut self.listed);
                before
                    .into_iter()
                    .filter(|obj| !listed.contains(&ObjectRef::from_obj(obj.as_ref())))
                    .collect()
            }
            watcher::Event::Apply(_) | watcher::Event::Delete(_) => Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::Node;

    use super::*;

    fn node(name: &str) -> Node {
        let mut n = Node::default();
        n.metadata.name = Some(name.into());
        n
    }

    fn names(nodes: &[Arc<Node>]) -> Vec<&str> {
        nodes
            .iter()
            .map(|n| n.metadata.name.as_deref().unwrap_or_default())
            .collect()
    }

    /// A Node as a kubelet reports it, in JSON (what a cache would hold of it, less `managedFields`).
    fn kubelet_node() -> Node {
        let types = [
            "NetworkUnavailable",
            "MemoryPressure",
            "DiskPressure",
            "PIDPressure",
            "Ready",
        ];
        let conditions: Vec<serde_json::Value> = types
            .iter()
            .map(|t| {
                serde_json::json!({
                    "type": t, "status": if *t == "Ready" { "True" } else { "False" },
                    "lastHeartbeatTime": "2026-11-29T10:05:00Z", "lastTransitionTime": "2026-11-29T10:00:10Z",
                    "reason": format!("Kubelet{t}"),
                    "message": "kubelet has sufficient memory available and is posting ready status"
                })
            })
            .collect();
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "ip-10-0-0-1.ec2.internal", "uid": "4f1c", "resourceVersion": "812",
                "creationTimestamp": "2026-11-29T10:00:00Z",
                "labels": {"kubernetes.io/os": "linux", "node.kubernetes.io/instance-type": "m5.large"},
                "annotations": {"node.alpha.kubernetes.io/ttl": "0",
                    "volumes.kubernetes.io/controller-managed-attach-detach": "true",
                    "alpha.kubernetes.io/provided-node-ip": "10.0.0.1",
                    "csi.volume.kubernetes.io/nodeid": "{\"ebs.csi.aws.com\":\"i-0123456789abcdef0\"}"}},
            "spec": {"providerID": "aws:///us-east-1a/i-0123456789abcdef0", "podCIDR": "10.244.1.0/24",
                "taints": [{"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}]},
            "status": {
                "capacity": {"cpu": "2", "memory": "8000000Ki", "pods": "29", "ephemeral-storage": "20959212Ki"},
                "allocatable": {"cpu": "1930m", "memory": "7200000Ki", "pods": "29"},
                "conditions": conditions,
                "addresses": [{"type": "InternalIP", "address": "10.0.0.1"},
                    {"type": "Hostname", "address": "ip-10-0-0-1.ec2.internal"}],
                "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
                "nodeInfo": {"machineID": "ec2a5c2b0c7a4e6f9d3a2b1c0d9e8f7a",
                    "systemUUID": "ec2a5c2b-0c7a-4e6f-9d3a-2b1c0d9e8f7a",
                    "bootID": "7c0f6f5e-6d4c-4b3a-9a8b-7c6d5e4f3a2b", "kernelVersion": "5.10.228-219.884.amzn2.x86_64",
                    "osImage": "Amazon Linux 2", "containerRuntimeVersion": "containerd://1.7.23",
                    "kubeletVersion": "v1.31.2-eks-94953ac", "kubeProxyVersion": "v1.31.2-eks-94953ac",
                    "operatingSystem": "linux", "architecture": "amd64"},
                "images": [{"names": ["602401143452.dkr.ecr.us-east-1.amazonaws.com/amazon-k8s-cni@sha256:0a1b"],
                    "sizeBytes": 44000000}]
            }
        }))
        .unwrap()
    }

    #[test]
    fn a_cached_node_keeps_what_the_controllers_read_and_loses_half_its_bytes() {
        let full = kubelet_node();
        let mut n = full.clone();
        strip(&mut n);
        // Metadata but the annotations no controller reads, and the spec.
        let mut metadata = full.metadata.clone();
        metadata
            .annotations
            .as_mut()
            .unwrap()
            .retain(|k, _| k == "alpha.kubernetes.io/provided-node-ip");
        assert_eq!((&n.metadata, &n.spec), (&metadata, &full.spec));
        assert_eq!(
            n.metadata
                .annotations
                .as_ref()
                .unwrap()
                .keys()
                .collect::<Vec<_>>(),
            ["alpha.kubernetes.io/provided-node-ip"]
        );
        let status = n.status.as_ref().unwrap();
        let types: Vec<&str> = status
            .conditions
            .iter()
            .flatten()
            .map(|c| c.type_.as_str())
            .collect();
        assert_eq!(types, ["NetworkUnavailable", "Ready"], "the pressure reports go");
        assert_eq!(status.addresses, full.status.as_ref().unwrap().addresses);
        let ready = status
            .conditions
            .as_ref()
            .unwrap()
            .iter()
            .find(|c| c.type_ == "Ready")
            .unwrap();
        assert_eq!(
            (ready.status.as_str(), ready.reason.as_deref()),
            ("True", Some("KubeletReady"))
        );
        assert_eq!(
            (ready.message.as_ref(), ready.last_heartbeat_time.as_ref()),
            (None, None)
        );
        assert!(status.node_info.is_none() && status.capacity.is_none() && status.images.is_none());
        let bytes = |n: &Node| serde_json::to_vec(n).unwrap().len();
        assert!(
            2 * bytes(&n) < bytes(&full),
            "{} of {} bytes",
            bytes(&n),
            bytes(&full)
        );
    }

    #[test]
    fn cached_objects_lose_managed_fields_and_keep_metadata() {
        use k8s_openapi::{
            api::core::v1::{ContainerImage, NodeStatus, Service},
            apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry,
        };
        let mut n = node("a");
        n.metadata.managed_fields = Some(vec![ManagedFieldsEntry::default()]);
        n.metadata.labels = Some([("pool".to_owned(), "0".to_owned())].into());
        n.status = Some(NodeStatus {
            images: Some(vec![ContainerImage::default()]),
            ..NodeStatus::default()
        });
        strip(&mut n);
        assert_eq!(n.metadata.managed_fields, None);
        assert_eq!(n.status.as_ref().and_then(|s| s.images.as_ref()), None);
        assert!(
            n.status.is_some() && n.metadata.labels.is_some(),
            "the rest is kept"
        );
        let mut svc = Service::default();
        svc.metadata.managed_fields = Some(vec![ManagedFieldsEntry::default()]);
        svc.metadata.annotations = Some([("a".to_owned(), "b".to_owned())].into());
        strip(&mut svc);
        assert_eq!(svc.metadata.managed_fields, None);
        assert!(svc.metadata.annotations.is_some());
    }

    #[test]
    fn a_relist_reports_the_objects_deleted_while_the_watch_was_down() {
        let mut relist = Relist::<Node>::default();
        // The first list: nothing was known, so nothing is missed.
        assert!(relist.observe(&watcher::Event::Init, Vec::new).is_empty());
        assert!(
            relist
                .observe(&watcher::Event::InitApply(node("a")), Vec::new)
                .is_empty()
        );
        assert!(relist.observe(&watcher::Event::InitDone, Vec::new).is_empty());
        assert!(
            relist
                .observe(&watcher::Event::Apply(node("b")), Vec::new)
                .is_empty()
        );
        assert!(
            relist
                .observe(&watcher::Event::Apply(node("c")), Vec::new)
                .is_empty()
        );

        // The watch expired; b was deleted meanwhile, d created.
        let store = || vec![Arc::new(node("a")), Arc::new(node("b")), Arc::new(node("c"))];
        assert!(relist.observe(&watcher::Event::Init, store).is_empty());
        for n in ["a", "c", "d"] {
            assert!(
                relist
                    .observe(&watcher::Event::InitApply(node(n)), Vec::new)
                    .is_empty()
            );
        }
        let missed = relist.observe(&watcher::Event::InitDone, Vec::new);
        assert_eq!(names(&missed), ["b"]);

        // Deletions seen live are the watch's own events: nothing more is reported.
        assert!(
            relist
                .observe(&watcher::Event::Delete(node("a")), Vec::new)
                .is_empty()
        );
        assert!(relist.observe(&watcher::Event::InitDone, Vec::new).is_empty());
    }

    #[test]
    fn an_applied_object_is_handed_on_as_the_stores_own_copy() {
        let stored = Arc::new(node("a"));
        let from_store = |_: &Node| Some(stored.clone());
        let watcher::Event::Apply(applied) = shared(watcher::Event::Apply(node("a")), from_store) else {
            panic!("an Apply stays an Apply");
        };
        assert!(Arc::ptr_eq(&applied, &stored), "the store's Arc, not a copy");
        // Not in the store (deleted, or a relist's object still in the writer's buffer): its own Arc.
        let watcher::Event::Delete(deleted) = shared(watcher::Event::Delete(node("b")), from_store) else {
            panic!("a Delete stays a Delete");
        };
        assert_eq!(deleted.metadata.name.as_deref(), Some("b"));
        let watcher::Event::InitApply(listed) = shared(watcher::Event::InitApply(node("c")), from_store)
        else {
            panic!("an InitApply stays an InitApply");
        };
        assert_eq!(listed.metadata.name.as_deref(), Some("c"));
        let watcher::Event::Apply(fresh) = shared(watcher::Event::Apply(node("d")), |_: &Node| None) else {
            panic!("an Apply stays an Apply");
        };
        assert_eq!(fresh.metadata.name.as_deref(), Some("d"));
    }
}
