//! `init_logging` installs the global subscriber once; a second call is an error, never a panic.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use ccm_controller_manager::{Error, Options, init_logging};

#[test]
fn logging_initializes_once() {
    let options = Options::try_parse_from(["--logging-format=json", "-v", "4"]).unwrap();
    init_logging(&options).unwrap();
    tracing::info!("json logging is on");
    assert!(matches!(init_logging(&options), Err(Error::Logging)));
}
