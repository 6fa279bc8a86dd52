//! Fixtures shared by the adapter's integration tests: an adapter on moto (directly or through a fault proxy)
//! and a VPC with a subnet and instances of its own, so tests can share one moto.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use aws_sdk_ec2::types::{InstanceType, ResourceType, Tag, TagSpecification};
use ccm_aws_sdk::{Adapter, AdapterOptions, RateLimits, RetryPolicy};
use ccm_testing::{TestEnv, unique_name};

/// Fast retries so that fault tests take milliseconds.
pub fn fast_retry() -> RetryPolicy {
    let mut retry = RetryPolicy::default();
    retry.max_attempts = 5;
    retry.base_delay = Duration::from_millis(5);
    retry.throttle_base_delay = Duration::from_millis(20);
    retry.max_delay = Duration::from_millis(200);
    retry
}

/// An adapter on moto (or on `endpoint`), unlimited so that call counts are the only thing measured.
pub async fn adapter(endpoint: Option<&str>) -> Adapter {
    let env = TestEnv::get();
    let mut options = AdapterOptions::default()
        .with_rate_limits(RateLimits::unlimited())
        .with_retry(fast_retry());
    if let Some(endpoint) = endpoint {
        options = options.with_endpoint_url(endpoint);
    }
    Adapter::new(&env.aws_config().await, options)
}

/// A raw EC2 client on moto, for arranging state.
pub async fn raw_ec2() -> aws_sdk_ec2::Client {
    aws_sdk_ec2::Client::new(&TestEnv::get().aws_config().await)
}

/// A VPC with one subnet in us-east-1a and `count` running instances tagged `Name=<name>`.
pub struct Fixture {
    pub name: String,
    pub vpc_id: String,
    pub subnet_id: String,
    pub instance_ids: Vec<String>,
}

pub async fn fixture(prefix: &str, count: i32) -> Fixture {
    let ec2 = raw_ec2().await;
    let name = unique_name(prefix);
    let vpc = ec2.create_vpc().cidr_block("10.77.0.0/16").send().await.unwrap();
    let vpc_id = vpc.vpc().unwrap().vpc_id().unwrap().to_owned();
    let subnet = ec2
        .create_subnet()
        .vpc_id(&vpc_id)
        .cidr_block("10.77.1.0/24")
        .availability_zone("us-east-1a")
        .send()
        .await
        .unwrap();
    let subnet_id = subnet.subnet().unwrap().subnet_id().unwrap().to_owned();
    let mut instance_ids = Vec::new();
    if count > 0 {
        let run = ec2
            .run_instances()
            .image_id("ami-12c6146b")
            .instance_type(InstanceType::M5Large)
            .min_count(count)
            .max_count(count)
            .subnet_id(&subnet_id)
            .tag_specifications(
                TagSpecification::builder()
                    .resource_type(ResourceType::Instance)
                    .tags(Tag::builder().key("Name").value(&name).build())
                    .build(),
            )
            .send()
            .await
            .unwrap();
        instance_ids = run
            .instances()
            .iter()
            .map(|i| i.instance_id().unwrap().to_owned())
            .collect();
    }
    Fixture {
        name,
        vpc_id,
        subnet_id,
        instance_ids,
    }
}
