//! Tests of observing and applying against mocked ports, and of deletion.

use super::*;
use crate::Error;
use crate::flavour::LoadBalancerFlavour;
use crate::ownership::{Claim, Claimant};
use crate::spec::IpAddressType;
use ccm_aws_api::SubnetId;
use ccm_aws_api::Tags;
use ccm_aws_api::elb::MockElb;
use ccm_aws_api::elbv2::ListenerV2;
use ccm_aws_api::elbv2::LoadBalancerV2;
use ccm_aws_api::elbv2::SubnetMapping;
use ccm_aws_api::elbv2::TargetGroup;
use std::collections::BTreeMap;
use std::collections::BTreeSet;

fn err(kind: ErrorKind) -> AwsError {
    AwsError::new(kind, "elasticloadbalancingv2", "Test")
}

#[tokio::test]
async fn apply_adopts_a_target_group_created_by_a_crashed_run_and_uses_created_arns() {
    let d = desired(&[], &[(80, 30080)]);
    let tg_name = d.listeners[0].target_group.name.clone();
    let mut elbv2 = MockElbv2::new();
    elbv2
        .expect_create_target_group()
        .times(1)
        .returning(|_| Box::pin(async { Err(err(ErrorKind::AlreadyExists)) }));
    elbv2.expect_target_group().times(1).returning(|name| {
        let g = TargetGroup::new("arn:tg-adopted", name, "TCP", 30080);
        Box::pin(async move { Ok(Some(g)) })
    });
    elbv2
        .expect_register_targets()
        .withf(|arn, targets| arn == "arn:tg-adopted" && targets.len() == 2)
        .times(1)
        .returning(|_, _| Box::pin(async { Ok(()) }));
    elbv2.expect_create_load_balancer().times(1).returning(|lb| {
        let created = LoadBalancerV2::new("arn:lb-new", &lb.name, "new.elb.amazonaws.com");
        Box::pin(async move { Ok(created) })
    });
    elbv2
        .expect_create_listener()
        .withf(|l| l.load_balancer_arn == "arn:lb-new" && l.target_group_arn == "arn:tg-adopted")
        .times(1)
        .returning(|l| {
            let created = ListenerV2::new(
                "arn:l",
                &l.load_balancer_arn,
                l.port,
                &l.protocol,
                &l.target_group_arn,
            );
            Box::pin(async move { Ok(created) })
        });
    let changes = plan(&d, &Observed::default());
    assert!(changes.iter().any(
        |c| matches!(c, Change::CreateTargetGroup { target_group, .. } if target_group.name == tg_name)
    ));
    let applied = apply(
        &MockEc2::new(),
        &elbv2,
        &config(),
        &Claim::assumed(NAME),
        &Observed::default(),
        &changes,
    )
    .await
    .unwrap();
    assert_eq!(applied.created.unwrap().dns_name, "new.elb.amazonaws.com");
    assert_eq!(applied.mutations, 4);
}

/// A listener AWS refuses (`InvalidConfigurationRequest`, classed as `Conflict` before) fails the apply: no
/// address, no `EnsuredLoadBalancer`, AWS's words in the error. Only `DuplicateListener` is taken as done.
#[tokio::test]
async fn a_refused_listener_fails_the_apply_and_only_a_duplicate_is_done() {
    let d = desired(&[], &[(80, 30080)]);
    let refusal = || {
        err(ErrorKind::Invalid)
            .with_code("InvalidConfigurationRequest")
            .with_message("The target group is associated with another load balancer")
    };
    for (answer, fails) in [
        (refusal(), true),
        (
            err(ErrorKind::AlreadyExists).with_code("DuplicateListener"),
            false,
        ),
    ] {
        let mut elbv2 = MockElbv2::new();
        elbv2.expect_create_target_group().returning(|g| {
            let created = TargetGroup::new("arn:tg", &g.name, "TCP", 30080);
            Box::pin(async move { Ok(created) })
        });
        elbv2
            .expect_register_targets()
            .returning(|_, _| Box::pin(async { Ok(()) }));
        elbv2.expect_create_load_balancer().returning(|lb| {
            let created = LoadBalancerV2::new("arn:lb-new", &lb.name, "new.elb.amazonaws.com");
            Box::pin(async move { Ok(created) })
        });
        let answer = std::sync::Mutex::new(Some(answer));
        elbv2.expect_create_listener().times(1).returning(move |_| {
            let e = answer.lock().unwrap().take().unwrap();
            Box::pin(async move { Err(e) })
        });
        let changes = plan(&d, &Observed::default());
        let result = apply(
            &MockEc2::new(),
            &elbv2,
            &config(),
            &Claim::assumed(NAME),
            &Observed::default(),
            &changes,
        )
        .await;
        match result {
            Err(e) => {
                assert!(fails, "a duplicate is done: {e}");
                let text = format!(
                    "{e}: {}",
                    std::error::Error::source(&e)
                        .map(ToString::to_string)
                        .unwrap_or_default()
                );
                assert!(text.contains("InvalidConfigurationRequest"), "{text}");
            }
            Ok(_) => assert!(!fails, "a refused listener was reported as served"),
        }
    }
}

#[tokio::test]
async fn a_managed_group_still_in_use_is_retried_later() {
    let mut ec2 = MockEc2::new();
    ec2.expect_delete_security_group().times(1).returning(|_| {
        Box::pin(async { Err(AwsError::new(ErrorKind::Conflict, "ec2", "DeleteSecurityGroup")) })
    });
    let e = apply(
        &ec2,
        &MockElbv2::new(),
        &config(),
        &Claim::assumed(NAME),
        &Observed::default(),
        &[Change::DeleteSecurityGroup { group: "sg-m".into() }],
    )
    .await
    .unwrap_err();
    assert!(matches!(e, Error::GroupInUse { .. }), "{e}");
    let cloud: ccm_cloud_provider::CloudError = e.into();
    let waiting = cloud.waiting_for().expect("a wait, not a failure");
    assert!(waiting.contains("sg-m"), "{waiting}");
}

#[tokio::test]
async fn a_target_group_still_in_use_is_waited_for() {
    let mut elbv2 = MockElbv2::new();
    elbv2.expect_delete_target_group().times(1).returning(|_| {
        Box::pin(async {
            Err(
                AwsError::new(ErrorKind::Conflict, "elasticloadbalancing", "DeleteTargetGroup")
                    .with_code("ResourceInUse"),
            )
        })
    });
    let e = apply(
        &MockEc2::new(),
        &elbv2,
        &config(),
        &Claim::assumed(NAME),
        &Observed::default(),
        &[Change::DeleteTargetGroup {
            name: "k8s-tg".into(),
            arn: "arn:tg".into(),
        }],
    )
    .await
    .unwrap_err();
    assert!(matches!(e, Error::TargetGroupInUse { .. }), "{e}");
    let cloud: ccm_cloud_provider::CloudError = e.into();
    let waiting = cloud.waiting_for().expect("a wait, not a failure");
    assert!(waiting.contains("k8s-tg"), "{waiting}");
}

#[tokio::test]
async fn observe_of_a_steady_nlb_reads_once_per_item_and_refuses_a_failed_one() {
    let d = desired(&[], &[(80, 30080)]);
    let c = converged(&d);
    let mut elbv2 = MockElbv2::new();
    let lb = c.load_balancer.clone().unwrap();
    elbv2.expect_load_balancer().times(1).returning(move |_| {
        let lb = lb.clone();
        Box::pin(async move { Ok(Some(lb)) })
    });
    let groups: Vec<TargetGroup> = c.target_groups.iter().map(|g| g.group.clone()).collect();
    elbv2.expect_target_groups().times(1).returning(move |_| {
        let groups = groups.clone();
        Box::pin(async move { Ok(groups) })
    });
    let attributes = c.attributes.clone();
    elbv2
        .expect_load_balancer_attributes()
        .times(1)
        .returning(move |_| {
            let a = attributes.clone();
            Box::pin(async move { Ok(a) })
        });
    let listeners = c.listeners.clone();
    elbv2.expect_listeners().times(1).returning(move |_| {
        let l = listeners.clone();
        Box::pin(async move { Ok(l) })
    });
    let targets = c.target_groups[0].targets.clone();
    elbv2.expect_target_health().times(1).returning(move |_| {
        let t = targets.clone();
        Box::pin(async move { Ok(t) })
    });
    let tags = c.tags.clone();
    elbv2.expect_tags().times(1).returning(move |_| {
        let t = tags.clone();
        Box::pin(async move { Ok(t) })
    });
    // No target_group(name) lookup: the wanted group is attached. No EC2 call with groups unmanaged.
    let observed = observe(
        &crate::instance_reads::uncached(MockEc2::new()),
        &MockElb::new(),
        &elbv2,
        &config(),
        &d,
        Scope::Full,
    )
    .await
    .unwrap();
    assert_eq!(plan(&d, &observed), []);

    let mut failed = LoadBalancerV2::new("arn", NAME, "x");
    failed.state = "failed".into();
    let mut elbv2 = MockElbv2::new();
    elbv2.expect_load_balancer().times(1).returning(move |_| {
        let lb = failed.clone();
        Box::pin(async move { Ok(Some(lb)) })
    });
    let e = observe(
        &crate::instance_reads::uncached(MockEc2::new()),
        &MockElb::new(),
        &elbv2,
        &config(),
        &d,
        Scope::Full,
    )
    .await
    .unwrap_err();
    assert!(matches!(e, Error::LoadBalancerFailed(_)), "{e}");
}

#[test]
fn access_logs_cross_zone_and_target_group_attributes_come_from_annotations() {
    let d = desired(
        &[
            (Key::AccessLogEnabled, "true"),
            (Key::AccessLogS3BucketName, "logs"),
            (Key::AccessLogS3BucketPrefix, "nlb"),
            (Key::CrossZoneLoadBalancingEnabled, "true"),
            (
                Key::TargetGroupAttributes,
                "preserve_client_ip.enabled=false,proxy_protocol_v2.enabled=true",
            ),
            (Key::AdditionalResourceTags, "team=a,cost=b"),
        ],
        &[(80, 30080)],
    );
    assert_eq!(
        d.attributes,
        BTreeMap::from([
            (ACCESS_LOGS_ATTRIBUTE.to_owned(), "true".to_owned()),
            (ACCESS_LOGS_BUCKET_ATTRIBUTE.to_owned(), "logs".to_owned()),
            (ACCESS_LOGS_PREFIX_ATTRIBUTE.to_owned(), "nlb".to_owned()),
            (CROSS_ZONE_ATTRIBUTE.to_owned(), "true".to_owned()),
        ])
    );
    assert_eq!(
        d.target_group_attributes,
        BTreeMap::from([
            ("preserve_client_ip.enabled".to_owned(), "false".to_owned()),
            ("proxy_protocol_v2.enabled".to_owned(), "true".to_owned()),
        ])
    );
    assert_eq!(d.tags.get("team").map(String::as_str), Some("a"));
    // Only differing target group attributes are set.
    let mut o = converged(&d);
    o.target_groups[0]
        .attributes
        .insert("proxy_protocol_v2.enabled".into(), "false".into());
    let changes = plan(&d, &o);
    assert_eq!(
        changes,
        [Change::ModifyTargetGroupAttributes {
            name: d.listeners[0].target_group.name.clone(),
            attributes: BTreeMap::from([("proxy_protocol_v2.enabled".to_owned(), "true".to_owned())]),
        }]
    );
    // Every problem of an NLB Service at once.
    let e = parse_service(&nlb_service(
        &[
            (Key::TargetGroupAttributes, "preserve_client_ip.enabled=yes"),
            (Key::HealthcheckProtocol, "SSL"),
            (Key::ExtraSecurityGroups, "sg-1"),
        ],
        &[(80, 30080)],
    ))
    .unwrap_err();
    assert_eq!(e.problems.len(), 3, "{e}");
}

#[tokio::test]
async fn another_clusters_nlb_is_neither_adopted_nor_deleted() {
    let d = desired(&[], &[(80, 30080)]);
    let foreign = Tags::from([("kubernetes.io/cluster/other".to_owned(), "owned".to_owned())]);
    let mocks = || {
        let mut elbv2 = MockElbv2::new();
        elbv2.expect_load_balancer().returning(|n| {
            let lb = LoadBalancerV2::new("arn:lb", n, "x");
            Box::pin(async move { Ok(Some(lb)) })
        });
        elbv2
            .expect_target_groups()
            .returning(|_| Box::pin(async { Ok(vec![]) }));
        elbv2
            .expect_load_balancer_attributes()
            .returning(|_| Box::pin(async { Ok(BTreeMap::new()) }));
        elbv2
            .expect_listeners()
            .returning(|_| Box::pin(async { Ok(vec![]) }));
        elbv2
            .expect_target_group()
            .returning(|_| Box::pin(async { Ok(None) }));
        elbv2
            .expect_all_target_groups()
            .returning(|| Box::pin(async { Ok(vec![]) }));
        let tags = foreign.clone();
        elbv2.expect_tags().returning(move |_| {
            let t = BTreeMap::from([("arn:lb".to_owned(), tags.clone())]);
            Box::pin(async move { Ok(t) })
        });
        elbv2
    };
    let observed = observe(
        &crate::instance_reads::uncached(MockEc2::new()),
        &MockElb::new(),
        &mocks(),
        &config(),
        &d,
        Scope::Full,
    )
    .await
    .unwrap();
    let found = crate::flavour::Network::found(&observed);
    let claimant = Claimant::new(&d.name, &d.service, "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0");
    let e =
        crate::ownership::claim(&config(), &claimant, found, crate::ownership::Purpose::Serve).unwrap_err();
    assert!(matches!(e, Error::NotOurs(_)), "{e}");
    assert!(e.to_string().contains("kubernetes.io/cluster/other=owned"), "{e}");
    let mut c = config();
    c.manage_node_security_groups = false;
    let observed = observe_delete(
        &crate::instance_reads::uncached(MockEc2::new()),
        &MockElb::new(),
        &mocks(),
        &c,
        &Claimant::new(NAME, "prod/web", "uid-web"),
        &["k8s-prod-web-x".into()],
        None,
    )
    .await
    .unwrap()
    .0;
    assert!(observed.load_balancer.is_none());
    assert_eq!(plan_delete(NAME, &observed), []);
}

#[test]
fn a_recreation_interrupted_after_the_deletion_completes_without_a_second_notice() {
    let internal = desired(&[(Key::Internal, "true")], &[(80, 30080)]);
    // The old NLB is gone; its target group is left, found by name and no longer attached.
    let mut o = converged(&internal);
    o.load_balancer = None;
    o.listeners.clear();
    o.attributes.clear();
    o.target_groups[0].group.load_balancer_arns.clear();
    let changes = plan(&internal, &o);
    assert_eq!(kinds(&changes), ["create_load_balancer", "create_listener"]);
    assert_eq!(recreation(NAME, &changes), None);
    let Change::CreateListener { listener, .. } = &changes[1] else {
        panic!()
    };
    assert_eq!(listener.target_group, internal.listeners[0].target_group);
}

fn managed_ingress(d: &Desired) -> BTreeSet<(String, i32, String)> {
    let Security::Managed(m) = &d.security else {
        panic!("{:?}", d.security)
    };
    m.ingress
        .iter()
        .map(|r| (r.protocol.clone(), r.from_port, r.source.clone()))
        .collect()
}

#[test]
fn ip_address_type_defaults_to_ipv4_and_dualstack_admits_ipv6_only_by_default() {
    let mut c = managed_config();
    c.manage_node_security_groups = true;
    let ipv4 = build_with(&[], &[(80, 30080)], &c).unwrap();
    assert_eq!(ipv4.ip_address_type, IpAddressType::Ipv4);
    let v4_rules = BTreeSet::from([
        ("icmp".to_owned(), 3, "0.0.0.0/0".to_owned()),
        ("tcp".to_owned(), 80, "0.0.0.0/0".to_owned()),
    ]);
    assert_eq!(managed_ingress(&ipv4), v4_rules);
    assert_eq!(ipv4.node_access.as_ref().unwrap().client_cidrs, ["0.0.0.0/0"]);

    let dual = build_with(&[(Key::IpAddressType, "DualStack")], &[(80, 30080)], &c).unwrap();
    assert_eq!(dual.ip_address_type, IpAddressType::Dualstack);
    let mut dual_rules = v4_rules;
    dual_rules.insert(("icmpv6".to_owned(), 2, "::/0".to_owned()));
    dual_rules.insert(("tcp".to_owned(), 80, "::/0".to_owned()));
    assert_eq!(managed_ingress(&dual), dual_rules);
    // The nodes see IPv4 sources only (an IPv4 target group): their client rules keep the IPv4 default.
    assert_eq!(
        dual.node_access.as_ref().unwrap().client_cidrs,
        ["0.0.0.0/0"],
        "node rules unchanged"
    );

    // Ranges the user gave are taken as they are, also an explicit 0.0.0.0/0.
    for ranges in ["10.0.0.0/8", "0.0.0.0/0"] {
        let d = build_with(
            &[(Key::IpAddressType, "dualstack"), (Key::SourceRanges, ranges)],
            &[(80, 30080)],
            &c,
        )
        .unwrap();
        assert!(
            managed_ingress(&d).iter().all(|(_, _, cidr)| cidr == ranges),
            "{ranges}: {:?}",
            managed_ingress(&d)
        );
    }
}

#[test]
fn an_invalid_ip_address_type_is_collected_and_ignored_on_classic() {
    let e = parse_service(&nlb_service(
        &[(Key::IpAddressType, "ipv6"), (Key::HealthcheckPort, "x")],
        &[(80, 30080)],
    ))
    .unwrap_err();
    let problem = e
        .problems
        .iter()
        .find(|p| p.field == Key::IpAddressType.name())
        .unwrap();
    assert_eq!(problem.value, "ipv6");
    assert_eq!(problem.accepted, "one of ipv4, dualstack");
    assert_eq!(e.problems.len(), 2, "every problem collected: {e}");
    assert!(
        e.to_string()
            .contains("service.beta.kubernetes.io/aws-load-balancer-ip-address-type=\"ipv6\""),
        "{e}"
    );
    // NLB only: a Classic ELB ignores the key, also a bad value of it (logged).
    for value in ["dualstack", "ipv6"] {
        let spec = parse_service(&service(&[(Key::IpAddressType, value)], &[(80, 30080)])).unwrap();
        assert_eq!(spec.flavour, crate::Flavour::Classic);
    }
}

#[test]
fn an_ip_address_type_change_is_one_set_call_and_steady_is_nothing() {
    let dual = desired(&[(Key::IpAddressType, "dualstack")], &[(80, 30080)]);
    let created = plan(&dual, &Observed::default());
    assert!(
        created.iter().any(|c| matches!(
            c,
            Change::CreateLoadBalancer {
                ip_address_type: IpAddressType::Dualstack,
                ..
            }
        )),
        "{created:?}"
    );
    assert_eq!(plan(&dual, &converged(&dual)), []);

    // ipv4 -> dualstack and back: one in-place change each, never a recreation.
    let ipv4 = desired(&[], &[(80, 30080)]);
    assert_eq!(
        plan(&dual, &converged(&ipv4)),
        [Change::SetIpAddressType {
            ip_address_type: IpAddressType::Dualstack
        }]
    );
    assert_eq!(
        plan(&ipv4, &converged(&dual)),
        [Change::SetIpAddressType {
            ip_address_type: IpAddressType::Ipv4
        }]
    );
    // A type AWS does not report is its default.
    let mut observed = converged(&ipv4);
    observed.load_balancer.as_mut().unwrap().ip_address_type = String::new();
    assert_eq!(plan(&ipv4, &observed), []);
}

#[tokio::test]
async fn apply_sets_the_ip_address_type_and_creates_with_it() {
    let dual = desired(&[(Key::IpAddressType, "dualstack")], &[(80, 30080)]);
    let observed = converged(&desired(&[], &[(80, 30080)]));
    let changes = plan(&dual, &observed);
    let mut elbv2 = MockElbv2::new();
    elbv2
        .expect_set_ip_address_type()
        .withf(|arn, t| arn == "arn:lb" && t == "dualstack")
        .times(1)
        .returning(|_, _| Box::pin(async { Ok(()) }));
    let applied = apply(
        &MockEc2::new(),
        &elbv2,
        &config(),
        &Claim::assumed(NAME),
        &observed,
        &changes,
    )
    .await
    .unwrap();
    assert_eq!(applied.mutations, 1);

    // Created with the type (and the AWS default left implicit).
    for (d, wanted) in [(dual, Some("dualstack")), (desired(&[], &[(80, 30080)]), None)] {
        let changes: Vec<Change> = plan(&d, &Observed::default())
            .into_iter()
            .filter(|c| matches!(c, Change::CreateLoadBalancer { .. }))
            .collect();
        let mut elbv2 = MockElbv2::new();
        elbv2
            .expect_create_load_balancer()
            .withf(move |lb| lb.ip_address_type.as_deref() == wanted)
            .times(1)
            .returning(|lb| {
                let created = LoadBalancerV2::new("arn:lb-new", &lb.name, "new.elb.amazonaws.com");
                Box::pin(async move { Ok(created) })
            });
        apply(
            &MockEc2::new(),
            &elbv2,
            &config(),
            &Claim::assumed(NAME),
            &Observed::default(),
            &changes,
        )
        .await
        .unwrap();
    }
}

#[test]
fn pinned_subnets_in_added_zones_are_set_in_place() {
    let one = pinned(&["subnet-a"], &[]);
    let two = pinned(&["subnet-b", "subnet-a"], &[]);
    assert_eq!(
        plan(&two, &converged(&one)),
        [Change::SetSubnets {
            subnets: vec!["subnet-a".to_owned(), "subnet-b".to_owned()]
        }],
        "the whole sorted list, no recreation"
    );
    assert_eq!(plan(&two, &converged(&two)), []);

    // With pinned EIPs or private addresses the index mapping shifts: a new NLB.
    let eips = pinned(
        &["subnet-a", "subnet-b"],
        &[(Key::EipAllocations, "eipalloc-1,eipalloc-2")],
    );
    let mut o = converged(&one);
    o.load_balancer.as_mut().unwrap().availability_zones[0]
        .addresses
        .push(SubnetMapping {
            subnet_id: Some(SubnetId::new("subnet-a")),
            allocation_id: Some("eipalloc-1".to_owned()),
            private_ipv4_address: None,
        });
    let mut eips = eips;
    eips.allow_recreation = true;
    let message = recreation(NAME, &plan(&eips, &o)).unwrap();
    assert!(
        message.contains("subnets subnet-a -> subnet-a,subnet-b"),
        "{message}"
    );
}

#[tokio::test]
async fn apply_sets_the_subnets() {
    let one = pinned(&["subnet-a"], &[]);
    let two = pinned(&["subnet-a", "subnet-b"], &[]);
    let observed = converged(&one);
    let changes = plan(&two, &observed);
    let mut elbv2 = MockElbv2::new();
    elbv2
        .expect_set_subnets()
        .withf(|arn, s| arn == "arn:lb" && s == [SubnetId::new("subnet-a"), SubnetId::new("subnet-b")])
        .times(1)
        .returning(|_, _| Box::pin(async { Ok(()) }));
    let applied = apply(
        &MockEc2::new(),
        &elbv2,
        &config(),
        &Claim::assumed(NAME),
        &observed,
        &changes,
    )
    .await
    .unwrap();
    assert_eq!(applied.mutations, 1);
}

#[tokio::test]
async fn deletion_sweeps_the_services_unattached_target_groups_and_nothing_else() {
    let owned = desired(&[], &[(80, 30080)]).tags;
    assert_eq!(
        owned.get("kubernetes.io/service-name").map(String::as_str),
        Some("prod/web")
    );
    let mut other_service = owned.clone();
    other_service.insert("kubernetes.io/service-name".into(), "prod/web-canary".into());
    let foreign = Tags::from([
        ("kubernetes.io/cluster/other".to_owned(), "owned".to_owned()),
        ("kubernetes.io/service-name".to_owned(), "prod/web".to_owned()),
    ]);
    let mut untagged_service = owned.clone();
    untagged_service.remove("kubernetes.io/service-name");
    // The re-created Service's group (same namespace and name, another UID): never its predecessor's to delete.
    let mut successor = owned.clone();
    successor.insert(crate::shared::SERVICE_UID_TAG.into(), "uid-successor".into());
    let uid = owned[crate::shared::SERVICE_UID_TAG].clone();
    let groups = [
        // (ARN, name, tags, deleted)
        (
            "arn:current",
            "k8s-prod-web-current",
            untagged_service.clone(),
            true,
        ),
        ("arn:orphan", "k8s-prod-web-0123456789", owned.clone(), true),
        ("arn:canary", "k8s-prod-web-abcdef0123", other_service, false),
        ("arn:foreign", "k8s-prod-web-fedcba9876", foreign, false),
        ("arn:unprefixed", "k8s-prod-api-0123456789", owned.clone(), false),
        ("arn:successor", "k8s-prod-web-1111111111", successor, false),
        (
            "arn:untagged-prefix",
            "k8s-prod-web-5555555555",
            untagged_service,
            false,
        ),
    ];
    let mut elbv2 = MockElbv2::new();
    elbv2
        .expect_load_balancer()
        .returning(|_| Box::pin(async { Ok(None) }));
    let listed: Vec<TargetGroup> = groups
        .iter()
        .map(|(arn, name, _, _)| TargetGroup::new(arn, name, "TCP", 30080))
        .collect();
    elbv2.expect_all_target_groups().times(1).returning(move || {
        let listed = listed.clone();
        Box::pin(async move { Ok(listed) })
    });
    let tags: BTreeMap<String, Tags> = groups
        .iter()
        .map(|(arn, _, tags, _)| ((*arn).to_owned(), tags.clone()))
        .collect();
    elbv2.expect_tags().times(1).returning(move |arns| {
        let t: BTreeMap<String, Tags> = tags
            .iter()
            .filter(|(arn, _)| arns.contains(arn))
            .map(|(a, t)| (a.clone(), t.clone()))
            .collect();
        Box::pin(async move { Ok(t) })
    });
    let mut c = config();
    c.manage_node_security_groups = false;
    let observed = observe_delete(
        &crate::instance_reads::uncached(MockEc2::new()),
        &MockElb::new(),
        &elbv2,
        &c,
        &Claimant::new(NAME, "prod/web", &uid),
        &["k8s-prod-web-current".into()],
        None,
    )
    .await
    .unwrap()
    .0;
    let deleted: Vec<&str> = observed.target_groups.iter().map(|g| g.arn.as_str()).collect();
    let wanted: Vec<&str> = groups.iter().filter(|g| g.3).map(|g| g.0).collect();
    assert_eq!(deleted, wanted);
}
