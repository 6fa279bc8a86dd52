//! Property tests of the Service parser and the names made from a Service: annotation values re-parse to
//! themselves from their canonical text, parsing never panics, and load balancer, target group and security group
//! names are deterministic and valid for AWS whatever the UID, namespace and name. See docs/reliability.md.

use std::collections::BTreeMap;

use ccm_aws_api::VpcId;
use ccm_load_balancers::annotations::{Key, Value, parse_value};
use ccm_load_balancers::{Flavour, LoadBalancerConfig, nlb, parse_service, shared};
use ccm_tagging::ClusterTags;
use k8s_openapi::api::core::v1::{Service, ServicePort, ServiceSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use proptest::prelude::*;

fn config() -> Result<LoadBalancerConfig, TestCaseError> {
    let cluster = ClusterTags::new("c1", false).map_err(|e| TestCaseError::fail(e.to_string()))?;
    Ok(LoadBalancerConfig::new(cluster, VpcId::new("vpc-1")))
}

fn key() -> impl Strategy<Value = Key> {
    prop::sample::select(Key::ALL.to_vec())
}

/// Annotation-value-like text: pieces every value type accepts, glued by the separators the parsers split on.
fn raw_value() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        prop::sample::select(vec![
            "true",
            "False",
            "0",
            "1",
            "60",
            "5",
            "4000",
            "traffic-port",
            "*",
            "https",
            "TCP",
            "nlb",
            "external",
            "sg-0abc",
            "subnet-1",
            "10.0.0.0/8",
            "::/0",
            "0.0.0.0/0",
            "arn:aws:acm:x",
            "/healthz",
            "k=v",
            "a=",
            "preserve_client_ip.enabled=false",
            "deregistration_delay.timeout_seconds=30",
            "aws:x=y",
            "1.2.3.4",
        ])
        .prop_map(str::to_owned),
        "[ a-zA-Z0-9./:*_-]{0,12}",
    ];
    let sep = prop::sample::select(vec![",", "=", " ", "", ", "]);
    prop::collection::vec((piece, sep), 0..5)
        .prop_map(|parts| parts.into_iter().map(|(p, s)| format!("{p}{s}")).collect())
}

/// The canonical text of a parsed value (there is no renderer in the crate: this is the form the docs show).
fn render(value: &Value) -> Option<String> {
    Some(match value {
        Value::Bool(b) => b.to_string(),
        Value::Int(i) => i.to_string(),
        Value::Text(t) => t.clone(),
        Value::Port(None) => "traffic-port".to_owned(),
        Value::Port(Some(p)) => p.to_string(),
        Value::List(items) => items.join(","),
        Value::Pairs(pairs) => pairs
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(","),
        _ => return None,
    })
}

fn service(
    namespace: &str,
    name: &str,
    uid: &str,
    annotations: BTreeMap<String, String>,
    ports: &[(i32, i32, &str)],
) -> Service {
    Service {
        metadata: ObjectMeta {
            namespace: Some(namespace.to_owned()),
            name: Some(name.to_owned()),
            uid: Some(uid.to_owned()),
            annotations: Some(annotations),
            ..ObjectMeta::default()
        },
        spec: Some(ServiceSpec {
            type_: Some("LoadBalancer".to_owned()),
            ports: Some(
                ports
                    .iter()
                    .map(|(port, node_port, protocol)| ServicePort {
                        port: *port,
                        node_port: Some(*node_port),
                        protocol: Some((*protocol).to_owned()),
                        ..ServicePort::default()
                    })
                    .collect(),
            ),
            ..ServiceSpec::default()
        }),
        status: None,
    }
}

fn uuid() -> impl Strategy<Value = String> {
    "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
}

/// Kubernetes object names (DNS labels) and, to be safe, anything at all.
fn object_name() -> impl Strategy<Value = String> {
    prop_oneof!["[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?", "\\PC{1,70}"]
}

fn is_aws_name(name: &str) -> bool {
    name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
        && !name.starts_with('-')
        && !name.ends_with('-')
}

/// Few enough cases to run in a second or two; failures are printed, not written into the source tree.
fn cases() -> ProptestConfig {
    ProptestConfig {
        cases: 256,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// Found by `load_balancer_names_are_valid_for_aws`: a UID with a multi-byte character at the cut panicked
/// (`String::truncate` inside a character), and a UID with other punctuation made a name AWS refuses.
#[test]
fn odd_uids_make_valid_names_without_panicking() {
    let name = shared::load_balancer_name(&"\u{e9}".repeat(20)).ok();
    assert_eq!(name.as_deref(), Some("a"));
    let name = shared::load_balancer_name("[x_1.2]").ok();
    assert_eq!(name.as_deref(), Some("ax12"));
}

/// The shrunk input that once failed `services_parse_or_name_the_field` (CI, session 6): the property asked every
/// accepted Service for ports, but an `external` one is another controller's and needs none.
#[test]
fn an_external_service_without_ports_parses() {
    let annotations = BTreeMap::from([(
        "service.beta.kubernetes.io/aws-load-balancer-type".to_owned(),
        "external ".to_owned(),
    )]);
    let spec = parse_service(&service("ns", "web", "u-1", annotations, &[])).unwrap();
    assert_eq!(spec.flavour, Flavour::External);
    assert!(spec.ports.is_empty());
}

proptest! {
    #![proptest_config(cases())]

    /// Every accepted value re-parses to itself from its canonical text (the annotation table's round trip); a
    /// rejected value gets the table's "accepted" text, never a panic.
    #[test]
    fn annotation_values_round_trip(key in key(), raw in raw_value()) {
        match parse_value(key, &raw) {
            Ok(value) => {
                if let Some(text) = render(&value) {
                    prop_assert_eq!(parse_value(key, &text), Ok(value), "{:?} -> {:?}", raw, text);
                }
            }
            Err(accepted) => prop_assert_eq!(accepted, key.def().value.accepted()),
        }
    }

    /// A Service with any table annotations parses, or is refused with problems that each name a field.
    #[test]
    fn services_parse_or_name_the_field(
        annotations in prop::collection::btree_map(key().prop_map(|k| k.name().to_owned()), raw_value(), 0..8),
        ports in prop::collection::vec((any::<i32>(), any::<i32>(), prop::sample::select(vec!["TCP", "UDP", "SCTP", ""])), 0..4),
    ) {
        match parse_service(&service("ns", "web", "u-1", annotations, &ports)) {
            // An `external`/`nlb-ip` Service is the AWS Load Balancer Controller's: it parses without ports.
            Ok(spec) => prop_assert!(!spec.ports.is_empty() || spec.flavour == Flavour::External),
            Err(invalid) => {
                prop_assert!(!invalid.problems.is_empty());
                for problem in &invalid.problems {
                    prop_assert!(!problem.field.is_empty() && !problem.accepted.is_empty(), "{:?}", problem);
                }
            }
        }
    }

    /// Classic ELB names: `a` + the UID without dashes, at most 32 alphanumerics, the same every time.
    #[test]
    fn load_balancer_names_are_valid_for_aws(uid in prop_oneof![uuid(), "\\PC{1,64}"]) {
        let name = shared::load_balancer_name(&uid).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert!(name.len() <= 32 && name.starts_with('a'), "{}", name);
        prop_assert!(name.chars().all(|c| c.is_ascii_alphanumeric()), "{}", name);
        prop_assert_eq!(shared::load_balancer_name(&uid).ok(), Some(name.clone()));
        prop_assert!(shared::security_group_name(&name).len() <= 255);
    }

    /// A real UID gives exactly upstream's name (`a` + the first 31 hex digits).
    #[test]
    fn load_balancer_names_match_upstream_for_uuids(uid in uuid()) {
        let want: String = format!("a{}", uid.replace('-', "")).chars().take(32).collect();
        prop_assert_eq!(shared::load_balancer_name(&uid).ok(), Some(want));
    }

    /// NLB target group names: at most 32 characters, alphanumerics and inner hyphens, deterministic.
    #[test]
    fn target_group_names_are_valid_for_aws(
        namespace in object_name(),
        name in object_name(),
        uid in uuid(),
        port in 1i32..=65535,
        node_port in 30000i32..=32767,
        udp in any::<bool>(),
    ) {
        let protocol = if udp { "UDP" } else { "TCP" };
        let annotations = BTreeMap::from([(Key::Type.name().to_owned(), "nlb".to_owned())]);
        let spec = parse_service(&service(&namespace, &name, &uid, annotations, &[(port, node_port, protocol)]))
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        let config = config()?;
        let health_check = nlb::health_check(&spec, &config);
        let group = nlb::target_group_name("c1", &spec, port, node_port, protocol, &health_check);
        prop_assert!(group.len() <= 32 && is_aws_name(&group), "{}", group);
        prop_assert_eq!(&nlb::target_group_name("c1", &spec, port, node_port, protocol, &health_check), &group);
        for listener in nlb::listeners(&spec, &config) {
            prop_assert!(listener.target_group.name.len() <= 32 && is_aws_name(&listener.target_group.name));
        }
        let managed = nlb::managed_group_name("c1", &namespace, &name, &uid);
        prop_assert!(managed.len() <= 255 && is_aws_name(&managed), "{}", managed);
        prop_assert_eq!(nlb::managed_group_name("c1", &namespace, &name, &uid), managed);
    }
}
