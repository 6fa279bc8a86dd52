//! The two log formats of the Go controller manager, so that log pipelines and queries built for it keep working:
//! klog's text header (`I1123 22:08:40.087551       1 service.rs:123] "message" key="value"`, never coloured)
//! and component-base's JSON (`{"ts":<epoch ms>,"caller":"dir/file.rs:123","msg":"...","v":0,...}`, without a
//! level key, errors under `err`).

use std::{
    fmt::{self, Write as _},
    time::{SystemTime, UNIX_EPOCH},
};

use tracing::{
    Event, Level, Subscriber,
    field::{Field, Visit},
};
use tracing_subscriber::{
    field::RecordFields,
    fmt::{FmtContext, FormatEvent, FormatFields, FormattedFields, format::Writer},
    registry::LookupSpan,
};

/// One recorded field value, kept typed so that each format renders numbers and booleans bare.
enum Value {
    Str(String),
    Int(i128),
    Float(f64),
    Bool(bool),
}

/// The fields of an event or span: the message apart, `log` crate plumbing taken as the caller.
#[derive(Default)]
struct Fields {
    message: Option<String>,
    file: Option<String>,
    line: Option<u64>,
    pairs: Vec<(&'static str, Value)>,
}

impl Fields {
    fn of(record: &dyn RecordFieldsDyn) -> Self {
        let mut fields = Self::default();
        record.record_dyn(&mut fields);
        fields
    }

    fn push(&mut self, field: &Field, value: Value) {
        match (field.name(), value) {
            ("message", Value::Str(s)) => self.message = Some(s),
            ("log.file", Value::Str(s)) => self.file = Some(s),
            ("log.line", Value::Int(n)) => self.line = u64::try_from(n).ok(),
            ("log.target" | "log.module_path", _) => {}
            // klog's ErrorS and component-base's JSON put the error under `err`; our code says `error`.
            ("error", v) => self.pairs.push(("err", v)),
            (name, v) => self.pairs.push((name, v)),
        }
    }
}

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.push(field, Value::Str(format!("{value:?}")));
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.push(field, Value::Str(value.to_owned()));
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.push(field, Value::Int(value.into()));
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.push(field, Value::Int(value.into()));
    }
    fn record_i128(&mut self, field: &Field, value: i128) {
        self.push(field, Value::Int(value));
    }
    fn record_f64(&mut self, field: &Field, value: f64) {
        self.push(field, Value::Float(value));
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.push(field, Value::Bool(value));
    }
    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        self.push(field, Value::Str(value.to_string()));
    }
}

/// Object-safe access to an event's or a span's fields.
trait RecordFieldsDyn {
    fn record_dyn(&self, visitor: &mut dyn Visit);
}

impl<R: RecordFields> RecordFieldsDyn for R {
    fn record_dyn(&self, visitor: &mut dyn Visit) {
        self.record(visitor);
    }
}

/// The caller as `file:line`, with as many trailing path components as asked (klog: 1, zap's short caller: 2).
fn caller(event: &Event<'_>, fields: &Fields, components: usize) -> String {
    let meta = event.metadata();
    let file = fields.file.as_deref().or(meta.file()).unwrap_or("unknown");
    let line = fields.line.or(meta.line().map(u64::from)).unwrap_or(0);
    let parts: Vec<&str> = file.split(['/', '\\']).collect();
    let short = parts[parts.len().saturating_sub(components)..].join("/");
    format!("{short}:{line}")
}

// === klog text ===

/// klog's text format.
#[derive(Debug, Clone, Copy, Default)]
pub struct Klog;

/// Span fields in klog's `key=value` form.
#[derive(Debug, Clone, Copy, Default)]
pub struct KlogFields;

impl<'w> FormatFields<'w> for KlogFields {
    fn format_fields<R: RecordFields>(&self, mut writer: Writer<'w>, fields: R) -> fmt::Result {
        let fields = Fields::of(&fields);
        let mut out = String::new();
        write_klog_pairs(&mut out, &fields);
        writer.write_str(out.trim_start())
    }
}

impl<S> FormatEvent<S, KlogFields> for Klog
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, KlogFields>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let fields = Fields::of(event);
        let severity = match *event.metadata().level() {
            Level::ERROR => 'E',
            Level::WARN => 'W',
            _ => 'I',
        };
        let (_, month, day, hour, minute, second, micros) = civil_now();
        let mut out = format!(
            "{severity}{month:02}{day:02} {hour:02}:{minute:02}:{second:02}.{micros:06} {:>7} {}] ",
            std::process::id(),
            caller(event, &fields, 1)
        );
        out.push_str(&go_quote(fields.message.as_deref().unwrap_or("")));
        if let Some(scope) = ctx.event_scope() {
            for span in scope.from_root() {
                if let Some(f) = span.extensions().get::<FormattedFields<KlogFields>>()
                    && !f.is_empty()
                {
                    out.push(' ');
                    out.push_str(f);
                }
            }
        }
        write_klog_pairs(&mut out, &fields);
        writeln!(writer, "{out}")
    }
}

fn write_klog_pairs(out: &mut String, fields: &Fields) {
    for (key, value) in &fields.pairs {
        let _ = write!(out, " {key}=");
        match value {
            Value::Str(s) => write_klog_string(out, s),
            Value::Int(n) => {
                let _ = write!(out, "{n}");
            }
            Value::Float(f) => {
                let _ = write!(out, "{f}");
            }
            Value::Bool(b) => {
                let _ = write!(out, "{b}");
            }
        }
    }
}

/// klog writes a multi-line string value as `<`, its lines each indented by a tab, then ` >`; others quoted.
fn write_klog_string(out: &mut String, s: &str) {
    if !s.contains('\n') {
        out.push_str(&go_quote(s));
        return;
    }
    out.push_str("<\n");
    for line in s.strip_suffix('\n').unwrap_or(s).split('\n') {
        out.push('\t');
        out.push_str(line);
        out.push('\n');
    }
    out.push_str(" >");
}

/// Go's `strconv.Quote`: double quotes, with `"`, `\` and non-printable characters escaped.
pub fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\x07' => out.push_str("\\a"),
            '\x08' => out.push_str("\\b"),
            '\x0b' => out.push_str("\\v"),
            '\x0c' => out.push_str("\\f"),
            c if (c as u32) < 0x20 || c == '\x7f' => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c if c.is_control() => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

// === component-base JSON ===

/// component-base's JSON format.
#[derive(Debug, Clone, Copy, Default)]
pub struct Json;

/// Span fields as JSON members (`"key":value`, comma-separated).
#[derive(Debug, Clone, Copy, Default)]
pub struct JsonFields;

impl<'w> FormatFields<'w> for JsonFields {
    fn format_fields<R: RecordFields>(&self, mut writer: Writer<'w>, fields: R) -> fmt::Result {
        let fields = Fields::of(&fields);
        let mut out = String::new();
        write_json_pairs(&mut out, &fields);
        writer.write_str(out.trim_start_matches(','))
    }

    fn add_fields(
        &self,
        current: &'w mut FormattedFields<Self>,
        fields: &tracing::span::Record<'_>,
    ) -> fmt::Result {
        let fields = Fields::of(fields);
        let mut out = String::new();
        write_json_pairs(&mut out, &fields);
        if current.fields.is_empty() {
            current.fields.push_str(out.trim_start_matches(','));
        } else {
            current.fields.push_str(&out);
        }
        Ok(())
    }
}

impl<S> FormatEvent<S, JsonFields> for Json
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, JsonFields>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let fields = Fields::of(event);
        let millis = since_epoch().as_secs_f64() * 1000.0;
        let mut out = format!(
            "{{\"ts\":{millis:.3},\"caller\":{},\"msg\":{}",
            json_string(&caller(event, &fields, 2)),
            json_string(fields.message.as_deref().unwrap_or(""))
        );
        // zapr writes the verbosity of info messages as `v`; errors carry none.
        if let Some(v) = verbosity(event.metadata().level()) {
            let _ = write!(out, ",\"v\":{v}");
        }
        if let Some(scope) = ctx.event_scope() {
            for span in scope.from_root() {
                if let Some(f) = span.extensions().get::<FormattedFields<JsonFields>>()
                    && !f.is_empty()
                {
                    out.push(',');
                    out.push_str(f);
                }
            }
        }
        write_json_pairs(&mut out, &fields);
        writeln!(writer, "{out}}}")
    }
}

/// The klog verbosity an event's level stands for (see `filter_for_verbosity`): info 0, debug 4, trace 5;
/// none for errors, as zapr.
fn verbosity(level: &Level) -> Option<u8> {
    match *level {
        Level::ERROR => None,
        Level::WARN | Level::INFO => Some(0),
        Level::DEBUG => Some(4),
        Level::TRACE => Some(5),
    }
}

fn write_json_pairs(out: &mut String, fields: &Fields) {
    for (key, value) in &fields.pairs {
        let _ = write!(out, ",{}:", json_string(key));
        match value {
            Value::Str(s) => out.push_str(&json_string(s)),
            Value::Int(n) => {
                let _ = write!(out, "{n}");
            }
            Value::Float(f) if f.is_finite() => {
                let _ = write!(out, "{f}");
            }
            Value::Float(f) => out.push_str(&json_string(&f.to_string())),
            Value::Bool(b) => {
                let _ = write!(out, "{b}");
            }
        }
    }
}

fn json_string(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".to_owned())
}

// === time ===

/// The wall clock: a log line's timestamp is the time it is written, never an injected clock's.
#[allow(clippy::disallowed_methods)]
fn since_epoch() -> std::time::Duration {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default()
}

/// The current UTC time as (year, month, day, hour, minute, second, microsecond).
fn civil_now() -> (i64, u32, u32, u64, u64, u64, u32) {
    let now = since_epoch();
    let secs = now.as_secs();
    let (year, month, day) = civil_from_days(i64::try_from(secs / 86_400).unwrap_or(0));
    let rem = secs % 86_400;
    (
        year,
        month,
        day,
        rem / 3600,
        rem / 60 % 60,
        rem % 60,
        now.subsec_micros(),
    )
}

/// Days since 1970-01-01 to a proleptic Gregorian date (Howard Hinnant's algorithm).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (
        year,
        u32::try_from(month).unwrap_or(1),
        u32::try_from(day).unwrap_or(1),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn civil_dates() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(20_415), (2025, 11, 23));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
    }

    #[test]
    fn quoting_follows_strconv_quote() {
        assert_eq!(go_quote("a \"b\"\\\n\t\x01"), r#""a \"b\"\\\n\t\x01""#);
        assert_eq!(go_quote("héllo"), "\"héllo\"");
    }
}
