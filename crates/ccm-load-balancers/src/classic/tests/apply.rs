//! Tests of observing and applying a Classic ELB against mocked ports.

use super::*;
use crate::Error;
use crate::flavour::LoadBalancerFlavour;
use crate::ownership::{Claim, Claimant, Purpose, claim};
use crate::shared::Rule;
use ccm_aws_api::Filter;
use ccm_aws_api::InstanceId;
use ccm_aws_api::SecurityGroupId;
use ccm_aws_api::SubnetId;
use ccm_aws_api::Tags;
use ccm_aws_api::ec2::SecurityGroup;
use ccm_aws_api::elb::ClassicAttributes;
use ccm_aws_api::elb::ClassicLoadBalancer;
use ccm_aws_api::elbv2::MockElbv2;

/// The kinds of `changes`, as their JSON names them (`delete_load_balancer`, ...).
fn kinds(changes: &[Change]) -> Vec<String> {
    let json = serde_json::to_value(changes).unwrap();
    let all = json.as_array().unwrap().iter();
    all.map(|c| c["change"].as_str().unwrap().to_owned()).collect()
}

fn err(kind: ErrorKind) -> AwsError {
    AwsError::new(kind, "test", "Op")
}

#[tokio::test]
async fn apply_creates_the_group_first_and_uses_its_id() {
    let desired = desired_for(&[], &[(80, 30080)], &["i-1"]);
    let changes = plan(&desired, &Observed::default());
    let mut ec2 = MockEc2::new();
    let mut elb = MockElb::new();
    let mut seq = mockall::Sequence::new();
    ec2.expect_create_security_group()
        .times(1)
        .in_sequence(&mut seq)
        .withf(|g| g.name == format!("k8s-elb-{NAME}") && g.vpc_id.as_str() == "vpc-1")
        .returning(|_| Box::pin(async { Ok(SecurityGroupId::new("sg-new")) }));
    ec2.expect_authorize_ingress()
        .times(1)
        .in_sequence(&mut seq)
        .withf(|g, perms| g.as_str() == "sg-new" && perms.len() == 2)
        .returning(|_, _| Box::pin(async { Ok(()) }));
    elb.expect_create_load_balancer()
        .times(1)
        .in_sequence(&mut seq)
        .withf(|lb| lb.security_groups == [SecurityGroupId::new("sg-new")] && lb.listeners.len() == 1)
        .returning(|_| Box::pin(async { Ok("new.us-east-1.elb.amazonaws.com".to_owned()) }));
    elb.expect_configure_health_check()
        .times(1)
        .in_sequence(&mut seq)
        .withf(|_, hc| hc.target == "TCP:30080")
        .returning(|_, _| Box::pin(async { Ok(()) }));
    elb.expect_register_instances()
        .times(1)
        .in_sequence(&mut seq)
        .withf(|n, ids| n == NAME && ids == [InstanceId::new("i-1")])
        .returning(|_, _| Box::pin(async { Ok(()) }));
    let applied = apply(&ec2, &elb, &config(), &Claim::assumed(NAME), None, &changes)
        .await
        .unwrap();
    assert_eq!(
        applied.created_dns_name.as_deref(),
        Some("new.us-east-1.elb.amazonaws.com")
    );
    assert_eq!(applied.mutations, 5);
}

#[tokio::test]
async fn apply_adopts_a_group_created_by_a_crashed_run_and_tolerates_duplicates() {
    let changes = vec![
        Change::CreateSecurityGroup {
            name: "k8s-elb-x".into(),
            description: "d".into(),
            tags: Tags::new(),
        },
        Change::AuthorizeIngress {
            group: GroupRef::Managed,
            rules: vec![
                Rule {
                    protocol: "tcp".into(),
                    from_port: 80,
                    to_port: 80,
                    source: "0.0.0.0/0".into(),
                },
                Rule {
                    protocol: "tcp".into(),
                    from_port: 81,
                    to_port: 81,
                    source: "0.0.0.0/0".into(),
                },
            ],
        },
        Change::CreatePolicy {
            name: PROXY_PROTOCOL_POLICY.into(),
            type_name: "ProxyProtocolPolicyType".into(),
            attributes: vec![],
        },
    ];
    let mut ec2 = MockEc2::new();
    let mut elb = MockElb::new();
    ec2.expect_create_security_group()
        .times(1)
        .returning(|_| Box::pin(async { Err(err(ErrorKind::AlreadyExists)) }));
    ec2.expect_security_groups().times(1).returning(|_| {
        Box::pin(async {
            Ok(vec![SecurityGroup::new(
                SecurityGroupId::new("sg-old"),
                "k8s-elb-x",
                None,
                Tags::new(),
            )])
        })
    });
    // The batch fails on a duplicate; then rule by rule, the duplicate skipped.
    ec2.expect_authorize_ingress()
        .times(1)
        .withf(|g, p| g.as_str() == "sg-old" && p.len() == 2)
        .returning(|_, _| Box::pin(async { Err(err(ErrorKind::AlreadyExists)) }));
    ec2.expect_authorize_ingress()
        .times(2)
        .withf(|g, p| g.as_str() == "sg-old" && p.len() == 1)
        .returning(|_, p| {
            let dup = p[0].from_port == Some(80);
            Box::pin(async move {
                if dup {
                    Err(err(ErrorKind::AlreadyExists))
                } else {
                    Ok(())
                }
            })
        });
    elb.expect_create_policy()
        .times(1)
        .returning(|_, _| Box::pin(async { Err(err(ErrorKind::AlreadyExists)) }));
    apply(&ec2, &elb, &config(), &Claim::assumed("x"), None, &changes)
        .await
        .unwrap();
}

#[tokio::test]
async fn apply_stops_at_the_first_failure_and_reports_a_group_in_use_as_retry() {
    let changes = vec![
        Change::DeleteLoadBalancer {
            name: "x".into(),
            recreate_because: None,
        },
        Change::DeleteSecurityGroup { group: "sg-1".into() },
        Change::DeleteSecurityGroup { group: "sg-2".into() },
    ];
    let mut ec2 = MockEc2::new();
    let mut elb = MockElb::new();
    elb.expect_delete_load_balancer()
        .times(1)
        .returning(|_| Box::pin(async { Ok(()) }));
    ec2.expect_delete_security_group()
        .times(1)
        .returning(|_| Box::pin(async { Err(err(ErrorKind::Conflict).with_code("DependencyViolation")) }));
    let e = apply(&ec2, &elb, &config(), &Claim::assumed("x"), None, &changes)
        .await
        .unwrap_err();
    assert!(matches!(e, Error::GroupInUse { .. }), "{e}");
    let cloud: ccm_cloud_provider::CloudError = e.into();
    assert_eq!(cloud.retry_delay(), Some(std::time::Duration::from_secs(10)));
    let waiting = cloud.waiting_for().expect("a wait, not a failure");
    assert!(
        waiting.contains("sg-1") && waiting.contains("release"),
        "{waiting}"
    );
}

fn observing_mocks(group_tag: &'static str) -> (MockEc2, MockElb) {
    let mut ec2 = MockEc2::new();
    let mut elb = MockElb::new();
    elb.expect_load_balancer().returning(|n| {
        let lb = ClassicLoadBalancer::new(n, "dns");
        Box::pin(async move { Ok(Some(lb)) })
    });
    elb.expect_tags().returning(|_| {
        let owned: Tags = [("kubernetes.io/cluster/c1".to_owned(), "owned".to_owned())].into();
        Box::pin(async move { Ok(owned) })
    });
    elb.expect_attributes()
        .returning(|_| Box::pin(async { Ok(ClassicAttributes::default()) }));
    ec2.expect_security_groups().times(1).returning(move |filters| {
        assert_eq!(filters[0], Filter::new("group-name", [format!("k8s-elb-{NAME}")]));
        let tags: Tags = [("kubernetes.io/cluster/c1".to_owned(), group_tag.to_owned())].into();
        Box::pin(async move {
            Ok(vec![SecurityGroup::new(
                SecurityGroupId::new("sg-1"),
                &format!("k8s-elb-{NAME}"),
                None,
                tags,
            )])
        })
    });
    (ec2, elb)
}

#[tokio::test]
async fn observe_reads_only_the_policies_it_wants() {
    let mut desired = desired_for(&[(Key::ProxyProtocol, "*")], &[(80, 30080)], &[]);
    desired.manage_node_rules = false;
    let (ec2, mut elb) = observing_mocks("owned");
    elb.expect_policies()
        .times(1)
        .withf(|_, names| names == [PROXY_PROTOCOL_POLICY.to_owned()])
        .returning(|_, _| Box::pin(async { Err(err(ErrorKind::NotFound)) }));
    let observed = observe(
        &crate::instance_reads::uncached(ec2),
        &elb,
        &MockElbv2::new(),
        &config(),
        &desired,
        Scope::Full,
    )
    .await
    .unwrap();
    assert!(observed.policies.is_empty());
    assert_eq!(observed.managed_group.unwrap().id.as_str(), "sg-1");
    assert!(observed.node_groups.is_none());
}

#[tokio::test]
async fn the_gate_refuses_a_load_balancer_of_another_cluster_that_observe_found() {
    let mut desired = desired_for(&[], &[(80, 30080)], &[]);
    desired.manage_node_rules = false;
    let (ec2, mut elb) = observing_mocks("owned");
    elb.checkpoint();
    elb.expect_load_balancer().returning(|n| {
        let lb = ClassicLoadBalancer::new(n, "dns");
        Box::pin(async move { Ok(Some(lb)) })
    });
    elb.expect_tags().returning(|_| {
        let foreign: Tags = [("kubernetes.io/cluster/c2".to_owned(), "owned".to_owned())].into();
        Box::pin(async move { Ok(foreign) })
    });
    elb.expect_attributes()
        .returning(|_| Box::pin(async { Ok(ClassicAttributes::default()) }));
    elb.expect_policies()
        .returning(|_, _| Box::pin(async { Ok(Vec::new()) }));
    let observed = observe(
        &crate::instance_reads::uncached(ec2),
        &elb,
        &MockElbv2::new(),
        &config(),
        &desired,
        Scope::Full,
    )
    .await
    .unwrap();
    // Observe reads; the claim made from what it found refuses (no plan can be applied without one).
    let found = crate::flavour::Classic::found(&observed);
    let claimant = Claimant::new(&desired.name, "prod/web", "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0");
    let e = claim(&config(), &claimant, found, Purpose::Serve).unwrap_err();
    assert!(matches!(e, crate::Error::NotOurs(_)), "{e}");
    assert!(e.to_string().contains("kubernetes.io/cluster/c2=owned"), "{e}");
}

#[tokio::test]
async fn observe_refuses_a_group_of_another_cluster() {
    let mut desired = desired_for(&[], &[(80, 30080)], &[]);
    desired.manage_node_rules = false;
    let (ec2, elb) = observing_mocks("other");
    let e = observe(
        &crate::instance_reads::uncached(ec2),
        &elb,
        &MockElbv2::new(),
        &config(),
        &desired,
        Scope::Full,
    )
    .await
    .unwrap_err();
    assert!(matches!(e, crate::Error::ForeignGroup { .. }), "{e}");
    assert!(
        e.to_string().contains("kubernetes.io/cluster/c1=other"),
        "names the tag: {e}"
    );
}

#[test]
fn terminated_or_unknown_instances_are_not_registered() {
    let desired = desired_for(&[], &[(80, 30080)], &["i-1", "i-2", "i-gone"]);
    let mut observed = converged(&desired_for(&[], &[(80, 30080)], &["i-1"]));
    observed.existing_instances = Some(["i-1".to_owned(), "i-2".to_owned()].into());
    assert_eq!(
        plan(&desired, &observed),
        vec![Change::RegisterInstances {
            instances: vec!["i-2".into()]
        }]
    );
}

#[test]
fn switching_to_given_groups_retires_the_managed_group() {
    let managed = desired_for(&[], &[(80, 30080)], &[]);
    let mut observed = converged(&managed);
    observed.managed_group = None;
    observed.orphaned_group = Some(OrphanedGroup {
        id: SecurityGroupId::new("sg-lb"),
        referenced_by: vec![(SecurityGroupId::new("sg-node"), vec![super::wide_rule()])],
    });
    observed.node_groups = None;
    let byo = desired_for(&[(Key::SecurityGroups, "sg-mine")], &[(80, 30080)], &[]);
    assert_eq!(
        serde_json::to_value(plan(&byo, &observed)).unwrap(),
        json!([
            {"change": "apply_security_groups", "groups": [{"Id": "sg-mine"}]},
            {"change": "revoke_node_access", "group": "sg-node", "from": {"Id": "sg-lb"},
             "rules": [{"protocol": "-1", "from_port": null, "to_port": null}]},
            {"change": "delete_security_group", "group": "sg-lb"}
        ])
    );
    // Named explicitly by the annotation: kept.
    let named = desired_for(&[(Key::SecurityGroups, "sg-lb")], &[(80, 30080)], &[]);
    assert_eq!(plan(&named, &observed), vec![]);
}

#[test]
fn replacing_every_subnet_attaches_first() {
    let desired = desired_for(&[], &[(80, 30080)], &[]);
    let mut observed = converged(&desired);
    observed.load_balancer.as_mut().unwrap().subnets = vec![SubnetId::new("subnet-old")];
    assert_eq!(
        plan(&desired, &observed),
        vec![
            Change::AttachSubnets {
                subnets: vec!["subnet-a".into(), "subnet-b".into()]
            },
            Change::DetachSubnets {
                subnets: vec!["subnet-old".into()]
            },
        ]
    );
}

#[tokio::test]
async fn apply_resolves_the_managed_group_to_the_observed_id() {
    let changes = vec![
        Change::ApplySecurityGroups {
            groups: vec![GroupRef::Managed, GroupRef::Id("sg-x".into())],
        },
        Change::AuthorizeNodeAccess {
            group: "sg-node".into(),
            from: GroupRef::Managed,
            ports: vec![30080],
        },
        Change::RevokeNodeAccess {
            group: "sg-old".into(),
            from: GroupRef::Managed,
            rules: vec![super::wide_rule()],
        },
    ];
    let mut ec2 = MockEc2::new();
    let mut elb = MockElb::new();
    elb.expect_apply_security_groups()
        .times(1)
        .withf(|n, g| n == "x" && g == [SecurityGroupId::new("sg-m"), SecurityGroupId::new("sg-x")])
        .returning(|_, _| Box::pin(async { Ok(()) }));
    // A duplicate (a crashed run made it) is retried alone and taken as done; so is a rule gone already.
    ec2.expect_authorize_ingress()
        .times(2)
        .withf(|g, p| {
            g.as_str() == "sg-node"
                && p.len() == 1
                && p[0].protocol == "tcp"
                && (p[0].from_port, p[0].to_port) == (Some(30080), Some(30080))
                && p[0].source_groups[0].group_id.as_str() == "sg-m"
                && p[0].source_groups[0].description.as_deref() == Some("kubernetes.io/rule/elb=x")
        })
        .returning(|_, _| Box::pin(async { Err(err(ErrorKind::AlreadyExists)) }));
    ec2.expect_revoke_ingress()
        .times(2)
        .withf(|g, p| {
            g.as_str() == "sg-old"
                && p[0].protocol == "-1"
                && p[0].source_groups[0].group_id.as_str() == "sg-m"
        })
        .returning(|_, _| Box::pin(async { Err(err(ErrorKind::NotFound)) }));
    let applied = apply(
        &ec2,
        &elb,
        &config(),
        &Claim::assumed("x"),
        Some(SecurityGroupId::new("sg-m")),
        &changes,
    )
    .await
    .unwrap();
    assert_eq!(
        applied.mutations, 3,
        "an existing rule and a missing one are both fine"
    );

    // Without the group (it was never created), nothing is sent.
    let e = apply(
        &MockEc2::new(),
        &MockElb::new(),
        &config(),
        &Claim::assumed("x"),
        None,
        &changes[..1],
    )
    .await
    .unwrap_err();
    assert!(e.to_string().contains("k8s-elb-x"), "{e}");
}

#[test]
fn a_scheme_change_recreates_an_owned_classic_elb_and_says_so() {
    let public = desired_for(&[], &[(80, 30080)], &["i-1"]);
    let consent = [(Key::Internal, "true"), (Key::AllowRecreation, "true")];
    let internal = desired_for(&consent, &[(80, 30080)], &["i-1"]);
    let observed = converged(&public);
    let changes = plan(&internal, &observed);
    assert_eq!(
        kinds(&changes),
        [
            "delete_load_balancer",
            "create_load_balancer",
            "configure_health_check",
            "register_instances"
        ],
        "the group and the nodes' rules are kept; fresh attributes already match: {changes:?}"
    );
    assert!(matches!(
        &changes[1],
        Change::CreateLoadBalancer { internal: true, .. }
    ));
    let message = recreation(NAME, &changes).unwrap();
    assert!(
        message.contains("scheme internet-facing -> internal") && message.contains("DNS name changes"),
        "{message}"
    );
    // Steady afterwards; and a plain deletion is no recreation.
    assert_eq!(plan(&internal, &converged(&internal)), []);
    assert_eq!(recreation(NAME, &plan(&public, &observed)), None);

    // A load balancer this cluster does not own keeps its scheme (and is otherwise reconciled as before).
    let mut foreign = observed;
    foreign.owned = Some(false);
    assert_eq!(plan(&internal, &foreign), []);
    // Nor is one whose tags were not read (a node update).
    foreign.owned = None;
    assert_eq!(plan(&internal, &foreign), []);
}

#[test]
fn without_consent_a_scheme_change_keeps_the_classic_elb_and_applies_the_rest() {
    let public = desired_for(&[], &[(80, 30080)], &["i-1"]);
    let mut observed = converged(&public);
    observed.load_balancer.as_mut().unwrap().subnets = vec![SubnetId::new("subnet-public")];
    // The internal scheme discovers other subnets; an idle timeout changes too.
    let wanted = [(Key::Internal, "true"), (Key::ConnectionIdleTimeout, "120")];
    let mut internal = desired_for(&wanted, &[(80, 30080)], &["i-1"]);
    internal.subnets = vec!["subnet-private".to_owned()];
    let changes = plan(&internal, &observed);
    assert_eq!(
        changes[0],
        Change::RecreationWithheld {
            name: NAME.to_owned(),
            reason: "scheme internet-facing -> internal".to_owned(),
        }
    );
    assert_eq!(recreation(NAME, &changes), None, "nothing is deleted");
    // The attribute in place; the subnets it serves from are kept (no attach or detach).
    assert_eq!(kinds(&changes[1..]), ["modify_attributes"], "{changes:?}");
    // The dry run (lb-plan, the controller's dry run) says the load balancer is kept, and why.
    use crate::flavour::{Classic, LoadBalancerFlavour};
    let spec = parse_service(&service(&wanted, &[(80, 30080)])).unwrap();
    let run = Classic::dry_run(spec, internal, changes);
    let withheld = crate::Recreation {
        replaces: false,
        reason: "scheme internet-facing -> internal".to_owned(),
    };
    assert_eq!(run.recreation, Some(withheld));
    let printed = run.to_string();
    assert!(
        printed.contains("KEEPS the load balancer: scheme internet-facing -> internal"),
        "{printed}"
    );

    // With the cluster-wide flag the same change recreates it.
    let spec = parse_service(&service(&wanted, &[(80, 30080)])).unwrap();
    let allowed = build(&spec, &[], &config().with_recreation_allowed(true), &[]).unwrap();
    assert!(allowed.allow_recreation);
    let changes = plan(&allowed, &observed);
    assert!(recreation(NAME, &changes).is_some());
    let run = Classic::dry_run(spec, allowed, changes);
    assert_eq!(run.recreation.as_ref().map(|r| r.replaces), Some(true));
    assert!(run.to_string().contains("REPLACES the load balancer"), "{run}");
}

#[test]
fn a_managed_group_made_by_another_controller_is_taken_over_without_a_write_unless_untagged() {
    // The Go controller tags its groups with the cluster tag only: taken over without a write (the UID comes with
    // the next change of its tags). Without a cluster ID it tags nothing: the group then gets this Service's tags,
    // `owned` included, so that the Service's deletion finds it.
    let desired = desired_for(&[], &[(80, 30080)], &["i-1"]);
    let mut observed = converged(&desired);
    let group = observed.managed_group.as_mut().unwrap();
    group.tags.retain(|k, _| k.starts_with("kubernetes.io/cluster/"));
    assert_eq!(group.tags.len(), 1);
    assert_eq!(plan(&desired, &observed), []);
    observed.managed_group.as_mut().unwrap().tags.clear();
    let changes = plan(&desired, &observed);
    let [Change::TagSecurityGroup { add, remove }] = changes.as_slice() else {
        panic!("one tagging of the group: {changes:?}");
    };
    assert!(remove.is_empty());
    assert_eq!(add["kubernetes.io/service-name"], "prod/web");
    assert_eq!(
        add["kubernetes.io/service-uid"],
        "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"
    );
    assert_eq!(add["kubernetes.io/cluster/c1"], "owned");
}
