//! End to end, the real Go controller (Kubernetes 1.20.2's cloud controller manager, `ccm_testing::GoCcm`) against
//! ours on the same table of Services (`go_peer::cases`: every Service annotation the Go provider reads, each on
//! its own Service, both flavours): the Go controller serves them all, its resources are read, it deletes them; then
//! ours serves the same Services (same names and node ports) and deletes them. The two runs' resources, names
//! normalised (`go_peer::normalise`), must be equal but for the known differences listed below, each with its
//! reason (docs/migration-from-go.md, "Differences from the Go controller, resource by resource"). The test fails on a
//! difference not in the list, and on an entry of the list no difference needs.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod go_peer;

use std::time::Duration;

use ccm_testing::{FaultProxy, GoCcm, GoCcmOptions, GoCloudConfig, TestEnv, services::ingress_hostname};
use common::{Ccm, World, initialized};
use go_peer::{
    Aws, Snapshot,
    cases::{self, Case, Inputs, TARGET_LABEL},
    cluster::go_until,
    diff,
    normalise::{Known, Run, glob, normalise, renumber, unexplained},
    show,
};
use k8s_openapi::api::core::v1::Service;
use kube::{
    Api,
    api::{Patch, PatchParams, PostParams},
};
use serde_json::json;

/// How long each controller gets to serve the whole table, and to delete it.
const SERVE_SECS: u64 = 180;

/// The differences between the Go controller's resources and ours, each explained in docs/migration-from-go.md
/// ("Differences from the Go controller, resource by resource").
const KNOWN: &[Known] = &[
    Known {
        key: "sg * ingress -1 all from *",
        change: "removed",
        reason: "Classic ELB node rules narrowed: not all traffic from the load balancer's group",
    },
    Known {
        key: "sg * ingress tcp *-* from sg*",
        change: "added",
        reason: "Classic ELB node rules narrowed: TCP on each node port and the health-check node port",
    },
    Known {
        key: "sg * ingress tcp *-* from 10.*",
        change: "removed",
        reason: "no NLB health rule where the client rule on the same port already admits the subnet",
    },
    Known {
        key: "sg sg:clb-* tag kubernetes.io/service-name",
        change: "added",
        reason: "the Classic ELB's group is tagged with its Service, as the NLB's resources are",
    },
    Known {
        key: "nlb * listener * tag *",
        change: "added",
        reason: "NLB listeners are tagged like their load balancer (the hardened IAM policy needs it)",
    },
];

#[tokio::test]
async fn e2e_go_and_ours_make_the_same_resources_for_every_annotation() {
    let env = TestEnv::get();
    let start = go_peer::cluster::start().await;
    let (world, services, aws) = (&start.world, &start.services, &start.aws);
    for l in &start.launched[..2] {
        let labels = json!({ "metadata": { "labels": { TARGET_LABEL.0: TARGET_LABEL.1 } } });
        world
            .nodes
            .patch(&l.private_dns, &PatchParams::default(), &Patch::Merge(&labels))
            .await
            .unwrap();
    }
    // The nodes' group carries the cluster tag, as installers tag it (kops, EKS): Go 1.20.2 revokes a deleted load
    // balancer's node rules only from groups with the tag, and leaks them elsewhere (docs/migration-from-go.md).
    let node_group = go_peer::cluster::node_group(aws, &start.launched[0].id).await;
    world
        .raw
        .create_tags()
        .resources(&node_group)
        .tags(
            aws_sdk_ec2::types::Tag::builder()
                .key(world.cluster_key())
                .value("owned")
                .build(),
        )
        .send()
        .await
        .unwrap();
    let inputs = Inputs {
        certificate: common::nlb::certificate(&format!("{}.example.com", ccm_testing::unique_name("diff")))
            .await,
        given_group: common::lb::security_group(world, &ccm_testing::unique_name("given"), None).await,
        extra_group: common::lb::security_group(world, &ccm_testing::unique_name("extra"), None).await,
    };
    let table = cases::all(&inputs);
    assert!(table.len() >= 20, "at least 20 Services");
    let vpc = &world.network.vpc_id;
    let baseline = aws.snapshot(vpc).await;
    let config = GoCloudConfig::new(
        env,
        &world.cluster_id,
        vpc,
        &world.network.subnet_id,
        &start.launched[0].zone,
    );

    let (go_facts, go_run_names, go_calls) = go_run(world, &config, services, &table, &start.launched).await;
    let after_go = aws.snapshot(vpc).await;
    let go_left = after_only(&baseline, &after_go);
    assert!(
        go_left.is_empty(),
        "the Go controller left resources behind:\n{go_left:#?}"
    );

    let (ours_facts, ours_run_names, ours_calls) = ours_run(world, &config, services, &table).await;
    let left = diff(&after_go, &aws.snapshot(vpc).await);
    assert!(left.is_empty(), "ours left resources behind:\n{}", show(&left));
    println!("AWS calls for the table (serve, then delete): Go {go_calls}, ours {ours_calls}");

    let differences = diff(
        &normalise(&go_facts, &go_run_names),
        &normalise(&ours_facts, &ours_run_names),
    );
    println!("Go -> ours, normalised:\n{}", show(&differences));
    let (left, stale) = unexplained(&differences, KNOWN);
    assert!(
        left.is_empty(),
        "differences from the Go controller that the list does not explain:\n{}",
        show(&left)
    );
    let stale: Vec<&str> = stale.iter().map(|k| k.key).collect();
    assert!(
        stale.is_empty(),
        "known differences that no longer occur: {stale:?}"
    );
    world.cleanup().await;
}

/// The facts in `after` that `before` does not have.
fn after_only(before: &Snapshot, after: &Snapshot) -> Snapshot {
    after
        .iter()
        .filter(|(k, v)| before.get(*k) != Some(*v))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// The Go controller initialises the Nodes, serves the table, is read, deletes it: (facts, what it made by case,
/// AWS calls).
async fn go_run(
    world: &World,
    config: &GoCloudConfig,
    services: &Api<Service>,
    table: &[Case],
    launched: &[ccm_testing::ec2::Launched],
) -> (Snapshot, Run, u64) {
    let env = TestEnv::get();
    let proxy = FaultProxy::start(&env.aws_endpoint).await.unwrap();
    let options = GoCcmOptions::new(&world.dir, &format!("go-diff-{}", world.cluster_id));
    let mut go = GoCcm::start(env, &config.via(&proxy.url()), &options).unwrap();
    go.wait_leading(Duration::from_secs(60))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let nodes = world.nodes.clone();
    go_until(
        &mut go,
        "the Go controller to initialise the Nodes",
        60,
        async || {
            let mut all = true;
            for l in launched {
                all &= nodes.get(&l.private_dns).await.is_ok_and(|n| initialized(&n));
            }
            all
        },
    )
    .await;
    let run = create(services, table).await;
    let served = wait_served(services, table, || {
        go.check_running().unwrap_or_else(|e| panic!("{e}"))
    })
    .await;
    let mut facts = Aws::connect().await.snapshot(&world.network.vpc_id).await;
    facts.extend(served);
    delete(services, table).await;
    go_until(
        &mut go,
        "the Go controller to delete the table",
        SERVE_SECS,
        async || gone(services, table).await,
    )
    .await;
    go.terminate().await.unwrap();
    (facts, run, proxy.requests_by_action().values().sum())
}

/// Ours serves the same table (same cloud config file), is read, deletes it.
async fn ours_run(
    world: &World,
    config: &GoCloudConfig,
    services: &Api<Service>,
    table: &[Case],
) -> (Snapshot, Run, u64) {
    let env = TestEnv::get();
    let proxy = FaultProxy::start(&env.aws_endpoint).await.unwrap();
    let file = world.dir.join("ours-diff.conf");
    config.via(&proxy.url()).write(&file).unwrap();
    // Without the client-side limiter: its pacing of `CreateLoadBalancer` (half of AWS's resource-intensive bucket,
    // one load balancer of a flavour every 10 s after the first five) would take this table three minutes, and
    // the resources are the same either way. Time to serve is compared by the scale harness.
    let flags = ["--controllers=cloud-node,service", "--aws-client-rate-limits-off"];
    let mut ccm = Ccm::start_with_config(world, &file, &flags);
    let run = create(services, table).await;
    let served = wait_served(services, table, || ccm.assert_running()).await;
    let mut facts = Aws::connect().await.snapshot(&world.network.vpc_id).await;
    facts.extend(served);
    delete(services, table).await;
    common::eventually(&mut ccm, "ours to delete the table", SERVE_SECS, async || {
        gone(services, table).await
    })
    .await;
    assert!(ccm.terminate().await.success());
    (facts, run, proxy.requests_by_action().values().sum())
}

/// Creates the table's Services: their load balancers' names and node ports, by case.
async fn create(services: &Api<Service>, table: &[Case]) -> Run {
    let mut run = Run::default();
    for case in table {
        let svc = services
            .create(&PostParams::default(), &case.service())
            .await
            .unwrap();
        run.lbs
            .insert(go_peer::cluster::lb_name(&svc), case.name.to_owned());
        let spec = svc.spec.unwrap();
        for (i, port) in spec.ports.unwrap_or_default().iter().enumerate() {
            let port = port.node_port.expect("a node port");
            run.ports
                .insert(port.to_string(), format!("np:{}:{i}", case.name));
        }
        if let Some(port) = spec.health_check_node_port {
            run.ports.insert(port.to_string(), format!("hc:{}", case.name));
        }
    }
    run
}

/// `service <case> served` for each case, once all are served or after `SERVE_SECS` (a Service one controller
/// cannot serve is a difference like any other); `running` fails the test if the controller exited.
async fn wait_served(services: &Api<Service>, table: &[Case], mut running: impl FnMut()) -> Snapshot {
    let mut served = Snapshot::new();
    for _ in 0..SERVE_SECS * 5 {
        served = served_facts(services, table).await;
        if served.values().all(|v| v == "yes") {
            break;
        }
        running();
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    served
}

/// `service <case> served`: `yes` once the Service has a hostname.
async fn served_facts(services: &Api<Service>, table: &[Case]) -> Snapshot {
    let mut facts = Snapshot::new();
    for case in table {
        let svc = services.get(case.name).await.unwrap();
        let served = if ingress_hostname(&svc).is_some() {
            "yes"
        } else {
            "no"
        };
        facts.insert(format!("service {} served", case.name), served.to_owned());
    }
    facts
}

async fn delete(services: &Api<Service>, table: &[Case]) {
    for case in table {
        services.delete(case.name, &Default::default()).await.unwrap();
    }
}

async fn gone(services: &Api<Service>, table: &[Case]) -> bool {
    for case in table {
        if services.get_opt(case.name).await.unwrap().is_some() {
            return false;
        }
    }
    true
}

#[test]
fn renumber_replaces_whole_numbers_only() {
    let ports = std::collections::BTreeMap::from([("30200".to_owned(), "np:a:0".to_owned())]);
    assert_eq!(
        renumber(
            "tcp 30200-30200 from sg-30200a TCP:30200 Some(30200) 302001",
            &ports
        ),
        "tcp np:a:0-np:a:0 from sg-30200a TCP:np:a:0 Some(np:a:0) 302001"
    );
}

#[test]
fn glob_matches_runs() {
    assert!(glob(
        "sg * ingress -1 all from sg:*",
        "sg sg-1 ingress -1 all from sg:clb-x"
    ));
    assert!(glob("a*", "a"));
    assert!(!glob("a*b", "ab-c"));
    assert!(glob("*", ""));
    assert!(!glob("abc", "abcd"));
}
