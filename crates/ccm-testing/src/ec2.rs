//! EC2 helpers for moto: the client, the AMI, what RunInstances reported, octets and zone IDs, and the cloud
//! config that points the CCM at moto. The network itself (VPC, subnets, groups, instances, route tables) is
//! [`crate::world`]'s.

use aws_sdk_ec2::Client;

/// The EC2 client of [`client`], nameable by tools that do not depend on the SDK themselves.
pub type Ec2 = Client;

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

/// A second octet in 100..=249 derived from `name` (a [`unique_name`](crate::unique_name)), so that runs
/// sharing one moto rarely reuse a CIDR and with it the instances' private DNS names.
pub fn octet_for(name: &str) -> u8 {
    let hash = name
        .bytes()
        .fold(0u32, |h, b| h.wrapping_mul(31).wrapping_add(u32::from(b)));
    100 + u8::try_from(hash % 150).unwrap_or(0)
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

/// The real adapter (`ccm-aws-sdk`) as the moto tests use it: no rate limit (the emulator is local) and, with
/// `quick_attempts`, that many attempts with millisecond back-offs for the faults a test injects (without, the
/// adapter's default retry).
pub fn adapter(sdk: &aws_config::SdkConfig, quick_attempts: Option<u32>) -> ccm_aws_sdk::Adapter {
    let mut options =
        ccm_aws_sdk::AdapterOptions::default().with_rate_limits(ccm_aws_sdk::RateLimits::unlimited());
    if let Some(attempts) = quick_attempts {
        options = options.with_retry(ccm_aws_sdk::RetryPolicy::quick(attempts));
    }
    ccm_aws_sdk::Adapter::new(sdk, options)
}
