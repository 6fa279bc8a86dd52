//! The metadata port against a local IMDSv2 emulator (token PUT with TTL header, then GETs).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::too_many_lines)]

use std::time::Duration;

use ccm_aws_api::{ErrorKind, Metadata};
use ccm_aws_sdk::{AwsMetadata, ImdsOptions};
use ccm_testing::ImdsEmulator;

fn options(endpoint: String) -> ImdsOptions {
    let mut options = ImdsOptions::default();
    options.endpoint = endpoint;
    options.timeout = Duration::from_millis(500);
    options.max_attempts = 1;
    options
}

#[tokio::test]
async fn reads_identity_through_imdsv2_sessions() {
    let imds = ImdsEmulator::start("i-0abc", "eu-west-1b", "eu-west-1")
        .await
        .unwrap();
    let metadata = AwsMetadata::new(&options(imds.endpoint())).unwrap();
    assert_eq!(metadata.instance_id().await.unwrap().as_str(), "i-0abc");
    assert_eq!(metadata.region().await.unwrap(), "eu-west-1");
    assert_eq!(metadata.availability_zone().await.unwrap(), "eu-west-1b");
    let identity = metadata.identity_document().await.unwrap();
    assert_eq!(identity.instance_id.as_str(), "i-0abc");
    assert_eq!(identity.account_id, "123456789012");
    assert_eq!(identity.instance_type, "m5.large");
    assert_eq!(imds.get_requests(), 4);
    assert!(imds.token_requests() >= 1, "a session token was fetched first");
    assert!(imds.token_requests() <= 4);
    assert_eq!(imds.rejected(), 0, "every GET carried the token");
}

#[tokio::test]
async fn missing_paths_are_not_found_and_region_falls_back_to_the_zone() {
    let imds = ImdsEmulator::start("i-0abc", "us-west-2-lax-1a", "us-west-2")
        .await
        .unwrap();
    imds.set("/latest/meta-data/placement/region", None);
    let metadata = AwsMetadata::new(&options(imds.endpoint())).unwrap();
    assert_eq!(metadata.region().await.unwrap(), "us-west-2");
    imds.set("/latest/meta-data/instance-id", None);
    let err = metadata.instance_id().await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotFound, "{err}");
}

#[tokio::test]
async fn an_unreachable_endpoint_fails_fast_as_transient() {
    // A port nothing listens on (bound, then released).
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let metadata = AwsMetadata::new(&options(format!("http://127.0.0.1:{port}"))).unwrap();
    let started = tokio::time::Instant::now();
    let err = metadata.instance_id().await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Transient, "{err}");
    assert!(started.elapsed() < Duration::from_secs(5));
    let bad = AwsMetadata::new(&options("not a url".into())).unwrap_err();
    assert_eq!(bad.kind(), ErrorKind::Invalid);
}
