//! Adoption with consent against moto (NLBs): a load balancer another tool made (here as the AWS Load Balancer
//! Controller names and tags its NLBs and target groups) is adopted by a Service that consents
//! (`aws-load-balancer-adopt`) only once someone with AWS rights hands it over (the tag
//! `kubernetes.io/hand-over/<cluster ID>=<namespace>/<name>`); it keeps its DNS name, its previous target group
//! goes once the listener has moved, and the Service's deletion releases it (targets deregistered, the nodes'
//! rules revoked, this cluster's tags removed, handed over to the Service's name) so that the Service re-created
//! gets it back with the same DNS name.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::too_many_lines)]

use ccm_aws_api::{
    Elbv2, SubnetId, Tags, VpcId,
    elbv2::{
        NewListener, NewNetworkLoadBalancer, NewTargetGroup, SubnetMapping, TargetGroupHealthCheck,
        TargetType,
    },
};
use ccm_cloud_provider::{LoadBalancer, NodeView};
use ccm_load_balancers::annotations::Key;
use ccm_testing::lb_world::{Lbs, World, diff, mutation_counts, service, uid};
use k8s_openapi::api::core::v1::Service;

const CLUSTER: &str = "kubernetes";

fn tags(pairs: &[(&str, &str)]) -> Tags {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

/// An NLB with one TCP listener on 80 forwarding to a target group, made and tagged as the AWS Load Balancer
/// Controller makes them (`k8s-<namespace:8>-<name:8>-<hash:10>`, its stack and resource tags): (NLB ARN, DNS
/// name, target group ARN).
async fn albc_made(w: &World, name: &str) -> (String, String, String) {
    let elbv2 = w.adapter.elbv2();
    let stack = [
        ("elbv2.k8s.aws/cluster", "albc-cluster"),
        ("service.k8s.aws/stack", "moto/web"),
    ];
    let mut lb_tags = tags(&stack);
    lb_tags.insert("service.k8s.aws/resource".into(), "LoadBalancer".into());
    let lb = elbv2
        .create_load_balancer(&NewNetworkLoadBalancer {
            name: name.to_owned(),
            internal: false,
            subnet_mappings: vec![SubnetMapping {
                subnet_id: Some(SubnetId::new(w.subnets[0].clone())),
                ..SubnetMapping::default()
            }],
            security_groups: None,
            ip_address_type: None,
            tags: lb_tags,
        })
        .await
        .unwrap();
    let mut tg_tags = tags(&stack);
    tg_tags.insert("service.k8s.aws/resource".into(), "moto/web:80".into());
    let suffix: String = uid().chars().filter(char::is_ascii_hexdigit).take(10).collect();
    let group = elbv2
        .create_target_group(&NewTargetGroup {
            name: format!("k8s-moto-web-{suffix}"),
            protocol: "TCP".into(),
            port: 30080,
            vpc_id: VpcId::new(w.vpc.clone()),
            target_type: TargetType::Instance,
            ip_address_type: ccm_aws_api::elbv2::TargetIpFamily::Ipv4,
            health_check: TargetGroupHealthCheck::default(),
            tags: tg_tags,
        })
        .await
        .unwrap();
    elbv2
        .create_listener(&NewListener {
            load_balancer_arn: lb.arn.clone(),
            port: 80,
            protocol: "TCP".into(),
            certificate_arn: None,
            ssl_policy: None,
            alpn_policy: None,
            target_group_arn: group.arn.clone(),
            tags: tags(&stack),
        })
        .await
        .unwrap();
    (lb.arn, lb.dns_name, group.arn)
}

async fn ensure(lbs: &Lbs, svc: &Service, w: &World) -> Result<String, String> {
    let nodes = w.nodes();
    let nodes: Vec<&NodeView> = nodes.iter().collect();
    lbs.ensure_load_balancer(CLUSTER, svc, &nodes)
        .await
        .map(|status| {
            status.ingress.unwrap_or_default()[0]
                .hostname
                .clone()
                .unwrap_or_default()
        })
        .map_err(|e| e.to_string())
}

async fn lb_tags(w: &World, arn: &str) -> Tags {
    let elbv2 = w.adapter.elbv2();
    elbv2
        .tags(&[arn.to_owned()])
        .await
        .unwrap()
        .remove(arn)
        .unwrap_or_default()
}

/// Whether the nodes' group admits anything on `port`.
async fn node_port_open(w: &World, port: i32) -> bool {
    let group = w.group(&w.node_group).await.unwrap();
    group.ingress.iter().any(|p| p.from_port == Some(port))
}

#[tokio::test]
async fn an_albc_made_nlb_is_adopted_once_handed_over_released_and_adopted_again() {
    let w = ccm_testing::lb_world::world(191, "adopt", false).await;
    let lbs = w.lbs(w.config.clone());
    let elbv2 = w.adapter.elbv2();
    let suffix: String = uid().chars().filter(char::is_ascii_hexdigit).take(10).collect();
    let name = format!("k8s-moto-web-{suffix}");
    let (arn, dns, albc_group) = albc_made(&w, &name).await;
    let hand_over = format!("kubernetes.io/hand-over/{}", w.config.cluster.id());
    let first_uid = uid();
    let annotations = |adopt: &'static str| {
        [
            (Key::Type, "nlb"),
            (Key::LoadBalancerName, name.as_str()),
            (Key::Adopt, adopt),
        ]
    };
    let consenting = service(&first_uid, &[(80, 30080)], &annotations("true"));
    let before = lb_tags(&w, &arn).await;

    // Consent alone adopts nothing: the refusal names the hand-over tag, and nothing is written.
    let counts = mutation_counts(w.adapter.metrics());
    let e = ensure(&lbs, &consenting, &w).await.unwrap_err();
    assert!(e.contains(&format!("{hand_over}=moto/web")), "{e}");
    // The hand-over tag alone adopts nothing either: the Service must consent.
    elbv2
        .add_tags(
            std::slice::from_ref(&arn),
            &tags(&[(hand_over.as_str(), "moto/web")]),
        )
        .await
        .unwrap();
    let unwilling = service(&first_uid, &[(80, 30080)], &annotations("false"));
    let e = ensure(&lbs, &unwilling, &w).await.unwrap_err();
    assert!(e.contains("aws-load-balancer-adopt"), "{e}");
    let mut expected = before.clone();
    expected.insert(hand_over.clone(), "moto/web".into());
    assert_eq!(lb_tags(&w, &arn).await, expected);
    let mut writes = diff(&mutation_counts(w.adapter.metrics()), &counts);
    writes.remove("AddTags");
    assert_eq!(writes, Default::default(), "only the test's own hand-over tag");

    // Handed over and consented: adopted under its DNS name; the previous tool's group goes.
    assert_eq!(ensure(&lbs, &consenting, &w).await.unwrap(), dns);
    let adopted = lb_tags(&w, &arn).await;
    assert_eq!(adopted[&w.config.cluster.key()], "owned");
    assert_eq!(adopted["kubernetes.io/service-name"], "moto/web");
    assert_eq!(adopted["kubernetes.io/service-uid"], first_uid);
    assert_eq!(adopted["kubernetes.io/adopted"], "true");
    let listener = elbv2.listeners(&arn).await.unwrap().remove(0);
    let ours = listener.default_target_groups[0].clone();
    assert_ne!(ours, albc_group);
    let albc_group_name = albc_group.split('/').nth(1).unwrap();
    assert_eq!(
        elbv2.target_group(albc_group_name).await.unwrap(),
        None,
        "the adopted NLB's previous target group is deleted"
    );
    assert_eq!(elbv2.target_health(&ours).await.unwrap().len(), w.instances.len());
    assert!(node_port_open(&w, 30080).await);
    // Steady afterwards.
    let counts = mutation_counts(w.adapter.metrics());
    ensure(&lbs, &consenting, &w).await.unwrap();
    assert_eq!(
        diff(&mutation_counts(w.adapter.metrics()), &counts),
        Default::default()
    );

    // Deleted: released, not deleted, handed over to the Service's name.
    lbs.ensure_load_balancer_deleted(CLUSTER, &consenting)
        .await
        .unwrap();
    let lb = elbv2.load_balancer(&name).await.unwrap().expect("kept");
    assert_eq!(lb.dns_name, dns);
    let released = lb_tags(&w, &arn).await;
    for key in [
        w.config.cluster.key().as_str(),
        "kubernetes.io/service-name",
        "kubernetes.io/service-uid",
        "kubernetes.io/adopted",
    ] {
        assert!(!released.contains_key(key), "{key} left: {released:?}");
    }
    assert_eq!(released[&hand_over], "moto/web");
    assert_eq!(released["elbv2.k8s.aws/cluster"], "albc-cluster");
    assert!(elbv2.target_health(&ours).await.unwrap().is_empty());
    let group_tags = lb_tags(&w, &ours).await;
    assert!(
        !group_tags.contains_key(&w.config.cluster.key()),
        "{group_tags:?}"
    );
    assert!(!node_port_open(&w, 30080).await);
    // A deletion repeated (a retried finalizer) leaves the released NLB alone.
    lbs.ensure_load_balancer_deleted(CLUSTER, &consenting)
        .await
        .unwrap();
    assert_eq!(lb_tags(&w, &arn).await, released);

    // Re-created (a new UID) with consent: the same NLB, the same DNS name.
    let second_uid = uid();
    let recreated = service(&second_uid, &[(80, 30080)], &annotations("true"));
    assert_eq!(ensure(&lbs, &recreated, &w).await.unwrap(), dns);
    let readopted = lb_tags(&w, &arn).await;
    assert_eq!(readopted["kubernetes.io/service-uid"], second_uid);
    assert_eq!(readopted[&w.config.cluster.key()], "owned");
    assert_eq!(elbv2.target_health(&ours).await.unwrap().len(), w.instances.len());

    // Told to delete it: deleted.
    let mut deleting = recreated.clone();
    deleting
        .metadata
        .annotations
        .as_mut()
        .unwrap()
        .insert(Key::ReleaseOnDeletion.name().to_owned(), "false".to_owned());
    lbs.ensure_load_balancer_deleted(CLUSTER, &deleting)
        .await
        .unwrap();
    assert_eq!(elbv2.load_balancer(&name).await.unwrap(), None);
}

/// Another Service of this cluster holds the NLB: a hand-over tag naming a second Service does not take it
/// away (that Service must release it first), and nothing is written.
#[tokio::test]
async fn a_load_balancer_held_by_another_service_is_not_adopted() {
    let w = ccm_testing::lb_world::world(192, "adopt2", false).await;
    let lbs = w.lbs(w.config.clone());
    let name = format!(
        "held-{}",
        uid()
            .chars()
            .filter(char::is_ascii_hexdigit)
            .take(10)
            .collect::<String>()
    );
    let holder = service(
        &uid(),
        &[(80, 30080)],
        &[(Key::Type, "nlb"), (Key::LoadBalancerName, &name)],
    );
    ensure(&lbs, &holder, &w).await.unwrap();
    let lb = w.adapter.elbv2().load_balancer(&name).await.unwrap().unwrap();
    let hand_over = format!("kubernetes.io/hand-over/{}", w.config.cluster.id());
    w.adapter
        .elbv2()
        .add_tags(
            std::slice::from_ref(&lb.arn),
            &tags(&[(hand_over.as_str(), "other/web")]),
        )
        .await
        .unwrap();
    let mut other = service(
        &uid(),
        &[(80, 30081)],
        &[
            (Key::Type, "nlb"),
            (Key::LoadBalancerName, &name),
            (Key::Adopt, "true"),
        ],
    );
    other.metadata.namespace = Some("other".to_owned());
    let counts = mutation_counts(w.adapter.metrics());
    let e = ensure(&lbs, &other, &w).await.unwrap_err();
    assert!(e.contains("Service moto/web"), "{e}");
    assert_eq!(
        diff(&mutation_counts(w.adapter.metrics()), &counts),
        Default::default()
    );
    assert_eq!(
        lb_tags(&w, &lb.arn).await["kubernetes.io/service-name"],
        "moto/web"
    );
    lbs.ensure_load_balancer_deleted(CLUSTER, &holder).await.unwrap();
}

/// A Classic ELB made by hand: adopted once handed over, released by the deletion (instances deregistered, this
/// cluster's tags gone from it and its managed group), adopted again by the re-created Service under the same
/// DNS name, and deleted when the Service says so.
#[tokio::test]
async fn a_hand_made_classic_elb_is_adopted_released_and_adopted_again() {
    use ccm_aws_api::{
        Elb,
        elb::{ClassicListener, NewClassicLoadBalancer},
    };
    let w = ccm_testing::lb_world::world(198, "adoptclb", false).await;
    let lbs = w.lbs(w.config.clone());
    let elb = w.adapter.elb();
    let name = format!(
        "hand-{}",
        uid()
            .chars()
            .filter(char::is_ascii_hexdigit)
            .take(10)
            .collect::<String>()
    );
    let made = elb
        .create_load_balancer(&NewClassicLoadBalancer {
            name: name.clone(),
            internal: false,
            subnets: vec![SubnetId::new(w.subnets[0].clone())],
            security_groups: Vec::new(),
            listeners: vec![ClassicListener::new("TCP", 80, "TCP", 30080)],
            tags: tags(&[("team", "payments")]),
        })
        .await
        .unwrap();
    let hand_over = format!("kubernetes.io/hand-over/{}", w.config.cluster.id());
    elb.add_tags(&name, &tags(&[(hand_over.as_str(), "moto/web")]))
        .await
        .unwrap();
    let annotations = [(Key::LoadBalancerName, name.as_str()), (Key::Adopt, "true")];
    let first = service(&uid(), &[(80, 30080)], &annotations);
    assert_eq!(ensure(&lbs, &first, &w).await.unwrap(), made);
    let adopted = elb.tags(&name).await.unwrap();
    assert_eq!(adopted[&w.config.cluster.key()], "owned");
    assert_eq!(adopted["kubernetes.io/adopted"], "true");
    assert_eq!(adopted["team"], "payments");
    let lb = elb.load_balancer(&name).await.unwrap().unwrap();
    assert_eq!(lb.instances.len(), w.instances.len());
    let managed = lb.security_groups[0].to_string();

    lbs.ensure_load_balancer_deleted(CLUSTER, &first).await.unwrap();
    let lb = elb.load_balancer(&name).await.unwrap().expect("kept");
    assert!(lb.instances.is_empty());
    let released = elb.tags(&name).await.unwrap();
    assert!(!released.contains_key(&w.config.cluster.key()), "{released:?}");
    assert!(!released.contains_key("kubernetes.io/adopted"), "{released:?}");
    assert_eq!(released[&hand_over], "moto/web");
    let group = w.group(&managed).await.expect("the managed group stays");
    assert!(
        !group.tags.contains_key(&w.config.cluster.key()),
        "{:?}",
        group.tags
    );

    let second_uid = uid();
    let recreated = service(&second_uid, &[(80, 30080)], &annotations);
    assert_eq!(ensure(&lbs, &recreated, &w).await.unwrap(), made);
    assert_eq!(
        elb.tags(&name).await.unwrap()["kubernetes.io/service-uid"],
        second_uid
    );
    let mut deleting = recreated.clone();
    deleting
        .metadata
        .annotations
        .as_mut()
        .unwrap()
        .insert(Key::ReleaseOnDeletion.name().to_owned(), "false".to_owned());
    lbs.ensure_load_balancer_deleted(CLUSTER, &deleting)
        .await
        .unwrap();
    assert_eq!(elb.load_balancer(&name).await.unwrap(), None);
}
