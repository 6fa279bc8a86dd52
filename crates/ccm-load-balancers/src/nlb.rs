//! Network Load Balancers with instance targets, by phase: [`model`] (the desired state, [`build`], pure, with
//! the resources' [`names`]), [`observe`](mod@observe) (the AWS state, reads only), [`plan`](mod@plan) (small
//! planners per resource kind, pure, each returning [`Change`]s) and [`apply`](mod@apply) (one function per
//! resource kind: the only code here that changes AWS); deletion through [`observe_delete`], [`plan_delete`] and
//! the same [`apply`](mod@apply).
//!
//! Crash safety: every name is deterministic — the load balancer `a<uid>`, each target group
//! [`target_group_name`] (from the Service UID, port, node port and target protocol), the managed security group
//! [`managed_group_name`] — and every lookup goes by that name, so a run interrupted between any two calls is
//! completed by the next one: a target group created just before a crash is adopted by name, not leaked; a load
//! balancer deleted for recreation is created again by the next run.
//!
//! Where the Go version is wrong this one is not: listeners are keyed by port, so a protocol change (TCP to TLS)
//! modifies or replaces the listener instead of failing with `DuplicateListener`; the health check timeout is
//! applied and every field is compared, so unchanged checks make no call and an unhealthy-threshold change is
//! not missed; tags are reconciled; a scheme, subnet, address or security group change that needs a new NLB
//! recreates it (reported as a Warning Event); a `failed` NLB is an error.
//!
//! [`node_rules`]: the rules an NLB needs on the nodes' security groups.

pub mod apply;
mod certificates;
pub mod change;
mod listener_attributes;
pub mod model;
pub mod names;
pub mod node_rules;
pub mod observe;
pub mod plan;

pub use apply::{Applied, apply};
pub use change::{Change, ReferencePermission};
pub use model::{
    ACCESS_LOGS_ATTRIBUTE, ACCESS_LOGS_BUCKET_ATTRIBUTE, ACCESS_LOGS_PREFIX_ATTRIBUTE, CROSS_ZONE_ATTRIBUTE,
    Desired, HealthCheck, Listener, MANAGED_GROUP_DESCRIPTION, Security, TargetGroupSpec, build,
    health_check, listeners,
};
pub use names::{ip_target_group_name, managed_group_name, successor_target_group_name, target_group_name};
pub use observe::{
    DeleteObserved, Observed, ObservedTargetGroup, Scope, observe, observe_delete, status_hostname,
};
pub use plan::{
    is_host_change, observe_release, plan, plan_delete, plan_release, recreation, recreation_reason,
    recreation_reasons, unprotect,
};

use names::name_prefix;

#[cfg(test)]
pub(crate) mod tests;
