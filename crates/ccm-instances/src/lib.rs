//! InstancesV2 for AWS: provider IDs in every accepted form, node-name forms, addresses, zone, region and instance-type labels, and the exists and shutdown checks.
//!
//! May depend on: `ccm-cloud-provider`, `ccm-aws-api`, `ccm-tagging`. Never on `aws-sdk-*`, `kube` clients or other domain crates.
