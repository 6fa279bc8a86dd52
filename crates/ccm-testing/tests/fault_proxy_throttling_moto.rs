//! The fault proxy's throttling mode in front of the test environment's emulator: a burst beyond a bucket gets
//! the service's throttling error (EC2 `RequestLimitExceeded`, ELB `Throttling`) and never reaches the
//! emulator; after the refill time calls pass again.
//!
//! The buckets are small and slow (3 tokens, one more every 5 s): a burst of a few calls ends long before a
//! token comes back, whatever the machine's load, so the assertions are about counts. The requests are written
//! by hand (no SDK here, whose retries would hide the answers): form bodies as the SDKs send them, with an
//! unsigned `Authorization` header whose credential scope names the service (the emulators route by it and
//! check no signature).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::{collections::BTreeMap, time::Duration};

use ccm_testing::{
    FaultProxy, TestEnv, Throttling,
    throttling::{ActionClass, Api, Limit},
};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::TcpStream,
};

/// Three tokens, one more every five seconds.
const SMALL: Limit = Limit::new(3.0, 0.2);

/// Posts `body` to the proxy as a request to `service` and returns the HTTP status and the error code (empty
/// for an answer without one); fails after 30 s without an answer.
async fn post(proxy: &FaultProxy, service: &str, body: &str) -> (u16, String) {
    let url = proxy.url();
    let addr = url.trim_start_matches("http://");
    let region = &TestEnv::get().aws_region;
    let head = format!(
        "POST / HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/x-www-form-urlencoded; charset=utf-8\r\n\
         Content-Length: {}\r\nX-Amz-Date: 20260101T000000Z\r\nAuthorization: AWS4-HMAC-SHA256 \
         Credential=test/20260101/{region}/{service}/aws4_request, SignedHeaders=host;x-amz-date, Signature=00\r\n\
         Connection: close\r\n\r\n{body}",
        body.len()
    );
    let exchange = async {
        let mut conn = TcpStream::connect(addr).await?;
        conn.write_all(head.as_bytes()).await?;
        let mut raw = Vec::new();
        conn.read_to_end(&mut raw).await?;
        std::io::Result::Ok(raw)
    };
    let raw = tokio::time::timeout(Duration::from_secs(30), exchange)
        .await
        .expect("no answer within 30 s")
        .unwrap();
    let text = String::from_utf8_lossy(&raw);
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    // Only an error's code: a successful answer may hold `<Code>` elements of its own (a load balancer's
    // `<State><Code>active</Code>` when the shared emulator already holds one).
    let code = text
        .split_once("<Code>")
        .and_then(|(_, rest)| rest.split_once("</Code>"))
        .filter(|_| !(200..300).contains(&status))
        .map(|(code, _)| code.to_owned())
        .unwrap_or_default();
    (status, code)
}

/// `n` calls one after the other.
async fn burst(proxy: &FaultProxy, service: &str, body: &str, n: usize) -> Vec<(u16, String)> {
    let mut answers = Vec::new();
    for _ in 0..n {
        answers.push(post(proxy, service, body).await);
    }
    answers
}

/// The throttling proxy, and behind it a second proxy that counts what reached the emulator.
async fn proxies(throttling: Throttling) -> (FaultProxy, FaultProxy) {
    let behind = FaultProxy::start(&TestEnv::get().aws_endpoint).await.unwrap();
    let proxy = FaultProxy::start(&behind.url()).await.unwrap();
    proxy.set_throttling(Some(throttling));
    (proxy, behind)
}

fn answered(pairs: &[(u16, &str)]) -> Vec<(u16, String)> {
    pairs.iter().map(|&(s, c)| (s, c.to_owned())).collect()
}

#[tokio::test]
async fn an_ec2_burst_beyond_its_bucket_is_throttled_until_the_refill() {
    let throttling = Throttling::aws_documented().with_action(Api::Ec2, "DescribeVpcs", SMALL);
    let (proxy, behind) = proxies(throttling).await;
    let body =
        "Action=DescribeVpcs&Version=2016-11-15&Filter.1.Name=tag%3Athrottling-test&Filter.1.Value.1=none";
    let throttled = (503, "RequestLimitExceeded");
    assert_eq!(
        burst(&proxy, "ec2", body, 6).await,
        answered(&[(200, ""), (200, ""), (200, ""), throttled, throttled, throttled])
    );
    assert_eq!(
        behind.requests("DescribeVpcs"),
        3,
        "throttled calls reached the emulator"
    );
    // A token and a half later: one call passes, the next is throttled again.
    tokio::time::sleep(Duration::from_millis(7_500)).await;
    assert_eq!(
        burst(&proxy, "ec2", body, 2).await,
        answered(&[(200, ""), throttled])
    );
    assert_eq!(behind.requests("DescribeVpcs"), 4);
    assert_eq!(proxy.requests("DescribeVpcs"), 8);
    assert_eq!(
        proxy.throttled_by_action(),
        BTreeMap::from([("DescribeVpcs".to_owned(), 4)])
    );
}

#[tokio::test]
async fn an_elbv2_burst_beyond_its_category_bucket_is_throttled_until_the_refill() {
    let throttling = Throttling::aws_documented().with_class(Api::Elbv2, ActionClass::NonMutating, SMALL);
    let (proxy, behind) = proxies(throttling).await;
    let body = "Action=DescribeLoadBalancers&Version=2015-12-01&PageSize=1";
    let throttled = (400, "Throttling");
    assert_eq!(
        burst(&proxy, "elasticloadbalancing", body, 5).await,
        answered(&[(200, ""), (200, ""), (200, ""), throttled, throttled])
    );
    // The category's bucket is shared by its actions.
    let groups = "Action=DescribeTargetGroups&Version=2015-12-01&PageSize=1";
    assert_eq!(
        burst(&proxy, "elasticloadbalancing", groups, 1).await,
        answered(&[throttled])
    );
    assert_eq!(behind.requests("DescribeLoadBalancers"), 3);
    assert_eq!(behind.requests("DescribeTargetGroups"), 0);
    tokio::time::sleep(Duration::from_millis(7_500)).await;
    assert_eq!(
        burst(&proxy, "elasticloadbalancing", groups, 2).await,
        answered(&[(200, ""), throttled])
    );
    assert_eq!(
        proxy.throttled_by_action(),
        BTreeMap::from([
            ("DescribeLoadBalancers".to_owned(), 2),
            ("DescribeTargetGroups".to_owned(), 2)
        ])
    );
}
