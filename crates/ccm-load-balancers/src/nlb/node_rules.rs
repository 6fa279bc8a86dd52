//! The rules an NLB needs on the nodes' own security groups (skipped with `[Global] DisableSecurityGroupIngress`):
//! client traffic to the node ports, health checks from the load balancer's subnets and ICMP for path MTU
//! discovery. Every rule carries a description naming the load balancer, so that the rules of one NLB can be found,
//! reconciled and removed without touching anybody else's.
//!
//! INTERFACE SKELETON (written by the lead so that two people can work in parallel): the owner of this file fills
//! in the bodies and may add items, but keeps these signatures (or agrees changes with the lead).

use std::collections::BTreeSet;

use ccm_aws_api::{Ec2, SubnetId, ec2::SecurityGroup};
use serde::Serialize;

use crate::{Error, LoadBalancerConfig, shared::Rule};

/// The description prefix of client rules: `kubernetes.io/rule/nlb/client=<load balancer name>`.
pub const CLIENT_RULE_PREFIX: &str = "kubernetes.io/rule/nlb/client=";
/// The description prefix of health check rules: `kubernetes.io/rule/nlb/health=<load balancer name>`.
pub const HEALTH_RULE_PREFIX: &str = "kubernetes.io/rule/nlb/health=";
/// The description of the ICMP path MTU rules (shared by every NLB of the cluster).
pub const MTU_RULE: &str = "kubernetes.io/rule/nlb/mtu";

/// What the nodes' groups must allow for one NLB.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NodeAccess {
    /// The load balancer's name (in the rule descriptions).
    pub load_balancer: String,
    /// Client traffic: (`tcp` or `udp`, node port).
    pub client_ports: BTreeSet<(String, i32)>,
    /// Where clients come from (the Service's source ranges).
    pub client_cidrs: Vec<String>,
    /// Health check ports (TCP), probed from the load balancer's subnets.
    pub health_ports: BTreeSet<i32>,
    /// The target instances (IDs).
    pub instances: Vec<String>,
}

/// A rule with its description.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct DescribedRule {
    /// The rule.
    pub rule: Rule,
    /// Its description.
    pub description: String,
}

/// What [`observe`] found.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct Observed {
    /// The groups that may hold this load balancer's rules or must receive them.
    pub groups: Vec<SecurityGroup>,
}

/// A change to one node group.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub enum RuleChange {
    /// Adds rules to a group.
    Authorize {
        /// The group.
        group: String,
        /// The rules.
        rules: Vec<DescribedRule>,
    },
    /// Removes rules from a group.
    Revoke {
        /// The group.
        group: String,
        /// The rules.
        rules: Vec<DescribedRule>,
    },
}

// === impl NodeAccess ===

impl NodeAccess {
    /// No access at all: planning against it removes every rule of `load_balancer` (deletion).
    pub fn none(load_balancer: &str) -> Self {
        Self {
            load_balancer: load_balancer.to_owned(),
            client_ports: BTreeSet::new(),
            client_cidrs: Vec::new(),
            health_ports: BTreeSet::new(),
            instances: Vec::new(),
        }
    }
}

/// Reads the groups that matter for `access`: the target instances' groups and the cluster's groups that hold
/// rules of this load balancer; `lb_subnets` are the load balancer's subnets (health checks come from their
/// CIDRs).
pub async fn observe<E: Ec2>(
    ec2: &E,
    config: &LoadBalancerConfig,
    access: &NodeAccess,
    lb_subnets: &[SubnetId],
) -> Result<Observed, Error> {
    let _ = (ec2, config, access, lb_subnets);
    Ok(Observed::default())
}

/// The changes that make the observed groups match `access` (pure).
pub fn plan(access: &NodeAccess, observed: &Observed) -> Vec<RuleChange> {
    let _ = (access, observed);
    Vec::new()
}

/// Applies one change; repeating it after a crash is harmless (duplicates and missing rules are not errors).
pub async fn apply<E: Ec2>(ec2: &E, change: &RuleChange) -> Result<(), Error> {
    let _ = (ec2, change);
    Ok(())
}
