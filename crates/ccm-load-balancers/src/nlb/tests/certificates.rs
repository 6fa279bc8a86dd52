//! Several certificates on TLS listeners, and health check success codes: each owned while annotated.

use super::*;

const LISTENER: &str = "arn:listener/443";

fn certificates(arn: &str, add: &[&str], remove: &[&str]) -> Change {
    Change::ListenerCertificates {
        arn: arn.into(),
        port: 443,
        add: add.iter().map(|c| (*c).to_owned()).collect(),
        remove: remove.iter().map(|c| (*c).to_owned()).collect(),
    }
}

#[test]
fn further_certificates_join_the_tls_listeners_list_and_follow_the_annotation() {
    let d = desired(
        &[(Key::SslCert, "arn:c1, arn:c2,arn:c3"), (Key::SslPorts, "443")],
        &[(80, 30080), (443, 30443)],
    );
    assert!(
        d.listeners[0].extra_certificates.is_empty(),
        "a TCP listener has none"
    );
    assert_eq!(d.listeners[1].certificate.as_deref(), Some("arn:c1"));
    assert_eq!(d.listeners[1].extra_certificates, ["arn:c2", "arn:c3"]);
    assert_eq!(plan(&d, &converged(&d)), []);
    // A new NLB: each listener created with its default; apply then adds the list.
    let fresh = plan(&d, &Observed::default());
    let created: Vec<&Listener> = fresh
        .iter()
        .filter_map(|c| match c {
            Change::CreateListener { listener, .. } => Some(listener),
            _ => None,
        })
        .collect();
    assert_eq!(created[1].extra_certificates, ["arn:c2", "arn:c3"]);
    assert!(!kinds(&fresh).contains(&"listener_certificates".to_owned()));
    // One missing, one no longer listed: one change adds and removes.
    let mut observed = converged(&d);
    observed
        .listener_certificates
        .insert(LISTENER.into(), vec!["arn:c2".into(), "arn:old".into()]);
    assert_eq!(
        plan(&d, &observed),
        [certificates(LISTENER, &["arn:c3"], &["arn:old"])]
    );
    // Lists not read (a Service with one certificate, or a host update): never changed.
    let one = desired(
        &[(Key::SslCert, "arn:c1"), (Key::SslPorts, "443")],
        &[(80, 30080), (443, 30443)],
    );
    assert!(converged(&one).listener_certificates.is_empty());
    let mut by_hand = converged(&d);
    by_hand.listener_certificates.clear();
    assert_eq!(plan(&one, &by_hand), []);
}

#[test]
fn swapping_the_default_certificate_never_removes_it_from_the_list() {
    let before = desired(&[(Key::SslCert, "arn:a,arn:b")], &[(443, 30443)]);
    let after = desired(&[(Key::SslCert, "arn:b,arn:a")], &[(443, 30443)]);
    let changes = plan(&after, &converged(&before));
    assert_eq!(kinds(&changes), ["modify_listener", "listener_certificates"]);
    let Change::ModifyListener { certificate, .. } = &changes[0] else {
        panic!()
    };
    assert_eq!(certificate.as_deref(), Some("arn:b"));
    // `arn:b`, the new default, is left in the list: AWS refuses to remove a listener's default.
    assert_eq!(changes[1], certificates(LISTENER, &["arn:a"], &[]));
}

#[test]
fn a_go_era_listener_is_tagged_before_its_certificates_change() {
    let d = desired(&[(Key::SslCert, "arn:a,arn:b")], &[(443, 30443)]);
    let mut go_era = converged(&d);
    go_era.tags.remove(LISTENER);
    go_era.listener_certificates.insert(LISTENER.into(), Vec::new());
    let changes = plan(&d, &go_era);
    assert_eq!(kinds(&changes), ["add_tags", "listener_certificates"]);
    let Change::AddTags { arns, .. } = &changes[0] else {
        panic!()
    };
    assert_eq!(arns, &[LISTENER.to_owned()]);
}

#[test]
fn success_codes_are_owned_while_given_and_only_on_http_checks() {
    let http = [(Key::HealthcheckProtocol, "HTTP")];
    let coded = desired(
        &[
            (Key::HealthcheckProtocol, "HTTP"),
            (Key::HealthcheckSuccessCodes, "200-299"),
        ],
        &[(80, 30080)],
    );
    assert_eq!(coded.health_check.success_codes.as_deref(), Some("200-299"));
    assert_eq!(coded.health_check.to_aws().matcher.as_deref(), Some("200-299"));
    assert_eq!(plan(&coded, &converged(&coded)), []);
    // A group with AWS's default codes (a Go-made one): modified in place, the same group.
    let plain = desired(&http, &[(80, 30080)]);
    let mut go_made = converged(&plain);
    go_made.target_groups[0].group.health_check.matcher = Some("200-399".into());
    assert_eq!(plain.listeners[0].target_group, coded.listeners[0].target_group);
    let changes = plan(&coded, &go_made);
    assert_eq!(kinds(&changes), ["modify_target_group"]);
    let Change::ModifyTargetGroup { health_check, .. } = &changes[0] else {
        panic!()
    };
    assert_eq!(health_check.success_codes.as_deref(), Some("200-299"));
    // The annotation removed: the codes stay as the group has them, and nothing is sent.
    assert_eq!(plain.health_check.to_aws().matcher, None);
    assert_eq!(plan(&plain, &converged(&coded)), []);
    // A TCP check has no matcher: the codes do nothing (the provider posts a Warning).
    let tcp = desired(&[(Key::HealthcheckSuccessCodes, "200")], &[(80, 30080)]);
    assert_eq!(tcp.health_check.protocol, "TCP");
    assert_eq!(tcp.health_check.success_codes, None);
}
