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
    IpRange, NetworkInterface, NewSecurityGroup, Route, RouteState, RouteTable, RouteTableAssociation,
    SecurityGroup, SourceGroup, Subnet,
};

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
    fn set_source_dest_check(
        &self,
        instance: &InstanceId,
        enabled: bool,
    ) -> impl Future<Output = Result<()>> + Send;

    /// The security groups matching `filters`.
    fn security_groups(&self, filters: &[Filter]) -> impl Future<Output = Result<Vec<SecurityGroup>>> + Send;

    /// Creates a security group with its tags; returns its ID. An existing name is `AlreadyExists`.
    fn create_security_group(
        &self,
        group: &NewSecurityGroup,
    ) -> impl Future<Output = Result<SecurityGroupId>> + Send;

    /// Deletes a security group. Still referenced is `Conflict` (`DependencyViolation`).
    fn delete_security_group(&self, group: &SecurityGroupId) -> impl Future<Output = Result<()>> + Send;

    /// Adds ingress rules. A rule that exists already is `AlreadyExists` (`InvalidPermission.Duplicate`).
    fn authorize_ingress(
        &self,
        group: &SecurityGroupId,
        permissions: &[IpPermission],
    ) -> impl Future<Output = Result<()>> + Send;

    /// Removes ingress rules. A rule that does not exist is `NotFound` (`InvalidPermission.NotFound`).
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
    fn create_route(
        &self,
        table: &RouteTableId,
        destination_cidr: &str,
        instance: &InstanceId,
    ) -> impl Future<Output = Result<()>> + Send;

    /// Points an existing route at another instance (`ReplaceRoute`); a missing route is `NotFound`.
    fn replace_route(
        &self,
        table: &RouteTableId,
        destination_cidr: &str,
        instance: &InstanceId,
    ) -> impl Future<Output = Result<()>> + Send;

    /// Deletes the route for an IPv4 CIDR; a missing route is `NotFound` (`InvalidRoute.NotFound`).
    fn delete_route(
        &self,
        table: &RouteTableId,
        destination_cidr: &str,
    ) -> impl Future<Output = Result<()>> + Send;

    /// Adds or overwrites `tags` on every resource of `resources` (any EC2 resource ID). Concurrent callers
    /// with the same tags are batched into one `CreateTags` by the adapter.
    fn create_tags(&self, resources: &[String], tags: &Tags) -> impl Future<Output = Result<()>> + Send;

    /// Deletes tags from every resource of `resources`: each key is removed when its value matches, or whatever
    /// its value when the value given is `None`. Concurrent callers are batched like [`Ec2::create_tags`].
    fn delete_tags(
        &self,
        resources: &[String],
        tags: &BTreeMap<String, Option<String>>,
    ) -> impl Future<Output = Result<()>> + Send;
}

/// Shares one port between owners (e.g. the provider and a provider controller).
impl<T: Ec2 + ?Sized> Ec2 for std::sync::Arc<T> {
    fn instances_by_id(&self, ids: &[InstanceId]) -> impl Future<Output = Result<Vec<Instance>>> + Send {
        (**self).instances_by_id(ids)
    }

    fn instances(&self, filters: &[Filter]) -> impl Future<Output = Result<Vec<Instance>>> + Send {
        (**self).instances(filters)
    }

    fn instances_page(
        &self,
        filters: &[Filter],
        token: Option<String>,
    ) -> impl Future<Output = Result<(Vec<Instance>, Option<String>)>> + Send {
        (**self).instances_page(filters, token)
    }

    fn network_interfaces(
        &self,
        filters: &[Filter],
    ) -> impl Future<Output = Result<Vec<NetworkInterface>>> + Send {
        (**self).network_interfaces(filters)
    }

    fn availability_zones(&self) -> impl Future<Output = Result<Vec<AvailabilityZone>>> + Send {
        (**self).availability_zones()
    }

    fn instance_topology(
        &self,
        ids: &[InstanceId],
    ) -> impl Future<Output = Result<Vec<InstanceTopology>>> + Send {
        (**self).instance_topology(ids)
    }

    fn set_source_dest_check(
        &self,
        instance: &InstanceId,
        enabled: bool,
    ) -> impl Future<Output = Result<()>> + Send {
        (**self).set_source_dest_check(instance, enabled)
    }

    fn security_groups(&self, filters: &[Filter]) -> impl Future<Output = Result<Vec<SecurityGroup>>> + Send {
        (**self).security_groups(filters)
    }

    fn create_security_group(
        &self,
        group: &NewSecurityGroup,
    ) -> impl Future<Output = Result<SecurityGroupId>> + Send {
        (**self).create_security_group(group)
    }

    fn delete_security_group(&self, group: &SecurityGroupId) -> impl Future<Output = Result<()>> + Send {
        (**self).delete_security_group(group)
    }

    fn authorize_ingress(
        &self,
        group: &SecurityGroupId,
        permissions: &[IpPermission],
    ) -> impl Future<Output = Result<()>> + Send {
        (**self).authorize_ingress(group, permissions)
    }

    fn revoke_ingress(
        &self,
        group: &SecurityGroupId,
        permissions: &[IpPermission],
    ) -> impl Future<Output = Result<()>> + Send {
        (**self).revoke_ingress(group, permissions)
    }

    fn subnets(&self, filters: &[Filter]) -> impl Future<Output = Result<Vec<Subnet>>> + Send {
        (**self).subnets(filters)
    }

    fn route_tables(&self, filters: &[Filter]) -> impl Future<Output = Result<Vec<RouteTable>>> + Send {
        (**self).route_tables(filters)
    }

    fn create_route(
        &self,
        table: &RouteTableId,
        destination_cidr: &str,
        instance: &InstanceId,
    ) -> impl Future<Output = Result<()>> + Send {
        (**self).create_route(table, destination_cidr, instance)
    }

    fn replace_route(
        &self,
        table: &RouteTableId,
        destination_cidr: &str,
        instance: &InstanceId,
    ) -> impl Future<Output = Result<()>> + Send {
        (**self).replace_route(table, destination_cidr, instance)
    }

    fn delete_route(
        &self,
        table: &RouteTableId,
        destination_cidr: &str,
    ) -> impl Future<Output = Result<()>> + Send {
        (**self).delete_route(table, destination_cidr)
    }

    fn create_tags(&self, resources: &[String], tags: &Tags) -> impl Future<Output = Result<()>> + Send {
        (**self).create_tags(resources, tags)
    }

    fn delete_tags(
        &self,
        resources: &[String],
        tags: &BTreeMap<String, Option<String>>,
    ) -> impl Future<Output = Result<()>> + Send {
        (**self).delete_tags(resources, tags)
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
