//! `CredentialProviderRequest` JSON from the kubelet's stdin. Must never panic; an accepted request has an image,
//! and its image goes through the registry parser too.
#![no_main]

use ccm_ecr_credentials::{CredentialProviderRequest, Registry};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(request) = CredentialProviderRequest::from_json(data) {
        assert!(!request.image.is_empty());
        let _ = request.role_arn_annotation();
        let _ = Registry::from_image(&request.image);
    }
});
