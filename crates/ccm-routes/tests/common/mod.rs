//! What the routes integration tests share: a VPC with instances and tagged route tables in moto, reading a route
//! table, tagging new resources.
#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

use aws_sdk_ec2::types::{InstanceType, ResourceType, Tag, TagSpecification};

/// A VPC `10.<octet>.0.0/16` with one subnet `10.<octet>.1.0/24` in us-east-1a: `(vpc, subnet)`.
pub async fn vpc_with_subnet(raw: &aws_sdk_ec2::Client, octet: u8) -> (String, String) {
    let vpc = raw
        .create_vpc()
        .cidr_block(format!("10.{octet}.0.0/16"))
        .send()
        .await
        .unwrap();
    let vpc = vpc.vpc().unwrap().vpc_id().unwrap().to_owned();
    let subnet = raw
        .create_subnet()
        .vpc_id(&vpc)
        .cidr_block(format!("10.{octet}.1.0/24"))
        .availability_zone("us-east-1a")
        .send()
        .await
        .unwrap();
    (vpc, subnet.subnet().unwrap().subnet_id().unwrap().to_owned())
}

/// Launches `count` instances into `subnet`, tagged `<key>=owned`: their `(ID, private DNS name)` pairs.
pub async fn launch(raw: &aws_sdk_ec2::Client, subnet: &str, key: &str, count: i32) -> Vec<(String, String)> {
    raw.run_instances()
        .image_id("ami-12c6146b")
        .instance_type(InstanceType::M5Large)
        .min_count(count)
        .max_count(count)
        .subnet_id(subnet)
        .tag_specifications(tag_spec(ResourceType::Instance, key, "owned"))
        .send()
        .await
        .unwrap()
        .instances()
        .iter()
        .map(|i| {
            (
                i.instance_id().unwrap().to_owned(),
                i.private_dns_name().unwrap().to_owned(),
            )
        })
        .collect()
}

/// A route table in `vpc`, tagged `<key>=<value>` when given: its ID.
pub async fn route_table(raw: &aws_sdk_ec2::Client, vpc: &str, tag: Option<(&str, &str)>) -> String {
    let mut req = raw.create_route_table().vpc_id(vpc);
    if let Some((k, v)) = tag {
        req = req.tag_specifications(tag_spec(ResourceType::RouteTable, k, v));
    }
    req.send()
        .await
        .unwrap()
        .route_table()
        .unwrap()
        .route_table_id()
        .unwrap()
        .to_owned()
}

/// The routes of a table as `(destination, instance)` pairs (IPv4 or IPv6 destination), sorted, the local route
/// left out.
pub async fn table_routes(raw: &aws_sdk_ec2::Client, table: &str) -> Vec<(String, String)> {
    let out = raw
        .describe_route_tables()
        .route_table_ids(table)
        .send()
        .await
        .unwrap();
    let mut routes: Vec<(String, String)> = out.route_tables()[0]
        .routes()
        .iter()
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
    routes
}

pub fn tag_spec(resource: ResourceType, key: &str, value: &str) -> TagSpecification {
    TagSpecification::builder()
        .resource_type(resource)
        .tags(Tag::builder().key(key).value(value).build())
        .build()
}
