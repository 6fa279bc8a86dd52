//! What every controller sets up before its work starts: a Kubernetes client, an Event recorder, a store per
//! watched kind kept by a reflector (of each object, what its [`Watched`] impl keeps; deletions missed while the
//! watch was down reported, see [`Informer::run`]), and the race between shutdown, the watches and the work.
//!
//! ```no_run
//! # use ccm_controllers::{Bootstrap, CachedNode, Clock, ControllerMetrics, run_until};
//! # async fn example(client: kube::Client, shutdown: impl std::future::Future<Output = ()> + Send) {
//! let boot = Bootstrap::new(client, "my-controller", Clock::system(), ControllerMetrics::default());
//! // What the controllers keep of a Node (`Node` itself works too, cached whole).
//! let nodes = boot.informer::<CachedNode>(None);
//! let store = nodes.store();
//! let watch = nodes.run(|event| tracing::debug!(?event, "node event"));
//! let work = async {
//!     if store.wait_until_ready().await.is_ok() {
//!         // reconcile from `store`
//!     }
//! };
//! run_until(shutdown, watch, work).await;
//! # }
//! ```

use std::{fmt::Debug, future::Future, sync::Arc};

use kube::{
    Api, Client,
    runtime::{reflector, reflector::Store, reflector::store::Writer, watcher},
};

use crate::{
    Clock, ControllerMetrics,
    events::EventRecorder,
    shared::{Hub, Informers},
    watch::{Watched, reflect},
};

/// A controller's client and Event recorder.
#[derive(Clone)]
pub struct Bootstrap {
    /// The controller's Kubernetes client.
    pub client: Client,
    /// Its Event recorder (source component `component`).
    pub recorder: EventRecorder,
    /// The process's shared watches, if the controller was given them.
    informers: Option<Informers>,
}

/// The store of one kind and the watch that keeps it: [`store`](Informer::store) to read, [`run`](Informer::run)
/// to keep it. Either the controller's own watch, or a subscription to the process's shared one
/// ([`Informers`]).
pub struct Informer<K: Watched> {
    store: Store<K>,
    source: Source<K>,
}

struct OwnWatch<K: Watched> {
    api: Api<K::Object>,
    selector: Option<String>,
    writer: Writer<K>,
}

enum Source<K: Watched> {
    Own(Box<OwnWatch<K>>),
    Shared(std::sync::Arc<Hub<K>>),
}

// === impl Bootstrap ===

impl Bootstrap {
    /// A controller named `component` (the source of its Events) counting its API writes into `metrics`.
    pub fn new(client: Client, component: &str, clock: Clock, metrics: ControllerMetrics) -> Self {
        let recorder = EventRecorder::new(client.clone(), component, clock, metrics);
        Self {
            client,
            recorder,
            informers: None,
        }
    }

    /// Takes its informers from the process's shared watches (`Some`), rather than watching on its own.
    #[must_use]
    pub fn with_informers(mut self, informers: Option<Informers>) -> Self {
        self.informers = informers;
        self
    }

    /// The objects of `K` in all namespaces, optionally only those matching a label `selector`.
    pub fn informer<K>(&self, selector: Option<&str>) -> Informer<K>
    where
        K: Watched,
    {
        match &self.informers {
            Some(informers) => Informer::shared(informers, selector),
            None => Informer::all(self.client.clone(), selector),
        }
    }
}

impl Debug for Bootstrap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bootstrap").finish_non_exhaustive()
    }
}

// === impl Informer ===

impl<K> Informer<K>
where
    K: Watched,
{
    /// The objects of `K` in all namespaces, optionally only those matching a label `selector`.
    pub fn all(client: Client, selector: Option<&str>) -> Self {
        let (store, writer) = reflector::store();
        Self {
            store,
            source: Source::Own(Box::new(OwnWatch {
                api: Api::all(client),
                selector: selector.map(str::to_owned),
                writer,
            })),
        }
    }

    /// A subscription to the process's shared watch of `K` with `selector` (made on first use).
    pub fn shared(informers: &Informers, selector: Option<&str>) -> Self {
        let hub = informers.hub::<K>(selector);
        Self {
            store: hub.store(),
            source: Source::Shared(hub),
        }
    }

    /// A reader of the store (ready once the first list is in: [`Store::wait_until_ready`]).
    pub fn store(&self) -> Store<K> {
        self.store.clone()
    }

    /// Keeps the store in sync and hands every watch event to `on_event` after the store has it; never returns.
    /// Watch errors are logged and retried with backoff. After a relist, every object the new list lacks (deleted
    /// while the watch was down) is handed over as a [`watcher::Event::Delete`] before the relist's `InitDone`.
    ///
    /// An event's object is shared, not copied: for an applied object it is the store's own `Arc`.
    pub async fn run(self, on_event: impl FnMut(watcher::Event<Arc<K>>)) {
        match self.source {
            Source::Own(own) => reflect(own.api, own.selector.as_deref(), own.writer, on_event).await,
            Source::Shared(hub) => hub.run(on_event).await,
        }
    }
}

/// Runs a controller's `watches` and `work` until `shutdown` completes, or until either of them ends.
pub async fn run_until(
    shutdown: impl Future<Output = ()>,
    watches: impl Future<Output = ()>,
    work: impl Future<Output = ()>,
) {
    tokio::select! {
        () = shutdown => {},
        () = watches => {},
        () = work => {},
    }
}
