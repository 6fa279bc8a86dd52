//! The moto world of the load balancer tests (the composition's moto tests and the `aws-calls` bench): a VPC with
//! an internet gateway, two public subnets tagged for the cluster, a node group and three instances; the
//! load-balancer provider over the real adapter, whole or crashing at a chosen call ([`crate::crash`]); Services
//! and Nodes; mutating-call counts from the adapter.
//!
//! Its helpers panic where moto fails: they set a test up, and a failure there is the test's failure.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;

use crate::{
    TestEnv,
    crash::{CrashAt, Faulty},
    fixtures::{NodeBuilder, ServiceBuilder},
    unique_name,
    world::WorldBuilder,
};
use ccm_aws_api::{Ec2, Elbv2, VpcId};
use ccm_aws_sdk::{Adapter, AwsEc2, AwsElb, AwsElbv2, CallMetrics};
use ccm_cloud_provider::NodeView;
use ccm_load_balancers::{AwsLoadBalancers, LoadBalancerConfig, annotations::Key};
use ccm_tagging::ClusterTags;
use k8s_openapi::api::core::v1::Service;

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
    let mut svc = ServiceBuilder::new("moto", "web").uid(uid);
    for (key, value) in annotations {
        svc = svc.annotation(key.name(), value);
    }
    for (port, node_port) in ports {
        svc = svc.port(*port, "TCP", Some(*node_port));
    }
    svc.build()
}

/// A Node of `instance` (provider ID in us-east-1a) with `labels`.
pub fn node(instance: &str, labels: &[(&str, &str)]) -> NodeView {
    NodeBuilder::new(instance)
        .provider_id(&format!("aws:///us-east-1a/{instance}"))
        .labels(labels)
        .view()
}

/// One test's AWS world.
pub struct World {
    /// The real adapter against moto (unlimited rate, one quick retry); its metrics count the calls.
    pub adapter: Adapter,
    /// An SDK client for what the ports do not offer (setting the world up, reading it back).
    pub raw: aws_sdk_ec2::Client,
    /// The load balancers' configuration for this world's cluster and VPC.
    pub config: LoadBalancerConfig,
    /// The VPC.
    pub vpc: String,
    /// The two subnets, in us-east-1a and us-east-1b.
    pub subnets: Vec<String>,
    /// The nodes' security group.
    pub node_group: String,
    /// Every security group made, the nodes' first.
    pub groups: Vec<String>,
    /// Every instance, sorted.
    pub instances: Vec<String>,
}

/// An ACM certificate from moto (JSON 1.1 `CertificateManager.RequestCertificate` over plain HTTP).
pub async fn acm_certificate(domain: &str) -> String {
    let endpoint = &TestEnv::get().aws_endpoint;
    let hostport = endpoint.trim_start_matches("http://").trim_end_matches('/');
    let body = format!("{{\"DomainName\":\"{domain}\"}}");
    let request = format!(
        "POST / HTTP/1.1\r\nHost: {hostport}\r\nContent-Type: application/x-amz-json-1.1\r\nX-Amz-Target: \
         CertificateManager.RequestCertificate\r\nAuthorization: AWS4-HMAC-SHA256 \
         Credential=test/20260101/us-east-1/acm/aws4_request, SignedHeaders=host, Signature=0\r\nContent-Length: \
         {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let mut stream = tokio::net::TcpStream::connect(hostport).await.unwrap();
    tokio::io::AsyncWriteExt::write_all(&mut stream, request.as_bytes())
        .await
        .unwrap();
    let mut response = String::new();
    tokio::io::AsyncReadExt::read_to_string(&mut stream, &mut response)
        .await
        .unwrap();
    let start = response
        .find("arn:aws:acm:")
        .unwrap_or_else(|| panic!("no certificate ARN in moto's answer: {response}"));
    let end = response[start..].find('"').unwrap();
    response[start..start + end].to_owned()
}

/// A fresh world in `10.<octet>.0.0/16` for a new cluster ID `<prefix>-...`: two subnets tagged for the cluster
/// and for internet-facing load balancers (with `internal_subnets`, internal ones too), an internet gateway, the
/// nodes' security group and three instances in it, all `owned` by the cluster.
pub async fn world(cidr_second_octet: u8, prefix: &str, internal_subnets: bool) -> World {
    world_with(cidr_second_octet, prefix, internal_subnets, |b, _| b).await
}

/// [`world`] with more of the builder's steps: `more` gets the builder (its group 0 is the nodes' group) and
/// the cluster tag key. [`World::groups`] lists every group made, [`World::instances`] every instance.
pub async fn world_with(
    cidr_second_octet: u8,
    prefix: &str,
    internal_subnets: bool,
    more: impl FnOnce(WorldBuilder, &str) -> WorldBuilder,
) -> World {
    let env = TestEnv::get();
    let sdk = env.aws_config().await;
    let adapter = crate::ec2::adapter(&sdk, Some(1));
    let raw = aws_sdk_ec2::Client::new(&sdk);
    let cluster = ClusterTags::new(unique_name(prefix), false).unwrap();
    let key = cluster.key();
    let mut subnet_tags = vec![(key.as_str(), "shared"), ("kubernetes.io/role/elb", "1")];
    if internal_subnets {
        subnet_tags.push(("kubernetes.io/role/internal-elb", "1"));
    }
    let builder = crate::world::World::builder(cidr_second_octet)
        .subnet("us-east-1a", &subnet_tags)
        .subnet("us-east-1b", &subnet_tags)
        .internet_gateway()
        .security_group(&[(key.as_str(), "owned")])
        .instances_in_group(3, 0, &[(key.as_str(), "owned")]);
    let built = more(builder, &key).build(&raw).await.unwrap();
    let mut instances = built.instance_ids();
    instances.sort();
    World {
        config: LoadBalancerConfig::new(cluster, VpcId::new(&built.vpc)),
        adapter,
        raw,
        vpc: built.vpc,
        subnets: built.subnets,
        node_group: built.groups[0].clone(),
        groups: built.groups.clone(),
        instances,
    }
}

// === impl World ===

/// The provider over the adapter.
pub type Lbs = AwsLoadBalancers<AwsEc2, AwsElb, AwsElbv2>;

/// The provider with its three ports behind one [`CrashAt`]: the `fail_at`-th mutating call, whichever the
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
        let crash = CrashAt::new(fail_at);
        AwsLoadBalancers::new(
            crash.guard(self.adapter.ec2().clone()),
            crash.guard(self.adapter.elb().clone()),
            crash.guard(self.adapter.elbv2().clone()),
            config,
        )
    }

    /// A Node for every instance.
    pub fn nodes(&self) -> Vec<NodeView> {
        self.instances.iter().map(|i| node(i, &[])).collect()
    }

    /// The security groups of the NLB `name`.
    pub async fn lb_groups(&self, name: &str) -> Vec<String> {
        let lb = self.adapter.elbv2().load_balancer(name).await.unwrap().unwrap();
        lb.security_groups.iter().map(ToString::to_string).collect()
    }

    /// A security group in the world's VPC that the cluster did not make (a "bring your own" group).
    pub async fn byo_group(&self) -> String {
        self.raw
            .create_security_group()
            .group_name(unique_name("byo"))
            .description("bring your own")
            .vpc_id(&self.vpc)
            .send()
            .await
            .unwrap()
            .group_id()
            .unwrap()
            .to_owned()
    }

    /// Gives the VPC an IPv6 block and each subnet a /64 of it.
    pub async fn ipv6_subnets(&self) {
        let vpc = self
            .raw
            .associate_vpc_cidr_block()
            .vpc_id(&self.vpc)
            .amazon_provided_ipv6_cidr_block(true)
            .send()
            .await
            .unwrap();
        let block = vpc
            .ipv6_cidr_block_association()
            .and_then(|a| a.ipv6_cidr_block())
            .unwrap()
            .to_owned();
        // A /56: the subnets' /64s differ in the last byte of the fourth group.
        let groups: Vec<&str> = block.split("::").next().unwrap().split(':').collect();
        let fourth = u16::from_str_radix(groups.get(3).copied().unwrap_or("0"), 16).unwrap();
        for (i, subnet) in (0u16..).zip(&self.subnets) {
            let cidr = format!(
                "{}:{}:{}:{:x}::/64",
                groups[0],
                groups[1],
                groups[2],
                (fourth & 0xff00) | i
            );
            self.raw
                .associate_subnet_cidr_block()
                .subnet_id(subnet)
                .ipv6_cidr_block(cidr)
                .send()
                .await
                .unwrap();
        }
    }

    /// The security group `id`, if it exists (read through the adapter). Picked by id: ministack 1.5.33
    /// ignores the `group-id` filter of DescribeSecurityGroups (AWS documents it) and answers every group.
    pub async fn group(&self, id: &str) -> Option<ccm_aws_api::ec2::SecurityGroup> {
        let groups = self
            .adapter
            .ec2()
            .security_groups(&[ccm_aws_api::Filter::new("group-id", [id])])
            .await;
        groups.unwrap().into_iter().find(|g| g.id.as_str() == id)
    }

    /// Whether the security group `id` exists.
    pub async fn group_exists(&self, id: &str) -> bool {
        self.group(id).await.is_some()
    }
}
