//! Rules that reference the NLB's own security group instead of CIDRs.

use super::*;

const NLB_GROUP: &str = "sg-0nlb";

/// Three ports from four client ranges, health checks on a separate port: what a large cluster has many of.
fn wide(instances: &[&str]) -> NodeAccess {
    access(
        &[("tcp", 30080), ("tcp", 30443), ("udp", 30053)],
        &["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "203.0.113.0/24"],
        &[32000],
        instances,
    )
}

#[test]
fn rules_from_the_group_are_one_per_port_whatever_the_ranges_and_subnets() {
    let subnets = [
        "10.1.1.0/24".to_owned(),
        "10.1.2.0/24".to_owned(),
        "10.1.3.0/24".to_owned(),
    ];
    let by_cidr = wide(&["i-1"]).rules(&subnets);
    // 3 ports x 4 ranges + 1 health port x 3 subnets.
    assert_eq!(by_cidr.len(), 15);
    let by_group = wide(&["i-1"]).referencing(Some(NLB_GROUP.into())).rules(&subnets);
    assert_eq!(
        by_group,
        BTreeSet::from([
            rule("tcp", 30080, 30080, NLB_GROUP, &client(LB)),
            rule("tcp", 30443, 30443, NLB_GROUP, &client(LB)),
            rule("udp", 30053, 30053, NLB_GROUP, &client(LB)),
            rule("tcp", 32000, 32000, NLB_GROUP, &health(LB)),
        ])
    );
    // A health check on a client port needs no rule of its own.
    let traffic_port = access(&[("tcp", 30080)], &["10.0.0.0/8"], &[30080], &["i-1"]);
    assert_eq!(
        traffic_port.referencing(Some(NLB_GROUP.into())).rules(&subnets),
        BTreeSet::from([rule("tcp", 30080, 30080, NLB_GROUP, &client(LB))])
    );
}

#[test]
fn group_rules_need_no_subnet_read_and_no_mtu_rule() {
    let a = wide(&["i-1"]).referencing(Some(NLB_GROUP.into()));
    assert!(
        !a.needs_health_sources(),
        "health checks come from the group, not the subnets"
    );
    assert!(wide(&["i-1"]).needs_health_sources());
    let g = group("sg-n", tagged(), &[]);
    let changes = plan(&a, &observed(vec![g.clone()], &[("i-1", "sg-n")], &[]));
    assert_eq!(authorized(&changes), a.rules(&[]));
    assert!(!authorized(&changes).iter().any(|r| r.description == MTU_RULE));
    let after = observed(vec![applied(&g, &changes)], &[("i-1", "sg-n")], &[]);
    assert_eq!(plan(&a, &after), vec![], "steady once applied");
    // The group's permissions carry the source group with the description, and read back the same.
    let perms = permissions(&authorized(&changes).into_iter().collect::<Vec<_>>());
    assert!(
        perms
            .iter()
            .all(|p| p.ip_ranges.is_empty() && p.source_groups.len() == 1)
    );
    assert_eq!(perms[0].source_groups[0].group_id.as_str(), NLB_GROUP);
    assert_eq!(
        perms[0].source_groups[0].description.as_deref(),
        Some(client(LB).as_str())
    );
}

#[test]
fn switching_to_the_group_adds_the_new_rules_before_the_cidr_rules_go() {
    let subnets = ["10.1.1.0/24".to_owned()];
    let before = wide(&["i-1"]);
    let mut existing: Vec<DescribedRule> = before.rules(&subnets).into_iter().collect();
    existing.extend(before.client_cidrs.iter().map(|c| DescribedRule::mtu(c.as_str())));
    let g = group("sg-n", tagged(), &existing);
    let after = wide(&["i-1"]).referencing(Some(NLB_GROUP.into()));
    let changes = plan(
        &after,
        &observed(vec![g.clone()], &[("i-1", "sg-n")], &["10.1.1.0/24"]),
    );
    let [
        RuleChange::Authorize { rules: added, .. },
        RuleChange::Revoke { rules: gone, .. },
    ] = changes.as_slice()
    else {
        panic!("one authorization, then one revocation: {changes:#?}");
    };
    assert_eq!(added.iter().cloned().collect::<BTreeSet<_>>(), after.rules(&[]));
    assert_eq!(
        gone.len(),
        existing.len(),
        "every CIDR rule and MTU rule goes: {gone:#?}"
    );
    assert!(gone.iter().all(|r| !shared::is_group_source(&r.rule.source)));
    let done = observed(vec![applied(&g, &changes)], &[("i-1", "sg-n")], &["10.1.1.0/24"]);
    assert_eq!(plan(&after, &done), vec![]);
}

#[test]
fn another_nlbs_cidr_client_rule_keeps_its_mtu_rule_when_this_one_references_its_group() {
    let other = rule("tcp", 31000, 31000, "198.51.100.0/24", &client(OTHER));
    let mtu = DescribedRule::mtu("198.51.100.0/24");
    let g = group("sg-n", tagged(), &[other, mtu.clone()]);
    let a = access(&[("tcp", 30080)], &["0.0.0.0/0"], &[30080], &["i-1"]).referencing(Some(NLB_GROUP.into()));
    let changes = plan(&a, &observed(vec![g], &[("i-1", "sg-n")], &[]));
    assert!(!revoked(&changes).contains(&mtu), "{changes:#?}");
    assert!(!authorized(&changes).iter().any(|r| r.description == MTU_RULE));
}

#[test]
fn deletion_revokes_the_rules_that_reference_the_group() {
    let a = wide(&["i-1"]).referencing(Some(NLB_GROUP.into()));
    let mut present: Vec<DescribedRule> = a.rules(&[]).into_iter().collect();
    let hand_made = rule("tcp", 30080, 30080, "sg-0someone", "");
    present.push(hand_made.clone());
    let g = group("sg-n", tagged(), &present);
    let changes = plan(&NodeAccess::none(LB), &observed(vec![g.clone()], &[], &[]));
    assert_eq!(revoked(&changes), a.rules(&[]));
    let left = described_rules(&applied(&g, &changes));
    assert_eq!(left, BTreeSet::from([hand_made]), "rules of others stay");
}

#[test]
fn the_managed_group_created_in_the_same_run_is_substituted_before_applying() {
    let a = access(&[("tcp", 30080)], &["0.0.0.0/0"], &[30080], &["i-1"])
        .referencing(Some(MANAGED_GROUP_SOURCE.into()));
    let changes = plan(
        &a,
        &observed(vec![group("sg-n", tagged(), &[])], &[("i-1", "sg-n")], &[]),
    );
    let [change] = changes.as_slice() else {
        panic!("{changes:#?}")
    };
    assert!(change.needs_managed_group());
    let resolved = change.with_managed_group("sg-0new");
    assert!(!resolved.needs_managed_group());
    assert_eq!(
        resolved.rules(),
        [rule("tcp", 30080, 30080, "sg-0new", &client(LB))]
    );
}

#[tokio::test]
async fn a_placeholder_source_is_never_sent_to_aws() {
    let ec2 = MockEc2::new();
    let change = RuleChange::Authorize {
        group: "sg-n".into(),
        rules: vec![rule("tcp", 30080, 30080, MANAGED_GROUP_SOURCE, &client(LB))],
    };
    let e = apply(&ec2, &change).await.unwrap_err();
    assert!(e.to_string().contains("managed security group"), "{e}");
}
