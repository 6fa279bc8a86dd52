//! Bad input is refused before any write (#55, item 4): an attribute key AWS does not know, and a consented
//! rename whose new load balancer cannot be built. The mocks expect no write (an unexpected call panics).

use super::*;
use ccm_aws_api::elb::ClassicLoadBalancer;

/// Unknown attribute keys in every attribute annotation of an NLB are refused with the Service's other
/// problems, each naming the key and the keys accepted; not one AWS call is made (AWS would refuse such a key
/// only after `CreateSecurityGroup`, `CreateTargetGroup`, `RegisterTargets` and `CreateLoadBalancer`).
#[tokio::test]
async fn unknown_attribute_keys_are_refused_before_any_aws_call() {
    let lbs = AwsLoadBalancers::new(MockEc2::new(), MockElb::new(), MockElbv2::new(), config());
    let mut svc = service(
        &[
            (Key::Type, "nlb"),
            // An ALB's attribute, refused by AWS on an NLB.
            (Key::LoadBalancerAttributes, "idle_timeout.timeout_seconds=120"),
            (Key::IpAddressType, "ipv5"),
        ],
        &[(80, 30080)],
    );
    let annotations = svc.metadata.annotations.get_or_insert_default();
    annotations.insert(
        format!("{}TCP-80", crate::annotations::LISTENER_ATTRIBUTES_PREFIX),
        "tcp.idle_timeout.seconds=600,routing.http.response.server.enabled=false".to_owned(),
    );
    let n = node("i-1");
    let e = lbs.ensure_load_balancer("k", &svc, &[&n]).await.unwrap_err();
    let message = e.to_string();
    for expected in [
        "aws-load-balancer-attributes=\"idle_timeout.timeout_seconds=120\": the key \
         \"idle_timeout.timeout_seconds\" is unknown",
        "deletion_protection.enabled, load_balancing.cross_zone.enabled",
        "routing.http.response.server.enabled",
        "tcp.idle_timeout.seconds (a key AWS added since can be allowed with [Global] \
         ExtraLoadBalancerAttributeKeys",
        "ip-address-type=\"ipv5\"",
    ] {
        assert!(message.contains(expected), "{expected:?} missing from {message}");
    }
    let e = lbs.update_load_balancer("k", &svc, &[&n]).await.unwrap_err();
    assert!(e.to_string().contains("idle_timeout.timeout_seconds"), "{e}");
    let e = lbs.dry_run("k", &svc, &[&n]).await.unwrap_err();
    assert!(e.to_string().contains("idle_timeout.timeout_seconds"), "{e}");

    // An unknown key alone, in a Service otherwise valid: refused all the same, still without a call.
    let only_key = service(
        &[
            (Key::Type, "nlb"),
            (
                Key::LoadBalancerAttributes,
                "deletion_protection.enabled=true,access_logs.s3.bucket_name=logs",
            ),
        ],
        &[(80, 30080)],
    );
    let e = lbs.ensure_load_balancer("k", &only_key, &[&n]).await.unwrap_err();
    assert!(
        e.to_string()
            .contains("\"access_logs.s3.bucket_name\" is unknown"),
        "{e}"
    );
}

/// A key the operator allows (`[Global] ExtraLoadBalancerAttributeKeys`) passes the check: the ensure goes on to
/// AWS (here its first read, refused by the mock).
#[tokio::test]
async fn an_extra_key_of_the_cloud_config_is_accepted() {
    let mut ec2 = MockEc2::new();
    ec2.expect_availability_zones().times(1).returning(|| {
        Box::pin(async {
            Err(ccm_aws_api::AwsError::new(
                ccm_aws_api::ErrorKind::Permanent,
                "ec2",
                "X",
            ))
        })
    });
    let c = config().with_extra_attribute_keys(["future.attribute.enabled"]);
    let lbs = AwsLoadBalancers::new(ec2, MockElb::new(), MockElbv2::new(), c);
    let svc = service(
        &[
            (Key::Type, "nlb"),
            (Key::LoadBalancerAttributes, "future.attribute.enabled=true"),
            (Key::TargetGroupAttributes, "future.attribute.enabled=true"),
        ],
        &[(80, 30080)],
    );
    let e = lbs
        .ensure_load_balancer("k", &svc, &[&node("i-1")])
        .await
        .unwrap_err();
    assert!(e.to_string().contains("availability zones"), "{e}");
    let spec = crate::parse_service_with(&svc, &lbs.config().attribute_keys).unwrap();
    assert_eq!(
        spec.target_group_attributes
            .get("future.attribute.enabled")
            .map(String::as_str),
        Some("true"),
        "kept, not skipped as Go skipped unknown target group attributes"
    );
}

/// A consented rename resolves the new load balancer's subnets and builds it before the old one goes: a
/// Service whose new load balancer cannot be made (its subnet does not exist) keeps the old one.
#[tokio::test]
async fn a_rename_whose_new_load_balancer_cannot_be_built_keeps_the_old_one() {
    let old = crate::shared::load_balancer_name("0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0").unwrap();
    let mut ec2 = MockEc2::new();
    let mut elb = MockElb::new();
    let mut elbv2 = MockElbv2::new();
    elbv2
        .expect_load_balancer()
        .returning(|_| Box::pin(async { Ok(None) }));
    let serving = old.clone();
    elb.expect_load_balancer().returning(move |name| {
        let lb = (name == serving).then(|| ClassicLoadBalancer::new(name, "old.us-east-1.elb.amazonaws.com"));
        Box::pin(async move { Ok(lb) })
    });
    elb.expect_tags().returning(|_| {
        let ours: Tags = [
            ("kubernetes.io/cluster/c1".to_owned(), "owned".to_owned()),
            ("kubernetes.io/service-name".to_owned(), "prod/web".to_owned()),
        ]
        .into();
        Box::pin(async move { Ok(ours) })
    });
    // The subnets annotation names a subnet that does not exist.
    ec2.expect_subnets().returning(|_| Box::pin(async { Ok(vec![]) }));
    ec2.expect_security_groups()
        .returning(|_| Box::pin(async { Ok(vec![]) }));
    elb.expect_delete_load_balancer().never();
    let lbs = AwsLoadBalancers::new(ec2, elb, elbv2, config());
    let mut svc = service(
        &[
            (Key::LoadBalancerName, "shop"),
            (Key::AllowRecreation, "true"),
            (Key::Subnets, "subnet-gone"),
        ],
        &[(80, 30080)],
    );
    svc.status = Some(k8s_openapi::api::core::v1::ServiceStatus {
        load_balancer: Some(LoadBalancerStatus {
            ingress: Some(vec![LoadBalancerIngress {
                hostname: Some(format!("{old}-1234567890.us-east-1.elb.amazonaws.com")),
                ..LoadBalancerIngress::default()
            }]),
        }),
        ..Default::default()
    });
    let e = lbs
        .ensure_load_balancer("k", &svc, &[&node("i-1")])
        .await
        .unwrap_err();
    assert!(e.to_string().contains("subnet-gone"), "{e}");
}
