//! Property tests of the IMDS documents the metadata port reads (through the local IMDSv2 emulator, never the real
//! address): any identity document or zone answers with a value or a typed error, never a panic, and a valid
//! document reads back field for field. See docs/reliability.md.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::too_many_lines)]

use std::time::Duration;

use ccm_aws_api::{ErrorKind, Metadata};
use ccm_aws_sdk::{AwsMetadata, ImdsOptions};
use ccm_testing::ImdsEmulator;
use proptest::prelude::*;

const DOCUMENT: &str = "/latest/dynamic/instance-identity/document";

struct Fixture {
    runtime: tokio::runtime::Runtime,
    imds: ImdsEmulator,
    metadata: AwsMetadata,
}

fn fixture() -> Fixture {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let imds = runtime
        .block_on(ImdsEmulator::start("i-0abc", "eu-west-1b", "eu-west-1"))
        .unwrap();
    let mut options = ImdsOptions::default();
    options.endpoint = imds.endpoint();
    options.timeout = Duration::from_secs(5);
    options.max_attempts = 1;
    let metadata = AwsMetadata::new(&options).unwrap();
    Fixture {
        runtime,
        imds,
        metadata,
    }
}

/// JSON-ish documents: objects with the identity fields (any JSON value type), other fields, or junk.
fn document() -> impl Strategy<Value = String> {
    let field = prop::sample::select(vec![
        "instanceId",
        "region",
        "availabilityZone",
        "accountId",
        "instanceType",
        "privateIp",
        "other",
    ]);
    let value = prop_oneof![
        "\"[a-z0-9.-]{0,12}\"",
        Just("null".to_owned()),
        Just("42".to_owned()),
        Just("[\"i-1\"]".to_owned()),
        Just("{}".to_owned()),
    ];
    prop_oneof![
        prop::collection::vec((field, value), 0..7).prop_map(|fields| {
            let body: Vec<String> = fields.iter().map(|(k, v)| format!("\"{k}\":{v}")).collect();
            format!("{{{}}}", body.join(","))
        }),
        "\\PC{0,40}",
    ]
}

fn config() -> ProptestConfig {
    // Each case is an HTTP round trip to the emulator: few cases; failures are printed, not written to files.
    ProptestConfig {
        cases: 64,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

#[test]
fn any_identity_document_reads_or_fails_typed() {
    let f = fixture();
    proptest!(config(), |(doc in document())| {
        f.imds.set(DOCUMENT, Some(&doc));
        match f.runtime.block_on(f.metadata.identity_document()) {
            Ok(identity) => prop_assert!(!identity.instance_id.as_str().is_empty()),
            Err(err) => prop_assert_eq!(err.kind(), ErrorKind::Transient, "{}", err),
        }
    });
}

#[test]
fn valid_identity_documents_read_back() {
    let f = fixture();
    proptest!(config(), |(id in "i-[0-9a-f]{8,17}", account in "[0-9]{12}", kind in "[a-z][0-9][a-z]?\\.[a-z0-9]{4,8}")| {
        let doc = format!(
            r#"{{"instanceId":"{id}","region":"eu-west-1","availabilityZone":"eu-west-1b","accountId":"{account}","instanceType":"{kind}"}}"#
        );
        f.imds.set(DOCUMENT, Some(&doc));
        let identity = f.runtime.block_on(f.metadata.identity_document()).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(identity.instance_id.as_str(), id.as_str());
        prop_assert_eq!(identity.account_id, account);
        prop_assert_eq!(identity.instance_type, kind);
        prop_assert_eq!(identity.private_ip, None);
    });
}

/// Without `placement/region` the region comes from the zone: any zone gives a region or a typed error.
#[test]
fn any_zone_gives_a_region_or_a_typed_error() {
    let f = fixture();
    f.imds.set("/latest/meta-data/placement/region", None);
    proptest!(config(), |(zone in prop_oneof!["[a-z]{2}(-[a-z]{2,9}){1,2}-[0-9]{1,2}[a-z]?(-[a-z]{3}-[0-9][a-z])?", "\\PC{1,20}"])| {
        f.imds.set("/latest/meta-data/placement/availability-zone", Some(&zone));
        match f.runtime.block_on(f.metadata.region()) {
            Ok(region) => prop_assert!(zone.starts_with(&region), "{} -> {}", zone, region),
            Err(err) => prop_assert!(matches!(err.kind(), ErrorKind::Invalid | ErrorKind::Transient | ErrorKind::NotFound), "{}", err),
        }
    });
}
