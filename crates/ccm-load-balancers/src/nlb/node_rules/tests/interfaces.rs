//! Health rules from the NLB's own addresses (one `/32` per network interface) instead of its subnets' CIDRs:
//! the reads, the fallback while AWS does not show the interfaces yet, and the narrowing of CIDR rules.

use ccm_aws_api::{NetworkInterfaceId, ec2::NetworkInterface};

use super::*;

const ARN: &str =
    "arn:aws:elasticloadbalancing:us-east-1:123456789012:loadbalancer/net/a0123/50dc6c495c0c9188";
const DESCRIPTION: &str = "ELB net/a0123/50dc6c495c0c9188";

fn interface(description: &str, vpc: &str, subnet: &str, ip: &str) -> NetworkInterface {
    let mut i = NetworkInterface::new(NetworkInterfaceId::new(format!("eni-{ip}")));
    i.description = Some(description.to_owned());
    i.vpc_id = Some(VpcId::new(vpc));
    i.subnet_id = Some(SubnetId::new(subnet));
    i.private_ips = vec![ip.to_owned()];
    i.ipv6_addresses = vec!["2001:db8::5".to_owned()];
    i
}

fn subnet(id: &str, cidr: &str) -> Subnet {
    let mut s = Subnet::new(SubnetId::new(id), VpcId::new("vpc-1"), "us-east-1a", Tags::new());
    s.cidr_block = Some(cidr.to_owned());
    s
}

fn filtered(filters: &[Filter], name: &str, values: &[&str]) -> bool {
    filters
        .iter()
        .any(|f| f.name == name && f.values.iter().map(String::as_str).eq(values.iter().copied()))
}

/// A mock with one target instance in `sg-n` (tagged) holding `rules`.
fn ec2_with(rules: Vec<DescribedRule>) -> MockEc2 {
    let mut ec2 = MockEc2::new();
    ec2.expect_instances_by_id().returning(|_| {
        Box::pin(async {
            let mut i = Instance::new(InstanceId::new("i-1"), InstanceState::Running);
            i.security_groups = vec![SecurityGroupId::new("sg-n")];
            Ok(vec![i])
        })
    });
    ec2.expect_security_groups().returning(move |_| {
        let g = group("sg-n", tagged(), &rules);
        Box::pin(async move { Ok(vec![g]) })
    });
    ec2
}

fn expect_interfaces(ec2: &mut MockEc2, interfaces: Vec<NetworkInterface>) {
    ec2.expect_network_interfaces()
        .times(1)
        .withf(|f| filtered(f, "description", &[DESCRIPTION]) && filtered(f, "vpc-id", &["vpc-1"]))
        .returning(move |_| {
            let found = interfaces.clone();
            Box::pin(async move { Ok(found) })
        });
}

fn subnets() -> [SubnetId; 2] {
    [SubnetId::new("subnet-a"), SubnetId::new("subnet-b")]
}

/// Client rules from a range that does not cover health checks on 32000.
fn access_health() -> NodeAccess {
    access(&[("tcp", 30080)], &["203.0.113.0/24"], &[32000], &["i-1"])
}

#[test]
fn the_interface_description_is_the_arns_resource_after_elb() {
    assert_eq!(interface_description(ARN).as_deref(), Some(DESCRIPTION));
    // moto writes `app/` in an NLB's ARN too: the interfaces are still described as AWS does.
    let moto = "arn:aws:elasticloadbalancing:us-east-1:1:loadbalancer/app/a0123/50dc6c495c0c9188";
    assert_eq!(interface_description(moto).as_deref(), Some(DESCRIPTION));
    assert_eq!(
        interface_description("arn:aws:elasticloadbalancing:us-east-1:1:loadbalancer/net/a"),
        None
    );
    assert_eq!(interface_description("garbage"), None);
}

#[tokio::test]
async fn health_sources_are_the_interfaces_addresses_in_one_read_instead_of_the_subnets() {
    let mut ec2 = ec2_with(Vec::new());
    // An emulator may ignore the filters: interfaces of others, of another VPC or outside the NLB's subnets
    // are left out here too. No DescribeSubnets (the mock would panic).
    expect_interfaces(
        &mut ec2,
        vec![
            interface(DESCRIPTION, "vpc-1", "subnet-b", "10.1.2.77"),
            interface(DESCRIPTION, "vpc-1", "subnet-a", "10.1.1.10"),
            interface("ELB net/other/1", "vpc-1", "subnet-a", "10.1.1.11"),
            interface(DESCRIPTION, "vpc-9", "subnet-a", "10.9.1.12"),
            interface(DESCRIPTION, "vpc-1", "subnet-old", "10.1.3.13"),
        ],
    );
    let a = access_health();
    let obs = observe(
        &crate::instance_reads::uncached(ec2),
        &config(),
        &a,
        &subnets(),
        Some(ARN),
    )
    .await
    .unwrap();
    assert_eq!(obs.health_sources, ["10.1.1.10/32", "10.1.2.77/32"]);
    assert!(obs.subnets_without_interfaces.is_empty());
    // As many health rules as subnets, as before: narrower, not more.
    let health: Vec<String> = a
        .rules(&obs.health_sources)
        .into_iter()
        .filter(|r| r.description == a.health_description())
        .map(|r| r.rule.source)
        .collect();
    assert_eq!(health, ["10.1.1.10/32", "10.1.2.77/32"]);
}

#[tokio::test]
async fn a_subnet_without_a_visible_interface_falls_back_to_its_cidr_then_narrows() {
    // Right after CreateLoadBalancer AWS shows the interface of subnet-a only.
    let mut ec2 = ec2_with(Vec::new());
    expect_interfaces(
        &mut ec2,
        vec![interface(DESCRIPTION, "vpc-1", "subnet-a", "10.1.1.10")],
    );
    ec2.expect_subnets()
        .times(1)
        .withf(|f| filtered(f, "subnet-id", &["subnet-b"]))
        .returning(|_| Box::pin(async { Ok(vec![subnet("subnet-b", "10.1.2.0/24")]) }));
    let a = access_health();
    let first = observe(
        &crate::instance_reads::uncached(ec2),
        &config(),
        &a,
        &subnets(),
        Some(ARN),
    )
    .await
    .unwrap();
    assert_eq!(first.health_sources, ["10.1.1.10/32", "10.1.2.0/24"]);
    assert_eq!(first.subnets_without_interfaces, [SubnetId::new("subnet-b")]);

    // The next pass sees both: the CIDR rule is replaced, the /32 added before the CIDR goes.
    let mut present: Vec<DescribedRule> = a.rules(&first.health_sources).into_iter().collect();
    present.push(DescribedRule::mtu("203.0.113.0/24"));
    let mut ec2 = ec2_with(present.clone());
    expect_interfaces(
        &mut ec2,
        vec![
            interface(DESCRIPTION, "vpc-1", "subnet-a", "10.1.1.10"),
            interface(DESCRIPTION, "vpc-1", "subnet-b", "10.1.2.77"),
        ],
    );
    let next = observe(
        &crate::instance_reads::uncached(ec2),
        &config(),
        &a,
        &subnets(),
        Some(ARN),
    )
    .await
    .unwrap();
    assert!(next.subnets_without_interfaces.is_empty());
    let changes = plan(&a, &next);
    let health = a.health_description();
    assert_eq!(
        changes,
        [
            RuleChange::Authorize {
                group: "sg-n".to_owned(),
                rules: vec![rule("tcp", 32000, 32000, "10.1.2.77/32", &health)],
            },
            RuleChange::Revoke {
                group: "sg-n".to_owned(),
                rules: vec![rule("tcp", 32000, 32000, "10.1.2.0/24", &health)],
            },
        ]
    );
}

#[tokio::test]
async fn an_nlb_made_by_this_run_reads_its_subnets_only() {
    // No ARN yet: no DescribeNetworkInterfaces (the mock would panic), the subnets' CIDRs meanwhile.
    let mut ec2 = ec2_with(Vec::new());
    ec2.expect_subnets().times(1).returning(|_| {
        Box::pin(async {
            Ok(vec![
                subnet("subnet-a", "10.1.1.0/24"),
                subnet("subnet-b", "10.1.2.0/24"),
            ])
        })
    });
    let obs = observe(
        &crate::instance_reads::uncached(ec2),
        &config(),
        &access_health(),
        &subnets(),
        None,
    )
    .await
    .unwrap();
    assert_eq!(obs.health_sources, ["10.1.1.0/24", "10.1.2.0/24"]);
    assert_eq!(obs.subnets_without_interfaces.len(), 2);
}

#[test]
fn subnet_cidr_rules_are_narrowed_leaving_others_and_surviving_a_crash_at_any_point() {
    let a = access_health();
    let health = a.health_description();
    let others = format!("{HEALTH_RULE_PREFIX}{OTHER}");
    // As an earlier version or the upstream controller left them, beside another NLB's health rule from the
    // same subnet on another port and a hand-made rule.
    let mut rules: Vec<DescribedRule> = a
        .rules(&["10.1.1.0/24".to_owned(), "10.1.2.0/24".to_owned()])
        .into_iter()
        .collect();
    rules.push(rule("tcp", 32001, 32001, "10.1.1.0/24", &others));
    rules.push(rule("tcp", 22, 22, "10.1.1.0/24", ""));
    let g = group("sg-n", tagged(), &rules);
    let narrow = ["10.1.1.10/32", "10.1.2.77/32"];
    let obs = |g: SecurityGroup| observed(vec![g], &[("i-1", "sg-n")], &narrow);
    let changes = plan(&a, &obs(g.clone()));
    // The new rules before the old ones go; only this NLB's CIDR rules are revoked.
    assert!(matches!(
        changes.as_slice(),
        [RuleChange::Authorize { .. }, RuleChange::Revoke { .. }]
    ));
    assert_eq!(
        revoked(&changes),
        BTreeSet::from([
            rule("tcp", 32000, 32000, "10.1.1.0/24", &health),
            rule("tcp", 32000, 32000, "10.1.2.0/24", &health),
        ])
    );
    let done = applied(&g, &changes);
    assert!(described_rules(&done).contains(&rule("tcp", 32001, 32001, "10.1.1.0/24", &others)));
    assert!(described_rules(&done).contains(&rule("tcp", 22, 22, "10.1.1.0/24", "")));
    assert_eq!(plan(&a, &obs(done.clone())), vec![]);
    // A crash after the authorization: the next pass only revokes, and ends in the same place.
    let crashed = applied(&g, &changes[..1]);
    let rest = plan(&a, &obs(crashed.clone()));
    assert!(authorized(&rest).is_empty());
    assert_eq!(described_rules(&applied(&crashed, &rest)), described_rules(&done));
}
