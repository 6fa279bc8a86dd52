//! Image references as the kubelet passes them → the ECR registry (private or public) or a typed refusal. Must
//! never panic; an accepted registry's host appears in the image.
#![no_main]

use ccm_ecr_credentials::Registry;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|image: &str| {
    if let Ok(registry) = Registry::from_image(image) {
        assert!(
            image.contains(registry.host()),
            "{image:?} -> {:?}",
            registry.host()
        );
        let _ = registry.region();
    }
});
