//! End to end with the real Go controller (Kubernetes 1.20.2's cloud controller manager with its in-tree AWS
//! provider, `ccm_testing::GoCcm`) as the peer: the Go controller initialises three Nodes (named by private DNS
//! name, as its provider requires) and serves a Classic ELB with two ports and an NLB; it is stopped, and ours
//! (`aws-cloud-controller-manager`, the same cloud config file and the same Lease, as in a real switch of image)
//! takes over. Required and asserted: nothing recreated (load balancer names, ARNs and DNS names, target group
//! ARNs, Service hostnames all kept); the resources change exactly as docs/migration-from-go.md says a takeover
//! changes them, and ours' AWS writes, read from a `FaultProxy`'s request log and printed, are only those; a
//! restarted controller then writes nothing; deleting both Services with ours running leaves the VPC as it was
//! before the Go controller made anything (load balancers, target groups, managed groups, node rules).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod go_peer;

use std::{collections::BTreeMap, time::Duration};

use ccm_testing::{
    FaultProxy, GoCcm, GoCcmOptions, GoCloudConfig, TestEnv, ec2::Launched, services::ingress_hostname,
};
use common::{Ccm, World, eventually, initialized, lb::public_subnet};
use go_peer::{Aws, Delta, Snapshot, diff, list_requests, show, writes, writes_since};
use k8s_openapi::api::core::v1::{Node, Service};
use kube::{
    Api,
    api::{Patch, PatchParams, PostParams},
};
use serde_json::json;

/// What the Go controller made for the two Services.
struct Served {
    clb_service: String,
    nlb_service: String,
    /// The load balancers' names (`a` + UID), Classic and NLB.
    clb: String,
    nlb: String,
    /// Each Service's status hostname.
    hostnames: BTreeMap<String, String>,
    /// The Classic ELB's node ports and the NLB's.
    clb_node_ports: Vec<i32>,
    nlb_node_port: i32,
    /// The nodes' security group.
    node_group: String,
}

#[tokio::test]
async fn e2e_ours_takes_over_what_the_go_controller_made_and_deletes_it() {
    let env = TestEnv::get();
    // Fails here, naming CCM_TEST_GO_CCM, when the environment has no Go controller: never a silent skip.
    GoCcm::binary().unwrap_or_else(|e| panic!("{e}"));
    let world = World::new("").await;
    public_subnet(&world).await;
    let client = env.kube_client().await.unwrap();
    delete_stale(client.clone()).await;
    let services: Api<Service> = Api::namespaced(client, "default");
    let launched = world.launch(3).await;
    for l in &launched {
        world.register_node(&l.private_dns, None).await;
    }
    let aws = Aws::connect().await;
    let baseline = aws.snapshot(&world.network.vpc_id).await;
    let config = GoCloudConfig::new(
        env,
        &world.cluster_id,
        &world.network.vpc_id,
        &world.network.subnet_id,
        &launched[0].zone,
    );

    let served = go_makes(&world, &config, &services, &launched).await;
    let go_made = aws.snapshot(&world.network.vpc_id).await;
    assert_go_made(&go_made, &served, &launched);
    let nodes_before = node_facts(&world, &launched).await;

    let proxy = FaultProxy::start(&env.aws_endpoint).await.unwrap();
    let ours_config = world.dir.join("ours.conf");
    config.via(&proxy.url()).write(&ours_config).unwrap();
    let mut ccm = ours_takes_over(&world, &ours_config, &proxy, &services, &served, &go_made).await;
    let nodes_after = node_facts(&world, &launched).await;
    let node_changes = diff(&nodes_before, &nodes_after);
    assert!(
        node_changes.is_empty(),
        "ours changed the Nodes the Go controller initialised:\n{}",
        show(&node_changes)
    );

    // A second round: a restarted controller (Lease released on SIGTERM) finds nothing to do.
    let before = writes(&proxy);
    assert!(ccm.terminate().await.success());
    let mut ccm = Ccm::start_with_config(&world, &ours_config, &["--controllers=cloud-node,service"]);
    wait_synced(&mut ccm, 30).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let again = writes_since(&before, &writes(&proxy));
    assert!(
        again.is_empty(),
        "the restarted controller wrote:\n{}",
        list_requests(&proxy, &again)
    );

    ours_deletes(&mut ccm, &proxy, &services, &served, &world, &baseline).await;
    world.cleanup().await;
}

/// Phase 1: the Go controller initialises the Nodes and serves both Services; stopped once both have hostnames.
async fn go_makes(
    world: &World,
    config: &GoCloudConfig,
    services: &Api<Service>,
    launched: &[Launched],
) -> Served {
    let env = TestEnv::get();
    let proxy = FaultProxy::start(&env.aws_endpoint).await.unwrap();
    // Ours' Lease (`Ccm::start` names it so): ours waits for the Go controller's to expire, as in a real switch.
    let options = GoCcmOptions::new(&world.dir, &format!("ccm-{}", world.cluster_id));
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

    let (clb, nlb) = create_services(services).await;
    let clb_service = clb.metadata.name.clone().unwrap();
    let nlb_service = nlb.metadata.name.clone().unwrap();
    let mut hostnames = BTreeMap::new();
    for name in [&clb_service, &nlb_service] {
        go_until(
            &mut go,
            &format!("the Go controller to serve {name}"),
            90,
            async || {
                let svc = services.get(name).await.unwrap();
                ingress_hostname(&svc)
                    .map(|h| hostnames.insert(name.clone(), h))
                    .is_some()
            },
        )
        .await;
    }
    println!(
        "Go controller's AWS calls (through its proxy): {:?}",
        proxy.requests_by_action()
    );
    go.terminate().await.unwrap();
    let node_ports = |svc: &Service| -> Vec<i32> {
        let ports = svc
            .spec
            .as_ref()
            .and_then(|s| s.ports.clone())
            .unwrap_or_default();
        ports.iter().filter_map(|p| p.node_port).collect()
    };
    let clb_now = services.get(&clb_service).await.unwrap();
    let nlb_now = services.get(&nlb_service).await.unwrap();
    Served {
        clb: lb_name(&clb),
        nlb: lb_name(&nlb),
        clb_service,
        nlb_service,
        hostnames,
        clb_node_ports: node_ports(&clb_now),
        nlb_node_port: node_ports(&nlb_now)[0],
        node_group: node_group(&Aws::connect().await, &launched[0].id).await,
    }
}

/// What the takeover starts from: the Classic ELB with both listeners and every node, the NLB's target group
/// with every node.
fn assert_go_made(go_made: &Snapshot, served: &Served, launched: &[Launched]) {
    let mut ids: Vec<&str> = launched.iter().map(|l| l.id.as_str()).collect();
    ids.sort_unstable();
    let clb = |what: &str| go_made.get(&format!("clb {} {what}", served.clb));
    assert_eq!(clb("instances"), Some(&ids.join(",")), "{go_made:#?}");
    assert!(
        clb("listener 80").is_some() && clb("listener 443").is_some(),
        "{go_made:#?}"
    );
    let targets: Vec<&String> = go_made
        .iter()
        .filter(|(k, _)| k.starts_with("tg ") && k.ends_with(" targets"))
        .map(|(_, v)| v)
        .collect();
    let port = served.nlb_node_port;
    let expected: Vec<String> = ids.iter().map(|i| format!("{i}:{port}")).collect();
    assert_eq!(targets, [&expected.join(",")], "{go_made:#?}");
}

/// A Classic ELB Service with two ports and an NLB Service.
async fn create_services(services: &Api<Service>) -> (Service, Service) {
    let clb = common::lb::service(&ccm_testing::unique_name("go-clb"), &[80, 443], &BTreeMap::new());
    let nlb_name = ccm_testing::unique_name("go-nlb");
    let nlb = common::nlb::service(&nlb_name, &[(80, "TCP")], &BTreeMap::new());
    let clb = services.create(&PostParams::default(), &clb).await.unwrap();
    let nlb = services.create(&PostParams::default(), &nlb).await.unwrap();
    (clb, nlb)
}

/// Phase 2: ours starts on what the Go controller made; the resources' difference and ours' writes must be exactly
/// the takeover changes docs/migration-from-go.md announces.
async fn ours_takes_over(
    world: &World,
    ours_config: &std::path::Path,
    proxy: &FaultProxy,
    services: &Api<Service>,
    served: &Served,
    go_made: &Snapshot,
) -> Ccm {
    let aws = Aws::connect().await;
    let mut ccm = Ccm::start_with_config(world, ours_config, &["--controllers=cloud-node,service"]);
    // Up to 15 s of it is the Go controller's Lease expiring (1.20.2 does not release it when stopped).
    wait_synced(&mut ccm, 90).await;
    // A few more seconds of running: anything it would still change shows now.
    tokio::time::sleep(Duration::from_secs(10)).await;
    ccm.assert_running();
    let taken_over = aws.snapshot(&world.network.vpc_id).await;
    let changes = diff(go_made, &taken_over);
    let written = writes(proxy);
    println!("AWS resources, Go -> ours:\n{}", show(&changes));
    println!(
        "ours' writes on takeover {written:?}:\n{}",
        list_requests(proxy, &written)
    );

    let expected = expected_takeover(&aws, world, served, go_made).await;
    assert_eq!(
        changes,
        expected,
        "the takeover changed other things than the migration guide says\nactual:\n{}expected:\n{}ours' log:\n{}",
        show(&changes),
        show(&expected),
        ccm.log_text()
    );
    // What writes these changes, each once: tags on the Classic ELB's group (CreateTags) and the NLB's listener
    // (AddTags); the narrowed Classic rules (one Authorize for both ports, then one Revoke of the wide rule); one
    // Revoke of the NLB health rule. Nothing is created, modified or deleted on the load balancers themselves.
    let expected_writes: BTreeMap<String, u64> = [
        ("AddTags", 1),
        ("AuthorizeSecurityGroupIngress", 1),
        ("CreateTags", 1),
        ("RevokeSecurityGroupIngress", 2),
    ]
    .into_iter()
    .map(|(a, n)| (a.to_owned(), n))
    .collect();
    assert_eq!(
        written,
        expected_writes,
        "ours' writes on takeover:\n{}",
        list_requests(proxy, &written)
    );
    // No recreation (the diff above says so too; spelled out because it is the promise that matters most).
    let identity = [
        format!("clb {} dns", served.clb),
        format!("clb {} created", served.clb),
        format!("nlb {} arn", served.nlb),
        format!("nlb {} dns", served.nlb),
        format!("nlb {} created", served.nlb),
    ];
    for k in identity {
        assert!(go_made.contains_key(&k), "{k} was read");
        assert_eq!(go_made.get(&k), taken_over.get(&k), "{k}: no recreation");
    }
    for (name, hostname) in &served.hostnames {
        let svc = services.get(name).await.unwrap();
        assert_eq!(
            ingress_hostname(&svc).as_ref(),
            Some(hostname),
            "{name}'s hostname is kept"
        );
    }
    ccm
}

/// The changes the migration guide announces for this takeover, from what the Go controller made.
async fn expected_takeover(
    aws: &Aws,
    world: &World,
    served: &Served,
    go_made: &Snapshot,
) -> BTreeMap<String, Delta> {
    let managed = go_made
        .get(&format!("clb {} security-groups", served.clb))
        .cloned()
        .expect("the Classic ELB's managed group");
    let node_group = &served.node_group;
    let subnet_cidr = subnet_cidr(aws, world).await;
    let mut expected = BTreeMap::new();
    // "Classic ELB node rules are narrowed": the wide rule from the Classic ELB's group goes, one tcp rule per node
    // port (the health check's port is the first of them) comes, described with the load balancer's name.
    expected.insert(
        format!("sg {node_group} ingress -1 all from {managed}"),
        Delta::Removed(String::new()),
    );
    for port in &served.clb_node_ports {
        expected.insert(
            format!("sg {node_group} ingress tcp {port}-{port} from {managed}"),
            Delta::Added(format!("kubernetes.io/rule/elb={}", served.clb)),
        );
    }
    // Tags added, never removed: the Service's name on the Classic ELB's group (Go 1.20 tagged it with the cluster
    // tag only), and the NLB listener the Go controller left untagged ("The hardened IAM policy" bullet).
    let service = |name: &str| format!("default/{name}");
    expected.insert(
        format!("sg {managed} tag kubernetes.io/service-name"),
        Delta::Added(service(&served.clb_service)),
    );
    let listener = format!("nlb {} listener 80 tag", served.nlb);
    expected.insert(
        format!("{listener} {}", world.cluster_key()),
        Delta::Added("owned".to_owned()),
    );
    expected.insert(
        format!("{listener} kubernetes.io/service-name"),
        Delta::Added(service(&served.nlb_service)),
    );
    // Go 1.20.2 also allows health checks from the NLB's subnet on the node port, although its client rule
    // (0.0.0.0/0 on the same port) already does. Ours leaves such a covered health rule out (nlb::node_rules) and
    // so revokes the Go controller's as its own on the first sync. Harmless (the client rule still admits the
    // checks), now listed in docs/migration-from-go.md; the guide did not name this write before this test.
    let port = served.nlb_node_port;
    expected.insert(
        format!("sg {node_group} ingress tcp {port}-{port} from {subnet_cidr}"),
        Delta::Removed(format!("kubernetes.io/rule/nlb/health={}", served.nlb)),
    );
    expected
}

/// Phase 3: both Services deleted with ours running; the VPC is then as before the Go controller made anything.
async fn ours_deletes(
    ccm: &mut Ccm,
    proxy: &FaultProxy,
    services: &Api<Service>,
    served: &Served,
    world: &World,
    baseline: &Snapshot,
) {
    let before = writes(proxy);
    for name in [&served.clb_service, &served.nlb_service] {
        services.delete(name, &Default::default()).await.unwrap();
    }
    eventually(
        ccm,
        "both Services gone (ours removed the finalizers)",
        90,
        async || {
            let clb = services.get_opt(&served.clb_service).await.unwrap();
            let nlb = services.get_opt(&served.nlb_service).await.unwrap();
            clb.is_none() && nlb.is_none()
        },
    )
    .await;
    let deleted = writes_since(&before, &writes(proxy));
    println!(
        "ours' writes on deletion {deleted:?}:\n{}",
        list_requests(proxy, &deleted)
    );
    let aws = Aws::connect().await;
    let left = diff(baseline, &aws.snapshot(&world.network.vpc_id).await);
    assert!(
        left.is_empty(),
        "what the Go controller made is not all gone (difference from before it ran):\n{}",
        show(&left)
    );
    let tagged = common::nlb::Nlb(aws.v2.clone())
        .cluster_resources(&world.cluster_key())
        .await;
    assert!(
        tagged.is_empty(),
        "ELBv2 resources still tagged for the cluster: {tagged:?}"
    );
}

/// Waits until ours has synced both Services (two reconciles of its service controller).
async fn wait_synced(ccm: &mut Ccm, secs: u64) {
    let port = ccm.port;
    eventually(ccm, "ours to sync both Services", secs, async || {
        common::reconciles(port, "service-lb-controller").await >= 2.0
    })
    .await;
}

/// Polls `check` every 200 ms for up to `secs`; fails with the Go controller's log on timeout or exit.
async fn go_until(go: &mut GoCcm, what: &str, secs: u64, mut check: impl AsyncFnMut() -> bool) {
    for _ in 0..secs * 5 {
        if check().await {
            return;
        }
        go.check_running().unwrap_or_else(|e| panic!("{e}"));
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    panic!(
        "timed out after {secs} s waiting for {what}\nGo controller log:\n{}",
        go.log_tail()
    );
}

/// Provider ID, labels and addresses of the Nodes, as facts.
async fn node_facts(world: &World, launched: &[Launched]) -> Snapshot {
    let mut facts = Snapshot::new();
    for l in launched {
        let node: Node = world.nodes.get(&l.private_dns).await.unwrap();
        let name = &l.private_dns;
        let provider = node.spec.as_ref().and_then(|s| s.provider_id.clone());
        facts.insert(format!("node {name} providerID"), provider.unwrap_or_default());
        for (k, v) in node.metadata.labels.unwrap_or_default() {
            facts.insert(format!("node {name} label {k}"), v);
        }
        let addresses = node.status.and_then(|s| s.addresses).unwrap_or_default();
        for a in addresses {
            facts.insert(
                format!("node {name} address {} {}", a.type_, a.address),
                String::new(),
            );
        }
    }
    facts
}

/// The security group of the nodes' instances (moto gives each its VPC's default group, untagged: both
/// controllers then use it as the node group).
async fn node_group(aws: &Aws, instance: &str) -> String {
    let out = aws
        .ec2
        .describe_instances()
        .instance_ids(instance)
        .send()
        .await
        .unwrap();
    let instance = &out.reservations()[0].instances()[0];
    let groups = instance.security_groups();
    assert_eq!(groups.len(), 1, "one group per node instance: {groups:?}");
    groups[0].group_id().unwrap().to_owned()
}

async fn subnet_cidr(aws: &Aws, world: &World) -> String {
    let out = aws
        .ec2
        .describe_subnets()
        .subnet_ids(&world.network.subnet_id)
        .send()
        .await
        .unwrap();
    out.subnets()[0].cidr_block().unwrap().to_owned()
}

fn lb_name(svc: &Service) -> String {
    ccm_testing::load_balancers::name_for_uid(svc.metadata.uid.as_deref().unwrap())
}

/// Deletes every LoadBalancer Service an earlier, failed end-to-end run left (finalizers removed: no controller of
/// theirs runs any more; these tests run one at a time, so none is in use): the Go controller serves every such
/// Service of the apiserver, and would make load balancers for them in this test's VPC.
async fn delete_stale(client: kube::Client) {
    let all: Api<Service> = Api::all(client.clone());
    for svc in all.list(&Default::default()).await.unwrap() {
        let load_balancer = svc.spec.as_ref().and_then(|s| s.type_.as_deref()) == Some("LoadBalancer");
        let (Some(name), Some(namespace)) = (svc.metadata.name, svc.metadata.namespace) else {
            continue;
        };
        if !load_balancer {
            continue;
        }
        println!("deleting the stale LoadBalancer Service {namespace}/{name}");
        let services: Api<Service> = Api::namespaced(client.clone(), &namespace);
        let patch = json!({ "metadata": { "finalizers": null } });
        let _ = services
            .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await;
        let _ = services.delete(&name, &Default::default()).await;
    }
}
