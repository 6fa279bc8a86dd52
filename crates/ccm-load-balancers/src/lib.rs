//! Service load balancers on AWS (Classic ELB and NLB): annotations parsed once into a typed spec, then a pure
//! desired model, a pure ordered plan against the observed AWS state, and an apply step that alone calls AWS.
//!
//! - [`annotations`]: the annotation table (every key declared once) and the generated `docs/annotations.md`;
//! - [`spec`]: a Service parsed into a [`ServiceSpec`], with every problem collected ([`InvalidService`]): its
//!   flavour, the flavour-change rule ([`spec::flavour_change`]) and the other fields;
//! - [`shared`]: what both flavours use, one concern a module (names and tags, configuration, subnets, security
//!   groups, target instances);
//! - [`classic`] and [`nlb`]: each flavour by phase: model ([`classic::build`], [`nlb::build`]), observe, plan
//!   (small planners per resource kind), change and apply (one function per resource kind); the NLB also has the
//!   nodes' rules ([`nlb::node_rules`]);
//! - [`flavour`]: the shape both flavours share (desired, observed, change; host changes and recreation), over
//!   which the provider's ensure, update and dry run are written once;
//! - [`drift`]: which load balancers were changed by hand, from bulk listings;
//! - [`ownership`]: which load balancers found under a Service's name this cluster may touch;
//! - [`AwsLoadBalancers`]: the [`ccm_cloud_provider::LoadBalancer`] implementation; [`plan_for`]: a dry run;
//!   [`Error`]: why a load balancer could not be ensured, updated or deleted.
//!
//! May depend on: `ccm-cloud-provider`, `ccm-aws-api`, `ccm-tagging`, `k8s-openapi`. Never on `aws-sdk-*`, `kube`
//! clients or other domain crates.

pub mod annotations;
pub mod classic;
pub mod drift;
mod error;
pub mod flavour;
pub mod nlb;
pub mod ownership;
mod provider;
pub mod shared;
pub mod spec;

pub use error::Error;
pub use provider::{
    AwsLoadBalancers, Changes, DEFAULT_CLUSTER_NAME, DesiredModel, DryRun, PlanForError, plan_for,
};
pub use shared::{HealthProbeMode, LoadBalancerConfig};
pub use spec::{Flavour, InvalidService, ServiceSpec, parse_service};

#[cfg(test)]
mod docs_tests;
#[cfg(test)]
mod properties;
