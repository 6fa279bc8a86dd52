//! Logging for the binary: `-v` mapped to tracing levels, `--logging-format` text or json.

use tracing_subscriber::EnvFilter;

use crate::{Error, Options};

/// Our crates, whose level `-v` raises first (dependencies stay at info until `-v=6`).
const OWN: &[&str] = &[
    "ccm_controller_manager",
    "ccm_controllers",
    "ccm_cloud_provider",
    "ccm_aws",
    "ccm_aws_api",
    "ccm_aws_sdk",
    "ccm_instances",
    "ccm_load_balancers",
    "ccm_routes",
    "ccm_tagging",
    "aws_cloud_controller_manager",
];

/// The filter directives for a klog verbosity: 0-2 info (`--v=2` is the usual production level, as klog's
/// "steady state" information), 3-4 debug and 5 trace for this project's crates, 6-7 debug and 8+ trace for
/// everything.
pub fn filter_for_verbosity(v: u8) -> String {
    let own = |level: &str| {
        let mut d = vec!["info".to_owned()];
        d.extend(OWN.iter().map(|c| format!("{c}={level}")));
        d.join(",")
    };
    match v {
        0..=2 => "info".to_owned(),
        3 | 4 => own("debug"),
        5 => own("trace"),
        6 | 7 => "debug".to_owned(),
        _ => "trace".to_owned(),
    }
}

/// Installs the global tracing subscriber from `-v` and `--logging-format` (`RUST_LOG`, when set, overrides the
/// level). Call it once, from the binary; library code never installs a subscriber.
pub fn init_logging(options: &Options) -> Result<(), Error> {
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(filter_for_verbosity(options.v)));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let result = if options.logging_format == "json" {
        builder.json().try_init()
    } else {
        builder.try_init()
    };
    result.map_err(|_| Error::Logging)
}
