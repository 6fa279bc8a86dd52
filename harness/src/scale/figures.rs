//! The figures of one call pattern, filled phase by phase (`phases.rs`), drawn (`chart.rs`) and tabled
//! (`report.rs`).

use crate::scale::ccm::{Calls, Memory, total};

/// How far a pattern got, in order: figures of a phase not finished are shown as not reached, so that the page
/// written while the run goes on (or after it stopped) never shows a zero for a figure that was not taken.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord)]
pub enum Phase {
    /// The pattern was not run at all (`scale --ours-only`).
    NotRun,
    #[default]
    Started,
    Burst,
    Steady,
    Join,
    Leave,
    Done,
}

#[derive(Debug, Clone, Default)]
pub struct Figures {
    pub label: String,
    pub nodes: usize,
    pub phase: Phase,
    /// Write floor and node burst, seconds; the burst's AWS calls.
    pub floor: f64,
    pub burst: f64,
    pub burst_calls: Calls,
    /// The burst's calls that AWS's rate limits refused (the proxy's throttling answers), by action.
    pub burst_throttled: Calls,
    /// Every call AWS's rate limits refused so far in the run, by action.
    pub throttled: Calls,
    /// Services, the seconds until all had load balancers (infinite: not within the run's limit), and how
    /// many had one then.
    pub ensure: Vec<(usize, f64, usize)>,
    /// The steady window: its length, calls per hour by operation, CPU seconds in it.
    pub steady_secs: f64,
    pub steady: Calls,
    pub steady_cpu: f64,
    /// Load balancers targeting the joining Node's pool, and how many of them are NLBs.
    pub affected: (usize, usize),
    pub join: Calls,
    pub join_init: f64,
    pub join_lag: f64,
    pub leave: Calls,
    pub leave_lag: f64,
    /// Peak RSS (KiB) after each Service count; CPU seconds of the whole run.
    pub rss: Vec<(usize, u64)>,
    /// The process's memory at the end of each phase: where the peak comes from.
    pub memory: Vec<(String, Memory)>,
    pub cpu_total: f64,
    /// Why the pattern stopped before its end (a phase that failed or outlasted its limit), if it did.
    pub failed: Option<String>,
}

impl Figures {
    pub fn new(label: &str, nodes: usize) -> Self {
        Self {
            label: label.to_owned(),
            nodes,
            ..Self::default()
        }
    }

    /// The calls of `ops`, summed.
    pub fn get(calls: &Calls, ops: &[&str]) -> f64 {
        ops.iter().map(|op| calls.get(*op).copied().unwrap_or(0.0)).sum()
    }

    /// (register calls, other load-balancer calls) of the join; (deregister, other) of the leave.
    pub fn membership(calls: &Calls, ops: &[&str]) -> (f64, f64) {
        let own = Self::get(calls, ops);
        (own, total(calls) - own - Self::get(calls, &["DescribeInstances"]))
    }
}
