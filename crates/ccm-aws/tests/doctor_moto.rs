//! `doctor` against moto and the real apiserver: leaks planted for a Service that does not exist (an owned Classic
//! ELB and its group, an NLB, a target group, a node group rule referencing the leaked group) are all listed with
//! their reasons and removed by `delete`; a live Service's load balancer and group, and resources of another
//! cluster, `shared` or without the cluster tag, are never listed and survive.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::{
    collections::BTreeSet,
    convert::Infallible,
    hash::{DefaultHasher, Hash, Hasher},
    time::SystemTime,
};

use ccm_aws::doctor::{self, Kind, Outcome, Ports, Scope, Snapshot};
use ccm_aws_api::{
    Ec2, Elb, Elbv2, Filter, SecurityGroupId, SubnetId, Tags, VpcId,
    ec2::{IpPermission, NewSecurityGroup},
    elb::{ClassicListener, NewClassicLoadBalancer},
    elbv2::{NewNetworkLoadBalancer, NewTargetGroup, SubnetMapping, TargetGroupHealthCheck},
};
use ccm_aws_sdk::{Adapter, AdapterOptions, AwsEc2, AwsElb, AwsElbv2, RateLimits};
use ccm_load_balancers::shared::{load_balancer_name, security_group_name};
use ccm_tagging::ClusterTags;
use ccm_testing::{TestEnv, ec2, unique_name};
use k8s_openapi::api::core::v1::{Event, Node, Service};
use kube::{
    Api,
    api::{DeleteParams, ListParams, PostParams},
};
use serde_json::json;

/// A generated-looking load balancer name (`a` + 31 hex digits) that no Service's UID gives.
fn fake_lb_name(seed: &str) -> String {
    let mut out = String::from("a");
    for salt in 0..2u8 {
        let mut h = DefaultHasher::new();
        (seed, salt).hash(&mut h);
        out.push_str(&format!("{:016x}", h.finish()));
    }
    out.truncate(32);
    out
}

/// Ages are measured against moto's creation times, which are real time.
#[allow(clippy::disallowed_methods)]
fn now() -> SystemTime {
    SystemTime::now()
}

fn tags(pairs: &[(&str, &str)]) -> Tags {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

struct World {
    adapter: Adapter,
    vpc: VpcId,
    subnet: SubnetId,
    client: kube::Client,
}

impl World {
    fn ports(&self) -> Ports<'_, AwsEc2, AwsElb, AwsElbv2> {
        Ports {
            ec2: self.adapter.ec2(),
            elb: self.adapter.elb(),
            elbv2: self.adapter.elbv2(),
        }
    }

    async fn group(&self, name: &str, tags: Tags) -> SecurityGroupId {
        let group = NewSecurityGroup {
            name: name.to_owned(),
            description: "doctor test".into(),
            vpc_id: self.vpc.clone(),
            tags,
        };
        self.adapter.ec2().create_security_group(&group).await.unwrap()
    }

    async fn classic(&self, name: &str, group: &SecurityGroupId, tags: Tags) {
        let lb = NewClassicLoadBalancer {
            name: name.to_owned(),
            internal: false,
            subnets: vec![self.subnet.clone()],
            security_groups: vec![group.clone()],
            listeners: vec![ClassicListener::new("TCP", 80, "TCP", 30080)],
            tags,
        };
        self.adapter.elb().create_load_balancer(&lb).await.unwrap();
    }

    async fn target_group(&self, name: &str, tags: Tags) -> String {
        let group = NewTargetGroup {
            name: name.to_owned(),
            protocol: "TCP".into(),
            port: 30080,
            vpc_id: self.vpc.clone(),
            health_check: TargetGroupHealthCheck::default(),
            tags,
        };
        self.adapter
            .elbv2()
            .create_target_group(&group)
            .await
            .unwrap()
            .arn
    }

    async fn snapshot(&self) -> Snapshot {
        let lp = ListParams::default();
        Snapshot {
            services: Api::<Service>::all(self.client.clone())
                .list(&lp)
                .await
                .unwrap()
                .items,
            nodes: Api::<Node>::all(self.client.clone())
                .list(&lp)
                .await
                .unwrap()
                .items,
            events: Api::<Event>::all(self.client.clone())
                .list(&lp)
                .await
                .unwrap()
                .items,
        }
    }

    async fn group_exists(&self, id: &SecurityGroupId) -> bool {
        let filter = Filter::new("group-id", [id.as_str()]);
        !self
            .adapter
            .ec2()
            .security_groups(&[filter])
            .await
            .unwrap()
            .is_empty()
    }

    async fn target_group_exists(&self, name: &str) -> bool {
        self.adapter.elbv2().target_group(name).await.unwrap().is_some()
    }
}

#[tokio::test]
async fn planted_leaks_are_listed_and_deleted_and_nothing_else() {
    let env = TestEnv::get();
    let sdk = env.aws_config().await;
    let adapter = Adapter::new(
        &sdk,
        AdapterOptions::default().with_rate_limits(RateLimits::unlimited()),
    );
    let raw = aws_sdk_ec2::Client::new(&sdk);
    let cluster_id = unique_name("doctor");
    let cluster_key = format!("kubernetes.io/cluster/{cluster_id}");
    let network = ec2::network(&raw, ec2::octet_for(&cluster_id)).await.unwrap();
    let client = env.kube_client().await.unwrap();
    let w = World {
        adapter,
        vpc: VpcId::new(&network.vpc_id),
        subnet: SubnetId::new(&network.subnet_id),
        client: client.clone(),
    };
    let owned_for = |service: &str| tags(&[(&cluster_key, "owned"), ("kubernetes.io/service-name", service)]);

    // A live Service of type LoadBalancer, with its Classic ELB and managed group.
    let services: Api<Service> = Api::namespaced(client.clone(), "default");
    let live_name = unique_name("doctor-live");
    let live: Service = serde_json::from_value(json!({
        "metadata": { "name": live_name },
        "spec": { "type": "LoadBalancer", "ports": [{ "port": 80 }] },
    }))
    .unwrap();
    let live = services.create(&PostParams::default(), &live).await.unwrap();
    let live_key = format!("default/{live_name}");
    let live_lb = load_balancer_name(live.metadata.uid.as_deref().unwrap()).unwrap();
    let live_sg = w
        .group(&security_group_name(&live_lb), owned_for(&live_key))
        .await;
    w.classic(&live_lb, &live_sg, owned_for(&live_key)).await;

    // The leaks of a Service that does not exist, and a node group (owned, as installers tag them) whose rule
    // references the leaked group.
    let gone_key = format!("default/{}", unique_name("doctor-gone"));
    let leak_lb = fake_lb_name(&format!("{cluster_id}-classic"));
    let leak_sg = w
        .group(&security_group_name(&leak_lb), owned_for(&gone_key))
        .await;
    w.classic(&leak_lb, &leak_sg, owned_for(&gone_key)).await;
    let nlb_name = fake_lb_name(&format!("{cluster_id}-nlb"));
    let nlb = NewNetworkLoadBalancer {
        name: nlb_name.clone(),
        internal: false,
        subnet_mappings: vec![SubnetMapping {
            subnet_id: Some(w.subnet.clone()),
            ..SubnetMapping::default()
        }],
        security_groups: None,
        ip_address_type: None,
        tags: owned_for(&gone_key),
    };
    let leak_nlb = w.adapter.elbv2().create_load_balancer(&nlb).await.unwrap();
    let leak_tg_name = format!("k8s-{}", &fake_lb_name(&format!("{cluster_id}-tg"))[..20]);
    let leak_tg = w.target_group(&leak_tg_name, owned_for(&gone_key)).await;
    let node_sg = w
        .group(&unique_name("nodes"), tags(&[(&cluster_key, "owned")]))
        .await;
    let reference = IpPermission::all_from_group(leak_sg.clone());
    w.adapter
        .ec2()
        .authorize_ingress(&node_sg, std::slice::from_ref(&reference))
        .await
        .unwrap();

    // Resources named for the same missing Service that are not ours: another cluster's, shared, untagged.
    let other = tags(&[
        ("kubernetes.io/cluster/another-cluster", "owned"),
        ("kubernetes.io/service-name", &gone_key),
    ]);
    let shared = tags(&[
        (&cluster_key, "shared"),
        ("kubernetes.io/service-name", &gone_key),
    ]);
    let untagged = tags(&[("kubernetes.io/service-name", &gone_key)]);
    let foreign_lb = fake_lb_name(&format!("{cluster_id}-foreign"));
    let foreign_sg = w.group(&security_group_name(&foreign_lb), other.clone()).await;
    w.classic(&foreign_lb, &foreign_sg, other.clone()).await;
    let shared_sg = w
        .group(
            &security_group_name(&fake_lb_name(&format!("{cluster_id}-s"))),
            shared.clone(),
        )
        .await;
    let untagged_sg = w
        .group(
            &security_group_name(&fake_lb_name(&format!("{cluster_id}-u"))),
            untagged.clone(),
        )
        .await;
    let mut kept_tgs = Vec::new();
    for (suffix, t) in [("f", other), ("s", shared), ("u", untagged)] {
        let name = format!(
            "k8s-{}",
            &fake_lb_name(&format!("{cluster_id}-tg-{suffix}"))[..20]
        );
        w.target_group(&name, t).await;
        kept_tgs.push(name);
    }

    let scope =
        Scope::new(ClusterTags::new(&cluster_id, false).unwrap(), now()).with_vpc_id(Some(w.vpc.clone()));
    let report = doctor::inspect(w.ports(), &scope, &w.snapshot().await)
        .await
        .unwrap();
    let aws: Vec<_> = report.findings.iter().filter(|f| f.kind.is_aws()).collect();
    let listed: BTreeSet<(Kind, &str)> = aws.iter().map(|f| (f.kind, f.id.as_str())).collect();
    assert_eq!(
        listed,
        BTreeSet::from([
            (Kind::ClassicLoadBalancer, leak_lb.as_str()),
            (Kind::NetworkLoadBalancer, leak_nlb.arn.as_str()),
            (Kind::TargetGroup, leak_tg.as_str()),
            (Kind::SecurityGroup, leak_sg.as_str()),
        ]),
        "{report}"
    );
    for f in &aws {
        assert_eq!(f.reason, format!("Service {gone_key} does not exist"), "{f}");
        assert_eq!(f.service.as_deref(), Some(gone_key.as_str()));
        assert!(f.deletable);
    }
    let group = aws.iter().find(|f| f.kind == Kind::SecurityGroup).unwrap();
    assert_eq!(
        group.details,
        [format!("rule of {node_sg}: all traffic from {leak_sg}")]
    );

    let outcome = doctor::delete(w.ports(), &scope, &report, || async {
        Ok::<_, Infallible>(w.snapshot().await)
    })
    .await
    .unwrap();
    assert_eq!(outcome.removals.len(), 4, "{outcome}");
    assert!(
        outcome.removals.iter().all(|r| r.outcome == Outcome::Deleted),
        "{outcome}"
    );

    // The leaks are gone from moto, the node group's reference with them.
    assert!(w.adapter.elb().load_balancer(&leak_lb).await.unwrap().is_none());
    assert!(
        w.adapter
            .elbv2()
            .load_balancer(&nlb_name)
            .await
            .unwrap()
            .is_none()
    );
    assert!(!w.target_group_exists(&leak_tg_name).await);
    assert!(!w.group_exists(&leak_sg).await);
    let node_group = w
        .adapter
        .ec2()
        .security_groups(&[Filter::new("group-id", [node_sg.as_str()])])
        .await
        .unwrap();
    assert!(
        node_group[0]
            .ingress
            .iter()
            .all(|p| p.source_groups.iter().all(|s| s.group_id != leak_sg))
    );
    // Everything else survives.
    assert!(w.adapter.elb().load_balancer(&live_lb).await.unwrap().is_some());
    assert!(
        w.adapter
            .elb()
            .load_balancer(&foreign_lb)
            .await
            .unwrap()
            .is_some()
    );
    for id in [&live_sg, &foreign_sg, &shared_sg, &untagged_sg, &node_sg] {
        assert!(w.group_exists(id).await, "{id} was deleted");
    }
    for name in &kept_tgs {
        assert!(w.target_group_exists(name).await, "{name} was deleted");
    }
    // A second look finds nothing of the cluster's left.
    let again = doctor::inspect(w.ports(), &scope, &w.snapshot().await)
        .await
        .unwrap();
    assert!(again.findings.iter().all(|f| !f.kind.is_aws()), "{again}");

    services
        .delete(&live_name, &DeleteParams::default())
        .await
        .unwrap();
}

/// Routes of an owned route table: the one to a terminated instance is listed and removed, the one to a Node's
/// instance is not. A Node named neither by its instance ID nor by a private DNS name is stuck, and says why.
#[tokio::test]
async fn routes_to_terminated_instances_and_stuck_nodes_are_listed() {
    let env = TestEnv::get();
    let sdk = env.aws_config().await;
    let adapter = Adapter::new(
        &sdk,
        AdapterOptions::default().with_rate_limits(RateLimits::unlimited()),
    );
    let raw = aws_sdk_ec2::Client::new(&sdk);
    let cluster_id = unique_name("doctor-rt");
    let key = format!("kubernetes.io/cluster/{cluster_id}");
    let network = ec2::network(&raw, ec2::octet_for(&cluster_id)).await.unwrap();
    let launched = ec2::launch(&raw, &network, 2, &[(&key, "owned")]).await.unwrap();
    let table = raw
        .create_route_table()
        .vpc_id(&network.vpc_id)
        .send()
        .await
        .unwrap();
    let table = table.route_table().unwrap().route_table_id().unwrap().to_owned();
    let tag = aws_sdk_ec2::types::Tag::builder()
        .key(&key)
        .value("owned")
        .build();
    raw.create_tags()
        .resources(&table)
        .tags(tag)
        .send()
        .await
        .unwrap();
    for (cidr, instance) in [
        ("100.96.1.0/24", &launched[0].id),
        ("100.96.2.0/24", &launched[1].id),
    ] {
        raw.create_route()
            .route_table_id(&table)
            .destination_cidr_block(cidr)
            .instance_id(instance)
            .send()
            .await
            .unwrap();
    }
    raw.terminate_instances()
        .instance_ids(&launched[0].id)
        .send()
        .await
        .unwrap();

    let client = env.kube_client().await.unwrap();
    let nodes: Api<Node> = Api::all(client.clone());
    let (live, stuck) = (unique_name("doctor-node"), unique_name("doctor-custom"));
    for (name, spec) in [
        (
            &live,
            json!({ "providerID": format!("aws:///us-east-1a/{}", launched[1].id) }),
        ),
        (
            &stuck,
            json!({ "taints": [{ "key": doctor::UNINITIALIZED_TAINT, "effect": "NoSchedule" }] }),
        ),
    ] {
        let node: Node = serde_json::from_value(json!({
            "metadata": { "name": name, "labels": { "doctor-test": cluster_id } },
            "spec": spec,
        }))
        .unwrap();
        nodes.create(&PostParams::default(), &node).await.unwrap();
    }
    let w = World {
        adapter,
        vpc: VpcId::new(&network.vpc_id),
        subnet: SubnetId::new(&network.subnet_id),
        client,
    };
    let scope = Scope::new(ClusterTags::new(&cluster_id, false).unwrap(), now())
        .with_vpc_id(Some(w.vpc.clone()))
        .with_node_labels(vec![("doctor-test".into(), cluster_id.clone())]);
    let report = doctor::inspect(w.ports(), &scope, &w.snapshot().await)
        .await
        .unwrap();
    // Other tests' Services share the apiserver: only routes and Nodes are this test's.
    let ours: Vec<_> = report
        .findings
        .iter()
        .filter(|f| matches!(f.kind, Kind::Route | Kind::Node))
        .collect();
    let summary: Vec<(Kind, &str, bool)> = ours
        .iter()
        .map(|f| (f.kind, f.id.as_str(), f.deletable))
        .collect();
    let route_id = format!("{table} 100.96.1.0/24");
    assert_eq!(
        summary,
        [
            (Kind::Route, route_id.as_str(), true),
            (Kind::Node, stuck.as_str(), false)
        ],
        "{report}"
    );
    assert_eq!(
        report.findings[0].reason,
        format!("instance {} is terminated", launched[0].id)
    );
    assert!(
        report.findings[1].reason.starts_with(&format!(
            "uninitialized: no instance has private DNS name {stuck}"
        )),
        "{report}"
    );

    let outcome = doctor::delete(w.ports(), &scope, &report, || async {
        Ok::<_, Infallible>(w.snapshot().await)
    })
    .await
    .unwrap();
    assert_eq!(outcome.removals.len(), 1, "{outcome}");
    assert_eq!(outcome.removals[0].outcome, Outcome::Deleted, "{outcome}");
    let filter = Filter::new("route-table-id", [table.as_str()]);
    let tables = w.adapter.ec2().route_tables(&[filter]).await.unwrap();
    let cidrs: Vec<_> = tables[0]
        .routes
        .iter()
        .filter_map(|r| r.destination_cidr.as_deref())
        .collect();
    assert!(!cidrs.contains(&"100.96.1.0/24"), "{cidrs:?}");
    assert!(cidrs.contains(&"100.96.2.0/24"), "{cidrs:?}");

    for name in [&live, &stuck] {
        nodes.delete(name, &DeleteParams::default()).await.unwrap();
    }
}

/// AWS holding a group (`DependencyViolation`) or a target group (`ResourceInUse`) after its load balancer is
/// deleted, as real AWS does for minutes (moto never does; the fault proxy answers for it): both are "in use, run
/// again later", the load balancer is still deleted, and the next run removes them.
#[tokio::test]
async fn resources_aws_still_holds_are_in_use_and_go_on_the_next_run() {
    let env = TestEnv::get();
    let sdk = env.aws_config().await;
    let proxy = ccm_testing::FaultProxy::start(&env.aws_endpoint).await.unwrap();
    let options = AdapterOptions::default()
        .with_rate_limits(RateLimits::unlimited())
        .with_endpoint_url(proxy.url());
    let raw = aws_sdk_ec2::Client::new(&sdk);
    let cluster_id = unique_name("doctor-busy");
    let cluster_key = format!("kubernetes.io/cluster/{cluster_id}");
    let network = ec2::network(&raw, ec2::octet_for(&cluster_id)).await.unwrap();
    let w = World {
        adapter: Adapter::new(&sdk, options),
        vpc: VpcId::new(&network.vpc_id),
        subnet: SubnetId::new(&network.subnet_id),
        client: env.kube_client().await.unwrap(),
    };
    let gone = format!("default/{}", unique_name("doctor-gone"));
    let owned = tags(&[(&cluster_key, "owned"), ("kubernetes.io/service-name", &gone)]);
    let lb = fake_lb_name(&cluster_id);
    let sg = w.group(&security_group_name(&lb), owned.clone()).await;
    w.classic(&lb, &sg, owned.clone()).await;
    let tg_name = format!("k8s-{}", &fake_lb_name(&format!("{cluster_id}-tg"))[..20]);
    let tg = w.target_group(&tg_name, owned).await;

    let scope =
        Scope::new(ClusterTags::new(&cluster_id, false).unwrap(), now()).with_vpc_id(Some(w.vpc.clone()));
    let fresh = || async { Ok::<_, Infallible>(w.snapshot().await) };
    let report = doctor::inspect(w.ports(), &scope, &w.snapshot().await)
        .await
        .unwrap();
    assert_eq!(report.deletable().count(), 3, "{report}");
    let dependency = ccm_testing::Fault::error(400, "DependencyViolation");
    proxy.inject("DeleteSecurityGroup", dependency, 1);
    proxy.inject(
        "DeleteTargetGroup",
        ccm_testing::Fault::error(400, "ResourceInUse"),
        1,
    );
    let outcome = doctor::delete(w.ports(), &scope, &report, fresh).await.unwrap();
    let summary: Vec<(Kind, &str, Outcome)> = outcome
        .removals
        .iter()
        .map(|r| (r.kind, r.id.as_str(), r.outcome))
        .collect();
    assert_eq!(
        summary,
        [
            (Kind::ClassicLoadBalancer, lb.as_str(), Outcome::Deleted),
            (Kind::TargetGroup, tg.as_str(), Outcome::InUse),
            (Kind::SecurityGroup, sg.as_str(), Outcome::InUse),
        ],
        "{outcome}"
    );
    assert!(!outcome.has_failures());
    assert!(
        outcome.to_string().contains("still in use, run again later"),
        "{outcome}"
    );
    assert!(w.group_exists(&sg).await);
    assert!(w.target_group_exists(&tg_name).await);

    // The next run finds what is left and removes it.
    let report = doctor::inspect(w.ports(), &scope, &w.snapshot().await)
        .await
        .unwrap();
    assert_eq!(report.deletable().count(), 2, "{report}");
    let outcome = doctor::delete(w.ports(), &scope, &report, fresh).await.unwrap();
    assert!(
        outcome.removals.iter().all(|r| r.outcome == Outcome::Deleted),
        "{outcome}"
    );
    assert!(!w.group_exists(&sg).await);
    assert!(!w.target_group_exists(&tg_name).await);
}

/// A Service of type LoadBalancer whose latest Event is the service controller's Warning is listed with it; a
/// Service whose Warning was followed by success is not.
#[tokio::test]
async fn failing_load_balancer_services_are_listed_with_their_last_warning() {
    let env = TestEnv::get();
    let client = env.kube_client().await.unwrap();
    let namespace = unique_name("doctor-ns");
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
    let ns = serde_json::from_value(json!({ "metadata": { "name": namespace } })).unwrap();
    namespaces.create(&PostParams::default(), &ns).await.unwrap();
    let services: Api<Service> = Api::namespaced(client.clone(), &namespace);
    let events: Api<Event> = Api::namespaced(client.clone(), &namespace);
    for (name, outcome) in [("bad", "Warning"), ("ok", "Normal")] {
        let service = serde_json::from_value(json!({
            "metadata": { "name": name },
            "spec": { "type": "LoadBalancer", "ports": [{ "port": 80 }] },
        }))
        .unwrap();
        let service = services.create(&PostParams::default(), &service).await.unwrap();
        let object =
            json!({ "kind": "Service", "namespace": namespace, "name": name, "uid": service.metadata.uid });
        let warning = json!({
            "metadata": { "name": format!("{name}.1") },
            "involvedObject": object,
            "type": "Warning", "reason": "SyncLoadBalancerFailed", "count": 3,
            "message": "Error syncing load balancer: failed to ensure load balancer: AccessDenied",
            "firstTimestamp": "2026-01-01T00:00:00Z", "lastTimestamp": "2026-01-01T00:05:00Z",
        });
        let after = json!({
            "metadata": { "name": format!("{name}.2") },
            "involvedObject": object,
            "type": outcome, "reason": if outcome == "Normal" { "EnsuredLoadBalancer" } else { "SyncLoadBalancerFailed" },
            "message": "later", "lastTimestamp": "2026-01-01T00:10:00Z",
        });
        for event in [warning, after] {
            events
                .create(&PostParams::default(), &serde_json::from_value(event).unwrap())
                .await
                .unwrap();
        }
    }
    // `ok` has its address: its success came after its Warning.
    let status = json!({ "status": { "loadBalancer": { "ingress": [{ "hostname": "ok.elb.example" }] } } });
    services
        .patch_status("ok", &Default::default(), &kube::api::Patch::Merge(&status))
        .await
        .unwrap();

    let snapshot = Snapshot {
        services: Api::<Service>::all(client.clone())
            .list(&ListParams::default())
            .await
            .unwrap()
            .items,
        events: events.list(&ListParams::default()).await.unwrap().items,
        ..Snapshot::default()
    };
    let scope = Scope::new(ClusterTags::new(unique_name("doctor-svc"), false).unwrap(), now())
        .with_service_namespace(Some(namespace.clone()));
    let sdk = env.aws_config().await;
    let adapter = Adapter::new(
        &sdk,
        AdapterOptions::default().with_rate_limits(RateLimits::unlimited()),
    );
    let ports = Ports {
        ec2: adapter.ec2(),
        elb: adapter.elb(),
        elbv2: adapter.elbv2(),
    };
    let report = doctor::inspect(ports, &scope, &snapshot).await.unwrap();
    let summary: Vec<(Kind, &str, &str)> = report
        .findings
        .iter()
        .map(|f| (f.kind, f.id.as_str(), f.reason.as_str()))
        .collect();
    let bad = format!("{namespace}/bad");
    assert_eq!(
        summary,
        [(
            Kind::Service,
            bad.as_str(),
            "load balancer failing: SyncLoadBalancerFailed"
        )],
        "{report}"
    );
    assert_eq!(
        report.findings[0].details,
        ["last Warning Event SyncLoadBalancerFailed (1x, 2026-01-01T00:10:00Z): later"]
    );
    // No namespace controller runs here: the Services are deleted one by one.
    for name in ["bad", "ok"] {
        services.delete(name, &DeleteParams::default()).await.unwrap();
    }
    namespaces
        .delete(&namespace, &DeleteParams::default())
        .await
        .unwrap();
}
