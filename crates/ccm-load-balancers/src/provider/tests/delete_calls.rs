//! The AWS calls of one deletion, by operation, for each flavour (#58, item 6): the sandbox's case, a Service
//! whose load balancer, managed group (Classic ELB) or target group (NLB) and node rules (on the nodes' untagged
//! group) exist. Every read either flavour's deletion may make is answered and counted, so a call added to or
//! dropped from a deletion shows up here as a changed count.

use std::{
    collections::BTreeMap,
    sync::{Arc, Mutex},
};

use ccm_aws_api::{
    Filter, InstanceId,
    ec2::{Instance, InstanceState, IpPermission, IpRange},
    elbv2::{LoadBalancerV2, Target, TargetGroup, TargetHealth},
};

use super::*;

const NAME: &str = "a0f1e2d3c4b5a69788796a5b4c3d2e1f";

/// Calls by AWS operation.
#[derive(Clone, Default)]
struct Calls(Arc<Mutex<BTreeMap<&'static str, u32>>>);

impl Calls {
    fn count(&self, operation: &'static str) {
        *self.0.lock().unwrap().entry(operation).or_default() += 1;
    }

    fn take(&self) -> BTreeMap<&'static str, u32> {
        std::mem::take(&mut *self.0.lock().unwrap())
    }
}

fn has(filters: &[Filter], name: &str) -> Option<Vec<String>> {
    filters.iter().find(|f| f.name == name).map(|f| f.values.clone())
}

fn owned() -> Tags {
    Tags::from([
        ("kubernetes.io/cluster/c1".to_owned(), "owned".to_owned()),
        ("kubernetes.io/service-name".to_owned(), "prod/web".to_owned()),
    ])
}

/// The nodes' group (untagged, as in the sandbox) with the rules the load balancer of `flavour` made there.
fn node_group(nlb: bool) -> SecurityGroup {
    let mut g = SecurityGroup::new(SecurityGroupId::new("sg-node"), "nodes", None, Tags::new());
    g.ingress = if nlb {
        vec![IpPermission {
            protocol: "tcp".into(),
            from_port: Some(30080),
            to_port: Some(30080),
            ip_ranges: vec![IpRange {
                cidr: "0.0.0.0/0".into(),
                description: Some(format!("kubernetes.io/rule/nlb/client={NAME}")),
            }],
            ..IpPermission::default()
        }]
    } else {
        classic::node_rules::permissions(&SecurityGroupId::new("sg-lb"), &[30080], NAME)
    };
    g
}

/// EC2 answering both flavours' reads: the Classic ELB's managed group `sg-lb` by its name (when `classic`),
/// the rules from it on the nodes' group, the cluster's tagged groups (none) and the nodes' group by ID.
fn ec2(calls: &Calls, classic: bool, nlb: bool) -> MockEc2 {
    let mut ec2 = MockEc2::new();
    let c = calls.clone();
    ec2.expect_security_groups().returning(move |filters| {
        c.count("DescribeSecurityGroups");
        let managed = crate::shared::security_group_name(NAME);
        let found = if has(filters, "group-name") == Some(vec![managed.clone()]) && classic {
            vec![SecurityGroup::new(
                SecurityGroupId::new("sg-lb"),
                &managed,
                None,
                owned(),
            )]
        } else if has(filters, "ip-permission.group-id").is_some() && classic {
            vec![node_group(false)]
        } else if has(filters, "group-id") == Some(vec!["sg-node".to_owned()]) {
            vec![node_group(nlb)]
        } else {
            vec![]
        };
        Box::pin(async move { Ok(found) })
    });
    let c = calls.clone();
    ec2.expect_instances_by_id().returning(move |_| {
        c.count("DescribeInstances");
        let mut i = Instance::new(InstanceId::new("i-1"), InstanceState::Running);
        i.security_groups = vec![SecurityGroupId::new("sg-node")];
        Box::pin(async move { Ok(vec![i]) })
    });
    let c = calls.clone();
    ec2.expect_revoke_ingress().returning(move |_, _| {
        c.count("RevokeSecurityGroupIngress");
        Box::pin(async { Ok(()) })
    });
    let c = calls.clone();
    ec2.expect_delete_security_group().returning(move |_| {
        c.count("DeleteSecurityGroup");
        Box::pin(async { Ok(()) })
    });
    ec2
}

/// Classic ELB answering its reads: the Classic ELB `NAME` (using `sg-lb`, owned by the Service) when `exists`.
fn elb(calls: &Calls, exists: bool) -> MockElb {
    let mut elb = MockElb::new();
    let c = calls.clone();
    elb.expect_load_balancer().returning(move |n| {
        c.count("DescribeLoadBalancers");
        let mut lb = ClassicLoadBalancer::new(n, "web.us-east-1.elb.amazonaws.com");
        lb.security_groups = vec![SecurityGroupId::new("sg-lb")];
        lb.instances = vec![InstanceId::new("i-1")];
        Box::pin(async move { Ok(exists.then_some(lb)) })
    });
    let c = calls.clone();
    elb.expect_tags().returning(move |_| {
        c.count("DescribeTags");
        Box::pin(async { Ok(owned()) })
    });
    let c = calls.clone();
    elb.expect_delete_load_balancer().returning(move |_| {
        c.count("DeleteLoadBalancer");
        Box::pin(async { Ok(()) })
    });
    elb
}

/// ELBv2 answering its reads: the NLB `NAME` with one target group (`i-1` registered), both owned, when
/// `exists`; the region's target groups are that one (or none).
fn elbv2(calls: &Calls, exists: bool) -> MockElbv2 {
    let mut elbv2 = MockElbv2::new();
    let c = calls.clone();
    elbv2.expect_load_balancer().returning(move |n| {
        c.count("DescribeLoadBalancers");
        let lb = LoadBalancerV2::new("arn:lb", n, "web.elb.us-east-1.amazonaws.com");
        Box::pin(async move { Ok(exists.then_some(lb)) })
    });
    let c = calls.clone();
    elbv2.expect_all_target_groups().returning(move || {
        c.count("DescribeTargetGroups");
        let mut g = TargetGroup::new("arn:tg", "k8s-prod-web-0123456789", "TCP", 30080);
        g.load_balancer_arns = vec!["arn:lb".into()];
        Box::pin(async move { Ok(if exists { vec![g] } else { vec![] }) })
    });
    let c = calls.clone();
    elbv2.expect_tags().returning(move |arns| {
        c.count("DescribeTags");
        let tags: BTreeMap<String, Tags> = arns.iter().map(|a| (a.clone(), owned())).collect();
        Box::pin(async move { Ok(tags) })
    });
    let c = calls.clone();
    elbv2.expect_load_balancer_attributes().returning(move |_| {
        c.count("DescribeLoadBalancerAttributes");
        Box::pin(async { Ok(BTreeMap::new()) })
    });
    let c = calls.clone();
    elbv2.expect_target_health().returning(move |_| {
        c.count("DescribeTargetHealth");
        let health = TargetHealth {
            target: Target {
                id: InstanceId::new("i-1").into(),
                port: 30080,
            },
            state: "healthy".into(),
            reason: None,
        };
        Box::pin(async move { Ok(vec![health]) })
    });
    let c = calls.clone();
    elbv2.expect_delete_load_balancer().returning(move |_| {
        c.count("DeleteLoadBalancer");
        Box::pin(async { Ok(()) })
    });
    let c = calls.clone();
    elbv2.expect_delete_target_group().returning(move |_| {
        c.count("DeleteTargetGroup");
        Box::pin(async { Ok(()) })
    });
    elbv2
}

/// The calls of deleting the Service (of an NLB when `nlb`, else of a Classic ELB) whose load balancer is there, then
/// of the deletion repeated once it is gone (the service controller asks again after a crash).
async fn deletion(nlb: bool) -> (BTreeMap<&'static str, u32>, BTreeMap<&'static str, u32>) {
    let calls = Calls::default();
    // The instance as the ensure left it in the catalog (the sandbox's case: its deletion reads no instance).
    let catalog = Arc::new(InstanceCatalog::new());
    let mut node = Instance::new(InstanceId::new("i-1"), InstanceState::Running);
    node.security_groups = vec![SecurityGroupId::new("sg-node")];
    catalog.remember(&[node]);
    let lbs = AwsLoadBalancers::new(
        ec2(&calls, !nlb, nlb),
        elb(&calls, !nlb),
        elbv2(&calls, nlb),
        config(),
    )
    .with_instance_catalog(&catalog);
    let svc = if nlb {
        service(&[(Key::Type, "nlb")], &[(80, 30080)])
    } else {
        service(&[], &[(80, 30080)])
    };
    lbs.ensure_load_balancer_deleted("k", &svc).await.unwrap();
    let first = calls.take();
    let gone = AwsLoadBalancers::new(
        ec2(&calls, false, false),
        elb(&calls, false),
        elbv2(&calls, false),
        config(),
    );
    gone.ensure_load_balancer_deleted("k", &svc).await.unwrap();
    (first, calls.take())
}

fn counts(pairs: &[(&'static str, u32)]) -> BTreeMap<&'static str, u32> {
    pairs.iter().copied().collect()
}

/// A Classic ELB's deletion reads it, its tags (ownership), its managed group by name and the rules from that
/// group, revokes the rule on the nodes' group, deletes the ELB and the group: 7 calls (Go 1.20: 7, its
/// `GetLoadBalancer` first included, without the revocation: it leaves the rule on an untagged nodes' group).
/// The NLB side is not read (before #58: the NLB by name, the region's target groups and the NLB's managed
/// group, 10 calls).
#[tokio::test]
async fn a_classic_elbs_deletion_makes_seven_calls_and_no_nlb_read() {
    let (first, again) = deletion(false).await;
    assert_eq!(
        first,
        counts(&[
            ("DeleteLoadBalancer", 1),
            ("DeleteSecurityGroup", 1),
            ("DescribeLoadBalancers", 1),
            ("DescribeSecurityGroups", 2),
            ("DescribeTags", 1),
            ("RevokeSecurityGroupIngress", 1),
        ])
    );
    // Once it is gone (a crash after `DeleteLoadBalancer`), both flavours' leftovers are swept again.
    assert_eq!(
        again,
        counts(&[
            ("DescribeLoadBalancers", 2),
            ("DescribeSecurityGroups", 2),
            ("DescribeTargetGroups", 1),
        ])
    );
}

/// An NLB's deletion reads it, the region's target groups (its own and the Service's leftovers), their tags and
/// the NLB's (ownership, one call), its attributes (deletion protection), its targets and the nodes' groups
/// holding its rules (the cluster's tagged ones, among which its managed group would be, and the untagged one of
/// the target instance, known to the catalog since the ensure), revokes the rules, deletes the NLB and the target
/// group: 10 calls (11 when the catalog has to read the instance). Go 1.20: 6, its `GetLoadBalancer` first
/// included, with no ownership check, no protection check and the rules left on an untagged nodes' group. The
/// Classic side is not read, nor the managed group by name (before #58: the Classic ELB by name, both
/// flavours' managed groups by name, 13 calls).
#[tokio::test]
async fn an_nlbs_deletion_makes_ten_calls_and_no_classic_read() {
    let (first, again) = deletion(true).await;
    assert_eq!(
        first,
        counts(&[
            ("DeleteLoadBalancer", 1),
            ("DeleteTargetGroup", 1),
            ("DescribeLoadBalancerAttributes", 1),
            ("DescribeLoadBalancers", 1),
            ("DescribeSecurityGroups", 2),
            ("DescribeTags", 1),
            ("DescribeTargetGroups", 1),
            ("DescribeTargetHealth", 1),
            ("RevokeSecurityGroupIngress", 1),
        ])
    );
    assert_eq!(
        again,
        counts(&[
            ("DescribeLoadBalancers", 2),
            ("DescribeSecurityGroups", 2),
            ("DescribeTargetGroups", 1),
        ])
    );
}
