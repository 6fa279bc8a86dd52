//! What the routes integration tests share: reading a route table and tagging new resources in moto.
#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

use aws_sdk_ec2::types::{ResourceType, Tag, TagSpecification};

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
