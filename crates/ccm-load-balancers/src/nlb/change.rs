//! The steps of an NLB's plan ([`Change`]), serializable for dry runs: which are host changes and which
//! recreate the load balancer.

use std::collections::BTreeMap;

use ccm_aws_api::Tags;
use serde::Serialize;

use super::{HealthCheck, Listener, TargetGroupSpec, node_rules::RuleChange};
use crate::{
    flavour::PlannedChange,
    shared::{GroupRef, Rule},
    spec::IpAddressType,
};

/// One step of a plan. Plans are ordered: security group, recreation, target groups and targets, the load
/// balancer, tags and attributes, listeners, unwanted target groups, a released managed group, node rules.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "change", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Change {
    /// Create the managed group.
    CreateSecurityGroup {
        /// Name.
        name: String,
        /// Description.
        description: String,
        /// Tags.
        tags: Tags,
    },
    /// Add CIDR and prefix list rules to the managed group.
    AuthorizeIngress {
        /// The rules.
        rules: Vec<Rule>,
    },
    /// Remove CIDR and prefix list rules from the managed group.
    RevokeIngress {
        /// The rules.
        rules: Vec<Rule>,
    },
    /// Delete the load balancer (deletion, or before creating it again).
    DeleteLoadBalancer {
        /// Its name.
        name: String,
        /// Its ARN.
        arn: String,
        /// Why it is recreated (`None`: deleted with the Service).
        recreate_because: Option<String>,
    },
    /// Keep the load balancer although the Service wants what only a new one can have: it has not consented
    /// to recreation (`aws-load-balancer-allow-recreation`). Writes nothing; the provider posts a
    /// `LoadBalancerRecreationRequired` Warning naming `reason`.
    RecreationWithheld {
        /// The load balancer's name.
        name: String,
        /// What differs, as a recreation would name it.
        reason: String,
    },
    /// Create a target group.
    CreateTargetGroup {
        /// The group.
        target_group: TargetGroupSpec,
        /// Its health check.
        health_check: HealthCheck,
        /// Tags.
        tags: Tags,
    },
    /// Change a target group's health check.
    ModifyTargetGroup {
        /// The group's name.
        name: String,
        /// The health check.
        health_check: HealthCheck,
    },
    /// Set target group attributes.
    ModifyTargetGroupAttributes {
        /// The group's name.
        name: String,
        /// The attributes to set.
        attributes: BTreeMap<String, String>,
    },
    /// Register instances on the node port.
    RegisterTargets {
        /// The group's name.
        name: String,
        /// The node port.
        port: i32,
        /// The instances.
        instances: Vec<String>,
    },
    /// Register IP targets, each on its own port (the pods' resolved target ports).
    RegisterIpTargets {
        /// The group's name.
        name: String,
        /// (address, port) pairs.
        targets: Vec<(String, i32)>,
    },
    /// Deregister targets.
    DeregisterTargets {
        /// The group's name.
        name: String,
        /// (instance or address, port) pairs.
        targets: Vec<(String, i32)>,
    },
    /// Create the load balancer.
    CreateLoadBalancer {
        /// Name.
        name: String,
        /// Scheme.
        internal: bool,
        /// Subnets with their optional EIP or private address.
        subnets: Vec<(String, Option<String>, Option<String>)>,
        /// Groups (`None`: an NLB without groups).
        security_groups: Option<Vec<GroupRef>>,
        /// `ipv4` or `dualstack`.
        ip_address_type: IpAddressType,
        /// Tags.
        tags: Tags,
    },
    /// Add subnets (in new Availability Zones) to the load balancer in place: the whole list wanted.
    SetSubnets {
        /// The subnets, the current ones included.
        subnets: Vec<String>,
    },
    /// Change the load balancer's IP address type in place.
    SetIpAddressType {
        /// The type wanted.
        ip_address_type: IpAddressType,
    },
    /// Replace the load balancer's groups.
    SetSecurityGroups {
        /// The groups.
        groups: Vec<GroupRef>,
    },
    /// Set load balancer attributes.
    ModifyAttributes {
        /// The attributes to set.
        attributes: BTreeMap<String, String>,
    },
    /// Add or overwrite tags of existing resources (load balancer, target groups, listeners).
    AddTags {
        /// The resources' ARNs.
        arns: Vec<String>,
        /// The tags.
        tags: Tags,
    },
    /// Remove tags dropped from `aws-load-balancer-additional-resource-tags` from resources that record them.
    RemoveTags {
        /// The resources' ARNs.
        arns: Vec<String>,
        /// The keys.
        keys: Vec<String>,
    },
    /// Bring the managed group's tags in step with the annotation's (a group this controller made only).
    TagSecurityGroup {
        /// Tags to add or overwrite.
        add: Tags,
        /// Keys to remove.
        remove: Vec<String>,
    },
    /// Delete a listener.
    DeleteListener {
        /// Its port.
        port: i32,
        /// Its ARN.
        arn: String,
    },
    /// Create a listener.
    CreateListener {
        /// The listener.
        listener: Listener,
        /// Tags.
        tags: Tags,
    },
    /// Change a listener in place.
    ModifyListener {
        /// Its ARN.
        arn: String,
        /// Its port.
        port: i32,
        /// A new protocol.
        protocol: Option<String>,
        /// A new certificate.
        certificate: Option<String>,
        /// A new TLS policy.
        ssl_policy: Option<String>,
        /// A new ALPN policy.
        alpn_policy: Option<String>,
        /// A new target group (by name).
        target_group: Option<String>,
    },
    /// Set attributes of a listener (`aws-load-balancer-listener-attributes.<PROTOCOL>-<port>`).
    ModifyListenerAttributes {
        /// Its ARN.
        arn: String,
        /// Its port.
        port: i32,
        /// The attributes that differ.
        attributes: BTreeMap<String, String>,
    },
    /// Bring a TLS listener's certificate list (besides its default certificate) in step with the
    /// certificates after the first in `aws-load-balancer-ssl-cert`.
    ListenerCertificates {
        /// Its ARN.
        arn: String,
        /// Its port.
        port: i32,
        /// Certificates to add.
        #[serde(skip_serializing_if = "Vec::is_empty")]
        add: Vec<String>,
        /// Certificates to remove.
        #[serde(skip_serializing_if = "Vec::is_empty")]
        remove: Vec<String>,
    },
    /// Delete a target group no longer wanted.
    DeleteTargetGroup {
        /// Its name.
        name: String,
        /// Its ARN.
        arn: String,
    },
    /// Remove a rule of another group that references the managed group being released.
    RevokeReference {
        /// The group holding the rule.
        group: String,
        /// The permission (with the managed group as source).
        permission: ReferencePermission,
    },
    /// Delete the managed group (owned by this cluster only).
    DeleteSecurityGroup {
        /// The group.
        group: String,
    },
    /// A change to the nodes' groups.
    NodeRules(RuleChange),
}

/// A permission referencing a group, for [`Change::RevokeReference`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ReferencePermission {
    /// The protocol (`-1` for all).
    pub protocol: String,
    /// First port.
    pub from_port: Option<i32>,
    /// Last port.
    pub to_port: Option<i32>,
    /// The referenced group.
    pub source: String,
}

// === impl Change ===

impl PlannedChange for Change {
    fn is_host_change(&self) -> bool {
        matches!(
            self,
            Change::RegisterTargets { .. }
                | Change::RegisterIpTargets { .. }
                | Change::DeregisterTargets { .. }
                | Change::NodeRules(_)
        )
    }

    fn recreate_because(&self) -> Option<&str> {
        match self {
            Change::DeleteLoadBalancer {
                recreate_because: Some(reason),
                ..
            } => Some(reason.as_str()),
            _ => None,
        }
    }
    fn recreation_withheld(&self) -> Option<&str> {
        match self {
            Change::RecreationWithheld { reason, .. } => Some(reason.as_str()),
            _ => None,
        }
    }
}
