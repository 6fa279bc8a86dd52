//! What the takeover and rollback tests share on the cluster's side: the two Services each controller serves in
//! turn (a Classic ELB with two ports, an NLB), what was made for them, the Nodes as facts, and the waits for
//! each controller's work.
#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

use std::{collections::BTreeMap, time::Duration};

use ccm_testing::{
    FaultProxy, GoCcm, GoCcmOptions, GoCloudConfig, TestEnv, ec2::Launched, services::ingress_hostname,
};
use k8s_openapi::api::core::v1::{Node, Service};
use kube::{Api, api::PostParams};

use super::{Aws, Snapshot};
use crate::common::{self, Ccm, World, eventually, initialized};

/// What one controller made for the two Services.
pub struct Served {
    pub clb_service: String,
    pub nlb_service: String,
    /// The load balancers' names (`a` + UID), Classic and NLB.
    pub clb: String,
    pub nlb: String,
    /// Each Service's status hostname.
    pub hostnames: BTreeMap<String, String>,
    /// The Classic ELB's node ports and the NLB's.
    pub clb_node_ports: Vec<i32>,
    pub nlb_node_port: i32,
    /// The nodes' security group.
    pub node_group: String,
}

impl Served {
    /// Reads the Services `clb` and `nlb` (as created) again for their node ports, once both are served with
    /// `hostnames`.
    pub async fn read(
        services: &Api<Service>,
        clb: &Service,
        nlb: &Service,
        hostnames: BTreeMap<String, String>,
        launched: &[Launched],
    ) -> Self {
        let node_ports = |svc: &Service| -> Vec<i32> {
            let ports = svc
                .spec
                .as_ref()
                .and_then(|s| s.ports.clone())
                .unwrap_or_default();
            ports.iter().filter_map(|p| p.node_port).collect()
        };
        let clb_service = clb.metadata.name.clone().unwrap();
        let nlb_service = nlb.metadata.name.clone().unwrap();
        let clb_now = services.get(&clb_service).await.unwrap();
        let nlb_now = services.get(&nlb_service).await.unwrap();
        Self {
            clb: lb_name(clb),
            nlb: lb_name(nlb),
            clb_service,
            nlb_service,
            hostnames,
            clb_node_ports: node_ports(&clb_now),
            nlb_node_port: node_ports(&nlb_now)[0],
            node_group: node_group(&Aws::connect().await, &launched[0].id).await,
        }
    }

    /// Both Services' names.
    pub fn services(&self) -> [&String; 2] {
        [&self.clb_service, &self.nlb_service]
    }
}

/// A Classic ELB Service with two ports and an NLB Service.
pub async fn create_services(services: &Api<Service>) -> (Service, Service) {
    let clb = common::lb::service(&ccm_testing::unique_name("go-clb"), &[80, 443], &BTreeMap::new());
    let nlb_name = ccm_testing::unique_name("go-nlb");
    let nlb = common::nlb::service(&nlb_name, &[(80, "TCP")], &BTreeMap::new());
    let clb = services.create(&PostParams::default(), &clb).await.unwrap();
    let nlb = services.create(&PostParams::default(), &nlb).await.unwrap();
    (clb, nlb)
}

/// `name`'s status hostname, inserted into `hostnames`; whether it has one.
pub async fn has_hostname(
    services: &Api<Service>,
    name: &str,
    hostnames: &mut BTreeMap<String, String>,
) -> bool {
    let svc = services.get(name).await.unwrap();
    ingress_hostname(&svc)
        .map(|h| hostnames.insert(name.to_owned(), h))
        .is_some()
}

/// What any controller starts from: the Classic ELB with both listeners and every node, the NLB's target group
/// with every node.
pub fn assert_serving(facts: &Snapshot, served: &Served, launched: &[Launched]) {
    let mut ids: Vec<&str> = launched.iter().map(|l| l.id.as_str()).collect();
    ids.sort_unstable();
    let clb = |what: &str| facts.get(&format!("clb {} {what}", served.clb));
    assert_eq!(clb("instances"), Some(&ids.join(",")), "{facts:#?}");
    assert!(
        clb("listener 80").is_some() && clb("listener 443").is_some(),
        "{facts:#?}"
    );
    let targets: Vec<&String> = facts
        .iter()
        .filter(|(k, _)| k.starts_with("tg ") && k.ends_with(" targets"))
        .map(|(_, v)| v)
        .collect();
    let port = served.nlb_node_port;
    let expected: Vec<String> = ids.iter().map(|i| format!("{i}:{port}")).collect();
    assert_eq!(targets, [&expected.join(",")], "{facts:#?}");
}

/// No recreation between `before` and `after`: the load balancers' DNS names, ARN and creation times, the target
/// groups' ARNs and the Services' hostnames are kept. The diff of the two snapshots says so too; spelled out
/// because it is the promise that matters most.
pub async fn assert_not_recreated(
    before: &Snapshot,
    after: &Snapshot,
    served: &Served,
    services: &Api<Service>,
) {
    let mut identity = vec![
        format!("clb {} dns", served.clb),
        format!("clb {} created", served.clb),
        format!("nlb {} arn", served.nlb),
        format!("nlb {} dns", served.nlb),
        format!("nlb {} created", served.nlb),
    ];
    let groups = before
        .keys()
        .filter(|k| k.starts_with("tg ") && k.ends_with(" arn"));
    identity.extend(groups.cloned());
    for k in identity {
        assert!(before.contains_key(&k), "{k} was read");
        assert_eq!(before.get(&k), after.get(&k), "{k}: no recreation");
    }
    for (name, hostname) in &served.hostnames {
        let svc = services.get(name).await.unwrap();
        assert_eq!(
            ingress_hostname(&svc).as_ref(),
            Some(hostname),
            "{name}'s hostname is kept"
        );
    }
}

/// Waits until ours has synced both Services (two reconciles of its service controller).
pub async fn wait_synced(ccm: &mut Ccm, secs: u64) {
    let port = ccm.port;
    eventually(ccm, "ours to sync both Services", secs, async || {
        common::reconciles(port, "service-lb-controller").await >= 2.0
    })
    .await;
}

/// Polls `check` every 200 ms for up to `secs`; fails with the Go controller's log on timeout or exit.
pub async fn go_until(go: &mut GoCcm, what: &str, secs: u64, mut check: impl AsyncFnMut() -> bool) {
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

/// Starts the Go controller for `world` with `config` behind a proxy of its own and the Lease `lease`, and waits
/// until it leads and has initialised the `launched` Nodes: the controller and its proxy.
pub async fn go_initialises(
    world: &World,
    config: &GoCloudConfig,
    lease: &str,
    launched: &[Launched],
) -> (GoCcm, FaultProxy) {
    let env = TestEnv::get();
    let proxy = FaultProxy::start(&env.aws_endpoint).await.unwrap();
    let options = GoCcmOptions::new(&world.dir, lease);
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
    (go, proxy)
}

/// Provider ID, labels and addresses of the Nodes, as facts.
pub async fn node_facts(nodes: &Api<Node>, launched: &[Launched]) -> Snapshot {
    let mut facts = Snapshot::new();
    for l in launched {
        let node: Node = nodes.get(&l.private_dns).await.unwrap();
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
pub async fn node_group(aws: &Aws, instance: &str) -> String {
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

/// The CIDR of `subnet`.
pub async fn subnet_cidr(aws: &Aws, subnet: &str) -> String {
    let out = aws
        .ec2
        .describe_subnets()
        .subnet_ids(subnet)
        .send()
        .await
        .unwrap();
    out.subnets()[0].cidr_block().unwrap().to_owned()
}

pub fn lb_name(svc: &Service) -> String {
    ccm_testing::load_balancers::name_for_uid(svc.metadata.uid.as_deref().unwrap())
}

/// What both Go-peer tests start from: a world with a public subnet, no LoadBalancer Service left by an earlier run
/// (the Go controller would serve it), three instances with Nodes named by private DNS name (as the Go provider
/// requires), and an AWS reader. Fails, naming `CCM_TEST_GO_CCM`, when the environment has no Go controller: never
/// a silent skip.
pub struct Start {
    pub world: common::World,
    pub services: Api<Service>,
    pub launched: Vec<Launched>,
    pub aws: Aws,
}

impl Start {
    /// The Go provider's cloud config for this world (zone of the first instance), which ours reads too.
    pub fn go_config(&self) -> GoCloudConfig {
        let network = &self.world.network;
        GoCloudConfig::new(
            TestEnv::get(),
            &self.world.cluster_id,
            &network.vpc,
            network.subnet(),
            &self.launched[0].zone,
        )
    }
}

pub async fn start() -> Start {
    GoCcm::binary().unwrap_or_else(|e| panic!("{e}"));
    let world = common::World::new("").await;
    common::lb::public_subnet(&world).await;
    let client = ccm_testing::TestEnv::get().kube_client().await.unwrap();
    // The Go controller serves every LoadBalancer Service of the apiserver, and would make load balancers for any
    // an earlier, failed run left in this test's VPC (these tests run one at a time: none is in use).
    ccm_testing::services::force_delete_load_balancers(&client, None, None)
        .await
        .unwrap();
    let services: Api<Service> = Api::namespaced(client, "default");
    let launched = world.launch(3).await;
    for l in &launched {
        world.register_node(&l.private_dns, None).await;
    }
    let aws = Aws::connect().await;
    Start {
        world,
        services,
        launched,
        aws,
    }
}
