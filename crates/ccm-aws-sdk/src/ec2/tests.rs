use ccm_aws_api::ec2::InstanceState;

use super::{convert::permission, *};

#[test]
fn unknown_ids_are_read_from_aws_messages() {
    assert_eq!(
        unknown_instance_ids("The instance IDs 'i-1, i-2' do not exist"),
        BTreeSet::from(["i-1", "i-2"])
    );
    assert_eq!(
        unknown_instance_ids("The instance ID 'i-0abc' does not exist"),
        BTreeSet::from(["i-0abc"])
    );
    // Moto's wording for many IDs (the list joined with ", ").
    assert_eq!(
        unknown_instance_ids("The instance IDs 'i-0123456789abcdef0, i-0fedcba9876543210' do not exist"),
        BTreeSet::from(["i-0123456789abcdef0", "i-0fedcba9876543210"])
    );
}

#[test]
fn messages_without_a_quoted_list_name_no_ids() {
    assert!(unknown_instance_ids("something else").is_empty());
    assert!(unknown_instance_ids("").is_empty());
    assert!(unknown_instance_ids("'").is_empty());
    assert!(unknown_instance_ids("''").is_empty());
    assert!(unknown_instance_ids("The instance ID 'i-1 does not exist").is_empty());
    assert!(unknown_instance_ids("'é'").is_empty());
}

#[test]
fn only_the_first_quoted_span_names_ids() {
    // A later quoted span (a request ID, a parameter) must not merge with the list: the span between the
    // first and the last quote would end in `i-2' (request 'abc`, which is no ID, and leave i-2 unknown.
    assert_eq!(
        unknown_instance_ids("The instance IDs 'i-1, i-2' do not exist (request 'abc')"),
        BTreeSet::from(["i-1", "i-2"])
    );
    assert_eq!(
        unknown_instance_ids("The instance ID 'i-1' does not exist; see 'i-2'"),
        BTreeSet::from(["i-1"])
    );
}

#[test]
fn list_items_that_are_not_instance_ids_are_dropped() {
    assert_eq!(
        unknown_instance_ids("The instance IDs 'i-1,,  i-2 , vol-1, i-, i-x y, i-é' do not exist"),
        BTreeSet::from(["i-1", "i-2"])
    );
}

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
