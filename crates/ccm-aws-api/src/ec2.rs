//! The EC2 port: instances, network interfaces, availability zones, security groups, subnets, route tables,
//! routes and tags: every EC2 call the instances, load-balancer, routes and tagging crates make.

use std::{
    collections::{BTreeMap, BTreeSet},
    future::Future,
};

use crate::{Filter, InstanceId, Result, RouteTableId, SecurityGroupId, Tags};

mod model;
pub use model::{
    AvailabilityZone, Instance, InstanceNetworkInterface, InstanceState, InstanceTopology, IpPermission,
    IpRange, NetworkInterface, NewSecurityGroup, PrefixListSource, Route, RouteState, RouteTable,
    RouteTableAssociation, SecurityGroup, SourceGroup, Subnet,
};

port! {
    /// The EC2 operations the workspace needs. Every list is complete (all pages), every filter list may be empty
    /// (meaning no filter).
    ///
    /// Errors carry an [`ErrorKind`](crate::ErrorKind): unknown IDs in calls that take IDs are
    /// [`ErrorKind::NotFound`](crate::ErrorKind::NotFound) (`InvalidInstanceID.NotFound`, `InvalidGroup.NotFound`,
    /// `InvalidRouteTableID.NotFound`, `InvalidRoute.NotFound`, ...); duplicates are `AlreadyExists`
    /// (`InvalidPermission.Duplicate`, `InvalidGroup.Duplicate`, `RouteAlreadyExists`); a resource still in use is
    /// `Conflict` (`DependencyViolation`).
    #[cfg_attr(feature = "mock", mockall::automock)]
    pub trait Ec2 {
        /// The instances among `ids` that exist (terminated ones included, with their state). Unknown IDs are simply
        /// absent from the result, never an error. Concurrent callers are coalesced into few `DescribeInstances`
        /// calls by the adapter, so callers should ask per instance rather than batch themselves.
        fn instances_by_id(&self, ids: &[InstanceId]) -> impl Future<Output = Result<Vec<Instance>>> + Send;

        /// The instances matching all `filters` (an empty list means every instance of the region).
        fn instances(&self, filters: &[Filter]) -> impl Future<Output = Result<Vec<Instance>>> + Send;

        /// One page of [`instances`](Self::instances), from `token` (`None`: the first): its instances and the
        /// token of the next page (`None` after the last). For callers that act on each page as it arrives, or
        /// stop once they found what they need; the next page may be asked minutes later.
        fn instances_page(
            &self,
            filters: &[Filter],
            token: Option<String>,
        ) -> impl Future<Output = Result<(Vec<Instance>, Option<String>)>> + Send;

        /// The network interfaces matching `filters`.
        fn network_interfaces(
            &self,
            filters: &[Filter],
        ) -> impl Future<Output = Result<Vec<NetworkInterface>>> + Send;

        /// The zones of the region (all of them, opted in or not).
        fn availability_zones(&self) -> impl Future<Output = Result<Vec<AvailabilityZone>>> + Send;

        /// The topology of `ids`; instances whose type has no topology are absent.
        fn instance_topology(
            &self,
            ids: &[InstanceId],
        ) -> impl Future<Output = Result<Vec<InstanceTopology>>> + Send;

        /// Sets `SourceDestCheck` of an instance (`ModifyInstanceAttribute`); routes to an instance need `false`.
        #[doc(alias = "ModifyInstanceAttribute")]
        fn set_source_dest_check(
            &self,
            instance: &InstanceId,
            enabled: bool,
        ) -> impl Future<Output = Result<()>> + Send;

        /// The security groups matching `filters`.
        fn security_groups(&self, filters: &[Filter]) -> impl Future<Output = Result<Vec<SecurityGroup>>> + Send;

        /// Creates a security group with its tags; returns its ID. An existing name is `AlreadyExists`.
        #[doc(alias = "CreateSecurityGroup")]
        fn create_security_group(
            &self,
            group: &NewSecurityGroup,
        ) -> impl Future<Output = Result<SecurityGroupId>> + Send;

        /// Deletes a security group. Still referenced is `Conflict` (`DependencyViolation`).
        #[doc(alias = "DeleteSecurityGroup")]
        fn delete_security_group(&self, group: &SecurityGroupId) -> impl Future<Output = Result<()>> + Send;

        /// Adds ingress rules. A rule that exists already is `AlreadyExists` (`InvalidPermission.Duplicate`).
        #[doc(alias = "AuthorizeSecurityGroupIngress")]
        fn authorize_ingress(
            &self,
            group: &SecurityGroupId,
            permissions: &[IpPermission],
        ) -> impl Future<Output = Result<()>> + Send;

        /// Removes ingress rules. A rule that does not exist is `NotFound` (`InvalidPermission.NotFound`).
        #[doc(alias = "RevokeSecurityGroupIngress")]
        fn revoke_ingress(
            &self,
            group: &SecurityGroupId,
            permissions: &[IpPermission],
        ) -> impl Future<Output = Result<()>> + Send;

        /// The subnets matching `filters`.
        fn subnets(&self, filters: &[Filter]) -> impl Future<Output = Result<Vec<Subnet>>> + Send;

        /// The route tables matching `filters`.
        fn route_tables(&self, filters: &[Filter]) -> impl Future<Output = Result<Vec<RouteTable>>> + Send;

        /// Creates a route to an instance. An existing route for the CIDR is `AlreadyExists` (`RouteAlreadyExists`).
        #[doc(alias = "CreateRoute")]
        fn create_route(
            &self,
            table: &RouteTableId,
            destination_cidr: &str,
            instance: &InstanceId,
        ) -> impl Future<Output = Result<()>> + Send;

        /// Points an existing route at another instance (`ReplaceRoute`); a missing route is `NotFound`.
        #[doc(alias = "ReplaceRoute")]
        fn replace_route(
            &self,
            table: &RouteTableId,
            destination_cidr: &str,
            instance: &InstanceId,
        ) -> impl Future<Output = Result<()>> + Send;

        /// Deletes the route for an IPv4 CIDR; a missing route is `NotFound` (`InvalidRoute.NotFound`).
        #[doc(alias = "DeleteRoute")]
        fn delete_route(
            &self,
            table: &RouteTableId,
            destination_cidr: &str,
        ) -> impl Future<Output = Result<()>> + Send;

        /// Adds or overwrites `tags` on every resource of `resources` (any EC2 resource ID). Concurrent callers
        /// with the same tags are batched into one `CreateTags` by the adapter.
        #[doc(alias = "CreateTags")]
        fn create_tags(&self, resources: &[String], tags: &Tags) -> impl Future<Output = Result<()>> + Send;

        /// Deletes tags from every resource of `resources`: each key is removed when its value matches, or whatever
        /// its value when the value given is `None`. Concurrent callers are batched like [`Ec2::create_tags`].
        #[doc(alias = "DeleteTags")]
        fn delete_tags(
            &self,
            resources: &[String],
            tags: &BTreeMap<String, Option<String>>,
        ) -> impl Future<Output = Result<()>> + Send;
    }
}

/// The IDs AWS names in an `InvalidInstanceID.NotFound` message (`The instance IDs 'i-1, i-2' do not exist`, or
/// `The instance ID 'i-1' does not exist`): the comma-separated names of the first quoted span that look like
/// instance IDs (`i-` and ASCII alphanumerics). Anything else in the message, quoted or not, names no ID.
/// Adapters use it to retry a lookup without the unknown IDs.
pub fn unknown_instance_ids(message: &str) -> BTreeSet<&str> {
    let Some((_, rest)) = message.split_once('\'') else {
        return BTreeSet::new();
    };
    let Some((quoted, _)) = rest.split_once('\'') else {
        return BTreeSet::new();
    };
    quoted
        .split(',')
        .map(str::trim)
        .filter(|s| {
            s.strip_prefix("i-")
                .is_some_and(|id| !id.is_empty() && id.chars().all(|c| c.is_ascii_alphanumeric()))
        })
        .collect()
}

#[cfg(test)]
mod tests;
