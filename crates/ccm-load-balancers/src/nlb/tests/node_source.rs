//! The nodes' rules of an NLB with security groups reference its group.

use super::*;
use crate::nlb::node_rules::{
    self, CLIENT_RULE_PREFIX, DescribedRule, MANAGED_GROUP_SOURCE, RuleChange, described_rules, permissions,
};

fn with_node_rules(annotations: &[(Key, &str)]) -> Desired {
    let c = config().with_nlb_managed_security_groups(true);
    build_with(annotations, &[(80, 30080)], &c).unwrap()
}

/// The nodes' group `sg-node` of both instances, holding `rules`.
fn nodes(rules: &[DescribedRule]) -> node_rules::Observed {
    let mut g = SecurityGroup::new(
        SecurityGroupId::new("sg-node"),
        "nodes",
        None,
        config().cluster.ownership_tags(),
    );
    g.ingress = permissions(rules);
    let mut observed = node_rules::Observed {
        groups: vec![g],
        ..node_rules::Observed::default()
    };
    for i in ["i-1", "i-2"] {
        observed
            .instance_groups
            .insert(i.into(), SecurityGroupId::new("sg-node"));
    }
    observed
}

fn client_rule(source: &str) -> DescribedRule {
    DescribedRule {
        rule: Rule {
            protocol: "tcp".into(),
            from_port: 30080,
            to_port: 30080,
            source: source.into(),
        },
        description: format!("{CLIENT_RULE_PREFIX}{NAME}"),
    }
}

#[test]
fn the_source_is_the_nlbs_own_group_when_it_has_one() {
    let managed = with_node_rules(&[]);
    let given = with_node_rules(&[(Key::SecurityGroups, "sg-0b,sg-0a")]);
    let mut unmanaged_config = config();
    unmanaged_config.manage_node_security_groups = true;
    let unmanaged = build_with(&[], &[(80, 30080)], &unmanaged_config).unwrap();
    let mut lb = LoadBalancerV2::new("arn:lb", NAME, "x");
    lb.security_groups = vec![SecurityGroupId::new("sg-0current")];
    let groupless = LoadBalancerV2::new("arn:lb", NAME, "x");
    let m = SecurityGroupId::new("sg-0managed");
    // Given groups: the first one as given, whatever the NLB has now.
    assert_eq!(given.node_rule_source(None, None, true).as_deref(), Some("sg-0b"));
    assert_eq!(
        given.node_rule_source(Some(&lb), None, false).as_deref(),
        Some("sg-0b")
    );
    // Managed: the group found; one this run creates; in a host update the NLB's current group.
    assert_eq!(
        managed.node_rule_source(Some(&lb), Some(&m), true).as_deref(),
        Some("sg-0managed")
    );
    assert_eq!(
        managed.node_rule_source(Some(&lb), None, true).as_deref(),
        Some(MANAGED_GROUP_SOURCE)
    );
    assert_eq!(
        managed.node_rule_source(None, None, true).as_deref(),
        Some(MANAGED_GROUP_SOURCE)
    );
    assert_eq!(
        managed.node_rule_source(Some(&lb), None, false).as_deref(),
        Some("sg-0current")
    );
    // An NLB created without groups keeps CIDR rules, as does one whose groups are not managed.
    assert_eq!(managed.node_rule_source(Some(&groupless), Some(&m), true), None);
    assert_eq!(given.node_rule_source(Some(&groupless), None, true), None);
    assert_eq!(unmanaged.node_rule_source(None, None, true), None);
}

#[test]
fn a_new_nlb_references_the_managed_group_it_creates() {
    let d = with_node_rules(&[]);
    let observed = Observed {
        node_rules: Some(nodes(&[])),
        node_rule_source: d.node_rule_source(None, None, true),
        ..Observed::default()
    };
    let changes = plan(&d, &observed);
    let rules: Vec<&RuleChange> = changes
        .iter()
        .filter_map(|c| match c {
            Change::NodeRules(r) => Some(r),
            _ => None,
        })
        .collect();
    let [RuleChange::Authorize { rules, .. }] = rules.as_slice() else {
        panic!("{changes:#?}")
    };
    assert_eq!(
        rules,
        &[client_rule(MANAGED_GROUP_SOURCE)],
        "one rule, no CIDR, no MTU rule"
    );
    assert_eq!(kinds(&changes)[0], "create_security_group");
}

#[test]
fn leaving_the_managed_group_for_given_ones_keeps_access_until_the_group_is_deleted() {
    let managed = with_node_rules(&[]);
    let byo = with_node_rules(&[(Key::SecurityGroups, "sg-byo")]);
    let mut o = converged(&managed);
    let old = client_rule("sg-managed");
    o.node_rules = Some(nodes(std::slice::from_ref(&old)));
    o.node_rule_source = byo.node_rule_source(
        o.load_balancer.as_ref(),
        Some(&SecurityGroupId::new("sg-managed")),
        true,
    );
    o.references = vec![(
        SecurityGroupId::new("sg-node"),
        ReferencePermission {
            protocol: "tcp".into(),
            from_port: Some(30080),
            to_port: Some(30080),
            source: "sg-managed".into(),
        },
    )];
    let changes = plan(&byo, &o);
    assert_eq!(
        kinds(&changes),
        [
            "set_security_groups",
            "node_rules",
            "node_rules",
            "delete_security_group"
        ],
        "{changes:#?}"
    );
    assert_eq!(
        changes[1],
        Change::NodeRules(RuleChange::Authorize {
            group: "sg-node".into(),
            rules: vec![client_rule("sg-byo")]
        })
    );
    // The old rule goes with the nodes' rules, not a second time as a reference.
    assert_eq!(
        changes[2],
        Change::NodeRules(RuleChange::Revoke {
            group: "sg-node".into(),
            rules: vec![old]
        })
    );
}

#[test]
fn deleting_an_nlb_revokes_its_group_rules_once() {
    let old = client_rule("sg-m");
    let observed = DeleteObserved {
        load_balancer: Some(LoadBalancerV2::new("arn:lb", NAME, "x")),
        managed_group: Some(SecurityGroupId::new("sg-m")),
        references: vec![(
            SecurityGroupId::new("sg-node"),
            ReferencePermission {
                protocol: "6".into(),
                from_port: Some(30080),
                to_port: Some(30080),
                source: "sg-m".into(),
            },
        )],
        node_rules: Some(nodes(std::slice::from_ref(&old))),
        ..DeleteObserved::default()
    };
    let changes = plan_delete(NAME, &observed);
    assert_eq!(
        kinds(&changes),
        ["node_rules", "delete_load_balancer", "delete_security_group"],
        "{changes:#?}"
    );
    let node_rules = nodes(std::slice::from_ref(&old));
    assert!(
        described_rules(&node_rules.groups[0]).contains(&old),
        "read back from the group's permissions"
    );
}
