//! `doctor` against moto and the real apiserver: leaks planted for a Service that does not exist (an owned Classic
//! ELB and its group, an NLB, a target group, a node group rule referencing the leaked group) are all listed with
//! their reasons and removed by `delete`; a live Service's load balancer and group, and resources of another
//! cluster, `shared` or without the cluster tag, are never listed and survive; resources AWS still holds are
//! "in use" and go on the next run.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::too_many_lines)]

mod doctor_support;

use std::{collections::BTreeSet, convert::Infallible};

use ccm_aws::doctor::{self, EmptyCluster, Kind, Outcome, Scope};
use ccm_aws_api::{
    Ec2, Elb, Elbv2, Filter, SubnetId, VpcId,
    ec2::{IpPermission, IpRange},
    elbv2::{NewNetworkLoadBalancer, SubnetMapping},
};
use ccm_aws_sdk::{Adapter, AdapterOptions, RateLimits};
use ccm_load_balancers::shared::{load_balancer_name, security_group_name};
use ccm_tagging::ClusterTags;
use ccm_testing::{TestEnv, ec2, unique_name};
use doctor_support::{World, fake_lb_name, now, tags};
use k8s_openapi::api::core::v1::Service;
use kube::{
    Api,
    api::{DeleteParams, PostParams},
};
use serde_json::json;

#[tokio::test]
async fn planted_leaks_are_listed_and_deleted_and_nothing_else() {
    let env = TestEnv::get();
    let sdk = env.aws_config().await;
    let adapter = ccm_testing::ec2::adapter(&sdk, None);
    let raw = aws_sdk_ec2::Client::new(&sdk);
    let cluster_id = unique_name("doctor");
    let cluster_key = format!("kubernetes.io/cluster/{cluster_id}");
    let network = ccm_testing::world::World::builder(ec2::octet_for(&cluster_id))
        .subnet("us-east-1a", &[])
        .build(&raw)
        .await
        .unwrap();
    let client = env.kube_client().await.unwrap();
    let w = World {
        adapter,
        vpc: VpcId::new(&network.vpc),
        subnet: SubnetId::new(network.subnet()),
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
    // Its rules: one referencing the leaked group, an NLB client rule of an NLB that no longer exists, and the
    // operator's own SSH rule.
    let stale_nlb = fake_lb_name(&format!("{cluster_id}-stale"));
    let rule = |port: i32, description: Option<String>| IpPermission {
        ip_ranges: vec![IpRange {
            cidr: "10.0.0.0/8".into(),
            description,
        }],
        ..IpPermission::cidrs("tcp", port, port, Vec::<String>::new())
    };
    let rules = [
        IpPermission::all_from_group(leak_sg.clone()),
        rule(30080, Some(format!("kubernetes.io/rule/nlb/client={stale_nlb}"))),
        rule(22, None),
    ];
    w.adapter.ec2().authorize_ingress(&node_sg, &rules).await.unwrap();

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
    let report = doctor::inspect(w.ports(), &scope, &w.snapshot_without_nodes().await)
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
            (Kind::NodeGroupRules, format!("{node_sg} {stale_nlb}").as_str()),
        ]),
        "{report}"
    );
    for f in aws.iter().filter(|f| f.kind != Kind::NodeGroupRules) {
        assert_eq!(f.reason, format!("Service {gone_key} does not exist"), "{f}");
        assert_eq!(f.service.as_deref(), Some(gone_key.as_str()));
        assert!(f.deletable);
    }
    let group = aws.iter().find(|f| f.kind == Kind::SecurityGroup).unwrap();
    assert_eq!(
        group.details,
        [format!("rule of {node_sg}: all traffic from {leak_sg}")]
    );

    // Without Nodes (see `snapshot_without_nodes`) nothing shows that the apiserver is the cluster's: allowed.
    let outcome = doctor::delete(w.ports(), &scope, &report, EmptyCluster::Allow, || async {
        Ok::<_, Infallible>(w.snapshot_without_nodes().await)
    })
    .await
    .unwrap();
    assert_eq!(outcome.removals.len(), 5, "{outcome}");
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
    let left: Vec<&IpPermission> = node_group[0].ingress.iter().collect();
    assert_eq!(left, [&rule(22, None)], "only the operator's rule is left");
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
    let again = doctor::inspect(w.ports(), &scope, &w.snapshot_without_nodes().await)
        .await
        .unwrap();
    assert!(again.findings.iter().all(|f| !f.kind.is_aws()), "{again}");

    services
        .delete(&live_name, &DeleteParams::default())
        .await
        .unwrap();
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
    let network = ccm_testing::world::World::builder(ec2::octet_for(&cluster_id))
        .subnet("us-east-1a", &[])
        .build(&raw)
        .await
        .unwrap();
    let w = World {
        adapter: Adapter::new(&sdk, options),
        vpc: VpcId::new(&network.vpc),
        subnet: SubnetId::new(network.subnet()),
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
    // Without Nodes, and without the Service of the cluster's only load balancer: allowed.
    let fresh = || async { Ok::<_, Infallible>(w.snapshot_without_nodes().await) };
    let report = doctor::inspect(w.ports(), &scope, &w.snapshot_without_nodes().await)
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
    let outcome = doctor::delete(w.ports(), &scope, &report, EmptyCluster::Allow, fresh)
        .await
        .unwrap();
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
    let report = doctor::inspect(w.ports(), &scope, &w.snapshot_without_nodes().await)
        .await
        .unwrap();
    assert_eq!(report.deletable().count(), 2, "{report}");
    let outcome = doctor::delete(w.ports(), &scope, &report, EmptyCluster::Allow, fresh)
        .await
        .unwrap();
    assert!(
        outcome.removals.iter().all(|r| r.outcome == Outcome::Deleted),
        "{outcome}"
    );
    assert!(!w.group_exists(&sg).await);
    assert!(!w.target_group_exists(&tg_name).await);
}
