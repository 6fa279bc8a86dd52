//! The moto world of the load balancer tests: a VPC with an internet gateway, two public subnets tagged for the
//! cluster, a node group and three instances; Services and Nodes; mutating-call counts from the adapter.

use std::{
    collections::BTreeMap,
    sync::{Arc, atomic::AtomicUsize},
};

use super::Faulty;
use aws_sdk_ec2::types::{InstanceType, ResourceType, Tag, TagSpecification};
use ccm_aws_api::{Ec2, VpcId};
use ccm_aws_sdk::{Adapter, AdapterOptions, AwsEc2, AwsElb, AwsElbv2, CallMetrics, RateLimits, RetryPolicy};
use ccm_load_balancers::{AwsLoadBalancers, LoadBalancerConfig, annotations::Key};
use ccm_tagging::ClusterTags;
use ccm_testing::{TestEnv, unique_name};
use k8s_openapi::{
    api::core::v1::{Node, NodeSpec, Service, ServicePort, ServiceSpec},
    apimachinery::pkg::apis::meta::v1::ObjectMeta,
};

/// Mutating calls so far (every operation that is not a `Describe*`), by operation.
pub fn mutation_counts(metrics: &CallMetrics) -> BTreeMap<&'static str, u64> {
    let mut out = BTreeMap::new();
    for (k, s) in metrics.snapshot() {
        if !k.operation.starts_with("Describe") {
            *out.entry(k.operation).or_default() += s.attempts;
        }
    }
    out
}

/// What changed between two [`mutation_counts`].
pub fn diff(
    after: &BTreeMap<&'static str, u64>,
    before: &BTreeMap<&'static str, u64>,
) -> BTreeMap<&'static str, u64> {
    after
        .iter()
        .map(|(k, v)| (*k, v - before.get(k).copied().unwrap_or(0)))
        .filter(|(_, v)| *v > 0)
        .collect()
}

/// A random UUID from the kernel: load balancer names must be unique across runs against one moto.
pub fn uid() -> String {
    std::fs::read_to_string("/proc/sys/kernel/random/uuid")
        .unwrap()
        .trim()
        .to_owned()
}

/// Service `moto/web` of type LoadBalancer with `uid`, TCP (port, node port) pairs and table annotations.
pub fn service(uid: &str, ports: &[(i32, i32)], annotations: &[(Key, &str)]) -> Service {
    Service {
        metadata: ObjectMeta {
            name: Some("web".into()),
            namespace: Some("moto".into()),
            uid: Some(uid.to_owned()),
            annotations: Some(
                annotations
                    .iter()
                    .map(|(k, v)| (k.name().to_owned(), (*v).to_owned()))
                    .collect(),
            ),
            ..ObjectMeta::default()
        },
        spec: Some(ServiceSpec {
            type_: Some("LoadBalancer".into()),
            ports: Some(
                ports
                    .iter()
                    .map(|(port, node_port)| ServicePort {
                        port: *port,
                        node_port: Some(*node_port),
                        protocol: Some("TCP".into()),
                        ..ServicePort::default()
                    })
                    .collect(),
            ),
            ..ServiceSpec::default()
        }),
        status: None,
    }
}

/// A Node of `instance` (provider ID in us-east-1a) with `labels`.
pub fn node(instance: &str, labels: &[(&str, &str)]) -> Node {
    Node {
        metadata: ObjectMeta {
            name: Some(instance.to_owned()),
            labels: Some(
                labels
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                    .collect(),
            ),
            ..ObjectMeta::default()
        },
        spec: Some(NodeSpec {
            provider_id: Some(format!("aws:///us-east-1a/{instance}")),
            ..NodeSpec::default()
        }),
        status: None,
    }
}

/// One test's AWS world.
pub struct World {
    pub adapter: Adapter,
    pub raw: aws_sdk_ec2::Client,
    pub config: LoadBalancerConfig,
    pub vpc: String,
    pub subnets: Vec<String>,
    pub node_group: String,
    pub instances: Vec<String>,
}

/// A fresh world in `10.<octet>.0.0/16` for a new cluster ID `<prefix>-...`; with `internal_subnets` the subnets
/// are tagged for internal load balancers too.
pub async fn world(cidr_second_octet: u8, prefix: &str, internal_subnets: bool) -> World {
    let env = TestEnv::get();
    let sdk = env.aws_config().await;
    let adapter = Adapter::new(
        &sdk,
        AdapterOptions::default()
            .with_rate_limits(RateLimits::unlimited())
            .with_retry(RetryPolicy::quick(1)),
    );
    let raw = aws_sdk_ec2::Client::new(&sdk);
    let cluster_id = unique_name(prefix);
    let cluster = ClusterTags::new(&cluster_id, false).unwrap();
    let tag = |k: &str, v: &str| Tag::builder().key(k).value(v).build();

    let vpc = raw
        .create_vpc()
        .cidr_block(format!("10.{cidr_second_octet}.0.0/16"))
        .send()
        .await
        .unwrap();
    let vpc = vpc.vpc().unwrap().vpc_id().unwrap().to_owned();
    let igw = raw.create_internet_gateway().send().await.unwrap();
    let igw = igw
        .internet_gateway()
        .unwrap()
        .internet_gateway_id()
        .unwrap()
        .to_owned();
    raw.attach_internet_gateway()
        .internet_gateway_id(&igw)
        .vpc_id(&vpc)
        .send()
        .await
        .unwrap();
    let table = raw.create_route_table().vpc_id(&vpc).send().await.unwrap();
    let table = table.route_table().unwrap().route_table_id().unwrap().to_owned();
    raw.create_route()
        .route_table_id(&table)
        .destination_cidr_block("0.0.0.0/0")
        .gateway_id(&igw)
        .send()
        .await
        .unwrap();
    let mut subnet_tags = TagSpecification::builder()
        .tags(tag(&cluster.key(), "shared"))
        .tags(tag("kubernetes.io/role/elb", "1"));
    if internal_subnets {
        subnet_tags = subnet_tags.tags(tag("kubernetes.io/role/internal-elb", "1"));
    }
    let mut subnets = Vec::new();
    for (i, zone) in ["us-east-1a", "us-east-1b"].iter().enumerate() {
        let s = raw
            .create_subnet()
            .vpc_id(&vpc)
            .cidr_block(format!("10.{cidr_second_octet}.{}.0/24", i + 1))
            .availability_zone(*zone)
            .tag_specifications(subnet_tags.clone().resource_type(ResourceType::Subnet).build())
            .send()
            .await
            .unwrap();
        let id = s.subnet().unwrap().subnet_id().unwrap().to_owned();
        raw.associate_route_table()
            .route_table_id(&table)
            .subnet_id(&id)
            .send()
            .await
            .unwrap();
        subnets.push(id);
    }
    let node_group = raw
        .create_security_group()
        .group_name(unique_name("nodes"))
        .description("nodes")
        .vpc_id(&vpc)
        .tag_specifications(
            TagSpecification::builder()
                .resource_type(ResourceType::SecurityGroup)
                .tags(tag(&cluster.key(), "owned"))
                .build(),
        )
        .send()
        .await
        .unwrap()
        .group_id()
        .unwrap()
        .to_owned();
    let run = raw
        .run_instances()
        .image_id("ami-12c6146b")
        .instance_type(InstanceType::M5Large)
        .min_count(3)
        .max_count(3)
        .subnet_id(&subnets[0])
        .security_group_ids(&node_group)
        .tag_specifications(
            TagSpecification::builder()
                .resource_type(ResourceType::Instance)
                .tags(tag(&cluster.key(), "owned"))
                .build(),
        )
        .send()
        .await
        .unwrap();
    let mut instances: Vec<String> = run
        .instances()
        .iter()
        .map(|i| i.instance_id().unwrap().to_owned())
        .collect();
    instances.sort();
    World {
        config: LoadBalancerConfig::new(cluster, VpcId::new(&vpc)),
        adapter,
        raw,
        vpc,
        subnets,
        node_group,
        instances,
    }
}

// === impl World ===

/// The provider over the adapter.
pub type Lbs = AwsLoadBalancers<AwsEc2, AwsElb, AwsElbv2>;

/// The provider with its three ports sharing one [`Faulty`] count: the `fail_at`-th mutating call, whichever the
/// service, is refused as if the process died just before it.
pub type FaultyLbs = AwsLoadBalancers<Faulty<AwsEc2>, Faulty<AwsElb>, Faulty<AwsElbv2>>;

impl World {
    /// The provider with `config`.
    pub fn lbs(&self, config: LoadBalancerConfig) -> Lbs {
        AwsLoadBalancers::new(
            self.adapter.ec2().clone(),
            self.adapter.elb().clone(),
            self.adapter.elbv2().clone(),
            config,
        )
    }

    /// The provider with `config` that refuses the `fail_at`-th mutating call.
    pub fn faulty_lbs(&self, config: LoadBalancerConfig, fail_at: usize) -> FaultyLbs {
        let count = Arc::new(AtomicUsize::new(0));
        AwsLoadBalancers::new(
            Faulty {
                inner: self.adapter.ec2().clone(),
                count: count.clone(),
                fail_at,
            },
            Faulty {
                inner: self.adapter.elb().clone(),
                count: count.clone(),
                fail_at,
            },
            Faulty {
                inner: self.adapter.elbv2().clone(),
                count,
                fail_at,
            },
            config,
        )
    }

    /// A Node for every instance.
    pub fn nodes(&self) -> Vec<Node> {
        self.instances.iter().map(|i| node(i, &[])).collect()
    }

    /// Whether the security group `id` exists.
    pub async fn group_exists(&self, id: &str) -> bool {
        !self
            .adapter
            .ec2()
            .security_groups(&[ccm_aws_api::Filter::new("group-id", [id])])
            .await
            .unwrap()
            .is_empty()
    }
}
