//! The rows of what the load balancers cost AWS (#58, item 6): per load balancer made in each step of Services,
//! and per load balancer deleted at the end, the calls and moto's answer time beyond the steady window's rates,
//! with how long the deletion took.

use super::{NOT_REACHED, ratio};
use crate::scale::{
    ccm::{Calls, total},
    figures::{Costs, Figures},
};

/// Operations shown by name in a cell of moto's seconds; the rest are summed as "others".
const TOP: usize = 4;

/// The cost rows of both columns, step by step, then the deletion's.
pub(super) fn rows(
    row: &mut impl FnMut(String, String, String, String, String),
    ours: &Figures,
    up: &Figures,
) {
    let steps = ours.ensure_costs.len().max(up.ensure_costs.len());
    for i in 0..steps {
        let count = |f: &Figures| f.ensure.get(i).map(|e| e.0);
        let Some(last) = count(ours).or_else(|| count(up)) else {
            continue;
        };
        let before = i
            .checked_sub(1)
            .and_then(|j| ours.ensure.get(j).or(up.ensure.get(j)));
        let first = before.map_or(1, |e| e.0 + 1);
        let costs = |f: &Figures| f.ensure_costs.get(i).cloned();
        let services = if first == last {
            format!("Service {last}")
        } else {
            format!("Services {first}–{last}")
        };
        pair(
            row,
            &format!("{services}: per load balancer made"),
            ours,
            up,
            costs,
        );
    }
    let secs = |f: &Figures| match &f.deletion {
        None => NOT_REACHED.to_owned(),
        Some((s, _)) if s.is_finite() => format!("{s:.0}"),
        Some(_) => "not within the run's limit".to_owned(),
    };
    let deleted = ours.deletion.as_ref().or(up.deletion.as_ref());
    let Some((_, c)) = deleted else {
        return;
    };
    let time = |f: &Figures| f.deletion.as_ref().map(|d| d.0);
    row(
        format!(
            "Time until the {} Services were deleted (their load balancers gone), s",
            c.load_balancers
        ),
        secs(ours),
        secs(up),
        time(ours)
            .zip(time(up))
            .map_or_else(|| "-".to_owned(), |(a, b)| ratio(a, b)),
        String::new(),
    );
    pair(row, "Deletion: per load balancer deleted", ours, up, |f| {
        f.deletion.as_ref().map(|d| d.1.clone())
    });
}

/// Two rows for one phase: its calls, then moto's seconds, per load balancer beyond the steady rates.
fn pair(
    row: &mut impl FnMut(String, String, String, String, String),
    name: &str,
    ours: &Figures,
    up: &Figures,
    costs: impl Fn(&Figures) -> Option<Costs>,
) {
    let throttled = |f: &Figures| match costs(f) {
        Some(c) if !c.throttled.is_empty() => format!(" (throttled: {})", super::calls_text(&c.throttled)),
        _ => String::new(),
    };
    let each = |f: &Figures| costs(f).map(|c| c.per_load_balancer(&f.steady, &f.steady_moto));
    let (a, b) = (each(ours), each(up));
    let both = |pick: fn(&(Calls, Calls)) -> &Calls| match (&a, &b) {
        (Some(a), Some(b)) => ratio(total(pick(a)), total(pick(b))),
        _ => "-".to_owned(),
    };
    let text =
        |c: &Option<(Calls, Calls)>, show: fn(&Calls) -> String, pick: fn(&(Calls, Calls)) -> &Calls| {
            c.as_ref()
                .map_or_else(|| NOT_REACHED.to_owned(), |c| show(pick(c)))
        };
    row(
        format!("{name}: AWS calls beyond the steady rate"),
        text(&a, per_lb_calls_text, |c| &c.0) + &throttled(ours),
        text(&b, per_lb_calls_text, |c| &c.0) + &throttled(up),
        both(|c| &c.0),
        String::new(),
    );
    row(
        format!("{name}: moto's answer time beyond the steady rate, s"),
        text(&a, secs_text, |c| &c.1),
        text(&b, secs_text, |c| &c.1),
        both(|c| &c.1),
        String::new(),
    );
}

/// "14.2: DescribeLoadBalancers 2.0, ...": the total, then every operation, the largest first.
fn per_lb_calls_text(calls: &Calls) -> String {
    let parts: Vec<String> = largest_first(calls)
        .into_iter()
        .map(|(op, n)| format!("{op} {n:.1}"))
        .collect();
    format!("{:.1}: {}", total(calls), parts.join(", "))
}

/// "1.31: DescribeSecurityGroups 0.52, ..., others 0.10": the total, then the largest few.
fn secs_text(secs: &Calls) -> String {
    let sorted = largest_first(secs);
    let mut parts: Vec<String> = sorted
        .iter()
        .take(TOP)
        .map(|(op, s)| format!("{op} {s:.2}"))
        .collect();
    let others: f64 = sorted.iter().skip(TOP).map(|(_, s)| s).sum();
    if sorted.len() > TOP {
        parts.push(format!("others {others:.2}"));
    }
    format!("{:.2}: {}", total(secs), parts.join(", "))
}

fn largest_first(values: &Calls) -> Vec<(&str, f64)> {
    let mut sorted: Vec<(&str, f64)> = values.iter().map(|(op, v)| (op.as_str(), *v)).collect();
    sorted.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(b.0)));
    sorted
}
