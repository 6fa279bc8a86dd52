//! The steps of a Classic ELB's plan ([`Change`]), serializable for dry runs: which are host changes and which
//! recreate the load balancer.

use ccm_aws_api::Tags;
use serde::Serialize;

use super::{Attributes, HealthCheck, Listener, node_rules::SourceRule};
use crate::{
    flavour::PlannedChange,
    shared::{GroupRef, Rule},
};

/// One step of a plan. Plans are ordered: groups first, then the load balancer, its health check, attributes,
/// policies, instances, and last the nodes' rules.
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
    /// Add CIDR and prefix list rules to a group.
    AuthorizeIngress {
        /// The group.
        group: GroupRef,
        /// The rules.
        rules: Vec<Rule>,
    },
    /// Remove CIDR and prefix list rules from a group.
    RevokeIngress {
        /// The group.
        group: GroupRef,
        /// The rules.
        rules: Vec<Rule>,
    },
    /// Create the load balancer.
    CreateLoadBalancer {
        /// Name.
        name: String,
        /// Scheme.
        internal: bool,
        /// Subnets.
        subnets: Vec<String>,
        /// Groups.
        security_groups: Vec<GroupRef>,
        /// Listeners.
        listeners: Vec<Listener>,
        /// Tags.
        tags: Tags,
    },
    /// Add or overwrite tags of the load balancer.
    AddTags {
        /// The tags.
        tags: Tags,
    },
    /// Remove tags dropped from `aws-load-balancer-additional-resource-tags` from the load balancer.
    RemoveTags {
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
    /// Remove listeners.
    DeleteListeners {
        /// Front-end ports.
        ports: Vec<i32>,
    },
    /// Add listeners.
    CreateListeners {
        /// The listeners.
        listeners: Vec<Listener>,
    },
    /// Attach subnets.
    AttachSubnets {
        /// The subnets.
        subnets: Vec<String>,
    },
    /// Detach subnets.
    DetachSubnets {
        /// The subnets.
        subnets: Vec<String>,
    },
    /// Replace the load balancer's groups.
    ApplySecurityGroups {
        /// The groups.
        groups: Vec<GroupRef>,
    },
    /// Set the health check.
    ConfigureHealthCheck {
        /// The check.
        health_check: HealthCheck,
    },
    /// Set the attributes (every field AWS takes; the draining timeout kept when not owned).
    ModifyAttributes {
        /// The attributes.
        attributes: Attributes,
    },
    /// Create a policy on the load balancer.
    CreatePolicy {
        /// Policy name.
        name: String,
        /// Policy type.
        type_name: String,
        /// Attributes.
        attributes: Vec<(String, String)>,
    },
    /// Set the policies of a back-end port.
    SetBackendPolicies {
        /// The instance port.
        instance_port: i32,
        /// The policies.
        policies: Vec<String>,
    },
    /// Set the policies of a listener.
    SetListenerPolicies {
        /// The front-end port.
        port: i32,
        /// The policies.
        policies: Vec<String>,
    },
    /// Register instances.
    RegisterInstances {
        /// The instances.
        instances: Vec<String>,
    },
    /// Deregister instances.
    DeregisterInstances {
        /// The instances.
        instances: Vec<String>,
    },
    /// Allow the load balancer's group into a node group on `ports` (`tcp`, one rule per port, described
    /// [`NODE_RULE_PREFIX`](super::node_rules::NODE_RULE_PREFIX)`<name>`).
    AuthorizeNodeAccess {
        /// The node group.
        group: String,
        /// The load balancer's group.
        from: GroupRef,
        /// The ports.
        ports: Vec<i32>,
    },
    /// Remove rules whose source is `from` from a group (narrow rules nobody needs, or a wide one narrowed).
    RevokeNodeAccess {
        /// The group.
        group: String,
        /// The load balancer's group.
        from: GroupRef,
        /// The rules.
        rules: Vec<SourceRule>,
    },
    /// Hand narrow rules this load balancer no longer needs over to an NLB using the same source group that
    /// does (AWS keeps such a rule once, under one description): revoke `rules` as found, then authorize
    /// `heirs`, the same rules described as the NLB's own.
    HandOverNodeAccess {
        /// The node group.
        group: String,
        /// The load balancer's group.
        from: GroupRef,
        /// The rules as found.
        rules: Vec<SourceRule>,
        /// The same rules, described with their heirs' names.
        heirs: Vec<SourceRule>,
    },
    /// Delete the load balancer.
    DeleteLoadBalancer {
        /// Its name.
        name: String,
        /// Why it is recreated (`None`: deleted with the Service).
        #[serde(skip_serializing_if = "Option::is_none")]
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
    /// Delete an owned security group.
    DeleteSecurityGroup {
        /// The group.
        group: String,
    },
}

// === impl Change ===

impl PlannedChange for Change {
    fn is_host_change(&self) -> bool {
        matches!(
            self,
            Change::RegisterInstances { .. }
                | Change::DeregisterInstances { .. }
                | Change::AuthorizeNodeAccess { .. }
                | Change::RevokeNodeAccess { .. }
                | Change::HandOverNodeAccess { .. }
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
