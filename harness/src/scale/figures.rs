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
    /// What each step of Services cost AWS, in the order of `ensure`.
    pub ensure_costs: Vec<Costs>,
    /// The steady window: its length, calls per hour by operation, CPU seconds in it.
    pub steady_secs: f64,
    pub steady: Calls,
    pub steady_cpu: f64,
    /// Seconds moto took per hour of the steady window to answer its calls, by operation: the background that
    /// the costs of a step of Services or of the deletion are taken beyond.
    pub steady_moto: Calls,
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
    /// Every Service deleted at the end: seconds until all were gone (infinite: not within the run's limit) and
    /// what that cost AWS. `None` until it is done.
    pub deletion: Option<(f64, Costs)>,
    /// Why the pattern stopped before its end (a phase that failed or outlasted its limit), if it did.
    pub failed: Option<String>,
}

/// What a phase of load-balancer work cost AWS: every call the controller made meanwhile, and the seconds moto
/// took to answer them (from the proxy in front of it), by operation.
#[derive(Debug, Clone, Default)]
pub struct Costs {
    /// Load balancers made or deleted in the phase.
    pub load_balancers: usize,
    /// The phase's length, seconds.
    pub secs: f64,
    pub calls: Calls,
    pub moto_secs: Calls,
    /// The calls AWS's rate limits refused meanwhile (counted in `calls` too), by action.
    pub throttled: Calls,
}

impl Costs {
    /// Per load balancer, beyond what the steady window's rates (`steady` calls and `steady_moto` seconds an
    /// hour) account for over the phase's length: what the load-balancer work itself cost.
    #[allow(clippy::cast_precision_loss)]
    pub fn per_load_balancer(&self, steady: &Calls, steady_moto: &Calls) -> (Calls, Calls) {
        let n = self.load_balancers.max(1) as f64;
        let each = |measured: &Calls, hourly: &Calls| -> Calls {
            let beyond = beyond(measured, hourly, self.secs).into_iter();
            beyond.map(|(op, v)| (op, v / n)).collect()
        };
        (each(&self.calls, steady), each(&self.moto_secs, steady_moto))
    }
}

/// `measured` over `secs` less what the `hourly` rates account for in that time, by operation; what is left
/// (nothing or less is dropped).
pub fn beyond(measured: &Calls, hourly: &Calls, secs: f64) -> Calls {
    measured
        .iter()
        .map(|(op, v)| {
            let background = hourly.get(op).copied().unwrap_or(0.0) * secs / 3600.0;
            (op.clone(), v - background)
        })
        .filter(|(_, v)| *v > 0.0)
        .collect()
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
