//! The Warning notices of an ensure: annotation values served otherwise than they read, and target instances
//! skipped.

use ccm_cloud_provider::{NodeView, Notice};

use crate::{
    LoadBalancerConfig,
    annotations::{Key, Warning},
    nlb, shared,
    spec::{Flavour, ServiceSpec},
};

/// A Warning on the Node of each target instance skipped because its security group cannot be chosen.
pub(super) fn skipped_notices(
    name: &str,
    nodes: &[&NodeView],
    skipped: &std::collections::BTreeMap<String, String>,
) -> Vec<Notice> {
    nodes
        .iter()
        .filter_map(|node| {
            // A nameless Node (a view's empty name) has nowhere to carry the Warning.
            let node_name = Some(node.name.as_str()).filter(|n| !n.is_empty())?;
            let instance = shared::node_instance_id(node)?;
            let why = skipped.get(instance.as_str())?;
            let message = format!(
                "{why}: instance {instance} is not served by load balancer {name} (neither registered nor given \
                 rules) until exactly one of its groups is tagged for the cluster"
            );
            Some(Notice::warning_on_node(
                node_name,
                "AmbiguousSecurityGroups",
                message,
            ))
        })
        .collect()
}

/// A Warning notice per annotation value served with the Go controller's surprising meaning (the Service is
/// served all the same; see `annotations::go_compat`), per Service field served otherwise than it asks, and per
/// AWS Load Balancer Controller key not served here.
pub(super) fn annotation_notices(spec: &ServiceSpec, config: &LoadBalancerConfig) -> Vec<Notice> {
    let tcp_check = success_codes_on_tcp(spec, config);
    spec.warnings
        .iter()
        .chain(tcp_check.as_ref())
        .map(|w| {
            // A Service field served differently from what it asks, the AWS Load Balancer Controller's key
            // not served here, or an annotation read as Go read it.
            let reason = if w.field.starts_with("spec.") {
                IPV4_ONLY
            } else if crate::annotations::albc::is_unserved(&w.field) {
                UNSUPPORTED_ANNOTATION
            } else {
                "UnexpectedAnnotationValue"
            };
            Notice::warning(reason, w.to_string())
        })
        .collect()
}

/// Success codes given for an NLB whose health check is TCP (the mode's default, or the protocol annotation):
/// a TCP check has no matcher, so they do nothing. Known only here, with the controller's health probe mode.
fn success_codes_on_tcp(spec: &ServiceSpec, config: &LoadBalancerConfig) -> Option<Warning> {
    let codes = spec.health_check_success_codes.as_ref()?;
    if spec.flavour != Flavour::Network || nlb::health_check(spec, config).is_http() {
        return None;
    }
    Some(Warning {
        field: Key::HealthcheckSuccessCodes.name().to_owned(),
        value: codes.clone(),
        message:
            "no effect: the health check is TCP (set aws-load-balancer-healthcheck-protocol to HTTP or HTTPS)"
                .to_owned(),
    })
}

/// The reason of the Warning Event of a Service that prefers dual-stack and gets an IPv4 load balancer.
pub(super) const IPV4_ONLY: &str = "LoadBalancerIPv4Only";

/// The reason of the Warning Event naming an AWS Load Balancer Controller key that has no effect here.
pub(super) const UNSUPPORTED_ANNOTATION: &str = "UnsupportedAnnotation";
