//! Entry points for the cargo-fuzz targets of `fuzz/` into parsers private to this crate: the unknown instance
//! IDs of an AWS error message and the IMDS documents. Hidden from the documentation and not a supported API;
//! nothing but the fuzz targets may call them.

use std::collections::BTreeSet;

use ccm_aws_api::{Result, metadata::InstanceIdentity};

/// The instance IDs an `InvalidInstanceID.NotFound` message names.
pub fn unknown_instance_ids(message: &str) -> BTreeSet<&str> {
    crate::ec2::unknown_instance_ids(message)
}

/// An instance identity document (`/latest/dynamic/instance-identity/document`) as the metadata port reads it.
pub fn identity_document(raw: &str) -> Result<InstanceIdentity> {
    crate::imds::identity_document(raw)
}

/// The region of an availability zone (`placement/availability-zone`), as used when IMDS serves no region.
pub fn region_of_zone(zone: &str) -> Option<String> {
    crate::imds::region_of_zone(zone)
}
