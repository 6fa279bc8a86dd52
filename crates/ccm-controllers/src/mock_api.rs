//! A scripted Kubernetes API for unit tests: every request the controllers send is recorded (method, path,
//! content type, JSON body) and answered by a closure, so tests assert on the exact requests.

use std::sync::{Arc, Mutex};

use hyper::{Request, Response};
use kube::{Client, client::Body};
use serde_json::{Value, json};

/// One request as the apiserver would have seen it.
#[derive(Debug, Clone)]
pub(crate) struct Recorded {
    pub method: String,
    pub path: String,
    pub content_type: String,
    pub body: Value,
}

impl Recorded {
    /// Whether this is a write to `path` (a PATCH).
    pub fn is_patch_of(&self, path: &str) -> bool {
        self.method == "PATCH" && self.path == path
    }

    /// Whether this posts an Event.
    pub fn is_event(&self) -> bool {
        self.method == "POST" && self.path.ends_with("/events")
    }
}

/// A client whose requests go to a scripted responder.
pub(crate) struct MockApi {
    pub client: Client,
    requests: Arc<Mutex<Vec<Recorded>>>,
}

impl MockApi {
    /// Every request so far, in order.
    pub fn requests(&self) -> Vec<Recorded> {
        self.requests.lock().unwrap().clone()
    }

    /// Every request but Event posts, in order.
    pub fn writes(&self) -> Vec<Recorded> {
        self.requests().into_iter().filter(|r| !r.is_event()).collect()
    }

    /// The reasons of the Events posted, in order.
    pub fn event_reasons(&self) -> Vec<String> {
        self.requests()
            .iter()
            .filter(|r| r.is_event())
            .map(|r| r.body["reason"].as_str().unwrap_or_default().to_owned())
            .collect()
    }
}

/// A `metav1.Status` failure body, as the apiserver sends it.
pub(crate) fn status_error(code: u16, reason: &str) -> (u16, Value) {
    (
        code,
        json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": format!("scripted {reason}"), "reason": reason, "code": code,
        }),
    )
}

/// A minimal object of the kind the request is about.
fn default_reply(r: &Recorded) -> Value {
    let kind = if r.is_event() {
        "Event"
    } else if r.path.contains("/services/") {
        "Service"
    } else {
        "Node"
    };
    let mut object = json!({ "apiVersion": "v1", "kind": kind, "metadata": { "name": "x" } });
    if kind == "Event" {
        object["involvedObject"] = json!({});
    }
    object
}

/// Starts a scripted API: `respond` gives each request's status code and JSON body. `None` answers 200 with a
/// minimal object of the right kind.
pub(crate) fn mock_api(respond: impl Fn(&Recorded) -> Option<(u16, Value)> + Send + 'static) -> MockApi {
    mock_api_paced(std::time::Duration::ZERO, respond)
}

/// [`mock_api`] answering one request at a time, each after `pace` (an apiserver's client-side rate limit).
pub(crate) fn mock_api_paced(
    pace: std::time::Duration,
    respond: impl Fn(&Recorded) -> Option<(u16, Value)> + Send + 'static,
) -> MockApi {
    let (service, mut handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    let requests: Arc<Mutex<Vec<Recorded>>> = Arc::default();
    let log = Arc::clone(&requests);
    tokio::spawn(async move {
        while let Some((request, send)) = handle.next_request().await {
            let method = request.method().to_string();
            let path = request.uri().path().to_owned();
            let content_type = request
                .headers()
                .get("content-type")
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default()
                .to_owned();
            if !pace.is_zero() {
                tokio::time::sleep(pace).await;
            }
            let bytes = request.into_body().collect_bytes().await.unwrap();
            let body = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
            let recorded = Recorded {
                method,
                path,
                content_type,
                body,
            };
            let (status, reply) = respond(&recorded).unwrap_or_else(|| (200, default_reply(&recorded)));
            log.lock().unwrap().push(recorded);
            send.send_response(
                Response::builder()
                    .status(status)
                    .header("content-type", "application/json")
                    .body(Body::from(serde_json::to_vec(&reply).unwrap()))
                    .unwrap(),
            );
        }
    });
    MockApi {
        client: Client::new(service, "default"),
        requests,
    }
}
