//! Services of the IPv6 family only: a dual-stack NLB whose target groups are IPv6 (another group name, so a
//! change of family is a new group made before the old one goes), the pods' IPv6 addresses as IP targets, and
//! client rules from IPv6 ranges.

use std::net::IpAddr;

use ccm_aws_api::elbv2::TargetIpFamily;
use ccm_cloud_provider::{Endpoint, EndpointPort, ServiceEndpoints};

use super::*;
use crate::spec::IpAddressType;

fn with_families(mut svc: Service, families: &[&str]) -> Service {
    let spec = svc.spec.as_mut().unwrap();
    spec.ip_families = Some(families.iter().map(|f| (*f).to_owned()).collect());
    spec.ip_family_policy = Some(
        if families.len() > 1 {
            "RequireDualStack"
        } else {
            "SingleStack"
        }
        .to_owned(),
    );
    svc
}

fn desired_of(svc: &Service, endpoints: Option<&ServiceEndpoints>) -> Desired {
    let n1 = node("i-1");
    let spec = parse_service(svc).unwrap().with_endpoints(endpoints);
    build(
        &spec,
        &[&n1],
        &config(),
        "kubernetes",
        &[SubnetId::new("subnet-a")],
    )
    .unwrap()
}

#[test]
fn an_ipv6_only_service_gets_ipv6_groups_under_another_name_with_a_warning() {
    let v6 = with_families(nlb_service(&[], &[(80, 30080)]), &["IPv6"]);
    let spec = parse_service(&v6).unwrap();
    assert!(spec.ipv6_targets);
    assert_eq!(spec.ip_address_type, IpAddressType::Dualstack);
    let warning = spec
        .warnings
        .iter()
        .find(|w| w.field == "spec.ipFamilies")
        .unwrap();
    assert!(warning.message.contains("dual-stack NLB"), "{warning}");
    let d = desired_of(&v6, None);
    let tg = &d.listeners[0].target_group;
    assert!(tg.ipv6);
    assert_eq!(tg.ip_family(), TargetIpFamily::Ipv6);
    // The same Service of the IPv4 family: another group (the family is fixed at creation).
    let v4 = desired_of(&with_families(nlb_service(&[], &[(80, 30080)]), &["IPv4"]), None);
    let v4_group = &v4.listeners[0].target_group;
    assert!(!v4_group.ipv6);
    assert_ne!(v4_group.name, tg.name);
    // Clients reach IPv6 targets from IPv6 ranges: everyone unless the Service names some.
    let access = d.node_access.as_ref().unwrap();
    assert!(access.ipv6);
    assert_eq!(access.client_cidrs, ["::/0"]);
    let mut ranged = v6;
    ranged.spec.as_mut().unwrap().load_balancer_source_ranges =
        Some(vec!["10.0.0.0/8".to_owned(), "2001:db8::/32".to_owned()]);
    let ranged = desired_of(&ranged, None);
    assert_eq!(ranged.node_access.unwrap().client_cidrs, ["2001:db8::/32"]);
}

#[test]
fn dual_stack_services_keep_ipv4_groups_and_the_ipv4_annotation_wins_with_a_warning() {
    let both = parse_service(&with_families(
        nlb_service(&[], &[(80, 30080)]),
        &["IPv4", "IPv6"],
    ))
    .unwrap();
    assert!(!both.ipv6_targets);
    let forced = with_families(
        nlb_service(&[(Key::IpAddressType, "ipv4")], &[(80, 30080)]),
        &["IPv6"],
    );
    let spec = parse_service(&forced).unwrap();
    assert!(!spec.ipv6_targets);
    assert!(
        spec.warnings
            .iter()
            .any(|w| w.field == "spec.ipFamilies" && w.message.contains("IPv4 NLB"))
    );
    // A Classic ELB never has IPv6 targets (an IPv6-only Service is refused there).
    assert!(parse_service(&with_families(service(&[], &[(80, 30080)]), &["IPv6"])).is_err());
}

#[test]
fn ipv6_ip_groups_take_the_pods_ipv6_addresses_only() {
    let mut svc = with_families(
        nlb_service(&[(Key::NlbTargetType, "ip")], &[(80, 30080)]),
        &["IPv6"],
    );
    svc.spec.as_mut().unwrap().selector = Some([("app".to_owned(), "web".to_owned())].into());
    let ports = || vec![EndpointPort::new("p80", 8080, "TCP")];
    let v6: IpAddr = "2001:db8::7".parse().unwrap();
    let endpoints = ServiceEndpoints::new([
        Endpoint::ready(v6, Some("node-i-1"), ports()),
        Endpoint::ready(IpAddr::from([10, 0, 1, 7]), Some("node-i-1"), ports()),
    ]);
    let d = desired_of(&svc, Some(&endpoints));
    let tg = &d.listeners[0].target_group;
    assert!(tg.ipv6);
    let targets: Vec<(String, i32)> = tg.ip_targets.iter().flatten().cloned().collect();
    assert_eq!(targets, [("2001:db8::7".to_owned(), 8080)]);
}
