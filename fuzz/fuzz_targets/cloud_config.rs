//! The cloud config (`--cloud-config`, INI in the gcfg dialect) → `CloudConfig::parse`, then every accessor the
//! composition calls (ccm-aws builds the adapter's options from `service_override`). Must never panic or hang; every error names a field or a line and says what is wrong.
#![no_main]

use ccm_cloud_config::{CloudConfig, OverrideService};
use libfuzzer_sys::fuzz_target;

const SERVICES: [OverrideService; 6] = [
    OverrideService::Ec2,
    OverrideService::Elb,
    OverrideService::Elbv2,
    OverrideService::Sts,
    OverrideService::Kms,
    OverrideService::Imds,
];

fuzz_target!(|text: &str| {
    let config = match CloudConfig::parse(text) {
        Ok(config) => config,
        Err(errors) => {
            assert!(!errors.0.is_empty(), "{text:?}");
            for e in &errors.0 {
                assert!(!e.message.is_empty(), "{e:?}");
                assert!(!e.field.is_empty() || e.line.is_some(), "{e:?}");
            }
            let _ = errors.to_string();
            return;
        }
    };
    let region = config.global.configured_region();
    let region = region.as_deref().unwrap_or("us-east-1");
    let _ = config.global.cluster_id();
    let _ = config.global.is_external_control_plane();
    for section in &config.service_overrides {
        let _ = section.service_kind();
    }
    for service in SERVICES {
        let _ = config.service_override(service, region);
    }
});
