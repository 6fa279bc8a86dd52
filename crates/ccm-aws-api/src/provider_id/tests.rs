use super::*;

fn ec2(id: &str) -> InstanceRef {
    InstanceRef::Ec2(InstanceId::new(id))
}

fn fargate(name: &str, ip: &str) -> InstanceRef {
    InstanceRef::Fargate {
        name: name.into(),
        ip: ip.parse().unwrap(),
    }
}

#[test]
fn accepted_forms_with_their_zone() {
    let cases = [
        // Upstream TestMapToAWSInstanceIDs.
        (
            "aws:///us-east-1a/i-12345678",
            Some("us-east-1a"),
            ec2("i-12345678"),
        ),
        ("aws:////i-12345678", None, ec2("i-12345678")),
        ("i-12345678", None, ec2("i-12345678")),
        (
            "aws:///us-east-1a/i-12345678abcdef01",
            Some("us-east-1a"),
            ec2("i-12345678abcdef01"),
        ),
        ("aws:////i-12345678abcdef01", None, ec2("i-12345678abcdef01")),
        ("i-12345678abcdef01", None, ec2("i-12345678abcdef01")),
        (
            "aws:///us-west-2c/1abc-2def/fargate-ip-192-168-164-88.internal",
            Some("us-west-2c"),
            fargate("ip-192-168-164-88.internal", "192.168.164.88"),
        ),
        (
            "aws:///us-west-2c/1abc-2def/fargate-192.168.164.88",
            Some("us-west-2c"),
            fargate("192.168.164.88", "192.168.164.88"),
        ),
        // The host form, a bare path, a trailing slash, an empty middle segment, deeper paths.
        ("aws://us-east-1a/i-0abc", Some("us-east-1a"), ec2("i-0abc")),
        ("aws:///i-0abc", None, ec2("i-0abc")),
        ("us-east-1a/i-0abc", Some("us-east-1a"), ec2("i-0abc")),
        ("aws:///us-east-1a/i-0abc/", Some("us-east-1a"), ec2("i-0abc")),
        ("aws:///us-east-1a//i-0abc", Some("us-east-1a"), ec2("i-0abc")),
        (
            "aws://account/us-east-1a/i-0abc",
            Some("us-east-1a"),
            ec2("i-0abc"),
        ),
        (
            "aws:///us-east-1/us-east-1a/i-0abc",
            Some("us-east-1"),
            ec2("i-0abc"),
        ),
        // kwok and other fakes name instances freely after `i-`.
        (
            "aws:///us-west-2a/i-kwok-node-1",
            Some("us-west-2a"),
            ec2("i-kwok-node-1"),
        ),
        (
            "aws:///us-west-2c/fargate-ip-192-168-164-88.us-west-2.compute.internal",
            Some("us-west-2c"),
            fargate("ip-192-168-164-88.us-west-2.compute.internal", "192.168.164.88"),
        ),
        ("fargate-10.0.0.1", None, fargate("10.0.0.1", "10.0.0.1")),
        (
            "aws:///us-west-2c/fargate-2600:1f14::1",
            Some("us-west-2c"),
            fargate("2600:1f14::1", "2600:1f14::1"),
        ),
    ];
    for (input, zone, want) in cases {
        let parsed = ProviderId::parse(input).unwrap_or_else(|e| panic!("{input}: {e}"));
        assert_eq!(parsed.instance(), &want, "{input}");
        assert_eq!(parsed.zone(), zone, "{input}");
        assert_eq!(input.parse::<ProviderId>().unwrap(), parsed, "{input}");
    }
}

#[test]
fn rejected_forms_name_the_value_the_reason_and_the_accepted_forms() {
    use ProviderIdReason::*;
    let cases = [
        // Upstream TestMapToAWSInstanceIDs.
        ("", Empty),
        ("vol-123456789", NotAnInstance),
        ("aws:///us-east-1a/vol-12345678abcdef01", NotAnInstance),
        ("aws://accountid/us-east-1a/vol-12345678abcdef01", NotAnInstance),
        ("aws:///us-east-1a/vol-12345678abcdef01/suffix", NotAnInstance),
        // The instance is the last segment: a suffix after it is refused.
        ("aws:///us-east-1a/i-12345678abcdef01/suffix", NotAnInstance),
        // Upstream reads these as bare IDs and finds `i-1`; another provider's node is not ours.
        ("gce://project/zone/i-1", OtherScheme),
        ("AWS:///us-east-1a/i-1", OtherScheme),
        ("aws://us-east-1a", NoPath),
        ("aws://i-0abc", NoPath),
        ("aws://", NoPath),
        ("aws:///", Empty),
        ("aws:///us-east-1a/", NotAnInstance),
        ("i-", NotAnInstance),
        ("i-0abc def", NotAnInstance),
        ("aws:///us-west-2c/fargate-", BadFargateAddress),
        ("aws:///us-west-2c/fargate-ip-10-0-0", BadFargateAddress),
        ("fargate-nonsense", BadFargateAddress),
    ];
    for (input, reason) in cases {
        let err = ProviderId::parse(input).unwrap_err();
        assert_eq!((err.value(), err.reason()), (input, reason), "{input}");
        let text = err.to_string();
        assert!(
            text.starts_with(&format!(
                "invalid AWS provider ID {input:?}: {reason}; accepted: "
            )) && text.ends_with(ACCEPTED_FORMS),
            "{input}: {text}"
        );
        assert_eq!(ProviderId::ec2_instance_of(input), None, "{input}");
    }
}

#[test]
fn written_form_is_upstreams_and_parses_back() {
    let id = ProviderId::new("us-east-1a", InstanceId::new("i-0abc"));
    assert_eq!(id.to_string(), "aws:///us-east-1a/i-0abc");
    assert_eq!(ProviderId::parse(&id.to_string()).unwrap(), id);
    let no_zone = ProviderId::new("", InstanceId::new("i-0abc"));
    assert_eq!(no_zone.zone(), None);
    assert_eq!(no_zone.to_string(), "aws:////i-0abc");
    assert_eq!(ProviderId::parse(&no_zone.to_string()).unwrap(), no_zone);
    let pod = ProviderId::new("us-west-2c", fargate("ip-10-0-0-1.ec2.internal", "10.0.0.1"));
    assert_eq!(
        pod.to_string(),
        "aws:///us-west-2c/fargate-ip-10-0-0-1.ec2.internal"
    );
    assert_eq!(ProviderId::parse(&pod.to_string()).unwrap(), pod);
    assert_eq!(pod.instance_id(), None);
}

#[test]
fn ec2_instances_only() {
    assert_eq!(
        ProviderId::ec2_instance_of("aws:///us-east-1a/i-0123"),
        Some(InstanceId::new("i-0123"))
    );
    assert_eq!(
        ProviderId::ec2_instance_of("aws:///us-east-1a/fargate-10.0.0.1"),
        None
    );
    assert_eq!(ProviderId::ec2_instance_of("gce://p/z/i-0123"), None);
}

#[test]
fn node_names() {
    let of = |name: &str| InstanceRef::from_node_name(name);
    assert_eq!(of("i-0abc").unwrap().unwrap(), ec2("i-0abc"));
    assert_eq!(
        of("i-0abc.us-west-2.compute.internal").unwrap().unwrap(),
        ec2("i-0abc")
    );
    assert_eq!(
        of("fargate-ip-10-1-2-3.ec2.internal").unwrap().unwrap(),
        fargate("ip-10-1-2-3.ec2.internal", "10.1.2.3")
    );
    assert!(of("ip-10-0-0-1.ec2.internal").is_none());
    assert!(of("node-1").is_none());
    assert!(of("").is_none());
    let err = of("i-.ec2.internal").unwrap().unwrap_err();
    assert_eq!(
        (err.value(), err.reason()),
        ("i-.ec2.internal", ProviderIdReason::NotAnInstance)
    );
    let err = InstanceRef::parse("vol-1").unwrap_err();
    assert_eq!(
        (err.value(), err.reason()),
        ("vol-1", ProviderIdReason::NotAnInstance)
    );
}

#[test]
fn well_formed_instance_ids() {
    for good in ["i-0123abcd", "i-0123456789abcdef0"] {
        assert!(InstanceId::new(good).is_well_formed(), "{good}");
    }
    for bad in [
        "i-0123abc",
        "i-0123456789ABCDEF0",
        "i-kwok-node-1",
        "i-",
        "0123abcd",
        "i-0123456789abcdef",
    ] {
        assert!(!InstanceId::new(bad).is_well_formed(), "{bad}");
    }
}
