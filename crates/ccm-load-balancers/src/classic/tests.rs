use super::*;
use crate::{annotations::Key, parse_service};
use ccm_aws_api::{
    AwsError, ErrorKind, VpcId,
    ec2::MockEc2,
    elb::{BackendPolicies, MockElb},
};
use ccm_tagging::ClusterTags;
use k8s_openapi::{
    api::core::v1::{NodeSpec, Service, ServicePort, ServiceSpec as K8sServiceSpec},
    apimachinery::pkg::apis::meta::v1::ObjectMeta,
};
use serde_json::json;

pub(crate) fn config() -> LoadBalancerConfig {
    LoadBalancerConfig::new(ClusterTags::new("c1", false).unwrap(), VpcId::new("vpc-1"))
}

pub(crate) fn service(annotations: &[(Key, &str)], ports: &[(i32, i32)]) -> Service {
    Service {
        metadata: ObjectMeta {
            name: Some("web".into()),
            namespace: Some("prod".into()),
            uid: Some("0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0".into()),
            annotations: Some(
                annotations
                    .iter()
                    .map(|(k, v)| (k.name().to_owned(), (*v).to_owned()))
                    .collect(),
            ),
            ..ObjectMeta::default()
        },
        spec: Some(K8sServiceSpec {
            type_: Some("LoadBalancer".into()),
            ports: Some(
                ports
                    .iter()
                    .map(|(port, node_port)| ServicePort {
                        name: Some(format!("p{port}")),
                        port: *port,
                        node_port: Some(*node_port),
                        protocol: Some("TCP".into()),
                        ..ServicePort::default()
                    })
                    .collect(),
            ),
            ..K8sServiceSpec::default()
        }),
        status: None,
    }
}

pub(crate) fn node(id: &str) -> Node {
    Node {
        metadata: ObjectMeta {
            name: Some(format!("node-{id}")),
            ..ObjectMeta::default()
        },
        spec: Some(NodeSpec {
            provider_id: Some(format!("aws:///us-east-1a/{id}")),
            ..NodeSpec::default()
        }),
        status: None,
    }
}

const NAME: &str = "a0f1e2d3c4b5a69788796a5b4c3d2e1f";

pub(crate) fn desired_for(annotations: &[(Key, &str)], ports: &[(i32, i32)], nodes: &[&str]) -> Desired {
    let spec = parse_service(&service(annotations, ports)).unwrap();
    let nodes: Vec<Node> = nodes.iter().map(|n| node(n)).collect();
    let refs: Vec<&Node> = nodes.iter().collect();
    build(
        &spec,
        &refs,
        &config(),
        &[SubnetId::new("subnet-a"), SubnetId::new("subnet-b")],
    )
    .unwrap()
}

/// The AWS state right after `desired` was applied: what a steady Service observes.
pub(crate) fn converged(desired: &Desired) -> Observed {
    let mut lb = ClassicLoadBalancer::new(&desired.name, "x.us-east-1.elb.amazonaws.com");
    lb.internal = desired.internal;
    lb.subnets = desired.subnets.iter().map(|s| SubnetId::new(s.clone())).collect();
    lb.security_groups = vec![SecurityGroupId::new("sg-lb")];
    lb.listeners = desired
        .listeners
        .iter()
        .map(|l| {
            let mut a = l.to_aws();
            if l.is_secure()
                && let Some(p) = &desired.ssl_negotiation_policy
            {
                a.policy_names = vec![ssl_policy_name(p)];
            }
            a
        })
        .collect();
    lb.health_check = Some(desired.health_check.to_aws());
    lb.instances = desired
        .instances
        .iter()
        .map(|s| InstanceId::new(s.clone()))
        .collect();
    if desired.proxy_protocol {
        lb.backend_policies = desired
            .listeners
            .iter()
            .map(|l| BackendPolicies {
                instance_port: l.instance_port,
                policy_names: vec![PROXY_PROTOCOL_POLICY.to_owned()],
            })
            .collect();
    }
    let mut group = SecurityGroup::new(
        SecurityGroupId::new("sg-lb"),
        &shared::security_group_name(&desired.name),
        Some(VpcId::new("vpc-1")),
        desired
            .managed_group
            .as_ref()
            .map(|g| g.tags.clone())
            .unwrap_or_default(),
    );
    group.ingress = desired
        .managed_group
        .as_ref()
        .map(|g| g.ingress.iter().map(Rule::to_permission).collect())
        .unwrap_or_default();
    let mut attributes = desired.attributes.to_aws();
    if desired.attributes.draining_timeout.is_none() {
        attributes.connection_draining_timeout = Some(300);
    }
    let mut policies = BTreeSet::new();
    if desired.proxy_protocol {
        policies.insert(PROXY_PROTOCOL_POLICY.to_owned());
    }
    if let Some(p) = &desired.ssl_negotiation_policy {
        policies.insert(ssl_policy_name(p));
    }
    Observed {
        load_balancer: Some(lb),
        // AWS adds its own tags; they are never removed.
        tags: {
            let mut t = desired.tags.clone();
            t.insert("aws:cloudformation:stack".into(), "x".into());
            t
        },
        owned: Some(true),
        attributes: Some(attributes),
        policies,
        managed_group: desired.managed_group.as_ref().map(|_| group),
        node_groups: Some(NodeGroups {
            wanted: [SecurityGroupId::new("sg-node")].into(),
            with_rule: [SecurityGroupId::new("sg-node")].into(),
            revocable: [SecurityGroupId::new("sg-node")].into(),
        }),
        existing_instances: Some(desired.instances.iter().cloned().collect()),
        orphaned_group: None,
    }
}

#[test]
fn desired_model_of_a_default_service() {
    let desired = desired_for(&[], &[(80, 30080), (443, 30443)], &["i-2", "i-1"]);
    let got = serde_json::to_value(&desired).unwrap();
    let want = json!({
        "name": NAME,
        "service": "prod/web",
        "internal": false,
        "subnets": ["subnet-a", "subnet-b"],
        "managed_group": {
            "name": format!("k8s-elb-{NAME}"),
            "description": format!("Security group for Kubernetes ELB {NAME} (prod/web)"),
            "tags": {"kubernetes.io/cluster/c1": "owned", "kubernetes.io/service-name": "prod/web"},
            "ingress": [
                {"protocol": "icmp", "from_port": 3, "to_port": 4, "cidr": "0.0.0.0/0"},
                {"protocol": "tcp", "from_port": 80, "to_port": 80, "cidr": "0.0.0.0/0"},
                {"protocol": "tcp", "from_port": 443, "to_port": 443, "cidr": "0.0.0.0/0"}
            ]
        },
        "security_groups": ["Managed"],
        "listeners": [
            {"protocol": "TCP", "port": 80, "instance_protocol": "TCP", "instance_port": 30080, "ssl_certificate_id": null},
            {"protocol": "TCP", "port": 443, "instance_protocol": "TCP", "instance_port": 30443, "ssl_certificate_id": null}
        ],
        "health_check": {"target": "TCP:30080", "interval": 10, "timeout": 5, "healthy_threshold": 2, "unhealthy_threshold": 6},
        "attributes": {
            "cross_zone": false, "access_log_enabled": false, "access_log_emit_interval": null,
            "access_log_bucket": null, "access_log_prefix": null, "draining_enabled": false,
            "draining_timeout": null, "idle_timeout": 60
        },
        "proxy_protocol": false,
        "ssl_negotiation_policy": null,
        "instances": ["i-1", "i-2"],
        "tags": {"kubernetes.io/cluster/c1": "owned", "kubernetes.io/service-name": "prod/web"},
        "manage_node_rules": true
    });
    assert_eq!(got, want, "{}", serde_json::to_string_pretty(&got).unwrap());
}

#[test]
fn plan_for_a_new_service_creates_everything_in_order() {
    let desired = desired_for(&[], &[(80, 30080)], &["i-1"]);
    let observed = Observed {
        node_groups: Some(NodeGroups {
            wanted: [SecurityGroupId::new("sg-node")].into(),
            ..NodeGroups::default()
        }),
        ..Observed::default()
    };
    let changes = serde_json::to_value(plan(&desired, &observed)).unwrap();
    let kinds: Vec<&str> = changes
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["change"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        [
            "create_security_group",
            "authorize_ingress",
            "create_load_balancer",
            "configure_health_check",
            "register_instances",
            "authorize_node_access"
        ]
    );
    assert_eq!(
        changes[2],
        json!({
            "change": "create_load_balancer", "name": NAME, "internal": false,
            "subnets": ["subnet-a", "subnet-b"], "security_groups": ["Managed"],
            "listeners": [{"protocol": "TCP", "port": 80, "instance_protocol": "TCP", "instance_port": 30080, "ssl_certificate_id": null}],
            "tags": {"kubernetes.io/cluster/c1": "owned", "kubernetes.io/service-name": "prod/web"}
        })
    );
    assert_eq!(
        changes[5],
        json!({"change": "authorize_node_access", "group": "sg-node", "from": "Managed"})
    );
}

#[test]
fn a_steady_service_plans_nothing() {
    let cases: Vec<Vec<(Key, &str)>> = vec![
        vec![],
        vec![
            (Key::SslCert, "arn:aws:acm:us-east-1:1:certificate/c"),
            (Key::SslPorts, "443"),
            (Key::BackendProtocol, "http"),
            (Key::SslNegotiationPolicy, "ELBSecurityPolicy-TLS-1-2-2017-01"),
            (Key::ProxyProtocol, "*"),
            (Key::ConnectionDrainingEnabled, "true"),
            (Key::ConnectionDrainingTimeout, "30"),
            (Key::ConnectionIdleTimeout, "120"),
            (Key::CrossZoneLoadBalancingEnabled, "true"),
            (Key::AccessLogEnabled, "true"),
            (Key::AccessLogS3BucketName, "logs"),
            (Key::HealthcheckProtocol, "HTTP"),
            (Key::HealthcheckPath, "/ready"),
            (Key::AdditionalResourceTags, "team=a"),
            (Key::Internal, "true"),
        ],
    ];
    for annotations in cases {
        let desired = desired_for(&annotations, &[(80, 30080), (443, 30443)], &["i-1", "i-2"]);
        let observed = converged(&desired);
        assert_eq!(plan(&desired, &observed), Vec::<Change>::new(), "{annotations:?}");
    }
}

#[test]
fn node_set_changes_only_register_and_deregister() {
    let before = desired_for(&[], &[(80, 30080)], &["i-1", "i-2"]);
    let mut observed = converged(&before);
    observed.existing_instances = None;
    let after = desired_for(&[], &[(80, 30080)], &["i-2", "i-3"]);
    assert_eq!(
        plan(&after, &observed),
        vec![
            Change::RegisterInstances {
                instances: vec!["i-3".into()]
            },
            Change::DeregisterInstances {
                instances: vec!["i-1".into()]
            },
        ]
    );
}

#[test]
fn port_changes_replace_only_the_changed_listeners_and_rules() {
    let before = desired_for(&[], &[(80, 30080), (443, 30443)], &["i-1"]);
    let observed = converged(&before);
    let after = desired_for(&[], &[(80, 30081), (8443, 30443)], &["i-1"]);
    let changes = serde_json::to_value(plan(&after, &observed)).unwrap();
    assert_eq!(
        changes,
        json!([
            {"change": "authorize_ingress", "group": "Managed", "rules": [
                {"protocol": "tcp", "from_port": 8443, "to_port": 8443, "cidr": "0.0.0.0/0"}]},
            {"change": "revoke_ingress", "group": "Managed", "rules": [
                {"protocol": "tcp", "from_port": 443, "to_port": 443, "cidr": "0.0.0.0/0"}]},
            {"change": "delete_listeners", "ports": [80, 443]},
            {"change": "create_listeners", "listeners": [
                {"protocol": "TCP", "port": 80, "instance_protocol": "TCP", "instance_port": 30081, "ssl_certificate_id": null},
                {"protocol": "TCP", "port": 8443, "instance_protocol": "TCP", "instance_port": 30443, "ssl_certificate_id": null}]},
            {"change": "configure_health_check", "health_check": {"target": "TCP:30081", "interval": 10, "timeout": 5, "healthy_threshold": 2, "unhealthy_threshold": 6}}
        ])
    );
}

#[test]
#[allow(clippy::type_complexity)]
fn listeners_follow_certificate_ports_and_backend_protocol() {
    let cert = "arn:aws:acm:us-east-1:1:certificate/c";
    let cases: &[(Option<&str>, &str, [(&str, &str); 2])] = &[
        (None, "443", [("TCP", "TCP"), ("SSL", "TCP")]),
        (Some("http"), "443", [("HTTP", "HTTP"), ("HTTPS", "HTTP")]),
        (Some("https"), "p443", [("TCP", "TCP"), ("HTTPS", "HTTPS")]),
        (Some("ssl"), "*", [("SSL", "SSL"), ("SSL", "SSL")]),
        (Some("tcp"), "443", [("TCP", "TCP"), ("SSL", "TCP")]),
    ];
    for (backend, ports, want) in cases {
        let mut annotations = vec![(Key::SslCert, cert), (Key::SslPorts, *ports)];
        if let Some(b) = backend {
            annotations.push((Key::BackendProtocol, b));
        }
        let desired = desired_for(&annotations, &[(80, 30080), (443, 30443)], &[]);
        let got: Vec<(&str, &str)> = desired
            .listeners
            .iter()
            .map(|l| (l.protocol.as_str(), l.instance_protocol.as_str()))
            .collect();
        assert_eq!(got, want.to_vec(), "backend {backend:?}, ports {ports}");
        for l in &desired.listeners {
            assert_eq!(l.ssl_certificate_id.is_some(), l.is_secure());
        }
    }
}

#[test]
fn health_checks_follow_traffic_policy_probe_mode_and_annotations() {
    let spec_with = |annotations: &[(Key, &str)], local: bool| {
        let mut svc = service(annotations, &[(80, 30080)]);
        if local {
            let s = svc.spec.as_mut().unwrap();
            s.external_traffic_policy = Some("Local".into());
            s.health_check_node_port = Some(32000);
        }
        parse_service(&svc).unwrap()
    };
    let hc = |spec: &ServiceSpec, config: &LoadBalancerConfig| health_check(spec, config).target;
    let c = config();
    assert_eq!(hc(&spec_with(&[], false), &c), "TCP:30080");
    assert_eq!(hc(&spec_with(&[], true), &c), "HTTP:32000/healthz");
    assert_eq!(
        hc(&spec_with(&[(Key::BackendProtocol, "https")], false), &c),
        "SSL:30080"
    );
    assert_eq!(
        hc(&spec_with(&[(Key::HealthcheckPort, "traffic-port")], true), &c),
        "HTTP:30080/healthz"
    );
    assert_eq!(
        hc(
            &spec_with(
                &[(Key::HealthcheckProtocol, "http"), (Key::HealthcheckPort, "8080")],
                false
            ),
            &c
        ),
        "HTTP:8080/"
    );
    assert_eq!(
        hc(&spec_with(&[(Key::HealthcheckPath, "/ready")], true), &c),
        "HTTP:32000/ready"
    );
    let mut shared_mode = config();
    shared_mode.health_probe = HealthProbeMode::Shared {
        port: 10256,
        path: "/healthz".into(),
    };
    assert_eq!(hc(&spec_with(&[], false), &shared_mode), "HTTP:10256/healthz");
    assert_eq!(
        hc(&spec_with(&[], true), &shared_mode),
        "HTTP:32000/healthz",
        "Local wins"
    );
    let spec = spec_with(
        &[
            (Key::HealthcheckInterval, "30"),
            (Key::HealthcheckTimeout, "10"),
            (Key::HealthcheckHealthyThreshold, "3"),
            (Key::HealthcheckUnhealthyThreshold, "4"),
        ],
        false,
    );
    let check = health_check(&spec, &c);
    assert_eq!(
        (
            check.interval,
            check.timeout,
            check.healthy_threshold,
            check.unhealthy_threshold
        ),
        (30, 10, 3, 4)
    );
}

#[test]
fn attributes_compare_only_owned_fields() {
    let desired = desired_for(&[], &[(80, 30080)], &[]);
    let mut observed = converged(&desired);
    // A draining timeout we do not own, and access log details while logs are off: no change.
    let attributes = observed.attributes.as_mut().unwrap();
    attributes.connection_draining_timeout = Some(42);
    attributes.access_log.s3_bucket_name = Some("someone-elses".into());
    assert_eq!(plan(&desired, &observed), vec![]);
    // Cross-zone flipped by hand: restored, keeping AWS's draining timeout.
    observed.attributes.as_mut().unwrap().cross_zone = true;
    let mut expected = desired.attributes.clone();
    expected.draining_timeout = Some(42);
    assert_eq!(
        plan(&desired, &observed),
        vec![Change::ModifyAttributes { attributes: expected }]
    );
}

#[test]
fn proxy_protocol_and_ssl_policies() {
    let on = desired_for(&[(Key::ProxyProtocol, "*")], &[(80, 30080)], &[]);
    let off = desired_for(&[], &[(80, 30080)], &[]);
    let observed = converged(&off);
    assert_eq!(
        plan(&on, &observed),
        vec![
            Change::CreatePolicy {
                name: PROXY_PROTOCOL_POLICY.into(),
                type_name: "ProxyProtocolPolicyType".into(),
                attributes: vec![("ProxyProtocol".into(), "true".into())]
            },
            Change::SetBackendPolicies {
                instance_port: 30080,
                policies: vec![PROXY_PROTOCOL_POLICY.into()]
            }
        ]
    );
    let observed = converged(&on);
    assert_eq!(
        plan(&off, &observed),
        vec![Change::SetBackendPolicies {
            instance_port: 30080,
            policies: vec![]
        }]
    );

    let cert = (Key::SslCert, "arn:aws:acm:us-east-1:1:certificate/c");
    let plain = desired_for(&[cert], &[(443, 30443)], &[]);
    let with_policy = desired_for(&[cert, (Key::SslNegotiationPolicy, "P1")], &[(443, 30443)], &[]);
    assert_eq!(
        plan(&with_policy, &converged(&plain)),
        vec![
            Change::CreatePolicy {
                name: "k8s-SSLNegotiationPolicy-P1".into(),
                type_name: "SSLNegotiationPolicyType".into(),
                attributes: vec![("Reference-Security-Policy".into(), "P1".into())]
            },
            Change::SetListenerPolicies {
                port: 443,
                policies: vec!["k8s-SSLNegotiationPolicy-P1".into()]
            }
        ]
    );

    // Another negotiation policy of ours is swapped; anything else on the listener stays (upstream drops it).
    let p2 = desired_for(&[cert, (Key::SslNegotiationPolicy, "P2")], &[(443, 30443)], &[]);
    let mut observed = converged(&with_policy);
    observed.policies.insert("k8s-SSLNegotiationPolicy-P2".into());
    observed.load_balancer.as_mut().unwrap().listeners[0]
        .policy_names
        .insert(0, "sticky-by-hand".into());
    assert_eq!(plan(&with_policy, &observed), [], "ours is there: nothing to do");
    assert_eq!(
        plan(&p2, &observed),
        [Change::SetListenerPolicies {
            port: 443,
            policies: vec!["sticky-by-hand".into(), "k8s-SSLNegotiationPolicy-P2".into()]
        }]
    );
}

#[test]
fn tags_groups_and_subnets_are_reconciled_without_removing_foreign_tags() {
    let desired = desired_for(&[(Key::AdditionalResourceTags, "team=b")], &[(80, 30080)], &[]);
    let mut observed = converged(&desired);
    observed.tags.insert("team".into(), "a".into());
    observed.tags.insert("extra".into(), "kept".into());
    let lb = observed.load_balancer.as_mut().unwrap();
    lb.subnets = vec![SubnetId::new("subnet-a"), SubnetId::new("subnet-z")];
    lb.security_groups = vec![SecurityGroupId::new("sg-lb"), SecurityGroupId::new("sg-hand")];
    observed.node_groups = Some(NodeGroups {
        wanted: [SecurityGroupId::new("sg-node")].into(),
        with_rule: ["sg-node", "sg-old", "sg-foreign"]
            .map(SecurityGroupId::new)
            .into(),
        revocable: ["sg-node", "sg-old"].map(SecurityGroupId::new).into(),
    });
    assert_eq!(
        serde_json::to_value(plan(&desired, &observed)).unwrap(),
        json!([
            {"change": "add_tags", "tags": {"team": "b"}},
            {"change": "detach_subnets", "subnets": ["subnet-z"]},
            {"change": "attach_subnets", "subnets": ["subnet-b"]},
            {"change": "apply_security_groups", "groups": ["Managed"]},
            {"change": "revoke_node_access", "group": "sg-old", "from": "Managed"}
        ])
    );
}

#[test]
fn byo_and_extra_groups_replace_the_managed_group() {
    let desired = desired_for(
        &[
            (Key::SecurityGroups, "sg-b1,sg-b2"),
            (Key::ExtraSecurityGroups, "sg-x, sg-b1"),
        ],
        &[(80, 30080)],
        &[],
    );
    assert_eq!(desired.managed_group, None);
    assert_eq!(
        desired.security_groups,
        ["sg-b1", "sg-b2", "sg-x"]
            .map(|s| GroupRef::Id(s.into()))
            .to_vec()
    );
    let mut c = config();
    c.elb_security_group = Some(SecurityGroupId::new("sg-global"));
    let spec = parse_service(&service(&[], &[(80, 30080)])).unwrap();
    let d = build(&spec, &[], &c, &[]).unwrap();
    assert_eq!(
        (d.managed_group, d.security_groups),
        (None, vec![GroupRef::Id("sg-global".into())])
    );
}

#[test]
fn deletion_order_revokes_then_deletes_load_balancer_then_groups() {
    let observed = DeleteObserved {
        load_balancer: Some(ClassicLoadBalancer::new(NAME, "dns")),
        groups: vec![SecurityGroupId::new("sg-lb")],
        references: vec![(SecurityGroupId::new("sg-node"), SecurityGroupId::new("sg-lb"))],
    };
    assert_eq!(
        serde_json::to_value(plan_delete(NAME, &observed)).unwrap(),
        json!([
            {"change": "revoke_node_access", "group": "sg-node", "from": {"Id": "sg-lb"}},
            {"change": "delete_load_balancer", "name": NAME},
            {"change": "delete_security_group", "group": "sg-lb"}
        ])
    );
    // After a crash past the load balancer's deletion, only the group is left to delete.
    let rest = DeleteObserved {
        load_balancer: None,
        groups: vec![SecurityGroupId::new("sg-lb")],
        references: vec![],
    };
    assert_eq!(
        plan_delete(NAME, &rest),
        vec![Change::DeleteSecurityGroup {
            group: "sg-lb".into()
        }]
    );
}

fn err(kind: ErrorKind) -> AwsError {
    AwsError::new(kind, "test", "Op")
}

#[tokio::test]
async fn apply_creates_the_group_first_and_uses_its_id() {
    let desired = desired_for(&[], &[(80, 30080)], &["i-1"]);
    let changes = plan(&desired, &Observed::default());
    let mut ec2 = MockEc2::new();
    let mut elb = MockElb::new();
    let mut seq = mockall::Sequence::new();
    ec2.expect_create_security_group()
        .times(1)
        .in_sequence(&mut seq)
        .withf(|g| g.name == format!("k8s-elb-{NAME}") && g.vpc_id.as_str() == "vpc-1")
        .returning(|_| Box::pin(async { Ok(SecurityGroupId::new("sg-new")) }));
    ec2.expect_authorize_ingress()
        .times(1)
        .in_sequence(&mut seq)
        .withf(|g, perms| g.as_str() == "sg-new" && perms.len() == 2)
        .returning(|_, _| Box::pin(async { Ok(()) }));
    elb.expect_create_load_balancer()
        .times(1)
        .in_sequence(&mut seq)
        .withf(|lb| lb.security_groups == [SecurityGroupId::new("sg-new")] && lb.listeners.len() == 1)
        .returning(|_| Box::pin(async { Ok("new.us-east-1.elb.amazonaws.com".to_owned()) }));
    elb.expect_configure_health_check()
        .times(1)
        .in_sequence(&mut seq)
        .withf(|_, hc| hc.target == "TCP:30080")
        .returning(|_, _| Box::pin(async { Ok(()) }));
    elb.expect_register_instances()
        .times(1)
        .in_sequence(&mut seq)
        .withf(|n, ids| n == NAME && ids == [InstanceId::new("i-1")])
        .returning(|_, _| Box::pin(async { Ok(()) }));
    let applied = apply(&ec2, &elb, &config(), NAME, None, &changes).await.unwrap();
    assert_eq!(
        applied.created_dns_name.as_deref(),
        Some("new.us-east-1.elb.amazonaws.com")
    );
    assert_eq!(applied.mutations, 5);
}

#[tokio::test]
async fn apply_adopts_a_group_created_by_a_crashed_run_and_tolerates_duplicates() {
    let changes = vec![
        Change::CreateSecurityGroup {
            name: "k8s-elb-x".into(),
            description: "d".into(),
            tags: Tags::new(),
        },
        Change::AuthorizeIngress {
            group: GroupRef::Managed,
            rules: vec![
                Rule {
                    protocol: "tcp".into(),
                    from_port: 80,
                    to_port: 80,
                    cidr: "0.0.0.0/0".into(),
                },
                Rule {
                    protocol: "tcp".into(),
                    from_port: 81,
                    to_port: 81,
                    cidr: "0.0.0.0/0".into(),
                },
            ],
        },
        Change::CreatePolicy {
            name: PROXY_PROTOCOL_POLICY.into(),
            type_name: "ProxyProtocolPolicyType".into(),
            attributes: vec![],
        },
    ];
    let mut ec2 = MockEc2::new();
    let mut elb = MockElb::new();
    ec2.expect_create_security_group()
        .times(1)
        .returning(|_| Box::pin(async { Err(err(ErrorKind::Conflict)) }));
    ec2.expect_security_groups().times(1).returning(|_| {
        Box::pin(async {
            Ok(vec![SecurityGroup::new(
                SecurityGroupId::new("sg-old"),
                "k8s-elb-x",
                None,
                Tags::new(),
            )])
        })
    });
    // The batch fails on a duplicate; then rule by rule, the duplicate skipped.
    ec2.expect_authorize_ingress()
        .times(1)
        .withf(|g, p| g.as_str() == "sg-old" && p.len() == 2)
        .returning(|_, _| Box::pin(async { Err(err(ErrorKind::Conflict)) }));
    ec2.expect_authorize_ingress()
        .times(2)
        .withf(|g, p| g.as_str() == "sg-old" && p.len() == 1)
        .returning(|_, p| {
            let dup = p[0].from_port == Some(80);
            Box::pin(async move {
                if dup {
                    Err(err(ErrorKind::Conflict))
                } else {
                    Ok(())
                }
            })
        });
    elb.expect_create_policy()
        .times(1)
        .returning(|_, _| Box::pin(async { Err(err(ErrorKind::Conflict)) }));
    apply(&ec2, &elb, &config(), "x", None, &changes).await.unwrap();
}

#[tokio::test]
async fn apply_stops_at_the_first_failure_and_reports_a_group_in_use_as_retry() {
    let changes = vec![
        Change::DeleteLoadBalancer {
            name: "x".into(),
            recreate_because: None,
        },
        Change::DeleteSecurityGroup { group: "sg-1".into() },
        Change::DeleteSecurityGroup { group: "sg-2".into() },
    ];
    let mut ec2 = MockEc2::new();
    let mut elb = MockElb::new();
    elb.expect_delete_load_balancer()
        .times(1)
        .returning(|_| Box::pin(async { Ok(()) }));
    ec2.expect_delete_security_group()
        .times(1)
        .returning(|_| Box::pin(async { Err(err(ErrorKind::Conflict).with_code("DependencyViolation")) }));
    let e = apply(&ec2, &elb, &config(), "x", None, &changes)
        .await
        .unwrap_err();
    assert!(matches!(e, Error::GroupInUse { .. }), "{e}");
    let cloud: ccm_cloud_provider::CloudError = e.into();
    assert_eq!(cloud.retry_delay(), Some(std::time::Duration::from_secs(10)));
    let waiting = cloud.waiting_for().expect("a wait, not a failure");
    assert!(
        waiting.contains("sg-1") && waiting.contains("release"),
        "{waiting}"
    );
}

fn observing_mocks(group_tag: &'static str) -> (MockEc2, MockElb) {
    let mut ec2 = MockEc2::new();
    let mut elb = MockElb::new();
    elb.expect_load_balancer().returning(|n| {
        let lb = ClassicLoadBalancer::new(n, "dns");
        Box::pin(async move { Ok(Some(lb)) })
    });
    elb.expect_tags().returning(|_| {
        let owned: Tags = [("kubernetes.io/cluster/c1".to_owned(), "owned".to_owned())].into();
        Box::pin(async move { Ok(owned) })
    });
    elb.expect_attributes()
        .returning(|_| Box::pin(async { Ok(ClassicAttributes::default()) }));
    ec2.expect_security_groups().times(1).returning(move |filters| {
        assert_eq!(filters[0], Filter::new("group-name", [format!("k8s-elb-{NAME}")]));
        let tags: Tags = [("kubernetes.io/cluster/c1".to_owned(), group_tag.to_owned())].into();
        Box::pin(async move {
            Ok(vec![SecurityGroup::new(
                SecurityGroupId::new("sg-1"),
                &format!("k8s-elb-{NAME}"),
                None,
                tags,
            )])
        })
    });
    (ec2, elb)
}

#[tokio::test]
async fn observe_reads_only_the_policies_it_wants() {
    let mut desired = desired_for(&[(Key::ProxyProtocol, "*")], &[(80, 30080)], &[]);
    desired.manage_node_rules = false;
    let (ec2, mut elb) = observing_mocks("owned");
    elb.expect_policies()
        .times(1)
        .withf(|_, names| names == [PROXY_PROTOCOL_POLICY.to_owned()])
        .returning(|_, _| Box::pin(async { Err(err(ErrorKind::NotFound)) }));
    let observed = observe(&ec2, &elb, &config(), &desired, Scope::Full)
        .await
        .unwrap();
    assert!(observed.policies.is_empty());
    assert_eq!(observed.managed_group.unwrap().id.as_str(), "sg-1");
    assert!(observed.node_groups.is_none());
}

#[tokio::test]
async fn observe_refuses_a_load_balancer_of_another_cluster_before_planning() {
    let mut desired = desired_for(&[], &[(80, 30080)], &[]);
    desired.manage_node_rules = false;
    let (ec2, mut elb) = observing_mocks("owned");
    elb.checkpoint();
    elb.expect_load_balancer().returning(|n| {
        let lb = ClassicLoadBalancer::new(n, "dns");
        Box::pin(async move { Ok(Some(lb)) })
    });
    elb.expect_tags().returning(|_| {
        let foreign: Tags = [("kubernetes.io/cluster/c2".to_owned(), "owned".to_owned())].into();
        Box::pin(async move { Ok(foreign) })
    });
    elb.expect_attributes()
        .returning(|_| Box::pin(async { Ok(ClassicAttributes::default()) }));
    elb.expect_policies()
        .returning(|_, _| Box::pin(async { Ok(Vec::new()) }));
    let e = observe(&ec2, &elb, &config(), &desired, Scope::Full)
        .await
        .unwrap_err();
    assert!(matches!(e, crate::Error::NotOurs(_)), "{e}");
    assert!(e.to_string().contains("kubernetes.io/cluster/c2=owned"), "{e}");
}

#[tokio::test]
async fn observe_refuses_a_group_of_another_cluster() {
    let mut desired = desired_for(&[], &[(80, 30080)], &[]);
    desired.manage_node_rules = false;
    let (ec2, elb) = observing_mocks("other");
    let e = observe(&ec2, &elb, &config(), &desired, Scope::Full)
        .await
        .unwrap_err();
    assert!(e.to_string().contains("another cluster"), "{e}");
}

#[test]
fn terminated_or_unknown_instances_are_not_registered() {
    let desired = desired_for(&[], &[(80, 30080)], &["i-1", "i-2", "i-gone"]);
    let mut observed = converged(&desired_for(&[], &[(80, 30080)], &["i-1"]));
    observed.existing_instances = Some(["i-1".to_owned(), "i-2".to_owned()].into());
    assert_eq!(
        plan(&desired, &observed),
        vec![Change::RegisterInstances {
            instances: vec!["i-2".into()]
        }]
    );
}

#[test]
fn switching_to_given_groups_retires_the_managed_group() {
    let managed = desired_for(&[], &[(80, 30080)], &[]);
    let mut observed = converged(&managed);
    observed.managed_group = None;
    observed.orphaned_group = Some(OrphanedGroup {
        id: SecurityGroupId::new("sg-lb"),
        referenced_by: vec![SecurityGroupId::new("sg-node")],
    });
    observed.node_groups = None;
    let byo = desired_for(&[(Key::SecurityGroups, "sg-mine")], &[(80, 30080)], &[]);
    assert_eq!(
        serde_json::to_value(plan(&byo, &observed)).unwrap(),
        json!([
            {"change": "apply_security_groups", "groups": [{"Id": "sg-mine"}]},
            {"change": "revoke_node_access", "group": "sg-node", "from": {"Id": "sg-lb"}},
            {"change": "delete_security_group", "group": "sg-lb"}
        ])
    );
    // Named explicitly by the annotation: kept.
    let named = desired_for(&[(Key::SecurityGroups, "sg-lb")], &[(80, 30080)], &[]);
    assert_eq!(plan(&named, &observed), vec![]);
}

#[test]
fn replacing_every_subnet_attaches_first() {
    let desired = desired_for(&[], &[(80, 30080)], &[]);
    let mut observed = converged(&desired);
    observed.load_balancer.as_mut().unwrap().subnets = vec![SubnetId::new("subnet-old")];
    assert_eq!(
        plan(&desired, &observed),
        vec![
            Change::AttachSubnets {
                subnets: vec!["subnet-a".into(), "subnet-b".into()]
            },
            Change::DetachSubnets {
                subnets: vec!["subnet-old".into()]
            },
        ]
    );
}

#[tokio::test]
async fn apply_resolves_the_managed_group_to_the_observed_id() {
    let changes = vec![
        Change::ApplySecurityGroups {
            groups: vec![GroupRef::Managed, GroupRef::Id("sg-x".into())],
        },
        Change::AuthorizeNodeAccess {
            group: "sg-node".into(),
            from: GroupRef::Managed,
        },
        Change::RevokeNodeAccess {
            group: "sg-old".into(),
            from: GroupRef::Managed,
        },
    ];
    let mut ec2 = MockEc2::new();
    let mut elb = MockElb::new();
    elb.expect_apply_security_groups()
        .times(1)
        .withf(|n, g| n == "x" && g == [SecurityGroupId::new("sg-m"), SecurityGroupId::new("sg-x")])
        .returning(|_, _| Box::pin(async { Ok(()) }));
    ec2.expect_authorize_ingress()
        .times(1)
        .withf(|g, p| {
            g.as_str() == "sg-node"
                && p.len() == 1
                && p[0].protocol == "-1"
                && p[0].source_groups[0].group_id.as_str() == "sg-m"
        })
        .returning(|_, _| Box::pin(async { Err(err(ErrorKind::Conflict)) }));
    ec2.expect_revoke_ingress()
        .times(1)
        .withf(|g, p| g.as_str() == "sg-old" && p[0].source_groups[0].group_id.as_str() == "sg-m")
        .returning(|_, _| Box::pin(async { Err(err(ErrorKind::NotFound)) }));
    let applied = apply(
        &ec2,
        &elb,
        &config(),
        "x",
        Some(SecurityGroupId::new("sg-m")),
        &changes,
    )
    .await
    .unwrap();
    assert_eq!(
        applied.mutations, 3,
        "an existing rule and a missing one are both fine"
    );

    // Without the group (it was never created), nothing is sent.
    let e = apply(
        &MockEc2::new(),
        &MockElb::new(),
        &config(),
        "x",
        None,
        &changes[..1],
    )
    .await
    .unwrap_err();
    assert!(e.to_string().contains("k8s-elb-x"), "{e}");
}

#[test]
fn a_scheme_change_recreates_an_owned_classic_elb_and_says_so() {
    let public = desired_for(&[], &[(80, 30080)], &["i-1"]);
    let internal = desired_for(&[(Key::Internal, "true")], &[(80, 30080)], &["i-1"]);
    let observed = converged(&public);
    let changes = plan(&internal, &observed);
    let kinds: Vec<String> = serde_json::to_value(&changes)
        .unwrap()
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["change"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        kinds,
        [
            "delete_load_balancer",
            "create_load_balancer",
            "configure_health_check",
            "register_instances"
        ],
        "the group and the nodes' rules are kept; fresh attributes already match: {changes:?}"
    );
    assert!(matches!(
        &changes[1],
        Change::CreateLoadBalancer { internal: true, .. }
    ));
    let message = recreation(NAME, &changes).unwrap();
    assert!(
        message.contains("scheme internet-facing -> internal") && message.contains("DNS name changes"),
        "{message}"
    );
    // Steady afterwards; and a plain deletion is no recreation.
    assert_eq!(plan(&internal, &converged(&internal)), []);
    assert_eq!(recreation(NAME, &plan(&public, &observed)), None);

    // A load balancer this cluster does not own keeps its scheme (and is otherwise reconciled as before).
    let mut foreign = observed;
    foreign.owned = Some(false);
    assert_eq!(plan(&internal, &foreign), []);
    // Nor is one whose tags were not read (a node update).
    foreign.owned = None;
    assert_eq!(plan(&internal, &foreign), []);
}
