use crate::{
    annotations::Key,
    classic::tests::service,
    spec::{InvalidService, ServiceSpec, parse_service},
};

fn nlb(annotations: &[(Key, &str)]) -> Result<ServiceSpec, InvalidService> {
    let mut all = vec![(Key::Type, "nlb")];
    all.extend_from_slice(annotations);
    parse_service(&service(&all, &[(443, 30443)]))
}

fn fields(e: &InvalidService) -> Vec<&str> {
    e.problems.iter().map(|p| p.field.as_str()).collect()
}

#[test]
fn an_nlb_takes_several_certificates_the_first_the_default() {
    let spec = nlb(&[(Key::SslCert, " arn:a , arn:b,arn:c,arn:b ")]).unwrap();
    assert_eq!(spec.ssl_cert.as_deref(), Some("arn:a"));
    assert_eq!(
        spec.extra_ssl_certs,
        ["arn:b", "arn:c"],
        "trimmed, repeats dropped"
    );
    // One, as Go read it.
    let spec = nlb(&[(Key::SslCert, "arn:aws:acm:us-east-1:1:certificate/x")]).unwrap();
    assert_eq!(
        spec.ssl_cert.as_deref(),
        Some("arn:aws:acm:us-east-1:1:certificate/x")
    );
    assert!(spec.extra_ssl_certs.is_empty());
    // Each item must be an ARN.
    let e = nlb(&[(Key::SslCert, "arn:a,cert-b")]).unwrap_err();
    assert_eq!(fields(&e), [Key::SslCert.name()]);
    assert_eq!(e.problems[0].value, "cert-b");
    // The listener's quota: the default and 25 more.
    let many: Vec<String> = (0..27).map(|i| format!("arn:{i}")).collect();
    let e = nlb(&[(Key::SslCert, &many.join(","))]).unwrap_err();
    assert!(e.problems[0].accepted.contains("at most 26"), "{e}");
    assert!(nlb(&[(Key::SslCert, &many[..26].join(","))]).is_ok());
}

#[test]
fn a_classic_elb_takes_one_certificate() {
    let e = parse_service(&service(&[(Key::SslCert, "arn:a,arn:b")], &[(443, 30443)])).unwrap_err();
    assert_eq!(fields(&e), [Key::SslCert.name()]);
    assert!(
        e.problems[0]
            .accepted
            .contains("one certificate ARN on a Classic ELB"),
        "{e}"
    );
    let spec = parse_service(&service(&[(Key::SslCert, "arn:a")], &[(443, 30443)])).unwrap();
    assert_eq!(spec.ssl_cert.as_deref(), Some("arn:a"));
}

#[test]
fn success_codes_are_codes_ranges_and_lists_from_200_to_599() {
    for (value, codes) in [
        ("200", "200"),
        ("200-399", "200-399"),
        ("200, 202,204", "200,202,204"),
        ("200-299,404", "200-299,404"),
        ("599", "599"),
    ] {
        let spec = nlb(&[(Key::HealthcheckSuccessCodes, value)]).unwrap();
        assert_eq!(spec.health_check_success_codes.as_deref(), Some(codes), "{value}");
    }
    for value in [
        "199",
        "600",
        "300-200",
        "2xx",
        "200-",
        "0200",
        "200,,202",
        "200-300-400",
    ] {
        let e = nlb(&[(Key::HealthcheckSuccessCodes, value)]).unwrap_err();
        assert_eq!(fields(&e), [Key::HealthcheckSuccessCodes.name()], "{value}");
        assert!(e.problems[0].accepted.contains("from 200 to 599"), "{value}");
    }
    assert_eq!(nlb(&[]).unwrap().health_check_success_codes, None);
    // An NLB key: an error on a Classic ELB, whose health check has no matcher.
    let classic = service(&[(Key::HealthcheckSuccessCodes, "200")], &[(80, 30080)]);
    let e = parse_service(&classic).unwrap_err();
    assert_eq!(fields(&e), [Key::HealthcheckSuccessCodes.name()]);
}

#[test]
fn proxy_protocol_on_an_nlb_needs_the_services_consent() {
    const V2: &str = "proxy_protocol_v2.enabled";
    // Without consent: a Warning naming the consent key, and the target groups as they are.
    let spec = nlb(&[(Key::ProxyProtocol, "*")]).unwrap();
    assert_eq!(spec.target_group_attributes.get(V2), None);
    assert_eq!(spec.warnings.len(), 1, "{:?}", spec.warnings);
    assert_eq!(spec.warnings[0].field, Key::ProxyProtocol.name());
    assert!(spec.warnings[0].message.contains(Key::AllowProxyProtocol.name()));
    // With consent: proxy protocol v2 on every target group, no Warning.
    let consent = [(Key::ProxyProtocol, "*"), (Key::AllowProxyProtocol, "true")];
    let spec = nlb(&consent).unwrap();
    assert_eq!(
        spec.target_group_attributes.get(V2).map(String::as_str),
        Some("true")
    );
    assert!(spec.warnings.is_empty(), "{:?}", spec.warnings);
    // Consent alone does nothing.
    let spec = nlb(&[(Key::AllowProxyProtocol, "true")]).unwrap();
    assert_eq!(spec.target_group_attributes.get(V2), None);
    // Consent against the attributes annotation: a problem naming both.
    let mut contradiction = consent.to_vec();
    contradiction.push((Key::TargetGroupAttributes, "proxy_protocol_v2.enabled=false"));
    let e = nlb(&contradiction).unwrap_err();
    assert_eq!(fields(&e), [Key::TargetGroupAttributes.name()]);
    assert!(e.to_string().contains(Key::ProxyProtocol.name()), "{e}");
    // The attributes annotation asking for it already: served, no Warning.
    let spec = nlb(&[
        (Key::ProxyProtocol, "*"),
        (Key::TargetGroupAttributes, "proxy_protocol_v2.enabled=true"),
    ])
    .unwrap();
    assert_eq!(
        spec.target_group_attributes.get(V2).map(String::as_str),
        Some("true")
    );
    assert!(spec.warnings.is_empty(), "{:?}", spec.warnings);
    // A Classic ELB needs no consent, and its target group attributes stay empty.
    let classic = parse_service(&service(&[(Key::ProxyProtocol, "*")], &[(80, 30080)])).unwrap();
    assert!(classic.proxy_protocol && classic.warnings.is_empty());
    assert!(classic.target_group_attributes.is_empty());
}
