//! Provider IDs (`aws:///zone/i-...`, Fargate forms, other providers) and node names (`ip-...`, `i-...`,
//! `fargate-...`) through every parser that reads them. Must never panic.
#![no_main]

use ccm_cloud_provider::split_provider_id;
use ccm_instances::{instance_ref_from_node_name, parse_provider_id};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &str| {
    if let Ok((scheme, rest)) = split_provider_id(data, None) {
        assert!(!scheme.is_empty() && !rest.is_empty());
        assert_eq!(format!("{scheme}://{rest}"), data);
    }
    let _ = split_provider_id(data, Some("aws"));
    let _ = parse_provider_id(data);
    let _ = instance_ref_from_node_name(data);
});
