//! AWS error messages of `InvalidInstanceID.NotFound` (`The instance IDs 'i-1, i-2' do not exist`) → the unknown
//! instance IDs the EC2 adapter drops before it retries. Must never panic; every ID is `i-` and ASCII
//! alphanumerics, taken from the message.
#![no_main]

use ccm_aws_api::ec2::unknown_instance_ids;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|message: &str| {
    for id in unknown_instance_ids(message) {
        assert!(message.contains(id), "{message:?} -> {id:?}");
        let rest = id.strip_prefix("i-").unwrap_or_default();
        assert!(!rest.is_empty(), "{message:?} -> {id:?}");
        assert!(
            rest.chars().all(|c| c.is_ascii_alphanumeric()),
            "{message:?} -> {id:?}"
        );
    }
});
