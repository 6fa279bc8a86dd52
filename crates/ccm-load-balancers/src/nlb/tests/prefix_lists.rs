//! `aws-load-balancer-security-group-prefix-lists` on an NLB: rules of its managed group (managed-group mode)
//! only, steady once applied, and refused where the NLB has no group of its own.

use super::*;

fn rule(protocol: &str, port: i32, source: &str) -> Rule {
    Rule {
        protocol: protocol.into(),
        from_port: port,
        to_port: port,
        source: source.into(),
    }
}

#[test]
fn prefix_lists_are_rules_of_the_nlbs_managed_group_and_steady_once_applied() {
    let annotations = [(Key::SecurityGroupPrefixLists, "pl-63a5400a")];
    let d = build_with(&annotations, &[(80, 30080), (443, 30443)], &managed_config()).unwrap();
    let Security::Managed(m) = &d.security else {
        panic!("{:?}", d.security)
    };
    // Only the list, on each listener port: neither 0.0.0.0/0 nor ICMP.
    assert_eq!(
        m.ingress,
        BTreeSet::from([rule("tcp", 80, "pl-63a5400a"), rule("tcp", 443, "pl-63a5400a")])
    );
    assert_eq!(plan(&d, &converged(&d)), Vec::<Change>::new());
    // A dual-stack NLB adds no `::/0` either: the lists replace the whole default.
    let dual = [
        (Key::SecurityGroupPrefixLists, "pl-63a5400a"),
        (Key::IpAddressType, "dualstack"),
    ];
    let d = build_with(&dual, &[(80, 30080)], &managed_config()).unwrap();
    let Security::Managed(m) = &d.security else {
        panic!("{:?}", d.security)
    };
    assert_eq!(m.ingress, BTreeSet::from([rule("tcp", 80, "pl-63a5400a")]));
}

#[test]
fn prefix_lists_on_an_nlb_without_a_group_of_its_own_are_refused() {
    let annotations = [(Key::SecurityGroupPrefixLists, "pl-63a5400a")];
    let mut unmanaged = config();
    unmanaged.manage_node_security_groups = true;
    let message = build_with(&annotations, &[(80, 30080)], &unmanaged)
        .unwrap_err()
        .to_string();
    assert!(
        message.contains(Key::SecurityGroupPrefixLists.name()),
        "{message}"
    );
    assert!(message.contains("NLBSecurityGroupMode"), "{message}");
    assert!(message.contains("rule quota"), "{message}");
    let given = [
        (Key::SecurityGroupPrefixLists, "pl-63a5400a"),
        (Key::SecurityGroups, "sg-byo"),
    ];
    let message = build_with(&given, &[(80, 30080)], &managed_config())
        .unwrap_err()
        .to_string();
    assert!(message.contains("aws-load-balancer-security-groups"), "{message}");
}
