//! The NLB node security group rules through the real adapter against moto: rules applied with their
//! descriptions (read back with the SDK itself), a steady second pass with nothing to do, a port change, a
//! half-applied batch completed, and deletion leaving other load balancers' rules and hand-made rules in place.
//! Each test has its own VPC, groups, instances and cluster ID.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::too_many_lines)]

use std::{
    collections::{BTreeMap, BTreeSet},
    sync::Arc,
};

use aws_sdk_ec2::types::{
    Filter as SdkFilter, IpPermission as SdkPermission, IpRange as SdkRange, Ipv6Range,
};
use ccm_aws_api::{Catalog, Ec2, Filter, InstanceCatalog, SecurityGroupId, SubnetId, VpcId};
use ccm_aws_sdk::{Adapter, AwsEc2, CallMetrics};
use ccm_load_balancers::{
    LoadBalancerConfig,
    nlb::node_rules::{self, CLIENT_RULE_PREFIX, DescribedRule, HEALTH_RULE_PREFIX, NodeAccess, RuleChange},
    shared::Rule,
};
use ccm_tagging::ClusterTags;
use ccm_testing::lb_world::diff;
use ccm_testing::{TestEnv, unique_name};

const OTHER_LB: &str = "aotherotherotherotherotherother0";

struct World {
    adapter: Adapter,
    raw: aws_sdk_ec2::Client,
    config: LoadBalancerConfig,
    subnets: Vec<SubnetId>,
    subnet_cidrs: Vec<String>,
    /// The cluster-tagged group of two instances.
    nodes: String,
    /// The only (untagged) group of a third instance.
    plain: String,
    /// A cluster group (`shared`) of no target instance.
    former: String,
    instances: Vec<String>,
    lb: String,
}

/// Two subnets; the cluster's node group (`owned`) with two instances, an untagged group with a third, and a
/// `shared` group of no instance.
async fn world() -> World {
    let env = TestEnv::get();
    let sdk = env.aws_config().await;
    let adapter = ccm_testing::ec2::adapter(&sdk, Some(1));
    let raw = aws_sdk_ec2::Client::new(&sdk);
    let cluster_id = unique_name("nlbrules");
    let cluster = ClusterTags::new(&cluster_id, false).unwrap();
    let key = cluster.key();
    let built = ccm_testing::world::World::builder(ccm_testing::ec2::octet_for(&cluster_id))
        .subnet("us-east-1a", &[])
        .subnet("us-east-1b", &[])
        .security_group(&[(key.as_str(), "owned")])
        .security_group(&[])
        .security_group(&[(key.as_str(), "shared")])
        .instances_in_group(2, 0, &[])
        .instances_in_group(1, 1, &[])
        .build(&raw)
        .await
        .unwrap();
    let lb = format!("a{}", unique_name("lb").replace('-', ""));
    World {
        adapter,
        raw,
        config: LoadBalancerConfig::new(cluster, VpcId::new(&built.vpc)),
        subnets: built.subnets.iter().map(SubnetId::new).collect(),
        subnet_cidrs: built.subnet_cidrs.clone(),
        nodes: built.groups[0].clone(),
        plain: built.groups[1].clone(),
        former: built.groups[2].clone(),
        instances: built.instance_ids(),
        lb,
    }
}

fn counts(metrics: &CallMetrics) -> BTreeMap<&'static str, u64> {
    let mut out = BTreeMap::new();
    for (k, s) in metrics.snapshot() {
        *out.entry(k.operation).or_default() += s.attempts;
    }
    out
}

/// The port through a catalog of its own, fresh for each observation: every instance is read.
fn uncached(ec2: &AwsEc2) -> Catalog<AwsEc2> {
    Arc::new(InstanceCatalog::new()).over(ec2.clone())
}

fn rule(protocol: &str, port: i32, cidr: &str, description: &str) -> DescribedRule {
    DescribedRule {
        rule: Rule {
            protocol: protocol.to_owned(),
            from_port: port,
            to_port: port,
            source: cidr.to_owned(),
        },
        description: description.to_owned(),
    }
}

impl World {
    fn access(&self, ports: &[(&str, i32)], cidrs: &[&str], health: &[i32]) -> NodeAccess {
        NodeAccess {
            load_balancer: self.lb.clone(),
            client_ports: ports.iter().map(|(p, n)| ((*p).to_owned(), *n)).collect(),
            client_cidrs: cidrs.iter().map(|c| (*c).to_owned()).collect(),
            health_ports: health.iter().copied().collect(),
            instances: self.instances.clone(),
            source_group: None,
            ipv6: false,
        }
    }

    fn client(&self) -> String {
        format!("{CLIENT_RULE_PREFIX}{}", self.lb)
    }

    fn health(&self) -> String {
        format!("{HEALTH_RULE_PREFIX}{}", self.lb)
    }

    async fn plan(&self, access: &NodeAccess, planned_for: &NodeAccess) -> Vec<RuleChange> {
        let observed = node_rules::observe(
            &uncached(self.adapter.ec2()),
            &self.config,
            access,
            &self.subnets,
            None,
        )
        .await
        .unwrap();
        node_rules::plan(planned_for, &observed)
    }

    async fn apply(&self, changes: &[RuleChange]) {
        for c in changes {
            node_rules::apply(self.adapter.ec2(), c).await.unwrap();
        }
    }

    /// A group's CIDR rules with descriptions, read with the SDK (not the adapter under test).
    async fn rules(&self, group: &str) -> BTreeSet<DescribedRule> {
        let out = self
            .raw
            .describe_security_groups()
            .filters(SdkFilter::builder().name("group-id").values(group).build())
            .send()
            .await
            .unwrap();
        // Picked by id: ministack 1.5.33 ignores the `group-id` filter of DescribeSecurityGroups (AWS
        // documents it) and answers every group.
        let found = out
            .security_groups()
            .iter()
            .find(|g| g.group_id() == Some(group))
            .unwrap();
        let mut rules = BTreeSet::new();
        for p in found.ip_permissions() {
            let proto = p.ip_protocol().unwrap().to_owned();
            let (from, to) = (p.from_port().unwrap(), p.to_port().unwrap());
            let ranges = p
                .ip_ranges()
                .iter()
                .map(|r| (r.cidr_ip().unwrap(), r.description()))
                .chain(
                    p.ipv6_ranges()
                        .iter()
                        .map(|r| (r.cidr_ipv6().unwrap(), r.description())),
                );
            for (cidr, description) in ranges {
                rules.insert(DescribedRule {
                    rule: Rule {
                        protocol: proto.clone(),
                        from_port: from,
                        to_port: to,
                        source: cidr.to_owned(),
                    },
                    description: description.unwrap_or_default().to_owned(),
                });
            }
        }
        rules
    }

    /// Adds a rule with the SDK, as a person or another controller would.
    async fn plant(&self, group: &str, r: &DescribedRule) {
        let mut p = SdkPermission::builder()
            .ip_protocol(&r.rule.protocol)
            .from_port(r.rule.from_port)
            .to_port(r.rule.to_port);
        let description = (!r.description.is_empty()).then(|| r.description.clone());
        if r.rule.source.contains(':') {
            p = p.ipv6_ranges(
                Ipv6Range::builder()
                    .cidr_ipv6(&r.rule.source)
                    .set_description(description)
                    .build(),
            );
        } else {
            p = p.ip_ranges(
                SdkRange::builder()
                    .cidr_ip(&r.rule.source)
                    .set_description(description)
                    .build(),
            );
        }
        self.raw
            .authorize_security_group_ingress()
            .group_id(group)
            .ip_permissions(p.build())
            .send()
            .await
            .unwrap();
    }
}

#[tokio::test]
async fn rules_are_applied_steady_changed_and_deleted_without_touching_anyone_else() {
    let w = world().await;
    let metrics = w.adapter.metrics().clone();
    let other_client = rule(
        "tcp",
        31000,
        "203.0.113.0/24",
        &format!("{CLIENT_RULE_PREFIX}{OTHER_LB}"),
    );
    let by_hand = rule("tcp", 22, "0.0.0.0/0", "");
    w.plant(&w.nodes, &other_client).await;
    w.plant(&w.nodes, &DescribedRule::mtu("203.0.113.0/24")).await;
    w.plant(&w.nodes, &by_hand).await;
    // The former target still holds a rule of ours, with its MTU rule, and a hand-made rule.
    let stale = rule("tcp", 30999, "0.0.0.0/0", &w.client());
    w.plant(&w.former, &stale).await;
    w.plant(&w.former, &DescribedRule::mtu("0.0.0.0/0")).await;
    w.plant(&w.former, &by_hand).await;

    let access = w.access(
        &[("tcp", 30080), ("udp", 30053)],
        &["203.0.113.0/24", "2001:db8::/32"],
        &[32000],
    );
    let before = counts(&metrics);
    let observed = node_rules::observe(&uncached(w.adapter.ec2()), &w.config, &access, &w.subnets, None)
        .await
        .unwrap();
    // One read each, plus one for the untagged group of the third instance.
    assert_eq!(
        diff(&counts(&metrics), &before),
        BTreeMap::from([
            ("DescribeInstances", 1),
            ("DescribeSecurityGroups", 2),
            ("DescribeSubnets", 1)
        ])
    );
    assert_eq!(observed.health_sources, w.subnet_cidrs);
    let changes = node_rules::plan(&access, &observed);
    let before = counts(&metrics);
    w.apply(&changes).await;
    let mutations = diff(&counts(&metrics), &before);
    // One call per change: the two target groups get one authorization each, the former target one revocation.
    assert_eq!(
        mutations,
        BTreeMap::from([
            ("AuthorizeSecurityGroupIngress", 2),
            ("RevokeSecurityGroupIngress", 1)
        ]),
        "{changes:#?}"
    );

    let (c, h) = (w.client(), w.health());
    let mut wanted: BTreeSet<DescribedRule> = BTreeSet::new();
    for cidr in ["203.0.113.0/24", "2001:db8::/32"] {
        wanted.insert(rule("tcp", 30080, cidr, &c));
        wanted.insert(rule("udp", 30053, cidr, &c));
        wanted.insert(DescribedRule::mtu(cidr));
    }
    for cidr in &observed.health_sources {
        wanted.insert(rule("tcp", 32000, cidr, &h));
    }
    let plain = w.rules(&w.plain).await;
    assert_eq!(plain, wanted);
    let nodes = w.rules(&w.nodes).await;
    let mut nodes_wanted = wanted.clone();
    nodes_wanted.extend([other_client.clone(), by_hand.clone()]);
    assert_eq!(nodes, nodes_wanted);
    assert_eq!(w.rules(&w.former).await, BTreeSet::from([by_hand.clone()]));

    // Nothing changed: nothing to do.
    assert_eq!(w.plan(&access, &access).await, vec![]);

    // A port change converges in one pass.
    let changed = w.access(
        &[("tcp", 30081), ("udp", 30053)],
        &["203.0.113.0/24", "2001:db8::/32"],
        &[32000],
    );
    let changes = w.plan(&changed, &changed).await;
    w.apply(&changes).await;
    assert_eq!(w.plan(&changed, &changed).await, vec![]);
    let plain = w.rules(&w.plain).await;
    assert!(plain.contains(&rule("tcp", 30081, "2001:db8::/32", &c)));
    assert!(!plain.iter().any(|r| r.rule.from_port == 30080));

    // Deletion (observed with the last targets, so the untagged group is cleaned too).
    let gone = NodeAccess::none(&w.lb);
    let last = NodeAccess {
        instances: w.instances.clone(),
        ..NodeAccess::none(&w.lb)
    };
    let changes = w.plan(&last, &gone).await;
    w.apply(&changes).await;
    assert_eq!(w.plan(&last, &gone).await, vec![]);
    assert_eq!(w.rules(&w.plain).await, BTreeSet::new());
    // Another load balancer's client rule keeps its MTU rule; hand-made rules stay.
    assert_eq!(
        w.rules(&w.nodes).await,
        BTreeSet::from([
            other_client,
            DescribedRule::mtu("203.0.113.0/24"),
            by_hand.clone()
        ])
    );
    assert_eq!(w.rules(&w.former).await, BTreeSet::from([by_hand]));
}

#[tokio::test]
async fn a_half_applied_batch_is_completed_by_the_next_run() {
    let w = world().await;
    let access = w.access(&[("tcp", 30080)], &["0.0.0.0/0"], &[30080]);
    let changes = w.plan(&access, &access).await;
    // A run that stopped after adding part of the batch to the node group.
    let (group, first) = changes
        .iter()
        .find_map(|c| match c {
            RuleChange::Authorize { group, rules } if *group == w.nodes => {
                Some((group.clone(), rules[0].clone()))
            }
            _ => None,
        })
        .unwrap();
    w.plant(&group, &first).await;
    // The old plan applied as is: the duplicate is skipped, the rest added.
    w.apply(&changes).await;
    assert_eq!(w.plan(&access, &access).await, vec![]);
    assert_eq!(
        w.rules(&w.nodes).await,
        BTreeSet::from([
            rule("tcp", 30080, "0.0.0.0/0", &w.client()),
            DescribedRule::mtu("0.0.0.0/0"),
        ])
    );
    // The adapter reads back what it wrote, descriptions included (what plan compares against).
    let groups = w
        .adapter
        .ec2()
        .security_groups(&[Filter::new("group-id", [w.nodes.as_str()])])
        .await
        .unwrap();
    // Picked by id: ministack 1.5.33 ignores the `group-id` filter of DescribeSecurityGroups (AWS documents
    // it) and answers every group.
    let nodes = groups
        .iter()
        .find(|g| g.id == SecurityGroupId::new(&w.nodes))
        .unwrap();
    assert_eq!(node_rules::described_rules(nodes), w.rules(&w.nodes).await);
    // Deleting twice: the second pass finds the rules gone and is not an error.
    let gone = NodeAccess::none(&w.lb);
    let last = NodeAccess {
        instances: w.instances.clone(),
        ..NodeAccess::none(&w.lb)
    };
    let changes = w.plan(&last, &gone).await;
    assert!(!changes.is_empty());
    w.apply(&changes).await;
    w.apply(&changes).await;
    assert_eq!(w.rules(&w.nodes).await, BTreeSet::new());
    assert_eq!(w.rules(&w.plain).await, BTreeSet::new());
}
