//! Pod CIDR routes in the cluster's VPC route tables: the Routes capability for AWS ([`AwsRoutes`]), touching only
//! route tables tagged for this cluster (or named in the cloud config) and only routes to this cluster's
//! instances.
//!
//! ```
//! use ccm_aws_api::ec2::{MockEc2, Route, RouteTable};
//! use ccm_aws_api::{InstanceId, RouteTableId, Tags, VpcId};
//! use ccm_cloud_provider::Routes;
//! use ccm_routes::{AwsRoutes, NodeIndex, RoutesConfig};
//! use ccm_tagging::ClusterTags;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! // The EC2 port: here a mock (feature `mock` of ccm-aws-api) holding one table of the cluster; in a CCM, the
//! // ccm-aws-sdk adapter's EC2 client.
//! let mut ec2 = MockEc2::new();
//! ec2.expect_route_tables().returning(|_filters| {
//!     let tags = Tags::from([("kubernetes.io/cluster/prod".to_owned(), "owned".to_owned())]);
//!     let routes = vec![
//!         Route::to_gateway("10.0.0.0/16", "local"),
//!         Route::to_instance("10.244.1.0/24", InstanceId::new("i-0a1")),
//!     ];
//!     let table = RouteTable::new(RouteTableId::new("rtb-1"), VpcId::new("vpc-1"), routes, tags);
//!     Box::pin(async move { Ok(vec![table]) })
//! });
//!
//! // Node names by provider ID, fed from the Node watch.
//! let nodes = NodeIndex::new();
//! nodes.upsert("node-a", Some("aws:///us-east-1a/i-0a1"));
//!
//! let cluster = ClusterTags::new("prod", false).unwrap();
//! let routes = AwsRoutes::new(ec2, RoutesConfig::new(cluster)).with_node_names(nodes);
//! // Only routes to the cluster's nodes are reported: the gateway route is not the route controller's.
//! let listed = routes.list_routes("prod").await.unwrap();
//! assert_eq!(listed.len(), 1);
//! assert_eq!(listed[0].target_node, "node-a");
//! assert_eq!(listed[0].destination_cidr, "10.244.1.0/24");
//! # }
//! ```
//!
//! See `docs/routes.md` for the behaviour, the AWS calls made and the differences from the Go CCM.
//!
//! May depend on: `ccm-cloud-provider`, `ccm-aws-api`, `ccm-tagging`. Never on `aws-sdk-*`, `kube` clients or
//! other domain crates.

#![cfg_attr(
    test,
    allow(
        clippy::too_many_lines,
        reason = "the function limit is for code, not for tests"
    )
)]

mod error;
mod names;
mod routes;
mod targets;

pub use error::RoutesError;

/// How long the routes' own instance catalog (see [`AwsRoutes::new`]) keeps what it read: a private DNS name
/// names a route target for as long.
pub const ROUTE_NAMES_RETAIN: std::time::Duration = std::time::Duration::from_secs(3600);
pub use names::{NoNodeNames, NodeIndex, NodeNames};
pub use routes::{AwsRoutes, RoutesConfig};
pub use targets::{AnyRouteTarget, RefusalFuture, RouteTargets};
