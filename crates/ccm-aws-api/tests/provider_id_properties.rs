//! Property tests of provider IDs and node names (written by the kubelet, other controllers or operators): the
//! parser answers or refuses with a typed error naming the value, never a panic; what it accepts names an
//! instance it can write back; and the IDs this crate writes parse back to the same zone and instance. The fuzz
//! target `provider_ids` (fuzz/) covers the same functions with coverage guidance. See docs/reliability.md.

use std::net::{IpAddr, Ipv4Addr};

use ccm_aws_api::{InstanceId, InstanceRef, ProviderId, ProviderIdReason};
use proptest::prelude::*;

fn provider_id_like() -> impl Strategy<Value = String> {
    let piece = prop::sample::select(vec![
        "aws",
        "://",
        "/",
        "gce",
        "i-0abc",
        "i-",
        "fargate-",
        "ip-",
        "10-1-2-3",
        "10.1.2.3",
        "::1",
        "us-east-1a",
        ".",
        "-",
        " ",
        "vol-1",
    ]);
    prop_oneof![
        prop::collection::vec(piece, 0..8).prop_map(|p| p.concat()),
        "\\PC{0,40}",
    ]
}

fn zone() -> impl Strategy<Value = String> {
    prop_oneof![Just(String::new()), "[a-z]{2}-[a-z]{4,9}-[1-9][a-c]"]
}

fn instance() -> impl Strategy<Value = InstanceRef> {
    prop_oneof![
        "i-[0-9a-f]{8}|i-[0-9a-f]{17}|i-[a-z0-9-]{1,20}".prop_map(|id| InstanceRef::Ec2(InstanceId::new(id))),
        any::<[u8; 4]>().prop_map(|o| {
            let ip = Ipv4Addr::from(o);
            InstanceRef::Fargate {
                name: ip.to_string(),
                ip: IpAddr::V4(ip),
            }
        }),
        (any::<[u8; 4]>(), "(\\.[a-z0-9-]{1,12}){0,3}").prop_map(|(o, domain)| {
            let [a, b, c, d] = o;
            InstanceRef::Fargate {
                name: format!("ip-{a}-{b}-{c}-{d}{domain}"),
                ip: IpAddr::V4(Ipv4Addr::from(o)),
            }
        }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn provider_ids_and_node_names_never_panic(text in provider_id_like()) {
        match ProviderId::parse(&text) {
            // What parses is written back in the upstream form, which parses to the same thing.
            Ok(id) => prop_assert_eq!(ProviderId::parse(&id.to_string()), Ok(id)),
            Err(err) => prop_assert_eq!(err.value(), text.as_str()),
        }
        if let Some(Err(err)) = InstanceRef::from_node_name(&text) {
            prop_assert_eq!(err.value(), text.as_str());
        }
    }

    #[test]
    fn written_provider_ids_parse_back(zone in zone(), instance in instance()) {
        let written = ProviderId::new(zone.clone(), instance.clone());
        let text = written.to_string();
        let expected_prefix = format!("aws:///{zone}/");
        prop_assert!(text.starts_with(&expected_prefix), "{}", text);
        let parsed = ProviderId::parse(&text);
        prop_assert_eq!(parsed.as_ref().map(ProviderId::zone), Ok((!zone.is_empty()).then_some(zone.as_str())));
        prop_assert_eq!(parsed.map(ProviderId::into_instance), Ok(instance));
    }

    /// The instance is the last path segment, however many come before it (EKS Fargate IDs have three).
    #[test]
    fn any_path_depth_names_the_last_segment(
        zone in "[a-z]{2}-[a-z]{4,9}-[1-9][a-c]",
        middle in prop::collection::vec("[a-z0-9-]{0,10}", 0..4),
        instance in instance(),
    ) {
        let text = format!("aws:///{zone}/{}{}{instance}", middle.join("/"), if middle.is_empty() { "" } else { "/" });
        let parsed = ProviderId::parse(&text).map_err(|e| e.to_string());
        prop_assert_eq!(parsed.as_ref().map(ProviderId::zone), Ok(Some(zone.as_str())));
        prop_assert_eq!(parsed.map(ProviderId::into_instance), Ok(instance));
    }

    /// Whatever follows the instance, a last segment that is not one is refused.
    #[test]
    fn a_last_segment_that_is_not_an_instance_is_refused(
        instance in instance(),
        last in "(vol|eni|sg)-[0-9a-f]{8}|suffix|[a-z]{1,8}",
    ) {
        let text = format!("aws:///us-east-1a/{instance}/{last}");
        let err = ProviderId::parse(&text).map(|_| ()).map_err(|e| (e.value().to_owned(), e.reason()));
        prop_assert_eq!(err, Err((text, ProviderIdReason::NotAnInstance)));
    }
}
