use super::*;

use std::convert::Infallible;

use http_body_util::{BodyExt, Empty, Full, StreamBody};
use hyper::body::Bytes;
use tower::{Layer, Service, ServiceExt};

/// Sends `request` through the metrics layer to a server answering `status` with `body`; reads the answer's
/// body to the end when `read` and returns the process's `rest_client_*` samples for `host`.
async fn exchange<B: Body>(
    host: &str,
    request: hyper::Request<B>,
    status: u16,
    body: &'static str,
    read: bool,
) -> Vec<String> {
    let server = tower::service_fn(move |_req: hyper::Request<B>| async move {
        let mut response = hyper::Response::new(Full::new(Bytes::from_static(body.as_bytes())));
        *response.status_mut() = hyper::StatusCode::from_u16(status).unwrap();
        Ok::<_, Infallible>(response)
    });
    let mut svc = RestMetricsLayer {
        host: host.to_owned(),
    }
    .layer(server);
    let response = svc.ready().await.unwrap().call(request).await.unwrap();
    if read {
        response.into_body().collect().await.unwrap();
    }
    let mut registry = Registry::default();
    register(&mut registry);
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
    let host = format!("host=\"{host}\"");
    text.lines()
        .filter(|l| l.starts_with("rest_client_") && l.contains(&host))
        .map(str::to_owned)
        .collect()
}

fn get(uri: &str) -> hyper::Request<Empty<Bytes>> {
    hyper::Request::get(uri).body(Empty::new()).unwrap()
}

fn has(samples: &[String], prefix: &str, value: &str) -> bool {
    samples
        .iter()
        .any(|l| l.starts_with(prefix) && l.ends_with(&format!(" {value}")))
}

#[tokio::test]
async fn request_and_response_sizes_are_observed_in_component_base_buckets() {
    let h = "sizes-get:6443";
    let s = exchange(h, get("/api/v1/nodes"), 200, "hello", true).await;
    let labels = format!("{{verb=\"GET\",host=\"{h}\"}}");
    assert!(
        has(&s, &format!("rest_client_request_size_bytes_count{labels}"), "1"),
        "{s:#?}"
    );
    assert!(
        has(&s, &format!("rest_client_request_size_bytes_sum{labels}"), "0.0"),
        "{s:#?}"
    );
    assert!(
        has(&s, &format!("rest_client_response_size_bytes_sum{labels}"), "5.0"),
        "{s:#?}"
    );
    let bucket = format!("rest_client_response_size_bytes_bucket{{le=\"64.0\",verb=\"GET\",host=\"{h}\"}}");
    assert!(has(&s, &bucket, "1"), "{s:#?}");
    let top =
        format!("rest_client_response_size_bytes_bucket{{le=\"16777216.0\",verb=\"GET\",host=\"{h}\"}}");
    assert!(has(&s, &top, "1"), "{s:#?}");

    let h = "sizes-post:6443";
    let body = Full::new(Bytes::from(vec![b'x'; 300]));
    let post = hyper::Request::post("/api/v1/namespaces/default/events")
        .body(body)
        .unwrap();
    let s = exchange(h, post, 201, "created", true).await;
    let bucket =
        |le: &str| format!("rest_client_request_size_bytes_bucket{{le=\"{le}\",verb=\"POST\",host=\"{h}\"}}");
    assert!(has(&s, &bucket("256.0"), "0"), "{s:#?}");
    assert!(has(&s, &bucket("512.0"), "1"), "{s:#?}");
}

#[tokio::test]
async fn watches_and_unknown_lengths_have_no_sizes() {
    let h = "sizes-watch:6443";
    let s = exchange(
        h,
        get("/api/v1/nodes?resourceVersion=1&watch=true"),
        200,
        "{}",
        true,
    )
    .await;
    assert!(
        s.iter().any(|l| l.starts_with("rest_client_requests_total")),
        "{s:#?}"
    );
    assert!(!s.iter().any(|l| l.contains("_size_bytes")), "{s:#?}");

    let h = "sizes-stream:6443";
    let chunks = futures::stream::iter([Ok::<_, Infallible>(Frame::data(Bytes::from_static(b"abc")))]);
    let post = hyper::Request::post("/api/v1/x")
        .body(StreamBody::new(chunks))
        .unwrap();
    let s = exchange(h, post, 200, "ok", true).await;
    assert!(
        !s.iter().any(|l| l.starts_with("rest_client_request_size_bytes")),
        "{s:#?}"
    );
    assert!(
        s.iter()
            .any(|l| l.starts_with("rest_client_response_size_bytes_count")),
        "{s:#?}"
    );
}

#[tokio::test]
async fn unread_bodies_and_empty_error_bodies_are_not_observed() {
    let h = "sizes-unread:6443";
    let s = exchange(h, get("/api/v1/nodes"), 200, "a long list", false).await;
    assert!(
        !s.iter().any(|l| l.starts_with("rest_client_response_size_bytes")),
        "{s:#?}"
    );

    let h = "sizes-404:6443";
    let s = exchange(h, get("/api/v1/nodes/x"), 404, "", true).await;
    assert!(
        !s.iter().any(|l| l.starts_with("rest_client_response_size_bytes")),
        "{s:#?}"
    );
    let h = "sizes-404-body:6443";
    let s = exchange(h, get("/api/v1/nodes/x"), 404, "not found", true).await;
    assert!(
        s.iter()
            .any(|l| l.starts_with("rest_client_response_size_bytes_sum") && l.ends_with(" 9.0")),
        "{s:#?}"
    );
}

#[test]
fn process_numbers_come_from_proc() {
    let p = process_stats().expect("/proc is readable on Linux");
    assert!(p.resident_bytes.unwrap() > 0);
    assert!(p.open_fds.unwrap() > 0);
    assert!(p.max_fds.unwrap() >= p.open_fds.unwrap());
    let start = p.start_time_seconds.unwrap();
    assert!(start > 1.6e9, "a Unix time: {start}");
}
