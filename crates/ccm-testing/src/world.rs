//! A test's AWS world in moto, built in one statement: a VPC `10.<octet>.0.0/16`, subnets in chosen zones, an
//! internet gateway routed from them, security groups, and instances, each tagged as the test asks. Every moto
//! test of instances, routes, tagging and load balancers starts from one.
//!
//! ```no_run
//! # async fn doc(ec2: &aws_sdk_ec2::Client) -> Result<(), aws_sdk_ec2::Error> {
//! use ccm_testing::world::World;
//!
//! let key = "kubernetes.io/cluster/demo";
//! let world = World::builder(91)
//!     .subnet("us-east-1a", &[(key, "shared"), ("kubernetes.io/role/elb", "1")])
//!     .subnet("us-east-1b", &[(key, "shared"), ("kubernetes.io/role/elb", "1")])
//!     .internet_gateway()
//!     .security_group(&[(key, "owned")])
//!     .instances_in_group(3, 0, &[(key, "owned")])
//!     .build(ec2)
//!     .await?;
//! let table = world.route_table(&[(key, "owned")]).await?;
//! assert!(world.table_routes(&table).await?.is_empty());
//! # Ok(()) }
//! ```
//!
//! Worlds never share a VPC, so tests running at the same time against one moto do not see each other's
//! resources; the octet chooses the CIDR (and with it the instances' private DNS names). This is the one network
//! fixture of the workspace: the moto tests, the end-to-end tests and the harnesses all build theirs here (the
//! load-balancer tests add the adapter and the provider on top, in [`crate::lb_world`]).

use aws_sdk_ec2::{
    Client,
    types::{InstanceNetworkInterfaceSpecification, InstanceType, ResourceType, Tag, TagSpecification},
};

use std::collections::BTreeMap;

use crate::ec2::{AMI, Launched};

/// Tags as `(key, value)` pairs.
type Tags = Vec<(String, String)>;

fn owned(tags: &[(&str, &str)]) -> Tags {
    tags.iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

/// The tag specification of `tags` for `resource`, or none for no tags (moto rejects an empty one).
fn tag_spec(resource: ResourceType, tags: &[(String, String)]) -> Option<TagSpecification> {
    if tags.is_empty() {
        return None;
    }
    let mut spec = TagSpecification::builder().resource_type(resource);
    for (k, v) in tags {
        spec = spec.tags(Tag::builder().key(k).value(v).build());
    }
    Some(spec.build())
}

/// One RunInstances call of a [`WorldBuilder`].
#[derive(Debug, Clone)]
struct Batch {
    count: i32,
    group: Option<usize>,
    tags: Tags,
}

/// What [`World::builder`] will create; [`WorldBuilder::build`] creates it.
#[derive(Debug, Clone)]
#[must_use]
pub struct WorldBuilder {
    octet: u8,
    prefix: u8,
    subnets: Vec<(String, Tags)>,
    internet_gateway: bool,
    groups: Vec<Tags>,
    batches: Vec<Batch>,
}

/// A test's VPC and what was created in it, in the order the builder asked for.
#[derive(Debug, Clone)]
pub struct World {
    /// The raw EC2 client the world was built with (for reading back what the code under test did).
    pub ec2: Client,
    /// The VPC, `10.<octet>.0.0/16`.
    pub vpc: String,
    /// The second octet of the VPC's CIDR.
    pub octet: u8,
    /// Subnet IDs: the `n`-th asked for is the `n`-th block of the builder's size, `10.<octet>.<16n>.0/20` by
    /// default (4,091 addresses each; see [`WorldBuilder::subnet_size`]).
    pub subnets: Vec<String>,
    /// The subnets' CIDRs, in the same order.
    pub subnet_cidrs: Vec<String>,
    /// The internet gateway, when asked for.
    pub internet_gateway: Option<String>,
    /// Security group IDs, in the order asked for.
    pub groups: Vec<String>,
    /// Every instance launched by the builder, batch after batch, each batch in RunInstances' order.
    pub instances: Vec<Launched>,
}

/// The routes of `table` as `(destination, instance)` pairs (IPv4 or IPv6 destination; the instance is empty
/// for a route to a gateway), sorted, the local route left out.
pub async fn table_routes(ec2: &Client, table: &str) -> Result<Vec<(String, String)>, aws_sdk_ec2::Error> {
    let out = ec2.describe_route_tables().route_table_ids(table).send().await?;
    let mut routes: Vec<(String, String)> = out
        .route_tables()
        .iter()
        .flat_map(|t| t.routes())
        .filter(|r| r.gateway_id() != Some("local"))
        .map(|r| {
            (
                r.destination_cidr_block()
                    .or(r.destination_ipv6_cidr_block())
                    .unwrap_or_default()
                    .to_owned(),
                r.instance_id().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    routes.sort();
    Ok(routes)
}

/// The routes of `table` that target an instance: destination CIDR -> instance ID.
pub async fn instance_routes(
    ec2: &Client,
    table: &str,
) -> Result<BTreeMap<String, String>, aws_sdk_ec2::Error> {
    let routes = table_routes(ec2, table).await?;
    Ok(routes
        .into_iter()
        .filter(|(_, instance)| !instance.is_empty())
        .collect())
}

// === impl WorldBuilder ===

impl WorldBuilder {
    /// A subnet in `zone` tagged `tags`; the `n`-th subnet gets the `n`-th block of the VPC of the subnets' size,
    /// `10.<octet>.<16n>.0/20` by default.
    pub fn subnet(mut self, zone: &str, tags: &[(&str, &str)]) -> Self {
        self.subnets.push((zone.to_owned(), owned(tags)));
        self
    }

    /// Subnets of prefix length `prefix` (17 to 24; 20 by default): a /17 holds the scale harness's 5,000
    /// instances and more, and then the VPC has room for two subnets.
    ///
    /// # Panics
    /// When `prefix` is outside 17..=24 (a mistake in the test).
    #[allow(clippy::panic)]
    pub fn subnet_size(mut self, prefix: u8) -> Self {
        if !(17..=24).contains(&prefix) {
            panic!("subnet prefix /{prefix}: accepted are /17 to /24");
        }
        self.prefix = prefix;
        self
    }

    /// An internet gateway attached to the VPC, and a route table with a default route to it associated with
    /// every subnet: the subnets are public, as subnet discovery for internet-facing load balancers requires.
    pub fn internet_gateway(mut self) -> Self {
        self.internet_gateway = true;
        self
    }

    /// A security group tagged `tags` (uniquely named); the `n`-th is `World::groups[n]`.
    pub fn security_group(mut self, tags: &[(&str, &str)]) -> Self {
        self.groups.push(owned(tags));
        self
    }

    /// `count` m5.large instances in the first subnet, in the VPC's default security group, tagged `tags`.
    pub fn instances(mut self, count: i32, tags: &[(&str, &str)]) -> Self {
        self.batches.push(Batch {
            count,
            group: None,
            tags: owned(tags),
        });
        self
    }

    /// `count` m5.large instances in the first subnet and in security group number `group` (see
    /// [`WorldBuilder::security_group`]), tagged `tags`.
    pub fn instances_in_group(mut self, count: i32, group: usize, tags: &[(&str, &str)]) -> Self {
        self.batches.push(Batch {
            count,
            group: Some(group),
            tags: owned(tags),
        });
        self
    }

    /// Creates the world. Instances need a subnet: when none was asked for, one untagged subnet in
    /// `us-east-1a` is created.
    ///
    /// # Panics
    /// When an instance batch names a security group that was not asked for (a mistake in the test).
    #[allow(clippy::panic)]
    pub async fn build(mut self, ec2: &Client) -> Result<World, aws_sdk_ec2::Error> {
        if self.subnets.is_empty() && !self.batches.is_empty() {
            self.subnets.push(("us-east-1a".to_owned(), Tags::new()));
        }
        let octet = self.octet;
        let vpc = ec2
            .create_vpc()
            .cidr_block(format!("10.{octet}.0.0/16"))
            .send()
            .await?;
        let vpc = vpc.vpc().and_then(|v| v.vpc_id()).unwrap_or_default().to_owned();
        let mut world = World {
            ec2: ec2.clone(),
            vpc,
            octet,
            subnets: Vec::new(),
            subnet_cidrs: Vec::new(),
            internet_gateway: None,
            groups: Vec::new(),
            instances: Vec::new(),
        };
        for (zone, tags) in &self.subnets {
            world.add_subnet(zone, self.prefix, tags).await?;
        }
        if self.internet_gateway {
            world.add_internet_gateway().await?;
        }
        for tags in &self.groups {
            let group = world.create_security_group(tags).await?;
            world.groups.push(group);
        }
        for batch in &self.batches {
            let group = match batch.group {
                None => None,
                Some(n) => match world.groups.get(n) {
                    Some(g) => Some(g.clone()),
                    None => panic!(
                        "instances in security group {n}, but the world has {}",
                        world.groups.len()
                    ),
                },
            };
            let launched = world.run(batch.count, group.as_deref(), &batch.tags).await?;
            world.instances.extend(launched);
        }
        Ok(world)
    }
}

// === impl World ===

impl World {
    /// A builder of a world in `10.<octet>.0.0/16`. [`crate::ec2::octet_for`] derives an octet from a unique
    /// name.
    pub fn builder(octet: u8) -> WorldBuilder {
        WorldBuilder {
            octet,
            prefix: 20,
            subnets: Vec::new(),
            internet_gateway: false,
            groups: Vec::new(),
            batches: Vec::new(),
        }
    }

    /// The first subnet, where instances are launched.
    ///
    /// # Panics
    /// When the world has no subnet (a builder without subnets and without instances: a mistake in the test).
    #[allow(clippy::expect_used)]
    pub fn subnet(&self) -> &str {
        self.subnets.first().expect("the world has no subnet")
    }

    /// Makes every subnet public after the fact, as [`WorldBuilder::internet_gateway`] does at build time, and tags
    /// them `tags` (for example `kubernetes.io/role/elb=1` and the cluster tag): what an end-to-end test does once
    /// it knows its cluster. Returns the internet gateway's ID.
    pub async fn make_public(&self, tags: &[(&str, &str)]) -> Result<String, aws_sdk_ec2::Error> {
        let igw = self.open_to_internet().await?;
        if !tags.is_empty() {
            let mut req = self.ec2.create_tags().set_resources(Some(self.subnets.clone()));
            for (k, v) in tags {
                req = req.tags(Tag::builder().key(*k).value(*v).build());
            }
            req.send().await?;
        }
        Ok(igw)
    }

    /// Launches one m5.large instance in the first subnet as AWS launches a node: its primary network interface,
    /// in `groups`, is deleted with the instance, so that its private address is free again once it is terminated
    /// (moto keeps the address of an interface it made implicitly for ever, and refuses another instance at it);
    /// at `ip` when given (another instance's address reused: same subnet, same private DNS name). Tagged `tags`.
    pub async fn launch_node(
        &self,
        groups: &[&str],
        ip: Option<&str>,
        tags: &[(&str, &str)],
    ) -> Result<Vec<Launched>, aws_sdk_ec2::Error> {
        let mut interface = InstanceNetworkInterfaceSpecification::builder()
            .device_index(0)
            .subnet_id(self.subnet())
            .delete_on_termination(true)
            .set_private_ip_address(ip.map(str::to_owned));
        for group in groups {
            interface = interface.groups(*group);
        }
        let mut req = self
            .ec2
            .run_instances()
            .image_id(AMI)
            .instance_type(InstanceType::M5Large)
            .min_count(1)
            .max_count(1)
            .network_interfaces(interface.build());
        if let Some(spec) = tag_spec(ResourceType::Instance, &owned(tags)) {
            req = req.tag_specifications(spec);
        }
        let run = req.send().await?;
        Ok(run.instances().iter().map(Launched::from_sdk).collect())
    }

    /// The routes of `table` that target an instance: destination CIDR -> instance ID.
    pub async fn instance_routes(&self, table: &str) -> Result<BTreeMap<String, String>, aws_sdk_ec2::Error> {
        instance_routes(&self.ec2, table).await
    }

    /// The IDs of [`World::instances`].
    pub fn instance_ids(&self) -> Vec<String> {
        self.instances.iter().map(|i| i.id.clone()).collect()
    }

    /// Launches `count` more m5.large instances in the first subnet, tagged `tags`.
    pub async fn launch(
        &self,
        count: i32,
        tags: &[(&str, &str)],
    ) -> Result<Vec<Launched>, aws_sdk_ec2::Error> {
        self.run(count, None, &owned(tags)).await
    }

    /// Launches `count` instances tagged `tags` (plus the owned cluster tag) into the security group `group`.
    pub async fn launch_in(
        &self,
        count: i32,
        group: &str,
        tags: &[(&str, &str)],
    ) -> Result<Vec<Launched>, aws_sdk_ec2::Error> {
        self.run(count, Some(group), &owned(tags)).await
    }

    /// Creates another security group in the VPC, tagged `tags`: its ID.
    pub async fn security_group(&self, tags: &[(&str, &str)]) -> Result<String, aws_sdk_ec2::Error> {
        self.create_security_group(&owned(tags)).await
    }

    /// A route table in the VPC tagged `tags` (none: untagged): its ID.
    pub async fn route_table(&self, tags: &[(&str, &str)]) -> Result<String, aws_sdk_ec2::Error> {
        let mut req = self.ec2.create_route_table().vpc_id(&self.vpc);
        if let Some(spec) = tag_spec(ResourceType::RouteTable, &owned(tags)) {
            req = req.tag_specifications(spec);
        }
        let table = req.send().await?;
        Ok(table
            .route_table()
            .and_then(|t| t.route_table_id())
            .unwrap_or_default()
            .to_owned())
    }

    /// The routes of `table` as `(destination, instance)` pairs (IPv4 or IPv6 destination; the instance is empty
    /// for a route to a gateway), sorted, the local route left out.
    pub async fn table_routes(&self, table: &str) -> Result<Vec<(String, String)>, aws_sdk_ec2::Error> {
        table_routes(&self.ec2, table).await
    }

    async fn add_subnet(
        &mut self,
        zone: &str,
        prefix: u8,
        tags: &[(String, String)],
    ) -> Result<(), aws_sdk_ec2::Error> {
        // A /16 holds 2^(prefix-16) blocks; the third octet of block n is n * 2^(24-prefix).
        let third = self.subnets.len() << (24 - prefix);
        let cidr = format!("10.{}.{third}.0/{prefix}", self.octet);
        let mut req = self
            .ec2
            .create_subnet()
            .vpc_id(&self.vpc)
            .cidr_block(&cidr)
            .availability_zone(zone);
        if let Some(spec) = tag_spec(ResourceType::Subnet, tags) {
            req = req.tag_specifications(spec);
        }
        let subnet = req.send().await?;
        let id = subnet
            .subnet()
            .and_then(|s| s.subnet_id())
            .unwrap_or_default()
            .to_owned();
        self.subnets.push(id);
        self.subnet_cidrs.push(cidr);
        Ok(())
    }

    async fn add_internet_gateway(&mut self) -> Result<(), aws_sdk_ec2::Error> {
        self.internet_gateway = Some(self.open_to_internet().await?);
        Ok(())
    }

    /// An internet gateway attached to the VPC, and a route table with a default route to it associated with
    /// every subnet. Returns the gateway's ID.
    async fn open_to_internet(&self) -> Result<String, aws_sdk_ec2::Error> {
        let igw = self.ec2.create_internet_gateway().send().await?;
        let igw = igw
            .internet_gateway()
            .and_then(|g| g.internet_gateway_id())
            .unwrap_or_default()
            .to_owned();
        self.ec2
            .attach_internet_gateway()
            .internet_gateway_id(&igw)
            .vpc_id(&self.vpc)
            .send()
            .await?;
        let table = self.route_table(&[]).await?;
        self.ec2
            .create_route()
            .route_table_id(&table)
            .destination_cidr_block("0.0.0.0/0")
            .gateway_id(&igw)
            .send()
            .await?;
        for subnet in &self.subnets {
            self.ec2
                .associate_route_table()
                .route_table_id(&table)
                .subnet_id(subnet)
                .send()
                .await?;
        }
        Ok(igw)
    }

    async fn create_security_group(&self, tags: &[(String, String)]) -> Result<String, aws_sdk_ec2::Error> {
        let mut req = self
            .ec2
            .create_security_group()
            .group_name(crate::unique_name("world"))
            .description("test group")
            .vpc_id(&self.vpc);
        if let Some(spec) = tag_spec(ResourceType::SecurityGroup, tags) {
            req = req.tag_specifications(spec);
        }
        Ok(req.send().await?.group_id().unwrap_or_default().to_owned())
    }

    async fn run(
        &self,
        count: i32,
        group: Option<&str>,
        tags: &[(String, String)],
    ) -> Result<Vec<Launched>, aws_sdk_ec2::Error> {
        let mut req = self
            .ec2
            .run_instances()
            .image_id(AMI)
            .instance_type(InstanceType::M5Large)
            .min_count(count)
            .max_count(count)
            .set_subnet_id(self.subnets.first().cloned());
        if let Some(group) = group {
            req = req.security_group_ids(group);
        }
        if let Some(spec) = tag_spec(ResourceType::Instance, tags) {
            req = req.tag_specifications(spec);
        }
        let run = req.send().await?;
        Ok(run.instances().iter().map(Launched::from_sdk).collect())
    }
}
