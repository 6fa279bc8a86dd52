//! [`Informers`]: one watch and one store per kind (and label selector) for the whole process, shared by every
//! controller that asks for that kind.
//!
//! Each controller used to LIST and WATCH Nodes itself and keep its own copy of every Node: four watches and
//! four caches of 5,000 Nodes. A hub keeps the one store (of each object what its `Watched` impl keeps) and hands every
//! event to each subscriber through its own unbounded channel, so that a slow controller delays no other. A
//! subscriber that arrives after the first list (a controller started later, or during a relist) is first given
//! the store as a list of its own (`Init`, `InitApply` per object, `InitDone`), as a watch of its own would have.

use std::{
    any::{Any, TypeId},
    collections::HashMap,
    fmt::Debug,
    sync::{Arc, Mutex, PoisonError},
};

use kube::{
    Api, Client,
    runtime::{reflector, reflector::Store, reflector::store::Writer, watcher},
};
use tokio::{sync::mpsc, task::AbortHandle};

use crate::watch::{Watched, reflect};

type HubKey = (TypeId, Option<String>);

/// The process's shared watches, one per kind and selector, all through one client; cheap to clone (clones
/// share them). The watches stop when the last clone is dropped.
#[derive(Clone)]
pub struct Informers {
    inner: Arc<Registry>,
}

struct Registry {
    client: Client,
    hubs: Mutex<HashMap<HubKey, (AnyHub, WatchTask)>>,
}

/// The task of a hub's watch, once started.
type WatchTask = Arc<Mutex<Option<AbortHandle>>>;

/// A `Hub<K>` of some `K`.
type AnyHub = Arc<dyn Any + Send + Sync>;

/// What starts a hub's watch: taken by its first subscriber.
type PendingWatch<K> = Mutex<Option<(Api<<K as Watched>::Object>, Option<String>, Writer<K>)>>;

impl Drop for Registry {
    fn drop(&mut self) {
        let hubs = self.hubs.get_mut().unwrap_or_else(PoisonError::into_inner);
        for (_, task) in hubs.values() {
            if let Some(task) = task.lock().unwrap_or_else(PoisonError::into_inner).take() {
                task.abort();
            }
        }
    }
}

impl Debug for Informers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let hubs = self
            .inner
            .hubs
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len();
        f.debug_struct("Informers").field("hubs", &hubs).finish()
    }
}

impl Informers {
    /// Shared watches through `client` (upstream's shared informer factory has a client of its own too).
    pub fn new(client: Client) -> Self {
        Self {
            inner: Arc::new(Registry {
                client,
                hubs: Mutex::new(HashMap::new()),
            }),
        }
    }

    /// The hub of `K` with `selector`, made (not yet watching) on first use.
    pub(crate) fn hub<K>(&self, selector: Option<&str>) -> Arc<Hub<K>>
    where
        K: Watched,
    {
        let key = (TypeId::of::<K>(), selector.map(str::to_owned));
        let mut hubs = self.inner.hubs.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(hub) = hubs
            .get(&key)
            .and_then(|(h, _)| Arc::clone(h).downcast::<Hub<K>>().ok())
        {
            return hub;
        }
        let task = WatchTask::default();
        let hub = Arc::new(Hub::new(
            Api::all(self.inner.client.clone()),
            selector,
            task.clone(),
        ));
        hubs.insert(key, (hub.clone(), task));
        hub
    }
}

/// One shared watch: its store, the watch not yet started, and the subscribers' channels.
pub(crate) struct Hub<K: Watched> {
    store: Store<K>,
    /// Taken by the first subscriber to run, which starts the watch.
    pending: PendingWatch<K>,
    subs: Mutex<Subscribers<K>>,
    task: WatchTask,
}

/// A subscriber's channel: events share the store's objects (`watch::shared`), so a subscriber costs no copy.
type Sender<K> = mpsc::UnboundedSender<watcher::Event<Arc<K>>>;

struct Subscribers<K> {
    live: Vec<Sender<K>>,
    /// Arrived during a list: given the whole store when it is done.
    waiting: Vec<Sender<K>>,
    listing: bool,
    listed: bool,
}

impl<K> Hub<K>
where
    K: Watched,
{
    fn new(api: Api<K::Object>, selector: Option<&str>, task: WatchTask) -> Self {
        let (store, writer) = reflector::store();
        Self {
            store,
            task,
            pending: Mutex::new(Some((api, selector.map(str::to_owned), writer))),
            subs: Mutex::new(Subscribers {
                live: Vec::new(),
                waiting: Vec::new(),
                listing: false,
                listed: false,
            }),
        }
    }

    pub(crate) fn store(&self) -> Store<K> {
        self.store.clone()
    }

    /// Hands every event to `on_event` (after the shared store has it), starting the watch if nobody has yet;
    /// returns only if the watch ends.
    pub(crate) async fn run(self: Arc<Self>, mut on_event: impl FnMut(watcher::Event<Arc<K>>)) {
        let (tx, mut rx) = mpsc::unbounded_channel();
        self.subscribe(tx);
        let pending = self.pending.lock().unwrap_or_else(PoisonError::into_inner).take();
        if let Some((api, selector, writer)) = pending {
            let hub = self.clone();
            // Its own task: the watch outlives any one controller that shuts down before the others (it stops
            // with the registry).
            let task = tokio::spawn(async move {
                reflect(api, selector.as_deref(), writer, |event| hub.publish(&event)).await;
            });
            *self.task.lock().unwrap_or_else(PoisonError::into_inner) = Some(task.abort_handle());
        }
        while let Some(event) = rx.recv().await {
            on_event(event);
        }
    }

    fn subscribe(&self, tx: Sender<K>) {
        let mut subs = self.subs.lock().unwrap_or_else(PoisonError::into_inner);
        if subs.listing {
            subs.waiting.push(tx);
            return;
        }
        if subs.listed && !self.replay(&tx) {
            return;
        }
        subs.live.push(tx);
    }

    /// The store as a list of its own; `false` if the subscriber is gone.
    fn replay(&self, tx: &Sender<K>) -> bool {
        let mut ok = tx.send(watcher::Event::Init).is_ok();
        for obj in self.store.state() {
            ok = ok && tx.send(watcher::Event::InitApply(obj)).is_ok();
        }
        ok && tx.send(watcher::Event::InitDone).is_ok()
    }

    /// One event of the watch (already in the store) to every subscriber.
    fn publish(&self, event: &watcher::Event<Arc<K>>) {
        let mut subs = self.subs.lock().unwrap_or_else(PoisonError::into_inner);
        subs.live.retain(|tx| tx.send(event.clone()).is_ok());
        match event {
            watcher::Event::Init => subs.listing = true,
            watcher::Event::InitDone => {
                subs.listing = false;
                subs.listed = true;
                let waiting = std::mem::take(&mut subs.waiting);
                for tx in waiting {
                    if self.replay(&tx) {
                        subs.live.push(tx);
                    }
                }
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use std::time::Duration;

    use hyper::{Request, Response};
    use k8s_openapi::api::core::v1::{Node, Service};
    use kube::{client::Body, runtime::reflector::ObjectRef};
    use serde_json::json;

    use super::*;
    use crate::Informer;

    /// Requests by kind: (lists, watches) of Nodes, (lists, watches) of Services.
    type Counts = Arc<Mutex<[usize; 4]>>;

    fn node_json(name: &str) -> serde_json::Value {
        json!({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {
                "name": name, "resourceVersion": "5",
                "managedFields": [{ "manager": "kubelet", "operation": "Update", "apiVersion": "v1" }],
            },
            "status": { "images": [{ "names": ["registry/image:1"], "sizeBytes": 1000 }] },
        })
    }

    /// An apiserver with two Nodes and no Service that never ends a watch; counts LISTs and WATCHes.
    fn apiserver() -> (Client, Counts) {
        let (service, mut handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
        let counts = Counts::default();
        let seen = counts.clone();
        tokio::spawn(async move {
            let mut watches = Vec::new();
            while let Some((request, send)) = handle.next_request().await {
                let path = request.uri().path().to_owned();
                let watch = request.uri().query().unwrap_or_default().contains("watch=true");
                let kind = usize::from(path.ends_with("/services")) * 2;
                seen.lock().unwrap()[kind + usize::from(watch)] += 1;
                if watch {
                    // Held open: the watch never ends, so any second one is a second watch, not a retry.
                    watches.push(send);
                    continue;
                }
                let items = if kind == 0 {
                    vec![node_json("a"), node_json("b")]
                } else {
                    Vec::new()
                };
                let list = json!({ "apiVersion": "v1", "kind": "List", "metadata": { "resourceVersion": "7" },
                    "items": items });
                send.send_response(
                    Response::builder()
                        .header("content-type", "application/json")
                        .body(Body::from(serde_json::to_vec(&list).unwrap()))
                        .unwrap(),
                );
            }
        });
        (Client::new(service, "default"), counts)
    }

    /// Runs a subscriber of Nodes; returns the names of its `InitApply` events as they come.
    fn subscribe(informers: &Informers) -> (Store<Node>, mpsc::UnboundedReceiver<String>) {
        let informer = Informer::<Node>::shared(informers, None);
        let store = informer.store();
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(informer.run(move |event| {
            if let watcher::Event::InitApply(node) = event {
                let _ = tx.send(node.metadata.name.clone().unwrap_or_default());
            }
        }));
        (store, rx)
    }

    async fn listed(rx: &mut mpsc::UnboundedReceiver<String>) -> Vec<String> {
        let mut names = vec![rx.recv().await.unwrap(), rx.recv().await.unwrap()];
        names.sort();
        names
    }

    #[tokio::test]
    async fn one_list_and_one_watch_per_kind_serve_every_controller() {
        let (client, counts) = apiserver();
        let informers = Informers::new(client);
        // The cloud-node, node-lifecycle, route, service and tagging controllers' Node informers.
        let mut subscribers: Vec<_> = (0..5).map(|_| subscribe(&informers)).collect();
        let services = Informer::<Service>::shared(&informers, None);
        let service_store = services.store();
        tokio::spawn(services.run(|_| {}));
        for (store, rx) in &mut subscribers {
            store.wait_until_ready().await.unwrap();
            assert_eq!(listed(rx).await, ["a", "b"]);
        }
        service_store.wait_until_ready().await.unwrap();
        // A controller started after the list is given the store as a list of its own, with no request.
        let (late, mut rx) = subscribe(&informers);
        assert_eq!(listed(&mut rx).await, ["a", "b"]);
        // The watches follow the lists; wait until both were asked for (there is no event to wait on).
        loop {
            let [_, nodes, _, services] = *counts.lock().unwrap();
            if nodes + services >= 2 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert_eq!(
            *counts.lock().unwrap(),
            [1, 1, 1, 1],
            "Node LIST, WATCH; Service LIST, WATCH"
        );
        // One store, shared, and stripped.
        for (store, _) in &subscribers {
            assert_eq!(store.state().len(), 2);
        }
        let a = late
            .state()
            .into_iter()
            .find(|n| n.metadata.name.as_deref() == Some("a"))
            .unwrap();
        assert!(a.metadata.managed_fields.is_none());
        assert!(a.status.as_ref().unwrap().images.is_none());
    }

    #[tokio::test]
    async fn a_subscriber_arriving_during_a_list_gets_the_whole_list_once() {
        let (client, _) = apiserver();
        let informers = Informers::new(client);
        let hub = informers.hub::<Node>(None);
        let (_, _, mut writer) = hub.pending.lock().unwrap().take().unwrap();
        let store = writer.as_reader();
        let mut step = |event: watcher::Event<Node>| {
            writer.apply_watcher_event(&event);
            hub.publish(&crate::watch::shared(event, |n| {
                store.get(&ObjectRef::from_obj(n))
            }));
        };
        let node = |name: &str| serde_json::from_value::<Node>(node_json(name)).unwrap();
        let (early, mut early_rx) = mpsc::unbounded_channel();
        hub.subscribe(early);
        step(watcher::Event::Init);
        step(watcher::Event::InitApply(node("a")));
        let (late, mut late_rx) = mpsc::unbounded_channel();
        hub.subscribe(late);
        step(watcher::Event::InitApply(node("b")));
        step(watcher::Event::InitDone);
        step(watcher::Event::Apply(node("c")));
        let events = |rx: &mut mpsc::UnboundedReceiver<watcher::Event<Arc<Node>>>| {
            let mut out = Vec::new();
            while let Ok(event) = rx.try_recv() {
                out.push(match event {
                    watcher::Event::Init => "init".to_owned(),
                    watcher::Event::InitApply(n) => format!("list {}", n.metadata.name.clone().unwrap()),
                    watcher::Event::InitDone => "done".to_owned(),
                    watcher::Event::Apply(n) => format!("apply {}", n.metadata.name.clone().unwrap()),
                    watcher::Event::Delete(n) => format!("delete {}", n.metadata.name.clone().unwrap()),
                });
            }
            out
        };
        assert_eq!(
            events(&mut early_rx),
            ["init", "list a", "list b", "done", "apply c"]
        );
        let mut late = events(&mut late_rx);
        late[1..3].sort();
        assert_eq!(late, ["init", "list a", "list b", "done", "apply c"]);
    }
}
