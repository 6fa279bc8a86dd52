//! Provider IDs (`aws:///zone/i-...`, Fargate forms, other providers) and node names (`ip-...`, `i-...`,
//! `fargate-...`) through every parser that reads them. Must never panic; what parses is written back in the
//! upstream form and parses to the same thing.
#![no_main]

use ccm_aws_api::{InstanceRef, ProviderId};
use ccm_cloud_provider::split_provider_id;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &str| {
    if let Ok((scheme, rest)) = split_provider_id(data, None) {
        assert!(!scheme.is_empty() && !rest.is_empty());
        assert_eq!(format!("{scheme}://{rest}"), data);
    }
    let _ = split_provider_id(data, Some("aws"));
    match ProviderId::parse(data) {
        Ok(id) => assert_eq!(ProviderId::parse(&id.to_string()), Ok(id)),
        Err(err) => assert_eq!(err.value(), data),
    }
    let _ = InstanceRef::from_node_name(data);
});
