use futures::StreamExt;
use kube::{
    Api, Resource,
    runtime::{WatchStreamExt, reflector, reflector::store::Writer, watcher},
};

/// Keeps `writer`'s store in sync with the objects of `api` and hands every watch event to `on_event` after
/// the store has it. Watch errors are logged and retried with kube-runtime's default backoff. Never returns.
pub(crate) async fn reflect<K, F>(api: Api<K>, selector: Option<&str>, writer: Writer<K>, mut on_event: F)
where
    K: Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned + Send + Sync + 'static,
    K::DynamicType: Default + Eq + std::hash::Hash + Clone,
    F: FnMut(watcher::Event<K>),
{
    let mut config = watcher::Config::default();
    if let Some(selector) = selector {
        config = config.labels(selector);
    }
    let stream = reflector(writer, watcher(api, config).default_backoff());
    let mut stream = std::pin::pin!(stream);
    while let Some(event) = stream.next().await {
        match event {
            Ok(event) => on_event(event),
            Err(error) => tracing::warn!(%error, "watch failed; retrying"),
        }
    }
}
