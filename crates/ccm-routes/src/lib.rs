//! Pod CIDR routes in the cluster's VPC route tables: the Routes capability for AWS ([`AwsRoutes`]), touching only
//! route tables tagged for this cluster (or named in the cloud config) and only routes to this cluster's
//! instances.
//!
//! ```text
//! let routes = AwsRoutes::new(adapter.ec2().clone(), RoutesConfig::new(cluster_tags))
//!     .with_node_names(node_index.clone()); // a NodeIndex fed from the Node watch (provider IDs)
//! ```
//!
//! See `docs/routes.md` for the behaviour, the AWS calls made and the differences from the Go CCM.
//!
//! May depend on: `ccm-cloud-provider`, `ccm-aws-api`, `ccm-tagging`. Never on `aws-sdk-*`, `kube` clients or
//! other domain crates.

mod error;
mod names;
mod routes;

pub use error::RoutesError;
pub use names::{NoNodeNames, NodeIndex, NodeNames};
pub use routes::{AwsRoutes, RoutesConfig};
