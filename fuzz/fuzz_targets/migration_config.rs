//! The leader-migration configuration file (`--leader-migration-config`, YAML or JSON) → `MigrationConfig::parse`.
//! Must never panic or hang; a refusal says why.
#![no_main]

use ccm_controller_manager::MigrationConfig;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    if let Err(message) = MigrationConfig::parse(text) {
        assert!(!message.is_empty(), "{text:?}");
    }
});
