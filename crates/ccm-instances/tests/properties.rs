//! Property tests of provider IDs and node names (written by the kubelet, other controllers or operators): every
//! parser answers or refuses with a typed error, never a panic, and the IDs this crate writes parse back. The
//! fuzz target `provider_ids` (fuzz/) covers the same functions with coverage guidance. See docs/reliability.md.

use ccm_cloud_provider::split_provider_id;
use ccm_instances::{AwsInstanceRef, format_aws_provider_id, instance_ref_from_node_name, parse_provider_id};
use proptest::prelude::*;

fn provider_id_like() -> impl Strategy<Value = String> {
    let piece = prop::sample::select(vec![
        "aws",
        "://",
        "/",
        "gce",
        "i-0abc",
        "fargate-",
        "ip-",
        "10-1-2-3",
        "10.1.2.3",
        "::1",
        "us-east-1a",
        ".",
        "-",
    ]);
    prop_oneof![
        prop::collection::vec(piece, 0..8).prop_map(|p| p.concat()),
        "\\PC{0,40}",
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn provider_ids_and_node_names_never_panic(text in provider_id_like()) {
        if let Ok((scheme, rest)) = split_provider_id(&text, None) {
            prop_assert_eq!(format!("{scheme}://{rest}"), text.clone());
        }
        let _ = parse_provider_id(&text);
        let _ = instance_ref_from_node_name(&text);
    }

    #[test]
    fn written_provider_ids_parse_back(zone in "[a-z]{2}-[a-z]{4,9}-[1-9][a-c]", id in "i-[0-9a-f]{8,17}") {
        let written = format_aws_provider_id(&zone, &id);
        match parse_provider_id(&written) {
            Ok(AwsInstanceRef::Ec2(parsed)) => prop_assert_eq!(parsed.as_str(), id.as_str()),
            other => prop_assert!(false, "{} -> {:?}", written, other),
        }
    }
}
