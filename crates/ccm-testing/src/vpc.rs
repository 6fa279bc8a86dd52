//! VPC fixtures for load balancers and routes in moto: a public subnet tagged for a cluster's ELBs, and a route
//! table tagged for its pod CIDR routes, with a reader of the routes the CCM wrote there.

use std::collections::BTreeMap;

use aws_sdk_ec2::{
    Client,
    types::{Filter, Tag},
};

use crate::ec2::Network;

/// The EC2 client of [`crate::ec2::client`], nameable by tools that do not depend on the SDK themselves.
pub type Ec2 = Client;

/// Makes `network`'s subnet public and a cluster ELB subnet: an internet gateway attached to the VPC, a default
/// route to it in the VPC's main route table, and the tags `kubernetes.io/role/elb=1` and `cluster_key=owned`
/// (what the CCM's subnet discovery looks for). Returns the gateway's ID.
pub async fn public_subnet(
    ec2: &Client,
    network: &Network,
    cluster_key: &str,
) -> Result<String, aws_sdk_ec2::Error> {
    let igw = ec2.create_internet_gateway().send().await?;
    let igw = igw
        .internet_gateway()
        .and_then(|g| g.internet_gateway_id())
        .unwrap_or_default()
        .to_owned();
    ec2.attach_internet_gateway()
        .internet_gateway_id(&igw)
        .vpc_id(&network.vpc_id)
        .send()
        .await?;
    let main = ec2
        .describe_route_tables()
        .filters(Filter::builder().name("vpc-id").values(&network.vpc_id).build())
        .filters(Filter::builder().name("association.main").values("true").build())
        .send()
        .await?;
    let main = main
        .route_tables()
        .first()
        .and_then(|t| t.route_table_id())
        .unwrap_or_default()
        .to_owned();
    ec2.create_route()
        .route_table_id(&main)
        .destination_cidr_block("0.0.0.0/0")
        .gateway_id(&igw)
        .send()
        .await?;
    ec2.create_tags()
        .resources(&network.subnet_id)
        .tags(Tag::builder().key("kubernetes.io/role/elb").value("1").build())
        .tags(Tag::builder().key(cluster_key).value("owned").build())
        .send()
        .await?;
    Ok(igw)
}

/// A route table in `network`'s VPC tagged `cluster_key=owned`: where the CCM's route controller writes the pod
/// CIDR routes of the cluster's Nodes. Returns its ID.
pub async fn cluster_route_table(
    ec2: &Client,
    network: &Network,
    cluster_key: &str,
) -> Result<String, aws_sdk_ec2::Error> {
    let table = ec2.create_route_table().vpc_id(&network.vpc_id).send().await?;
    let id = table
        .route_table()
        .and_then(|t| t.route_table_id())
        .unwrap_or_default()
        .to_owned();
    ec2.create_tags()
        .resources(&id)
        .tags(Tag::builder().key(cluster_key).value("owned").build())
        .send()
        .await?;
    Ok(id)
}

/// The routes of `table` that target an instance: destination CIDR → instance ID.
pub async fn instance_routes(
    ec2: &Client,
    table: &str,
) -> Result<BTreeMap<String, String>, aws_sdk_ec2::Error> {
    let out = ec2.describe_route_tables().route_table_ids(table).send().await?;
    Ok(out
        .route_tables()
        .iter()
        .flat_map(|t| t.routes())
        .filter_map(|r| {
            Some((
                r.destination_cidr_block()?.to_owned(),
                r.instance_id()?.to_owned(),
            ))
        })
        .collect())
}
