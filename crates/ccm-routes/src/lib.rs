//! Pod CIDR routes in the cluster's VPC route tables: the Routes capability for AWS, touching only route tables tagged for this cluster.
//!
//! May depend on: `ccm-cloud-provider`, `ccm-aws-api`, `ccm-tagging`. Never on `aws-sdk-*`, `kube` clients or other domain crates.
