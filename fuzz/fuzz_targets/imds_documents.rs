//! Documents the instance metadata service serves: the instance identity document (JSON) and the availability
//! zone (the region is derived from it when IMDS serves no `placement/region`). Must never panic; an accepted
//! document has an instance ID; a derived region prefixes the zone.
#![no_main]

use ccm_aws_api::metadata::{InstanceIdentity, region_of_zone};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    if let Ok(identity) = InstanceIdentity::from_document(text) {
        assert!(!identity.instance_id.as_str().is_empty(), "{text:?}");
    }
    if let Some(region) = region_of_zone(text) {
        assert!(text.starts_with(&region), "{text:?} -> {region:?}");
    }
});
