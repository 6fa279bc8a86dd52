//! `aws-load-balancer-security-group-prefix-lists` on a Classic ELB: rules of its managed group only, planned,
//! kept and revoked like its CIDR rules, and refused where it has no group of its own.

use super::*;
use crate::shared::GroupRef;

const LISTS: &str = "pl-0123456789abcdef0, pl-63a5400a";

fn rule(protocol: &str, port: i32, source: &str) -> Rule {
    Rule {
        protocol: protocol.into(),
        from_port: port,
        to_port: port,
        source: source.into(),
    }
}

fn ingress(desired: &Desired) -> BTreeSet<Rule> {
    desired.managed_group.as_ref().unwrap().ingress.clone()
}

#[test]
fn prefix_lists_are_rules_of_the_managed_group_and_replace_the_default_range() {
    let desired = desired_for(
        &[(Key::SecurityGroupPrefixLists, LISTS)],
        &[(80, 30080), (443, 30443)],
        &["i-1"],
    );
    // Only the lists, on each listener port, without ICMP: 0.0.0.0/0 is not added (as the AWS Load Balancer
    // Controller does).
    assert_eq!(
        ingress(&desired),
        BTreeSet::from([
            rule("tcp", 80, "pl-0123456789abcdef0"),
            rule("tcp", 443, "pl-0123456789abcdef0"),
            rule("tcp", 80, "pl-63a5400a"),
            rule("tcp", 443, "pl-63a5400a"),
        ])
    );
    assert_eq!(desired.security_groups, [GroupRef::Managed]);
    // With source ranges, both are let in.
    let desired = desired_for(
        &[
            (Key::SecurityGroupPrefixLists, "pl-63a5400a"),
            (Key::SourceRanges, "10.0.0.0/8"),
        ],
        &[(80, 30080)],
        &["i-1"],
    );
    assert_eq!(
        ingress(&desired),
        BTreeSet::from([
            rule("tcp", 80, "10.0.0.0/8"),
            Rule {
                protocol: "icmp".into(),
                from_port: 3,
                to_port: 4,
                source: "10.0.0.0/8".into(),
            },
            rule("tcp", 80, "pl-63a5400a"),
        ])
    );
    // The EC2 shape names the list in PrefixListIds, and reading it back gives the same rule.
    let permission = rule("tcp", 80, "pl-63a5400a").to_permission();
    assert_eq!(permission.prefix_lists.len(), 1);
    assert_eq!(permission.prefix_lists[0].id, "pl-63a5400a");
    assert!(permission.ip_ranges.is_empty() && permission.source_groups.is_empty());
}

#[test]
fn a_steady_service_with_prefix_lists_plans_nothing_and_dropped_lists_are_revoked() {
    let desired = desired_for(
        &[(Key::SecurityGroupPrefixLists, LISTS)],
        &[(80, 30080)],
        &["i-1"],
    );
    let observed = converged(&desired);
    assert_eq!(plan(&desired, &observed), Vec::<Change>::new());
    let fewer = desired_for(
        &[(Key::SecurityGroupPrefixLists, "pl-63a5400a")],
        &[(80, 30080)],
        &["i-1"],
    );
    assert_eq!(
        plan(&fewer, &observed),
        [Change::RevokeIngress {
            group: GroupRef::Managed,
            rules: vec![rule("tcp", 80, "pl-0123456789abcdef0")],
        }]
    );
    // The annotation removed: the default range comes back, the lists go.
    let none = desired_for(&[], &[(80, 30080)], &["i-1"]);
    let changes = plan(&none, &observed);
    assert!(
        changes.contains(&Change::RevokeIngress {
            group: GroupRef::Managed,
            rules: vec![
                rule("tcp", 80, "pl-0123456789abcdef0"),
                rule("tcp", 80, "pl-63a5400a")
            ],
        }),
        "{changes:?}"
    );
    assert!(
        changes
            .iter()
            .any(|c| matches!(c, Change::AuthorizeIngress { rules, .. }
            if rules.contains(&rule("tcp", 80, "0.0.0.0/0")))),
        "{changes:?}"
    );
}

#[test]
fn prefix_lists_without_a_group_of_the_load_balancers_own_are_refused() {
    let given = parse_service(&service(
        &[
            (Key::SecurityGroupPrefixLists, "pl-63a5400a"),
            (Key::SecurityGroups, "sg-b1"),
        ],
        &[(80, 30080)],
    ))
    .unwrap();
    let message = build(&given, &[], &config(), &[]).unwrap_err().to_string();
    assert!(
        message.contains(Key::SecurityGroupPrefixLists.name()),
        "{message}"
    );
    assert!(message.contains("aws-load-balancer-security-groups"), "{message}");
    assert!(message.contains("rule quota"), "{message}");
    let mut c = config();
    c.elb_security_group = Some(SecurityGroupId::new("sg-global"));
    let spec = parse_service(&service(
        &[(Key::SecurityGroupPrefixLists, "pl-63a5400a")],
        &[(80, 30080)],
    ))
    .unwrap();
    let message = build(&spec, &[], &c, &[]).unwrap_err().to_string();
    assert!(message.contains("ElbSecurityGroup"), "{message}");
    // Without the annotation both build as before.
    let spec = parse_service(&service(&[(Key::SecurityGroups, "sg-b1")], &[(80, 30080)])).unwrap();
    assert!(build(&spec, &[], &config(), &[]).is_ok());
}

#[test]
fn prefix_list_ids_are_checked_and_name_the_accepted_form() {
    for bad in [
        "sg-0123",
        "pl-",
        "pl-XYZ",
        "pl-0123456789abcdef01",
        "",
        "pl-1 pl-2",
    ] {
        let svc = service(&[(Key::SecurityGroupPrefixLists, bad)], &[(80, 30080)]);
        let e = parse_service(&svc).unwrap_err();
        assert_eq!(e.problems.len(), 1, "{bad:?}: {e}");
        assert_eq!(
            e.problems[0].field,
            Key::SecurityGroupPrefixLists.name(),
            "{bad:?}"
        );
        assert!(e.problems[0].accepted.contains("pl- followed by"), "{bad:?}");
    }
    let spec = parse_service(&service(
        &[(Key::SecurityGroupPrefixLists, LISTS)],
        &[(80, 30080)],
    ))
    .unwrap();
    assert_eq!(spec.prefix_lists, ["pl-0123456789abcdef0", "pl-63a5400a"]);
    assert!(spec.source_ranges.is_empty() && !spec.source_ranges_defaulted);
    // The field's ranges stay, beside the lists.
    let mut svc = service(&[(Key::SecurityGroupPrefixLists, LISTS)], &[(80, 30080)]);
    svc.spec.as_mut().unwrap().load_balancer_source_ranges = Some(vec!["192.168.0.0/16".into()]);
    assert_eq!(parse_service(&svc).unwrap().source_ranges, ["192.168.0.0/16"]);
}
