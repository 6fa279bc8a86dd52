//! `--trace`: each column's AWS calls second by second and its memory every ten seconds, written beside the
//! column's logs (`trace.log`), so that a phase whose counts surprise (a join costing more than planned) can be
//! read call by call against the controller's log. The lines carry UTC times as the phase lines printed do.

use std::{io::Write as _, path::Path, time::Duration};

use crate::scale::ccm::{Calls, Reader, diff};

/// The time of day in UTC now, `HH:MM:SS`: enough to line the trace up with the logs of one run.
pub fn utc_time_of_day() -> String {
    // The wall clock is only printed here: nothing expires or waits on it.
    #[allow(clippy::disallowed_methods)]
    let now = std::time::SystemTime::now();
    time_of_day(
        now.duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
    )
}

/// `HH:MM:SS` of a Unix time in seconds.
fn time_of_day(unix_secs: u64) -> String {
    let day = unix_secs % 86_400;
    format!("{:02}:{:02}:{:02}", day / 3600, day % 3600 / 60, day % 60)
}

/// One second's line: the operations that moved, as `Operation+n`; `None` when nothing did.
pub fn line(at: &str, moved: &Calls) -> Option<String> {
    if moved.is_empty() {
        return None;
    }
    let ops: Vec<String> = moved.iter().map(|(op, n)| format!("{op}+{n:.0}")).collect();
    Some(format!("{at} {}", ops.join(" ")))
}

/// Writes the trace of `reader` into `path` until the process is gone or a reading fails for a minute.
pub fn spawn(reader: Reader, path: &Path) -> anyhow::Result<tokio::task::JoinHandle<()>> {
    let mut file = std::io::LineWriter::new(std::fs::File::create(path)?);
    Ok(tokio::spawn(async move {
        let mut last: Option<Calls> = None;
        let mut failures = 0;
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        for second in 0u64.. {
            tick.tick().await;
            let Some(memory) = reader.memory() else {
                break;
            };
            let at = utc_time_of_day();
            let now = match reader.calls().await {
                Ok(now) => now,
                Err(_) if failures < 60 => {
                    failures += 1;
                    continue;
                }
                Err(_) => break,
            };
            failures = 0;
            let moved = last.as_ref().map(|before| diff(&now, before)).unwrap_or_default();
            let mut out = line(&at, &moved);
            if second % 10 == 0 {
                let mem = format!("{at} memory peak {} anon {} KiB", memory.peak, memory.anon);
                out = Some(out.map_or(mem.clone(), |calls| format!("{mem}\n{calls}")));
            }
            if let Some(out) = out
                && writeln!(file, "{out}").is_err()
            {
                break;
            }
            last = Some(now);
        }
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_lists_the_operations_that_moved_and_is_empty_otherwise() {
        let mut moved = Calls::new();
        assert_eq!(line("09:00:01", &moved), None);
        moved.insert("DescribeInstances".to_owned(), 1.0);
        moved.insert("RegisterInstancesWithLoadBalancer".to_owned(), 3.0);
        assert_eq!(
            line("09:00:01", &moved).as_deref(),
            Some("09:00:01 DescribeInstances+1 RegisterInstancesWithLoadBalancer+3")
        );
    }

    #[test]
    fn the_time_of_day_is_utc_hours_minutes_seconds() {
        // 2026-12-03 09:05:08 UTC.
        assert_eq!(time_of_day(1_796_288_708), "09:05:08");
        assert_eq!(time_of_day(0), "00:00:00");
        assert_eq!(utc_time_of_day().len(), 8);
    }
}
