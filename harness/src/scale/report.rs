//! The table of both call patterns' figures that the harness writes into docs/performance.md between its
//! markers (the rest of the page is prose, kept as it is).

use std::{fmt::Write as _, path::Path};

use crate::scale::{
    ccm::{Calls, total},
    figures::{Figures, Phase},
};

pub const BEGIN: &str =
    "<!-- BEGIN scale harness: written by `scale` (harness/src/scale/); do not edit by hand -->";
pub const END: &str = "<!-- END scale harness -->";

/// P1: the burst's wall time at most this many times the write floor.
const P1_FLOOR_RATIO: f64 = 1.2;
/// P4: peak RSS at 5,000 Nodes and 1,000 Services, MiB.
const P4_MIB: f64 = 64.0;

const REGISTER: &[&str] = &["RegisterInstancesWithLoadBalancer", "RegisterTargets"];
const DEREGISTER: &[&str] = &["DeregisterInstancesFromLoadBalancer", "DeregisterTargets"];

/// Where and when the figures were taken.
#[derive(Clone)]
pub struct Meta {
    pub commit: String,
    pub date: String,
    pub machine: String,
    pub setup: String,
    /// Whether both columns' calls were throttled as AWS does (`scale` without `--unthrottled`).
    pub throttled: bool,
}

fn ratio(ours: f64, upstream: f64) -> String {
    if !ours.is_finite() || !upstream.is_finite() {
        "-".to_owned()
    } else if ours > 0.0 {
        format!("{:.1}×", upstream / ours)
    } else if upstream > 0.0 {
        "∞".to_owned()
    } else {
        "-".to_owned()
    }
}

/// A lag in seconds; an infinite one did not end within the run's limit.
fn lag_text(secs: f64) -> String {
    if secs.is_finite() {
        format!("{secs:.1}")
    } else {
        "not within the run's limit".to_owned()
    }
}

fn calls_text(calls: &Calls) -> String {
    if calls.is_empty() {
        return "none".to_owned();
    }
    let parts: Vec<String> = calls.iter().map(|(op, n)| format!("{op} {n:.0}")).collect();
    parts.join(", ")
}

const NOT_REACHED: &str = "not reached";

/// `text` if `f` finished `phase`, else "not reached" ("not run" for a pattern that was not run).
fn cell(f: &Figures, phase: Phase, text: String) -> String {
    if f.phase == Phase::NotRun {
        "not run".to_owned()
    } else if f.phase >= phase {
        text
    } else {
        NOT_REACHED.to_owned()
    }
}

/// [`ratio`] when both finished `phase`.
fn ratio_at(ours: &Figures, up: &Figures, phase: Phase, a: f64, b: f64) -> String {
    if ours.phase >= phase && up.phase >= phase {
        ratio(a, b)
    } else {
        "-".to_owned()
    }
}

/// A goal set at `nodes` Nodes and `services` Services: `judge`d on a run at least that large, else not judged
/// (a smaller run's figure says nothing of it: a burst of 1,000 Nodes spends a larger share on its first
/// lookups, and memory grows with both counts).
fn at_size(
    ours: &Figures,
    services: usize,
    (nodes, wanted): (usize, usize),
    judge: impl FnOnce() -> String,
) -> String {
    if ours.nodes >= nodes && services >= wanted {
        judge()
    } else {
        let services = if wanted == 0 {
            String::new()
        } else {
            format!(", {services} Services")
        };
        format!("not judged at {} Nodes{services}", ours.nodes)
    }
}

fn verdict(met: bool, missed: impl FnOnce() -> String) -> String {
    if met {
        "met".to_owned()
    } else {
        format!("**missed**: {}", missed())
    }
}

/// How far a column got, for the partial table's first line.
fn progress(phase: Phase) -> String {
    match phase {
        Phase::Done => "finished".to_owned(),
        Phase::NotRun => "not run".to_owned(),
        phase => format!("{phase:?} done"),
    }
}

/// The table of both patterns with the goals judged on this CCM's column.
pub fn markdown(ours: &Figures, up: &Figures, meta: &Meta) -> String {
    let mut t = String::new();
    let _ = writeln!(
        t,
        "Measured {} on {} at commit `{}`.\n\n{}\n",
        meta.date, meta.machine, meta.commit, meta.setup
    );
    let unfinished = |f: &Figures| f.phase != Phase::NotRun && f.phase < Phase::Done;
    if unfinished(ours) || unfinished(up) {
        let _ = writeln!(
            t,
            "**Partial**: written while the run was going on; it had not finished when this was last written \
             (this CCM: {}, Go 1.20.2: {}). Figures of phases not reached say so.\n",
            progress(ours.phase),
            progress(up.phase)
        );
    }
    for f in [ours, up] {
        if let Some(why) = &f.failed {
            let _ = writeln!(
                t,
                "**{} stopped** after its {:?} phase: {why}.\n",
                f.label, f.phase
            );
        }
    }
    let limits = if meta.throttled {
        "throttled as AWS"
    } else {
        "unthrottled: moto answered every call"
    };
    let _ = writeln!(
        t,
        "| Figure ({limits}) | this CCM | Go 1.20.2 | Go ÷ this | goal (this CCM) |"
    );
    let _ = writeln!(t, "| --- | ---: | ---: | ---: | --- |");
    let mut row = |name: String, a: String, b: String, r: String, goal: String| {
        let _ = writeln!(t, "| {name} | {a} | {b} | {r} | {goal} |");
    };
    burst_rows(&mut row, ours, up);
    if meta.throttled {
        throttled_row(
            &mut row,
            "Node burst: calls throttled by AWS's rate limits",
            Phase::Burst,
            ours,
            up,
            |f| &f.burst_throttled,
        );
    }
    steady_rows(&mut row, ours, up);
    churn_rows(&mut row, ours, up);
    ensure_rows(&mut row, ours, up);
    lb_costs::rows(&mut row, ours, up);
    footprint_rows(&mut row, ours, up);
    if meta.throttled {
        let name = "Calls throttled by AWS's rate limits, whole run so far";
        throttled_row(&mut row, name, Phase::Started, ours, up, |f| &f.throttled);
    }
    t
}

/// The calls AWS's rate limits refused (the proxy's throttling answers, each a call that was retried or failed),
/// by action, in each column.
fn throttled_row(
    row: &mut impl FnMut(String, String, String, String, String),
    name: &str,
    phase: Phase,
    ours: &Figures,
    up: &Figures,
    calls: impl Fn(&Figures) -> &Calls,
) {
    row(
        name.to_owned(),
        cell(ours, phase, calls_text(calls(ours))),
        cell(up, phase, calls_text(calls(up))),
        ratio_at(ours, up, phase, total(calls(ours)), total(calls(up))),
        String::new(),
    );
}

/// The node burst: its DescribeInstances calls (P1), all its calls, its wall time against the floor (P1).
fn burst_rows(row: &mut impl FnMut(String, String, String, String, String), ours: &Figures, up: &Figures) {
    let di = |f: &Figures| Figures::get(&f.burst_calls, &["DescribeInstances"]);
    let p1_calls = if ours.nodes > 1000 { 6.0 } else { 2.0 };
    let b = Phase::Burst;
    row(
        format!("Node burst of {}: DescribeInstances", ours.nodes),
        cell(ours, b, format!("{:.0}", di(ours))),
        cell(up, b, format!("{:.0}", di(up))),
        ratio_at(ours, up, b, di(ours), di(up)),
        cell(
            ours,
            b,
            format!(
                "P1 ≤ {p1_calls:.0}: {}",
                verdict(di(ours) <= p1_calls, || format!(
                    "{:.0} more",
                    di(ours) - p1_calls
                ))
            ),
        ),
    );
    row(
        "Node burst: all AWS calls".into(),
        cell(ours, b, calls_text(&ours.burst_calls)),
        cell(up, b, calls_text(&up.burst_calls)),
        ratio_at(ours, up, b, total(&ours.burst_calls), total(&up.burst_calls)),
        String::new(),
    );
    let burst = |f: &Figures| {
        format!(
            "{:.1} (floor {:.1}, {:.2}× floor)",
            f.burst,
            f.floor,
            f.burst / f.floor.max(0.001)
        )
    };
    let x = ours.burst / ours.floor.max(0.001);
    row(
        "Node burst: wall time, s (first Node created to last initialized)".into(),
        cell(ours, b, burst(ours)),
        cell(up, b, burst(up)),
        ratio_at(ours, up, b, ours.burst, up.burst),
        cell(
            ours,
            b,
            format!(
                "P1 ≤ {P1_FLOOR_RATIO}× floor at 5,000 Nodes: {}",
                at_size(ours, 0, (5000, 0), || verdict(x <= P1_FLOOR_RATIO, || format!(
                    "{x:.2}× ({:.1} s over)",
                    ours.burst - P1_FLOOR_RATIO * ours.floor
                )))
            ),
        ),
    );
}

/// The steady window's calls per hour (P2), in all and by operation.
fn steady_rows(row: &mut impl FnMut(String, String, String, String, String), ours: &Figures, up: &Figures) {
    let st = Phase::Steady;
    let (a, b) = (total(&ours.steady), total(&up.steady));
    row(
        format!(
            "Steady AWS calls per hour, no churn (window {:.0} min)",
            ours.steady_secs.max(up.steady_secs) / 60.0
        ),
        cell(ours, st, format!("{a:.0}")),
        cell(up, st, format!("{b:.0}")),
        ratio_at(ours, up, st, a, b),
        cell(
            ours,
            st,
            format!(
                "P2 ≤ 2,000 at 5,000 Nodes × 500 Services: {}",
                at_size(ours, ours.ensure.first().map_or(0, |e| e.0), (5000, 500), || {
                    verdict(a <= 2000.0, || format!("{:.0} over", a - 2000.0))
                })
            ),
        ),
    );
    let ops: std::collections::BTreeSet<&String> = ours.steady.keys().chain(up.steady.keys()).collect();
    for op in ops {
        let (a, b) = (Figures::get(&ours.steady, &[op]), Figures::get(&up.steady, &[op]));
        row(
            format!("  per hour: {op}"),
            cell(ours, st, format!("{a:.0}")),
            cell(up, st, format!("{b:.0}")),
            ratio_at(ours, up, st, a, b),
            String::new(),
        );
    }
}

/// How long until each count of Services had load balancers.
fn ensure_rows(row: &mut impl FnMut(String, String, String, String, String), ours: &Figures, up: &Figures) {
    let longest = if ours.ensure.len() >= up.ensure.len() {
        &ours.ensure
    } else {
        &up.ensure
    };
    for (i, (count, ..)) in longest.iter().enumerate() {
        let (a, b) = (ours.ensure.get(i).map(|e| e.1), up.ensure.get(i).map(|e| e.1));
        let text = |f: &Figures| match f.ensure.get(i) {
            None => NOT_REACHED.to_owned(),
            Some((_, secs, _)) if secs.is_finite() => format!("{secs:.0}"),
            Some((count, _, served)) => format!("{served} of {count} served within the run's limit"),
        };
        row(
            format!("Time until {count} Services had load balancers, s"),
            text(ours),
            text(up),
            a.zip(b).map_or_else(|| "-".to_owned(), |(a, b)| ratio(a, b)),
            String::new(),
        );
    }
}

fn churn_rows(row: &mut impl FnMut(String, String, String, String, String), ours: &Figures, up: &Figures) {
    let (j, l) = (Phase::Join, Phase::Leave);
    let (lbs, nlbs) = ours.affected;
    let (reg, other) = Figures::membership(&ours.join, REGISTER);
    let goal = format!(
        "P3 {lbs} register calls ({} Classic, {nlbs} NLB target groups), no other load-balancer call: {}",
        lbs - nlbs,
        verdict(reg == lbs as f64 && other == 0.0, || format!(
            "{reg:.0} register and {other:.0} other calls"
        ))
    );
    row(
        format!("Node joins ({lbs} load balancers target its pool): calls beyond the steady rate"),
        cell(ours, j, calls_text(&ours.join)),
        cell(up, j, calls_text(&up.join)),
        ratio_at(ours, up, j, total(&ours.join), total(&up.join)),
        cell(ours, j, goal),
    );
    row(
        "Node joins: created → initialized, s".into(),
        cell(ours, j, format!("{:.1}", ours.join_init)),
        cell(up, j, format!("{:.1}", up.join_init)),
        ratio_at(ours, up, j, ours.join_init, up.join_init),
        String::new(),
    );
    row(
        format!("Node joins: created → registered in all {lbs}, s (lag)"),
        cell(ours, j, lag_text(ours.join_lag)),
        cell(up, j, lag_text(up.join_lag)),
        ratio_at(ours, up, j, ours.join_lag, up.join_lag),
        cell(ours, j, "P3: measured".into()),
    );
    let (dereg, other) = Figures::membership(&ours.leave, DEREGISTER);
    let goal = format!(
        "P3 {lbs} deregister calls, nothing else: {}",
        verdict(dereg == lbs as f64 && other == 0.0, || format!(
            "{dereg:.0} deregister and {other:.0} other calls"
        ))
    );
    row(
        "Node leaves (deleted): calls beyond the steady rate".into(),
        cell(ours, l, calls_text(&ours.leave)),
        cell(up, l, calls_text(&up.leave)),
        ratio_at(ours, up, l, total(&ours.leave), total(&up.leave)),
        cell(ours, l, goal),
    );
    row(
        format!("Node leaves: deleted → gone from all {lbs}, s (lag)"),
        cell(ours, l, lag_text(ours.leave_lag)),
        cell(up, l, lag_text(up.leave_lag)),
        ratio_at(ours, up, l, ours.leave_lag, up.leave_lag),
        String::new(),
    );
}

fn footprint_rows(
    row: &mut impl FnMut(String, String, String, String, String),
    ours: &Figures,
    up: &Figures,
) {
    #[allow(clippy::cast_precision_loss)]
    let mib = |kib: u64| kib as f64 / 1024.0;
    let text = |v: Option<u64>| v.map_or_else(|| NOT_REACHED.to_owned(), |v| format!("{:.0}", mib(v)));
    let longest = if ours.rss.len() >= up.rss.len() {
        &ours.rss
    } else {
        &up.rss
    };
    for (i, (count, _)) in longest.iter().enumerate() {
        let (a, b) = (ours.rss.get(i).map(|r| r.1), up.rss.get(i).map(|r| r.1));
        let goal = match a {
            Some(kib) if ours.phase == Phase::Done && i + 1 == ours.rss.len() => format!(
                "P4 ≤ {P4_MIB} MiB at 5,000 Nodes × 1,000 Services: {}",
                at_size(ours, *count, (5000, 1000), || verdict(
                    mib(kib) <= P4_MIB,
                    || format!("{:.0} MiB over", mib(kib) - P4_MIB)
                ))
            ),
            _ => String::new(),
        };
        row(
            format!("Peak RSS (VmHWM) after {count} Services, MiB"),
            text(a),
            text(b),
            a.zip(b)
                .map_or_else(|| "-".to_owned(), |(a, b)| ratio(mib(a), mib(b))),
            goal,
        );
    }
    memory_rows(row, ours, up);
    let st = Phase::Steady;
    row(
        "CPU seconds in the steady window".into(),
        cell(ours, st, format!("{:.1}", ours.steady_cpu)),
        cell(up, st, format!("{:.1}", up.steady_cpu)),
        ratio_at(ours, up, st, ours.steady_cpu, up.steady_cpu),
        String::new(),
    );
    row(
        "CPU seconds, whole run".into(),
        cell(ours, Phase::Done, format!("{:.0}", ours.cpu_total)),
        cell(up, Phase::Done, format!("{:.0}", up.cpu_total)),
        ratio_at(ours, up, Phase::Done, ours.cpu_total, up.cpu_total),
        String::new(),
    );
}

/// Where the memory is at the end of each phase: resident anonymous pages (the heap and stacks: what the
/// program allocated and the allocator kept) and file pages (the binary's code as mapped), beside the peak.
fn memory_rows(row: &mut impl FnMut(String, String, String, String, String), ours: &Figures, up: &Figures) {
    #[allow(clippy::cast_precision_loss)]
    let mib = |kib: u64| kib as f64 / 1024.0;
    let text = |f: &Figures, i: usize| {
        f.memory.get(i).map_or_else(
            || NOT_REACHED.to_owned(),
            |(_, m)| {
                format!(
                    "{:.0} + {:.0} (peak {:.0})",
                    mib(m.anon),
                    mib(m.file),
                    mib(m.peak)
                )
            },
        )
    };
    let longest = if ours.memory.len() >= up.memory.len() {
        &ours.memory
    } else {
        &up.memory
    };
    for (i, (at, _)) in longest.iter().enumerate() {
        let (a, b) = (ours.memory.get(i), up.memory.get(i));
        row(
            format!("Resident after {at}, MiB: anonymous (heap, stacks) + file (code)"),
            text(ours, i),
            text(up, i),
            a.zip(b).map_or_else(
                || "-".to_owned(),
                |((_, a), (_, b))| ratio(mib(a.anon + a.file), mib(b.anon + b.file)),
            ),
            String::new(),
        );
    }
}

/// The figures of both patterns as far as they got, written into the page after every phase of either.
pub struct Progress {
    pub page: Option<std::path::PathBuf>,
    /// The chart of both columns (SVG), drawn with the table.
    pub chart: Option<std::path::PathBuf>,
    pub meta: Meta,
    pub figures: std::sync::Mutex<[Figures; 2]>,
}

impl Progress {
    /// Records pattern `idx`'s figures (0 this CCM, 1 the Go controller) and rewrites the page and the chart with
    /// both.
    pub fn publish(&self, idx: usize, f: &Figures) {
        let (table, figures) = {
            let mut figures = self
                .figures
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if let Some(slot) = figures.get_mut(idx) {
                *slot = f.clone();
            }
            let meta = Meta {
                date: crate::scale::meta::command("date", &["-u", "+%Y-%m-%d %H:%M UTC"]),
                ..self.meta.clone()
            };
            (markdown(&figures[0], &figures[1], &meta), figures.clone())
        };
        if let Some(chart) = &self.chart {
            let limits = if self.meta.throttled {
                "throttled as AWS"
            } else {
                "unthrottled"
            };
            let title = format!(
                "{} Nodes, {limits}: this CCM and Go 1.20.2 (commit {})",
                figures[0].nodes, self.meta.commit
            );
            if let Err(e) = crate::scale::chart::write(chart, &figures[0], &figures[1], &title) {
                println!("could not draw {}: {e:#}", chart.display());
            }
        }
        if let Some(page) = &self.page
            && let Err(e) = write(page, &table)
        {
            println!("could not write {}: {e:#}", page.display());
        }
    }
}

/// Replaces what is between the markers of `path` with `table` (adding the markers at the end when missing).
pub fn write(path: &Path, table: &str) -> anyhow::Result<()> {
    let old = std::fs::read_to_string(path).unwrap_or_else(|_| "# Performance\n".to_owned());
    let block = format!("{BEGIN}\n{table}{END}");
    let new = match (old.find(BEGIN), old.find(END)) {
        (Some(b), Some(e)) if b < e => format!("{}{block}{}", &old[..b], &old[e + END.len()..]),
        _ => format!("{}\n{block}\n", old.trim_end()),
    };
    std::fs::write(path, new)?;
    Ok(())
}

mod lb_costs;
#[cfg(test)]
mod tests;
