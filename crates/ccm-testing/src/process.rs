//! What a running process has used so far, from `/proc/<pid>/status` and `/proc/<pid>/stat` (Linux), to compare
//! controllers' peak memory and CPU time. Read it before the process exits.

/// Peak resident memory and CPU time of a process so far.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Usage {
    /// `VmHWM`: the peak resident set, in KiB.
    pub peak_rss_kib: u64,
    /// User and system time, in seconds.
    pub cpu_seconds: f64,
}

/// Clock ticks per second of `/proc/<pid>/stat` (`USER_HZ`): 100 on every Linux architecture the project builds
/// for.
const TICKS_PER_SECOND: f64 = 100.0;

/// The usage of process `pid`, or `None` when it is gone or its files are unreadable.
pub fn usage(pid: u32) -> Option<Usage> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let peak_rss_kib = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    Some(Usage {
        peak_rss_kib,
        cpu_seconds: cpu_ticks(&stat)? / TICKS_PER_SECOND,
    })
}

/// `utime + stime` (fields 14 and 15) of a `/proc/<pid>/stat` line; the command name (field 2) may hold spaces
/// and parentheses, so fields are counted after its last `)`.
fn cpu_ticks(stat: &str) -> Option<f64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // After the name, field 3 (state) is index 0: utime (14) is index 11, stime (15) index 12.
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    Some(utime + stime)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_ticks_are_counted_after_the_command_name() {
        let stat = "42 (a (b) c) S 1 42 42 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 1 0 5 1000 10";
        assert_eq!(cpu_ticks(stat), Some(300.0));
        assert_eq!(cpu_ticks("42 (x) S 1"), None);
    }

    #[test]
    fn this_process_has_a_usage() {
        let own = usage(std::process::id()).expect("this process's usage");
        assert!(own.peak_rss_kib > 0);
        assert!(own.cpu_seconds >= 0.0);
    }
}
