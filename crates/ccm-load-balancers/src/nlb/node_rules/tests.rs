use super::*;
use crate::LoadBalancerConfig;
use ccm_aws_api::{
    AwsError, ErrorKind, Filter, InstanceId, SubnetId, Tags, VpcId,
    ec2::{Instance, InstanceState, IpRange, MockEc2, Subnet},
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
        source_group: None,
        ipv6: false,
    }
}

fn rule(protocol: &str, from: i32, to: i32, cidr: &str, description: &str) -> DescribedRule {
    DescribedRule {
        rule: Rule {
            protocol: protocol.to_owned(),
            from_port: from,
            to_port: to,
            source: cidr.to_owned(),
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
        subnets_without_interfaces: Vec::new(),
        not_running: Default::default(),
        skipped: Default::default(),
        heirs: Default::default(),
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

mod group_source;
mod interfaces;
mod observe_apply;
