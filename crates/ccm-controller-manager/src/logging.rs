//! Logging for the binary: `-v` mapped to tracing levels, `--logging-format` text (klog's format) or json
//! (component-base's fields).

mod format;

use tracing_subscriber::{EnvFilter, fmt::MakeWriter, util::SubscriberInitExt};

pub use format::go_quote;

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

/// The subscriber `init_logging` installs, writing to `writer`: for embedding or tests. Lines have klog's text
/// format (`I1123 22:08:40.087551       1 file.rs:123] "message" key="value"`, never ANSI-coloured), or with
/// `--logging-format=json` component-base's JSON (`ts` in epoch milliseconds, `caller`, `msg`, `v`, then the
/// key/values; errors under `err`). `RUST_LOG`, when set, overrides the level `-v` selects.
pub fn log_subscriber<W>(options: &Options, writer: W) -> Box<dyn tracing::Subscriber + Send + Sync>
where
    W: for<'w> MakeWriter<'w> + Send + Sync + 'static,
{
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(filter_for_verbosity(options.v)));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(false)
        .with_writer(writer);
    if options.logging_format == "json" {
        Box::new(
            builder
                .fmt_fields(format::JsonFields)
                .event_format(format::Json)
                .finish(),
        )
    } else {
        Box::new(
            builder
                .fmt_fields(format::KlogFields)
                .event_format(format::Klog)
                .finish(),
        )
    }
}

/// Installs the global tracing subscriber ([`log_subscriber`] on stderr). Call it once, from the binary; library
/// code never installs a subscriber.
pub fn init_logging(options: &Options) -> Result<(), Error> {
    log_subscriber(options, std::io::stderr)
        .try_init()
        .map_err(|_| Error::Logging)
}
