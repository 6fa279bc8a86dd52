//! The soak's figures: printed, and written as a table into docs/reliability.md between the `chaos-soak`
//! markers (by the full run; `--write-docs` makes any run do it), so the page always shows a run of this code.

use std::{collections::BTreeMap, fmt::Write as _};

use ccm_testing::ChaosKind;

use crate::soak::{
    Soak,
    state::{Stats, percentile},
    verify::Outcome,
};

const BEGIN: &str = "<!-- chaos-soak:begin -->";
const END: &str = "<!-- chaos-soak:end -->";

pub struct Run {
    pub seed: u64,
    pub per_mille: u16,
    pub minutes: f64,
    pub faults: BTreeMap<ChaosKind, u64>,
    pub calls: BTreeMap<String, u64>,
}

/// The figures as Markdown (a table of figures, then the AWS calls by operation).
pub fn markdown(run: &Run, stats: &Stats, outcome: &Outcome) -> String {
    let mut out = String::from("| Figure | Value |\n|---|---|\n");
    for (k, v) in rows(run, stats).into_iter().chain(outcome_rows(stats, outcome)) {
        let _ = writeln!(out, "| {k} | {v} |");
    }
    let mut calls: Vec<(&String, &u64)> = run.calls.iter().collect();
    calls.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    let listed: Vec<String> = calls.iter().map(|(op, n)| format!("{op} {n}")).collect();
    let _ = write!(out, "\nAWS calls by operation: {}.\n", listed.join(", "));
    out
}

/// `p50 .. s, p90 .., p99 .., max .. (n samples)`.
fn secs(v: &[std::time::Duration]) -> String {
    let p = |q| percentile(v, q);
    format!(
        "p50 {:.1} s, p90 {:.1} s, p99 {:.1} s, max {:.1} s ({} samples)",
        p(50),
        p(90),
        p(99),
        p(100),
        v.len()
    )
}

/// The table's rows about the run's workload, its faults and its leader changes.
fn rows(run: &Run, stats: &Stats) -> Vec<(&'static str, String)> {
    let total: u64 = run.calls.values().sum();
    let faulted: u64 = run.faults.values().sum();
    let share = if total == 0 {
        0.0
    } else {
        100.0 * faulted as f64 / total as f64
    };
    let faults: Vec<String> = run.faults.iter().map(|(k, n)| format!("{k} {n}")).collect();
    let changes: Vec<String> = stats.changes.iter().map(|(k, n)| format!("{k} {n}")).collect();
    let (n, cuts) = (&stats.node_events, &stats.partitions);
    vec![
        ("Seed", run.seed.to_string()),
        ("Duration", format!("{:.1} min", run.minutes)),
        ("Lifecycles (created and deleted)", stats.lifecycles.to_string()),
        (
            "Deleted while being created",
            stats.deleted_while_creating.to_string(),
        ),
        ("Changes", changes.join(", ")),
        (
            "Node events",
            format!(
                "{} launched ({} at a dead instance's address), {} terminated, {} scaled in, {} replaced at the \
                 dead instance's address ({} beside its Node, {} after the CCM deleted its Node of the same \
                 name), {} Ready flips",
                n.launched,
                n.launched_reused,
                n.terminated,
                n.scaled_in,
                n.replaced,
                n.replaced_beside_dead,
                n.replaced_same_name,
                n.ready_flips
            ),
        ),
        ("AWS calls (through the proxy)", total.to_string()),
        (
            "Faults injected",
            format!(
                "{faulted} ({share:.1} % of calls; rate {} ‰): {}",
                run.per_mille,
                faults.join(", ")
            ),
        ),
        (
            "Leader SIGKILLs / forced changes / partitions / failovers",
            format!(
                "{} / {} / {} / {}",
                stats.kills, stats.forced, cuts.count, stats.failovers
            ),
        ),
        (
            "Partitions (leader cut off from the apiserver, its `CreateTags` failing)",
            format!(
                "{} ({} with `CreateTags` failing at the cut; {} refused)",
                cuts.count, cuts.while_tagging, cuts.refused
            ),
        ),
        (
            "AWS calls of a cut-off leader after its controllers stopped",
            cuts.after_stop.len().to_string(),
        ),
        ("Failover time", secs(&stats.failover_times)),
        (
            "Classic ELBs converged sharing the given group with one of other node labels",
            stats.mixed_sharing.to_string(),
        ),
        ("Replica crashes (exits not caused)", stats.crashes.to_string()),
    ]
}

/// The table's rows about how the CCM did: times, and each kind of problem.
fn outcome_rows(stats: &Stats, outcome: &Outcome) -> Vec<(&'static str, String)> {
    vec![
        (
            "Convergence time (create or change to AWS matching)",
            secs(&stats.convergence),
        ),
        (
            "Deletion time (Service and load balancer gone)",
            secs(&stats.deletions),
        ),
        (
            "Unconverged Services",
            (stats.unconverged.len() + outcome.unconverged.len()).to_string(),
        ),
        (
            "Stalls (deletions not finished, no new leader)",
            stats.stuck.len().to_string(),
        ),
        ("Stuck finalizers", outcome.stuck_finalizers.len().to_string()),
        (
            "Leaks (`doctor`, owned AWS resources)",
            outcome.leaks.len().to_string(),
        ),
        ("Other `doctor` findings", outcome.doctor_other.len().to_string()),
        ("Foreign mutations", outcome.foreign_mutations.len().to_string()),
        (
            "Nodes of running instances deleted",
            outcome.nodes_lost.len().to_string(),
        ),
        (
            "Nodes with another instance's providerID (or none)",
            (stats.provider_ids.len() + outcome.provider_ids.len()).to_string(),
        ),
    ]
}

/// Prints the figures and the problems, writes the table into docs/reliability.md when `write`; the problems.
pub fn conclude(soak: &Soak, run: &Run, outcome: &Outcome, write: bool) -> anyhow::Result<Vec<String>> {
    let stats = soak.stats();
    let table = markdown(run, &stats, outcome);
    let problems = problems(&stats, outcome);
    println!("\n{table}");
    for p in &problems {
        println!("PROBLEM {p}");
    }
    if write {
        write_docs(&table, stats.lifecycles, run.seed)?;
    }
    Ok(problems)
}

/// Every problem found, one line each.
pub fn problems(stats: &Stats, outcome: &Outcome) -> Vec<String> {
    let groups: [(&str, &[String]); 11] = [
        ("unconverged during the run", &stats.unconverged),
        ("stalled", &stats.stuck),
        ("unconverged at the end", &outcome.unconverged),
        ("stuck finalizer", &outcome.stuck_finalizers),
        ("leak", &outcome.leaks),
        ("doctor", &outcome.doctor_other),
        ("foreign mutation", &outcome.foreign_mutations),
        ("Node lost", &outcome.nodes_lost),
        ("providerID during the run", &stats.provider_ids),
        ("providerID at the end", &outcome.provider_ids),
        ("AWS call of a stopped leader", &stats.partitions.after_stop),
    ];
    groups
        .iter()
        .flat_map(|(what, lines)| lines.iter().map(move |l| format!("{what}: {l}")))
        .collect()
}

/// Replaces the table between the markers of docs/reliability.md with `table`, headed by the run's context.
pub fn write_docs(table: &str, lifecycles: u32, seed: u64) -> anyhow::Result<()> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/reliability.md");
    let page = std::fs::read_to_string(&path)?;
    let (Some(begin), Some(end)) = (page.find(BEGIN), page.find(END)) else {
        anyhow::bail!("{} has no {BEGIN} ... {END} section", path.display());
    };
    let commit = std::process::Command::new("git")
        .args(["rev-parse", "--short", "HEAD"])
        .output()?;
    let commit = String::from_utf8_lossy(&commit.stdout).trim().to_owned();
    let date = std::process::Command::new("date")
        .args(["-u", "+%Y-%m-%d %H:%M UTC"])
        .output()?;
    let date = String::from_utf8_lossy(&date.stdout).trim().to_owned();
    let cores = std::thread::available_parallelism().map_or(0, usize::from);
    let head = format!(
        "{BEGIN}\nRun of {date}, commit {commit}, {lifecycles} lifecycles, seed {seed}, on a {cores}-core machine \
         shared with other builds (debug build):\n\n"
    );
    let updated = format!("{}{head}{table}{}", &page[..begin], &page[end..]);
    std::fs::write(&path, updated)?;
    println!("wrote the table into {}", path.display());
    Ok(())
}
