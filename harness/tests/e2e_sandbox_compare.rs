//! End to end: `sandbox --compare 2` (what `scripts/sandbox.sh --compare` runs) prints both columns, the Go
//! controller's and ours, for every phase: wall time, AWS calls (the load balancers' phase at least the creation
//! calls of both flavours), peak memory and CPU time; and the calls by phase and operation. Both controllers
//! finished every phase (the binary fails otherwise), and moto keeps no load balancer of either run.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::too_many_lines)]

use std::process::Command;

use ccm_testing::{GoCcm, TestEnv, load_balancers::LoadBalancers, services};

/// The two values of the row whose label is `label` (columns split on runs of two spaces or more).
fn row<'a>(stdout: &'a str, label: &str) -> (&'a str, &'a str) {
    let line = stdout
        .lines()
        .find(|l| l.trim_start().starts_with(&format!("{label}  ")))
        .unwrap_or_else(|| panic!("no row {label}:\n{stdout}"));
    let cells: Vec<&str> = line
        .split("  ")
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .collect();
    assert_eq!(cells.len(), 3, "{line}");
    (cells[1], cells[2])
}

fn seconds(cell: &str) -> f64 {
    cell.strip_suffix(" s")
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("not a time: {cell}"))
}

#[tokio::test]
async fn e2e_sandbox_compare_prints_both_controllers_side_by_side() {
    let env = TestEnv::get();
    GoCcm::binary().unwrap_or_else(|e| panic!("{e}"));
    // The Go controller serves every LoadBalancer Service of the apiserver: none may be left by an earlier run.
    let client = env.kube_client().await.unwrap();
    services::force_delete_load_balancers(&client, None, None)
        .await
        .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_sandbox"))
        .args(["--compare", "2"])
        .output()
        .expect("run sandbox");
    let stdout = String::from_utf8_lossy(&out.stdout);
    println!("{stdout}");
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let header = stdout.lines().find(|l| l.contains("Go 1.20.2"));
    assert!(
        header.is_some_and(|h| h.trim_end().ends_with("ours (debug build)")),
        "{stdout}"
    );
    for phase in [
        "start",
        "initialise 2 Nodes",
        "serve a Classic ELB and an NLB",
        "delete both",
    ] {
        let (go, ours) = row(&stdout, phase);
        assert!(seconds(go) >= 0.0 && seconds(ours) >= 0.0, "{stdout}");
    }
    let serving = stdout
        .split("\n  serve a Classic ELB and an NLB")
        .nth(1)
        .expect("the serving phase's row");
    let (go_calls, ours_calls) = row(serving, "AWS calls");
    assert!(go_calls.parse::<u64>().unwrap() > 0, "{stdout}");
    assert!(ours_calls.parse::<u64>().unwrap() > 0, "{stdout}");
    let by_operation = stdout
        .split("AWS calls by phase and operation")
        .nth(1)
        .expect("the calls by operation");
    let (go_creates, ours_creates) = row(by_operation, "CreateLoadBalancer");
    assert_eq!((go_creates, ours_creates), ("2", "2"), "{stdout}");
    let (go_mib, ours_mib) = row(&stdout, "peak memory (VmHWM)");
    assert!(go_mib.ends_with(" MiB") && ours_mib.ends_with(" MiB"), "{stdout}");
    let (go_cpu, ours_cpu) = row(&stdout, "CPU time (user + system)");
    assert!(seconds(go_cpu) > 0.0 && seconds(ours_cpu) > 0.0, "{stdout}");

    // Each run's cluster has a VPC of its own (`moto: VPC <id> with ...`): none holds a load balancer now.
    let vpcs: Vec<&str> = stdout
        .lines()
        .filter_map(|l| l.strip_prefix("moto: VPC "))
        .filter_map(|l| l.split(' ').next())
        .collect();
    assert_eq!(vpcs.len(), 2, "{stdout}");
    let aws = LoadBalancers::connect(env).await;
    for vpc in vpcs {
        let left = aws.in_vpc(vpc).await.unwrap();
        assert!(left.is_empty(), "left in {vpc}: {left:?}\n{stdout}");
    }
}
