//! Tests of observing the nodes' groups and applying rule changes against mocked ports.

use super::*;

// --- observe ---

fn instance(id: &str, groups: &[&str]) -> Instance {
    let mut i = Instance::new(InstanceId::new(id), InstanceState::Running);
    i.security_groups = groups.iter().map(|g| SecurityGroupId::new(*g)).collect();
    i
}

fn subnet(id: &str, cidr: &str) -> Subnet {
    let mut s = Subnet::new(SubnetId::new(id), VpcId::new("vpc-1"), "us-east-1a", Tags::new());
    s.cidr_block = Some(cidr.to_owned());
    s
}

fn has(filters: &[Filter], name: &str, values: &[&str]) -> bool {
    filters
        .iter()
        .any(|f| f.name == name && f.values.iter().map(String::as_str).eq(values.iter().copied()))
}

#[tokio::test]
async fn observe_reads_instances_cluster_groups_and_subnets_once_each() {
    let mut ec2 = MockEc2::new();
    ec2.expect_instances_by_id()
        .times(1)
        .withf(|ids| ids.len() == 3)
        .returning(|_| {
            Box::pin(async {
                let mut gone = instance("i-3", &["sg-n"]);
                gone.state = InstanceState::Terminated;
                Ok(vec![
                    instance("i-1", &["sg-n", "sg-extra"]),
                    instance("i-2", &["sg-n"]),
                    gone,
                ])
            })
        });
    ec2.expect_security_groups()
        .times(1)
        .withf(|f| has(f, "tag-key", &["kubernetes.io/cluster/c1"]) && has(f, "vpc-id", &["vpc-1"]))
        .returning(|_| {
            Box::pin(async {
                Ok(vec![
                    group("sg-n", tagged(), &[]),
                    group(
                        "sg-former",
                        Tags::from([("kubernetes.io/cluster/c1".into(), "shared".into())]),
                        &[],
                    ),
                ])
            })
        });
    // sg-extra is untagged, but i-1 has a tagged group: not read, not touched.
    ec2.expect_subnets()
        .times(1)
        .withf(|f| has(f, "subnet-id", &["subnet-a", "subnet-b"]))
        .returning(|_| {
            Box::pin(async {
                Ok(vec![
                    subnet("subnet-b", "10.1.2.0/24"),
                    subnet("subnet-a", "10.1.1.0/24"),
                ])
            })
        });
    let a = access(
        &[("tcp", 30080)],
        &["0.0.0.0/0"],
        &[32000],
        &["i-2", "i-1", "i-3"],
    );
    let obs = observe(
        &crate::instance_reads::uncached(ec2),
        &config(),
        &a,
        &[SubnetId::new("subnet-b"), SubnetId::new("subnet-a")],
        None,
    )
    .await
    .unwrap();
    let ids: Vec<&str> = obs.groups.iter().map(|g| g.id.as_str()).collect();
    assert_eq!(ids, ["sg-former", "sg-n"]);
    assert_eq!(
        obs.instance_groups,
        BTreeMap::from([
            ("i-1".to_owned(), SecurityGroupId::new("sg-n")),
            ("i-2".to_owned(), SecurityGroupId::new("sg-n")),
        ])
    );
    assert_eq!(obs.health_sources, ["10.1.1.0/24", "10.1.2.0/24"]);
    // The terminated instance is never registered as a target (the plan drops it).
    assert_eq!(obs.not_running.iter().collect::<Vec<_>>(), ["i-3"]);
}

#[tokio::test]
async fn observe_reads_untagged_instance_groups_in_one_more_call_and_skips_foreign_ones() {
    let mut ec2 = MockEc2::new();
    ec2.expect_instances_by_id().times(1).returning(|_| {
        Box::pin(async {
            Ok(vec![
                instance("i-1", &["sg-plain"]),
                instance("i-2", &["sg-plain", "sg-foreign"]),
            ])
        })
    });
    ec2.expect_security_groups()
        .times(1)
        .withf(|f| has(f, "tag-key", &["kubernetes.io/cluster/c1"]))
        .returning(|_| Box::pin(async { Ok(vec![]) }));
    ec2.expect_security_groups()
        .times(1)
        .withf(|f| has(f, "group-id", &["sg-foreign", "sg-plain"]))
        .returning(|_| {
            Box::pin(async {
                Ok(vec![
                    group("sg-plain", Tags::new(), &[]),
                    group(
                        "sg-foreign",
                        Tags::from([("kubernetes.io/cluster/other".into(), "owned".into())]),
                        &[],
                    ),
                ])
            })
        });
    // Health covered by the clients: the subnets are not read.
    let a = access(&[("tcp", 30080)], &["0.0.0.0/0"], &[30080], &["i-1", "i-2"]);
    let obs = observe(
        &crate::instance_reads::uncached(ec2),
        &config(),
        &a,
        &[SubnetId::new("subnet-a")],
        None,
    )
    .await
    .unwrap();
    let ids: Vec<&str> = obs.groups.iter().map(|g| g.id.as_str()).collect();
    assert_eq!(ids, ["sg-plain"]);
    assert_eq!(obs.instance_groups.len(), 2);
    assert!(obs.health_sources.is_empty());
}

#[tokio::test]
async fn observe_for_deletion_reads_only_the_cluster_groups() {
    let mut ec2 = MockEc2::new();
    ec2.expect_security_groups()
        .times(1)
        .returning(|_| Box::pin(async { Ok(vec![group("sg-n", tagged(), &[])]) }));
    let obs = observe(
        &crate::instance_reads::uncached(ec2),
        &config(),
        &NodeAccess::none(LB),
        &[SubnetId::new("subnet-a")],
        None,
    )
    .await
    .unwrap();
    assert_eq!(obs.groups.len(), 1);
    assert!(obs.instance_groups.is_empty());
}

#[tokio::test]
async fn observe_in_legacy_mode_also_reads_groups_with_the_legacy_tag() {
    let mut ec2 = MockEc2::new();
    ec2.expect_security_groups()
        .times(1)
        .withf(|f| has(f, "tag-key", &["kubernetes.io/cluster/c1"]))
        .returning(|_| Box::pin(async { Ok(vec![]) }));
    ec2.expect_security_groups()
        .times(1)
        .withf(|f| has(f, "tag:KubernetesCluster", &["c1"]))
        .returning(|_| {
            Box::pin(async {
                Ok(vec![group(
                    "sg-old",
                    Tags::from([("KubernetesCluster".into(), "c1".into())]),
                    &[],
                )])
            })
        });
    let config = LoadBalancerConfig::new(ClusterTags::new("c1", true).unwrap(), VpcId::new("vpc-1"));
    let obs = observe(
        &crate::instance_reads::uncached(ec2),
        &config,
        &NodeAccess::none(LB),
        &[],
        None,
    )
    .await
    .unwrap();
    assert_eq!(obs.groups[0].id.as_str(), "sg-old");
}

#[tokio::test]
async fn an_instance_with_two_cluster_groups_is_skipped_naming_them() {
    let mut ec2 = MockEc2::new();
    ec2.expect_instances_by_id()
        .returning(|_| Box::pin(async { Ok(vec![instance("i-1", &["sg-a", "sg-b"])]) }));
    ec2.expect_security_groups().returning(|_| {
        Box::pin(async { Ok(vec![group("sg-a", tagged(), &[]), group("sg-b", tagged(), &[])]) })
    });
    ec2.expect_subnets()
        .returning(|_| Box::pin(async { Ok(Vec::new()) }));
    let a = access(&[("tcp", 30080)], &["0.0.0.0/0"], &[30080], &["i-1"]);
    // Only the instance is skipped (not registered, no rule): the load balancer goes on.
    let observed = observe(&crate::instance_reads::uncached(ec2), &config(), &a, &[], None)
        .await
        .unwrap();
    assert!(observed.instance_groups.is_empty());
    assert!(observed.not_running.contains("i-1"));
    let why = &observed.skipped["i-1"];
    assert!(why.contains("sg-a") && why.contains("sg-b"), "{why}");
}

#[tokio::test]
async fn a_missing_load_balancer_subnet_is_an_error_not_a_revocation() {
    let mut ec2 = MockEc2::new();
    ec2.expect_instances_by_id()
        .returning(|_| Box::pin(async { Ok(vec![instance("i-1", &["sg-n"])]) }));
    ec2.expect_security_groups()
        .returning(|_| Box::pin(async { Ok(vec![group("sg-n", tagged(), &[])]) }));
    ec2.expect_subnets()
        .returning(|_| Box::pin(async { Ok(vec![subnet("subnet-a", "10.1.1.0/24")]) }));
    let a = access(&[("tcp", 30080)], &["0.0.0.0/0"], &[32000], &["i-1"]);
    let err = observe(
        &crate::instance_reads::uncached(ec2),
        &config(),
        &a,
        &[SubnetId::new("subnet-a"), SubnetId::new("subnet-gone")],
        None,
    )
    .await
    .unwrap_err();
    assert!(format!("{err:?}").contains("subnet-gone"), "{err:?}");
}

// --- apply ---

#[tokio::test]
async fn apply_authorizes_in_one_call_with_descriptions() {
    let mut ec2 = MockEc2::new();
    ec2.expect_authorize_ingress()
        .times(1)
        .withf(|g, p| {
            g.as_str() == "sg-n"
                && p.len() == 2
                && p.iter().flat_map(|p| &p.ip_ranges).all(|r| {
                    r.description
                        .as_deref()
                        .is_some_and(|d| d.starts_with("kubernetes.io/rule/nlb/"))
                })
        })
        .returning(|_, _| Box::pin(async { Ok(()) }));
    let change = RuleChange::Authorize {
        group: "sg-n".into(),
        rules: vec![
            rule("tcp", 30080, 30080, "0.0.0.0/0", &client(LB)),
            DescribedRule::mtu("0.0.0.0/0"),
        ],
    };
    apply(&ec2, &change).await.unwrap();
}

#[tokio::test]
async fn apply_skips_duplicates_rule_by_rule_after_a_conflict() {
    let mut ec2 = MockEc2::new();
    ec2.expect_authorize_ingress()
        .times(1)
        .withf(|_, p| p.len() == 2)
        .returning(|_, _| Box::pin(async { Err(err(ErrorKind::AlreadyExists)) }));
    ec2.expect_authorize_ingress()
        .times(2)
        .withf(|_, p| p.len() == 1)
        .returning(|_, p| {
            let dup = p[0].protocol == "icmp";
            Box::pin(async move {
                if dup {
                    Err(err(ErrorKind::AlreadyExists))
                } else {
                    Ok(())
                }
            })
        });
    let change = RuleChange::Authorize {
        group: "sg-n".into(),
        rules: vec![
            rule("tcp", 30080, 30080, "0.0.0.0/0", &client(LB)),
            DescribedRule::mtu("0.0.0.0/0"),
        ],
    };
    apply(&ec2, &change).await.unwrap();
}

#[tokio::test]
async fn apply_revokes_what_is_left_after_a_not_found() {
    let mut ec2 = MockEc2::new();
    ec2.expect_revoke_ingress()
        .times(1)
        .withf(|_, p| p.len() == 2)
        .returning(|_, _| Box::pin(async { Err(err(ErrorKind::NotFound)) }));
    ec2.expect_revoke_ingress()
        .times(2)
        .withf(|_, p| p.len() == 1)
        .returning(|_, p| {
            let gone = p[0].protocol == "icmp";
            Box::pin(async move {
                if gone {
                    Err(err(ErrorKind::NotFound))
                } else {
                    Ok(())
                }
            })
        });
    let change = RuleChange::Revoke {
        group: "sg-n".into(),
        rules: vec![
            rule("tcp", 30080, 30080, "0.0.0.0/0", &client(LB)),
            DescribedRule::mtu("0.0.0.0/0"),
        ],
    };
    apply(&ec2, &change).await.unwrap();
}

#[tokio::test]
async fn apply_reports_other_failures() {
    let mut ec2 = MockEc2::new();
    ec2.expect_authorize_ingress()
        .times(1)
        .returning(|_, _| Box::pin(async { Err(err(ErrorKind::LimitExceeded)) }));
    ec2.expect_revoke_ingress()
        .times(1)
        .returning(|_, _| Box::pin(async { Err(err(ErrorKind::AccessDenied)) }));
    let rules = vec![rule("tcp", 30080, 30080, "0.0.0.0/0", &client(LB))];
    let add = RuleChange::Authorize {
        group: "sg-n".into(),
        rules: rules.clone(),
    };
    let remove = RuleChange::Revoke {
        group: "sg-n".into(),
        rules,
    };
    assert!(matches!(apply(&ec2, &add).await, Err(Error::Aws { .. })));
    assert!(matches!(apply(&ec2, &remove).await, Err(Error::Aws { .. })));
}

#[test]
fn cidrs_are_compared_in_the_form_aws_keeps() {
    assert_eq!(canonical_cidr("10.1.2.3/8"), "10.0.0.0/8");
    assert_eq!(canonical_cidr(" 0.0.0.0/0"), "0.0.0.0/0");
    assert_eq!(canonical_cidr("198.51.100.7/32"), "198.51.100.7/32");
    assert_eq!(canonical_cidr("2001:DB8:0:0:1::/32"), "2001:db8::/32");
    assert_eq!(canonical_cidr("::/0"), "::/0");
    assert_eq!(canonical_cidr("not-a-cidr"), "not-a-cidr");
    assert_eq!(canonical_cidr("10.0.0.0/33"), "10.0.0.0/33");
}

/// Log lines captured from the thread's default subscriber.
#[derive(Clone, Default)]
struct Captured(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Captured {
    type Writer = Self;

    fn make_writer(&'a self) -> Self {
        self.clone()
    }
}

#[tokio::test]
async fn instances_without_a_node_group_are_one_warning_per_load_balancer() {
    let captured = Captured::default();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(captured.clone())
        .with_ansi(false)
        .finish();
    let _default = tracing::subscriber::set_default(subscriber);
    let ids: Vec<String> = (1..=8).map(|n| format!("i-{n}")).collect();
    let known: Vec<Instance> = ids.iter().map(|id| instance(id, &[])).collect();
    let mut ec2 = MockEc2::new();
    ec2.expect_instances_by_id().returning(move |_| {
        let known = known.clone();
        Box::pin(async move { Ok(known) })
    });
    ec2.expect_security_groups()
        .returning(|_| Box::pin(async { Ok(vec![]) }));
    let refs: Vec<&str> = ids.iter().map(String::as_str).collect();
    let a = access(&[("tcp", 30080)], &["0.0.0.0/0"], &[30080], &refs);
    let obs = observe(&crate::instance_reads::uncached(ec2), &config(), &a, &[], None)
        .await
        .unwrap();
    assert!(obs.instance_groups.is_empty());

    let text = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
    let lines: Vec<&str> = text.lines().filter(|l| l.contains("no security group")).collect();
    assert_eq!(lines.len(), 1, "{text}");
    assert!(lines[0].contains("count=8"), "{}", lines[0]);
    assert!(
        lines[0].contains("i-1, i-2, i-3, i-4, i-5 and 3 more"),
        "{}",
        lines[0]
    );
}
