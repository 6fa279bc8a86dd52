//! Property tests of the cloud config parser (`--cloud-config`, an operator's INI file): it never panics, every
//! error names a field, and a config written from generated values reads back as those values. The crate has no
//! renderer, so the "round trip" writes the INI here. See docs/reliability.md.

use ccm_cloud_config::{CloudConfig, GLOBAL_KEYS, OVERRIDE_KEYS};
use proptest::prelude::*;

fn cases() -> ProptestConfig {
    // Few enough cases to run in a second or two; failures are printed, not written into the source tree.
    ProptestConfig {
        cases: 256,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// Every key the parser knows (`[Global]` and service overrides) and one it does not.
fn keys() -> Vec<&'static str> {
    let mut keys: Vec<&str> = GLOBAL_KEYS.iter().chain(OVERRIDE_KEYS).copied().collect();
    keys.push("Unknown");
    keys
}

/// One INI line: a section header, a key (any known key, any case) with or without a value, a comment, junk.
fn line() -> impl Strategy<Value = String> {
    let key = prop::sample::select(keys());
    let value = prop_oneof![
        "[a-zA-Z0-9 ./:*_,-]{0,16}",
        "\"[a-zA-Z0-9 \\\\\"nt]{0,12}\"?",
        prop::sample::select(vec![
            "true",
            "no",
            "ipv4,ipv6",
            "ipv6",
            "Shared",
            "ServiceNodePort",
            "70000",
            "^(c|m)5"
        ])
        .prop_map(str::to_owned),
    ];
    prop_oneof![
        prop::sample::select(vec![
            "[Global]",
            "[global]",
            "[ServiceOverride \"1\"]",
            "[ServiceOverride]",
            "[Other]",
            "[Global",
            "[ServiceOverride \"a\\\"b\"]"
        ])
        .prop_map(str::to_owned),
        (key.clone(), value).prop_map(|(k, v)| format!("{k} = {v}")),
        key.prop_map(str::to_owned),
        "[;#]\\PC{0,10}",
        "\\PC{0,20}",
    ]
}

proptest! {
    #![proptest_config(cases())]

    /// Any text: a config or errors, never a panic.
    #[test]
    fn any_text_never_panics(text in "\\PC{0,300}") {
        let _ = CloudConfig::parse(&text);
    }

    /// INI-shaped text: a config, or errors that each name a field (or a line) and say what is wrong.
    #[test]
    fn ini_errors_name_the_field(lines in prop::collection::vec(line(), 0..12)) {
        if let Err(errors) = CloudConfig::parse(&lines.join("\n")) {
            prop_assert!(!errors.0.is_empty());
            for e in &errors.0 {
                prop_assert!(!e.message.is_empty(), "{:?}", e);
                prop_assert!(!e.field.is_empty() || e.line.is_some(), "{:?}", e);
            }
        }
    }

    /// A `[Global]` section written from generated values reads back as those values.
    #[test]
    fn global_values_read_back(
        zone in "[a-z]{2}-[a-z]{4,9}-[1-9][a-c]",
        vpc in "vpc-[0-9a-f]{8,17}",
        subnet in "subnet-[0-9a-f]{8,17}",
        cluster in "[a-zA-Z0-9][a-zA-Z0-9._-]{0,30}",
        disable in any::<bool>(),
        quoted in any::<bool>(),
    ) {
        let q = |v: &str| if quoted { format!("\"{v}\"") } else { v.to_owned() };
        let text = format!(
            "[Global]\nZone = {}\nVPC = {}\nSubnetID = {}\nKubernetesClusterID = {}\nDisableSecurityGroupIngress = {disable}\n",
            q(&zone), q(&vpc), q(&subnet), q(&cluster)
        );
        let config = CloudConfig::parse(&text).map_err(|e| TestCaseError::fail(format!("{text}: {e}")))?;
        prop_assert_eq!(config.global.zone.as_deref(), Some(zone.as_str()));
        prop_assert_eq!(config.global.vpc.as_deref(), Some(vpc.as_str()));
        prop_assert_eq!(config.global.subnet_id.as_deref(), Some(subnet.as_str()));
        prop_assert_eq!(config.global.kubernetes_cluster_id.as_deref(), Some(cluster.as_str()));
        prop_assert_eq!(config.global.disable_security_group_ingress, disable);
    }
}
