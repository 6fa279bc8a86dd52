//! Load-balancer helpers for the end-to-end tests: a public ELB subnet, bystander groups, Services, and reading
//! Classic ELBs from moto.
#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

use std::collections::BTreeMap;

use aws_sdk_ec2::types::{Filter, Tag};
use ccm_testing::fixtures::ServiceBuilder;
use k8s_openapi::api::core::v1::Service;

use super::World;

/// Makes the world's subnet a public, cluster-tagged ELB subnet (internet gateway route, role tag).
pub async fn public_subnet(world: &World) {
    let key = world.cluster_key();
    let tags = [("kubernetes.io/role/elb", "1"), (key.as_str(), "owned")];
    world.network.make_public(&tags).await.unwrap();
}

pub async fn security_group(world: &World, name: &str, tag: Option<(String, &str)>) -> String {
    let mut req = world
        .raw
        .create_security_group()
        .group_name(name)
        .description("e2e bystander")
        .vpc_id(&world.network.vpc);
    if let Some((k, v)) = tag {
        req = req.tag_specifications(
            aws_sdk_ec2::types::TagSpecification::builder()
                .resource_type(aws_sdk_ec2::types::ResourceType::SecurityGroup)
                .tags(Tag::builder().key(k).value(v).build())
                .build(),
        );
    }
    req.send().await.unwrap().group_id().unwrap().to_owned()
}

pub async fn group_exists(world: &World, id: &str) -> bool {
    world
        .raw
        .describe_security_groups()
        .group_ids(id)
        .send()
        .await
        .is_ok_and(|r| !r.security_groups().is_empty())
}

/// The groups in the world's VPC whose name is `k8s-elb-<lb name>` (the managed group's name).
pub async fn managed_groups(world: &World, lb: &str) -> Vec<String> {
    let out = world
        .raw
        .describe_security_groups()
        .filters(
            Filter::builder()
                .name("vpc-id")
                .values(&world.network.vpc)
                .build(),
        )
        .send()
        .await
        .unwrap();
    out.security_groups()
        .iter()
        .filter(|g| g.group_name().is_some_and(|n| n.contains(lb)))
        .filter_map(|g| g.group_id().map(str::to_owned))
        .collect()
}

/// A LoadBalancer Service `name` with TCP `ports` and `annotations`, in the namespace of the API it is created by.
pub fn service(name: &str, ports: &[i32], annotations: &BTreeMap<&str, &str>) -> Service {
    let mut svc = ServiceBuilder::new("", name);
    for (key, value) in annotations {
        svc = svc.annotation(key, value);
    }
    for port in ports {
        svc = svc.port(*port, "TCP", None);
    }
    let mut svc = svc.build();
    svc.metadata.namespace = None;
    svc
}

pub struct Elb(pub aws_sdk_elasticloadbalancing::Client);

impl Elb {
    pub async fn describe(
        &self,
        name: &str,
    ) -> Option<aws_sdk_elasticloadbalancing::types::LoadBalancerDescription> {
        let out = self
            .0
            .describe_load_balancers()
            .load_balancer_names(name)
            .send()
            .await;
        out.ok()?.load_balancer_descriptions().first().cloned()
    }

    pub async fn instances(&self, name: &str) -> Vec<String> {
        let mut ids: Vec<String> = self
            .describe(name)
            .await
            .map(|d| {
                d.instances()
                    .iter()
                    .filter_map(|i| i.instance_id().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default();
        ids.sort();
        ids
    }

    pub async fn listener_ports(&self, name: &str) -> Vec<i32> {
        let mut ports: Vec<i32> = self
            .describe(name)
            .await
            .map(|d| {
                d.listener_descriptions()
                    .iter()
                    .filter_map(|l| l.listener().map(|l| l.load_balancer_port()))
                    .collect()
            })
            .unwrap_or_default();
        ports.sort_unstable();
        ports
    }
}

/// The upstream Classic ELB name of a Service: `a` and its UID without dashes, 32 characters.
pub fn lb_name(uid: &str) -> String {
    format!("a{}", uid.replace('-', "")).chars().take(32).collect()
}
