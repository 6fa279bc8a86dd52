//! Every Classic ELB port method against moto: the happy path and the not-found mapping.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::too_many_lines)]

mod common;

use ccm_aws_api::{
    Ec2, Elb, ErrorKind, InstanceId, SubnetId, Tags, VpcId,
    ec2::NewSecurityGroup,
    elb::{
        ClassicAccessLog, ClassicAttributes, ClassicHealthCheck, ClassicListener, ClassicPolicy,
        NewClassicLoadBalancer,
    },
};
use ccm_testing::unique_name;
use common::{adapter, fixture};

#[tokio::test]
async fn classic_load_balancer_lifecycle() {
    let fx = fixture("elb", 2).await;
    let adapter = adapter(None).await;
    let (ec2, elb) = (adapter.ec2(), adapter.elb());
    let sg = ec2
        .create_security_group(&NewSecurityGroup {
            name: unique_name("elb-sg"),
            description: "elb test".into(),
            vpc_id: VpcId::new(&fx.vpc_id),
            tags: Tags::new(),
        })
        .await
        .unwrap();
    let name = unique_name("elb");
    let tags = Tags::from([("kubernetes.io/cluster/test".to_owned(), "owned".to_owned())]);
    let dns = elb
        .create_load_balancer(&NewClassicLoadBalancer {
            name: name.clone(),
            internal: true,
            subnets: vec![SubnetId::new(&fx.subnet_id)],
            security_groups: vec![sg.clone()],
            listeners: vec![ClassicListener::new("TCP", 80, "TCP", 30080)],
            tags: tags.clone(),
        })
        .await
        .unwrap();
    assert!(dns.starts_with(&name), "{dns}");

    let lb = elb.load_balancer(&name).await.unwrap().unwrap();
    assert_eq!(lb.dns_name, dns);
    // As on AWS (scripts/moto-server.py): a new Classic ELB has the default health check.
    let default = ClassicHealthCheck {
        target: "TCP:30080".into(),
        interval: 30,
        timeout: 5,
        healthy_threshold: 10,
        unhealthy_threshold: 2,
    };
    assert_eq!(lb.health_check, Some(default));
    assert!(lb.internal);
    assert_eq!(lb.subnets, [SubnetId::new(&fx.subnet_id)]);
    assert_eq!(lb.security_groups, std::slice::from_ref(&sg));
    assert_eq!(lb.listeners, [ClassicListener::new("TCP", 80, "TCP", 30080)]);
    assert_eq!(elb.tags(&name).await.unwrap(), tags);

    elb.create_listeners(&name, &[ClassicListener::new("TCP", 443, "TCP", 30443)])
        .await
        .unwrap();
    elb.delete_listeners(&name, &[80]).await.unwrap();
    let health = ClassicHealthCheck {
        target: "TCP:30443".into(),
        interval: 10,
        timeout: 5,
        healthy_threshold: 2,
        unhealthy_threshold: 6,
    };
    elb.configure_health_check(&name, &health).await.unwrap();
    let ids: Vec<InstanceId> = fx.instance_ids.iter().map(InstanceId::new).collect();
    elb.register_instances(&name, &ids).await.unwrap();
    elb.deregister_instances(&name, &ids[..1]).await.unwrap();
    let lb = elb.load_balancer(&name).await.unwrap().unwrap();
    assert_eq!(
        lb.listeners
            .iter()
            .map(|l| l.load_balancer_port)
            .collect::<Vec<_>>(),
        [443]
    );
    assert_eq!(lb.health_check, Some(health));
    assert_eq!(lb.instances, ids[1..]);

    let attributes = ClassicAttributes {
        cross_zone: true,
        access_log: ClassicAccessLog::default(),
        connection_draining_enabled: true,
        connection_draining_timeout: Some(300),
        idle_timeout: Some(120),
    };
    elb.modify_attributes(&name, &attributes).await.unwrap();
    assert_eq!(elb.attributes(&name).await.unwrap(), attributes);

    let sg2 = ec2
        .create_security_group(&NewSecurityGroup {
            name: unique_name("elb-sg2"),
            description: "elb test".into(),
            vpc_id: VpcId::new(&fx.vpc_id),
            tags: Tags::new(),
        })
        .await
        .unwrap();
    elb.apply_security_groups(&name, std::slice::from_ref(&sg2))
        .await
        .unwrap();
    let subnet2 = common::raw_ec2()
        .await
        .create_subnet()
        .vpc_id(&fx.vpc_id)
        .cidr_block("10.77.2.0/24")
        .availability_zone("us-east-1b")
        .send()
        .await
        .unwrap();
    let subnet2 = SubnetId::new(subnet2.subnet().unwrap().subnet_id().unwrap());
    elb.attach_subnets(&name, std::slice::from_ref(&subnet2))
        .await
        .unwrap();
    let lb = elb.load_balancer(&name).await.unwrap().unwrap();
    assert_eq!(lb.security_groups, [sg2]);
    assert!(lb.subnets.contains(&subnet2), "{:?}", lb.subnets);
    elb.detach_subnets(&name, std::slice::from_ref(&subnet2))
        .await
        .unwrap();
    assert!(
        !elb.load_balancer(&name)
            .await
            .unwrap()
            .unwrap()
            .subnets
            .contains(&subnet2)
    );

    elb.add_tags(&name, &Tags::from([("extra".to_owned(), "1".to_owned())]))
        .await
        .unwrap();
    assert_eq!(
        elb.tags(&name).await.unwrap().get("extra").map(String::as_str),
        Some("1")
    );

    let proxy = ClassicPolicy {
        name: "k8s-proxyprotocol-enabled".into(),
        type_name: "ProxyProtocolPolicyType".into(),
        attributes: vec![("ProxyProtocol".into(), "true".into())],
    };
    elb.create_policy(&name, &proxy).await.unwrap();
    let found = elb
        .policies(&name, std::slice::from_ref(&proxy.name))
        .await
        .unwrap();
    assert_eq!(found, std::slice::from_ref(&proxy));
    elb.set_backend_policies(&name, 30080, std::slice::from_ref(&proxy.name))
        .await
        .unwrap();
    let lb = elb.load_balancer(&name).await.unwrap().unwrap();
    assert_eq!(lb.backend_policies[0].instance_port, 30080);
    assert_eq!(
        lb.backend_policies[0].policy_names,
        std::slice::from_ref(&proxy.name)
    );
    elb.set_listener_policies(&name, 443, &[]).await.unwrap();
    let missing_policy = elb
        .policies(&name, &["no-such-policy".to_owned()])
        .await
        .unwrap_err();
    assert_eq!(missing_policy.kind(), ErrorKind::NotFound, "{missing_policy}");

    elb.delete_load_balancer(&name).await.unwrap();
    assert_eq!(
        elb.load_balancer(&name).await.unwrap(),
        None,
        "deleted: not found maps to None"
    );
    ec2.delete_security_group(&sg).await.unwrap();
}

#[tokio::test]
async fn unknown_classic_load_balancers_are_not_found() {
    let adapter = adapter(None).await;
    let name = unique_name("elb-missing");
    assert_eq!(adapter.elb().load_balancer(&name).await.unwrap(), None);

    // moto answers most calls on an unknown load balancer with HTTP 500; AWS says `LoadBalancerNotFound`
    // (HTTP 400). The proxy answers as AWS does, so the mapping is checked on a real SDK error.
    let proxy = ccm_testing::FaultProxy::start(&ccm_testing::TestEnv::get().aws_endpoint)
        .await
        .unwrap();
    let adapter = common::adapter(Some(&proxy.url())).await;
    let elb = adapter.elb();
    for action in [
        "DescribeLoadBalancerAttributes",
        "DeleteLoadBalancerListeners",
        "RegisterInstancesWithLoadBalancer",
    ] {
        proxy.inject(action, ccm_testing::Fault::error(400, "LoadBalancerNotFound"), 1);
    }
    let err = elb.attributes(&name).await.unwrap_err();
    assert_eq!(
        (err.kind(), err.code()),
        (ErrorKind::NotFound, Some("LoadBalancerNotFound")),
        "{err}"
    );
    let err = elb.delete_listeners(&name, &[80]).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotFound, "{err}");
    let err = elb
        .register_instances(&name, &[InstanceId::new("i-1")])
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotFound, "{err}");
}

/// The leak report's listing: every load balancer of the region, in pages of 100 (a description lists every
/// registered instance: pages of AWS's 400 were a large transient each drift pass), and tags 20 names a call
/// (AWS's limit), a name deleted since the listing being left out instead of failing its batch.
#[tokio::test]
async fn every_classic_load_balancer_is_listed_with_its_tags() {
    let fx = fixture("elball", 0).await;
    let proxy = ccm_testing::FaultProxy::start(&ccm_testing::TestEnv::get().aws_endpoint)
        .await
        .unwrap();
    let adapter = adapter(Some(&proxy.url())).await;
    let elb = adapter.elb();
    let mut names = Vec::new();
    for i in 0..21 {
        let name = unique_name(&format!("all{i}"));
        let tags = Tags::from([("n".to_owned(), i.to_string())]);
        elb.create_load_balancer(&NewClassicLoadBalancer {
            name: name.clone(),
            internal: true,
            subnets: vec![SubnetId::new(&fx.subnet_id)],
            security_groups: Vec::new(),
            listeners: vec![ClassicListener::new("TCP", 80, "TCP", 30080)],
            tags,
        })
        .await
        .unwrap();
        names.push(name);
    }
    let all = elb.all_load_balancers().await.unwrap();
    for name in &names {
        let lb = all.iter().find(|lb| lb.name == *name).expect("listed");
        assert!(lb.created_time.is_some(), "{name} has no creation time");
    }
    let pages = proxy.bodies("DescribeLoadBalancers");
    assert!(!pages.is_empty());
    for body in &pages {
        assert!(body.contains("PageSize=100"), "{body}");
    }

    let mut asked = names.clone();
    asked.push(unique_name("gone"));
    let before = adapter.metrics().attempts("elasticloadbalancing", "DescribeTags");
    let tags = elb.tags_of(&asked).await.unwrap();
    let calls = adapter.metrics().attempts("elasticloadbalancing", "DescribeTags") - before;
    assert_eq!(tags.len(), 21);
    for (i, name) in names.iter().enumerate() {
        assert_eq!(tags[name], Tags::from([("n".to_owned(), i.to_string())]));
    }
    // One call for the first 20; the second batch fails on the missing name and is asked name by name.
    assert_eq!(calls, 4);
    for name in &names {
        elb.delete_load_balancer(name).await.unwrap();
    }
}
