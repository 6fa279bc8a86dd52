//! Tests of the NLB plan.

use super::*;
use crate::shared::GroupRef;
use ccm_aws_api::InstanceId;
use ccm_aws_api::SecurityGroupId;
use ccm_aws_api::SubnetId;
use ccm_aws_api::Tags;
use ccm_aws_api::elbv2::LoadBalancerV2;
use ccm_aws_api::elbv2::Target;
use ccm_aws_api::elbv2::TargetGroup;
use ccm_aws_api::elbv2::TargetHealth;
use std::collections::BTreeMap;

#[test]
fn plan_for_a_new_service_creates_everything_in_order() {
    let d = build_with(
        &[
            (Key::TargetGroupAttributes, "proxy_protocol_v2.enabled=true"),
            (Key::CrossZoneLoadBalancingEnabled, "true"),
        ],
        &[(80, 30080)],
        &managed_config(),
    )
    .unwrap();
    let changes = plan(&d, &Observed::default());
    assert_eq!(
        kinds(&changes),
        [
            "create_security_group",
            "authorize_ingress",
            "create_target_group",
            "modify_target_group_attributes",
            "register_targets",
            "create_load_balancer",
            "create_listener",
            "modify_attributes",
        ]
    );
    let Change::CreateLoadBalancer { security_groups, .. } = &changes[5] else {
        panic!()
    };
    assert_eq!(security_groups, &Some(vec![GroupRef::Managed]));
}

#[test]
fn a_steady_service_plans_nothing() {
    for d in [
        desired(&[], &[(80, 30080)]),
        desired(
            &[(Key::SslCert, "arn:c"), (Key::SslNegotiationPolicy, "p")],
            &[(443, 30443)],
        ),
        build_with(&[], &[(80, 30080)], &managed_config()).unwrap(),
        build_with(
            &[(Key::SecurityGroups, "sg-1")],
            &[(80, 30080)],
            &managed_config(),
        )
        .unwrap(),
        desired(
            &[
                (Key::HealthcheckProtocol, "HTTP"),
                (Key::TargetGroupAttributes, "preserve_client_ip.enabled=false"),
            ],
            &[(80, 30080)],
        ),
    ] {
        assert_eq!(plan(&d, &converged(&d)), [], "{d:?}");
    }
}

#[test]
fn health_check_changes_modify_in_place_and_only_when_different() {
    let d = desired(&[], &[(80, 30080)]);
    let mut o = converged(&d);
    // Only the unhealthy threshold differs (upstream misses this one).
    o.target_groups[0].group.health_check.unhealthy_threshold = Some(2);
    assert_eq!(kinds(&plan(&d, &o)), ["modify_target_group"]);
    // Only the timeout (upstream never sends it).
    let mut o = converged(&d);
    o.target_groups[0].group.health_check.timeout_seconds = Some(6);
    assert_eq!(kinds(&plan(&d, &o)), ["modify_target_group"]);
    // A path AWS reports for a TCP check does not matter.
    let mut o = converged(&d);
    o.target_groups[0].group.health_check.path = Some("/".into());
    assert_eq!(plan(&d, &o), []);
}

/// Target group names are the Go controller's, byte for byte (the value computed independently with Python's
/// hashlib), so the groups of an NLB it made are found by name after a migration and not replaced.
#[test]
fn target_group_names_are_the_go_controllers() {
    let mut spec = parse_service(&nlb_service(&[], &[(443, 31443)])).unwrap();
    spec.namespace = "kube-system".into();
    spec.name = "my-web.app".into();
    let hc = HealthCheck {
        protocol: "HTTP".into(),
        interval: 10,
        ..health_check(&spec, &config())
    };
    assert_eq!(
        target_group_name("e2e-cluster", &spec, 443, 31443, "TLS", &hc),
        "k8s-kubesyst-mywebapp-52a022e6af"
    );
}

/// A successor name keeps the upstream prefix and length and depends on the load balancer (so on the UID).
#[test]
fn successor_target_group_names_differ_per_load_balancer() {
    let upstream = "k8s-kubesyst-mywebapp-52a022e6af";
    let a = super::super::successor_target_group_name(upstream, "a1111");
    let b = super::super::successor_target_group_name(upstream, "a2222");
    assert!(a.starts_with("k8s-kubesyst-mywebapp-"), "{a}");
    assert_eq!(a.len(), upstream.len());
    assert_ne!(a, upstream);
    assert_ne!(a, b);
    assert_eq!(a, super::super::successor_target_group_name(upstream, "a1111"));
}

/// The health check protocol and interval are part of the name (as upstream): changing them moves the listener
/// to a new target group; the other fields are modified in place (above).
#[test]
fn a_health_check_interval_change_moves_the_listener_to_a_new_target_group() {
    let before = desired(&[], &[(80, 30080)]);
    let after = desired(&[(Key::HealthcheckInterval, "10")], &[(80, 30080)]);
    assert_ne!(
        before.listeners[0].target_group.name,
        after.listeners[0].target_group.name
    );
    let changes = kinds(&plan(&after, &converged(&before)));
    assert!(changes.contains(&"create_target_group".to_owned()), "{changes:?}");
    assert!(changes.contains(&"delete_target_group".to_owned()), "{changes:?}");
}

#[test]
fn targets_are_diffed_and_draining_ones_left_alone() {
    let d = desired(&[], &[(80, 30080)]);
    let mut o = converged(&d);
    let targets = &mut o.target_groups[0].targets;
    targets.retain(|t| t.target.id.to_string() != "i-2");
    targets.push(TargetHealth {
        target: Target {
            id: InstanceId::new("i-9").into(),
            port: 30080,
        },
        state: "healthy".into(),
        reason: None,
    });
    targets.push(TargetHealth {
        target: Target {
            id: InstanceId::new("i-8").into(),
            port: 30080,
        },
        state: "draining".into(),
        reason: Some("Target.DeregistrationInProgress".into()),
    });
    let changes = plan(&d, &o);
    let tg = d.listeners[0].target_group.name.clone();
    assert_eq!(
        changes,
        [
            Change::DeregisterTargets {
                name: tg.clone(),
                targets: vec![("i-9".into(), 30080)],
            },
            Change::RegisterTargets {
                name: tg,
                port: 30080,
                instances: vec!["i-2".into()],
            },
        ]
    );
    assert!(changes.iter().all(is_host_change));
}

#[test]
fn a_protocol_change_replaces_the_listener_without_a_duplicate() {
    let tcp = desired(&[], &[(443, 30443)]);
    let tls = desired(&[(Key::SslCert, "arn:c")], &[(443, 30443)]);
    let changes = plan(&tls, &converged(&tcp));
    assert_eq!(kinds(&changes), ["delete_listener", "create_listener"]);
    let Change::CreateListener { listener, .. } = &changes[1] else {
        panic!()
    };
    assert_eq!((listener.port, listener.protocol.as_str()), (443, "TLS"));
    // Same target group (TCP behind TLS): nothing else.
    assert_eq!(tls.listeners[0].target_group, tcp.listeners[0].target_group);
    // A certificate or policy change modifies the TLS listener in place.
    let rotated = desired(
        &[(Key::SslCert, "arn:c2"), (Key::SslNegotiationPolicy, "p2")],
        &[(443, 30443)],
    );
    assert_eq!(
        plan(&rotated, &converged(&tls)),
        [Change::ModifyListener {
            arn: "arn:listener/443".into(),
            port: 443,
            protocol: None,
            certificate: Some("arn:c2".into()),
            ssl_policy: Some("p2".into()),
            alpn_policy: None,
            target_group: None,
        }]
    );
}

#[test]
fn the_alpn_policy_of_tls_listeners_is_changed_in_place_and_reset_when_removed() {
    let tls = desired(&[(Key::SslCert, "arn:c1")], &[(443, 30443)]);
    assert_eq!(tls.listeners[0].alpn_policy.as_deref(), Some("None"));
    // A Go-era TLS listener reports no policy: nothing to do.
    let mut go_era = converged(&tls);
    go_era.listeners[0].alpn_policy = None;
    assert_eq!(plan(&tls, &go_era), []);
    let h2 = desired(
        &[(Key::SslCert, "arn:c1"), (Key::AlpnPolicy, "HTTP2Preferred")],
        &[(443, 30443)],
    );
    let modify = |alpn: &str| Change::ModifyListener {
        arn: "arn:listener/443".into(),
        port: 443,
        protocol: None,
        certificate: None,
        ssl_policy: None,
        alpn_policy: Some(alpn.into()),
        target_group: None,
    };
    assert_eq!(plan(&h2, &converged(&tls)), [modify("HTTP2Preferred")]);
    assert_eq!(plan(&h2, &converged(&h2)), []);
    // The annotation removed: back to `None`.
    assert_eq!(plan(&tls, &converged(&h2)), [modify("None")]);
    // TCP listeners have no ALPN policy.
    let tcp = desired(&[(Key::AlpnPolicy, "HTTP2Only")], &[(80, 30080)]);
    assert_eq!(tcp.listeners[0].alpn_policy, None);
}

#[test]
fn a_node_port_change_moves_the_listener_to_a_new_target_group() {
    let before = desired(&[], &[(80, 30080)]);
    let after = desired(&[], &[(80, 30081)]);
    let changes = plan(&after, &converged(&before));
    assert_eq!(
        kinds(&changes),
        [
            "create_target_group",
            "register_targets",
            "modify_listener",
            "delete_target_group"
        ]
    );
    let Change::ModifyListener {
        target_group,
        protocol,
        ..
    } = &changes[2]
    else {
        panic!()
    };
    assert_eq!(
        target_group.as_deref(),
        Some(after.listeners[0].target_group.name.as_str())
    );
    assert_eq!(protocol, &None);
    // A removed port: its listener, then its group.
    let two = desired(&[], &[(80, 30080), (81, 30081)]);
    assert_eq!(
        kinds(&plan(&before, &converged(&two))),
        ["delete_listener", "delete_target_group"]
    );
    // A group of another Service (or cluster) attached to the NLB is never deleted.
    let mut o = converged(&two);
    let foreign = o.target_groups[1].group.arn.clone();
    o.tags.insert(
        foreign,
        Tags::from([("kubernetes.io/service-name".into(), "other/svc".into())]),
    );
    assert_eq!(kinds(&plan(&before, &o)), ["delete_listener"]);
}

#[test]
fn tags_and_attributes_are_reconciled_without_removing_others() {
    let d = desired(&[(Key::AdditionalResourceTags, "team=a")], &[(80, 30080)]);
    let mut o = converged(&d);
    for tags in o.tags.values_mut() {
        tags.remove("team");
        tags.insert("foreign".into(), "kept".into());
    }
    o.attributes.insert(CROSS_ZONE_ATTRIBUTE.into(), "true".into());
    o.attributes
        .insert("deletion_protection.enabled".into(), "true".into());
    let changes = plan(&d, &o);
    assert_eq!(kinds(&changes), ["add_tags", "modify_attributes"]);
    let Change::ModifyAttributes { attributes } = &changes[1] else {
        panic!()
    };
    assert_eq!(
        attributes,
        &BTreeMap::from([(CROSS_ZONE_ATTRIBUTE.to_owned(), "false".to_owned())])
    );
    let Change::AddTags { arns, tags } = &changes[0] else {
        panic!()
    };
    assert_eq!(
        arns.len(),
        3,
        "the load balancer, its target group and its listener"
    );
    assert!(!tags.contains_key("foreign"));
    // Keys AWS does not report are taken as its defaults.
    let mut o = converged(&d);
    o.attributes.clear();
    assert_eq!(plan(&d, &o), []);
}

/// An attribute AWS refuses when it is set (an access log bucket without its policy, say) fails only the last
/// step: the listeners, tags and nodes' rules of an existing NLB are planned before its attributes.
#[test]
fn attributes_of_an_existing_nlb_are_set_after_its_listeners_tags_and_rules() {
    let before = desired(&[], &[(80, 30080)]);
    let after = desired(
        &[
            (Key::AdditionalResourceTags, "team=a"),
            (Key::LoadBalancerAttributes, "deletion_protection.enabled=true"),
        ],
        &[(80, 30080), (443, 30443)],
    );
    let changes = plan(&after, &converged(&before));
    let kinds = kinds(&changes);
    assert_eq!(
        kinds.last().map(String::as_str),
        Some("modify_attributes"),
        "{kinds:?}"
    );
    let attributes_at = kinds.len() - 1;
    for earlier in ["create_listener", "add_tags", "register_targets"] {
        let at = kinds.iter().position(|k| k == earlier);
        assert!(
            at.is_some_and(|at| at < attributes_at),
            "{earlier} before the attributes: {kinds:?}"
        );
    }
}

#[test]
fn transitions_between_managed_and_given_groups() {
    let managed = build_with(&[], &[(80, 30080)], &managed_config()).unwrap();
    let byo = build_with(
        &[(Key::SecurityGroups, "sg-byo")],
        &[(80, 30080)],
        &managed_config(),
    )
    .unwrap();
    // managed -> BYO: set the groups, revoke references to the managed group, delete it.
    let mut o = converged(&managed);
    o.references = vec![(
        SecurityGroupId::new("sg-node"),
        ReferencePermission {
            protocol: "-1".into(),
            from_port: None,
            to_port: None,
            source: "sg-managed".into(),
        },
    )];
    assert_eq!(
        kinds(&plan(&byo, &o)),
        ["set_security_groups", "revoke_reference", "delete_security_group"]
    );
    // Not owned (no cluster tag): never deleted.
    let mut o = converged(&managed);
    o.managed_group.as_mut().unwrap().tags.clear();
    assert_eq!(kinds(&plan(&byo, &o)), ["set_security_groups"]);
    // BYO -> managed: create the managed group, then set it; the BYO group is not touched.
    let o = converged(&byo);
    let changes = plan(&managed, &o);
    assert_eq!(
        kinds(&changes),
        [
            "create_security_group",
            "authorize_ingress",
            "set_security_groups"
        ]
    );
    assert_eq!(
        changes[2],
        Change::SetSecurityGroups {
            groups: vec![GroupRef::Managed]
        }
    );
    // Mode off: an existing NLB's groups are left alone.
    let off = desired(&[], &[(80, 30080)]);
    assert_eq!(plan(&off, &converged(&byo)), []);
    // Managed mode on an NLB created without groups: it stays without (AWS cannot add them).
    let mut o = converged(&off);
    o.managed_group = None;
    assert_eq!(plan(&managed, &o), []);
}

#[test]
fn changes_an_nlb_cannot_take_recreate_it_with_a_reason() {
    let public = desired(&[], &[(80, 30080)]);
    let internal = consenting(desired(&[(Key::Internal, "true")], &[(80, 30080)]));
    let changes = plan(&internal, &converged(&public));
    assert_eq!(
        kinds(&changes),
        ["delete_load_balancer", "create_load_balancer", "create_listener"],
        "the target group is kept"
    );
    let message = recreation(NAME, &changes).unwrap();
    assert!(
        message.contains("scheme internet-facing -> internal"),
        "{message}"
    );
    assert!(message.contains("DNS name changes"), "{message}");

    // Given groups on an NLB created without any.
    let byo = consenting(
        build_with(
            &[(Key::SecurityGroups, "sg-byo")],
            &[(80, 30080)],
            &managed_config(),
        )
        .unwrap(),
    );
    let message = recreation(NAME, &plan(&byo, &converged(&public))).unwrap();
    assert!(message.contains("created without security groups"), "{message}");

    // A pinned subnet removed or swapped recreates; discovered subnets never change an NLB.
    let mut one = consenting(pinned(&["subnet-a"], &[]));
    let mut o = converged(&pinned(&["subnet-a", "subnet-b"], &[]));
    assert!(
        recreation(NAME, &plan(&one, &o))
            .unwrap()
            .contains("subnets subnet-a,subnet-b -> subnet-a")
    );
    let swapped = consenting(pinned(&["subnet-a", "subnet-c"], &[]));
    assert!(recreation(NAME, &plan(&swapped, &o)).unwrap().contains("subnets"));
    one.subnets_pinned = false;
    o.load_balancer.as_mut().unwrap().availability_zones.pop();
    o.load_balancer.as_mut().unwrap().availability_zones[0].subnet_id = Some(SubnetId::new("subnet-z"));
    assert_eq!(plan(&one, &o), []);

    // EIPs.
    let eips = consenting(desired(
        &[(Key::EipAllocations, "eipalloc-1,eipalloc-2")],
        &[(80, 30080)],
    ));
    assert!(
        recreation(NAME, &plan(&eips, &converged(&public)))
            .unwrap()
            .contains("EIP allocations")
    );
    // No recreation without a change.
    assert_eq!(recreation(NAME, &plan(&public, &converged(&public))), None);
}

fn consenting(mut desired: Desired) -> Desired {
    desired.allow_recreation = true;
    desired
}

/// The reason of a plan's withheld recreation, and the kinds of the other changes.
fn withheld(changes: &[Change]) -> (Option<String>, Vec<String>) {
    let reason = match changes.first() {
        Some(Change::RecreationWithheld { reason, .. }) => Some(reason.clone()),
        _ => None,
    };
    (reason, kinds(&changes[usize::from(!changes.is_empty())..]))
}

#[test]
fn without_consent_an_nlb_is_kept_and_the_rest_applied_in_place() {
    let public = desired(&[], &[(80, 30080)]);
    let o = converged(&public);
    // A scheme change with a new port: the listener is added to the NLB as it is.
    let internal = desired(&[(Key::Internal, "true")], &[(80, 30080), (443, 30443)]);
    let changes = plan(&internal, &o);
    assert_eq!(recreation(NAME, &changes), None, "nothing is deleted");
    let (reason, rest) = withheld(&changes);
    assert_eq!(reason.as_deref(), Some("scheme internet-facing -> internal"));
    assert_eq!(
        rest,
        ["create_target_group", "register_targets", "create_listener"]
    );

    // Given groups on an NLB created without any: kept without groups.
    let byo = build_with(
        &[(Key::SecurityGroups, "sg-byo")],
        &[(80, 30080)],
        &managed_config(),
    )
    .unwrap();
    let (reason, rest) = withheld(&plan(&byo, &o));
    assert!(reason.unwrap().contains("created without security groups"));
    assert_eq!(rest, Vec::<String>::new());

    // A pinned subnet removed: the NLB keeps both, nothing else to do.
    let one = pinned(&["subnet-a"], &[]);
    let two = converged(&pinned(&["subnet-a", "subnet-b"], &[]));
    let (reason, rest) = withheld(&plan(&one, &two));
    assert!(reason.unwrap().contains("subnets subnet-a,subnet-b -> subnet-a"));
    assert_eq!(rest, Vec::<String>::new(), "no SetSubnets");

    // EIPs wanted on an NLB that has none.
    let eips = desired(&[(Key::EipAllocations, "eipalloc-1,eipalloc-2")], &[(80, 30080)]);
    let (reason, rest) = withheld(&plan(&eips, &o));
    assert!(reason.unwrap().contains("EIP allocations"));
    assert_eq!(rest, Vec::<String>::new());

    // The cluster-wide flag consents for every Service.
    let flagged = build_with(
        &[(Key::Internal, "true")],
        &[(80, 30080)],
        &config().with_recreation_allowed(true),
    );
    assert!(recreation(NAME, &plan(&flagged.unwrap(), &o)).is_some());
}

#[test]
fn a_failed_nlb_is_an_error_and_others_report_their_dns_name() {
    let mut lb = LoadBalancerV2::new("arn", NAME, "x.elb.amazonaws.com");
    assert_eq!(
        status_hostname(&lb).unwrap().as_deref(),
        Some("x.elb.amazonaws.com")
    );
    lb.state = "provisioning".into();
    assert!(status_hostname(&lb).unwrap().is_some());
    lb.state = "failed".into();
    let e = status_hostname(&lb).unwrap_err();
    assert!(e.to_string().contains("state failed"), "{e}");
}

#[test]
fn deletion_plan_order() {
    let observed = DeleteObserved {
        load_balancer: Some(LoadBalancerV2::new("arn:lb", NAME, "x")),
        target_groups: vec![TargetGroup::new("arn:tg", "k8s-prod-web-x", "TCP", 30080)],
        managed_group: Some(SecurityGroupId::new("sg-m")),
        references: vec![(
            SecurityGroupId::new("sg-node"),
            ReferencePermission {
                protocol: "tcp".into(),
                from_port: Some(80),
                to_port: Some(80),
                source: "sg-m".into(),
            },
        )],
        node_rules: None,
        deletion_protection: false,
        adopted: false,
    };
    assert_eq!(
        kinds(&plan_delete(NAME, &observed)),
        [
            "delete_load_balancer",
            "delete_target_group",
            "revoke_reference",
            "delete_security_group"
        ]
    );
    assert_eq!(plan_delete(NAME, &DeleteObserved::default()), []);
}

#[test]
fn instances_not_running_are_never_registered() {
    // Found by the chaos soak (seed 2026112406): a Node outliving its terminated instance made every
    // RegisterTargets of every NLB fail (AWS refuses the whole call), so none converged until the Node was gone.
    let registrations = |changes: &[Change]| -> Vec<Vec<String>> {
        changes
            .iter()
            .filter_map(|c| match c {
                Change::RegisterTargets { instances, .. } => Some(instances.clone()),
                _ => None,
            })
            .collect()
    };
    let d = desired(&[], &[(80, 30080)]);
    let node_rules = |not_running: &[&str]| {
        Some(node_rules::Observed {
            not_running: not_running.iter().map(|i| (*i).to_owned()).collect(),
            ..Default::default()
        })
    };
    let mut o = converged(&d);
    o.target_groups[0].targets.clear();
    o.node_rules = node_rules(&["i-2"]);
    assert_eq!(registrations(&plan(&d, &o)), [vec!["i-1".to_owned()]]);
    let created = Observed {
        node_rules: node_rules(&["i-1"]),
        ..Observed::default()
    };
    assert_eq!(registrations(&plan(&d, &created)), [vec!["i-2".to_owned()]]);
    o.node_rules = node_rules(&["i-1", "i-2"]);
    assert!(registrations(&plan(&d, &o)).is_empty());
}

#[test]
fn untagged_listeners_are_tagged_before_they_are_changed_or_deleted() {
    // Go-era listeners carry no tags; the hardened IAM policy lets the controller modify or delete only
    // listeners tagged as the cluster's, so their tags come first; one left as it is is not tagged (a takeover
    // writes nothing to it).
    let two = desired(&[], &[(80, 30080), (443, 30443)]);
    let one = desired(&[], &[(80, 30080)]);
    let mut o = converged(&two);
    let listeners: Vec<String> = o.listeners.iter().map(|l| l.arn.clone()).collect();
    for arn in &listeners {
        o.tags.insert(arn.clone(), Tags::new());
    }
    let changes = plan(&one, &o);
    let kinds = kinds(&changes);
    let tagged = kinds
        .iter()
        .position(|k| k == "add_tags")
        .expect("the tags are repaired");
    let deleted = kinds
        .iter()
        .position(|k| k == "delete_listener")
        .expect("443 goes");
    assert!(tagged < deleted, "{kinds:?}");
    let Change::AddTags { arns, .. } = &changes[tagged] else {
        panic!()
    };
    assert_eq!(arns, &["arn:listener/443".to_owned()], "only the one deleted");
    assert_eq!(listeners.len(), 2);
    // Nothing changed: nothing tagged.
    let mut o = converged(&two);
    for arn in &listeners {
        o.tags.insert(arn.clone(), Tags::new());
    }
    assert_eq!(plan(&two, &o), []);
}
