//! `init_logging` installs the global subscriber once; a second call is an error, never a panic.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::too_many_lines)]

use ccm_controller_manager::{Error, Options, init_logging};

#[test]
fn logging_initializes_once() {
    let options = Options::try_parse_from(["--logging-format=json", "-v", "4"]).unwrap();
    init_logging(&options).unwrap();
    tracing::info!("json logging is on");
    assert!(matches!(init_logging(&options), Err(Error::Logging)));
}

/// A writer the tests read back.
#[derive(Clone, Default)]
struct Buffer(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Buffer {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Buffer {
    fn text(&self) -> String {
        String::from_utf8(self.0.lock().unwrap().clone()).unwrap()
    }
}

fn capture(args: &[&str], log: impl FnOnce()) -> String {
    let buffer = Buffer::default();
    let writer = buffer.clone();
    let options = Options::try_parse_from(args).unwrap();
    let subscriber = ccm_controller_manager::log_subscriber(&options, move || writer.clone());
    tracing::subscriber::with_default(subscriber, log);
    buffer.text()
}

#[test]
fn text_logs_have_klogs_header_and_quoted_key_values() {
    let out = capture(&["--v=2"], || {
        let span = tracing::info_span!("sync", service = "default/web");
        let _entered = span.enter();
        tracing::info!(
            node = "ip-10-0-0-1",
            count = 3,
            ok = true,
            "Synced \"load balancer\""
        );
        tracing::warn!(error = "throttled", "Retrying");
        tracing::error!("multi\nline");
        tracing::info!(text = "a\nb", "Block");
    });
    let lines: Vec<&str> = out.lines().collect();
    let first = lines[0];
    // I1123 22:08:40.087551       1 logging.rs:123] "msg" ...
    assert!(first.starts_with('I'), "{first}");
    let bytes = first.as_bytes();
    assert!(bytes[1..5].iter().all(u8::is_ascii_digit), "{first}");
    assert_eq!(&first[5..6], " ");
    assert_eq!(&first[8..9], ":");
    assert_eq!(&first[14..15], ".");
    assert!(bytes[15..21].iter().all(u8::is_ascii_digit), "{first}");
    let pid = format!(" {:>7} ", std::process::id());
    assert_eq!(&first[21..30], pid, "{first}");
    assert!(first[30..].starts_with("logging.rs:"), "{first}");
    assert!(
        first.ends_with(
            r#"] "Synced \"load balancer\"" service="default/web" node="ip-10-0-0-1" count=3 ok=true"#
        ),
        "{first}"
    );
    assert!(
        lines[1].starts_with('W')
            && lines[1].ends_with(r#"] "Retrying" service="default/web" err="throttled""#),
        "{}",
        lines[1]
    );
    assert!(
        lines[2].starts_with('E') && lines[2].ends_with(r#"] "multi\nline" service="default/web""#),
        "{}",
        lines[2]
    );
    assert!(
        lines[3].ends_with(r#"] "Block" service="default/web" text=<"#),
        "{}",
        lines[3]
    );
    assert_eq!(&lines[4..], ["\ta", "\tb", " >"]);
    assert!(
        !out.contains('\x1b'),
        "no ANSI escapes in a log written to a pipe or file: {out:?}"
    );
}

#[test]
fn json_logs_have_component_base_fields() {
    let out = capture(&["--logging-format=json", "--v=6"], || {
        let span = tracing::info_span!("sync", service = "default/web");
        let _entered = span.enter();
        tracing::info!(count = 3, "Synced");
        tracing::debug!("Detail");
        tracing::error!(error = "denied", "Failed");
    });
    let lines: Vec<serde_json::Value> = out.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines.len(), 3, "{out}");
    let info = &lines[0];
    let raw = out.lines().next().unwrap();
    let order: Vec<usize> = [
        "{\"ts\":",
        ",\"caller\":",
        ",\"msg\":",
        ",\"v\":",
        ",\"service\":",
        ",\"count\":",
    ]
    .iter()
    .map(|k| raw.find(k).unwrap())
    .collect();
    assert!(
        order.is_sorted() && order[0] == 0,
        "keys in component-base's order: {raw}"
    );
    assert!(
        info["ts"].as_f64().unwrap() > 1.6e12,
        "ts is epoch milliseconds: {out}"
    );
    assert!(
        info["caller"].as_str().unwrap().starts_with("tests/logging.rs:"),
        "{out}"
    );
    assert_eq!(info["msg"], "Synced");
    assert_eq!(info["v"], 0);
    assert_eq!(info["count"], 3);
    assert_eq!(lines[1]["v"], 4);
    assert_eq!(lines[2]["err"], "denied");
    assert!(
        lines[2].get("v").is_none() && lines[2].get("level").is_none(),
        "{out}"
    );
}
