//! The node rules' planner: narrow rules added before a wide one goes, nothing revoked while other load
//! balancers' needs are unknown, what another load balancer needs kept, foreign rules never touched.

use super::*;
use crate::classic::node_rules::{self, NodeGroups};

fn groups(rules: &[(&str, Vec<SourceRule>)], wanted: &[&str], revocable: &[&str]) -> NodeGroups {
    NodeGroups {
        wanted: wanted.iter().map(|g| SecurityGroupId::new(*g)).collect(),
        rules: rules
            .iter()
            .map(|(g, r)| (SecurityGroupId::new(*g), r.clone()))
            .collect(),
        revocable: revocable.iter().map(|g| SecurityGroupId::new(*g)).collect(),
        others: Some(Default::default()),
        ..NodeGroups::default()
    }
}

fn ports(p: &[i32]) -> BTreeSet<i32> {
    p.iter().copied().collect()
}

fn from() -> GroupRef {
    GroupRef::Id("sg-lb".into())
}

#[test]
fn node_ports_are_the_listeners_node_ports_and_the_health_check_port() {
    let mut c = config();
    c.health_probe = HealthProbeMode::Shared {
        port: 10256,
        path: "/healthz".into(),
    };
    let spec = parse_service(&service(&[], &[(80, 30080), (443, 30443)])).unwrap();
    let d = build(&spec, &[], &c, &[]).unwrap();
    assert_eq!(d.health_check.target, "HTTP:10256/healthz");
    assert_eq!(
        node_rules::node_ports(&d.listeners, &d.health_check),
        ports(&[10256, 30080, 30443])
    );
}

#[test]
fn a_wide_rule_goes_only_after_the_narrow_ones_exist() {
    let g = groups(&[("sg-node", vec![wide_rule()])], &["sg-node"], &["sg-node"]);
    assert_eq!(
        node_rules::plan(&from(), &ports(&[30080]), &g),
        [
            Change::AuthorizeNodeAccess {
                group: "sg-node".into(),
                from: from(),
                ports: vec![30080]
            },
            Change::RevokeNodeAccess {
                group: "sg-node".into(),
                from: from(),
                rules: vec![wide_rule()]
            },
        ]
    );
    // Not revocable (an untagged group with a given source): narrow rules added, the wide one kept.
    let kept = groups(&[("sg-node", vec![wide_rule()])], &["sg-node"], &[]);
    assert_eq!(node_rules::plan(&from(), &ports(&[30080]), &kept).len(), 1);
}

#[test]
fn nothing_is_revoked_while_other_load_balancers_needs_are_unknown() {
    let stale = SourceRule::narrow(30999, "other");
    let mut g = groups(&[("sg-old", vec![stale.clone(), wide_rule()])], &[], &["sg-old"]);
    g.others = None;
    assert_eq!(node_rules::plan(&from(), &ports(&[30080]), &g), []);
    assert!(
        node_rules::may_revoke(&ports(&[30080]), &g),
        "so observe reads them"
    );
    g.others = Some(Default::default());
    assert_eq!(
        node_rules::plan(&from(), &ports(&[30080]), &g),
        [Change::RevokeNodeAccess {
            group: "sg-old".into(),
            from: from(),
            rules: vec![stale, wide_rule()]
        }]
    );
}

#[test]
fn what_another_load_balancer_needs_stays_and_blocks_the_wide_rule() {
    let mine = SourceRule::narrow(30080, NAME);
    let health = SourceRule::narrow(10256, NAME);
    let mut g = groups(
        &[("sg-node", vec![mine.clone(), health, wide_rule()])],
        &[],
        &["sg-node"],
    );
    // Another load balancer of the same source sends to 10256 and 30200 on this group; 30200 has no narrow rule
    // yet, so its wide rule is what lets it in.
    g.others = Some([(SecurityGroupId::new("sg-node"), ports(&[10256, 30200]))].into());
    assert_eq!(
        node_rules::plan(&from(), &BTreeSet::new(), &g),
        [Change::RevokeNodeAccess {
            group: "sg-node".into(),
            from: from(),
            rules: vec![mine]
        }]
    );
}

#[test]
fn foreign_rules_from_the_source_are_never_touched() {
    let by_hand = SourceRule {
        protocol: "tcp".into(),
        from_port: Some(30080),
        to_port: Some(30080),
        description: Some("ssh from the bastion".into()),
    };
    let range = SourceRule {
        protocol: "tcp".into(),
        from_port: Some(30000),
        to_port: Some(32767),
        description: Some(format!("{}x", node_rules::NODE_RULE_PREFIX)),
    };
    let g = groups(&[("sg-node", vec![by_hand, range])], &["sg-node"], &["sg-node"]);
    // 30080 exists under another description (AWS keeps one rule per port and source): taken as present.
    assert_eq!(node_rules::plan(&from(), &ports(&[30080]), &g), []);
    assert_eq!(node_rules::plan(&from(), &BTreeSet::new(), &g), []);
}

#[test]
fn a_rule_only_an_nlb_needs_is_handed_over_not_revoked() {
    let listener = SourceRule::narrow(30500, NAME);
    let health = SourceRule::narrow(10256, NAME);
    let by_hand = SourceRule {
        description: Some("kube-proxy health from the load balancers".into()),
        ..SourceRule::narrow(10257, NAME)
    };
    let mut g = groups(
        &[("sg-node", vec![listener.clone(), health.clone(), by_hand])],
        &[],
        &["sg-node"],
    );
    let heir = "kubernetes.io/rule/nlb/health=nlb-b".to_owned();
    g.heirs = [
        ((SecurityGroupId::new("sg-node"), 10256), heir.clone()),
        ((SecurityGroupId::new("sg-node"), 10257), heir.clone()),
    ]
    .into();
    // Deleting: the listener's rule goes; the shared health rule is the NLB's from now on; a rule described by
    // somebody else is never touched, whoever needs its port.
    assert_eq!(
        node_rules::plan(&from(), &BTreeSet::new(), &g),
        [
            Change::HandOverNodeAccess {
                group: "sg-node".into(),
                from: from(),
                rules: vec![health.clone()],
                heirs: vec![SourceRule {
                    description: Some(heir),
                    ..health
                }],
            },
            Change::RevokeNodeAccess {
                group: "sg-node".into(),
                from: from(),
                rules: vec![listener]
            },
        ]
    );
    // While this load balancer still sends to 10256 there, nothing is handed over.
    g.wanted = [SecurityGroupId::new("sg-node")].into();
    assert_eq!(
        node_rules::plan(&from(), &ports(&[10256]), &g),
        [Change::RevokeNodeAccess {
            group: "sg-node".into(),
            from: from(),
            rules: vec![SourceRule::narrow(30500, NAME)]
        }]
    );
}

#[tokio::test]
async fn nlbs_named_by_rules_from_the_source_are_the_heirs() {
    use ccm_aws_api::elbv2::{LoadBalancerV2, MockElbv2, TargetGroup};
    let client = |name: &str| SourceRule {
        description: Some(format!("kubernetes.io/rule/nlb/client={name}")),
        ..SourceRule::narrow(30600, NAME)
    };
    let g = groups(
        &[("sg-node", vec![client("nlb-b"), client("nlb-other-source")])],
        &[],
        &[],
    );
    let mut elbv2 = MockElbv2::new();
    elbv2.expect_load_balancer().returning(|name| {
        let mut lb = LoadBalancerV2::new(&format!("arn:{name}"), name, "dns");
        if name == "nlb-b" {
            lb.security_groups = vec![SecurityGroupId::new("sg-lb")];
        }
        Box::pin(async move { Ok(Some(lb)) })
    });
    elbv2.expect_target_groups().times(1).returning(|_| {
        let mut traffic = TargetGroup::new("arn:tg", "tg", "TCP", 30600);
        traffic.health_check.port = Some("10256".into());
        let mut udp = TargetGroup::new("arn:tg-udp", "tg-udp", "UDP", 30601);
        udp.health_check.port = Some("10256".into());
        Box::pin(async move { Ok(vec![traffic, udp]) })
    });
    let heirs = node_rules::network_heirs(&elbv2, &SecurityGroupId::new("sg-lb"), &g)
        .await
        .unwrap();
    let node = SecurityGroupId::new("sg-node");
    assert_eq!(
        heirs,
        [
            (
                (node.clone(), 10256),
                "kubernetes.io/rule/nlb/health=nlb-b".to_owned()
            ),
            ((node, 30600), "kubernetes.io/rule/nlb/client=nlb-b".to_owned()),
        ]
        .into(),
        "an NLB's TCP traffic ports and health ports (not UDP's 30601); one using another group needs nothing"
    );
}
