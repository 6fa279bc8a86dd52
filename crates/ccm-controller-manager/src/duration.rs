//! Go's `time.ParseDuration` syntax, which every upstream duration flag uses (`5m`, `1h30m`, `2.5s`, `0`).

use std::time::Duration;

/// Parses a Go duration such as `300ms`, `1.5h` or `2h45m`. Negative durations are rejected (no upstream flag of
/// this component accepts one).
pub fn parse_go_duration(s: &str) -> Result<Duration, String> {
    let err = || format!("{s:?} is not a duration (examples: 300ms, 10s, 5m, 1h30m)");
    let text = s.trim();
    if text == "0" || text == "+0" {
        return Ok(Duration::ZERO);
    }
    let text = text.strip_prefix('+').unwrap_or(text);
    if text.is_empty() || text.starts_with('-') {
        return Err(err());
    }
    let mut total = 0f64;
    let mut rest = text;
    while !rest.is_empty() {
        let num_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(err)?;
        if num_len == 0 {
            return Err(err());
        }
        let value: f64 = rest[..num_len].parse().map_err(|_| err())?;
        rest = &rest[num_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let scale = match &rest[..unit_len] {
            "ns" => 1e-9,
            "us" | "µs" | "μs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return Err(err()),
        };
        rest = &rest[unit_len..];
        total += value * scale;
    }
    // Far beyond any sensible period, and far enough from overflowing `Instant + Duration` (a panic) wherever
    // the value is added to a clock.
    if total > MAX_DURATION.as_secs_f64() {
        return Err(format!(
            "{s:?} is too long: at most {}",
            format_duration(MAX_DURATION)
        ));
    }
    Duration::try_from_secs_f64(total).map_err(|_| err())
}

/// The longest duration a flag accepts: one year.
pub const MAX_DURATION: Duration = Duration::from_secs(365 * 24 * 3600);

/// Formats a duration the way Go prints it in help text (`5m0s` is shortened to `5m`).
pub(crate) fn format_duration(d: Duration) -> String {
    let ms = d.as_millis();
    if ms == 0 {
        "0s".to_owned()
    } else if ms.is_multiple_of(3_600_000) {
        format!("{}h", ms / 3_600_000)
    } else if ms.is_multiple_of(60_000) {
        format!("{}m", ms / 60_000)
    } else if ms.is_multiple_of(1000) {
        format!("{}s", ms / 1000)
    } else {
        format!("{ms}ms")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations() {
        assert_eq!(parse_go_duration("0"), Ok(Duration::ZERO));
        assert_eq!(parse_go_duration("5m"), Ok(Duration::from_secs(300)));
        assert_eq!(parse_go_duration("1h30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_go_duration("2.5s"), Ok(Duration::from_millis(2500)));
        assert_eq!(parse_go_duration("300ms"), Ok(Duration::from_millis(300)));
        assert_eq!(parse_go_duration("10us"), Ok(Duration::from_micros(10)));
        assert_eq!(parse_go_duration("1m0s"), Ok(Duration::from_secs(60)));
        assert_eq!(parse_go_duration("8760h"), Ok(MAX_DURATION));
        let long = parse_go_duration("8761h").unwrap_err();
        assert!(long.contains("too long: at most 8760h"), "{long}");
        assert!(parse_go_duration("1e300h").is_err());
        assert!(parse_go_duration("99999999999999999999h").is_err());
        for bad in ["", "5", "5x", "-5s", "s", "1.2.3s", "m5"] {
            assert!(parse_go_duration(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn formatting() {
        assert_eq!(format_duration(Duration::from_secs(300)), "5m");
        assert_eq!(format_duration(Duration::from_secs(15)), "15s");
        assert_eq!(format_duration(Duration::from_millis(1500)), "1500ms");
        assert_eq!(format_duration(Duration::ZERO), "0s");
    }
}
