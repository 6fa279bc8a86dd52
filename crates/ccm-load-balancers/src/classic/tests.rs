use super::*;
use crate::LoadBalancerConfig;
use crate::classic::model::health_check;
use crate::shared;
use crate::shared::HealthProbeMode;
use crate::shared::Rule;
use crate::spec::ServiceSpec;
use crate::{annotations::Key, parse_service};
use ccm_aws_api::InstanceId;
use ccm_aws_api::SecurityGroupId;
use ccm_aws_api::SubnetId;
use ccm_aws_api::ec2::SecurityGroup;
use ccm_aws_api::elb::ClassicLoadBalancer;
use ccm_aws_api::{
    AwsError, ErrorKind, VpcId,
    ec2::MockEc2,
    elb::{BackendPolicies, MockElb},
};
use ccm_cloud_provider::NodeView;
use ccm_tagging::ClusterTags;
use k8s_openapi::{
    api::core::v1::{Node, NodeSpec, Service, ServicePort, ServiceSpec as K8sServiceSpec},
    apimachinery::pkg::apis::meta::v1::ObjectMeta,
};
use serde_json::json;
use std::collections::BTreeSet;

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

pub(crate) fn node(id: &str) -> NodeView {
    NodeView::from(Node {
        metadata: ObjectMeta {
            name: Some(format!("node-{id}")),
            ..ObjectMeta::default()
        },
        spec: Some(NodeSpec {
            provider_id: Some(format!("aws:///us-east-1a/{id}")),
            ..NodeSpec::default()
        }),
        status: None,
    })
}

const NAME: &str = "a0f1e2d3c4b5a69788796a5b4c3d2e1f";

pub(crate) fn desired_for(annotations: &[(Key, &str)], ports: &[(i32, i32)], nodes: &[&str]) -> Desired {
    let spec = parse_service(&service(annotations, ports)).unwrap();
    let nodes: Vec<NodeView> = nodes.iter().map(|n| node(n)).collect();
    let refs: Vec<&NodeView> = nodes.iter().collect();
    build(
        &spec,
        &refs,
        &config(),
        &[SubnetId::new("subnet-a"), SubnetId::new("subnet-b")],
    )
    .unwrap()
}

/// The Classic ELB AWS holds right after `desired` was applied.
fn converged_load_balancer(desired: &Desired) -> ClassicLoadBalancer {
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
    lb
}

/// The AWS state right after `desired` was applied: what a steady Service observes.
pub(crate) fn converged(desired: &Desired) -> Observed {
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
        load_balancer: Some(converged_load_balancer(desired)),
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
            rules: [(SecurityGroupId::new("sg-node"), narrow_rules(desired))].into(),
            revocable: [SecurityGroupId::new("sg-node")].into(),
            others: Some(Default::default()),
            ..NodeGroups::default()
        }),
        existing_instances: Some(desired.instances.iter().cloned().collect()),
        orphaned_group: None,
    }
}

/// The narrow rules of `desired` on one node group.
pub(crate) fn narrow_rules(desired: &Desired) -> Vec<SourceRule> {
    node_rules::node_ports(&desired.listeners, &desired.health_check)
        .into_iter()
        .map(|p| SourceRule::narrow(p, &desired.name))
        .collect()
}

/// The all-traffic rule of upstream's Classic ELBs.
pub(crate) fn wide_rule() -> SourceRule {
    SourceRule {
        protocol: "-1".into(),
        from_port: None,
        to_port: None,
        description: None,
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
            "tags": {"kubernetes.io/cluster/c1": "owned", "kubernetes.io/service-name": "prod/web", "kubernetes.io/service-uid": "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"},
            "ingress": [
                {"protocol": "icmp", "from_port": 3, "to_port": 4, "source": "0.0.0.0/0"},
                {"protocol": "tcp", "from_port": 80, "to_port": 80, "source": "0.0.0.0/0"},
                {"protocol": "tcp", "from_port": 443, "to_port": 443, "source": "0.0.0.0/0"}
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
        "tags": {"kubernetes.io/cluster/c1": "owned", "kubernetes.io/service-name": "prod/web", "kubernetes.io/service-uid": "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"},
        "manage_node_rules": true,
        "allow_recreation": false
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
            "tags": {"kubernetes.io/cluster/c1": "owned", "kubernetes.io/service-name": "prod/web", "kubernetes.io/service-uid": "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"}
        })
    );
    assert_eq!(
        changes[5],
        json!({"change": "authorize_node_access", "group": "sg-node", "from": "Managed", "ports": [30080]})
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
                {"protocol": "tcp", "from_port": 8443, "to_port": 8443, "source": "0.0.0.0/0"}]},
            {"change": "revoke_ingress", "group": "Managed", "rules": [
                {"protocol": "tcp", "from_port": 443, "to_port": 443, "source": "0.0.0.0/0"}]},
            {"change": "delete_listeners", "ports": [80, 443]},
            {"change": "create_listeners", "listeners": [
                {"protocol": "TCP", "port": 80, "instance_protocol": "TCP", "instance_port": 30081, "ssl_certificate_id": null},
                {"protocol": "TCP", "port": 8443, "instance_protocol": "TCP", "instance_port": 30443, "ssl_certificate_id": null}]},
            {"change": "configure_health_check", "health_check": {"target": "TCP:30081", "interval": 10, "timeout": 5, "healthy_threshold": 2, "unhealthy_threshold": 6}},
            // The nodes allow the new node port first, then lose the old one.
            {"change": "authorize_node_access", "group": "sg-node", "from": "Managed", "ports": [30081]},
            {"change": "revoke_node_access", "group": "sg-node", "from": "Managed", "rules": [
                {"protocol": "tcp", "from_port": 30080, "to_port": 30080,
                 "description": format!("kubernetes.io/rule/elb={NAME}")}]}
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
        rules: [
            ("sg-node", narrow_rules(&desired)),
            ("sg-old", vec![wide_rule()]),
            ("sg-foreign", vec![wide_rule()]),
        ]
        .map(|(g, r)| (SecurityGroupId::new(g), r))
        .into(),
        revocable: ["sg-node", "sg-old"].map(SecurityGroupId::new).into(),
        others: Some(Default::default()),
        ..NodeGroups::default()
    });
    assert_eq!(
        serde_json::to_value(plan(&desired, &observed)).unwrap(),
        json!([
            {"change": "add_tags", "tags": {"team": "b"}},
            {"change": "detach_subnets", "subnets": ["subnet-z"]},
            {"change": "attach_subnets", "subnets": ["subnet-b"]},
            {"change": "apply_security_groups", "groups": ["Managed"]},
            {"change": "revoke_node_access", "group": "sg-old", "from": "Managed",
             "rules": [{"protocol": "-1", "from_port": null, "to_port": null}]}
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
        references: vec![(
            SecurityGroupId::new("sg-node"),
            SecurityGroupId::new("sg-lb"),
            vec![SourceRule::narrow(30080, NAME)],
        )],
        given_source: None,
        adopted: false,
    };
    assert_eq!(
        serde_json::to_value(plan_delete(NAME, &observed)).unwrap(),
        json!([
            {"change": "revoke_node_access", "group": "sg-node", "from": {"Id": "sg-lb"},
             "rules": [{"protocol": "tcp", "from_port": 30080, "to_port": 30080,
                        "description": format!("kubernetes.io/rule/elb={NAME}")}]},
            {"change": "delete_load_balancer", "name": NAME},
            {"change": "delete_security_group", "group": "sg-lb"}
        ])
    );
    // After a crash past the load balancer's deletion, only the group is left to delete.
    let rest = DeleteObserved {
        load_balancer: None,
        groups: vec![SecurityGroupId::new("sg-lb")],
        references: vec![],
        given_source: None,
        adopted: false,
    };
    assert_eq!(
        plan_delete(NAME, &rest),
        vec![Change::DeleteSecurityGroup {
            group: "sg-lb".into()
        }]
    );
}

mod apply;
mod node_rule_plans;
mod prefix_lists;
mod release;
