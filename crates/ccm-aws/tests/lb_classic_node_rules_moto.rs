//! A Classic ELB's rules on the nodes' groups through the real adapter against moto: exactly the ports the load
//! balancer sends to (listeners' node ports and health check port), from its first group, for given groups too;
//! upstream's all-traffic rule narrowed (narrow rules first), but kept on a given group that instances use (a
//! bastion's); Services that share a source group (`ElbSecurityGroup`) never revoke each other's rules, with or
//! without `target-node-labels`; the last Service to go takes the rules with it.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::too_many_lines)]

use std::collections::BTreeSet;

use ccm_aws_api::{
    Ec2, Filter, InstanceId, SecurityGroupId,
    ec2::{IpPermission, SecurityGroup},
};
use ccm_cloud_provider::{LoadBalancer, NodeView};
use ccm_load_balancers::{
    HealthProbeMode,
    annotations::Key,
    classic::node_rules::{SourceRule, source_rules},
};
use ccm_testing::lb_world::{World, node, service, uid, world_with};

/// A rule from the source group as the test compares it: protocol, port (`None`: all traffic), described as
/// the load balancer's.
type Seen = (String, Option<i32>, bool);

/// What the tests here read and set up in a [`World`] beyond what it offers.
trait RulesWorld {
    async fn rules_from(&self, group: &str, source: &str) -> BTreeSet<Seen>;
    async fn source_rules_on(&self, group: &str, source: &str) -> Vec<SourceRule>;
    async fn allow_all(&self, group: &str, source: &str);
    async fn nodes_in(&self, group: &str, labels: &[(&str, &str)]) -> Vec<NodeView>;
    async fn descriptions_on(&self, group: &str, source: &str, port: i32) -> BTreeSet<String>;
}

impl RulesWorld for World {
    /// The rules on `group` whose source is `source`.
    async fn rules_from(&self, group: &str, source: &str) -> BTreeSet<Seen> {
        self.source_rules_on(group, source)
            .await
            .into_iter()
            .map(|r| {
                let ours = r
                    .description
                    .as_deref()
                    .is_some_and(|d| d.starts_with("kubernetes.io/rule/elb="));
                (r.protocol, r.from_port, ours)
            })
            .collect()
    }

    /// The rules on `group` whose source is `source`, as the provider reads them (through the adapter).
    async fn source_rules_on(&self, group: &str, source: &str) -> Vec<SourceRule> {
        let found: Vec<SecurityGroup> = self
            .adapter
            .ec2()
            .security_groups(&[Filter::new("group-id", [group])])
            .await
            .unwrap();
        // Picked by id: ministack 1.5.33 ignores the `group-id` filter of DescribeSecurityGroups (AWS
        // documents it) and answers every group.
        let found = found.iter().find(|g| g.id.as_str() == group).unwrap();
        source_rules(found, &SecurityGroupId::new(source))
    }

    /// Upstream's rule: all traffic from `source` into `group`.
    async fn allow_all(&self, group: &str, source: &str) {
        self.adapter
            .ec2()
            .authorize_ingress(
                &SecurityGroupId::new(group),
                &[IpPermission::all_from_group(SecurityGroupId::new(source))],
            )
            .await
            .unwrap();
    }

    /// Nodes for the instances in `group`, labelled `labels`.
    async fn nodes_in(&self, group: &str, labels: &[(&str, &str)]) -> Vec<NodeView> {
        let ids: Vec<InstanceId> = self.instances.iter().map(InstanceId::new).collect();
        let mut found = self.adapter.ec2().instances_by_id(&ids).await.unwrap();
        found.retain(|i| i.security_groups.contains(&SecurityGroupId::new(group)));
        let mut nodes: Vec<NodeView> = found.iter().map(|i| node(i.id.as_str(), labels)).collect();
        nodes.sort_by(|a, b| a.name.cmp(&b.name));
        nodes
    }

    /// The descriptions of the rules on `port` of `group` whose source is `source`.
    async fn descriptions_on(&self, group: &str, source: &str, port: i32) -> BTreeSet<String> {
        self.source_rules_on(group, source)
            .await
            .into_iter()
            .filter(|r| r.port() == Some(port))
            .map(|r| r.description.unwrap_or_default())
            .collect()
    }
}

fn tcp(ports: &[i32]) -> BTreeSet<Seen> {
    ports.iter().map(|p| ("tcp".to_owned(), Some(*p), true)).collect()
}

fn wide() -> Seen {
    ("-1".to_owned(), None, false)
}

#[tokio::test]
async fn given_group_rules_are_narrowed_and_go_with_the_service() {
    let w = world_with(101, "lbrules", false, |b, _| b.security_group(&[])).await;
    let (nodes_group, given) = (w.groups[0].clone(), w.groups[1].clone());
    // A Go-era cluster: upstream allowed all traffic from the given group.
    w.allow_all(&nodes_group, &given).await;
    let lbs = w.lbs(w.config.clone());
    let svc = service(
        &uid(),
        &[(80, 30080), (443, 30443)],
        &[(Key::SecurityGroups, &given)],
    );
    let nodes = w.nodes_in(&nodes_group, &[]).await;
    let refs: Vec<&NodeView> = nodes.iter().collect();

    lbs.ensure_load_balancer("kubernetes", &svc, &refs).await.unwrap();
    assert_eq!(
        w.rules_from(&nodes_group, &given).await,
        tcp(&[30080, 30443]),
        "the node ports (the health check's among them), and no longer all traffic"
    );
    // Steady: a second ensure changes nothing.
    lbs.ensure_load_balancer("kubernetes", &svc, &refs).await.unwrap();
    assert_eq!(w.rules_from(&nodes_group, &given).await, tcp(&[30080, 30443]));

    lbs.ensure_load_balancer_deleted("kubernetes", &svc)
        .await
        .unwrap();
    assert_eq!(
        w.rules_from(&nodes_group, &given).await,
        BTreeSet::new(),
        "deleting the Service revokes the rules from the group it named"
    );
}

#[tokio::test]
async fn a_given_group_that_instances_use_keeps_its_wide_rule() {
    // The given group is a bastion's: an instance uses it.
    let w = world_with(102, "lbrules", false, |b, _| {
        b.security_group(&[]).instances_in_group(1, 1, &[])
    })
    .await;
    let (nodes_group, bastion) = (w.groups[0].clone(), w.groups[1].clone());
    w.allow_all(&nodes_group, &bastion).await;
    let lbs = w.lbs(w.config.clone());
    let svc = service(&uid(), &[(80, 30081)], &[(Key::SecurityGroups, &bastion)]);
    let nodes = w.nodes_in(&nodes_group, &[]).await;
    let refs: Vec<&NodeView> = nodes.iter().collect();

    lbs.ensure_load_balancer("kubernetes", &svc, &refs).await.unwrap();
    let mut want = tcp(&[30081]);
    want.insert(wide());
    assert_eq!(
        w.rules_from(&nodes_group, &bastion).await,
        want,
        "the operator's all-traffic rule from a bastion's group is never revoked"
    );
    lbs.ensure_load_balancer_deleted("kubernetes", &svc)
        .await
        .unwrap();
    assert_eq!(w.rules_from(&nodes_group, &bastion).await, [wide()].into());
}

#[tokio::test]
async fn services_sharing_a_source_group_never_revoke_each_others_rules() {
    // Two node groups: three instances in the first, one (labelled pool=b) in the second; every Classic ELB
    // uses the operator's `ElbSecurityGroup` and kube-proxy's health port.
    let w = world_with(103, "lbrules", false, |b, key| {
        b.security_group(&[(key, "owned")])
            .instances_in_group(1, 1, &[(key, "owned")])
            .security_group(&[])
    })
    .await;
    let (g1, g2, shared) = (w.groups[0].clone(), w.groups[1].clone(), w.groups[2].clone());
    w.allow_all(&g1, &shared).await;
    let config = w
        .config
        .clone()
        .with_elb_security_group(Some(SecurityGroupId::new(&shared)))
        .with_health_probe(HealthProbeMode::Shared {
            port: 10256,
            path: "/healthz".into(),
        });
    let lbs = w.lbs(config);
    let mut nodes = w.nodes_in(&g1, &[]).await;
    nodes.extend(w.nodes_in(&g2, &[("pool", "b")]).await);
    let refs: Vec<&NodeView> = nodes.iter().collect();
    let a = service(&uid(), &[(80, 30100)], &[]);
    let b = service(&uid(), &[(80, 30200)], &[(Key::TargetNodeLabels, "pool=b")]);

    lbs.ensure_load_balancer("kubernetes", &a, &refs).await.unwrap();
    assert_eq!(w.rules_from(&g1, &shared).await, tcp(&[10256, 30100]), "narrowed");
    assert_eq!(w.rules_from(&g2, &shared).await, tcp(&[10256, 30100]));
    // B targets pool=b only: it must not take A's rules (nor A's old wide one, now gone) from the first group.
    lbs.ensure_load_balancer("kubernetes", &b, &refs).await.unwrap();
    assert_eq!(w.rules_from(&g1, &shared).await, tcp(&[10256, 30100]));
    assert_eq!(w.rules_from(&g2, &shared).await, tcp(&[10256, 30100, 30200]));

    // A goes: what B needs stays (the shared health port on the second group, described by A), the rest goes.
    lbs.ensure_load_balancer_deleted("kubernetes", &a).await.unwrap();
    assert_eq!(w.rules_from(&g1, &shared).await, BTreeSet::new());
    assert_eq!(w.rules_from(&g2, &shared).await, tcp(&[10256, 30200]));
    // B's next ensure is steady, and B's deletion leaves nothing.
    lbs.ensure_load_balancer("kubernetes", &b, &refs).await.unwrap();
    assert_eq!(w.rules_from(&g2, &shared).await, tcp(&[10256, 30200]));
    lbs.ensure_load_balancer_deleted("kubernetes", &b).await.unwrap();
    assert_eq!(w.rules_from(&g2, &shared).await, BTreeSet::new());
}

#[tokio::test]
async fn nodes_that_arrive_after_the_load_balancer_get_their_rules() {
    let w = world_with(104, "lbrules", false, |b, _| b.security_group(&[])).await;
    let (nodes_group, given) = (w.groups[0].clone(), w.groups[1].clone());
    w.allow_all(&nodes_group, &given).await;
    let lbs = w.lbs(w.config.clone());
    let svc = service(&uid(), &[(80, 30082)], &[(Key::SecurityGroups, &given)]);
    // No initialized Node yet: no target, so no group needs the given group's traffic (the wide rule goes).
    lbs.ensure_load_balancer("kubernetes", &svc, &[]).await.unwrap();
    assert_eq!(w.rules_from(&nodes_group, &given).await, BTreeSet::new());
    let nodes = w.nodes_in(&nodes_group, &[]).await;
    let refs: Vec<&NodeView> = nodes.iter().collect();
    lbs.update_load_balancer("kubernetes", &svc, &refs).await.unwrap();
    assert_eq!(w.rules_from(&nodes_group, &given).await, tcp(&[30082]));
}

/// One instance in two cluster-tagged groups used to fail every load balancer (the rule's group cannot be
/// chosen). Now only that instance is skipped, in both flavours, with a Warning notice about its Node.
#[tokio::test]
async fn an_instance_with_two_cluster_groups_is_skipped_alone() {
    let w = world_with(105, "lbrules", false, |b, key| {
        b.security_group(&[(key, "owned")])
    })
    .await;
    let (g1, g2) = (w.groups[0].clone(), w.groups[1].clone());
    let nodes = w.nodes_in(&g1, &[]).await;
    let odd = nodes[0].name.clone();
    w.raw
        .modify_instance_attribute()
        .instance_id(&odd)
        .groups(&g1)
        .groups(&g2)
        .send()
        .await
        .unwrap();
    let refs: Vec<&NodeView> = nodes.iter().collect();
    let lbs = w.lbs(w.config.clone());
    for annotations in [vec![], vec![(Key::Type, "nlb")]] {
        let svc = service(&uid(), &[(80, 30083)], &annotations);
        let ensured = lbs
            .ensure_load_balancer_reporting("kubernetes", &svc, &refs)
            .await
            .unwrap();
        let on_node: Vec<(&str, &str)> = ensured
            .notices
            .iter()
            .filter_map(|n| Some((n.node.as_deref()?, n.reason.as_str())))
            .collect();
        assert_eq!(
            on_node,
            [(odd.as_str(), "AmbiguousSecurityGroups")],
            "{annotations:?}"
        );
        lbs.ensure_load_balancer_deleted("kubernetes", &svc)
            .await
            .unwrap();
    }
    // The others were served: their group allows the Classic ELB's ports, the odd one's second group nothing.
    assert!(w.rules_from(&g2, &g1).await.is_empty());
}

/// Two NLBs in the same subnets with kube-proxy's health port need the same health rules (tcp 10256 from each
/// subnet's CIDR), which AWS keeps once, under the first NLB's description. When that NLB goes, its health rules
/// are handed over to the other (described with its name), not revoked; when the other goes too, they go.
#[tokio::test]
async fn nlbs_sharing_health_rules_hand_them_over() {
    let w = world_with(106, "lbrules", false, |b, _| b).await;
    let config = w.config.clone().with_health_probe(HealthProbeMode::Shared {
        port: 10256,
        path: "/healthz".into(),
    });
    let lbs = w.lbs(config);
    let nodes = w.nodes_in(&w.node_group, &[]).await;
    let refs: Vec<&NodeView> = nodes.iter().collect();
    let (a, b) = (
        service(&uid(), &[(80, 30300)], &[(Key::Type, "nlb")]),
        service(&uid(), &[(80, 30400)], &[(Key::Type, "nlb")]),
    );
    lbs.ensure_load_balancer("kubernetes", &a, &refs).await.unwrap();
    lbs.ensure_load_balancer("kubernetes", &b, &refs).await.unwrap();
    let (name_a, name_b) = (
        lbs.load_balancer_name("kubernetes", &a),
        lbs.load_balancer_name("kubernetes", &b),
    );
    let described = |name: &str| format!("kubernetes.io/rule/nlb/health={name}");
    assert_eq!(
        health_rules(&w).await,
        [described(&name_a)].into(),
        "made once, by the first"
    );

    lbs.ensure_load_balancer_deleted("kubernetes", &a).await.unwrap();
    assert_eq!(
        health_rules(&w).await,
        [described(&name_b)].into(),
        "handed over, not revoked"
    );
    // Steady for B.
    lbs.ensure_load_balancer("kubernetes", &b, &refs).await.unwrap();
    assert_eq!(health_rules(&w).await, [described(&name_b)].into());
    lbs.ensure_load_balancer_deleted("kubernetes", &b).await.unwrap();
    assert_eq!(health_rules(&w).await, BTreeSet::new());
}

/// The descriptions of the rules on port 10256 of the nodes' group.
async fn health_rules(w: &World) -> BTreeSet<String> {
    let found = w
        .adapter
        .ec2()
        .security_groups(&[Filter::new("group-id", [w.node_group.as_str()])])
        .await
        .unwrap();
    // Picked by id: ministack 1.5.33 ignores the `group-id` filter of DescribeSecurityGroups (AWS documents
    // it) and answers every group.
    let found = found.iter().find(|g| g.id.as_str() == w.node_group).unwrap();
    ccm_load_balancers::nlb::node_rules::described_rules(found)
        .into_iter()
        .filter(|r| r.rule.from_port == 10256)
        .map(|r| r.description)
        .collect()
}

/// One group given to a Classic ELB and to an NLB, with kube-proxy's shared health port: both need `tcp 10256`
/// from that group on the nodes' group, which AWS keeps once, under the description of the load balancer that
/// made it. Whichever flavour goes first, the rule is handed over to the other (described with its name), not
/// revoked; it goes with the last.
#[tokio::test]
async fn classic_and_nlb_sharing_a_given_group_hand_over_the_health_rule() {
    let w = world_with(107, "lbrules", false, |b, _| b.security_group(&[])).await;
    let (nodes_group, given) = (w.groups[0].clone(), w.groups[1].clone());
    // NLBs with security groups (`NLBSecurityGroupMode = Managed`), so that the NLB takes the given group.
    let config = w
        .config
        .clone()
        .with_nlb_managed_security_groups(true)
        .with_health_probe(HealthProbeMode::Shared {
            port: 10256,
            path: "/healthz".into(),
        });
    let lbs = w.lbs(config);
    let nodes = w.nodes_in(&nodes_group, &[]).await;
    let refs: Vec<&NodeView> = nodes.iter().collect();
    let elb = |n: &str| format!("kubernetes.io/rule/elb={n}");
    let nlb = |n: &str| format!("kubernetes.io/rule/nlb/health={n}");
    // Each order: the first load balancer made the shared rule, and goes first.
    for classic_first in [true, false] {
        let classic = service(&uid(), &[(80, 30500)], &[(Key::SecurityGroups, &given)]);
        let network = service(
            &uid(),
            &[(80, 30600)],
            &[(Key::Type, "nlb"), (Key::SecurityGroups, &given)],
        );
        let (classic_rule, network_rule) = (
            elb(&lbs.load_balancer_name("kubernetes", &classic)),
            nlb(&lbs.load_balancer_name("kubernetes", &network)),
        );
        let ((first, first_rule), (second, second_rule)) = if classic_first {
            ((&classic, classic_rule), (&network, network_rule))
        } else {
            ((&network, network_rule), (&classic, classic_rule))
        };
        lbs.ensure_load_balancer("kubernetes", first, &refs)
            .await
            .unwrap();
        lbs.ensure_load_balancer("kubernetes", second, &refs)
            .await
            .unwrap();
        let shared = || w.descriptions_on(&nodes_group, &given, 10256);
        assert_eq!(shared().await, [first_rule].into(), "made once, by the first");

        lbs.ensure_load_balancer_deleted("kubernetes", first)
            .await
            .unwrap();
        assert_eq!(
            shared().await,
            [second_rule.clone()].into(),
            "classic first: {classic_first}: handed over, not revoked"
        );
        lbs.ensure_load_balancer("kubernetes", second, &refs)
            .await
            .unwrap();
        assert_eq!(shared().await, [second_rule.clone()].into(), "steady");
        lbs.ensure_load_balancer_deleted("kubernetes", second)
            .await
            .unwrap();
        assert_eq!(shared().await, BTreeSet::new(), "gone with the last");
    }
}
