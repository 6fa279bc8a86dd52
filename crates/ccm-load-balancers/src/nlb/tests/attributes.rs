//! `aws-load-balancer-attributes`: owned while given, and deletion protection.

use super::*;

#[test]
fn annotated_attributes_are_set_in_place_and_left_alone_once_removed() {
    let plain = desired(&[], &[(80, 30080)]);
    let annotated = desired(
        &[(
            Key::LoadBalancerAttributes,
            "deletion_protection.enabled=true,dns_record.client_routing_policy=any_availability_zone",
        )],
        &[(80, 30080)],
    );
    assert_eq!(
        annotated
            .attributes
            .get("deletion_protection.enabled")
            .map(String::as_str),
        Some("true")
    );
    let changes = plan(&annotated, &converged(&plain));
    assert_eq!(
        changes,
        [Change::ModifyAttributes {
            attributes: BTreeMap::from([
                ("deletion_protection.enabled".to_owned(), "true".to_owned()),
                (
                    "dns_record.client_routing_policy".to_owned(),
                    "any_availability_zone".to_owned()
                ),
            ])
        }]
    );
    assert_eq!(plan(&annotated, &converged(&annotated)), []);
    // The key removed from the annotation: the attribute stays as AWS has it.
    assert_eq!(plan(&plain, &converged(&annotated)), []);
    // A new NLB: attributes after its creation, none for AWS's defaults.
    let fresh = plan(&annotated, &Observed::default());
    assert!(
        fresh
            .iter()
            .any(|c| matches!(c, Change::ModifyAttributes { attributes } if attributes.len() == 2))
    );
    let off = desired(
        &[(Key::LoadBalancerAttributes, "deletion_protection.enabled=false")],
        &[(80, 30080)],
    );
    assert!(
        !plan(&off, &Observed::default())
            .iter()
            .any(|c| matches!(c, Change::ModifyAttributes { .. }))
    );
}

#[test]
fn deletion_protection_stops_a_deletion_before_anything_changes_unless_the_service_turns_it_off() {
    let mut observed = DeleteObserved {
        load_balancer: Some(LoadBalancerV2::new("arn:lb", NAME, "x")),
        deletion_protection: true,
        ..DeleteObserved::default()
    };
    let e = unprotect(NAME, &observed, false).unwrap_err();
    assert!(matches!(e, Error::DeletionProtected(ref n) if n == NAME));
    let message = e.to_string();
    assert!(
        message.contains("deletion protection")
            && message.contains("deletion_protection.enabled=false")
            && message.contains("aws-load-balancer-attributes"),
        "{message}"
    );
    assert_eq!(
        unprotect(NAME, &observed, true).unwrap(),
        Some(Change::ModifyAttributes {
            attributes: BTreeMap::from([("deletion_protection.enabled".to_owned(), "false".to_owned())])
        })
    );
    observed.deletion_protection = false;
    assert_eq!(unprotect(NAME, &observed, false).unwrap(), None);
}

fn listener_key(suffix: &str) -> String {
    format!("{}{suffix}", crate::annotations::LISTENER_ATTRIBUTES_PREFIX)
}

/// An NLB Service with TCP 80 and UDP 53 and raw annotations.
fn with_listener_annotations(raw: &[(&str, &str)]) -> Result<Desired, Error> {
    let mut svc = nlb_service(&[], &[(80, 30080), (53, 30053)]);
    svc.spec.as_mut().unwrap().ports.as_mut().unwrap()[1].protocol = Some("UDP".into());
    let annotations = svc.metadata.annotations.get_or_insert_default();
    for (k, v) in raw {
        annotations.insert(listener_key(k), (*v).to_owned());
    }
    let spec = parse_service(&svc)?;
    let mut c = config();
    c.manage_node_security_groups = false;
    let n1 = node("i-1");
    build(&spec, &[&n1], &c, "kubernetes", &[SubnetId::new("subnet-a")])
}

#[test]
fn listener_attributes_go_to_the_listener_they_name() {
    let d = with_listener_annotations(&[("TCP-80", "tcp.idle_timeout.seconds=600")]).unwrap();
    let tcp = d.listeners.iter().find(|l| l.port == 80).unwrap();
    assert_eq!(
        tcp.attributes,
        BTreeMap::from([("tcp.idle_timeout.seconds".to_owned(), "600".to_owned())])
    );
    assert!(
        d.listeners
            .iter()
            .find(|l| l.port == 53)
            .unwrap()
            .attributes
            .is_empty()
    );
    // No such listener; the idle timeout on UDP; a bad value; a bad name: each an error naming its annotation.
    let e = with_listener_annotations(&[("TCP-81", "tcp.idle_timeout.seconds=600")])
        .unwrap_err()
        .to_string();
    assert!(
        e.contains(&listener_key("TCP-81")) && e.contains("TCP-80, UDP-53"),
        "{e}"
    );
    let e = with_listener_annotations(&[("UDP-53", "tcp.idle_timeout.seconds=600")])
        .unwrap_err()
        .to_string();
    assert!(e.contains("on a TCP listener only"), "{e}");
    let e = with_listener_annotations(&[("TCP-80", "tcp.idle_timeout.seconds=30")])
        .unwrap_err()
        .to_string();
    assert!(e.contains("tcp.idle_timeout.seconds=60..6000"), "{e}");
    let e = with_listener_annotations(&[("HTTP-80", "tcp.idle_timeout.seconds=600")])
        .unwrap_err()
        .to_string();
    assert!(e.contains("PROTOCOL one of TCP, UDP, TCP_UDP, TLS"), "{e}");
}

#[test]
fn listener_attributes_are_set_where_they_differ_and_only_when_read() {
    let d = with_listener_annotations(&[("TCP-80", "tcp.idle_timeout.seconds=600")]).unwrap();
    let mut o = converged(&d);
    assert_eq!(plan(&d, &o), []);
    let arn = "arn:listener/80".to_owned();
    o.listener_attributes.insert(
        arn.clone(),
        BTreeMap::from([("tcp.idle_timeout.seconds".into(), "350".into())]),
    );
    assert_eq!(
        plan(&d, &o),
        [Change::ModifyListenerAttributes {
            arn: arn.clone(),
            port: 80,
            attributes: BTreeMap::from([("tcp.idle_timeout.seconds".to_owned(), "600".to_owned())]),
        }]
    );
    // Not read (a host update): nothing planned. Removed from the annotation: left as AWS has it.
    o.listener_attributes.clear();
    assert_eq!(plan(&d, &o), []);
    let plain = with_listener_annotations(&[]).unwrap();
    let mut o = converged(&plain);
    o.listener_attributes.insert(
        arn,
        BTreeMap::from([("tcp.idle_timeout.seconds".into(), "600".into())]),
    );
    assert_eq!(plan(&plain, &o), []);
    // AWS's default counts as set when AWS does not report the key.
    let default = with_listener_annotations(&[("TCP-80", "tcp.idle_timeout.seconds=350")]).unwrap();
    let mut o = converged(&default);
    o.listener_attributes
        .insert("arn:listener/80".into(), BTreeMap::new());
    assert_eq!(plan(&default, &o), []);
}

/// A consented recreation of a protected NLB stops as a deletion does (the same error, before any write), unless
/// the Service's attributes turn protection off: then that comes first.
#[test]
fn a_protected_nlb_is_recreated_only_once_the_service_turns_protection_off() {
    let before = desired(&[], &[(80, 30080)]);
    let mut protected = converged(&before);
    protected
        .attributes
        .insert("deletion_protection.enabled".into(), "true".into());
    let internal = desired(
        &[(Key::Internal, "true"), (Key::AllowRecreation, "true")],
        &[(80, 30080)],
    );
    let changes = plan(&internal, &protected);
    let e = super::super::plan::protected_recreation(&internal, &protected, &changes).unwrap_err();
    assert!(
        matches!(e, Error::DeletionProtected(ref n) if *n == internal.name),
        "{e}"
    );
    // Unprotected, the same recreation is no refusal.
    let open = converged(&before);
    assert!(super::super::plan::protected_recreation(&internal, &open, &plan(&internal, &open)).is_ok());
    // The Service turns protection off: first that, then the deletion.
    let consented = desired(
        &[
            (Key::Internal, "true"),
            (Key::AllowRecreation, "true"),
            (Key::LoadBalancerAttributes, "deletion_protection.enabled=false"),
        ],
        &[(80, 30080)],
    );
    let changes = plan(&consented, &protected);
    assert_eq!(
        kinds(&changes)[..2],
        ["modify_attributes", "delete_load_balancer"]
    );
    assert!(super::super::plan::protected_recreation(&consented, &protected, &changes).is_ok());
}
