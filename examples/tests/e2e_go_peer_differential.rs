//! End to end, the real Go controller (Kubernetes 1.20.2's cloud controller manager, `ccm_testing::GoCcm`) against
//! ours on the same table of Services (`go_peer::cases`: every Service annotation 1.20.2's in-tree AWS provider
//! reads, each on its own Service, both flavours). The Go controller serves them all and is stopped; its
//! resources are read.
//! Ours takes them over: nothing recreated (names, ARNs, DNS names, creation times kept), only security group
//! rules and tags written, and the resources then differ from the Go controller's exactly by the known
//! differences below; ours deletes them all. Then ours serves the same table from nothing: its resources, names
//! normalised (`go_peer::normalise`), again differ from the Go controller's exactly by the known differences, each
//! with its reason (docs/migration-from-go.md, "Differences from the Go controller, resource by resource"). The
//! test fails on a difference not in the list, and on an entry of the list no difference needs.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::too_many_lines)]

mod common;
mod go_peer;

use std::{collections::BTreeSet, time::Duration};

use ccm_testing::{FaultProxy, GoCloudConfig, TestEnv, services::ingress_hostname};
use common::{Ccm, World};
use go_peer::{
    Aws, Snapshot,
    cases::{self, Case, Inputs, TARGET_LABEL},
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

/// The differences between the Go controller's resources and ours taking them over, each explained in
/// docs/migration-from-go.md ("Differences from the Go controller, resource by resource"): the nodes' rules only.
const KNOWN_TAKEOVER: &[Known] = &[
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
];

/// What else differs when ours makes the resources from nothing: the tags it gives what it creates.
const KNOWN_FROM_NOTHING: &[Known] = &[
    Known {
        key: "sg sg:clb-* tag kubernetes.io/service-name",
        change: "added",
        reason: "the Classic ELB's group is created tagged with its Service, as the NLB's resources are",
    },
    Known {
        key: "nlb * listener * tag *",
        change: "added",
        reason: "NLB listeners are created tagged like their load balancer (the hardened IAM policy needs it)",
    },
    Known {
        key: "* * tag kubernetes.io/additional-resource-tags",
        change: "added",
        reason: "the record of the keys additional-resource-tags applied, so that a dropped key is removed",
    },
    Known {
        key: "* * tag kubernetes.io/cloud-controller/managed-tags",
        change: "added",
        reason: "the same record as a Go controller with its pull request #1447 writes it on NLBs, listeners and \
                 target groups (1.20.2 has no record), so a rollback to such a Go controller removes dropped keys",
    },
    Known {
        key: "* * tag kubernetes.io/service-uid",
        change: "added",
        reason: "everything created names its Service's UID, which tells incarnations apart (the ownership claim)",
    },
];

#[tokio::test]
async fn e2e_go_and_ours_make_the_same_resources_for_every_annotation() {
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
        eip_allocations: vec![allocate_address(world).await],
    };
    let table = cases::all(&inputs);
    assert!(table.len() >= 20, "at least 20 Services");
    let vpc = &world.network.vpc;
    let baseline = aws.snapshot(vpc).await;
    let config = start.go_config();

    let (go_facts, go_names, go_calls, go_eips) =
        go_serves(world, &config, services, &table, &start.launched).await;
    let mut ours = Ours::start(world, &config).await;
    ours.takes_over(services, &table, &go_facts, &go_names).await;
    ours.deletes(services, &table, &baseline).await;
    let (ours_facts, ours_names, ours_calls) = ours.serves(services, &table).await;
    // moto records no Elastic IP on an NLB: what each controller asked for is read from its requests.
    let wanted: BTreeSet<String> = inputs.eip_allocations.iter().cloned().collect();
    assert_eq!(
        go_eips, wanted,
        "the Go controller's NLB asked for the eip-allocations"
    );
    assert_eq!(
        requested_allocations(&ours.proxy),
        wanted,
        "ours' NLB asked for the eip-allocations"
    );
    ours.deletes(services, &table, &baseline).await;
    assert!(ours.ccm.terminate().await.success());
    println!("AWS calls to serve the table from nothing: Go {go_calls}, ours {ours_calls}");
    let differences = diff(
        &normalise(&go_facts, &go_names),
        &normalise(&ours_facts, &ours_names),
    );
    println!("Go -> ours, normalised:\n{}", show(&differences));
    let known: Vec<Known> = KNOWN_TAKEOVER.iter().chain(KNOWN_FROM_NOTHING).copied().collect();
    assert_known(&differences, &known, "made from nothing");
    for id in &inputs.eip_allocations {
        let _ = world.raw.release_address().allocation_id(id).send().await;
    }
    world.cleanup().await;
}

/// A new Elastic IP allocation in the VPC domain.
async fn allocate_address(world: &World) -> String {
    let out = world
        .raw
        .allocate_address()
        .domain(aws_sdk_ec2::types::DomainType::Vpc)
        .send()
        .await
        .unwrap();
    out.allocation_id().unwrap().to_owned()
}

/// The Elastic IP allocations `CreateLoadBalancer` requests named (`SubnetMappings.member.N.AllocationId`).
fn requested_allocations(proxy: &FaultProxy) -> BTreeSet<String> {
    proxy
        .bodies("CreateLoadBalancer")
        .iter()
        .flat_map(|body| body.split('&').map(str::to_owned).collect::<Vec<_>>())
        .filter_map(|pair| {
            let (key, value) = pair.split_once('=')?;
            (key.starts_with("SubnetMappings.member.") && key.ends_with(".AllocationId"))
                .then(|| value.to_owned())
        })
        .collect()
}

/// `differences` are exactly the known ones: each explained, each entry needed.
fn assert_known(
    differences: &std::collections::BTreeMap<String, go_peer::Delta>,
    known: &[Known],
    what: &str,
) {
    let (left, stale) = unexplained(differences, known);
    assert!(
        left.is_empty(),
        "{what}: differences from the Go controller that the list does not explain:\n{}",
        show(&left)
    );
    let stale: Vec<&str> = stale.iter().map(|k| k.key).collect();
    assert!(
        stale.is_empty(),
        "{what}: known differences that did not occur: {stale:?}"
    );
}

/// The Go controller initialises the Nodes, serves the table and is stopped: (its facts, what it made by case,
/// its AWS calls, the Elastic IP allocations its requests named).
async fn go_serves(
    world: &World,
    config: &GoCloudConfig,
    services: &Api<Service>,
    table: &[Case],
    launched: &[ccm_testing::ec2::Launched],
) -> (Snapshot, Run, u64, BTreeSet<String>) {
    let lease = format!("go-diff-{}", world.cluster_id);
    let (mut go, proxy) = go_peer::cluster::go_initialises(world, config, &lease, launched).await;
    let run = create(services, table).await;
    let served = wait_served(services, table, || {
        go.check_running().unwrap_or_else(|e| panic!("{e}"))
    })
    .await;
    let mut facts = Aws::connect().await.snapshot(&world.network.vpc).await;
    facts.extend(served);
    go.terminate().await.unwrap();
    let calls = proxy.requests_by_action().values().sum();
    (facts, run, calls, requested_allocations(&proxy))
}

/// Ours, behind its own proxy, with the Go controller's cloud config file.
struct Ours {
    ccm: Ccm,
    proxy: FaultProxy,
    vpc: String,
}

impl Ours {
    async fn start(world: &World, config: &GoCloudConfig) -> Self {
        let env = TestEnv::get();
        let proxy = FaultProxy::start(&env.aws_endpoint).await.unwrap();
        let file = world.dir.join("ours-diff.conf");
        config.via(&proxy.url()).write(&file).unwrap();
        // Without the client-side limiter: its pacing of `CreateLoadBalancer` (half of AWS's resource-intensive
        // bucket, one load balancer of a flavour every 10 s after the first five) would take this table three
        // minutes, and the resources are the same either way. Time to serve is compared by the scale harness.
        let flags = ["--controllers=cloud-node,service", "--aws-client-rate-limits-off"];
        let ccm = Ccm::start_with_config(world, &file, &flags);
        let vpc = world.network.vpc.clone();
        Self { ccm, proxy, vpc }
    }

    /// Ours' first sync of what the Go controller made: no recreation, writes to the nodes' rules only, and the
    /// known differences after it.
    async fn takes_over(
        &mut self,
        services: &Api<Service>,
        table: &[Case],
        go_facts: &Snapshot,
        go_names: &Run,
    ) {
        let port = self.ccm.port;
        let synced = table.len() as f64;
        common::eventually(&mut self.ccm, "ours to sync the table", SERVE_SECS, async || {
            common::reconciles(port, "service-lb-controller").await >= synced
        })
        .await;
        // A few more seconds: anything it would still change shows now.
        tokio::time::sleep(Duration::from_secs(5)).await;
        let mut taken = Aws::connect().await.snapshot(&self.vpc).await;
        taken.extend(served_facts(services, table).await);
        let identity = go_facts
            .iter()
            .filter(|(k, _)| [" created", " dns", " arn"].iter().any(|end| k.ends_with(end)));
        for (key, value) in identity {
            assert_eq!(taken.get(key), Some(value), "{key}: nothing is recreated");
        }
        let changes = diff(&normalise(go_facts, go_names), &normalise(&taken, go_names));
        println!("Go -> ours taking over, normalised:\n{}", show(&changes));
        let written = go_peer::writes(&self.proxy);
        println!(
            "ours' writes on takeover {written:?}:\n{}",
            go_peer::list_requests(&self.proxy, &written)
        );
        let allowed = ["AuthorizeSecurityGroupIngress", "RevokeSecurityGroupIngress"];
        let other: Vec<&String> = written
            .keys()
            .filter(|a| !allowed.contains(&a.as_str()))
            .collect();
        assert!(
            other.is_empty(),
            "ours wrote more than the nodes' rules on takeover: {other:?}"
        );
        assert_known(&changes, KNOWN_TAKEOVER, "taken over");
    }

    /// Serves the table from nothing: (facts, what it made by case, AWS calls).
    async fn serves(&mut self, services: &Api<Service>, table: &[Case]) -> (Snapshot, Run, u64) {
        let before: u64 = self.proxy.requests_by_action().values().sum();
        let run = create(services, table).await;
        let served = wait_served(services, table, || self.ccm.assert_running()).await;
        let calls = self.proxy.requests_by_action().values().sum::<u64>() - before;
        let mut facts = Aws::connect().await.snapshot(&self.vpc).await;
        facts.extend(served);
        (facts, run, calls)
    }

    /// Deletes the table; the VPC is then as it was before anything was served (`baseline`).
    async fn deletes(&mut self, services: &Api<Service>, table: &[Case], baseline: &Snapshot) {
        delete(services, table).await;
        common::eventually(
            &mut self.ccm,
            "ours to delete the table",
            SERVE_SECS,
            async || gone(services, table).await,
        )
        .await;
        let left = diff(baseline, &Aws::connect().await.snapshot(&self.vpc).await);
        assert!(left.is_empty(), "left after the deletion:\n{}", show(&left));
    }
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
