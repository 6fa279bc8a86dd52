//! InstancesV2 for AWS: provider IDs in every accepted form, node-name forms, addresses, zone, region,
//! instance-type, zone-ID and network-topology labels, and the exists and shutdown checks, every one batched.
//!
//! [`AwsInstances`] implements the contract's [`InstancesV2`](ccm_cloud_provider::InstancesV2) over the
//! [`Ec2`](ccm_aws_api::Ec2) port:
//! - a node is found by `spec.providerID` ([`ProviderId::parse`]: `aws:///<zone>/<id>`, `aws:////<id>`,
//!   `aws://<zone>/<id>`, bare `i-...`, and `fargate-` forms), else by its name
//!   ([`InstanceRef::from_node_name`]): `i-...[.<domain>]` is the instance ID, `fargate-...` a Fargate pod,
//!   anything else a private DNS name (instances not terminated, carrying the cluster tag when one is
//!   configured); a burst of nodes named so costs one listing of the cluster, whose running instances answer
//!   the later batches' initialization for [`LISTING_REUSE`];
//! - instances are read through the instance catalog ([`ccm_aws_api::catalog`]): initialization and the address
//!   refresh take a read of [`RECENT_READ`] by any reader of the catalog (its own, or the one the AWS cloud shares
//!   between its controllers: [`AwsInstances::with_instance_catalog`]);
//! - the provider ID produced is upstream's `aws:///<zone>/<instance-id>` ([`ProviderId`]'s `Display`); an
//!   existing one is kept;
//! - addresses: see [`instance_addresses`] and [`fargate_addresses`];
//! - the zone is the instance's zone name (`us-east-1a`), or its zone ID (`use1-az1`) with
//!   [`InstancesConfig::with_zone_form`] and [`ZoneForm::Id`]; the provider ID always names the zone by name;
//! - labels: `topology.k8s.aws/zone-id` and `topology.k8s.aws/network-node-layer-<N>` (only when absent);
//! - exists is `false` only for terminated instances and none found; shutdown is `true` for stopped and
//!   stopping instances; Fargate pods exist while their interface does and are never shut down.
//!
//! ```
//! // The network-topology labels of an instance, outermost layer first.
//! let nodes = ["nn-a".to_owned(), "nn-b".to_owned()];
//! let labels: Vec<(String, String)> = ccm_instances::network_node_labels(&nodes).collect();
//! assert_eq!(labels[1], ("topology.k8s.aws/network-node-layer-2".to_owned(), "nn-b".to_owned()));
//! ```
//!
//! May depend on: `ccm-cloud-provider`, `ccm-aws-api`, `ccm-tagging`. Never on `aws-sdk-*`, `kube` clients or
//! other domain crates.
//!
//! [`ProviderId`]: ccm_aws_api::ProviderId
//! [`ProviderId::parse`]: ccm_aws_api::ProviderId::parse
//! [`InstanceRef::from_node_name`]: ccm_aws_api::InstanceRef::from_node_name

#![cfg_attr(
    test,
    allow(
        clippy::too_many_lines,
        reason = "the function limit is for code, not for tests"
    )
)]

mod addresses;
mod error;
mod instances;
mod topology;
mod zone_form;

pub use addresses::{IpFamily, fargate_addresses, instance_addresses};
pub use error::InstancesError;
pub use instances::{
    AwsInstances, DEFAULT_TOPOLOGY_PATTERN, IDS_PER_LOOKUP, INSTANCES_PER_PAGE, InstancesConfig,
    LISTING_REUSE, NOT_IN_CLUSTER_CONSEQUENCE, RECENT_READ, VALUES_PER_FILTER, ZONE_ID_LABEL,
};
pub use topology::{NETWORK_NODE_LAYER_PREFIX, UNSUPPORTED_TTL, network_node_labels};
pub use zone_form::ZoneForm;
