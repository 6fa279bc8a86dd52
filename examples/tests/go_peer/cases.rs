//! The differential test's table: one LoadBalancer Service per feature both controllers serve (Classic ELB and
//! NLB), so that the Go controller's run and ours make resources that differ only where the controllers do.
#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Service;
use serde_json::json;

/// The label the `target-node-labels` cases select (two of the three Nodes carry it).
pub const TARGET_LABEL: (&str, &str) = ("diff-role", "lb");

/// What some cases name and the test makes first: an ACM certificate, two bystander security groups and an Elastic
/// IP allocation for each public subnet (the NLB's, in subnet ID order).
pub struct Inputs {
    pub certificate: String,
    pub given_group: String,
    pub extra_group: String,
    pub eip_allocations: Vec<String>,
}

/// One Service of the table.
pub struct Case {
    pub name: &'static str,
    pub nlb: bool,
    pub ports: &'static [i32],
    /// Annotation suffixes after `service.beta.kubernetes.io/aws-load-balancer-`, with values.
    pub annotations: Vec<(&'static str, String)>,
    /// `externalTrafficPolicy: Local`.
    pub local: bool,
    /// `loadBalancerSourceRanges`.
    pub source_ranges: &'static [&'static str],
}

impl Case {
    fn new(name: &'static str, nlb: bool, ports: &'static [i32]) -> Self {
        Self {
            name,
            nlb,
            ports,
            annotations: Vec::new(),
            local: false,
            source_ranges: &[],
        }
    }

    fn with(mut self, suffix: &'static str, value: impl Into<String>) -> Self {
        self.annotations.push((suffix, value.into()));
        self
    }

    /// The Service (node ports assigned by the apiserver: one it released may stay allocated for minutes after
    /// a Service with a finalizer is deleted, so the runs cannot both fix them).
    pub fn service(&self) -> Service {
        let ports: Vec<_> = self
            .ports
            .iter()
            .map(|p| json!({ "name": format!("p{p}"), "port": p, "protocol": "TCP", "targetPort": 8080 }))
            .collect();
        let mut annotations: BTreeMap<String, String> = self
            .annotations
            .iter()
            .map(|(k, v)| {
                (
                    format!("service.beta.kubernetes.io/aws-load-balancer-{k}"),
                    v.clone(),
                )
            })
            .collect();
        if self.nlb {
            annotations.insert(
                "service.beta.kubernetes.io/aws-load-balancer-type".to_owned(),
                "nlb".to_owned(),
            );
        }
        let mut spec = json!({ "type": "LoadBalancer", "selector": { "app": self.name }, "ports": ports });
        if self.local {
            spec["externalTrafficPolicy"] = json!("Local");
        }
        if !self.source_ranges.is_empty() {
            spec["loadBalancerSourceRanges"] = json!(self.source_ranges);
        }
        serde_json::from_value(json!({
            "metadata": { "name": self.name, "annotations": annotations, "labels": { "e2e-go-diff": "true" } },
            "spec": spec,
        }))
        .unwrap()
    }
}

/// The table: every Service annotation Kubernetes 1.20.2's AWS provider reads, each on its own Service, and the
/// defaults of both flavours.
pub fn all(inputs: &Inputs) -> Vec<Case> {
    let cert = || inputs.certificate.clone();
    let labels = format!("{}={}", TARGET_LABEL.0, TARGET_LABEL.1);
    let mut cases = vec![
        Case::new("clb-defaults", false, &[80]),
        Case::new("clb-ports", false, &[80, 443, 8080]),
        Case::new("clb-ssl", false, &[80, 443])
            .with("ssl-cert", cert())
            .with("ssl-ports", "443"),
        Case::new("clb-ssl-policy", false, &[443])
            .with("ssl-cert", cert())
            .with("ssl-negotiation-policy", "ELBSecurityPolicy-TLS-1-2-2017-01"),
        Case::new("clb-https-backend", false, &[443])
            .with("ssl-cert", cert())
            .with("backend-protocol", "https"),
        Case::new("clb-http-backend", false, &[80]).with("backend-protocol", "http"),
        Case::new("clb-proxy-protocol", false, &[80]).with("proxy-protocol", "*"),
        Case::new("clb-health", false, &[80])
            .with("healthcheck-healthy-threshold", "3")
            .with("healthcheck-unhealthy-threshold", "4")
            .with("healthcheck-timeout", "6")
            .with("healthcheck-interval", "15"),
        Case::new("clb-cross-zone", false, &[80]).with("cross-zone-load-balancing-enabled", "true"),
        Case::new("clb-draining", false, &[80])
            .with("connection-draining-enabled", "true")
            .with("connection-draining-timeout", "45"),
        Case::new("clb-idle-timeout", false, &[80]).with("connection-idle-timeout", "120"),
        Case::new("clb-access-logs", false, &[80])
            .with("access-log-enabled", "true")
            .with("access-log-emit-interval", "5")
            .with("access-log-s3-bucket-name", "diff-logs")
            .with("access-log-s3-bucket-prefix", "diff"),
        Case::new("clb-internal", false, &[80]).with("internal", "true"),
        Case::new("clb-given-group", false, &[80]).with("security-groups", inputs.given_group.clone()),
        Case::new("clb-extra-group", false, &[80]).with("extra-security-groups", inputs.extra_group.clone()),
        Case::new("clb-tags", false, &[80]).with("additional-resource-tags", "team=diff,tier=web"),
        Case::new("clb-target-labels", false, &[80]).with("target-node-labels", labels.clone()),
        Case::new("nlb-defaults", true, &[80]),
        Case::new("nlb-ports", true, &[80, 443]),
        Case::new("nlb-health", true, &[80])
            .with("healthcheck-healthy-threshold", "3")
            .with("healthcheck-unhealthy-threshold", "3")
            .with("healthcheck-interval", "10"),
        Case::new("nlb-tls", true, &[80, 443])
            .with("ssl-cert", cert())
            .with("ssl-ports", "443"),
        Case::new("nlb-ssl-policy", true, &[443])
            .with("ssl-cert", cert())
            .with("ssl-negotiation-policy", "ELBSecurityPolicy-TLS-1-2-2017-01"),
        Case::new("nlb-eip", true, &[80]).with("eip-allocations", inputs.eip_allocations.join(",")),
        Case::new("nlb-cross-zone", true, &[80]).with("cross-zone-load-balancing-enabled", "true"),
        Case::new("nlb-internal", true, &[80]).with("internal", "true"),
        Case::new("nlb-tags", true, &[80]).with("additional-resource-tags", "team=diff,tier=web"),
        Case::new("nlb-target-labels", true, &[80]).with("target-node-labels", labels),
    ];
    let mut local = Case::new("clb-local", false, &[80]);
    local.local = true;
    let mut nlb_local = Case::new("nlb-local", true, &[80]);
    nlb_local.local = true;
    let mut ranges = Case::new("clb-source-ranges", false, &[80]);
    ranges.source_ranges = &["10.0.0.0/8", "192.168.0.0/16"];
    let mut nlb_ranges = Case::new("nlb-source-ranges", true, &[80]);
    nlb_ranges.source_ranges = &["10.0.0.0/8", "192.168.0.0/16"];
    cases.extend([local, nlb_local, ranges, nlb_ranges]);
    cases
}
