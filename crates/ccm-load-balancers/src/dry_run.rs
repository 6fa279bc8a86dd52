//! What a dry run reports (`lb-plan`, `AwsLoadBalancers::dry_run`): the desired model and the ordered changes of
//! either flavour, printed one numbered change per line or as JSON. Below the flavours, which build it.

use std::fmt;

use k8s_openapi::api::core::v1::Service;
use serde::Serialize;

use crate::{classic, nlb, spec::ServiceSpec};

/// The desired model of a dry run, by flavour.
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
#[allow(
    clippy::large_enum_variant,
    reason = "one per dry run, printed and dropped: a box would save nothing that matters"
)]
pub enum DesiredModel {
    /// A Classic ELB.
    Classic(classic::Desired),
    /// An NLB.
    Network(nlb::Desired),
}

/// The changes of a dry run, by flavour.
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
pub enum Changes {
    /// A Classic ELB's.
    Classic(Vec<classic::Change>),
    /// An NLB's.
    Network(Vec<nlb::Change>),
}

/// A dry run's result: the desired model and the plan against the current AWS state.
#[derive(Debug, Clone, Serialize)]
pub struct DryRun {
    /// The Service's spec.
    pub spec: ServiceSpec,
    /// The desired load balancer.
    pub desired: DesiredModel,
    /// The ordered changes an ensure would make (empty: nothing to do).
    pub changes: Changes,
    /// Whether the plan replaces the serving load balancer, or keeps it although the Service asks for what only
    /// a new one can have (`None`: neither).
    pub recreation: Option<Recreation>,
    /// The Service's ports without a node port yet (`<port>/<protocol>`): no plan serves them until the apiserver
    /// has allocated one (or forever with `allocateLoadBalancerNodePorts: false`).
    pub waiting_ports: Vec<String>,
}

/// What a plan does about a change only a new load balancer can apply.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Recreation {
    /// `true`: the plan deletes the load balancer and creates it again (the Service consents; its DNS name
    /// changes). `false`: it keeps the load balancer as it is, for want of consent.
    pub replaces: bool,
    /// What differs (`scheme internet-facing -> internal`, ...).
    pub reason: String,
}

/// The ports of `service` that have no node port yet, `<port>/<protocol>`.
pub(crate) fn ports_without_node_port(service: &Service) -> Vec<String> {
    service
        .spec
        .iter()
        .flat_map(|s| s.ports.iter().flatten())
        .filter(|p| p.node_port.is_none_or(|n| n <= 0))
        .map(|p| format!("{}/{}", p.port, p.protocol.as_deref().unwrap_or("TCP")))
        .collect()
}

// === impl Changes ===

impl Changes {
    /// Whether there is no change.
    pub fn is_empty(&self) -> bool {
        match self {
            Changes::Classic(c) => c.is_empty(),
            Changes::Network(c) => c.is_empty(),
        }
    }
}

// === impl DryRun ===

impl fmt::Display for DryRun {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (kind, name) = match &self.desired {
            DesiredModel::Classic(d) => ("Classic ELB", &d.name),
            DesiredModel::Network(d) => ("NLB", &d.name),
        };
        writeln!(f, "Service {} -> {kind} {name}", self.spec.key())?;
        let lines = match &self.changes {
            Changes::Classic(c) => c.iter().map(serde_json::to_string).collect::<Result<Vec<_>, _>>(),
            Changes::Network(c) => c.iter().map(serde_json::to_string).collect::<Result<Vec<_>, _>>(),
        }
        .map_err(|_| fmt::Error)?;
        if lines.is_empty() && self.waiting_ports.is_empty() {
            return writeln!(f, "up to date: no change");
        }
        if lines.is_empty() {
            writeln!(f, "no change for the ports that have a node port")?;
        }
        for (i, line) in lines.iter().enumerate() {
            writeln!(f, "{:>3}. {line}", i + 1)?;
        }
        match &self.recreation {
            Some(r) if r.replaces => writeln!(
                f,
                "REPLACES the load balancer ({}): its DNS name changes",
                r.reason
            )?,
            Some(r) => writeln!(
                f,
                "KEEPS the load balancer: {} needs a new one; the Service has not consented \
                 (service.beta.kubernetes.io/aws-load-balancer-allow-recreation: \"true\")",
                r.reason
            )?,
            None => {}
        }
        if !self.waiting_ports.is_empty() {
            writeln!(
                f,
                "not planned: {} without a nodePort yet (the apiserver allocates one unless \
                 allocateLoadBalancerNodePorts is false; plan again once it has)",
                self.waiting_ports.join(", ")
            )?;
        }
        Ok(())
    }
}
