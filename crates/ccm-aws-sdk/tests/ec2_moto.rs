//! Every EC2 port method against moto: the happy path and the not-found mapping.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::too_many_lines)]

mod common;

use std::collections::BTreeMap;

use ccm_aws_api::{
    Ec2, ErrorKind, Filter, InstanceId, RouteTableId, SecurityGroupId, Tags, VpcId,
    ec2::{InstanceState, IpPermission, NewSecurityGroup, RouteState, RouteTable},
};
use ccm_testing::{Emulator, TestEnv};
use common::{adapter, fixture, raw_ec2};

#[tokio::test]
async fn instances_by_id_and_by_filter() {
    let fx = fixture("ec2-instances", 2).await;
    let adapter = adapter(None).await;
    let ec2 = adapter.ec2();
    let ids: Vec<InstanceId> = fx.instance_ids.iter().map(InstanceId::new).collect();

    let found = ec2.instances_by_id(&ids).await.unwrap();
    assert_eq!(found.len(), 2);
    let first = found.iter().find(|i| i.id == ids[0]).unwrap();
    assert_eq!(first.state, InstanceState::Running);
    assert_eq!(first.instance_type, "m5.large");
    assert_eq!(first.availability_zone.as_deref(), Some("us-east-1a"));
    assert_eq!(first.vpc_id.as_ref().map(VpcId::as_str), Some(fx.vpc_id.as_str()));
    assert_eq!(first.tags.get("Name"), Some(&fx.name));
    // AWS describes a VPC instance's network interfaces with it (Instance.NetworkInterfaces), the primary at
    // device index 0; ministack 1.5.33 gives its instances no network interface at all.
    if TestEnv::get().emulator != Emulator::Ministack {
        let primary = &first.network_interfaces[0];
        assert_eq!(primary.device_index, Some(0));
        assert_eq!(primary.private_ips.first(), first.private_ip.as_ref());
    }
    assert!(
        first
            .private_dns_name
            .as_deref()
            .unwrap()
            .ends_with(".ec2.internal")
    );

    // Not found: unknown IDs are absent, known ones still answered, no error.
    let unknown = InstanceId::new("i-0123456789abcdef0");
    let mixed = ec2
        .instances_by_id(&[unknown.clone(), ids[1].clone()])
        .await
        .unwrap();
    assert_eq!(mixed.iter().map(|i| &i.id).collect::<Vec<_>>(), [&ids[1]]);
    assert!(ec2.instances_by_id(&[unknown]).await.unwrap().is_empty());

    let by_tag = ec2
        .instances(&[Filter::tag("Name", [fx.name.as_str()])])
        .await
        .unwrap();
    assert_eq!(by_tag.len(), 2);
    let none = ec2
        .instances(&[Filter::tag("Name", ["no-such-name-anywhere"])])
        .await
        .unwrap();
    assert!(none.is_empty());

    // One page of the same listing: both instances, and no page after it.
    let (page, next) = ec2
        .instances_page(&[Filter::tag("Name", [fx.name.as_str()])], None)
        .await
        .unwrap();
    assert_eq!(page.len(), 2);
    assert_eq!(next, None);
}

/// The test environment's moto (scripts/moto-server.py) pages a listing by instance, as AWS does: plain moto
/// counts reservations, so 5,000 instances launched 250 at a time came back in one page where AWS makes five.
/// Moto only: ministack 1.5.33 ignores MaxResults and NextToken and answers every instance in one page.
#[tokio::test]
async fn moto_pages_a_listing_by_instance_as_aws_does() {
    let fx = fixture("ec2-paging", 7).await;
    let ec2 = raw_ec2().await;
    let filter = aws_sdk_ec2::types::Filter::builder()
        .name("tag:Name")
        .values(&fx.name)
        .build();
    let (mut pages, mut token, mut seen) = (Vec::new(), None, Vec::new());
    loop {
        let page = ec2
            .describe_instances()
            .filters(filter.clone())
            .max_results(5)
            .set_next_token(token)
            .send()
            .await
            .unwrap();
        let ids: Vec<String> = page
            .reservations()
            .iter()
            .flat_map(|r| r.instances())
            .filter_map(|i| i.instance_id().map(str::to_owned))
            .collect();
        pages.push(ids.len());
        seen.extend(ids);
        token = page.next_token().map(str::to_owned);
        if token.is_none() {
            break;
        }
    }
    assert_eq!(pages, [5, 2], "one reservation of 7 instances, 5 a page");
    seen.sort();
    let mut launched = fx.instance_ids.clone();
    launched.sort();
    assert_eq!(seen, launched);
}

/// Moto only: ministack 1.5.33 has no ModifyInstanceAttribute (it answers `InvalidAction`).
#[tokio::test]
async fn source_dest_check_and_not_found() {
    let fx = fixture("ec2-sdc", 1).await;
    let adapter = adapter(None).await;
    let ec2 = adapter.ec2();
    let id = InstanceId::new(&fx.instance_ids[0]);
    ec2.set_source_dest_check(&id, false).await.unwrap();
    let instance = ec2
        .instances_by_id(std::slice::from_ref(&id))
        .await
        .unwrap()
        .remove(0);
    assert_eq!(instance.source_dest_check, Some(false));

    let err = ec2
        .set_source_dest_check(&InstanceId::new("i-0123456789abcdef0"), false)
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotFound, "{err}");
}

/// Moto only: ministack 1.5.33 makes no network interface for an instance and ignores DescribeNetworkInterfaces'
/// filters, where AWS attaches a primary interface to every VPC instance.
#[tokio::test]
async fn network_interfaces_of_an_instance() {
    let fx = fixture("ec2-eni", 1).await;
    let adapter = adapter(None).await;
    let ec2 = adapter.ec2();
    let enis = ec2
        .network_interfaces(&[Filter::new("vpc-id", [fx.vpc_id.as_str()])])
        .await
        .unwrap();
    assert_eq!(enis.len(), 1);
    assert_eq!(
        enis[0].attached_instance.as_ref().map(InstanceId::as_str),
        Some(fx.instance_ids[0].as_str())
    );
    assert_eq!(enis[0].availability_zone.as_deref(), Some("us-east-1a"));
    assert!(!enis[0].private_ips.is_empty());
    assert!(
        ec2.network_interfaces(&[Filter::new("vpc-id", ["vpc-00000000"])])
            .await
            .unwrap()
            .is_empty()
    );
}

#[tokio::test]
async fn subnets_and_zones() {
    let fx = fixture("ec2-subnets", 0).await;
    let adapter = adapter(None).await;
    let ec2 = adapter.ec2();
    let subnets = ec2
        .subnets(&[Filter::new("vpc-id", [fx.vpc_id.as_str()])])
        .await
        .unwrap();
    assert_eq!(subnets.len(), 1);
    assert_eq!(subnets[0].id.as_str(), fx.subnet_id);
    assert_eq!(subnets[0].cidr_block.as_deref(), Some("10.77.1.0/24"));
    assert!(subnets[0].availability_zone_id.is_some());
    let err = ec2
        .subnets(&[Filter::new("subnet-id", ["subnet-00000000"])])
        .await
        .map(|s| s.len());
    assert_eq!(
        err.unwrap(),
        0,
        "a filter that matches nothing is an empty answer"
    );

    let zones = ec2.availability_zones().await.unwrap();
    let a = zones.iter().find(|z| z.name == "us-east-1a").unwrap();
    assert_eq!(a.region, "us-east-1");
    assert!(!a.zone_id.is_empty());
}

#[tokio::test]
async fn security_groups_lifecycle_and_error_kinds() {
    let fx = fixture("ec2-sg", 0).await;
    let adapter = adapter(None).await;
    let ec2 = adapter.ec2();
    let tags = Tags::from([("kubernetes.io/cluster/test".to_owned(), "owned".to_owned())]);
    let group = NewSecurityGroup {
        name: fx.name.clone(),
        description: "adapter test".into(),
        vpc_id: VpcId::new(&fx.vpc_id),
        tags: tags.clone(),
    };
    let id = ec2.create_security_group(&group).await.unwrap();
    let duplicate = ec2.create_security_group(&group).await.unwrap_err();
    assert_eq!(duplicate.kind(), ErrorKind::AlreadyExists, "{duplicate}");

    let rule = IpPermission::cidrs("tcp", 80, 80, ["10.0.0.0/8"]);
    ec2.authorize_ingress(&id, std::slice::from_ref(&rule))
        .await
        .unwrap();
    let again = ec2.authorize_ingress(&id, std::slice::from_ref(&rule)).await;
    // AWS refuses a rule the group already has (InvalidPermission.Duplicate); ministack 1.5.33 answers success.
    if TestEnv::get().emulator != Emulator::Ministack {
        let again = again.unwrap_err();
        assert_eq!(again.kind(), ErrorKind::AlreadyExists, "{again}");
    }

    let found = ec2
        .security_groups(&[Filter::new("group-id", [id.as_str()])])
        .await
        .unwrap();
    // AWS answers only the groups the filter names; ministack 1.5.33 ignores the `group-id` filter of
    // DescribeSecurityGroups and answers every group.
    if TestEnv::get().emulator != Emulator::Ministack {
        assert_eq!(found.len(), 1);
    }
    let found = found.iter().find(|g| g.id == id).expect("the group is listed");
    assert_eq!(found.name, fx.name);
    assert_eq!(found.tags, tags);
    assert!(found.ingress.contains(&rule), "{:?}", found.ingress);

    ec2.revoke_ingress(&id, std::slice::from_ref(&rule))
        .await
        .unwrap();
    let gone = ec2.revoke_ingress(&id, std::slice::from_ref(&rule)).await;
    // AWS refuses a rule the group does not have (InvalidPermission.NotFound) or lists it in
    // UnknownIpPermissions; ministack 1.5.33 answers plain success.
    if TestEnv::get().emulator != Emulator::Ministack {
        let gone = gone.unwrap_err();
        assert_eq!(gone.kind(), ErrorKind::NotFound, "{gone}");
    }

    ec2.delete_security_group(&id).await.unwrap();
    let missing = ec2.delete_security_group(&id).await.unwrap_err();
    assert_eq!(missing.kind(), ErrorKind::NotFound, "{missing}");
    let unknown = ec2
        .authorize_ingress(&SecurityGroupId::new("sg-00000000000000000"), &[rule])
        .await
        .unwrap_err();
    assert_eq!(unknown.kind(), ErrorKind::NotFound, "{unknown}");
}

#[tokio::test]
async fn route_tables_and_routes() {
    let fx = fixture("ec2-routes", 2).await;
    let table = route_table(&fx.vpc_id).await;
    let adapter = adapter(None).await;
    let ec2 = adapter.ec2();
    let (a, b) = (
        InstanceId::new(&fx.instance_ids[0]),
        InstanceId::new(&fx.instance_ids[1]),
    );

    ec2.create_route(&table, "10.244.1.0/24", &a).await.unwrap();
    ec2.replace_route(&table, "10.244.1.0/24", &b).await.unwrap();

    let listed = listed_table(ec2, &table).await;
    assert_eq!(listed.vpc_id.as_str(), fx.vpc_id);
    let route = listed
        .routes
        .iter()
        .find(|r| r.destination_cidr.as_deref() == Some("10.244.1.0/24"))
        .unwrap();
    assert_eq!(route.instance_id.as_ref(), Some(&b));
    assert_eq!(route.state, RouteState::Active);
    let all = ec2
        .route_tables(&[Filter::new("vpc-id", [fx.vpc_id.as_str()])])
        .await
        .unwrap();
    assert!(
        all.iter().any(|t| t.associations.iter().any(|a| a.main)),
        "the main table is marked"
    );

    ec2.delete_route(&table, "10.244.1.0/24").await.unwrap();
    assert!(
        listed_table(ec2, &table)
            .await
            .routes
            .iter()
            .all(|r| r.destination_cidr.as_deref() != Some("10.244.1.0/24"))
    );
    let no_table = ec2
        .create_route(&RouteTableId::new("rtb-00000000"), "10.244.2.0/24", &a)
        .await
        .unwrap_err();
    assert_eq!(no_table.kind(), ErrorKind::NotFound, "{no_table}");
}

/// Moto only: ministack 1.5.33 ignores `DestinationIpv6CidrBlock` in CreateRoute, ReplaceRoute and DeleteRoute,
/// makes a second route to a destination the table already routes (AWS: `RouteAlreadyExists`), and answers
/// success for replacing or deleting a route the table does not have (AWS: an error).
#[tokio::test]
async fn route_errors_and_ipv6_routes() {
    let fx = fixture("ec2-routes6", 2).await;
    let table = route_table(&fx.vpc_id).await;
    let adapter = adapter(None).await;
    let ec2 = adapter.ec2();
    let (a, b) = (
        InstanceId::new(&fx.instance_ids[0]),
        InstanceId::new(&fx.instance_ids[1]),
    );

    ec2.create_route(&table, "10.244.1.0/24", &a).await.unwrap();
    let exists = ec2.create_route(&table, "10.244.1.0/24", &a).await.unwrap_err();
    assert_eq!(exists.kind(), ErrorKind::AlreadyExists, "{exists}");

    // IPv6 pod CIDRs go in AWS's IPv6 destination field, both ways.
    ec2.create_route(&table, "fd00:10:244:1::/64", &a).await.unwrap();
    let listed = listed_table(ec2, &table).await;
    let v6 = listed
        .routes
        .iter()
        .find(|r| r.destination_ipv6_cidr.as_deref() == Some("fd00:10:244:1::/64"))
        .expect("the IPv6 route is listed");
    assert_eq!(v6.instance_id.as_ref(), Some(&a));
    ec2.replace_route(&table, "fd00:10:244:1::/64", &b).await.unwrap();
    ec2.delete_route(&table, "fd00:10:244:1::/64").await.unwrap();
    assert!(
        listed_table(ec2, &table)
            .await
            .routes
            .iter()
            .all(|r| r.destination_ipv6_cidr.is_none())
    );

    ec2.delete_route(&table, "10.244.1.0/24").await.unwrap();
    let gone = ec2.delete_route(&table, "10.244.1.0/24").await.unwrap_err();
    assert_eq!(gone.kind(), ErrorKind::NotFound, "{gone}");
    let replace_missing = ec2.replace_route(&table, "10.244.9.0/24", &a).await.unwrap_err();
    assert_eq!(replace_missing.kind(), ErrorKind::NotFound, "{replace_missing}");
}

/// The route table `table`, listed by the `route-table-id` filter the controller uses.
async fn listed_table(ec2: &impl Ec2, table: &RouteTableId) -> RouteTable {
    let tables = ec2
        .route_tables(&[Filter::new("route-table-id", [table.as_str()])])
        .await
        .unwrap();
    // AWS answers only the tables the filter names; ministack 1.5.33 ignores the `route-table-id` filter of
    // DescribeRouteTables and answers every table.
    if TestEnv::get().emulator != Emulator::Ministack {
        assert_eq!(tables.len(), 1, "{tables:?}");
    }
    tables
        .into_iter()
        .find(|t| &t.id == table)
        .expect("the table is listed")
}

/// A new route table in `vpc_id`.
async fn route_table(vpc_id: &str) -> RouteTableId {
    let raw = raw_ec2().await;
    let table = raw.create_route_table().vpc_id(vpc_id).send().await.unwrap();
    RouteTableId::new(table.route_table().unwrap().route_table_id().unwrap())
}

#[tokio::test]
async fn tags_are_created_and_deleted() {
    let fx = fixture("ec2-tags", 2).await;
    let adapter = adapter(None).await;
    let ec2 = adapter.ec2();
    let ids: Vec<InstanceId> = fx.instance_ids.iter().map(InstanceId::new).collect();
    let tags = Tags::from([
        ("team".to_owned(), "blue".to_owned()),
        ("tier".to_owned(), "web".to_owned()),
    ]);

    // Two concurrent callers with the same tags share one CreateTags call.
    let (r1, r2) = tokio::join!(
        ec2.create_tags(std::slice::from_ref(&fx.instance_ids[0]), &tags),
        ec2.create_tags(std::slice::from_ref(&fx.instance_ids[1]), &tags),
    );
    r1.unwrap();
    r2.unwrap();
    assert_eq!(adapter.metrics().attempts("ec2", "CreateTags"), 1);
    for instance in ec2.instances_by_id(&ids).await.unwrap() {
        assert_eq!(instance.tags.get("team").map(String::as_str), Some("blue"));
    }

    // Delete by key and value: a wrong value leaves the tag; `None` removes whatever the value.
    let wrong = BTreeMap::from([("team".to_owned(), Some("red".to_owned()))]);
    ec2.delete_tags(&fx.instance_ids, &wrong).await.unwrap();
    let any = BTreeMap::from([("tier".to_owned(), None)]);
    ec2.delete_tags(&fx.instance_ids, &any).await.unwrap();
    for instance in ec2.instances_by_id(&ids).await.unwrap() {
        // AWS deletes a tag named with a value only when the value matches; ministack 1.5.33 deletes it whatever
        // the value.
        if TestEnv::get().emulator != Emulator::Ministack {
            assert_eq!(instance.tags.get("team").map(String::as_str), Some("blue"));
        }
        assert_eq!(instance.tags.get("tier"), None);
    }
}
