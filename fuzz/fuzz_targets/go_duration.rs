//! Go durations as the controller manager's flags and the leader-migration configuration take them
//! (`--node-monitor-period=5m0s`, `1h2m3.5s`, `-1ns`, ...) → `parse_go_duration`. Must never panic; a refusal quotes
//! the text; an accepted duration is at most the parser's limit of a year.
#![no_main]

use std::time::Duration;

use ccm_controller_manager::parse_go_duration;
use libfuzzer_sys::fuzz_target;

const YEAR: Duration = Duration::from_secs(365 * 24 * 3600);

fuzz_target!(|text: &str| {
    match parse_go_duration(text) {
        Ok(d) => assert!(d <= YEAR, "{text:?} -> {d:?}"),
        Err(message) => assert!(message.contains(&format!("{text:?}")), "{text:?}: {message}"),
    }
});
