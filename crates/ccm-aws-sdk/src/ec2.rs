//! [`Ec2`] on aws-sdk-ec2.

use std::{
    collections::{BTreeMap, BTreeSet, HashMap},
    sync::Arc,
    time::Duration,
};

use aws_sdk_ec2::types as sdk;
use ccm_aws_api::{
    Ec2, ErrorKind, Filter, InstanceId, Result, RouteTableId, SecurityGroupId, Tags,
    ec2::{
        AvailabilityZone, Instance, InstanceTopology, IpPermission, NetworkInterface, NewSecurityGroup,
        RouteTable, SecurityGroup, Subnet,
    },
};

use crate::{
    batch::Batcher,
    error_map::duplicate,
    limiter::{ActionClass, Service},
    lookup_split::{LookupSize, shrinking_page, shrinking_pages, split_lookup},
    runtime::{Op, Runtime},
};
use convert::{
    instance, ipv4_cidr, ipv6_cidr, network_interface, next, route_table, sdk_filters, sdk_permission,
    sdk_tags, security_group, subnet,
};

/// AWS takes at most 1,000 instance IDs per `DescribeInstances` and 1,000 resources per `CreateTags`.
const MAX_IDS_PER_CALL: usize = 1000;
/// Instance IDs per `DescribeInstances` by ID: fewer than AWS takes, for memory. The SDK decodes an instance
/// into some 7 KB of records, beside 2.7 KB of XML, before the few fields the catalog keeps are taken from them,
/// so a call of 1,000 IDs is a 10 MiB transient. The periodic address refresh makes such calls when the heap is
/// at its fullest (5,000 Nodes and their load balancers), and at 5,000 Nodes its first pass left the process
/// 8 MiB larger for good (glibc's single arena keeps the heap as large as the records made it; docs/performance.md,
/// run 14). Calls of 200 bound the transient at 2 MiB for four more calls per 1,000 instances: the refresh at
/// 5,000 Nodes asks 25 calls every 5 minutes instead of 5. Listings keep pages of 1,000 ([`MAX_IDS_PER_CALL`]):
/// they fill an empty catalog (the Node burst at start), when the heap is small.
const IDS_PER_LOOKUP_CALL: usize = 200;
/// Values per EC2 filter (AWS rejects more than 200 with `FilterLimitExceeded`).
const MAX_FILTER_VALUES: usize = 200;
/// `DescribeInstanceTopology` takes at most 100 instance IDs.
const MAX_TOPOLOGY_IDS: usize = 100;

const DESCRIBE_INSTANCES: Op = Op::new(Service::Ec2, "DescribeInstances", ActionClass::LargeDescribe);
const DESCRIBE_NETWORK_INTERFACES: Op = Op::new(
    Service::Ec2,
    "DescribeNetworkInterfaces",
    ActionClass::LargeDescribe,
);
const DESCRIBE_AVAILABILITY_ZONES: Op = Op::new(
    Service::Ec2,
    "DescribeAvailabilityZones",
    ActionClass::NonMutating,
);
const DESCRIBE_INSTANCE_TOPOLOGY: Op =
    Op::new(Service::Ec2, "DescribeInstanceTopology", ActionClass::Topology);
const MODIFY_INSTANCE_ATTRIBUTE: Op = Op::new(Service::Ec2, "ModifyInstanceAttribute", ActionClass::Mutating);
const DESCRIBE_SECURITY_GROUPS: Op =
    Op::new(Service::Ec2, "DescribeSecurityGroups", ActionClass::LargeDescribe);
const CREATE_SECURITY_GROUP: Op = Op::new(Service::Ec2, "CreateSecurityGroup", ActionClass::Mutating);
const DELETE_SECURITY_GROUP: Op = Op::new(Service::Ec2, "DeleteSecurityGroup", ActionClass::Mutating);
const AUTHORIZE_INGRESS: Op = Op::new(
    Service::Ec2,
    "AuthorizeSecurityGroupIngress",
    ActionClass::ResourceIntensive,
);
const REVOKE_INGRESS: Op = Op::new(
    Service::Ec2,
    "RevokeSecurityGroupIngress",
    ActionClass::ResourceIntensive,
);
const DESCRIBE_SUBNETS: Op = Op::new(Service::Ec2, "DescribeSubnets", ActionClass::NonMutating);
const DESCRIBE_ROUTE_TABLES: Op = Op::new(Service::Ec2, "DescribeRouteTables", ActionClass::NonMutating);
const CREATE_ROUTE: Op = Op::new(Service::Ec2, "CreateRoute", ActionClass::Mutating);
const REPLACE_ROUTE: Op = Op::new(Service::Ec2, "ReplaceRoute", ActionClass::Mutating);
const DELETE_ROUTE: Op = Op::new(Service::Ec2, "DeleteRoute", ActionClass::Mutating);
const CREATE_TAGS: Op = Op::new(Service::Ec2, "CreateTags", ActionClass::Tags);
const DELETE_TAGS: Op = Op::new(Service::Ec2, "DeleteTags", ActionClass::Tags);

/// The EC2 port on aws-sdk-ec2: cheap to clone, clones share the batchers, limiter and metrics.
#[derive(Clone)]
pub struct AwsEc2 {
    inner: Arc<Inner>,
}

struct Inner {
    raw: Raw,
    lookups: Batcher<(), Vec<InstanceId>, Vec<Instance>>,
    create_tags: Batcher<Tags, Vec<String>, ()>,
    delete_tags: Batcher<BTreeMap<String, Option<String>>, Vec<String>, ()>,
}

/// The unbatched calls, shared with the batchers' executors.
#[derive(Clone)]
struct Raw {
    client: aws_sdk_ec2::Client,
    rt: Arc<Runtime>,
    /// IDs per `DescribeInstances` by ID: [`IDS_PER_LOOKUP_CALL`], fewer after large lookups timed out.
    lookup_size: Arc<LookupSize>,
    /// `MaxResults` of `DescribeInstances` listings: smaller than 1,000 after large pages timed out.
    page_size: Arc<LookupSize>,
}

// === impl AwsEc2 ===

impl AwsEc2 {
    pub(crate) fn new(client: aws_sdk_ec2::Client, rt: Arc<Runtime>, window: Duration) -> Self {
        let raw = Raw {
            client,
            rt,
            lookup_size: Arc::new(LookupSize::new(IDS_PER_LOOKUP_CALL)),
            page_size: Arc::new(LookupSize::new(MAX_IDS_PER_CALL)),
        };
        let lookups = {
            let raw = raw.clone();
            Batcher::new(
                window,
                MAX_IDS_PER_CALL,
                move |(), requests: Vec<Vec<InstanceId>>| {
                    let raw = raw.clone();
                    async move { raw.lookup_batch(requests).await }
                },
            )
        };
        let create_tags = {
            let raw = raw.clone();
            Batcher::new(
                window,
                MAX_IDS_PER_CALL,
                move |tags: Tags, requests: Vec<Vec<String>>| {
                    let raw = raw.clone();
                    async move {
                        raw.tag_batch(requests, move |raw, resources| {
                            let tags = tags.clone();
                            async move { raw.create_tags(&resources, &tags).await }
                        })
                        .await
                    }
                },
            )
        };
        let delete_tags = {
            let raw = raw.clone();
            Batcher::new(
                window,
                MAX_IDS_PER_CALL,
                move |tags: BTreeMap<String, Option<String>>, requests: Vec<Vec<String>>| {
                    let raw = raw.clone();
                    async move {
                        raw.tag_batch(requests, move |raw, resources| {
                            let tags = tags.clone();
                            async move { raw.delete_tags(&resources, &tags).await }
                        })
                        .await
                    }
                },
            )
        };
        Self {
            inner: Arc::new(Inner {
                raw,
                lookups,
                create_tags,
                delete_tags,
            }),
        }
    }

    fn raw(&self) -> &Raw {
        &self.inner.raw
    }
}

impl std::fmt::Debug for AwsEc2 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AwsEc2").finish_non_exhaustive()
    }
}

impl Ec2 for AwsEc2 {
    async fn instances_by_id(&self, ids: &[InstanceId]) -> Result<Vec<Instance>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let ids = ids.to_vec();
        let weight = ids.len();
        self.inner
            .lookups
            .submit((), ids, weight, ("ec2", DESCRIBE_INSTANCES.name))
            .await
    }

    async fn instances(&self, filters: &[Filter]) -> Result<Vec<Instance>> {
        self.raw().instances_filtered(sdk_filters(filters)).await
    }

    async fn instances_page(
        &self,
        filters: &[Filter],
        token: Option<String>,
    ) -> Result<(Vec<Instance>, Option<String>)> {
        self.raw().instances_page(sdk_filters(filters), token).await
    }

    async fn network_interfaces(&self, filters: &[Filter]) -> Result<Vec<NetworkInterface>> {
        let raw = self.raw();
        raw.rt
            .paged(
                DESCRIBE_NETWORK_INTERFACES,
                |token| {
                    raw.client
                        .describe_network_interfaces()
                        .set_filters(sdk_filters(filters))
                        .max_results(1000)
                        .set_next_token(token)
                        .send()
                },
                |page, out| {
                    out.extend(page.network_interfaces().iter().filter_map(network_interface));
                    page.next_token().map(str::to_owned)
                },
            )
            .await
    }

    async fn availability_zones(&self) -> Result<Vec<AvailabilityZone>> {
        let raw = self.raw();
        let out = raw
            .rt
            .call(DESCRIBE_AVAILABILITY_ZONES, || {
                raw.client
                    .describe_availability_zones()
                    .all_availability_zones(true)
                    .send()
            })
            .await?;
        Ok(out
            .availability_zones()
            .iter()
            .map(|z| {
                AvailabilityZone::new(
                    z.zone_name().unwrap_or_default(),
                    z.zone_id().unwrap_or_default(),
                    z.zone_type().unwrap_or_default(),
                    z.region_name().unwrap_or_default(),
                )
            })
            .collect())
    }

    async fn instance_topology(&self, ids: &[InstanceId]) -> Result<Vec<InstanceTopology>> {
        let raw = self.raw();
        let mut out = Vec::new();
        for chunk in ids.chunks(MAX_TOPOLOGY_IDS) {
            let chunk: Vec<String> = chunk.iter().map(|i| i.as_str().to_owned()).collect();
            let mut token = None;
            loop {
                let page = raw
                    .rt
                    .call(DESCRIBE_INSTANCE_TOPOLOGY, || {
                        raw.client
                            .describe_instance_topology()
                            .set_instance_ids(Some(chunk.clone()))
                            .set_next_token(token.clone())
                            .send()
                    })
                    .await?;
                for t in page.instances() {
                    let Some(id) = t.instance_id() else { continue };
                    let mut topology = InstanceTopology::new(
                        InstanceId::new(id),
                        t.instance_type().unwrap_or_default(),
                        t.network_nodes().to_vec(),
                    );
                    topology.availability_zone = t.availability_zone().map(str::to_owned);
                    topology.zone_id = t.zone_id().map(str::to_owned);
                    out.push(topology);
                }
                token = next(page.next_token());
                if token.is_none() {
                    break;
                }
            }
        }
        Ok(out)
    }

    async fn set_source_dest_check(&self, instance: &InstanceId, enabled: bool) -> Result<()> {
        let raw = self.raw();
        raw.rt
            .call(MODIFY_INSTANCE_ATTRIBUTE, || {
                raw.client
                    .modify_instance_attribute()
                    .instance_id(instance.as_str())
                    .source_dest_check(sdk::AttributeBooleanValue::builder().value(enabled).build())
                    .send()
            })
            .await?;
        Ok(())
    }

    async fn security_groups(&self, filters: &[Filter]) -> Result<Vec<SecurityGroup>> {
        let raw = self.raw();
        raw.rt
            .paged(
                DESCRIBE_SECURITY_GROUPS,
                |token| {
                    raw.client
                        .describe_security_groups()
                        .set_filters(sdk_filters(filters))
                        .max_results(1000)
                        .set_next_token(token)
                        .send()
                },
                |page, out| {
                    out.extend(page.security_groups().iter().filter_map(security_group));
                    page.next_token().map(str::to_owned)
                },
            )
            .await
    }

    async fn create_security_group(&self, group: &NewSecurityGroup) -> Result<SecurityGroupId> {
        let raw = self.raw();
        let out = raw
            .rt
            .call(CREATE_SECURITY_GROUP, || {
                let mut request = raw
                    .client
                    .create_security_group()
                    .group_name(&group.name)
                    .description(&group.description)
                    .vpc_id(group.vpc_id.as_str());
                if !group.tags.is_empty() {
                    request = request.tag_specifications(
                        sdk::TagSpecification::builder()
                            .resource_type(sdk::ResourceType::SecurityGroup)
                            .set_tags(Some(sdk_tags(&group.tags)))
                            .build(),
                    );
                }
                request.send()
            })
            .await?;
        out.group_id()
            .map(SecurityGroupId::new)
            .ok_or_else(|| CREATE_SECURITY_GROUP.error(ErrorKind::Transient, "AWS returned no group ID"))
    }

    async fn delete_security_group(&self, group: &SecurityGroupId) -> Result<()> {
        let raw = self.raw();
        raw.rt
            .call(DELETE_SECURITY_GROUP, || {
                raw.client.delete_security_group().group_id(group.as_str()).send()
            })
            .await?;
        Ok(())
    }

    async fn authorize_ingress(&self, group: &SecurityGroupId, permissions: &[IpPermission]) -> Result<()> {
        let raw = self.raw();
        let permissions: Vec<_> = permissions.iter().map(sdk_permission).collect();
        raw.rt
            .call(AUTHORIZE_INGRESS, || {
                raw.client
                    .authorize_security_group_ingress()
                    .group_id(group.as_str())
                    .set_ip_permissions(Some(permissions.clone()))
                    .send()
            })
            .await?;
        Ok(())
    }

    async fn revoke_ingress(&self, group: &SecurityGroupId, permissions: &[IpPermission]) -> Result<()> {
        let raw = self.raw();
        let permissions: Vec<_> = permissions.iter().map(sdk_permission).collect();
        let out = raw
            .rt
            .call(REVOKE_INGRESS, || {
                raw.client
                    .revoke_security_group_ingress()
                    .group_id(group.as_str())
                    .set_ip_permissions(Some(permissions.clone()))
                    .send()
            })
            .await?;
        // AWS answers success with the rules it did not know listed apart; that is a NotFound for the caller.
        if !out.unknown_ip_permissions().is_empty() {
            return Err(REVOKE_INGRESS
                .error(ErrorKind::NotFound, "some rules to revoke did not exist")
                .with_code("InvalidPermission.NotFound"));
        }
        Ok(())
    }

    async fn subnets(&self, filters: &[Filter]) -> Result<Vec<Subnet>> {
        let raw = self.raw();
        raw.rt
            .paged(
                DESCRIBE_SUBNETS,
                |token| {
                    raw.client
                        .describe_subnets()
                        .set_filters(sdk_filters(filters))
                        .max_results(1000)
                        .set_next_token(token)
                        .send()
                },
                |page, out| {
                    out.extend(page.subnets().iter().filter_map(subnet));
                    page.next_token().map(str::to_owned)
                },
            )
            .await
    }

    async fn route_tables(&self, filters: &[Filter]) -> Result<Vec<RouteTable>> {
        let raw = self.raw();
        raw.rt
            .paged(
                DESCRIBE_ROUTE_TABLES,
                |token| {
                    raw.client
                        .describe_route_tables()
                        .set_filters(sdk_filters(filters))
                        .max_results(100)
                        .set_next_token(token)
                        .send()
                },
                |page, out| {
                    out.extend(page.route_tables().iter().filter_map(route_table));
                    page.next_token().map(str::to_owned)
                },
            )
            .await
    }

    async fn create_route(
        &self,
        table: &RouteTableId,
        destination_cidr: &str,
        instance: &InstanceId,
    ) -> Result<()> {
        let raw = self.raw();
        raw.rt
            .call(CREATE_ROUTE, || {
                raw.client
                    .create_route()
                    .route_table_id(table.as_str())
                    .set_destination_cidr_block(ipv4_cidr(destination_cidr))
                    .set_destination_ipv6_cidr_block(ipv6_cidr(destination_cidr))
                    .instance_id(instance.as_str())
                    .send()
            })
            .await?;
        Ok(())
    }

    async fn replace_route(
        &self,
        table: &RouteTableId,
        destination_cidr: &str,
        instance: &InstanceId,
    ) -> Result<()> {
        let raw = self.raw();
        let result = raw
            .rt
            .call(REPLACE_ROUTE, || {
                raw.client
                    .replace_route()
                    .route_table_id(table.as_str())
                    .set_destination_cidr_block(ipv4_cidr(destination_cidr))
                    .set_destination_ipv6_cidr_block(ipv6_cidr(destination_cidr))
                    .instance_id(instance.as_str())
                    .send()
            })
            .await;
        match result {
            Ok(_) => Ok(()),
            // AWS reports a missing route as `InvalidParameterValue: There is no route defined for ...`.
            Err(err)
                if err.code() == Some("InvalidParameterValue")
                    && err.message().is_some_and(|m| m.contains("no route defined")) =>
            {
                let message = err.message().unwrap_or_default().to_owned();
                Err(REPLACE_ROUTE
                    .error(ErrorKind::NotFound, message)
                    .with_code("InvalidRoute.NotFound"))
            }
            Err(err) => Err(err),
        }
    }

    async fn delete_route(&self, table: &RouteTableId, destination_cidr: &str) -> Result<()> {
        let raw = self.raw();
        raw.rt
            .call(DELETE_ROUTE, || {
                raw.client
                    .delete_route()
                    .route_table_id(table.as_str())
                    .set_destination_cidr_block(ipv4_cidr(destination_cidr))
                    .set_destination_ipv6_cidr_block(ipv6_cidr(destination_cidr))
                    .send()
            })
            .await?;
        Ok(())
    }

    async fn create_tags(&self, resources: &[String], tags: &Tags) -> Result<()> {
        if resources.is_empty() || tags.is_empty() {
            return Ok(());
        }
        let weight = resources.len();
        self.inner
            .create_tags
            .submit(
                tags.clone(),
                resources.to_vec(),
                weight,
                ("ec2", CREATE_TAGS.name),
            )
            .await
    }

    async fn delete_tags(&self, resources: &[String], tags: &BTreeMap<String, Option<String>>) -> Result<()> {
        if resources.is_empty() || tags.is_empty() {
            return Ok(());
        }
        let weight = resources.len();
        self.inner
            .delete_tags
            .submit(
                tags.clone(),
                resources.to_vec(),
                weight,
                ("ec2", DELETE_TAGS.name),
            )
            .await
    }
}

mod convert;
mod raw;
#[cfg(test)]
mod tests;
