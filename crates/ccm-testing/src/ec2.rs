//! EC2 fixtures in moto: a VPC with one subnet, and instances tagged for a cluster (the sandbox's and the
//! composition tests' network; [`crate::world`] builds richer ones). Every fixture is named and tagged per test,
//! so tests can share one moto.

use aws_sdk_ec2::{
    Client,
    types::{InstanceNetworkInterfaceSpecification, InstanceType, ResourceType, Tag, TagSpecification},
};

/// An EC2 client for moto (so that tools built on these fixtures need not name the SDK).
pub async fn client(env: &crate::TestEnv) -> Client {
    Client::new(&env.aws_config().await)
}

/// The AMI moto accepts.
pub const AMI: &str = "ami-12c6146b";

/// A launched instance, as RunInstances reported it.
#[derive(Debug, Clone)]
pub struct Launched {
    /// `i-...`
    pub id: String,
    /// The primary private IPv4 address.
    pub private_ip: String,
    /// `ip-a-b-c-d.ec2.internal` in us-east-1.
    pub private_dns: String,
    /// The availability zone.
    pub zone: String,
}

/// A VPC with one subnet in `us-east-1a`, for launching a test's instances.
#[derive(Debug, Clone)]
pub struct Network {
    /// The VPC.
    pub vpc_id: String,
    /// The subnet.
    pub subnet_id: String,
}

/// Creates a VPC `10.<octet>.0.0/16` with a subnet `10.<octet>.16.0/20` (4,091 addresses) in `us-east-1a`.
pub async fn network(ec2: &Client, octet: u8) -> Result<Network, aws_sdk_ec2::Error> {
    let vpc = ec2
        .create_vpc()
        .cidr_block(format!("10.{octet}.0.0/16"))
        .send()
        .await?;
    let vpc_id = vpc.vpc().and_then(|v| v.vpc_id()).unwrap_or_default().to_owned();
    let subnet = ec2
        .create_subnet()
        .vpc_id(&vpc_id)
        .cidr_block(format!("10.{octet}.16.0/20"))
        .availability_zone("us-east-1a")
        .send()
        .await?;
    let subnet_id = subnet
        .subnet()
        .and_then(|s| s.subnet_id())
        .unwrap_or_default()
        .to_owned();
    Ok(Network { vpc_id, subnet_id })
}

/// A second octet in 100..=249 derived from `name` (a [`unique_name`](crate::unique_name)), so that runs
/// sharing one moto rarely reuse a CIDR and with it the instances' private DNS names.
pub fn octet_for(name: &str) -> u8 {
    let hash = name
        .bytes()
        .fold(0u32, |h, b| h.wrapping_mul(31).wrapping_add(u32::from(b)));
    100 + u8::try_from(hash % 150).unwrap_or(0)
}

/// Launches `count` m5.large instances in `network`, tagged `tags` (key, value).
pub async fn launch(
    ec2: &Client,
    network: &Network,
    count: i32,
    tags: &[(&str, &str)],
) -> Result<Vec<Launched>, aws_sdk_ec2::Error> {
    let mut spec = TagSpecification::builder().resource_type(ResourceType::Instance);
    for (k, v) in tags {
        spec = spec.tags(Tag::builder().key(*k).value(*v).build());
    }
    let run = ec2
        .run_instances()
        .image_id(AMI)
        .instance_type(InstanceType::M5Large)
        .min_count(count)
        .max_count(count)
        .subnet_id(&network.subnet_id)
        .tag_specifications(spec.build())
        .send()
        .await?;
    Ok(run.instances().iter().map(Launched::from_sdk).collect())
}

/// Launches one m5.large instance in `network` as AWS launches a node: its primary network interface, in
/// `groups`, is deleted with the instance, so that its private address is free again once it is terminated (moto
/// keeps the address of an interface it made implicitly for ever, and refuses another instance at it); at `ip`
/// when given (another instance's address reused: same subnet, same private DNS name). Tagged `tags`.
pub async fn launch_node(
    ec2: &Client,
    network: &Network,
    groups: &[&str],
    ip: Option<&str>,
    tags: &[(&str, &str)],
) -> Result<Vec<Launched>, aws_sdk_ec2::Error> {
    let mut spec = TagSpecification::builder().resource_type(ResourceType::Instance);
    for (k, v) in tags {
        spec = spec.tags(Tag::builder().key(*k).value(*v).build());
    }
    let mut interface = InstanceNetworkInterfaceSpecification::builder()
        .device_index(0)
        .subnet_id(&network.subnet_id)
        .delete_on_termination(true)
        .set_private_ip_address(ip.map(str::to_owned));
    for group in groups {
        interface = interface.groups(*group);
    }
    let run = ec2
        .run_instances()
        .image_id(AMI)
        .instance_type(InstanceType::M5Large)
        .min_count(1)
        .max_count(1)
        .network_interfaces(interface.build())
        .tag_specifications(spec.build())
        .send()
        .await?;
    Ok(run.instances().iter().map(Launched::from_sdk).collect())
}

// === impl Launched ===

impl Launched {
    /// What RunInstances reported of `instance`.
    pub(crate) fn from_sdk(instance: &aws_sdk_ec2::types::Instance) -> Self {
        Self {
            id: instance.instance_id().unwrap_or_default().to_owned(),
            private_ip: instance.private_ip_address().unwrap_or_default().to_owned(),
            private_dns: instance.private_dns_name().unwrap_or_default().to_owned(),
            zone: instance
                .placement()
                .and_then(|p| p.availability_zone())
                .unwrap_or_default()
                .to_owned(),
        }
    }
}

/// The zone ID moto gives `zone` (e.g. `use1-az6`).
pub async fn zone_id(ec2: &Client, zone: &str) -> Result<Option<String>, aws_sdk_ec2::Error> {
    let zones = ec2.describe_availability_zones().send().await?;
    Ok(zones
        .availability_zones()
        .iter()
        .find(|z| z.zone_name() == Some(zone))
        .and_then(|z| z.zone_id())
        .map(str::to_owned))
}

/// A cloud config that sends every AWS service of the CCM to `aws_endpoint` and IMDS to `imds_endpoint`, with
/// `global` (lines of `key = value`) in its `[Global]` section.
pub fn cloud_config(region: &str, aws_endpoint: &str, imds_endpoint: &str, global: &str) -> String {
    let mut config = format!("[Global]\n{global}\n");
    let services = [
        "EC2",
        "Elastic Load Balancing",
        "Elastic Load Balancing v2",
        "STS",
    ];
    let overrides = services
        .iter()
        .map(|s| (*s, aws_endpoint))
        .chain([("ec2imds", imds_endpoint)]);
    for (service, url) in overrides {
        config.push_str(&format!(
            "[ServiceOverride \"{service}\"]\nService = {service}\nRegion = {region}\nURL = {url}\n\
             SigningRegion = {region}\n"
        ));
    }
    config
}
