use ccm_aws_api::ec2::InstanceState;

use super::{convert::permission, *};

#[test]
fn interfaces_come_in_device_order_with_primary_addresses_first() {
    let eni = |id: &str, index: Option<i32>, ips: &[(&str, bool)]| {
        let mut b = sdk::InstanceNetworkInterface::builder()
            .network_interface_id(id)
            .status(sdk::NetworkInterfaceStatus::InUse);
        if let Some(index) = index {
            b = b.attachment(
                sdk::InstanceNetworkInterfaceAttachment::builder()
                    .device_index(index)
                    .build(),
            );
        }
        for (ip, primary) in ips {
            b = b.private_ip_addresses(
                sdk::InstancePrivateIpAddress::builder()
                    .private_ip_address(*ip)
                    .primary(*primary)
                    .build(),
            );
        }
        b.build()
    };
    let sdk_instance = sdk::Instance::builder()
        .instance_id("i-1")
        .state(
            sdk::InstanceState::builder()
                .name(sdk::InstanceStateName::Running)
                .build(),
        )
        .network_interfaces(eni("eni-none", None, &[("10.0.0.9", true)]))
        .network_interfaces(eni("eni-2", Some(2), &[("10.0.0.2", true)]))
        .network_interfaces(eni(
            "eni-0",
            Some(0),
            &[("10.0.0.5", false), ("10.0.0.1", true), ("10.0.0.6", false)],
        ))
        .private_dns_name("")
        .tags(sdk::Tag::builder().key("Name").value("n").build())
        .build();
    let out = instance(&sdk_instance).unwrap();
    assert_eq!(out.state, InstanceState::Running);
    assert_eq!(out.private_dns_name, None, "empty strings are absent");
    assert_eq!(out.tags, Tags::from([("Name".to_owned(), "n".to_owned())]));
    let ids: Vec<&str> = out.network_interfaces.iter().map(|n| n.id.as_str()).collect();
    assert_eq!(ids, ["eni-0", "eni-2", "eni-none"]);
    assert_eq!(
        out.network_interfaces[0].private_ips,
        ["10.0.0.1", "10.0.0.5", "10.0.0.6"]
    );
    assert!(out.network_interfaces[0].is_in_use());
}

#[test]
fn all_traffic_rules_carry_no_ports() {
    let rule = sdk_permission(&IpPermission::all_from_group("sg-1".into()));
    assert_eq!(rule.ip_protocol(), Some("-1"));
    assert_eq!(rule.from_port(), None);
    assert_eq!(rule.user_id_group_pairs()[0].group_id(), Some("sg-1"));
    let back = permission(&rule);
    assert_eq!(back, IpPermission::all_from_group("sg-1".into()));
}
