use super::*;
use ccm_aws_api::{
    Tags, VpcId,
    ec2::{Instance, MockEc2, Subnet},
};
use ccm_tagging::ClusterTags;

const LB: &str = "a0123456789abcdef0123456789abcde";
const OTHER: &str = "affffffffffffffffffffffffffffff0";

fn config() -> LoadBalancerConfig {
    LoadBalancerConfig::new(ClusterTags::new("c1", false).unwrap(), VpcId::new("vpc-1"))
}

fn tagged() -> Tags {
    Tags::from([("kubernetes.io/cluster/c1".to_owned(), "owned".to_owned())])
}

fn access(ports: &[(&str, i32)], cidrs: &[&str], health: &[i32], instances: &[&str]) -> NodeAccess {
    NodeAccess {
        load_balancer: LB.to_owned(),
        client_ports: ports.iter().map(|(p, n)| ((*p).to_owned(), *n)).collect(),
        client_cidrs: cidrs.iter().map(|c| (*c).to_owned()).collect(),
        health_ports: health.iter().copied().collect(),
        instances: instances.iter().map(|i| (*i).to_owned()).collect(),
    }
}

fn rule(protocol: &str, from: i32, to: i32, cidr: &str, description: &str) -> DescribedRule {
    DescribedRule {
        rule: Rule {
            protocol: protocol.to_owned(),
            from_port: from,
            to_port: to,
            cidr: cidr.to_owned(),
        },
        description: description.to_owned(),
    }
}

fn client(lb: &str) -> String {
    format!("{CLIENT_RULE_PREFIX}{lb}")
}

fn health(lb: &str) -> String {
    format!("{HEALTH_RULE_PREFIX}{lb}")
}

fn group(id: &str, tags: Tags, rules: &[DescribedRule]) -> SecurityGroup {
    let mut g = SecurityGroup::new(SecurityGroupId::new(id), id, Some(VpcId::new("vpc-1")), tags);
    g.ingress = permissions(rules);
    g
}

fn observed(groups: Vec<SecurityGroup>, targets: &[(&str, &str)], sources: &[&str]) -> Observed {
    Observed {
        groups,
        instance_groups: targets
            .iter()
            .map(|(i, g)| ((*i).to_owned(), SecurityGroupId::new(*g)))
            .collect(),
        health_sources: sources.iter().map(|s| (*s).to_owned()).collect(),
    }
}

/// The group's rules after applying `changes` the way AWS would (one rule per protocol, ports and source).
fn applied(group: &SecurityGroup, changes: &[RuleChange]) -> SecurityGroup {
    let mut rules = described_rules(group);
    for c in changes.iter().filter(|c| c.group() == group.id.as_str()) {
        match c {
            RuleChange::Authorize { rules: add, .. } => {
                for r in add {
                    assert!(
                        !rules.iter().any(|p| p.rule == r.rule),
                        "AWS would reject {r:?} as a duplicate"
                    );
                    rules.insert(r.clone());
                }
            }
            RuleChange::Revoke { rules: gone, .. } => {
                for r in gone {
                    assert!(rules.remove(r), "{r:?} is not in the group");
                }
            }
        }
    }
    let mut out = group.clone();
    out.ingress = permissions(&rules.into_iter().collect::<Vec<_>>());
    out
}

fn authorized(changes: &[RuleChange]) -> BTreeSet<DescribedRule> {
    changes
        .iter()
        .filter_map(|c| match c {
            RuleChange::Authorize { rules, .. } => Some(rules.clone()),
            RuleChange::Revoke { .. } => None,
        })
        .flatten()
        .collect()
}

fn revoked(changes: &[RuleChange]) -> BTreeSet<DescribedRule> {
    changes
        .iter()
        .filter_map(|c| match c {
            RuleChange::Revoke { rules, .. } => Some(rules.clone()),
            RuleChange::Authorize { .. } => None,
        })
        .flatten()
        .collect()
}

fn err(kind: ErrorKind) -> AwsError {
    AwsError::new(kind, "test", "Op")
}

// --- rules ---

#[test]
fn client_rules_per_protocol_port_and_cidr_and_health_rules_from_the_subnets() {
    let a = access(
        &[("tcp", 30080), ("udp", 30053)],
        &["10.0.0.0/8", "192.168.0.0/16"],
        &[30080],
        &["i-1"],
    );
    let rules = a.rules(&["10.1.1.0/24".to_owned(), "10.1.2.0/24".to_owned()]);
    let c = client(LB);
    let h = health(LB);
    let expected: BTreeSet<DescribedRule> = [
        rule("tcp", 30080, 30080, "10.0.0.0/8", &c),
        rule("tcp", 30080, 30080, "192.168.0.0/16", &c),
        rule("udp", 30053, 30053, "10.0.0.0/8", &c),
        rule("udp", 30053, 30053, "192.168.0.0/16", &c),
        rule("tcp", 30080, 30080, "10.1.1.0/24", &h),
        rule("tcp", 30080, 30080, "10.1.2.0/24", &h),
    ]
    .into_iter()
    .collect();
    assert_eq!(rules, expected);
}

#[test]
fn health_rules_are_left_out_only_when_the_clients_already_cover_them() {
    let sources = ["10.1.1.0/24".to_owned()];
    let health_rules = |a: &NodeAccess| {
        a.rules(&sources)
            .into_iter()
            .filter(|r| r.description == health(LB))
            .count()
    };
    // Everyone on TCP, health port among the client ports: covered.
    let covered = access(&[("tcp", 30080)], &["0.0.0.0/0"], &[30080], &["i-1"]);
    assert!(covered.health_covered_by_clients());
    assert_eq!(health_rules(&covered), 0);
    // IPv6 clients besides: still covered (health checks come from IPv4 subnets).
    let dual = access(&[("tcp", 30080)], &["0.0.0.0/0", "::/0"], &[30080], &["i-1"]);
    assert_eq!(health_rules(&dual), 0);
    // Another health port (externalTrafficPolicy: Local).
    let local = access(&[("tcp", 30080)], &["0.0.0.0/0"], &[32000], &["i-1"]);
    assert_eq!(health_rules(&local), 1);
    // UDP clients: the TCP health check is not covered.
    let udp = access(&[("udp", 30080)], &["0.0.0.0/0"], &[30080], &["i-1"]);
    assert_eq!(health_rules(&udp), 1);
    // Restricted clients.
    let restricted = access(&[("tcp", 30080)], &["203.0.113.0/24"], &[30080], &["i-1"]);
    assert_eq!(health_rules(&restricted), 1);
    // A health rule identical to a client rule is the same AWS rule: left out one by one.
    let same = access(&[("tcp", 30080)], &["10.1.1.0/24"], &[30080], &["i-1"]);
    assert_eq!(health_rules(&same), 0);
    assert_eq!(same.rules(&sources).len(), 1);
}

#[test]
fn ipv6_clients_get_ipv6_ranges_and_icmpv6_mtu_rules() {
    let a = access(
        &[("tcp", 30080)],
        &["2001:DB8:0:0::/32", "0.0.0.0/0"],
        &[30080],
        &["i-1"],
    );
    let obs = observed(vec![group("sg-n", tagged(), &[])], &[("i-1", "sg-n")], &[]);
    let changes = plan(&a, &obs);
    let c = client(LB);
    let expected: BTreeSet<DescribedRule> = [
        rule("tcp", 30080, 30080, "2001:db8::/32", &c),
        rule("tcp", 30080, 30080, "0.0.0.0/0", &c),
        rule("icmpv6", 2, 0, "2001:db8::/32", MTU_RULE),
        rule("icmp", 3, 4, "0.0.0.0/0", MTU_RULE),
    ]
    .into_iter()
    .collect();
    assert_eq!(authorized(&changes), expected);
    let RuleChange::Authorize { rules, .. } = &changes[0] else {
        panic!("{changes:?}")
    };
    let perms = permissions(rules);
    let tcp = perms.iter().find(|p| p.protocol == "tcp").unwrap();
    assert_eq!(tcp.ip_ranges.len(), 1);
    assert_eq!(tcp.ipv6_ranges[0].cidr, "2001:db8::/32");
    assert_eq!(tcp.ipv6_ranges[0].description.as_deref(), Some(c.as_str()));
    let icmpv6 = perms.iter().find(|p| p.protocol == "icmpv6").unwrap();
    assert_eq!((icmpv6.from_port, icmpv6.to_port), (Some(2), Some(0)));
    assert_eq!(icmpv6.ipv6_ranges[0].description.as_deref(), Some(MTU_RULE));
}

// --- plan ---

#[test]
fn a_fresh_target_group_gets_client_health_and_mtu_rules_in_one_call_then_nothing() {
    let a = access(&[("tcp", 30080)], &["203.0.113.0/24"], &[30080], &["i-1", "i-2"]);
    let g = group("sg-n", tagged(), &[rule("tcp", 22, 22, "0.0.0.0/0", "")]);
    let obs = observed(
        vec![g.clone()],
        &[("i-1", "sg-n"), ("i-2", "sg-n")],
        &["10.1.1.0/24"],
    );
    let changes = plan(&a, &obs);
    assert_eq!(
        changes,
        vec![RuleChange::Authorize {
            group: "sg-n".into(),
            rules: vec![
                rule("icmp", 3, 4, "203.0.113.0/24", MTU_RULE),
                rule("tcp", 30080, 30080, "10.1.1.0/24", &health(LB)),
                rule("tcp", 30080, 30080, "203.0.113.0/24", &client(LB)),
            ],
        }]
    );
    let after = observed(
        vec![applied(&g, &changes)],
        &[("i-1", "sg-n"), ("i-2", "sg-n")],
        &["10.1.1.0/24"],
    );
    assert_eq!(plan(&a, &after), vec![]);
}

#[test]
fn a_changed_port_is_added_before_the_old_one_goes() {
    let a = access(&[("tcp", 30081)], &["0.0.0.0/0"], &[30081], &["i-1"]);
    let g = group(
        "sg-n",
        tagged(),
        &[
            rule("tcp", 30080, 30080, "0.0.0.0/0", &client(LB)),
            rule("icmp", 3, 4, "0.0.0.0/0", MTU_RULE),
        ],
    );
    let changes = plan(&a, &observed(vec![g], &[("i-1", "sg-n")], &[]));
    assert_eq!(
        changes,
        vec![
            RuleChange::Authorize {
                group: "sg-n".into(),
                rules: vec![rule("tcp", 30081, 30081, "0.0.0.0/0", &client(LB))],
            },
            RuleChange::Revoke {
                group: "sg-n".into(),
                rules: vec![rule("tcp", 30080, 30080, "0.0.0.0/0", &client(LB))],
            },
        ]
    );
}

#[test]
fn a_rule_changing_description_is_revoked_before_it_is_added_again() {
    // The health port becomes a client port from the same CIDR: one AWS rule, another description.
    let a = access(&[("tcp", 30080)], &["10.1.1.0/24"], &[], &["i-1"]);
    let g = group(
        "sg-n",
        tagged(),
        &[rule("tcp", 30080, 30080, "10.1.1.0/24", &health(LB))],
    );
    let obs = observed(vec![g.clone()], &[("i-1", "sg-n")], &[]);
    let changes = plan(&a, &obs);
    assert!(matches!(changes[0], RuleChange::Revoke { .. }), "{changes:?}");
    assert!(matches!(changes[1], RuleChange::Authorize { .. }), "{changes:?}");
    assert_eq!(changes.len(), 2);
    let after = observed(vec![applied(&g, &changes)], &[("i-1", "sg-n")], &[]);
    assert_eq!(plan(&a, &after), vec![]);
}

#[test]
fn a_rule_present_under_another_description_is_not_added_again() {
    let a = access(&[("tcp", 10256)], &["0.0.0.0/0"], &[], &["i-1"]);
    let g = group(
        "sg-n",
        tagged(),
        &[
            rule("tcp", 10256, 10256, "0.0.0.0/0", "opened by hand"),
            rule("icmp", 3, 4, "0.0.0.0/0", ""),
        ],
    );
    assert_eq!(plan(&a, &observed(vec![g], &[("i-1", "sg-n")], &[])), vec![]);
}

#[test]
fn stale_rules_leave_former_targets_and_nothing_else_is_touched() {
    let a = access(&[("tcp", 30080)], &["203.0.113.0/24"], &[], &["i-1"]);
    let mine = rule("tcp", 30080, 30080, "203.0.113.0/24", &client(LB));
    let my_health = rule("tcp", 30080, 30080, "10.1.1.0/24", &health(LB));
    let theirs = rule("tcp", 31000, 31000, "198.51.100.0/24", &client(OTHER));
    let by_hand = rule("tcp", 22, 22, "0.0.0.0/0", "");
    // Our name with a suffix: another load balancer's rule, not ours.
    let lookalike = rule(
        "tcp",
        30080,
        30080,
        "198.51.100.0/24",
        &format!("{}0", client(LB)),
    );
    let target = group(
        "sg-target",
        tagged(),
        &[mine.clone(), DescribedRule::mtu("203.0.113.0/24")],
    );
    // A former target: our rules go, with the MTU rule only ours needed; the rest stays.
    let former = group(
        "sg-former",
        tagged(),
        &[
            mine.clone(),
            my_health.clone(),
            DescribedRule::mtu("203.0.113.0/24"),
            theirs.clone(),
            DescribedRule::mtu("198.51.100.0/24"),
            by_hand.clone(),
            lookalike.clone(),
        ],
    );
    // A group with only other people's rules and a stale MTU rule: not ours to clean.
    let unrelated = group(
        "sg-unrelated",
        tagged(),
        &[theirs.clone(), DescribedRule::mtu("192.0.2.0/24")],
    );
    let obs = observed(
        vec![former.clone(), target, unrelated],
        &[("i-1", "sg-target")],
        &[],
    );
    let changes = plan(&a, &obs);
    assert_eq!(
        changes,
        vec![RuleChange::Revoke {
            group: "sg-former".into(),
            rules: vec![DescribedRule::mtu("203.0.113.0/24"), my_health, mine],
        }]
    );
    let left = described_rules(&applied(&former, &changes));
    assert!(left.contains(&theirs) && left.contains(&by_hand) && left.contains(&lookalike));
    assert!(left.contains(&DescribedRule::mtu("198.51.100.0/24")));
}

#[test]
fn the_mtu_rule_stays_while_another_load_balancer_uses_the_cidr() {
    let a = access(&[("tcp", 30081)], &["10.0.0.0/8"], &[], &["i-1"]);
    let g = group(
        "sg-n",
        tagged(),
        &[
            rule("tcp", 30080, 30080, "0.0.0.0/0", &client(LB)),
            rule("tcp", 31000, 31000, "0.0.0.0/0", &client(OTHER)),
            DescribedRule::mtu("0.0.0.0/0"),
        ],
    );
    let changes = plan(&a, &observed(vec![g], &[("i-1", "sg-n")], &[]));
    assert_eq!(
        authorized(&changes),
        [
            rule("tcp", 30081, 30081, "10.0.0.0/8", &client(LB)),
            DescribedRule::mtu("10.0.0.0/8"),
        ]
        .into_iter()
        .collect()
    );
    assert_eq!(
        revoked(&changes),
        [rule("tcp", 30080, 30080, "0.0.0.0/0", &client(LB))]
            .into_iter()
            .collect()
    );
    // Another load balancer's client rule without its MTU rule (it has not reconciled yet): added here.
    let g2 = group(
        "sg-n",
        tagged(),
        &[rule("tcp", 31000, 31000, "198.51.100.7/32", &client(OTHER))],
    );
    let changes = plan(&a, &observed(vec![g2], &[("i-1", "sg-n")], &[]));
    assert!(authorized(&changes).contains(&DescribedRule::mtu("198.51.100.7/32")));
}

#[test]
fn deletion_revokes_every_rule_of_the_load_balancer_and_its_unshared_mtu_rules() {
    let mine = rule("udp", 30053, 30053, "0.0.0.0/0", &client(LB));
    let mine_v6 = rule("udp", 30053, 30053, "::/0", &client(LB));
    let my_health = rule("tcp", 32000, 32000, "10.1.1.0/24", &health(LB));
    let theirs = rule("tcp", 31000, 31000, "0.0.0.0/0", &client(OTHER));
    let g = group(
        "sg-n",
        tagged(),
        &[
            mine.clone(),
            mine_v6.clone(),
            my_health.clone(),
            theirs,
            DescribedRule::mtu("0.0.0.0/0"),
            DescribedRule::mtu("::/0"),
        ],
    );
    // Observed with the last targets (instance_groups filled) or without: the same plan.
    for targets in [&[("i-1", "sg-n")][..], &[]] {
        let changes = plan(&NodeAccess::none(LB), &observed(vec![g.clone()], targets, &[]));
        assert_eq!(
            revoked(&changes),
            [
                mine.clone(),
                mine_v6.clone(),
                my_health.clone(),
                DescribedRule::mtu("::/0")
            ]
            .into_iter()
            .collect()
        );
        assert!(authorized(&changes).is_empty());
        let after = observed(vec![applied(&g, &changes)], targets, &[]);
        assert_eq!(plan(&NodeAccess::none(LB), &after), vec![]);
    }
}

#[test]
fn observed_protocol_numbers_and_cidr_spellings_match_the_desired_rules() {
    let a = access(&[("TCP", 30080)], &["2001:DB8::/32"], &[], &["i-1"]);
    let mut g = group("sg-n", tagged(), &[]);
    g.ingress = vec![
        IpPermission {
            protocol: "6".into(),
            from_port: Some(30080),
            to_port: Some(30080),
            ipv6_ranges: vec![IpRange {
                cidr: "2001:db8::/32".into(),
                description: Some(client(LB)),
            }],
            ..IpPermission::default()
        },
        IpPermission {
            protocol: "58".into(),
            from_port: Some(2),
            to_port: Some(0),
            ipv6_ranges: vec![IpRange {
                cidr: "2001:db8::/32".into(),
                description: Some(MTU_RULE.into()),
            }],
            ..IpPermission::default()
        },
    ];
    assert_eq!(plan(&a, &observed(vec![g], &[("i-1", "sg-n")], &[])), vec![]);
}

// --- observe ---

fn instance(id: &str, groups: &[&str]) -> Instance {
    let mut i = Instance::new(InstanceId::new(id), InstanceState::Running);
    i.security_groups = groups.iter().map(|g| SecurityGroupId::new(*g)).collect();
    i
}

fn subnet(id: &str, cidr: &str) -> Subnet {
    let mut s = Subnet::new(SubnetId::new(id), VpcId::new("vpc-1"), "us-east-1a", Tags::new());
    s.cidr_block = Some(cidr.to_owned());
    s
}

fn has(filters: &[Filter], name: &str, values: &[&str]) -> bool {
    filters
        .iter()
        .any(|f| f.name == name && f.values.iter().map(String::as_str).eq(values.iter().copied()))
}

#[tokio::test]
async fn observe_reads_instances_cluster_groups_and_subnets_once_each() {
    let mut ec2 = MockEc2::new();
    ec2.expect_instances_by_id()
        .times(1)
        .withf(|ids| ids.len() == 3)
        .returning(|_| {
            Box::pin(async {
                let mut gone = instance("i-3", &["sg-n"]);
                gone.state = InstanceState::Terminated;
                Ok(vec![
                    instance("i-1", &["sg-n", "sg-extra"]),
                    instance("i-2", &["sg-n"]),
                    gone,
                ])
            })
        });
    ec2.expect_security_groups()
        .times(1)
        .withf(|f| has(f, "tag-key", &["kubernetes.io/cluster/c1"]) && has(f, "vpc-id", &["vpc-1"]))
        .returning(|_| {
            Box::pin(async {
                Ok(vec![
                    group("sg-n", tagged(), &[]),
                    group(
                        "sg-former",
                        Tags::from([("kubernetes.io/cluster/c1".into(), "shared".into())]),
                        &[],
                    ),
                ])
            })
        });
    // sg-extra is untagged, but i-1 has a tagged group: not read, not touched.
    ec2.expect_subnets()
        .times(1)
        .withf(|f| has(f, "subnet-id", &["subnet-a", "subnet-b"]))
        .returning(|_| {
            Box::pin(async {
                Ok(vec![
                    subnet("subnet-b", "10.1.2.0/24"),
                    subnet("subnet-a", "10.1.1.0/24"),
                ])
            })
        });
    let a = access(
        &[("tcp", 30080)],
        &["0.0.0.0/0"],
        &[32000],
        &["i-2", "i-1", "i-3"],
    );
    let obs = observe(
        &ec2,
        &config(),
        &a,
        &[SubnetId::new("subnet-b"), SubnetId::new("subnet-a")],
    )
    .await
    .unwrap();
    let ids: Vec<&str> = obs.groups.iter().map(|g| g.id.as_str()).collect();
    assert_eq!(ids, ["sg-former", "sg-n"]);
    assert_eq!(
        obs.instance_groups,
        BTreeMap::from([
            ("i-1".to_owned(), SecurityGroupId::new("sg-n")),
            ("i-2".to_owned(), SecurityGroupId::new("sg-n")),
        ])
    );
    assert_eq!(obs.health_sources, ["10.1.1.0/24", "10.1.2.0/24"]);
}

#[tokio::test]
async fn observe_reads_untagged_instance_groups_in_one_more_call_and_skips_foreign_ones() {
    let mut ec2 = MockEc2::new();
    ec2.expect_instances_by_id().times(1).returning(|_| {
        Box::pin(async {
            Ok(vec![
                instance("i-1", &["sg-plain"]),
                instance("i-2", &["sg-plain", "sg-foreign"]),
            ])
        })
    });
    ec2.expect_security_groups()
        .times(1)
        .withf(|f| has(f, "tag-key", &["kubernetes.io/cluster/c1"]))
        .returning(|_| Box::pin(async { Ok(vec![]) }));
    ec2.expect_security_groups()
        .times(1)
        .withf(|f| has(f, "group-id", &["sg-foreign", "sg-plain"]))
        .returning(|_| {
            Box::pin(async {
                Ok(vec![
                    group("sg-plain", Tags::new(), &[]),
                    group(
                        "sg-foreign",
                        Tags::from([("kubernetes.io/cluster/other".into(), "owned".into())]),
                        &[],
                    ),
                ])
            })
        });
    // Health covered by the clients: the subnets are not read.
    let a = access(&[("tcp", 30080)], &["0.0.0.0/0"], &[30080], &["i-1", "i-2"]);
    let obs = observe(&ec2, &config(), &a, &[SubnetId::new("subnet-a")])
        .await
        .unwrap();
    let ids: Vec<&str> = obs.groups.iter().map(|g| g.id.as_str()).collect();
    assert_eq!(ids, ["sg-plain"]);
    assert_eq!(obs.instance_groups.len(), 2);
    assert!(obs.health_sources.is_empty());
}

#[tokio::test]
async fn observe_for_deletion_reads_only_the_cluster_groups() {
    let mut ec2 = MockEc2::new();
    ec2.expect_security_groups()
        .times(1)
        .returning(|_| Box::pin(async { Ok(vec![group("sg-n", tagged(), &[])]) }));
    let obs = observe(
        &ec2,
        &config(),
        &NodeAccess::none(LB),
        &[SubnetId::new("subnet-a")],
    )
    .await
    .unwrap();
    assert_eq!(obs.groups.len(), 1);
    assert!(obs.instance_groups.is_empty());
}

#[tokio::test]
async fn observe_in_legacy_mode_also_reads_groups_with_the_legacy_tag() {
    let mut ec2 = MockEc2::new();
    ec2.expect_security_groups()
        .times(1)
        .withf(|f| has(f, "tag-key", &["kubernetes.io/cluster/c1"]))
        .returning(|_| Box::pin(async { Ok(vec![]) }));
    ec2.expect_security_groups()
        .times(1)
        .withf(|f| has(f, "tag:KubernetesCluster", &["c1"]))
        .returning(|_| {
            Box::pin(async {
                Ok(vec![group(
                    "sg-old",
                    Tags::from([("KubernetesCluster".into(), "c1".into())]),
                    &[],
                )])
            })
        });
    let config = LoadBalancerConfig::new(ClusterTags::new("c1", true).unwrap(), VpcId::new("vpc-1"));
    let obs = observe(&ec2, &config, &NodeAccess::none(LB), &[]).await.unwrap();
    assert_eq!(obs.groups[0].id.as_str(), "sg-old");
}

#[tokio::test]
async fn an_instance_with_two_cluster_groups_is_an_error_naming_them() {
    let mut ec2 = MockEc2::new();
    ec2.expect_instances_by_id()
        .returning(|_| Box::pin(async { Ok(vec![instance("i-1", &["sg-a", "sg-b"])]) }));
    ec2.expect_security_groups().returning(|_| {
        Box::pin(async { Ok(vec![group("sg-a", tagged(), &[]), group("sg-b", tagged(), &[])]) })
    });
    let a = access(&[("tcp", 30080)], &["0.0.0.0/0"], &[30080], &["i-1"]);
    let err = observe(&ec2, &config(), &a, &[]).await.unwrap_err();
    match &err {
        Error::AmbiguousInstanceGroups { instance, groups, .. } => {
            assert_eq!(instance, "i-1");
            assert_eq!(groups, &["sg-a", "sg-b"]);
        }
        other => panic!("{other:?}"),
    }
    assert!(err.to_string().contains("sg-a") && err.to_string().contains("sg-b"));
}

#[tokio::test]
async fn a_missing_load_balancer_subnet_is_an_error_not_a_revocation() {
    let mut ec2 = MockEc2::new();
    ec2.expect_instances_by_id()
        .returning(|_| Box::pin(async { Ok(vec![instance("i-1", &["sg-n"])]) }));
    ec2.expect_security_groups()
        .returning(|_| Box::pin(async { Ok(vec![group("sg-n", tagged(), &[])]) }));
    ec2.expect_subnets()
        .returning(|_| Box::pin(async { Ok(vec![subnet("subnet-a", "10.1.1.0/24")]) }));
    let a = access(&[("tcp", 30080)], &["0.0.0.0/0"], &[32000], &["i-1"]);
    let err = observe(
        &ec2,
        &config(),
        &a,
        &[SubnetId::new("subnet-a"), SubnetId::new("subnet-gone")],
    )
    .await
    .unwrap_err();
    assert!(format!("{err:?}").contains("subnet-gone"), "{err:?}");
}

// --- apply ---

#[tokio::test]
async fn apply_authorizes_in_one_call_with_descriptions() {
    let mut ec2 = MockEc2::new();
    ec2.expect_authorize_ingress()
        .times(1)
        .withf(|g, p| {
            g.as_str() == "sg-n"
                && p.len() == 2
                && p.iter().flat_map(|p| &p.ip_ranges).all(|r| {
                    r.description
                        .as_deref()
                        .is_some_and(|d| d.starts_with("kubernetes.io/rule/nlb/"))
                })
        })
        .returning(|_, _| Box::pin(async { Ok(()) }));
    let change = RuleChange::Authorize {
        group: "sg-n".into(),
        rules: vec![
            rule("tcp", 30080, 30080, "0.0.0.0/0", &client(LB)),
            DescribedRule::mtu("0.0.0.0/0"),
        ],
    };
    apply(&ec2, &change).await.unwrap();
}

#[tokio::test]
async fn apply_skips_duplicates_rule_by_rule_after_a_conflict() {
    let mut ec2 = MockEc2::new();
    ec2.expect_authorize_ingress()
        .times(1)
        .withf(|_, p| p.len() == 2)
        .returning(|_, _| Box::pin(async { Err(err(ErrorKind::Conflict)) }));
    ec2.expect_authorize_ingress()
        .times(2)
        .withf(|_, p| p.len() == 1)
        .returning(|_, p| {
            let dup = p[0].protocol == "icmp";
            Box::pin(async move {
                if dup {
                    Err(err(ErrorKind::Conflict))
                } else {
                    Ok(())
                }
            })
        });
    let change = RuleChange::Authorize {
        group: "sg-n".into(),
        rules: vec![
            rule("tcp", 30080, 30080, "0.0.0.0/0", &client(LB)),
            DescribedRule::mtu("0.0.0.0/0"),
        ],
    };
    apply(&ec2, &change).await.unwrap();
}

#[tokio::test]
async fn apply_revokes_what_is_left_after_a_not_found() {
    let mut ec2 = MockEc2::new();
    ec2.expect_revoke_ingress()
        .times(1)
        .withf(|_, p| p.len() == 2)
        .returning(|_, _| Box::pin(async { Err(err(ErrorKind::NotFound)) }));
    ec2.expect_revoke_ingress()
        .times(2)
        .withf(|_, p| p.len() == 1)
        .returning(|_, p| {
            let gone = p[0].protocol == "icmp";
            Box::pin(async move {
                if gone {
                    Err(err(ErrorKind::NotFound))
                } else {
                    Ok(())
                }
            })
        });
    let change = RuleChange::Revoke {
        group: "sg-n".into(),
        rules: vec![
            rule("tcp", 30080, 30080, "0.0.0.0/0", &client(LB)),
            DescribedRule::mtu("0.0.0.0/0"),
        ],
    };
    apply(&ec2, &change).await.unwrap();
}

#[tokio::test]
async fn apply_reports_other_failures() {
    let mut ec2 = MockEc2::new();
    ec2.expect_authorize_ingress()
        .times(1)
        .returning(|_, _| Box::pin(async { Err(err(ErrorKind::LimitExceeded)) }));
    ec2.expect_revoke_ingress()
        .times(1)
        .returning(|_, _| Box::pin(async { Err(err(ErrorKind::AccessDenied)) }));
    let rules = vec![rule("tcp", 30080, 30080, "0.0.0.0/0", &client(LB))];
    let add = RuleChange::Authorize {
        group: "sg-n".into(),
        rules: rules.clone(),
    };
    let remove = RuleChange::Revoke {
        group: "sg-n".into(),
        rules,
    };
    assert!(matches!(apply(&ec2, &add).await, Err(Error::Aws { .. })));
    assert!(matches!(apply(&ec2, &remove).await, Err(Error::Aws { .. })));
}

#[test]
fn cidrs_are_compared_in_the_form_aws_keeps() {
    assert_eq!(canonical_cidr("10.1.2.3/8"), "10.0.0.0/8");
    assert_eq!(canonical_cidr(" 0.0.0.0/0"), "0.0.0.0/0");
    assert_eq!(canonical_cidr("198.51.100.7/32"), "198.51.100.7/32");
    assert_eq!(canonical_cidr("2001:DB8:0:0:1::/32"), "2001:db8::/32");
    assert_eq!(canonical_cidr("::/0"), "::/0");
    assert_eq!(canonical_cidr("not-a-cidr"), "not-a-cidr");
    assert_eq!(canonical_cidr("10.0.0.0/33"), "10.0.0.0/33");
}
