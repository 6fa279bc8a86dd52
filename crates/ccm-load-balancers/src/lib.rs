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
//! - [`AwsLoadBalancers`]: the [`ccm_cloud_provider::LoadBalancer`] implementation, serving only the Nodes its
//!   [`NodeTargets`] port keeps; [`plan_for`]: a dry run;
//!   [`Error`]: why a load balancer could not be ensured, updated or deleted. It remembers what each ensure and
//!   host update left (its host memory), so that a node joining or leaving costs a load balancer only its
//!   register or deregister calls (docs/load-balancers.md, "Node changes: host updates from memory").
//!
//! A dry run over your own ports: here the mockall mocks of `ccm-aws-api` (feature `mock`) describe an account
//! with one public subnet and no load balancer yet; in a CCM, the ccm-aws-sdk adapter's clients.
//!
//! ```
//! use ccm_aws_api::ec2::{MockEc2, Route, RouteTable, RouteTableAssociation, Subnet};
//! use ccm_aws_api::{RouteTableId, SubnetId, Tags, VpcId, elb::MockElb, elbv2::MockElbv2};
//! use ccm_load_balancers::{AwsLoadBalancers, LoadBalancerConfig, plan_for};
//! use ccm_tagging::ClusterTags;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! let mut ec2 = MockEc2::new();
//! ec2.expect_availability_zones().returning(|| Box::pin(async { Ok(vec![]) }));
//! ec2.expect_subnets().returning(|_| {
//!     let subnet = Subnet::new(SubnetId::new("subnet-a"), VpcId::new("vpc-1"), "us-east-1a", Tags::new());
//!     Box::pin(async move { Ok(vec![subnet]) })
//! });
//! ec2.expect_route_tables().returning(|_| {
//!     let to_internet = vec![Route::to_gateway("0.0.0.0/0", "igw-1")];
//!     let mut main = RouteTable::new(RouteTableId::new("rtb-1"), VpcId::new("vpc-1"), to_internet, Tags::new());
//!     main.associations = vec![RouteTableAssociation::new(None, true)];
//!     Box::pin(async move { Ok(vec![main]) })
//! });
//! ec2.expect_security_groups().returning(|_| Box::pin(async { Ok(vec![]) }));
//! let mut elb = MockElb::new();
//! elb.expect_load_balancer().returning(|_| Box::pin(async { Ok(None) }));
//!
//! let config = LoadBalancerConfig::new(ClusterTags::new("prod", false).unwrap(), VpcId::new("vpc-1"))
//!     .with_node_security_group_rules(false);
//! let lbs = AwsLoadBalancers::new(ec2, elb, MockElbv2::new(), config);
//!
//! let service = r#"{"metadata": {"name": "web", "namespace": "shop", "uid": "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"},
//!     "spec": {"type": "LoadBalancer", "ports": [{"port": 80, "nodePort": 30080, "protocol": "TCP"}]}}"#;
//! let plan = plan_for(&lbs, "kubernetes", service, &[]).await.unwrap();
//! // Nothing was written: the plan is what an ensure would do, one numbered change per line.
//! let printed = plan.to_string();
//! assert!(printed.starts_with("Service shop/web -> Classic ELB a0f1e2d3c4b5a69788796a5b4c3d2e1f"), "{printed}");
//! assert!(printed.contains("create_load_balancer"), "{printed}");
//! # }
//! ```
//!
//! May depend on: `ccm-cloud-provider`, `ccm-aws-api`, `ccm-tagging`, `k8s-openapi`. Never on `aws-sdk-*`, `kube`
//! clients or other domain crates.

#![cfg_attr(
    test,
    allow(
        clippy::too_many_lines,
        reason = "the function limit is for code, not for tests"
    )
)]

pub mod annotations;
pub mod classic;
pub mod drift;
mod dry_run;
mod error;
pub mod flavour;
pub mod instance_reads;
mod memory;
pub mod nlb;
pub mod ownership;
mod provider;
pub mod shared;
pub mod spec;
mod targets;

pub use dry_run::{Changes, DesiredModel, DryRun, Recreation};
pub use error::Error;
pub use provider::{
    AwsLoadBalancers, DEFAULT_CLUSTER_NAME,
    plan::{PlanForError, plan_for, plan_with_endpoints_for},
};
pub use shared::{HealthProbeMode, LoadBalancerConfig};
pub use spec::{Flavour, InvalidService, ServiceSpec, parse_service, parse_service_with};
pub use targets::{AllNodes, NodeTargets, TargetsFuture};

#[cfg(test)]
mod docs_tests;
#[cfg(test)]
mod properties;
