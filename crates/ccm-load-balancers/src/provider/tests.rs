use super::{plan::plan_for, *};
use crate::{
    annotations::Key,
    classic::tests::{config, node, service},
};
use crate::{classic, dry_run::Changes};
use ccm_aws_api::ec2::{RouteTable, SecurityGroup, Subnet};
use ccm_aws_api::elb::ClassicLoadBalancer;
use ccm_aws_api::{SecurityGroupId, SubnetId, Tags, VpcId, ec2::MockEc2, elb::MockElb, elbv2::MockElbv2};

#[tokio::test]
async fn invalid_services_and_other_flavours_make_no_aws_call() {
    // Mocks without expectations panic on any call; only get and delete look for a Classic ELB by name.
    let mut ec2 = MockEc2::new();
    let mut elb = MockElb::new();
    let mut elbv2 = MockElbv2::new();
    elb.expect_load_balancer()
        .times(2)
        .returning(|_| Box::pin(async { Ok(None) }));
    elbv2
        .expect_load_balancer()
        .times(2)
        .returning(|_| Box::pin(async { Ok(None) }));
    // Delete sweeps both flavours' leftovers whatever the Service says: the two managed groups by name, the
    // region's target groups by the Service's prefix.
    ec2.expect_security_groups()
        .times(2)
        .returning(|_| Box::pin(async { Ok(vec![]) }));
    elbv2
        .expect_all_target_groups()
        .times(1)
        .returning(|| Box::pin(async { Ok(vec![]) }));
    let lbs = AwsLoadBalancers::new(ec2, elb, elbv2, config());
    let n = node("i-1");
    let invalid = service(
        &[(Key::ConnectionIdleTimeout, "0"), (Key::ProxyProtocol, "on")],
        &[(80, 30080)],
    );
    let e = lbs.ensure_load_balancer("k", &invalid, &[&n]).await.unwrap_err();
    let message = e.to_string();
    assert!(
        message.contains("connection-idle-timeout=\"0\": an integer from 1 to 4000")
            && message.contains("proxy-protocol=\"on\": one of *"),
        "{message}"
    );
    let e = lbs.update_load_balancer("k", &invalid, &[&n]).await.unwrap_err();
    assert!(e.to_string().contains("connection-idle-timeout"), "{e}");

    let external = service(&[(Key::Type, "nlb-ip")], &[(80, 30080)]);
    assert!(
        lbs.ensure_load_balancer("k", &external, &[&n])
            .await
            .unwrap_err()
            .is_implemented_elsewhere()
    );
    assert!(
        lbs.update_load_balancer("k", &external, &[&n])
            .await
            .unwrap_err()
            .is_implemented_elsewhere()
    );
    assert_eq!(lbs.get_load_balancer("k", &external).await.unwrap(), None);
    lbs.ensure_load_balancer_deleted("k", &external).await.unwrap();

    let nlb = service(&[(Key::Type, "nlb")], &[(80, 30080)]);
    assert_eq!(
        lbs.load_balancer_name("k", &nlb),
        "a0f1e2d3c4b5a69788796a5b4c3d2e1f"
    );
}

/// The Classic ELB as `desired` (registering `i-1`), as the ELB port shows it.
fn steady_classic_lb(desired: &crate::classic::Desired) -> ClassicLoadBalancer {
    let mut lb = ClassicLoadBalancer::new(&desired.name, "steady.us-east-1.elb.amazonaws.com");
    lb.subnets = vec![SubnetId::new("subnet-a")];
    lb.security_groups = vec![SecurityGroupId::new("sg-lb")];
    lb.listeners = vec![ccm_aws_api::elb::ClassicListener::new("TCP", 80, "TCP", 30080)];
    lb.health_check = Some(ccm_aws_api::elb::ClassicHealthCheck {
        target: "TCP:30080".into(),
        interval: 10,
        timeout: 5,
        healthy_threshold: 2,
        unhealthy_threshold: 6,
    });
    lb.instances = vec![ccm_aws_api::InstanceId::new("i-1")];
    lb
}

/// EC2 and ELB mocks that answer with a Classic ELB exactly as `desired` (one subnet, routed to the internet):
/// only reads are expected.
fn steady_classic_ports(desired: &crate::classic::Desired) -> (MockEc2, MockElb) {
    let mut ec2 = MockEc2::new();
    let mut elb = MockElb::new();
    ec2.expect_availability_zones()
        .times(1)
        .returning(|| Box::pin(async { Ok(vec![]) }));
    ec2.expect_subnets().returning(|_| {
        let mut s = Subnet::new(
            SubnetId::new("subnet-a"),
            VpcId::new("vpc-1"),
            "us-east-1a",
            Tags::new(),
        );
        s.tags.insert("kubernetes.io/role/elb".into(), "1".into());
        Box::pin(async move { Ok(vec![s]) })
    });
    ec2.expect_route_tables().returning(|_| {
        let mut t = RouteTable::new(
            ccm_aws_api::RouteTableId::new("rtb-1"),
            VpcId::new("vpc-1"),
            vec![ccm_aws_api::ec2::Route::to_gateway("0.0.0.0/0", "igw-1")],
            Tags::new(),
        );
        t.associations = vec![ccm_aws_api::ec2::RouteTableAssociation::new(None, true)];
        Box::pin(async move { Ok(vec![t]) })
    });
    let group_desired = desired.managed_group.clone().unwrap();
    ec2.expect_security_groups().returning(move |_| {
        let mut g = SecurityGroup::new(
            SecurityGroupId::new("sg-lb"),
            &group_desired.name,
            None,
            group_desired.tags.clone(),
        );
        g.ingress = group_desired
            .ingress
            .iter()
            .map(crate::shared::Rule::to_permission)
            .collect();
        Box::pin(async move { Ok(vec![g]) })
    });
    let lb = steady_classic_lb(desired);
    elb.expect_load_balancer().returning(move |_| {
        let lb = lb.clone();
        Box::pin(async move { Ok(Some(lb)) })
    });
    let tags = desired.tags.clone();
    elb.expect_tags().returning(move |_| {
        let t = tags.clone();
        Box::pin(async move { Ok(t) })
    });
    elb.expect_attributes().returning(|_| {
        Box::pin(async {
            Ok(ccm_aws_api::elb::ClassicAttributes {
                idle_timeout: Some(60),
                connection_draining_timeout: Some(300),
                ..Default::default()
            })
        })
    });
    (ec2, elb)
}

/// A steady Service: reads only, and the status from the existing load balancer.
#[tokio::test]
async fn ensure_of_a_steady_service_only_reads() {
    let svc = service(&[], &[(80, 30080)]);
    let n = node("i-1");
    let spec = crate::parse_service(&svc).unwrap();
    let mut c = config();
    c.manage_node_security_groups = false;
    let desired = crate::classic::build(&spec, &[&n], &c, &[SubnetId::new("subnet-a")]).unwrap();

    let (ec2, elb) = steady_classic_ports(&desired);
    let lbs = AwsLoadBalancers::new(ec2, elb, MockElbv2::new(), c);
    for _ in 0..2 {
        let status = lbs.ensure_load_balancer("k", &svc, &[&n]).await.unwrap();
        assert_eq!(
            status.ingress.unwrap()[0].hostname.as_deref(),
            Some("steady.us-east-1.elb.amazonaws.com")
        );
    }
    let ensured = lbs
        .ensure_load_balancer_reporting("k", &svc, &[&n])
        .await
        .unwrap();
    assert_eq!(ensured.notices, [], "nothing to tell");
    assert_eq!(
        lbs.dry_run("k", &svc, &[&n])
            .await
            .unwrap()
            .to_string()
            .lines()
            .nth(1),
        Some("up to date: no change")
    );
    // A port added but not yet given a node port by the apiserver: no change is planned for it, and the dry run
    // says so instead of "up to date".
    let mut added = svc.clone();
    let mut waiting = added.spec.as_ref().unwrap().ports.as_ref().unwrap()[0].clone();
    waiting.port = 8080;
    waiting.node_port = None;
    added.spec.as_mut().unwrap().ports.as_mut().unwrap().push(waiting);
    let run = lbs.dry_run("k", &added, &[&n]).await.unwrap();
    assert_eq!(run.waiting_ports, ["8080/TCP"]);
    let printed = run.to_string();
    assert!(!printed.contains("up to date"), "{printed}");
    assert!(
        printed.contains("not planned: 8080/TCP without a nodePort yet"),
        "{printed}"
    );
    // The same through the provider contract (a controller's dry run): nothing pending for the steady Service,
    // lb-plan's lines for the one with a waiting port; neither replaces the load balancer.
    let plan = lbs.plan_load_balancer("k", &svc, &[&n]).await.unwrap().unwrap();
    assert!(plan.changes.is_empty() && !plan.replaces, "{plan:?}");
    let plan = lbs.plan_load_balancer("k", &added, &[&n]).await.unwrap().unwrap();
    assert!(!plan.replaces);
    assert!(
        plan.changes
            .iter()
            .any(|l| l.starts_with("not planned: 8080/TCP")),
        "{plan:?}"
    );
    // A Go-era value served with Go's meaning (an upper-case type is a Classic ELB): the same steady load
    // balancer, and a Warning notice naming the annotation.
    let mut go_era = svc.clone();
    go_era.metadata.annotations = Some([(Key::Type.name().to_owned(), "NLB".to_owned())].into());
    let ensured = lbs
        .ensure_load_balancer_reporting("k", &go_era, &[&n])
        .await
        .unwrap();
    assert_eq!(ensured.notices.len(), 1, "{:?}", ensured.notices);
    assert!(ensured.notices[0].warning);
    assert_eq!(ensured.notices[0].reason, "UnexpectedAnnotationValue");
    assert!(
        ensured.notices[0].message.contains("aws-load-balancer-type"),
        "{:?}",
        ensured.notices
    );
    // The AWS Load Balancer Controller's key this controller does not serve: the same steady load balancer,
    // and a Warning notice of its own reason naming the key.
    let mut albc = svc.clone();
    let key = format!("{}quic-enabled-ports", crate::annotations::PREFIX);
    albc.metadata.annotations = Some([(key.clone(), "443".to_owned())].into());
    let ensured = lbs
        .ensure_load_balancer_reporting("k", &albc, &[&n])
        .await
        .unwrap();
    assert_eq!(ensured.notices.len(), 1, "{:?}", ensured.notices);
    assert!(ensured.notices[0].warning);
    assert_eq!(ensured.notices[0].reason, "UnsupportedAnnotation");
    assert!(ensured.notices[0].message.contains(&key), "{:?}", ensured.notices);
}

#[tokio::test]
async fn plan_for_prints_the_plan_of_a_manifest_and_writes_nothing() {
    let mut ec2 = MockEc2::new();
    let mut elb = MockElb::new();
    ec2.expect_availability_zones()
        .returning(|| Box::pin(async { Ok(vec![]) }));
    ec2.expect_subnets().returning(|_| {
        let s = Subnet::new(
            SubnetId::new("subnet-a"),
            VpcId::new("vpc-1"),
            "us-east-1a",
            Tags::new(),
        );
        Box::pin(async move { Ok(vec![s]) })
    });
    ec2.expect_route_tables().returning(|_| {
        let mut t = RouteTable::new(
            ccm_aws_api::RouteTableId::new("rtb-1"),
            VpcId::new("vpc-1"),
            vec![ccm_aws_api::ec2::Route::to_gateway("0.0.0.0/0", "igw-1")],
            Tags::new(),
        );
        t.associations = vec![ccm_aws_api::ec2::RouteTableAssociation::new(None, true)];
        Box::pin(async move { Ok(vec![t]) })
    });
    ec2.expect_security_groups()
        .returning(|_| Box::pin(async { Ok(vec![]) }));
    elb.expect_load_balancer()
        .returning(|_| Box::pin(async { Ok(None) }));
    let mut c = config();
    c.manage_node_security_groups = false;
    let lbs = AwsLoadBalancers::new(ec2, elb, MockElbv2::new(), c);
    let manifest = serde_json::to_string(&service(&[(Key::ProxyProtocol, "*")], &[(80, 30080)])).unwrap();
    let nodes = [node("i-1")];
    let dry = plan_for(&lbs, DEFAULT_CLUSTER_NAME, &manifest, &nodes)
        .await
        .unwrap();
    let printed = dry.to_string();
    let lines: Vec<&str> = printed.lines().collect();
    assert_eq!(
        lines[0],
        "Service prod/web -> Classic ELB a0f1e2d3c4b5a69788796a5b4c3d2e1f"
    );
    let Changes::Classic(changes) = &dry.changes else {
        panic!("a Classic ELB plan expected");
    };
    let kinds: Vec<&str> = changes
        .iter()
        .map(|c| match c {
            classic::Change::CreateSecurityGroup { .. } => "sg",
            classic::Change::AuthorizeIngress { .. } => "ingress",
            classic::Change::CreateLoadBalancer { .. } => "lb",
            classic::Change::ConfigureHealthCheck { .. } => "hc",
            classic::Change::CreatePolicy { .. } => "policy",
            classic::Change::SetBackendPolicies { .. } => "backend",
            classic::Change::RegisterInstances { .. } => "register",
            _ => "other",
        })
        .collect();
    assert_eq!(
        kinds,
        ["sg", "ingress", "lb", "hc", "policy", "backend", "register"]
    );
    assert!(
        lines[3].starts_with("  3. {\"change\":\"create_load_balancer\""),
        "{printed}"
    );
    assert_eq!(lines.len(), 8);
    // The JSON form carries the desired model too.
    let json = serde_json::to_value(&dry).unwrap();
    assert_eq!(json["desired"]["subnets"], serde_json::json!(["subnet-a"]));

    let e = plan_for(&lbs, DEFAULT_CLUSTER_NAME, "{not json", &nodes)
        .await
        .unwrap_err();
    assert!(
        e.to_string().starts_with("the manifest is not a JSON Service"),
        "{e}"
    );
}

/// A Classic ELB left from before a refused type change is still reported and deleted.
#[tokio::test]
async fn a_classic_elb_outlives_no_type_change() {
    let mut ec2 = MockEc2::new();
    let mut elb = MockElb::new();
    elb.expect_load_balancer().times(2).returning(|n| {
        let lb = ClassicLoadBalancer::new(n, "old.us-east-1.elb.amazonaws.com");
        Box::pin(async move { Ok(Some(lb)) })
    });
    // The Classic ELB's group and the NLB's managed group, looked up by name.
    ec2.expect_security_groups()
        .times(2)
        .returning(|_| Box::pin(async { Ok(vec![]) }));
    // Deleted only after its tags say it is this cluster's.
    elb.expect_tags().times(1).returning(|_| {
        let owned: Tags = [("kubernetes.io/cluster/c1".to_owned(), "owned".to_owned())].into();
        Box::pin(async move { Ok(owned) })
    });
    elb.expect_delete_load_balancer()
        .times(1)
        .returning(|_| Box::pin(async { Ok(()) }));
    // The Service says NLB: looked up first by get, and searched (with the region's target groups) by delete.
    let mut elbv2 = MockElbv2::new();
    elbv2
        .expect_load_balancer()
        .times(2)
        .returning(|_| Box::pin(async { Ok(None) }));
    elbv2
        .expect_all_target_groups()
        .times(1)
        .returning(|| Box::pin(async { Ok(vec![]) }));
    let mut c = config();
    c.manage_node_security_groups = false;
    let lbs = AwsLoadBalancers::new(ec2, elb, elbv2, c);
    let svc = service(&[(Key::Type, "nlb")], &[(80, 30080)]);
    let status = lbs.get_load_balancer("k", &svc).await.unwrap().unwrap();
    assert_eq!(
        status.ingress.unwrap()[0].hostname.as_deref(),
        Some("old.us-east-1.elb.amazonaws.com")
    );
    lbs.ensure_load_balancer_deleted("k", &svc).await.unwrap();
}

/// Story 1 of the ownership gate: a tenant Service naming another Service's live Classic ELB, with target
/// labels no node has. Its ensure is refused; its host update (a Node change after the refusal) must not
/// deregister the victim's instances either: this process holds no claim of the tenant's, so the update runs
/// the full ensure, refused again. The mocks expect no write at all (any would panic); the refusal names the
/// holder.
#[tokio::test]
async fn a_host_update_of_a_service_whose_ensure_was_refused_writes_nothing() {
    let victim = service(&[(Key::LoadBalancerName, "shop")], &[(80, 30080)]);
    let n = node("i-1");
    let spec = crate::parse_service(&victim).unwrap();
    let mut c = config();
    c.manage_node_security_groups = false;
    let desired = crate::classic::build(&spec, &[&n], &c, &[SubnetId::new("subnet-a")]).unwrap();
    let (ec2, elb) = steady_classic_ports(&desired);
    let lbs = AwsLoadBalancers::new(ec2, elb, MockElbv2::new(), c);
    // The victim's ensure: this process holds its claim now.
    lbs.ensure_load_balancer("k", &victim, &[&n]).await.unwrap();

    let mut thief = service(
        &[
            (Key::LoadBalancerName, "shop"),
            (Key::TargetNodeLabels, "nope=nope"),
        ],
        &[(80, 30080)],
    );
    thief.metadata.namespace = Some("tenant".into());
    thief.metadata.uid = Some("11111111-2222-3333-4444-555555555555".into());
    for _ in 0..2 {
        let e = lbs.ensure_load_balancer("k", &thief, &[&n]).await.unwrap_err();
        assert!(e.to_string().contains("belongs to Service prod/web"), "{e}");
        let e = lbs.update_load_balancer("k", &thief, &[&n]).await.unwrap_err();
        assert!(e.to_string().contains("belongs to Service prod/web"), "{e}");
    }
    // Nor does the victim's claim serve anyone else: its own host update still plans from memory.
    lbs.update_load_balancer("k", &victim, &[&n]).await.unwrap();
}

mod before_writes;
mod delete_calls;
mod drift_memory;
mod targets;
