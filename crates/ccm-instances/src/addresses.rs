//! Node addresses from an instance (section 3.3 of the reference) or a Fargate interface (3.5).

use std::net::IpAddr;

use ccm_aws_api::{CatalogInstance, ec2::NetworkInterface};
use ccm_cloud_provider::{NodeAddress, NodeAddressType};

use crate::InstancesError;

/// An IP family of node addresses (cloud config `NodeIPFamilies`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IpFamily {
    /// IPv4 addresses, with the public IP and the DNS names.
    Ipv4,
    /// The first IPv6 address of each in-use interface.
    Ipv6,
}

/// The addresses of an EC2 instance, one block per family in `families` order (so the first `InternalIP` is of
/// the first family):
/// - IPv4: the primary private IPv4 of every in-use interface in device order (`InternalIP`; the instance's
///   primary private IP when it reports no interface), its public IP (`ExternalIP`), its private DNS name
///   (`InternalDNS` and `Hostname`) and public DNS name (`ExternalDNS`);
/// - IPv6: the first IPv6 address of every in-use interface in device order (`InternalIP`).
///
/// Unlike upstream, secondary private IPv4s are left out: with the VPC CNI they are pod IPs, not node addresses
/// (kubernetes/cloud-provider-aws#890).
pub fn instance_addresses(
    instance: &CatalogInstance,
    families: &[IpFamily],
) -> Result<Vec<NodeAddress>, InstancesError> {
    let mut out = Vec::new();
    // The catalog keeps the in-use interfaces only, in device order (interfaces without an index last).
    let in_use = || instance.interfaces.iter();
    for family in dedup(families) {
        match family {
            IpFamily::Ipv4 => {
                let mut any = false;
                for eni in in_use() {
                    if let Some(ip) = &eni.private_ip {
                        push_ip(
                            &mut out,
                            instance,
                            "private",
                            NodeAddressType::InternalIp,
                            ip,
                            false,
                        )?;
                        any = true;
                    }
                }
                if !any && let Some(ip) = &instance.private_ip {
                    push_ip(
                        &mut out,
                        instance,
                        "private",
                        NodeAddressType::InternalIp,
                        ip,
                        false,
                    )?;
                }
                if let Some(ip) = &instance.public_ip {
                    push_ip(
                        &mut out,
                        instance,
                        "public",
                        NodeAddressType::ExternalIp,
                        ip,
                        false,
                    )?;
                }
                if let Some(dns) = non_empty(&instance.private_dns_name) {
                    push(&mut out, NodeAddressType::InternalDns, dns);
                    push(&mut out, NodeAddressType::Hostname, dns);
                }
                if let Some(dns) = non_empty(&instance.public_dns_name) {
                    push(&mut out, NodeAddressType::ExternalDns, dns);
                }
            }
            IpFamily::Ipv6 => {
                for eni in in_use() {
                    if let Some(ip) = &eni.ipv6 {
                        push_ip(&mut out, instance, "IPv6", NodeAddressType::InternalIp, ip, true)?;
                    }
                }
            }
        }
    }
    Ok(out)
}

/// The addresses of a Fargate pod's interface: its primary IPv4 and first IPv6 (`InternalIP`, in `families`
/// order), then its private DNS name (`InternalDNS`).
pub fn fargate_addresses(eni: &NetworkInterface, families: &[IpFamily]) -> Vec<NodeAddress> {
    let mut out = Vec::new();
    for family in dedup(families) {
        let ip = match family {
            IpFamily::Ipv4 => eni.private_ips.first(),
            IpFamily::Ipv6 => eni.ipv6_addresses.first(),
        };
        if let Some(ip) = ip {
            push(&mut out, NodeAddressType::InternalIp, ip);
        }
    }
    if out.is_empty() {
        // A Fargate pod of the "wrong" family still needs an address to be reachable at all.
        if let Some(ip) = eni.private_ips.first().or(eni.ipv6_addresses.first()) {
            push(&mut out, NodeAddressType::InternalIp, ip);
        }
    }
    if let Some(dns) = non_empty(&eni.private_dns_name) {
        push(&mut out, NodeAddressType::InternalDns, dns);
    }
    out
}

fn dedup(families: &[IpFamily]) -> Vec<IpFamily> {
    let mut out: Vec<IpFamily> = Vec::with_capacity(2);
    for f in families {
        if !out.contains(f) {
            out.push(*f);
        }
    }
    out
}

fn non_empty(value: &Option<String>) -> Option<&str> {
    value.as_deref().filter(|v| !v.is_empty())
}

fn push(out: &mut Vec<NodeAddress>, type_: NodeAddressType, address: &str) {
    let address = NodeAddress::new(type_, address);
    if !out.contains(&address) {
        out.push(address);
    }
}

fn push_ip(
    out: &mut Vec<NodeAddress>,
    instance: &CatalogInstance,
    kind: &'static str,
    type_: NodeAddressType,
    ip: &str,
    v6: bool,
) -> Result<(), InstancesError> {
    match ip.parse::<IpAddr>() {
        Ok(parsed) if parsed.is_ipv6() == v6 => {
            push(out, type_, ip);
            Ok(())
        }
        _ => Err(InstancesError::InvalidAddress {
            instance: instance.id.clone(),
            kind,
            address: ip.to_owned(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use ccm_aws_api::{
        InstanceId, NetworkInterfaceId,
        ec2::{Instance, InstanceNetworkInterface, InstanceState},
    };

    use super::*;
    use NodeAddressType::*;

    fn eni(index: i32, status: &str, v4: &[&str], v6: &[&str]) -> InstanceNetworkInterface {
        let mut eni =
            InstanceNetworkInterface::new(NetworkInterfaceId::new(format!("eni-{index}")), Some(index));
        eni.status = status.into();
        eni.private_ips = v4.iter().map(|s| (*s).to_owned()).collect();
        eni.ipv6_addresses = v6.iter().map(|s| (*s).to_owned()).collect();
        eni
    }

    /// Upstream's fake self instance: two in-use interfaces with primary and secondary IPs, public IP and DNS.
    fn instance() -> Instance {
        let mut i = Instance::new(InstanceId::new("i-self"), InstanceState::Running);
        i.private_ip = Some("192.168.0.1".into());
        i.public_ip = Some("1.2.3.4".into());
        i.private_dns_name = Some("ip-172-20-0-100.ec2.internal".into());
        i.public_dns_name = Some("ec2-1-2-3-4.compute-1.amazonaws.com".into());
        // Listed out of device order, as in upstream's fake.
        i.network_interfaces = vec![
            eni(1, "in-use", &["192.168.1.1", "192.168.1.2"], &["2001:db8:1::1"]),
            eni(
                0,
                "in-use",
                &["192.168.0.1", "192.168.0.3"],
                &["2001:db8::1", "2001:db8::2"],
            ),
            eni(2, "detaching", &["192.168.2.1"], &["2001:db8:2::1"]),
        ];
        i
    }

    type Expected<'a> = (NodeAddressType, &'a str);

    fn addrs(list: &[(NodeAddressType, &str)]) -> Vec<NodeAddress> {
        list.iter().map(|(t, a)| NodeAddress::new(*t, *a)).collect()
    }

    #[test]
    fn families_in_order() {
        let v4 = [
            (InternalIp, "192.168.0.1"),
            (InternalIp, "192.168.1.1"),
            (ExternalIp, "1.2.3.4"),
            (InternalDns, "ip-172-20-0-100.ec2.internal"),
            (Hostname, "ip-172-20-0-100.ec2.internal"),
            (ExternalDns, "ec2-1-2-3-4.compute-1.amazonaws.com"),
        ];
        let v6 = [(InternalIp, "2001:db8::1"), (InternalIp, "2001:db8:1::1")];
        let cases: Vec<(Vec<IpFamily>, Vec<Expected<'_>>)> = vec![
            (vec![IpFamily::Ipv4], v4.to_vec()),
            (vec![IpFamily::Ipv6], v6.to_vec()),
            (vec![IpFamily::Ipv4, IpFamily::Ipv6], [&v4[..], &v6[..]].concat()),
            (vec![IpFamily::Ipv6, IpFamily::Ipv4], [&v6[..], &v4[..]].concat()),
            (vec![IpFamily::Ipv4, IpFamily::Ipv4], v4.to_vec()),
            (vec![], vec![]),
        ];
        for (families, want) in cases {
            assert_eq!(
                instance_addresses(&CatalogInstance::of(&instance()), &families).unwrap(),
                addrs(&want),
                "{families:?}"
            );
        }
    }

    #[test]
    fn no_interfaces_falls_back_to_the_primary_ip_and_skips_empty_names() {
        let mut i = Instance::new(InstanceId::new("i-1"), InstanceState::Running);
        i.private_ip = Some("10.0.0.5".into());
        i.private_dns_name = Some(String::new());
        assert_eq!(
            instance_addresses(&CatalogInstance::of(&i), &[IpFamily::Ipv4]).unwrap(),
            addrs(&[(InternalIp, "10.0.0.5")])
        );
        let bare = Instance::new(InstanceId::new("i-2"), InstanceState::Pending);
        assert!(
            instance_addresses(&CatalogInstance::of(&bare), &[IpFamily::Ipv4, IpFamily::Ipv6])
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn invalid_addresses_are_named() {
        let mut i = instance();
        i.public_ip = Some("1.2.3".into());
        let err = instance_addresses(&CatalogInstance::of(&i), &[IpFamily::Ipv4])
            .unwrap_err()
            .to_string();
        assert_eq!(err, r#"EC2 instance i-self had invalid public address "1.2.3""#);
        let mut i = instance();
        i.network_interfaces[1].private_ips[0] = "2001:db8::9".into();
        let err = instance_addresses(&CatalogInstance::of(&i), &[IpFamily::Ipv4])
            .unwrap_err()
            .to_string();
        assert!(err.contains("invalid private address \"2001:db8::9\""), "{err}");
        let mut i = instance();
        i.network_interfaces[0].ipv6_addresses[0] = "10.0.0.1".into();
        assert!(instance_addresses(&CatalogInstance::of(&i), &[IpFamily::Ipv6]).is_err());
    }

    #[test]
    fn fargate() {
        let mut eni = NetworkInterface::new(NetworkInterfaceId::new("eni-f"));
        eni.private_ips = vec!["10.0.0.9".into()];
        eni.ipv6_addresses = vec!["2001:db8::9".into()];
        eni.private_dns_name = Some("ip-10-0-0-9.ec2.internal".into());
        assert_eq!(
            fargate_addresses(&eni, &[IpFamily::Ipv6, IpFamily::Ipv4]),
            addrs(&[
                (InternalIp, "2001:db8::9"),
                (InternalIp, "10.0.0.9"),
                (InternalDns, "ip-10-0-0-9.ec2.internal")
            ])
        );
        eni.ipv6_addresses.clear();
        assert_eq!(
            fargate_addresses(&eni, &[IpFamily::Ipv6]),
            addrs(&[
                (InternalIp, "10.0.0.9"),
                (InternalDns, "ip-10-0-0-9.ec2.internal")
            ])
        );
    }
}
