//! Property tests of the parsers that read operator input: Go durations, the leader-migration configuration and
//! the command line. None may panic; valid input must mean what Go means by it. See docs/reliability.md.

use std::time::Duration;

use ccm_controller_manager::{
    MigrationConfig, Options, normalize_flag_names, parse_go_duration, version_request,
};
use proptest::prelude::*;

fn cases() -> ProptestConfig {
    // Few enough cases to run in a second or two; failures are printed, not written into the source tree.
    ProptestConfig {
        cases: 256,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

proptest! {
    #![proptest_config(cases())]

    /// Any text: a duration or an error naming the text, never a panic.
    #[test]
    fn durations_never_panic(text in "\\PC{0,24}") {
        if let Err(message) = parse_go_duration(&text) {
            prop_assert!(message.contains(&format!("{text:?}")), "{message}");
        }
    }

    /// Text made of duration pieces (digits, dots, units, signs): exercises the number/unit split hard.
    #[test]
    fn duration_like_text_never_panics(text in "[+-]?([0-9.]{0,6}(ns|us|µs|ms|s|m|h|x)?){0,4}") {
        if let Ok(d) = parse_go_duration(&text) {
            // At most a year (`MAX_DURATION`): longer values are refused.
            prop_assert!(d <= Duration::from_secs(365 * 24 * 3600));
        }
    }

    /// Go's `1h2m3s4ms` form means what it says.
    #[test]
    fn compound_durations_add_up(h in 0u64..100, m in 0u64..60, s in 0u64..60, ms in 0u64..1000) {
        let text = format!("{h}h{m}m{s}s{ms}ms");
        let want = Duration::from_millis(((h * 60 + m) * 60 + s) * 1000 + ms);
        let got = parse_go_duration(&text).map_err(TestCaseError::fail)?;
        // Sums of floats: equal to the millisecond.
        prop_assert_eq!(got.as_millis(), want.as_millis(), "{}", text);
    }

    /// Any text as a leader-migration configuration: a configuration or an error, never a panic.
    #[test]
    fn migration_config_never_panics(text in "\\PC{0,200}") {
        let _ = MigrationConfig::parse(&text);
    }

    /// YAML-shaped configurations with arbitrary names, versions and leaders.
    #[test]
    fn migration_config_shapes_never_panic(
        version in prop::sample::select(vec!["v1", "v1alpha1", "v1beta1", "v2", ""]),
        kind in prop::sample::select(vec!["LeaderMigrationConfiguration", "Other", ""]),
        leader in "[a-z0-9\\-:\"' ]{0,20}",
        lock in "[a-z \"]{0,10}",
        leaders in prop::collection::vec(("[a-z\\-*\"]{0,15}", "[a-z\\-*\"]{0,15}"), 0..4),
    ) {
        let mut text = format!(
            "apiVersion: controllermanager.config.k8s.io/{version}\nkind: {kind}\nleaderName: {leader}\n\
             resourceLock: {lock}\ncontrollerLeaders:\n"
        );
        for (name, component) in &leaders {
            text.push_str(&format!("  - name: {name}\n    component: {component}\n"));
        }
        if let Ok(config) = MigrationConfig::parse(&text) {
            prop_assert_eq!(config.controller_leaders.len(), leaders.len());
        }
    }

    /// Arbitrary command lines (Go-style and GNU-style flags, bad values): parsed or a clap error, never a panic.
    #[test]
    fn command_lines_never_panic(args in prop::collection::vec(flag_arg(), 0..6)) {
        let _ = version_request(args.iter(), "v1.33.0");
        let normalized = normalize_flag_names(args.iter());
        if let Ok(options) = Options::try_parse_from(normalized) {
            let _ = options.validate();
        }
    }
}

fn flag_arg() -> impl Strategy<Value = String> {
    let names = prop::sample::select(vec![
        "--v",
        "-v",
        "--cloud-provider",
        "--cloud-config",
        "--leader-elect",
        "--leader-elect-lease-duration",
        "--node-monitor-period",
        "--concurrent-service-syncs",
        "--controllers",
        "--leader-migration-config",
        "--enable-leader-migration",
        "--secure-port",
        "--bind-address",
        "--cluster-name",
        "--configure-cloud-routes",
        "--cluster-cidr",
        "-cloud_provider",
        "--unknown-flag",
        "--version",
        "--",
    ]);
    let values = "[a-z0-9.,:*/\\-]{0,12}";
    (names, prop::option::of(values)).prop_map(|(name, value)| match value {
        Some(v) => format!("{name}={v}"),
        None => name.to_owned(),
    })
}
