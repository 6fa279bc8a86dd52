//! [`Ec2`] on aws-sdk-ec2.

use std::{
    collections::{BTreeMap, BTreeSet, HashMap},
    sync::Arc,
    time::Duration,
};

use aws_sdk_ec2::types as sdk;
use ccm_aws_api::{
    Ec2, ErrorKind, Filter, InstanceId, Result, RouteTableId, SecurityGroupId, SubnetId, Tags, VpcId,
    ec2::{
        AvailabilityZone, Instance, InstanceNetworkInterface, InstanceState, InstanceTopology, IpPermission,
        IpRange, NetworkInterface, NewSecurityGroup, Route, RouteState, RouteTable, RouteTableAssociation,
        SecurityGroup, SourceGroup, Subnet,
    },
};

use crate::{
    batch::Batcher,
    error_map::duplicate,
    limiter::{ActionClass, Service},
    lookup_split::{LookupSize, shrinking_pages, split_lookup},
    runtime::{Op, Runtime},
};

/// AWS takes at most 1,000 instance IDs per `DescribeInstances` and 1,000 resources per `CreateTags`.
const MAX_IDS_PER_CALL: usize = 1000;
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
    /// IDs per `DescribeInstances` by ID: fewer than AWS's 1,000 after large lookups timed out.
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
            lookup_size: Arc::new(LookupSize::new(MAX_IDS_PER_CALL)),
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

// === impl Raw ===

impl Raw {
    /// Answers each lookup request of a batch from as few `DescribeInstances` calls as possible.
    async fn lookup_batch(&self, requests: Vec<Vec<InstanceId>>) -> Vec<Result<Vec<Instance>>> {
        let wanted: BTreeSet<&InstanceId> = requests.iter().flatten().collect();
        let wanted: Vec<InstanceId> = wanted.into_iter().cloned().collect();
        let lookup = split_lookup(&self.lookup_size, &wanted, |chunk, splittable| async move {
            self.instances_by_id_unbatched(&chunk, splittable).await
        });
        let found: HashMap<InstanceId, Instance> = match lookup.await {
            Ok(instances) => instances.into_iter().map(|i| (i.id.clone(), i)).collect(),
            Err(err) => return requests.iter().map(|_| Err(duplicate(&err))).collect(),
        };
        requests
            .into_iter()
            .map(|ids| Ok(ids.iter().filter_map(|id| found.get(id).cloned()).collect()))
            .collect()
    }

    /// `DescribeInstances` by ID, where unknown IDs are dropped rather than failing the call.
    ///
    /// AWS fails the whole call with `InvalidInstanceID.NotFound` when any ID is unknown, naming the unknown ones
    /// in the message; those are removed and the rest asked again: two calls in all. Should the message not name
    /// them all (the second call fails the same way) or none at all, the remaining IDs are asked by
    /// `instance-id` filter instead, which ignores unknown IDs (200 values per call).
    ///
    /// A `splittable` lookup is not retried after a timeout or another transient fault: its caller asks again in
    /// halves ([`split_lookup`]).
    async fn instances_by_id_unbatched(&self, ids: &[InstanceId], splittable: bool) -> Result<Vec<Instance>> {
        let transient_attempts = if splittable { 1 } else { u32::MAX };
        let mut remaining: Vec<InstanceId> = ids.to_vec();
        for attempt in 0..2 {
            if remaining.is_empty() {
                return Ok(Vec::new());
            }
            let request: Vec<String> = remaining.iter().map(|i| i.as_str().to_owned()).collect();
            let result = self
                .rt
                .call_with(DESCRIBE_INSTANCES, transient_attempts, || {
                    self.client
                        .describe_instances()
                        .set_instance_ids(Some(request.clone()))
                        .send()
                })
                .await;
            match result {
                Ok(out) => {
                    let mut instances: Vec<Instance> = out
                        .reservations()
                        .iter()
                        .flat_map(|r| r.instances())
                        .filter_map(instance)
                        .collect();
                    // AWS pages ID lookups only beyond 1,000 results; follow a token anyway rather than drop data.
                    if let Some(token) = next(out.next_token()) {
                        instances.extend(self.describe_pages(Some(request), None, Some(token)).await?);
                    }
                    return Ok(instances);
                }
                Err(err) if err.code() == Some("InvalidInstanceID.NotFound") && attempt == 0 => {
                    let unknown = unknown_instance_ids(err.message().unwrap_or_default());
                    let before = remaining.len();
                    remaining.retain(|id| !unknown.contains(id.as_str()));
                    if remaining.len() == before {
                        tracing::debug!(error = %err, "unknown instance IDs not named; looking up by filter");
                        break;
                    }
                }
                Err(err)
                    if matches!(
                        err.code(),
                        Some("InvalidInstanceID.NotFound" | "InvalidInstanceID.Malformed")
                    ) =>
                {
                    break;
                }
                Err(err) => return Err(err),
            }
        }
        self.instances_by_id_filter(&remaining).await
    }

    async fn instances_by_id_filter(&self, ids: &[InstanceId]) -> Result<Vec<Instance>> {
        let mut out = Vec::new();
        for chunk in ids.chunks(MAX_FILTER_VALUES) {
            let filter = sdk_filters(&[Filter::new("instance-id", chunk.iter().map(InstanceId::as_str))]);
            out.extend(self.instances_filtered(filter).await?);
        }
        Ok(out)
    }

    /// A listing by filter, page by page; a page that times out is asked again smaller ([`shrinking_pages`]).
    async fn instances_filtered(&self, filters: Option<Vec<sdk::Filter>>) -> Result<Vec<Instance>> {
        shrinking_pages(&self.page_size, |token, page, splittable| {
            let filters = filters.clone();
            async move {
                let transient_attempts = if splittable { 1 } else { u32::MAX };
                let max_results = i32::try_from(page).unwrap_or(1000).clamp(5, 1000);
                let out = self
                    .rt
                    .call_with(DESCRIBE_INSTANCES, transient_attempts, || {
                        self.client
                            .describe_instances()
                            .set_filters(filters.clone())
                            .set_next_token(token.clone())
                            .max_results(max_results)
                            .send()
                    })
                    .await?;
                let instances: Vec<Instance> = out
                    .reservations()
                    .iter()
                    .flat_map(|r| r.instances())
                    .filter_map(instance)
                    .collect();
                Ok((instances, next(out.next_token())))
            }
        })
        .await
    }

    async fn describe_pages(
        &self,
        ids: Option<Vec<String>>,
        filters: Option<Vec<sdk::Filter>>,
        mut token: Option<String>,
    ) -> Result<Vec<Instance>> {
        let mut out = Vec::new();
        loop {
            let page = self
                .rt
                .call(DESCRIBE_INSTANCES, || {
                    let request = self
                        .client
                        .describe_instances()
                        .set_instance_ids(ids.clone())
                        .set_filters(filters.clone())
                        .set_next_token(token.clone());
                    // MaxResults cannot be combined with instance IDs.
                    if ids.is_none() {
                        request.max_results(1000)
                    } else {
                        request
                    }
                    .send()
                })
                .await?;
            out.extend(
                page.reservations()
                    .iter()
                    .flat_map(|r| r.instances())
                    .filter_map(instance),
            );
            token = next(page.next_token());
            if token.is_none() {
                return Ok(out);
            }
        }
    }

    /// Runs one tagging call for the union of a batch's resources; should AWS refuse it for one bad resource
    /// (unknown or malformed ID), each request is retried alone so that the others still succeed.
    async fn tag_batch<F, Fut>(&self, requests: Vec<Vec<String>>, call: F) -> Vec<Result<()>>
    where
        F: Fn(Raw, Vec<String>) -> Fut,
        Fut: std::future::Future<Output = Result<()>>,
    {
        let union: BTreeSet<&String> = requests.iter().flatten().collect();
        let union: Vec<String> = union.into_iter().cloned().collect();
        let mut failure = None;
        for chunk in union.chunks(MAX_IDS_PER_CALL) {
            if let Err(err) = call(self.clone(), chunk.to_vec()).await {
                failure = Some(err);
                break;
            }
        }
        match failure {
            None => requests.iter().map(|_| Ok(())).collect(),
            Some(err)
                if requests.len() > 1 && matches!(err.kind(), ErrorKind::NotFound | ErrorKind::Invalid) =>
            {
                let mut out = Vec::with_capacity(requests.len());
                for resources in requests {
                    out.push(call(self.clone(), resources).await);
                }
                out
            }
            Some(err) => requests.iter().map(|_| Err(duplicate(&err))).collect(),
        }
    }

    async fn create_tags(&self, resources: &[String], tags: &Tags) -> Result<()> {
        self.rt
            .call(CREATE_TAGS, || {
                self.client
                    .create_tags()
                    .set_resources(Some(resources.to_vec()))
                    .set_tags(Some(sdk_tags(tags)))
                    .send()
            })
            .await?;
        Ok(())
    }

    async fn delete_tags(&self, resources: &[String], tags: &BTreeMap<String, Option<String>>) -> Result<()> {
        let tags: Vec<sdk::Tag> = tags
            .iter()
            .map(|(k, v)| sdk::Tag::builder().key(k).set_value(v.clone()).build())
            .collect();
        self.rt
            .call(DELETE_TAGS, || {
                self.client
                    .delete_tags()
                    .set_resources(Some(resources.to_vec()))
                    .set_tags(Some(tags.clone()))
                    .send()
            })
            .await?;
        Ok(())
    }
}

/// The IDs AWS names in `The instance IDs 'i-1, i-2' do not exist` (or `The instance ID 'i-1' does not exist`):
/// the comma-separated names of the first quoted span that look like instance IDs (`i-` and ASCII
/// alphanumerics). Anything else in the message, quoted or not, names no ID.
pub(crate) fn unknown_instance_ids(message: &str) -> BTreeSet<&str> {
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

// === conversions ===

fn next(token: Option<&str>) -> Option<String> {
    token.filter(|t| !t.is_empty()).map(str::to_owned)
}

fn non_empty(s: Option<&str>) -> Option<String> {
    s.filter(|s| !s.is_empty()).map(str::to_owned)
}

fn sdk_filters(filters: &[Filter]) -> Option<Vec<sdk::Filter>> {
    (!filters.is_empty()).then(|| {
        filters
            .iter()
            .map(|f| {
                sdk::Filter::builder()
                    .name(&f.name)
                    .set_values(Some(f.values.clone()))
                    .build()
            })
            .collect()
    })
}

pub(crate) fn sdk_tags(tags: &Tags) -> Vec<sdk::Tag> {
    tags.iter()
        .map(|(k, v)| sdk::Tag::builder().key(k).value(v).build())
        .collect()
}

fn tags(tags: &[sdk::Tag]) -> Tags {
    tags.iter()
        .filter_map(|t| Some((t.key()?.to_owned(), t.value().unwrap_or_default().to_owned())))
        .collect()
}

fn instance(i: &sdk::Instance) -> Option<Instance> {
    let id = InstanceId::new(i.instance_id()?);
    let state = InstanceState::from_aws(i.state().and_then(|s| s.name()).map_or("", |n| n.as_str()));
    let mut out = Instance::new(id, state);
    out.instance_type = i
        .instance_type()
        .map(|t| t.as_str().to_owned())
        .unwrap_or_default();
    out.availability_zone = non_empty(i.placement().and_then(|p| p.availability_zone()));
    out.vpc_id = non_empty(i.vpc_id()).map(VpcId::new);
    out.subnet_id = non_empty(i.subnet_id()).map(SubnetId::new);
    out.private_ip = non_empty(i.private_ip_address());
    out.public_ip = non_empty(i.public_ip_address());
    out.private_dns_name = non_empty(i.private_dns_name());
    out.public_dns_name = non_empty(i.public_dns_name());
    out.security_groups = i
        .security_groups()
        .iter()
        .filter_map(|g| g.group_id())
        .map(SecurityGroupId::new)
        .collect();
    out.source_dest_check = i.source_dest_check();
    out.tags = tags(i.tags());
    let mut interfaces: Vec<InstanceNetworkInterface> = i
        .network_interfaces()
        .iter()
        .filter_map(|n| {
            let mut eni = InstanceNetworkInterface::new(
                n.network_interface_id()?.into(),
                n.attachment().and_then(|a| a.device_index()),
            );
            eni.status = n.status().map(|s| s.as_str().to_owned()).unwrap_or_default();
            let mut ips: Vec<(bool, String)> = n
                .private_ip_addresses()
                .iter()
                .filter_map(|p| Some((p.primary().unwrap_or(false), p.private_ip_address()?.to_owned())))
                .collect();
            if ips.is_empty()
                && let Some(ip) = non_empty(n.private_ip_address())
            {
                ips.push((true, ip));
            }
            // Primary first; the sort is stable, so secondaries keep AWS's order.
            ips.sort_by_key(|(primary, _)| !primary);
            eni.private_ips = ips.into_iter().map(|(_, ip)| ip).collect();
            eni.ipv6_addresses = n
                .ipv6_addresses()
                .iter()
                .filter_map(|a| a.ipv6_address())
                .map(str::to_owned)
                .collect();
            eni.private_dns_name = non_empty(n.private_dns_name());
            eni.public_ip = non_empty(n.association().and_then(|a| a.public_ip()));
            eni.subnet_id = non_empty(n.subnet_id()).map(SubnetId::new);
            eni.vpc_id = non_empty(n.vpc_id()).map(VpcId::new);
            eni.security_groups = n
                .groups()
                .iter()
                .filter_map(|g| g.group_id())
                .map(SecurityGroupId::new)
                .collect();
            Some(eni)
        })
        .collect();
    // Device order; interfaces without an index last (stable, so AWS's order among those is kept).
    interfaces.sort_by_key(|n| (n.device_index.is_none(), n.device_index));
    out.network_interfaces = interfaces;
    Some(out)
}

fn network_interface(n: &sdk::NetworkInterface) -> Option<NetworkInterface> {
    let mut out = NetworkInterface::new(n.network_interface_id()?.into());
    out.status = n.status().map(|s| s.as_str().to_owned()).unwrap_or_default();
    out.availability_zone = non_empty(n.availability_zone());
    out.vpc_id = non_empty(n.vpc_id()).map(VpcId::new);
    out.subnet_id = non_empty(n.subnet_id()).map(SubnetId::new);
    let mut ips: Vec<(bool, String)> = n
        .private_ip_addresses()
        .iter()
        .filter_map(|p| Some((p.primary().unwrap_or(false), p.private_ip_address()?.to_owned())))
        .collect();
    if ips.is_empty()
        && let Some(ip) = non_empty(n.private_ip_address())
    {
        ips.push((true, ip));
    }
    ips.sort_by_key(|(primary, _)| !primary);
    out.private_ips = ips.into_iter().map(|(_, ip)| ip).collect();
    out.ipv6_addresses = n
        .ipv6_addresses()
        .iter()
        .filter_map(|a| a.ipv6_address())
        .map(str::to_owned)
        .collect();
    out.private_dns_name = non_empty(n.private_dns_name());
    out.attached_instance = n
        .attachment()
        .and_then(|a| non_empty(a.instance_id()))
        .map(InstanceId::new);
    out.attachment_status = n
        .attachment()
        .and_then(|a| a.status())
        .map(|s| s.as_str().to_owned());
    out.tags = tags(n.tag_set());
    Some(out)
}

fn security_group(g: &sdk::SecurityGroup) -> Option<SecurityGroup> {
    let mut out = SecurityGroup::new(
        SecurityGroupId::new(g.group_id()?),
        g.group_name().unwrap_or_default(),
        non_empty(g.vpc_id()).map(VpcId::new),
        tags(g.tags()),
    );
    out.description = g.description().unwrap_or_default().to_owned();
    out.ingress = g.ip_permissions().iter().map(permission).collect();
    Some(out)
}

fn permission(p: &sdk::IpPermission) -> IpPermission {
    IpPermission {
        protocol: p.ip_protocol().unwrap_or("-1").to_owned(),
        from_port: p.from_port(),
        to_port: p.to_port(),
        ip_ranges: p
            .ip_ranges()
            .iter()
            .filter_map(|r| {
                Some(IpRange {
                    cidr: r.cidr_ip()?.to_owned(),
                    description: non_empty(r.description()),
                })
            })
            .collect(),
        ipv6_ranges: p
            .ipv6_ranges()
            .iter()
            .filter_map(|r| {
                Some(IpRange {
                    cidr: r.cidr_ipv6()?.to_owned(),
                    description: non_empty(r.description()),
                })
            })
            .collect(),
        source_groups: p
            .user_id_group_pairs()
            .iter()
            .filter_map(|g| {
                Some(SourceGroup {
                    group_id: SecurityGroupId::new(g.group_id()?),
                    description: non_empty(g.description()),
                })
            })
            .collect(),
    }
}

fn sdk_permission(p: &IpPermission) -> sdk::IpPermission {
    let all = p.protocol == "-1";
    sdk::IpPermission::builder()
        .ip_protocol(&p.protocol)
        .set_from_port(if all { None } else { p.from_port })
        .set_to_port(if all { None } else { p.to_port })
        .set_ip_ranges(Some(
            p.ip_ranges
                .iter()
                .map(|r| {
                    sdk::IpRange::builder()
                        .cidr_ip(&r.cidr)
                        .set_description(r.description.clone())
                        .build()
                })
                .collect(),
        ))
        .set_ipv6_ranges(Some(
            p.ipv6_ranges
                .iter()
                .map(|r| {
                    sdk::Ipv6Range::builder()
                        .cidr_ipv6(&r.cidr)
                        .set_description(r.description.clone())
                        .build()
                })
                .collect(),
        ))
        .set_user_id_group_pairs(Some(
            p.source_groups
                .iter()
                .map(|g| {
                    sdk::UserIdGroupPair::builder()
                        .group_id(g.group_id.as_str())
                        .set_description(g.description.clone())
                        .build()
                })
                .collect(),
        ))
        .build()
}

fn subnet(s: &sdk::Subnet) -> Option<Subnet> {
    let mut out = Subnet::new(
        SubnetId::new(s.subnet_id()?),
        VpcId::new(s.vpc_id().unwrap_or_default()),
        s.availability_zone().unwrap_or_default(),
        tags(s.tags()),
    );
    out.availability_zone_id = non_empty(s.availability_zone_id());
    out.cidr_block = non_empty(s.cidr_block());
    out.ipv6_cidr_blocks = s
        .ipv6_cidr_block_association_set()
        .iter()
        .filter_map(|a| a.ipv6_cidr_block())
        .map(str::to_owned)
        .collect();
    Some(out)
}

/// `cidr` when it is an IPv4 CIDR: AWS takes IPv4 and IPv6 destinations in different fields.
fn ipv4_cidr(cidr: &str) -> Option<String> {
    (!cidr.contains(':')).then(|| cidr.to_owned())
}

/// `cidr` when it is an IPv6 CIDR.
fn ipv6_cidr(cidr: &str) -> Option<String> {
    cidr.contains(':').then(|| cidr.to_owned())
}

fn route_table(t: &sdk::RouteTable) -> Option<RouteTable> {
    let routes = t
        .routes()
        .iter()
        .map(|r| {
            let mut route = Route::to_gateway("", "");
            route.destination_cidr = non_empty(r.destination_cidr_block());
            route.destination_ipv6_cidr = non_empty(r.destination_ipv6_cidr_block());
            route.gateway_id = non_empty(r.gateway_id());
            route.instance_id = non_empty(r.instance_id()).map(InstanceId::new);
            route.network_interface_id = non_empty(r.network_interface_id()).map(Into::into);
            route.state = RouteState::from_aws(r.state().map_or("", |s| s.as_str()));
            route
        })
        .collect();
    let mut out = RouteTable::new(
        RouteTableId::new(t.route_table_id()?),
        VpcId::new(t.vpc_id().unwrap_or_default()),
        routes,
        tags(t.tags()),
    );
    out.associations = t
        .associations()
        .iter()
        .map(|a| {
            RouteTableAssociation::new(
                non_empty(a.subnet_id()).map(SubnetId::new),
                a.main().unwrap_or(false),
            )
        })
        .collect();
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_ids_are_read_from_aws_messages() {
        assert_eq!(
            unknown_instance_ids("The instance IDs 'i-1, i-2' do not exist"),
            BTreeSet::from(["i-1", "i-2"])
        );
        assert_eq!(
            unknown_instance_ids("The instance ID 'i-0abc' does not exist"),
            BTreeSet::from(["i-0abc"])
        );
        // Moto's wording for many IDs (the list joined with ", ").
        assert_eq!(
            unknown_instance_ids("The instance IDs 'i-0123456789abcdef0, i-0fedcba9876543210' do not exist"),
            BTreeSet::from(["i-0123456789abcdef0", "i-0fedcba9876543210"])
        );
    }

    #[test]
    fn messages_without_a_quoted_list_name_no_ids() {
        assert!(unknown_instance_ids("something else").is_empty());
        assert!(unknown_instance_ids("").is_empty());
        assert!(unknown_instance_ids("'").is_empty());
        assert!(unknown_instance_ids("''").is_empty());
        assert!(unknown_instance_ids("The instance ID 'i-1 does not exist").is_empty());
        assert!(unknown_instance_ids("'é'").is_empty());
    }

    #[test]
    fn only_the_first_quoted_span_names_ids() {
        // A later quoted span (a request ID, a parameter) must not merge with the list: the span between the
        // first and the last quote would end in `i-2' (request 'abc`, which is no ID, and leave i-2 unknown.
        assert_eq!(
            unknown_instance_ids("The instance IDs 'i-1, i-2' do not exist (request 'abc')"),
            BTreeSet::from(["i-1", "i-2"])
        );
        assert_eq!(
            unknown_instance_ids("The instance ID 'i-1' does not exist; see 'i-2'"),
            BTreeSet::from(["i-1"])
        );
    }

    #[test]
    fn list_items_that_are_not_instance_ids_are_dropped() {
        assert_eq!(
            unknown_instance_ids("The instance IDs 'i-1,,  i-2 , vol-1, i-, i-x y, i-é' do not exist"),
            BTreeSet::from(["i-1", "i-2"])
        );
    }

    #[test]
    fn interfaces_come_in_device_order_with_primary_addresses_first() {
        let eni = |id: &str, index: Option<i32>, ips: &[(&str, bool)]| {
            let mut b = sdk::InstanceNetworkInterface::builder()
                .network_interface_id(id)
                .status(sdk::NetworkInterfaceStatus::InUse);
            if let Some(index) = index {
                b = b.attachment(
                    sdk::InstanceNetworkInterfaceAttachment::builder()
                        .device_index(index)
                        .build(),
                );
            }
            for (ip, primary) in ips {
                b = b.private_ip_addresses(
                    sdk::InstancePrivateIpAddress::builder()
                        .private_ip_address(*ip)
                        .primary(*primary)
                        .build(),
                );
            }
            b.build()
        };
        let sdk_instance = sdk::Instance::builder()
            .instance_id("i-1")
            .state(
                sdk::InstanceState::builder()
                    .name(sdk::InstanceStateName::Running)
                    .build(),
            )
            .network_interfaces(eni("eni-none", None, &[("10.0.0.9", true)]))
            .network_interfaces(eni("eni-2", Some(2), &[("10.0.0.2", true)]))
            .network_interfaces(eni(
                "eni-0",
                Some(0),
                &[("10.0.0.5", false), ("10.0.0.1", true), ("10.0.0.6", false)],
            ))
            .private_dns_name("")
            .tags(sdk::Tag::builder().key("Name").value("n").build())
            .build();
        let out = instance(&sdk_instance).unwrap();
        assert_eq!(out.state, InstanceState::Running);
        assert_eq!(out.private_dns_name, None, "empty strings are absent");
        assert_eq!(out.tags, Tags::from([("Name".to_owned(), "n".to_owned())]));
        let ids: Vec<&str> = out.network_interfaces.iter().map(|n| n.id.as_str()).collect();
        assert_eq!(ids, ["eni-0", "eni-2", "eni-none"]);
        assert_eq!(
            out.network_interfaces[0].private_ips,
            ["10.0.0.1", "10.0.0.5", "10.0.0.6"]
        );
        assert!(out.network_interfaces[0].is_in_use());
    }

    #[test]
    fn all_traffic_rules_carry_no_ports() {
        let rule = sdk_permission(&IpPermission::all_from_group("sg-1".into()));
        assert_eq!(rule.ip_protocol(), Some("-1"));
        assert_eq!(rule.from_port(), None);
        assert_eq!(rule.user_id_group_pairs()[0].group_id(), Some("sg-1"));
        let back = permission(&rule);
        assert_eq!(back, IpPermission::all_from_group("sg-1".into()));
    }
}
