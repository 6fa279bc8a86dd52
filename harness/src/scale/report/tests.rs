//! The table's rows, goals and captions.

use super::*;
use crate::scale::ccm::Memory;

/// The page's header of a throttled run (its words are not what these tests check).
fn meta() -> Meta {
    Meta {
        commit: "abc".into(),
        date: "today".into(),
        machine: "here".into(),
        setup: String::new(),
        throttled: true,
    }
}

#[test]
fn the_table_shows_where_the_memory_is_and_the_raised_goals() {
    let mut ours = Figures::new("this CCM", 5000);
    ours.phase = Phase::Done;
    ours.floor = 100.0;
    ours.burst = 125.0;
    let mem = |anon_mib: u64, file_mib: u64, peak_mib: u64| Memory {
        anon: anon_mib * 1024,
        file: file_mib * 1024,
        peak: peak_mib * 1024,
    };
    ours.memory = vec![("the Node burst".into(), mem(41, 18, 70))];
    ours.rss = vec![(1000, 70 * 1024)];
    let up = Figures::new("Go 1.20.2", 5000);
    let meta = meta();
    let table = markdown(&ours, &up, &meta);
    assert!(
        table.contains("| Resident after the Node burst, MiB: anonymous (heap, stacks) + file (code) | 41 + 18 (peak 70) | not reached | - |"),
        "{table}"
    );
    assert!(
        table.contains("P1 ≤ 1.2× floor at 5,000 Nodes: **missed**: 1.25× (5.0 s over)"),
        "{table}"
    );
    assert!(
        table.contains("P4 ≤ 64 MiB at 5,000 Nodes × 1,000 Services: **missed**: 6 MiB over"),
        "{table}"
    );
}

#[test]
fn goals_set_at_5000_nodes_are_not_judged_on_a_smaller_run() {
    let mut ours = Figures::new("this CCM", 1000);
    ours.phase = Phase::Done;
    (ours.floor, ours.burst) = (10.0, 13.0);
    ours.ensure = vec![(100, 30.0, 100), (200, 30.0, 200)];
    ours.steady.insert("DescribeInstances".into(), 12.0);
    ours.rss = vec![(100, 40 * 1024), (200, 46 * 1024)];
    let meta = meta();
    let table = markdown(&ours, &Figures::new("Go 1.20.2", 1000), &meta);
    for goal in [
        "P1 ≤ 2: met",
        "P1 ≤ 1.2× floor at 5,000 Nodes: not judged at 1000 Nodes |",
        "P2 ≤ 2,000 at 5,000 Nodes × 500 Services: not judged at 1000 Nodes, 100 Services",
        "P4 ≤ 64 MiB at 5,000 Nodes × 1,000 Services: not judged at 1000 Nodes, 200 Services",
    ] {
        assert!(table.contains(goal), "{goal} in {table}");
    }
}

#[test]
fn the_table_says_whether_aws_throttled_and_what() {
    let mut ours = Figures::new("this CCM", 10);
    ours.phase = Phase::Done;
    ours.burst_throttled
        .insert("DescribeInstanceTopology".into(), 1.0);
    ours.throttled.insert("DescribeInstanceTopology".into(), 2.0);
    let mut meta = meta();
    let table = markdown(&ours, &Figures::new("Go 1.20.2", 10), &meta);
    for line in [
        "| Figure (throttled as AWS) | this CCM | Go 1.20.2 |",
        "| Node burst: calls throttled by AWS's rate limits | DescribeInstanceTopology 1 | not reached |",
        "| Calls throttled by AWS's rate limits, whole run so far | DescribeInstanceTopology 2 | none |",
    ] {
        assert!(table.contains(line), "{line} in {table}");
    }
    meta.throttled = false;
    let table = markdown(&ours, &Figures::new("Go 1.20.2", 10), &meta);
    assert!(
        table.contains("| Figure (unthrottled: moto answered every call) |"),
        "{table}"
    );
    assert!(!table.contains("throttled by AWS"), "{table}");
}

/// `scale --ours-only` (a size the Go controller cannot finish): its column says "not run", no ratio is given,
/// and the table is not partial for it.
#[test]
fn a_column_not_run_says_so_and_leaves_the_table_whole() {
    let mut ours = Figures::new("this CCM", 20000);
    ours.phase = Phase::Done;
    ours.floor = 400.0;
    ours.burst = 450.0;
    let mut up = Figures::new("Go 1.20.2", 20000);
    up.phase = Phase::NotRun;
    let meta = meta();
    let table = markdown(&ours, &up, &meta);
    assert!(!table.contains("**Partial**"), "{table}");
    assert!(!table.contains("not reached"), "{table}");
    assert!(
        table.contains("| Node burst: wall time, s (first Node created to last initialized) | 450.0 (floor 400.0, 1.12× floor) | not run | - |"),
        "{table}"
    );
}

/// A column that stopped early says why on the page, beside what it measured until then.
#[test]
fn a_column_that_stopped_says_why() {
    let mut ours = Figures::new("this CCM", 5000);
    ours.phase = Phase::Done;
    let mut up = Figures::new("Go 1.20.2", 5000);
    up.failed = Some("4554 of 5000 Nodes initialized after 2400 s".into());
    up.throttled.insert("DescribeInstances".into(), 1234.0);
    let meta = meta();
    let table = markdown(&ours, &up, &meta);
    assert!(
        table.contains(
            "**Go 1.20.2 stopped** after its Started phase: 4554 of 5000 Nodes initialized after 2400 s."
        ),
        "{table}"
    );
    assert!(table.contains("| none | DescribeInstances 1234 | "), "{table}");
}

/// A partial table says how far each column got, a finished one as finished (not "Done done").
#[test]
fn a_partial_table_says_how_far_each_column_got() {
    let mut ours = Figures::new("this CCM", 5000);
    ours.phase = Phase::Done;
    let mut up = Figures::new("Go 1.20.2", 5000);
    up.phase = Phase::Steady;
    let table = markdown(&ours, &up, &meta());
    assert!(
        table.contains("(this CCM: finished, Go 1.20.2: Steady done)"),
        "{table}"
    );
}

#[test]
fn load_balancer_costs_are_per_load_balancer_beyond_the_steady_rates() {
    let mut ours = Figures::new("this CCM", 1000);
    ours.phase = Phase::Done;
    ours.ensure = vec![(100, 360.0, 100)];
    ours.steady.insert("DescribeInstances".into(), 100.0);
    ours.steady_moto.insert("DescribeInstances".into(), 10.0);
    let calls =
        |pairs: &[(&str, f64)]| -> Calls { pairs.iter().map(|(op, n)| ((*op).to_owned(), *n)).collect() };
    // 360 s of the steady rate is 10 DescribeInstances and 1 s of moto's time: not the load balancers'.
    ours.ensure_costs = vec![crate::scale::figures::Costs {
        load_balancers: 100,
        secs: 360.0,
        calls: calls(&[("CreateLoadBalancer", 100.0), ("DescribeInstances", 60.0)]),
        moto_secs: calls(&[("CreateLoadBalancer", 20.0), ("DescribeInstances", 6.0)]),
        throttled: Calls::new(),
    }];
    let mut up = Figures::new("Go 1.20.2", 1000);
    up.phase = Phase::Done;
    up.ensure = vec![(100, 300.0, 100)];
    up.ensure_costs = vec![crate::scale::figures::Costs {
        load_balancers: 100,
        secs: 300.0,
        calls: calls(&[("CreateLoadBalancer", 300.0)]),
        moto_secs: calls(&[("CreateLoadBalancer", 30.0)]),
        throttled: calls(&[("CreateLoadBalancer", 200.0)]),
    }];
    up.deletion = Some((
        50.0,
        crate::scale::figures::Costs {
            load_balancers: 100,
            secs: 50.0,
            calls: calls(&[("DeleteLoadBalancer", 100.0)]),
            moto_secs: calls(&[("DeleteLoadBalancer", 5.0)]),
            throttled: Calls::new(),
        },
    ));
    let table = markdown(&ours, &up, &meta());
    for expected in [
        "| Services 1–100: per load balancer made: AWS calls beyond the steady rate | 1.5: CreateLoadBalancer 1.0, \
         DescribeInstances 0.5 | 3.0: CreateLoadBalancer 3.0 (throttled: CreateLoadBalancer 200) | 2.0× |",
        "| Services 1–100: per load balancer made: moto's answer time beyond the steady rate, s | 0.25: \
         CreateLoadBalancer 0.20, DescribeInstances 0.05 | 0.30: CreateLoadBalancer 0.30 | 1.2× |",
        "| Time until the 100 Services were deleted (their load balancers gone), s | not reached | 50 | - |",
        "| Deletion: per load balancer deleted: AWS calls beyond the steady rate | not reached | 1.0: \
         DeleteLoadBalancer 1.0 | - |",
    ] {
        assert!(table.contains(expected), "{expected}\n{table}");
    }
}
