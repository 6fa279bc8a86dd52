use super::*;
use crate::Error;
use ccm_aws_api::InstanceId;
use ccm_aws_api::RouteTableId;
use ccm_aws_api::SecurityGroupId;
use ccm_aws_api::SubnetId;
use ccm_aws_api::Tags;
use ccm_aws_api::VpcId;
use ccm_aws_api::ec2::AvailabilityZone;
use ccm_aws_api::ec2::RouteTable;

mod upstream_record;
use ccm_aws_api::ec2::SecurityGroup;
use ccm_aws_api::ec2::Subnet;
use ccm_aws_api::ec2::{IpPermission, Route, RouteTableAssociation};
use ccm_cloud_provider::NodeView;
use ccm_tagging::ClusterTags;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::{api::core::v1::NodeSpec, apimachinery::pkg::apis::meta::v1::ObjectMeta};

fn cluster() -> ClusterTags {
    ClusterTags::new("c1", false).unwrap()
}

fn tags(pairs: &[(&str, &str)]) -> Tags {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

fn subnet(id: &str, zone: &str, t: &[(&str, &str)]) -> Subnet {
    Subnet::new(SubnetId::new(id), VpcId::new("vpc-1"), zone, tags(t))
}

fn table(id: &str, subnets: &[&str], main: bool, igw: bool) -> RouteTable {
    let mut routes = vec![Route::to_gateway("10.0.0.0/16", "local")];
    if igw {
        routes.push(Route::to_gateway("0.0.0.0/0", "igw-1"));
    }
    let mut t = RouteTable::new(RouteTableId::new(id), VpcId::new("vpc-1"), routes, Tags::new());
    t.associations = subnets
        .iter()
        .map(|s| RouteTableAssociation::new(Some(SubnetId::new(*s)), false))
        .collect();
    if main {
        t.associations.push(RouteTableAssociation::new(None, true));
    }
    t
}

#[test]
fn names_as_upstream() {
    assert_eq!(
        load_balancer_name("6f1d2b3c-aaaa-bbbb-cccc-1234567890ab").unwrap(),
        "a6f1d2b3caaaabbbbcccc1234567890a"
    );
    assert_eq!(
        load_balancer_name("6f1d2b3c-aaaa-bbbb-cccc-1234567890ab")
            .unwrap()
            .len(),
        32
    );
    assert_eq!(load_balancer_name("abc").unwrap(), "aabc");
    assert!(matches!(load_balancer_name(""), Err(Error::MissingUid)));
    assert_eq!(security_group_name("aabc"), "k8s-elb-aabc");
}

#[test]
fn route_tables_decide_public_subnets() {
    let tables = [
        table("rtb-main", &[], true, false),
        table("rtb-pub", &["subnet-pub"], false, true),
    ];
    assert!(is_public(&SubnetId::new("subnet-pub"), &tables));
    assert!(
        !is_public(&SubnetId::new("subnet-other"), &tables),
        "main table without igw"
    );
    let tables = [
        table("rtb-main", &[], true, true),
        table("rtb-priv", &["subnet-priv"], false, false),
    ];
    assert!(
        is_public(&SubnetId::new("subnet-any"), &tables),
        "main table with igw"
    );
    assert!(
        !is_public(&SubnetId::new("subnet-priv"), &tables),
        "explicit association wins"
    );
    assert!(!is_public(&SubnetId::new("subnet-x"), &[]));
}

#[test]
fn subnet_selection_one_per_zone_with_tie_breaks() {
    let c = cluster();
    let subnets = vec![
        // zone a: role tag beats cluster tag beats smallest ID
        subnet("subnet-a1", "us-east-1a", &[]),
        subnet(
            "subnet-a2",
            "us-east-1a",
            &[("kubernetes.io/cluster/c1", "shared")],
        ),
        subnet("subnet-a3", "us-east-1a", &[(ROLE_ELB_TAG, "")]),
        // zone b: cluster tag beats smaller ID
        subnet("subnet-b1", "us-east-1b", &[]),
        subnet(
            "subnet-b2",
            "us-east-1b",
            &[("kubernetes.io/cluster/c1", "owned")],
        ),
        // zone c: smallest ID
        subnet("subnet-c2", "us-east-1c", &[]),
        subnet("subnet-c1", "us-east-1c", &[]),
        // zone d: another cluster's subnet is never used
        subnet(
            "subnet-d1",
            "us-east-1d",
            &[("kubernetes.io/cluster/other", "owned")],
        ),
        // a local zone is dropped
        subnet("subnet-l1", "us-east-1-bos-1a", &[(ROLE_ELB_TAG, "1")]),
        // a private subnet is dropped for internet-facing
        subnet("subnet-e1", "us-east-1e", &[(ROLE_ELB_TAG, "1")]),
    ];
    let tables = vec![
        table("rtb-main", &[], true, true),
        table("rtb-priv", &["subnet-e1"], false, false),
    ];
    let zones = vec![
        AvailabilityZone::new("us-east-1a", "use1-az1", "availability-zone", "us-east-1"),
        AvailabilityZone::new("us-east-1-bos-1a", "use1-bos1-az1", "local-zone", "us-east-1"),
    ];
    let picked = select_subnets(&subnets, &tables, &zones, &c, false);
    assert_eq!(
        picked,
        ["subnet-a3", "subnet-b2", "subnet-c1"]
            .map(SubnetId::new)
            .to_vec()
    );
    // Internal: private subnets count, the internal role tag wins.
    let mut internal = subnets;
    internal.push(subnet("subnet-e0", "us-east-1e", &[]));
    internal.push(subnet("subnet-a9", "us-east-1a", &[(ROLE_INTERNAL_ELB_TAG, "1")]));
    let picked = select_subnets(&internal, &tables, &zones, &c, true);
    assert_eq!(
        picked,
        ["subnet-a9", "subnet-b2", "subnet-c1", "subnet-e0"]
            .map(SubnetId::new)
            .to_vec()
    );
}

#[test]
fn load_balancer_rules_per_port_and_range_with_mtu() {
    let rules = load_balancer_ingress(
        "TCP",
        &[80, 443],
        &["10.0.0.0/8".into(), "2001:db8::/32".into()],
        &[],
    );
    let got: Vec<(String, i32, i32, String)> = rules
        .iter()
        .map(|r| (r.protocol.clone(), r.from_port, r.to_port, r.source.clone()))
        .collect();
    let want = [
        ("icmp", 3, 4, "10.0.0.0/8"),
        ("icmpv6", 2, 0, "2001:db8::/32"),
        ("tcp", 80, 80, "10.0.0.0/8"),
        ("tcp", 80, 80, "2001:db8::/32"),
        ("tcp", 443, 443, "10.0.0.0/8"),
        ("tcp", 443, 443, "2001:db8::/32"),
    ]
    .map(|(p, f, t, c)| (p.to_owned(), f, t, c.to_owned()));
    assert_eq!(got, want);
    // Round trip through the EC2 shape.
    let mut group = SecurityGroup::new(SecurityGroupId::new("sg-1"), "g", None, Tags::new());
    group.ingress = rules.iter().map(Rule::to_permission).collect();
    group
        .ingress
        .push(IpPermission::all_from_group(SecurityGroupId::new("sg-2")));
    assert_eq!(observed_rules(&group), rules, "group sources are not CIDR rules");
}

#[test]
fn instance_group_prefers_the_single_tagged_group() {
    let c = cluster();
    let g = |id: &str, t: &[(&str, &str)]| SecurityGroup::new(SecurityGroupId::new(id), id, None, tags(t));
    let tagged = g("sg-t", &[("kubernetes.io/cluster/c1", "owned")]);
    let shared_tag = g("sg-s", &[("kubernetes.io/cluster/c1", "shared")]);
    let untagged = g("sg-u", &[]);
    let untagged2 = g("sg-u2", &[]);
    let foreign = g("sg-f", &[("kubernetes.io/cluster/other", "owned")]);
    let i = InstanceId::new("i-1");
    assert_eq!(
        instance_group(&i, &[&tagged, &untagged], &c).unwrap(),
        Some(SecurityGroupId::new("sg-t"))
    );
    assert_eq!(
        instance_group(&i, &[&untagged, &foreign], &c).unwrap(),
        Some(SecurityGroupId::new("sg-u"))
    );
    assert_eq!(instance_group(&i, &[&foreign], &c).unwrap(), None);
    let err = instance_group(&i, &[&tagged, &shared_tag], &c)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("multiple cluster-tagged") && err.contains("sg-t") && err.contains("sg-s"),
        "{err}"
    );
    let err = instance_group(&i, &[&untagged, &untagged2], &c)
        .unwrap_err()
        .to_string();
    assert!(err.contains("multiple untagged"), "{err}");
}

fn node(name: &str, provider_id: Option<&str>, labels: &[(&str, &str)]) -> NodeView {
    NodeView::from(Node {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            labels: Some(
                labels
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                    .collect(),
            ),
            ..ObjectMeta::default()
        },
        spec: Some(NodeSpec {
            provider_id: provider_id.map(str::to_owned),
            ..NodeSpec::default()
        }),
        status: None,
    })
}

#[test]
fn targets_from_provider_ids_and_labels() {
    let nodes = [
        node("a", Some("aws:///us-east-1a/i-aaa"), &[("role", "web")]),
        node("b", Some("aws:///us-east-1b/i-bbb"), &[("role", "db")]),
        node(
            "c",
            Some("aws:///us-east-1a/fargate-ip-10-0-0-1.ec2.internal"),
            &[("role", "web")],
        ),
        node("d", None, &[("role", "web")]),
        node("e", Some("aws:///i-eee"), &[]),
    ];
    let refs: Vec<&NodeView> = nodes.iter().collect();
    assert_eq!(
        target_instances(&refs, &[]),
        ["i-aaa", "i-bbb", "i-eee"].map(InstanceId::new).to_vec()
    );
    assert_eq!(
        target_instances(&refs, &[("role".into(), "web".into())]),
        [InstanceId::new("i-aaa")].to_vec()
    );
    assert_eq!(
        target_instances(&refs, &[("role".into(), String::new())]),
        ["i-aaa", "i-bbb"].map(InstanceId::new).to_vec()
    );
}

#[test]
fn tags_carry_service_and_ownership_and_additional() {
    let mut service = k8s_openapi::api::core::v1::Service::default();
    service.metadata.name = Some("web".into());
    service.metadata.namespace = Some("prod".into());
    service.metadata.uid = Some("u-1".into());
    service.metadata.annotations = Some(
        [(
            crate::annotations::Key::AdditionalResourceTags.name().to_owned(),
            "team=a, kubernetes.io/cluster/c1=shared".to_owned(),
        )]
        .into(),
    );
    service.spec = Some(k8s_openapi::api::core::v1::ServiceSpec {
        type_: Some("LoadBalancer".into()),
        ports: Some(vec![k8s_openapi::api::core::v1::ServicePort {
            port: 80,
            node_port: Some(30080),
            ..Default::default()
        }]),
        ..Default::default()
    });
    // An ownership key in the annotation is refused outright, naming the key.
    let refused = crate::parse_service(&service).unwrap_err().to_string();
    assert!(
        refused.contains("\"kubernetes.io/cluster/c1\" is refused"),
        "{refused}"
    );
    service.metadata.annotations = Some(
        [(
            crate::annotations::Key::AdditionalResourceTags.name().to_owned(),
            "team=a".to_owned(),
        )]
        .into(),
    );
    let spec = crate::parse_service(&service).unwrap();
    let t = load_balancer_tags(&cluster(), &spec);
    assert_eq!(
        t,
        tags(&[
            ("kubernetes.io/additional-resource-tags", "team"),
            ("kubernetes.io/cluster/c1", "owned"),
            ("kubernetes.io/service-name", "prod/web"),
            ("kubernetes.io/service-uid", "u-1"),
            ("team", "a")
        ]),
        "the Service's and the ownership tags with the additional ones"
    );
}

#[tokio::test]
async fn a_dual_stack_nlb_needs_ipv6_subnets_and_names_those_without() {
    use crate::{annotations::Key, classic::tests::service, parse_service};
    use ccm_aws_api::ec2::MockEc2;
    let with_ipv6 = |id: &str, zone: &str, v6: bool| {
        let mut s = subnet(id, zone, &[]);
        if v6 {
            s.ipv6_cidr_blocks = vec!["2600:1f18:0:1::/64".to_owned()];
        }
        s
    };
    let spec = |annotations: &[(Key, &str)]| {
        let mut all = vec![(Key::Type, "nlb")];
        all.extend_from_slice(annotations);
        parse_service(&service(&all, &[(80, 30080)])).unwrap()
    };
    let pinned = (Key::Subnets, "subnet-a,subnet-b");
    let dual = (Key::IpAddressType, "dualstack");
    // Only the subnets read: no other call is expected of the mock.
    let ec2 = |a_v6: bool| {
        let mut ec2 = MockEc2::new();
        ec2.expect_subnets().times(1).returning(move |_| {
            let found = vec![
                with_ipv6("subnet-a", "us-east-1a", a_v6),
                with_ipv6("subnet-b", "us-east-1b", true),
            ];
            Box::pin(async move { Ok(found) })
        });
        ec2
    };
    let config = crate::classic::tests::config();
    let e = resolve_subnets(&ec2(false), &config, &spec(&[pinned, dual]), &[])
        .await
        .unwrap_err();
    assert!(
        matches!(&e, Error::SubnetsWithoutIpv6 { subnets } if subnets == &["subnet-a".to_owned()]),
        "{e}"
    );
    assert!(e.to_string().contains("or use ipv4"), "{e}");
    let ok = resolve_subnets(&ec2(true), &config, &spec(&[pinned, dual]), &[])
        .await
        .unwrap();
    assert_eq!(ok, [SubnetId::new("subnet-a"), SubnetId::new("subnet-b")]);
    // IPv4 NLBs and Classic ELBs do not care.
    resolve_subnets(&ec2(false), &config, &spec(&[pinned]), &[])
        .await
        .unwrap();

    // The fallback subnet is read (one more call) only for a dual-stack NLB.
    let mut config = config;
    config.fallback_subnet = Some(SubnetId::new("subnet-f"));
    let mut ec2 = MockEc2::new();
    ec2.expect_subnets()
        .times(1)
        .returning(|_| Box::pin(async { Ok(Vec::new()) }));
    ec2.expect_route_tables()
        .times(1)
        .returning(|_| Box::pin(async { Ok(Vec::new()) }));
    ec2.expect_subnets()
        .times(1)
        .returning(|_| Box::pin(async { Ok(vec![subnet("subnet-f", "us-east-1a", &[])]) }));
    let e = resolve_subnets(&ec2, &config, &spec(&[dual]), &[])
        .await
        .unwrap_err();
    assert!(
        matches!(&e, Error::SubnetsWithoutIpv6 { subnets } if subnets == &["subnet-f".to_owned()]),
        "{e}"
    );
}

/// Each entry of the subnets annotation must name exactly one subnet: a Name tag on two subnets used to make up
/// for a missing ID (the check compared counts only).
#[tokio::test]
async fn every_subnets_entry_must_name_exactly_one_subnet() {
    use crate::{annotations::Key, classic::tests::service, parse_service};
    use ccm_aws_api::ec2::MockEc2;
    let spec = parse_service(&service(&[(Key::Subnets, "subnet-gone,web")], &[(80, 30080)])).unwrap();
    let mut ec2 = MockEc2::new();
    // By ID: nothing; by Name: two subnets carry `web`.
    ec2.expect_subnets()
        .times(1)
        .withf(|f| f[0].name == "subnet-id")
        .returning(|_| Box::pin(async { Ok(Vec::new()) }));
    ec2.expect_subnets().times(1).returning(|_| {
        let found = vec![
            subnet("subnet-1", "us-east-1a", &[("Name", "web")]),
            subnet("subnet-2", "us-east-1b", &[("Name", "web")]),
        ];
        Box::pin(async move { Ok(found) })
    });
    let e = resolve_subnets(&ec2, &crate::classic::tests::config(), &spec, &[])
        .await
        .unwrap_err();
    assert!(
        matches!(&e, Error::SubnetsNotFound { unmatched, .. } if unmatched == &["subnet-gone".to_owned(), "web".to_owned()]),
        "{e}"
    );
    assert!(e.to_string().contains("aws-load-balancer-subnets"), "{e}");
}

#[test]
fn tags_dropped_from_the_annotation_are_those_its_record_names() {
    use crate::shared::{ANNOTATION_TAGS_MARKER, dropped_tags};
    let current = tags(&[
        (ANNOTATION_TAGS_MARKER, "env team"),
        ("env", "prod"),
        ("team", "a"),
        ("by-hand", "x"),
        ("kubernetes.io/cluster/c1", "owned"),
    ]);
    // `env` dropped: removed; `team` kept; a hand tag never; the record stays (rewritten by AddTags).
    let desired = tags(&[(ANNOTATION_TAGS_MARKER, "team"), ("team", "b")]);
    assert_eq!(dropped_tags(&current, &desired), ["env"]);
    // The annotation gone: its keys and the record go.
    assert_eq!(
        dropped_tags(&current, &tags(&[])),
        ["env", ANNOTATION_TAGS_MARKER, "team"]
    );
    // Without a record (made by hand, by the Go controller or before records): nothing.
    let unrecorded = tags(&[("env", "prod"), ("team", "a")]);
    assert_eq!(dropped_tags(&unrecorded, &tags(&[])), Vec::<String>::new());
    // A record naming the controller's own tags (written by hand) never removes them; absent keys are skipped.
    let forged = tags(&[
        (
            ANNOTATION_TAGS_MARKER,
            "kubernetes.io/cluster/c1 kubernetes.io/service-name gone",
        ),
        ("kubernetes.io/cluster/c1", "owned"),
        ("kubernetes.io/service-name", "prod/web"),
    ]);
    assert_eq!(dropped_tags(&forged, &tags(&[])), [ANNOTATION_TAGS_MARKER]);
}

#[test]
fn the_record_lists_the_keys_that_fit_and_refuses_to_be_set_by_the_annotation() {
    let mut service = crate::classic::tests::service(&[], &[(80, 30080)]);
    let long: Vec<String> = (0..20)
        .map(|i| format!("key-{i:02}-{}", "x".repeat(10)))
        .collect();
    let value = long
        .iter()
        .map(|k| format!("{k}=v"))
        .collect::<Vec<_>>()
        .join(",")
        + ",with space=v";
    service.metadata.annotations = Some(
        [(
            crate::annotations::Key::AdditionalResourceTags.name().to_owned(),
            value,
        )]
        .into(),
    );
    let spec = crate::parse_service(&service).unwrap();
    let record = load_balancer_tags(&cluster(), &spec)[crate::shared::ANNOTATION_TAGS_MARKER].clone();
    assert!(record.len() <= 256, "{}", record.len());
    assert!(
        record.starts_with("key-00-") && !record.contains("with"),
        "{record}"
    );
    // The annotation cannot write the record itself.
    service.metadata.annotations = Some(
        [(
            crate::annotations::Key::AdditionalResourceTags.name().to_owned(),
            "kubernetes.io/additional-resource-tags=x".to_owned(),
        )]
        .into(),
    );
    let e = crate::parse_service(&service).unwrap_err().to_string();
    assert!(
        e.contains("\"kubernetes.io/additional-resource-tags\" is refused"),
        "{e}"
    );
}

#[test]
fn an_unrecorded_resource_gets_its_record_only_with_another_change() {
    use crate::shared::{ANNOTATION_TAGS_MARKER, tag_additions};
    let desired = tags(&[(ANNOTATION_TAGS_MARKER, "team"), ("team", "a")]);
    // Taken over from the Go controller (its tags right, no record): nothing written.
    assert_eq!(tag_additions(&tags(&[("team", "a")]), &desired), Tags::new());
    // Another change: the record goes with it.
    assert_eq!(tag_additions(&tags(&[("team", "b")]), &desired), desired);
    // A recorded resource keeps its record current.
    let recorded = tags(&[(ANNOTATION_TAGS_MARKER, "env team"), ("team", "a")]);
    assert_eq!(
        tag_additions(&recorded, &desired),
        tags(&[(ANNOTATION_TAGS_MARKER, "team")])
    );
}

/// The Service UID tag as the record: a resource taken over without one (the Go controller's, always under the
/// UID name) gets it only with another change of its tags; another incarnation's UID is replaced at once.
#[test]
fn a_resource_without_a_uid_gets_it_with_another_change_another_uid_at_once() {
    use crate::shared::{SERVICE_UID_TAG, tag_additions};
    let desired = tags(&[(SERVICE_UID_TAG, "u-2"), ("kubernetes.io/service-name", "ns/a")]);
    let go_made = tags(&[("kubernetes.io/service-name", "ns/a")]);
    assert_eq!(tag_additions(&go_made, &desired), Tags::new());
    let renamed = tags(&[("kubernetes.io/service-name", "ns/b")]);
    assert_eq!(tag_additions(&renamed, &desired), desired);
    let predecessor = tags(&[(SERVICE_UID_TAG, "u-1"), ("kubernetes.io/service-name", "ns/a")]);
    assert_eq!(
        tag_additions(&predecessor, &desired),
        tags(&[(SERVICE_UID_TAG, "u-2")])
    );
}

#[test]
fn a_chosen_name_or_the_uid_name() {
    let svc =
        crate::classic::tests::service(&[(crate::annotations::Key::LoadBalancerName, "web")], &[(80, 1)]);
    let spec = crate::spec::parse_service(&svc).unwrap();
    assert_eq!(service_load_balancer_name(&spec).unwrap(), "web");
    let svc = crate::classic::tests::service(&[], &[(80, 1)]);
    let spec = crate::spec::parse_service(&svc).unwrap();
    assert_eq!(
        service_load_balancer_name(&spec).unwrap(),
        load_balancer_name(&spec.uid).unwrap()
    );
}

/// AWS's DNS names (Classic, internal, NLB) and moto's (Classic without an ID, NLB with `-1`).
#[test]
fn names_found_in_dns_names() {
    for (host, names) in [
        (
            "web-1234567890.us-east-1.elb.amazonaws.com",
            &["web", "web-1234567890"][..],
        ),
        (
            "internal-my-lb-99.us-east-1.elb.amazonaws.com",
            &["my-lb", "my-lb-99"],
        ),
        (
            "my-nlb-0123456789abcdef.elb.eu-west-1.amazonaws.com",
            &["my-nlb", "my-nlb-0123456789abcdef"],
        ),
        ("web.us-east-1.elb.amazonaws.com", &["web"]),
        ("my-lb.us-east-1.elb.amazonaws.com", &["my", "my-lb"]),
        // A UID name with AWS's ID is too long to be a name itself.
        (
            "a6f1d2b3caaaabbbbcccc1234567890a-1.us-east-1.elb.amazonaws.com",
            &["a6f1d2b3caaaabbbbcccc1234567890a"],
        ),
        ("", &[]),
        ("-.x", &[]),
    ] {
        assert_eq!(names_in_hostname(host), names, "{host}");
    }
    assert!(is_load_balancer_name("a-b"));
    assert!(!is_load_balancer_name("Internal-web"));
}

#[test]
fn a_rename_is_seen_from_the_status() {
    let mut svc = crate::classic::tests::service(&[], &[(80, 1)]);
    assert!(
        renamed_from(&svc, "new").is_empty(),
        "no status: nothing made yet"
    );
    svc.status = Some(k8s_openapi::api::core::v1::ServiceStatus {
        load_balancer: Some(k8s_openapi::api::core::v1::LoadBalancerStatus {
            ingress: Some(vec![k8s_openapi::api::core::v1::LoadBalancerIngress {
                hostname: Some("old-lb-42.us-east-1.elb.amazonaws.com".to_owned()),
                ..Default::default()
            }]),
        }),
        ..Default::default()
    });
    assert_eq!(status_names(&svc), ["old-lb", "old-lb-42"]);
    assert_eq!(renamed_from(&svc, "new"), ["old-lb", "old-lb-42"]);
    assert!(renamed_from(&svc, "old-lb").is_empty());
}
