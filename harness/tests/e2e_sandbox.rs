//! End to end: the README's main command's program, `sandbox`, run with `--pause`. Its printed sections show the
//! Nodes initialized, their pod CIDR routes, a Classic ELB and an NLB with every instance, the `lb-plan` dry run
//! of a change that changes nothing, the clean-up, `doctor` exiting 0, the CCM's peak memory and AWS calls by
//! operation. While it is paused before the clean-up, moto is read directly: both load balancers with every
//! instance and the routes to them; after it, moto has neither.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::too_many_lines)]

use std::{
    collections::BTreeMap,
    io::{BufRead, BufReader, Read, Write},
    process::{Command, Stdio},
};

use ccm_testing::{TestEnv, ec2, load_balancers::LoadBalancers, world};

/// The text of section `title` (from its `== title` heading to the next heading).
fn section<'a>(stdout: &'a str, title: &str) -> &'a str {
    let start = stdout
        .find(&format!("\n== {title}"))
        .unwrap_or_else(|| panic!("no section {title}:\n{stdout}"));
    let rest = &stdout[start + 4..];
    &rest[..rest.find("\n== ").unwrap_or(rest.len())]
}

/// The word following `marker` on every line that has it.
fn words_after<'a>(text: &'a str, marker: &str) -> Vec<&'a str> {
    text.split(marker)
        .skip(1)
        .filter_map(|r| r.split([' ', '\n']).next())
        .collect()
}

/// The instances of the Nodes section (sorted) and the pod CIDR of each; checks the before and after of the
/// Nodes and of the routes, whose printed after must route each Node's pod CIDR to its instance.
fn nodes_and_routes(stdout: &str) -> (Vec<String>, BTreeMap<String, String>) {
    // Nodes: four tainted before; after, each with a provider ID and no taint of the CCM's.
    let nodes = section(stdout, "Nodes");
    let (before, after) = nodes
        .split_once("\nafter (")
        .expect("a before and an after section");
    assert_eq!(before.matches("uninitialized").count(), 4, "{stdout}");
    assert!(!after.contains("uninitialized"), "{stdout}");
    let mut instances: Vec<String> = words_after(after, "providerID=aws:///us-east-1a/")
        .into_iter()
        .map(str::to_owned)
        .collect();
    instances.sort();
    assert_eq!(instances.len(), 4, "{stdout}");
    // Each Node's pod CIDR, by instance.
    let cidrs: BTreeMap<String, String> = after
        .lines()
        .filter_map(|l| {
            let id = words_after(l, "providerID=aws:///us-east-1a/").pop()?;
            Some((words_after(l, "podCIDR=").pop()?.to_owned(), id.to_owned()))
        })
        .collect();
    assert_eq!(cidrs.len(), 4, "{stdout}");

    // Routes: none before; after, one per Node's pod CIDR to its instance, also in moto now.
    let routes = section(stdout, "Pod CIDR routes");
    let (before, after) = routes.split_once("\nafter:").unwrap();
    assert!(before.contains("before: (none)"), "{stdout}");
    let printed: BTreeMap<String, String> = after
        .lines()
        .filter_map(|l| l.trim().split_once(" -> "))
        .map(|(c, i)| (c.trim().to_owned(), i.to_owned()))
        .collect();
    assert_eq!(printed, cidrs, "{stdout}");
    (instances, cidrs)
}

/// The clean-up section (both load balancers and every route gone, doctor exiting 0) and the CCM's figures.
fn check_cleanup_and_ccm(stdout: &str) {
    // Clean-up: both load balancers and every route gone, in the output and in moto; doctor found nothing.
    let cleanup = section(stdout, "Clean-up");
    let after = cleanup.split_once("\nafter:").unwrap().1;
    assert_eq!(after.matches(": no load balancer").count(), 2, "{stdout}");
    assert!(after.contains("routes: (none)"), "{stdout}");
    assert!(after.contains("nothing leaked"), "{stdout}");
    assert!(after.contains("doctor exited with exit status: 0"), "{stdout}");

    // The CCM: memory and the AWS calls that made all of the above.
    let ccm = section(stdout, "aws-cloud-controller-manager");
    assert!(ccm.contains("memory: peak "), "{stdout}");
    for op in [
        "CreateLoadBalancer",
        "RegisterInstancesWithLoadBalancer",
        "RegisterTargets",
        "CreateRoute",
    ] {
        assert!(ccm.contains(&format!("\n  {op} ")), "{op} not counted:\n{stdout}");
    }
    assert!(
        ccm.contains("aws-cloud-controller-manager stopped (exit status: 0)"),
        "{stdout}"
    );
}

#[tokio::test]
async fn e2e_sandbox_shows_every_capability_before_and_after() {
    let env = TestEnv::get();
    let mut child = Command::new(env!("CARGO_BIN_EXE_sandbox"))
        .arg("--pause")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("run sandbox");
    let mut reader = BufReader::new(child.stdout.take().unwrap());
    let mut stdout = String::new();
    while !stdout.contains("\npaused before the clean-up") {
        let mut line = String::new();
        assert!(
            reader.read_line(&mut line).unwrap() > 0,
            "ended before the pause:\n{stdout}"
        );
        stdout.push_str(&line);
    }

    let (instances, cidrs) = nodes_and_routes(&stdout);
    let routes = section(&stdout, "Pod CIDR routes");
    let table = words_after(routes, "route table ")[0].to_owned();
    let raw = ec2::client(env).await;
    assert_eq!(world::instance_routes(&raw, &table).await.unwrap(), cidrs);

    // Load balancers: none before; after, the hostnames are the DNS names and every instance is registered,
    // as moto has them now.
    let lbs = section(&stdout, "Services of type LoadBalancer");
    let (before, after) = lbs.split_once("\nafter:").unwrap();
    assert_eq!(before.matches("no load balancer named").count(), 2, "{stdout}");
    let classic = words_after(after, "AWS: Classic ELB ")[0].to_owned();
    let nlb = words_after(after, "AWS: NLB ")[0].to_owned();
    let aws = LoadBalancers::connect(env).await;
    let seen_classic = aws.classic(&classic).await.expect("the Classic ELB in moto");
    let seen_nlb = aws.network(&nlb).await.expect("the NLB in moto");
    assert_eq!(seen_classic.members, instances);
    assert_eq!(seen_nlb.members, instances);
    assert_eq!(
        (seen_classic.ports.as_slice(), seen_nlb.ports.as_slice()),
        (&[80][..], &[443][..])
    );
    let hostnames = words_after(after, "hostname=");
    assert_eq!(
        hostnames,
        [seen_classic.dns_name.as_str(), seen_nlb.dns_name.as_str()],
        "{stdout}"
    );
    assert_eq!(
        after.matches(&format!("instances={instances:?}")).count(),
        2,
        "{stdout}"
    );

    // lb-plan: the listener and the rule it would add; the Classic ELB still has only port 80.
    let plan = section(&stdout, "lb-plan");
    for expected in [
        "create_listeners",
        "\"port\":8443",
        "lb-plan exited with exit status: 0",
    ] {
        assert!(plan.contains(expected), "{expected} not in:\n{stdout}");
    }
    assert!(
        plan.split_once("after (nothing changed)")
            .unwrap()
            .1
            .contains("ports=[80]"),
        "{stdout}"
    );

    child.stdin.take().unwrap().write_all(b"\n").unwrap();
    reader.read_to_string(&mut stdout).unwrap();
    let status = child.wait().unwrap();
    assert!(status.success(), "{stdout}");

    check_cleanup_and_ccm(&stdout);
    // And in moto: neither load balancer nor any route is left.
    assert!(aws.classic(&classic).await.is_none() && aws.network(&nlb).await.is_none());
    assert!(world::instance_routes(&raw, &table).await.unwrap().is_empty());
}
