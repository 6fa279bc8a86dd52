//! The AWS calls of a Service's load balancer lifecycle, per flavour, against moto: creation, a steady ensure, a
//! node joining, a node leaving (the node sync's `UpdateLoadBalancer`) and deletion; all calls and the mutating
//! ones, by operation. Calls are deterministic, so these figures are the same on every machine; the Go
//! controller's, from reading its code (see the project's performance notes), are printed beside them.
//!
//! Then the rules on the nodes' group for many NLBs, with CIDR rules and referencing each NLB's group, and last
//! the calls of a rolling update of an NLB with IP targets (`aws-load-balancer-nlb-target-type: ip`), whose
//! table the benchmark also writes into the load balancer docs (between its markers).
//!
//! Needs the test environment's variables (`set -a; . $dir/env; set +a`), then
//! `cargo bench -p ccm-aws --bench aws-calls`. `BENCH_PORTS` (2) sets the Service's ports, `BENCH_RULE_NLBS`
//! (50) the NLBs whose rules are counted.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::collections::BTreeMap;

use ccm_aws_api::Ec2;
use ccm_aws_sdk::CallMetrics;
use ccm_cloud_provider::{LoadBalancer, NodeView};
use ccm_load_balancers::annotations::Key;
use ccm_testing::lb_world::{self as world, Lbs, World, service, uid};
use k8s_openapi::api::core::v1::Service;

/// Calls per operation so far.
fn calls(metrics: &CallMetrics) -> BTreeMap<&'static str, u64> {
    let mut out = BTreeMap::new();
    for (k, s) in metrics.snapshot() {
        *out.entry(k.operation).or_default() += s.attempts;
    }
    out
}

/// One step's figures: all calls, mutating calls, and the operations with their counts.
struct Step {
    name: &'static str,
    total: u64,
    mutating: u64,
    operations: String,
    upstream: &'static str,
}

impl Step {
    fn of(
        name: &'static str,
        upstream: &'static str,
        before: &BTreeMap<&str, u64>,
        after: &BTreeMap<&str, u64>,
    ) -> Self {
        let delta: BTreeMap<&str, u64> = after
            .iter()
            .map(|(k, v)| (*k, v - before.get(k).copied().unwrap_or(0)))
            .filter(|(_, v)| *v > 0)
            .collect();
        let is_read = |op: &str| ["Describe", "Get", "List"].iter().any(|p| op.starts_with(p));
        Self {
            name,
            total: delta.values().sum(),
            mutating: delta.iter().filter(|(op, _)| !is_read(op)).map(|(_, n)| n).sum(),
            operations: delta
                .iter()
                .map(|(op, n)| {
                    if *n == 1 {
                        (*op).to_owned()
                    } else {
                        format!("{op} x{n}")
                    }
                })
                .collect::<Vec<_>>()
                .join(", "),
            upstream,
        }
    }
}

async fn lifecycle(w: &World, lbs: &Lbs, svc: &Service, upstream: [&'static str; 6]) -> Vec<Step> {
    let metrics = w.adapter.metrics();
    let all = w.nodes();
    let two: Vec<&NodeView> = all[..2].iter().collect();
    let three: Vec<&NodeView> = all.iter().collect();
    let mut steps = Vec::new();
    let mut before = calls(metrics);
    let mut step = |name, upstream, before: &mut BTreeMap<&'static str, u64>| {
        let after = calls(metrics);
        steps.push(Step::of(name, upstream, before, &after));
        *before = after;
    };
    lbs.ensure_load_balancer("kubernetes", svc, &two).await.unwrap();
    step("create (2 nodes)", upstream[0], &mut before);
    lbs.ensure_load_balancer("kubernetes", svc, &two).await.unwrap();
    step("steady ensure", upstream[1], &mut before);
    lbs.update_load_balancer("kubernetes", svc, &three).await.unwrap();
    step("node joins (update)", upstream[2], &mut before);
    lbs.update_load_balancer("kubernetes", svc, &two).await.unwrap();
    step("node leaves (update)", upstream[3], &mut before);
    let drifts = lbs.drifted("kubernetes", &[svc], &two).await.unwrap();
    assert!(
        drifts.is_empty(),
        "a steady load balancer has not drifted: {drifts:?}"
    );
    step("drift check (one pass)", upstream[4], &mut before);
    lbs.ensure_load_balancer_deleted("kubernetes", svc).await.unwrap();
    step("delete", upstream[5], &mut before);
    steps
}

fn print(title: &str, steps: &[Step]) {
    println!("\n{title}");
    println!("| step | calls | mutating | Go (code reading) | operations |");
    println!("|---|---:|---:|---|---|");
    for s in steps {
        println!(
            "| {} | {} | {} | {} | {} |",
            s.name, s.total, s.mutating, s.upstream, s.operations
        );
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let ports: i32 = std::env::var("BENCH_PORTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2);
    let port_pairs: Vec<(i32, i32)> = (0..ports).map(|i| (80 + i, 30080 + i)).collect();
    let w = world::world(140, "bench", true).await;

    let classic = w.lbs(w.config.clone());
    let svc = service(&uid(), &port_pairs, &[]);
    let steps = lifecycle(
        &w,
        &classic,
        &svc,
        [
            "est. 15-20",
            "DescribeLoadBalancers and more, plus an unfiltered DescribeSecurityGroups",
            "~4 + an unfiltered DescribeSecurityGroups + region-wide DescribeInstances on a cache miss",
            "same as a join",
            "none (drift is repaired only by the next change)",
            "est. 6-10",
        ],
    )
    .await;
    print(&format!("Classic ELB, {ports} ports, 3 instances (moto)"), &steps);
    let classic_pass = steps[4].total;

    let nlb = w.lbs(w.config.clone().with_nlb_managed_security_groups(true));
    let svc = service(&uid(), &port_pairs, &[(Key::Type, "nlb")]);
    let steps = lifecycle(
        &w,
        &nlb,
        &svc,
        [
            "est. 15-25",
            "a full ensure (est. 15-25); ModifyTargetGroup every sync for HTTP checks",
            "a full ensure (est. 15-25)",
            "a full ensure (est. 15-25)",
            "none (drift is repaired only by the next change)",
            "est. 10-15",
        ],
    )
    .await;
    print(
        &format!("NLB (NLBSecurityGroupMode = Managed), {ports} ports, 3 instances (moto)"),
        &steps,
    );
    drift_budget(classic_pass, steps[4].total, u64::try_from(ports).unwrap_or(2));
    rule_counts().await;
    ip_rollouts(&w).await;
}

/// The calls of rolling updates of an NLB with IP targets, 20 and 200 pods replaced 25% at a time (a
/// Deployment's default surge): per step the new pods turn ready, then the old ones terminate, then their
/// slice entries go, each an endpoint update as the service controller hands it. Printed, and written into
/// docs/load-balancers.md between its markers.
async fn ip_rollouts(w: &World) {
    let mut rows = Vec::new();
    for pods in [20_u16, 200] {
        rows.push(ip_rollout(w, pods).await);
    }
    let mut table = String::from(
        "| pods | steps | endpoint updates | calls | mutating | operations |\n|---:|---:|---:|---:|---:|---|\n",
    );
    for (pods, steps, updates, step) in &rows {
        table.push_str(&format!(
            "| {pods} | {steps} | {updates} | {} | {} | {} |\n",
            step.total, step.mutating, step.operations
        ));
    }
    println!("\nNLB with IP targets: a rolling update, 25% at a time (moto)\n{table}");
    let docs = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/load-balancers.md");
    let (begin, end) = (
        "<!-- BEGIN ip-target rollout: written by the aws-calls benchmark; do not edit by hand -->\n",
        "<!-- END ip-target rollout -->",
    );
    let text = std::fs::read_to_string(docs).unwrap();
    if let (Some(b), Some(e)) = (text.find(begin), text.find(end)) {
        let updated = format!("{}{begin}{table}{}", &text[..b], &text[e..]);
        std::fs::write(docs, updated).unwrap();
        println!("written into docs/load-balancers.md");
    }
}

/// One rollout of `pods` pods: (pods, steps, endpoint updates, the calls of the updates).
async fn ip_rollout(w: &World, pods: u16) -> (u16, u16, u16, Step) {
    use ccm_cloud_provider::{Backends, Endpoint, EndpointPort, ServiceEndpoints};
    let lbs = w.lbs(w.config.clone());
    let svc = service(
        &uid(),
        &[(80, 30080)],
        &[(Key::Type, "nlb"), (Key::NlbTargetType, "ip")],
    );
    let pod = |n: u16| {
        let [hi, lo] = n.to_be_bytes();
        let address = std::net::IpAddr::from([10, 140, 100 + hi, lo]);
        Endpoint::ready(address, None, vec![EndpointPort::new("p80-tcp", 8080, "TCP")])
    };
    let nodes = w.nodes();
    let nodes: Vec<&NodeView> = nodes.iter().collect();
    let mut current: Vec<Endpoint> = (0..pods).map(pod).collect();
    let endpoints = ServiceEndpoints::new(current.clone());
    let backends = Backends::with_endpoints(&nodes, &endpoints);
    lbs.ensure_load_balancer_with("kubernetes", &svc, backends)
        .await
        .unwrap();
    let before = calls(w.adapter.metrics());
    let surge = pods.div_ceil(4);
    let (mut steps, mut updates, mut next) = (0, 0, pods);
    for _ in 0..pods.div_ceil(surge) {
        steps += 1;
        let old: Vec<Endpoint> = current.iter().take(usize::from(surge)).cloned().collect();
        let new: Vec<Endpoint> = (next..next + surge).map(pod).collect();
        next += surge;
        let kept: Vec<Endpoint> = current[old.len()..].to_vec();
        let terminating: Vec<Endpoint> = old
            .iter()
            .map(|e| e.clone().with_conditions(false, true, true))
            .collect();
        // New pods ready; the old ones terminating; the old ones gone.
        let states = [
            [&old[..], &kept, &new].concat(),
            [&terminating[..], &kept, &new].concat(),
            [&kept[..], &new].concat(),
        ];
        for state in &states {
            updates += 1;
            let endpoints = ServiceEndpoints::new(state.iter().cloned());
            let backends = Backends::with_endpoints(&nodes, &endpoints);
            lbs.update_load_balancer_with("kubernetes", &svc, backends)
                .await
                .unwrap();
        }
        current = [&kept[..], &new].concat();
    }
    let after = calls(w.adapter.metrics());
    let step = Step::of("rollout", "", &before, &after);
    lbs.ensure_load_balancer_deleted("kubernetes", &svc)
        .await
        .unwrap();
    (pods, steps, updates, step)
}

/// The rules on the nodes' group for `BENCH_RULE_NLBS` (50) NLBs of 3 ports, 2 source ranges and health checks
/// on the traffic port, without security groups (CIDR rules) and with managed ones (rules from the NLB's group).
/// moto enforces AWS's default of 60 inbound rules per group: the NLBs are created until it refuses one.
async fn rule_counts() {
    let n: usize = std::env::var("BENCH_RULE_NLBS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(50);
    let w = world::world(141, "rules", true).await;
    let (cidr_nlbs, cidr_rules) = node_group_rules(&w, &w.lbs(w.config.clone()), n).await;
    let managed = w.lbs(w.config.clone().with_nlb_managed_security_groups(true));
    let (group_nlbs, group_rules) = node_group_rules(&w, &managed, n).await;
    let per = |nlbs: usize, rules: usize| rules.checked_div(nlbs).unwrap_or(0);
    let at = |nlbs: usize| {
        if nlbs < n {
            format!("refused at NLB {}", nlbs + 1)
        } else {
            "all served".to_owned()
        }
    };
    println!(
        "\nNode group rules, NLBs of 3 ports (2 source ranges, 2 subnets, health checks on the traffic port), up \
         to {n} NLBs, against AWS's 60 inbound rules per group (moto enforces it):\n\
         | node rules | NLBs served | rules on the nodes' group | per NLB | for {n} NLBs |\n|---|---:|---:|---:|---:|\n\
         | CIDR (NLBs without security groups) | {cidr_nlbs} ({}) | {cidr_rules} | {} | {} |\n\
         | from each NLB's group (NLBSecurityGroupMode = Managed) | {group_nlbs} ({}) | {group_rules} | {} | {} |",
        at(cidr_nlbs),
        per(cidr_nlbs, cidr_rules),
        per(cidr_nlbs, cidr_rules) * n,
        at(group_nlbs),
        per(group_nlbs, group_rules),
        per(group_nlbs, group_rules) * n,
    );
}

/// Creates up to `n` NLBs with `lbs` until AWS refuses a rule (`RulesPerSecurityGroupLimitExceeded`), counts
/// the rules on the nodes' group, deletes them again: (NLBs served, rules).
async fn node_group_rules(w: &World, lbs: &Lbs, n: usize) -> (usize, usize) {
    let services: Vec<Service> = (0..n)
        .map(|i| {
            let base = 30000 + 3 * i32::try_from(i).unwrap();
            let ports = [(80, base), (443, base + 1), (8080, base + 2)];
            let mut svc = service(&uid(), &ports, &[(Key::Type, "nlb")]);
            svc.spec.as_mut().unwrap().load_balancer_source_ranges =
                Some(vec!["10.0.0.0/8".to_owned(), "192.168.0.0/16".to_owned()]);
            svc
        })
        .collect();
    let nodes = w.nodes();
    let nodes: Vec<&NodeView> = nodes.iter().collect();
    let (mut served, mut count) = (0, 0);
    for svc in &services {
        match lbs.ensure_load_balancer("kubernetes", svc, &nodes).await {
            Ok(_) => served += 1,
            Err(e) if format!("{e:?}").contains("RulesPerSecurityGroupLimitExceeded") => break,
            Err(e) => panic!("{e:?}"),
        }
        // The rules of the NLBs served so far (a refused one may have made some of its own).
        let groups = w
            .adapter
            .ec2()
            .security_groups(&[ccm_aws_api::Filter::new("group-id", [w.node_group.as_str()])])
            .await
            .unwrap();
        count = groups[0]
            .ingress
            .iter()
            .map(|p| p.ip_ranges.len() + p.ipv6_ranges.len() + p.source_groups.len())
            .sum::<usize>();
    }
    for svc in &services[..(served + 1).min(n)] {
        lbs.ensure_load_balancer_deleted("kubernetes", svc).await.unwrap();
    }
    (served, count)
}
/// Drift detection's cost at 500 load balancers, from the measured pass (one listing call per flavour, and
/// one of target groups for NLBs): every listing is one call per page of 400, whatever the number of Services,
/// and a pass runs every 10 minutes (the default period).
fn drift_budget(classic_pass: u64, nlb_pass: u64, ports: u64) {
    let pages = |n: u64| n.div_ceil(400);
    let classic = classic_pass * pages(500);
    // The NLB pass is one load balancer listing and one target group listing (`ports` groups per NLB).
    let nlb = (nlb_pass - 1) * pages(500) + pages(500 * ports);
    println!(
        "\nDrift detection (--load-balancer-resync-period=10m): one pass measured {classic_pass} call(s) for Classic \
         ELBs and {nlb_pass} for NLBs; listings are paged 400 a page, so at 500 load balancers of each flavour \
         ({ports} target groups per NLB) a pass makes {classic} + {nlb} calls: {} calls per hour (budget 300).",
        (classic + nlb) * 6
    );
}
