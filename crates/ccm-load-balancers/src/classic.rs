//! Classic ELB, by phase: [`model`] (the desired state, [`build`], pure), [`observe`](mod@observe) (the AWS
//! state, reads only), [`plan`](mod@plan) (small planners per resource kind, pure, each returning [`Change`]s)
//! and [`apply`](mod@apply) (one function per resource kind: the only code here that changes AWS); deletion
//! through [`observe_delete`], [`plan_delete`] and the same [`apply`](mod@apply).
//!
//! Crash safety: every name is deterministic (the load balancer from the Service UID, its group from the load
//! balancer name) and every lookup goes by that name, so a run interrupted between any two calls is completed by
//! the next one: the next observation sees what the last run created and plans only what is missing.

pub mod apply;
pub mod change;
pub mod model;
pub mod node_rules;
pub mod observe;
pub mod plan;

pub use crate::shared::{GroupDiff, GroupRef, ManagedGroup};
pub use apply::{Applied, apply};
pub use change::Change;
pub use model::{Attributes, Desired, HealthCheck, Listener, PROXY_PROTOCOL_POLICY, build, ssl_policy_name};
pub use node_rules::{NODE_RULE_PREFIX, NodeGroups, SourceRule};
pub use observe::{DeleteObserved, Known, Observed, OrphanedGroup, Scope, observe, observe_delete};
pub use plan::{is_host_change, plan, plan_delete, plan_release, recreation, recreation_reason};

use model::{SSL_POLICY_PREFIX, fresh_attributes};

#[cfg(test)]
pub(crate) mod tests;
