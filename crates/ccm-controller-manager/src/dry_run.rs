//! `--dry-run`: a controller manager that writes nothing. Every client the runtime builds for its controllers
//! refuses requests that would change the cluster (`POST`, `PUT`, `PATCH`, `DELETE`) without sending them, and
//! records them per controller and object: what the controller would have written. The service and route
//! controllers do not even try: they hand their plans over instead (a [`ccm_controllers::DryRunSink`]). The AWS
//! half is the provider's (the AWS binary builds its adapter read-only, so a missed path fails loudly).
//!
//! The report is served at `/dry-run` on the secure port (authorized as `/metrics`), and the gauge
//! `cloud_controller_dry_run_pending_changes{controller}` counts the objects with pending changes. Plans are
//! replaced by each new plan of the same object; a refused write stays pending while its controller keeps asking
//! for it (they retry failed writes), and leaves the report [`WRITE_EXPIRY`] after it last asked. Events are not
//! objects of their own: refused Events are only counted.

use prometheus_client::{
    encoding::EncodeLabelSet,
    metrics::{family::Family, gauge::Gauge},
};
use std::{
    collections::{BTreeMap, BTreeSet},
    future::Future,
    pin::Pin,
    sync::{Arc, Mutex, MutexGuard, PoisonError},
    task::{Context, Poll},
    time::Duration,
};

/// How long a refused write stays pending after its controller last asked for it: longer than any controller
/// waits between two tries of a write it still wants while the object stays unchanged (the cloud-node
/// controller is queued again by every Node update, which kubelets make at least every 5 minutes).
pub const WRITE_EXPIRY: Duration = Duration::from_secs(10 * 60);

/// A write a controller would have sent.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct PendingWrite {
    /// The controller whose client it came from (the client's user agent after `cloud-controller-manager/`).
    pub controller: String,
    /// `POST`, `PUT`, `PATCH` or `DELETE`.
    pub method: String,
    /// The request's path (the object), without the query.
    pub path: String,
    /// The request's content type (a patch's type), if any.
    pub content_type: Option<String>,
}

/// What the dry run found so far, and the gauge `cloud_controller_dry_run_pending_changes{controller}` counting
/// the objects with pending changes.
#[derive(Debug)]
pub struct DryRunLog {
    state: Mutex<State>,
    expiry: Duration,
    pending: Family<ControllerLabel, Gauge>,
}

#[derive(Debug, Default)]
struct State {
    /// The latest refused write per controller and object, and when it was last asked for.
    writes: BTreeMap<(String, String), (PendingWrite, tokio::time::Instant)>,
    /// Refused Events per controller.
    events: BTreeMap<String, u64>,
    /// The service controller's load-balancer plans with changes, by Service (`namespace/name`).
    plans: BTreeMap<String, ccm_cloud_provider::LoadBalancerPlan>,
    /// The route controller's last pass, by Node.
    routes: BTreeMap<String, Vec<String>>,
    /// Other controllers' changes, by controller and object.
    changes: BTreeMap<(String, String), Vec<String>>,
    /// Every controller the gauge has shown, so that one with nothing pending any more shows 0.
    shown: BTreeSet<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct ControllerLabel {
    controller: String,
}

/// The error of a refused write: what the controller sees instead of the apiserver's answer.
#[derive(Debug, thiserror::Error)]
#[error("dry run: {method} {path} would change the cluster and was not sent")]
pub struct Refused {
    method: String,
    path: String,
}

/// The layer that refuses writes, recording them in a [`DryRunLog`] under `controller` (without a log, it lets
/// everything through: the clients of a run that is not a dry run).
#[derive(Clone)]
pub(crate) struct DryRunLayer {
    pub(crate) log: Option<Arc<DryRunLog>>,
    pub(crate) controller: String,
}

pub(crate) struct DryRun<S> {
    inner: S,
    log: Option<Arc<DryRunLog>>,
    controller: String,
}

// === impl DryRunLog ===

impl Default for DryRunLog {
    fn default() -> Self {
        Self::with_expiry(WRITE_EXPIRY)
    }
}

impl DryRunLog {
    /// A log whose refused writes leave it `expiry` after they were last asked for.
    pub fn with_expiry(expiry: Duration) -> Self {
        Self {
            state: Mutex::default(),
            expiry,
            pending: Family::default(),
        }
    }

    /// Every pending write, by controller and object.
    pub fn writes(&self) -> Vec<PendingWrite> {
        let mut state = self.lock();
        self.expire(&mut state);
        state.writes.values().map(|(w, _)| w.clone()).collect()
    }

    /// The load-balancer plans with changes, by Service.
    pub fn plans(&self) -> BTreeMap<String, ccm_cloud_provider::LoadBalancerPlan> {
        self.lock().plans.clone()
    }

    /// The route changes of the route controller's last pass, by Node.
    pub fn route_changes(&self) -> BTreeMap<String, Vec<String>> {
        self.lock().routes.clone()
    }

    /// How many objects have pending changes, per controller.
    pub fn pending_objects(&self) -> BTreeMap<String, usize> {
        let mut state = self.lock();
        self.expire(&mut state);
        pending_objects(&state)
    }

    /// Sets the gauge from what is pending now (and drops expired writes); the runtime calls it periodically,
    /// as writes expire without any event.
    pub(crate) fn update_gauge(&self) {
        let mut state = self.lock();
        self.expire(&mut state);
        let pending = pending_objects(&state);
        state.shown.extend(pending.keys().cloned());
        for controller in &state.shown {
            let objects = pending.get(controller).copied().unwrap_or(0);
            let label = ControllerLabel {
                controller: controller.clone(),
            };
            self.pending
                .get_or_create(&label)
                .set(i64::try_from(objects).unwrap_or(i64::MAX));
        }
    }

    /// Registers the gauge in `registry` (the runtime's, served on `/metrics`).
    pub(crate) fn register(&self, registry: &mut prometheus_client::registry::Registry) {
        registry.register(
            "cloud_controller_dry_run_pending_changes",
            "Objects a controller would change, had the dry run not refused its writes",
            self.pending.clone(),
        );
    }

    /// The `/dry-run` report: the objects per controller, every pending write, the plans.
    pub(crate) fn report(&self) -> serde_json::Value {
        let mut state = self.lock();
        self.expire(&mut state);
        let plans: Vec<serde_json::Value> = state
            .plans
            .iter()
            .map(|(service, plan)| {
                serde_json::json!({ "service": service, "replaces": plan.replaces, "changes": plan.changes })
            })
            .collect();
        let routes: Vec<serde_json::Value> = state
            .routes
            .iter()
            .map(|(node, changes)| serde_json::json!({ "node": node, "changes": changes }))
            .collect();
        let changes: Vec<serde_json::Value> = state
            .changes
            .iter()
            .map(|((controller, object), changes)| {
                serde_json::json!({ "controller": controller, "object": object, "changes": changes })
            })
            .collect();
        let writes: Vec<&PendingWrite> = state.writes.values().map(|(w, _)| w).collect();
        serde_json::json!({
            "pending_objects": pending_objects(&state),
            "writes": writes,
            "load_balancers": plans,
            "routes": routes,
            "changes": changes,
            "events_not_posted": state.events,
        })
    }

    fn record(&self, write: PendingWrite) {
        let event = write.path.split('/').any(|segment| segment == "events");
        tracing::info!(
            controller = %write.controller,
            method = %write.method,
            path = %write.path,
            "dry run: not written"
        );
        let mut state = self.lock();
        if event {
            *state.events.entry(write.controller).or_default() += 1;
            return;
        }
        let key = (write.controller.clone(), write.path.clone());
        state.writes.insert(key, (write, tokio::time::Instant::now()));
        drop(state);
        self.update_gauge();
    }

    fn expire(&self, state: &mut State) {
        state.writes.retain(|_, (_, asked)| asked.elapsed() < self.expiry);
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The objects with pending changes per controller: refused writes by path, plans by the object's path.
fn pending_objects(state: &State) -> BTreeMap<String, usize> {
    let mut objects: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (controller, path) in state.writes.keys() {
        objects
            .entry(controller.clone())
            .or_default()
            .insert(path.clone());
    }
    for key in state.plans.keys() {
        let (namespace, name) = key.split_once('/').unwrap_or(("", key));
        let path = format!("/api/v1/namespaces/{namespace}/services/{name}");
        objects.entry("service".to_owned()).or_default().insert(path);
    }
    for node in state.routes.keys() {
        objects
            .entry("route".to_owned())
            .or_default()
            .insert(format!("route:{node}"));
    }
    for (controller, object) in state.changes.keys() {
        objects
            .entry(controller.clone())
            .or_default()
            .insert(object.clone());
    }
    objects.into_iter().map(|(c, o)| (c, o.len())).collect()
}

impl ccm_controllers::DryRunSink for DryRunLog {
    fn load_balancer(&self, key: &str, plan: Option<ccm_cloud_provider::LoadBalancerPlan>) {
        let mut state = self.lock();
        match plan.filter(|p| !p.changes.is_empty()) {
            Some(plan) => {
                if state.plans.get(key) != Some(&plan) {
                    for line in &plan.changes {
                        tracing::info!(service = key, replaces = plan.replaces, "dry run: {line}");
                    }
                }
                state.plans.insert(key.to_owned(), plan);
            }
            // Up to date (or the provider cannot tell): nothing pending for it any more.
            None => {
                state.plans.remove(key);
            }
        }
        drop(state);
        self.update_gauge();
    }

    fn routes(&self, changes: BTreeMap<String, Vec<String>>) {
        let mut state = self.lock();
        for (node, lines) in &changes {
            if state.routes.get(node) != Some(lines) {
                for line in lines {
                    tracing::info!(node = %node, "dry run: {line}");
                }
            }
        }
        state.routes = changes;
        drop(state);
        self.update_gauge();
    }

    fn changes(&self, controller: &str, object: &str, changes: Vec<String>) {
        let key = (controller.to_owned(), object.to_owned());
        let mut state = self.lock();
        if changes.is_empty() {
            state.changes.remove(&key);
        } else {
            if state.changes.get(&key) != Some(&changes) {
                for line in &changes {
                    tracing::info!(controller, object, "dry run: {line}");
                }
            }
            state.changes.insert(key, changes);
        }
        drop(state);
        self.update_gauge();
    }
}

// === impl DryRunLayer ===

impl<S> tower::Layer<S> for DryRunLayer {
    type Service = DryRun<S>;

    fn layer(&self, inner: S) -> Self::Service {
        DryRun {
            inner,
            log: self.log.clone(),
            controller: self.controller.clone(),
        }
    }
}

impl<S, B> tower::Service<hyper::Request<B>> for DryRun<S>
where
    S: tower::Service<hyper::Request<B>>,
    S::Error: Into<tower::BoxError>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = tower::BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, tower::BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, req: hyper::Request<B>) -> Self::Future {
        let method = req.method();
        let writes = [
            hyper::Method::POST,
            hyper::Method::PUT,
            hyper::Method::PATCH,
            hyper::Method::DELETE,
        ];
        let Some(log) = self.log.as_ref().filter(|_| writes.contains(method)) else {
            let response = self.inner.call(req);
            return Box::pin(async move { response.await.map_err(Into::into) });
        };
        let write = PendingWrite {
            controller: self.controller.clone(),
            method: method.to_string(),
            path: req.uri().path().to_owned(),
            content_type: req
                .headers()
                .get(hyper::header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned),
        };
        let refused = Refused {
            method: write.method.clone(),
            path: write.path.clone(),
        };
        log.record(write);
        Box::pin(async move { Err(Box::new(refused) as tower::BoxError) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tower::{Layer, Service};

    /// A service that answers every request and counts them.
    #[derive(Clone, Default)]
    struct Counting(Arc<std::sync::atomic::AtomicUsize>);

    impl tower::Service<hyper::Request<()>> for Counting {
        type Response = ();
        type Error = tower::BoxError;
        type Future = Pin<Box<dyn Future<Output = Result<(), tower::BoxError>> + Send>>;

        fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
            Poll::Ready(Ok(()))
        }

        fn call(&mut self, _: hyper::Request<()>) -> Self::Future {
            self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            Box::pin(async { Ok(()) })
        }
    }

    #[tokio::test]
    async fn reads_pass_and_writes_are_refused_and_recorded() {
        let log = Arc::new(DryRunLog::default());
        let inner = Counting::default();
        let sent = inner.0.clone();
        let layer = DryRunLayer {
            log: Some(log.clone()),
            controller: "cloud-node".to_owned(),
        };
        let mut svc = layer.layer(inner);
        let get = hyper::Request::get("/api/v1/nodes?watch=true").body(()).unwrap();
        svc.call(get).await.unwrap();
        for _ in 0..2 {
            let patch = hyper::Request::patch("/api/v1/nodes/n1")
                .header(hyper::header::CONTENT_TYPE, "application/merge-patch+json")
                .body(())
                .unwrap();
            let e = svc.call(patch).await.unwrap_err();
            assert!(e.to_string().contains("dry run: PATCH /api/v1/nodes/n1"), "{e}");
        }
        let delete = hyper::Request::delete("/api/v1/nodes/n2").body(()).unwrap();
        assert!(svc.call(delete).await.is_err());
        assert_eq!(
            sent.load(std::sync::atomic::Ordering::SeqCst),
            1,
            "only the read was sent"
        );
        assert_eq!(
            log.pending_objects(),
            BTreeMap::from([("cloud-node".to_owned(), 2)])
        );
        let writes = log.writes();
        assert_eq!(
            writes[0].content_type.as_deref(),
            Some("application/merge-patch+json")
        );
        assert_eq!(
            (writes[1].method.as_str(), writes[1].path.as_str()),
            ("DELETE", "/api/v1/nodes/n2")
        );
        let mut registry = prometheus_client::registry::Registry::default();
        log.register(&mut registry);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        assert!(
            text.contains("cloud_controller_dry_run_pending_changes{controller=\"cloud-node\"} 2"),
            "{text}"
        );
        assert_eq!(log.report()["pending_objects"]["cloud-node"], 2);
    }
    #[test]
    fn plans_and_routes_follow_the_latest_and_events_are_only_counted() {
        use ccm_controllers::DryRunSink;
        let log = DryRunLog::with_expiry(Duration::ZERO);
        let plan = ccm_cloud_provider::LoadBalancerPlan::new(vec!["create listener 80".to_owned()], false);
        log.load_balancer("default/a", Some(plan));
        log.routes(BTreeMap::from([(
            "n1".to_owned(),
            vec!["create route 10.0.1.0/24 -> n1".to_owned()],
        )]));
        log.record(PendingWrite {
            controller: "node-lifecycle".to_owned(),
            method: "POST".to_owned(),
            path: "/api/v1/namespaces/default/events".to_owned(),
            content_type: None,
        });
        assert_eq!(
            log.pending_objects(),
            BTreeMap::from([("route".to_owned(), 1), ("service".to_owned(), 1)])
        );
        assert_eq!(log.report()["events_not_posted"]["node-lifecycle"], 1);
        assert_eq!(log.report()["routes"][0]["node"], "n1");
        log.changes("tagging", "node n1", vec!["tag instance i-1".to_owned()]);
        assert_eq!(log.pending_objects().get("tagging"), Some(&1));
        assert_eq!(log.report()["changes"][0]["object"], "node n1");
        log.changes("tagging", "node n1", Vec::new());
        let mut registry = prometheus_client::registry::Registry::default();
        log.register(&mut registry);
        // Up to date now: the gauge shows 0, not the last count.
        log.load_balancer("default/a", None);
        log.routes(BTreeMap::new());
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        assert!(
            text.contains("cloud_controller_dry_run_pending_changes{controller=\"service\"} 0"),
            "{text}"
        );
        assert!(log.pending_objects().is_empty());
    }

    #[test]
    fn a_write_nobody_asks_for_again_expires() {
        let log = DryRunLog::with_expiry(Duration::from_millis(50));
        log.record(PendingWrite {
            controller: "cloud-node".to_owned(),
            method: "PATCH".to_owned(),
            path: "/api/v1/nodes/n1".to_owned(),
            content_type: None,
        });
        assert_eq!(log.writes().len(), 1);
        std::thread::sleep(Duration::from_millis(60));
        assert!(log.writes().is_empty());
        assert!(log.pending_objects().is_empty());
    }
}
