use super::*;
use NodeAddressType::*;

fn a(t: NodeAddressType, addr: &str) -> NodeAddress {
    NodeAddress::new(t, addr)
}

fn cloud() -> Vec<NodeAddress> {
    vec![
        a(InternalIp, "10.1.1.1"),
        a(InternalIp, "10.2.2.2"),
        a(ExternalIp, "132.143.154.163"),
        a(InternalIp, "2600:1f14:1d4:d101::ba3d"),
        a(Hostname, "node.example"),
    ]
}

#[test]
fn node_ip_table() {
    // (provided, expected addresses or the error's start)
    let cases: Vec<(&str, Result<Vec<NodeAddress>, &str>)> = vec![
        (
            "10.1.1.1",
            Ok(vec![
                a(InternalIp, "10.1.1.1"),
                a(ExternalIp, "132.143.154.163"),
                a(Hostname, "node.example"),
            ]),
        ),
        (
            "132.143.154.163",
            Ok(vec![
                a(ExternalIp, "132.143.154.163"),
                a(InternalIp, "10.1.1.1"),
                a(InternalIp, "10.2.2.2"),
                a(InternalIp, "2600:1f14:1d4:d101::ba3d"),
                a(Hostname, "node.example"),
            ]),
        ),
        (
            // Equal as an IP, written differently.
            "2600:1f14:1d4:d101:0:0:0:ba3d",
            Ok(vec![
                a(InternalIp, "2600:1f14:1d4:d101::ba3d"),
                a(ExternalIp, "132.143.154.163"),
                a(Hostname, "node.example"),
            ]),
        ),
        (
            "10.1.1.1,2600:1f14:1d4:d101::ba3d",
            Ok(vec![
                a(InternalIp, "10.1.1.1"),
                a(InternalIp, "2600:1f14:1d4:d101::ba3d"),
                a(ExternalIp, "132.143.154.163"),
                a(Hostname, "node.example"),
            ]),
        ),
        ("10.9.9.9", Err("failed to get node address")),
        ("not-an-ip", Err("invalid")),
        ("10.1.1.1,10.2.2.2", Err("invalid")),
        ("10.1.1.1,2600::1,2600::2", Err("invalid")),
        ("0.0.0.0,2600:1f14:1d4:d101::ba3d", Err("invalid")),
        ("", Err("invalid")),
    ];
    for (provided, want) in cases {
        let got = addresses_for_node_ip(provided, &cloud());
        match want {
            Ok(want) => assert_eq!(got.as_ref().ok(), Some(&want), "{provided}: {got:?}"),
            Err(prefix) => {
                let err = got.expect_err(provided).to_string();
                assert!(err.starts_with(prefix), "{provided}: {err}");
            }
        }
    }
}

#[test]
fn change_detection_ignores_order_only() {
    let old = vec![a(InternalIp, "10.0.0.1"), a(Hostname, "h")];
    let reordered = vec![a(Hostname, "h"), a(InternalIp, "10.0.0.1")];
    assert!(!addresses_changed(&old, &reordered));
    assert!(addresses_changed(&old, &[a(InternalIp, "10.0.0.1")]));
    assert!(addresses_changed(
        &old,
        &[a(InternalIp, "10.0.0.2"), a(Hostname, "h")]
    ));
    assert!(addresses_changed(&[], &old));
}

fn node_with(addresses: Vec<NodeAddress>, provided_ip: Option<&str>) -> NodeView {
    let mut n = NodeView::named("n");
    n.provided_node_ip = provided_ip.map(str::to_owned);
    n.addresses = addresses.iter().map(NodeAddress::to_k8s).collect();
    n
}

#[test]
fn kubelet_hostname_is_kept_when_the_cloud_has_none() {
    let node = node_with(vec![a(InternalIp, "10.0.0.9"), a(Hostname, "kubelet-host")], None);
    let got = desired_addresses(&node, &[a(InternalIp, "10.0.0.1"), a(ExternalIp, "1.2.3.4")]).unwrap();
    assert_eq!(
        got,
        vec![
            a(InternalIp, "10.0.0.1"),
            a(ExternalIp, "1.2.3.4"),
            a(Hostname, "kubelet-host")
        ]
    );
    // The cloud's hostname replaces the kubelet's.
    let got = desired_addresses(&node, &[a(InternalIp, "10.0.0.1"), a(Hostname, "cloud-host")]).unwrap();
    assert_eq!(got, vec![a(InternalIp, "10.0.0.1"), a(Hostname, "cloud-host")]);
}

#[test]
fn nothing_to_write_when_unchanged_empty_or_node_ip_unmatched() {
    let addrs = vec![a(InternalIp, "10.0.0.1"), a(Hostname, "h")];
    assert_eq!(desired_addresses(&node_with(addrs.clone(), None), &addrs), None);
    assert_eq!(desired_addresses(&node_with(vec![], None), &[]), None);
    assert_eq!(
        desired_addresses(&node_with(vec![], Some("10.9.9.9")), &addrs),
        None
    );
    assert_eq!(
        desired_addresses(&node_with(vec![], Some("10.0.0.1")), &addrs),
        Some(addrs),
        "a matching node IP is honoured"
    );
}
