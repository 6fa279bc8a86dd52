//! `AwsLoadBalancers` through the real adapter against moto: a Service's Classic ELB created, steady (0 mutating
//! calls), its nodes changed (only register/deregister), its ports and annotations changed, deleted (the owned
//! group goes, a `shared`-tagged and an untagged group stay); and crash injection: a run that stops before its
//! k-th mutating call, for every k, is completed by the next run into exactly one load balancer and one group.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::too_many_lines)]

use std::collections::BTreeMap;

use aws_sdk_ec2::types::{Filter as SdkFilter, ResourceType, Tag, TagSpecification};
use ccm_aws_api::{Ec2, Elb, Filter, SecurityGroupId, ec2::SecurityGroup};
use ccm_aws_sdk::CallMetrics;
use ccm_cloud_provider::{LoadBalancer, NodeView};
use ccm_load_balancers::annotations::Key;
use ccm_testing::lb_world::{World, diff, mutation_counts, service, uid};
use ccm_testing::unique_name;

/// Mutating calls so far (every operation that is not a `Describe*`).
async fn world(cidr_second_octet: u8) -> World {
    ccm_testing::lb_world::world(cidr_second_octet, "lb", false).await
}

fn mutations(metrics: &CallMetrics) -> u64 {
    metrics
        .snapshot()
        .iter()
        .filter(|(k, _)| !k.operation.starts_with("Describe"))
        .map(|(_, s)| s.attempts)
        .sum()
}

/// What the tests here read and set up in a [`World`] beyond what it offers.
trait ClassicWorld {
    async fn groups_named(&self, name: &str) -> Vec<SecurityGroup>;
    async fn node_group_sources(&self) -> Vec<String>;
    async fn plain_group(&self, tags: &[(&str, &str)]) -> String;
}

impl ClassicWorld for World {
    async fn groups_named(&self, name: &str) -> Vec<SecurityGroup> {
        self.adapter
            .ec2()
            .security_groups(&[
                Filter::new("group-name", [name]),
                Filter::new("vpc-id", [self.vpc.as_str()]),
            ])
            .await
            .unwrap()
    }

    async fn node_group_sources(&self) -> Vec<String> {
        let g = self
            .raw
            .describe_security_groups()
            .filters(
                SdkFilter::builder()
                    .name("group-id")
                    .values(&self.node_group)
                    .build(),
            )
            .send()
            .await
            .unwrap();
        g.security_groups()[0]
            .ip_permissions()
            .iter()
            .flat_map(|p| {
                p.user_id_group_pairs()
                    .iter()
                    .filter_map(|u| u.group_id().map(str::to_owned))
            })
            .collect()
    }

    async fn plain_group(&self, tags: &[(&str, &str)]) -> String {
        let mut spec = TagSpecification::builder().resource_type(ResourceType::SecurityGroup);
        for (k, v) in tags {
            spec = spec.tags(Tag::builder().key(*k).value(*v).build());
        }
        let mut req = self
            .raw
            .create_security_group()
            .group_name(unique_name("keep"))
            .description("not the controller's")
            .vpc_id(&self.vpc);
        if !tags.is_empty() {
            req = req.tag_specifications(spec.build());
        }
        req.send().await.unwrap().group_id().unwrap().to_owned()
    }
}

#[tokio::test]
async fn classic_elb_lifecycle_against_moto() {
    let w = world(91).await;
    let lbs = w.lbs(w.config.clone());
    let metrics = w.adapter.metrics().clone();
    let uid = uid();
    let svc = service(&uid, &[(80, 30080)], &[]);
    let name = lbs.load_balancer_name("kubernetes", &svc);
    let nodes = w.nodes();
    let first_two: Vec<&NodeView> = nodes[..2].iter().collect();

    // Create.
    let before = mutation_counts(&metrics);
    let calls_before = metrics.total_attempts();
    let status = lbs
        .ensure_load_balancer("kubernetes", &svc, &first_two)
        .await
        .unwrap();
    let created = diff(&mutation_counts(&metrics), &before);
    eprintln!(
        "create: {} calls, mutating {created:?}",
        metrics.total_attempts() - calls_before
    );
    let hostname = status.ingress.unwrap()[0].hostname.clone().unwrap();
    assert!(hostname.ends_with(".elb.amazonaws.com"), "{hostname}");
    let lb = w.adapter.elb().load_balancer(&name).await.unwrap().unwrap();
    assert_eq!(lb.dns_name, hostname);
    assert_eq!(lb.listeners.len(), 1);
    assert_eq!(
        (
            lb.listeners[0].protocol.as_str(),
            lb.listeners[0].load_balancer_port,
            lb.listeners[0].instance_port
        ),
        ("TCP", 80, 30080)
    );
    assert_eq!(lb.health_check.as_ref().unwrap().target, "TCP:30080");
    let mut registered: Vec<String> = lb.instances.iter().map(ToString::to_string).collect();
    registered.sort();
    assert_eq!(registered, w.instances[..2]);
    let mut subnets: Vec<String> = lb.subnets.iter().map(ToString::to_string).collect();
    subnets.sort();
    let mut want_subnets = w.subnets.clone();
    want_subnets.sort();
    assert_eq!(subnets, want_subnets, "one discovered subnet per zone");
    let groups = w.groups_named(&format!("k8s-elb-{name}")).await;
    assert_eq!(groups.len(), 1);
    let managed = groups[0].id.to_string();
    assert_eq!(lb.security_groups, [SecurityGroupId::new(&managed)]);
    assert!(w.config.cluster.is_owned(&groups[0].tags));
    assert_eq!(
        groups[0]
            .tags
            .get("kubernetes.io/service-name")
            .map(String::as_str),
        Some("moto/web")
    );
    let lb_tags = w.adapter.elb().tags(&name).await.unwrap();
    assert_eq!(
        lb_tags.get(&w.config.cluster.key()).map(String::as_str),
        Some("owned")
    );
    assert!(
        groups[0].ingress.iter().any(|p| p.protocol == "tcp"
            && p.from_port == Some(80)
            && p.ip_ranges.iter().any(|r| r.cidr == "0.0.0.0/0")),
        "{:?}",
        groups[0].ingress
    );
    assert_eq!(
        w.node_group_sources().await,
        std::slice::from_ref(&managed),
        "the nodes' group allows the ELB's group"
    );
    assert_eq!(created.get("CreateLoadBalancer"), Some(&1));
    assert_eq!(created.get("CreateSecurityGroup"), Some(&1));

    // Steady: no mutating call.
    let before = mutations(&metrics);
    let calls_before = metrics.total_attempts();
    lbs.ensure_load_balancer("kubernetes", &svc, &first_two)
        .await
        .unwrap();
    assert_eq!(mutations(&metrics) - before, 0, "{:?}", mutation_counts(&metrics));
    let steady_calls = metrics.total_attempts() - calls_before;
    eprintln!("steady ensure: {steady_calls} calls, 0 mutating");
    // The nodes' instances, read by the creation a moment ago, answer again (ccm-load-balancers reuses an
    // instance read for half a minute): no DescribeInstances.
    assert_eq!(steady_calls, 8, "{:?}", metrics.snapshot());

    // Nodes change: only register and deregister.
    let last_two: Vec<&NodeView> = nodes[1..].iter().collect();
    let before = mutation_counts(&metrics);
    let calls_before = metrics.total_attempts();
    lbs.update_load_balancer("kubernetes", &svc, &last_two)
        .await
        .unwrap();
    assert_eq!(
        diff(&mutation_counts(&metrics), &before),
        BTreeMap::from([
            ("DeregisterInstancesFromLoadBalancer", 1),
            ("RegisterInstancesWithLoadBalancer", 1)
        ])
    );
    let update_calls = metrics.total_attempts() - calls_before;
    eprintln!("node change update: {update_calls} calls");
    // Planned from the ensure's memory: the writes, and one DescribeInstances for the instance not seen yet.
    assert_eq!(update_calls, 3);
    let lb = w.adapter.elb().load_balancer(&name).await.unwrap().unwrap();
    let mut registered: Vec<String> = lb.instances.iter().map(ToString::to_string).collect();
    registered.sort();
    assert_eq!(registered, w.instances[1..]);
    let before = mutations(&metrics);
    lbs.ensure_load_balancer("kubernetes", &svc, &last_two)
        .await
        .unwrap();
    assert_eq!(
        mutations(&metrics) - before,
        0,
        "the full ensure agrees with the update"
    );

    // Ports and annotations change: converges, then steady again.
    let changed = service(
        &uid,
        &[(8080, 30081)],
        &[
            (Key::ConnectionIdleTimeout, "120"),
            (Key::CrossZoneLoadBalancingEnabled, "true"),
        ],
    );
    let before = mutation_counts(&metrics);
    lbs.ensure_load_balancer("kubernetes", &changed, &last_two)
        .await
        .unwrap();
    eprintln!(
        "port+annotation change: {:?}",
        diff(&mutation_counts(&metrics), &before)
    );
    let lb = w.adapter.elb().load_balancer(&name).await.unwrap().unwrap();
    assert_eq!(
        lb.listeners
            .iter()
            .map(|l| (l.load_balancer_port, l.instance_port))
            .collect::<Vec<_>>(),
        [(8080, 30081)]
    );
    assert_eq!(lb.health_check.as_ref().unwrap().target, "TCP:30081");
    let attributes = w.adapter.elb().attributes(&name).await.unwrap();
    assert_eq!(
        (attributes.idle_timeout, attributes.cross_zone),
        (Some(120), true)
    );
    let before = mutations(&metrics);
    lbs.ensure_load_balancer("kubernetes", &changed, &last_two)
        .await
        .unwrap();
    assert_eq!(mutations(&metrics) - before, 0);

    // Someone attaches a shared-tagged and an untagged group: deletion leaves them alone.
    let shared = w.plain_group(&[(&w.config.cluster.key(), "shared")]).await;
    let untagged = w.plain_group(&[]).await;
    let others = w
        .plain_group(&[
            (&w.config.cluster.key(), "owned"),
            ("kubernetes.io/service-name", "moto/other"),
        ])
        .await;
    w.adapter
        .elb()
        .apply_security_groups(
            &name,
            &[
                SecurityGroupId::new(&managed),
                SecurityGroupId::new(&shared),
                SecurityGroupId::new(&untagged),
                SecurityGroupId::new(&others),
            ],
        )
        .await
        .unwrap();
    let before = mutation_counts(&metrics);
    let calls_before = metrics.total_attempts();
    lbs.ensure_load_balancer_deleted("kubernetes", &changed)
        .await
        .unwrap();
    eprintln!(
        "delete: {} calls, mutating {:?}",
        metrics.total_attempts() - calls_before,
        diff(&mutation_counts(&metrics), &before)
    );
    assert!(w.adapter.elb().load_balancer(&name).await.unwrap().is_none());
    assert!(!w.group_exists(&managed).await, "the owned group is deleted");
    assert!(w.group_exists(&shared).await, "a shared-tagged group stays");
    assert!(w.group_exists(&untagged).await, "an untagged group stays");
    assert!(
        w.group_exists(&others).await,
        "an owned group made for another Service stays"
    );
    assert!(
        w.node_group_sources().await.is_empty(),
        "the nodes' rule is revoked"
    );
    assert_eq!(lbs.get_load_balancer("kubernetes", &changed).await.unwrap(), None);
    let before = mutations(&metrics);
    lbs.ensure_load_balancer_deleted("kubernetes", &changed)
        .await
        .unwrap();
    assert_eq!(mutations(&metrics) - before, 0, "deleting again is a no-op");
}

#[tokio::test]
async fn a_crash_before_any_mutating_call_converges_on_the_next_run() {
    let w = world(92).await;
    let metrics = w.adapter.metrics().clone();
    let nodes = w.nodes();
    let refs: Vec<&NodeView> = nodes.iter().collect();
    // Proxy protocol adds policy calls, so that every kind of creation step gets a crash in front of it.
    let annotations = [(Key::ProxyProtocol, "*"), (Key::ConnectionIdleTimeout, "90")];
    let healthy = w.lbs(w.config.clone());
    let (mut crashed_creations, mut crashed_deletions) = (0, 0);
    for k in 1.. {
        let svc = service(&uid(), &[(443, 30443)], &annotations);
        let name = healthy.load_balancer_name("kubernetes", &svc);
        let faulty = w.faulty_lbs(w.config.clone(), k);
        let crashed = faulty.ensure_load_balancer("kubernetes", &svc, &refs).await;
        let done = crashed.is_ok();
        if !done {
            crashed_creations += 1;
            assert!(
                ccm_controllers::ErrorChain(&crashed.unwrap_err())
                    .to_string()
                    .contains("injected crash")
            );
        }
        // The next run converges: one load balancer, one group, and then nothing left to do.
        healthy
            .ensure_load_balancer("kubernetes", &svc, &refs)
            .await
            .unwrap();
        assert!(w.adapter.elb().load_balancer(&name).await.unwrap().is_some());
        let tagged = w
            .adapter
            .ec2()
            .security_groups(&[
                Filter::new("vpc-id", [w.vpc.as_str()]),
                Filter::tag("kubernetes.io/service-name", ["moto/web"]),
            ])
            .await
            .unwrap();
        let ours: Vec<&SecurityGroup> = tagged.iter().filter(|g| g.name.contains(&name)).collect();
        assert_eq!(ours.len(), 1, "crash before mutation {k}: {tagged:?}");
        let lb = w.adapter.elb().load_balancer(&name).await.unwrap().unwrap();
        assert_eq!(lb.security_groups, [ours[0].id.clone()]);
        assert_eq!(lb.instances.len(), 3, "crash before mutation {k}");
        assert_eq!(
            lb.backend_policies.len(),
            1,
            "crash before mutation {k}: {:?}",
            lb.backend_policies
        );
        let before = mutations(&metrics);
        healthy
            .ensure_load_balancer("kubernetes", &svc, &refs)
            .await
            .unwrap();
        assert_eq!(
            mutations(&metrics) - before,
            0,
            "crash before mutation {k}: not converged"
        );

        // Deletion crashes at the same point, and the next deletion (which the service controller always asks
        // for, even when the load balancer is gone) removes the rest: the group and its rule on the nodes.
        let group = ours[0].id.to_string();
        assert!(w.node_group_sources().await.contains(&group));
        let faulty = w.faulty_lbs(w.config.clone(), k);
        if faulty
            .ensure_load_balancer_deleted("kubernetes", &svc)
            .await
            .is_err()
        {
            crashed_deletions += 1;
        }
        healthy
            .ensure_load_balancer_deleted("kubernetes", &svc)
            .await
            .unwrap();
        assert!(w.adapter.elb().load_balancer(&name).await.unwrap().is_none());
        assert!(
            w.groups_named(&format!("k8s-elb-{name}")).await.is_empty(),
            "crash in deletion at {k}"
        );
        assert!(
            !w.node_group_sources().await.contains(&group),
            "crash in deletion at {k}: the nodes' rule is revoked"
        );
        if done {
            break;
        }
    }
    eprintln!("creation crashed and recovered before each of its {crashed_creations} mutating calls");
    assert!(crashed_creations >= 6, "{crashed_creations}");
    eprintln!("deletion crashed and recovered before each of its {crashed_deletions} mutating calls");
    assert_eq!(
        crashed_deletions, 3,
        "revoke, DeleteLoadBalancer, DeleteSecurityGroup"
    );
}

#[tokio::test]
async fn switching_to_given_groups_retires_the_managed_group() {
    let w = world(93).await;
    let lbs = w.lbs(w.config.clone());
    let metrics = w.adapter.metrics().clone();
    let nodes = w.nodes();
    let refs: Vec<&NodeView> = nodes.iter().collect();
    let uid = uid();
    let svc = service(&uid, &[(80, 30080)], &[]);
    let name = lbs.load_balancer_name("kubernetes", &svc);
    lbs.ensure_load_balancer("kubernetes", &svc, &refs).await.unwrap();
    let managed = w.groups_named(&format!("k8s-elb-{name}")).await[0].id.to_string();
    assert_eq!(w.node_group_sources().await, std::slice::from_ref(&managed));

    let mine = w.plain_group(&[]).await;
    let byo = service(&uid, &[(80, 30080)], &[(Key::SecurityGroups, &mine)]);
    let before = mutation_counts(&metrics);
    lbs.ensure_load_balancer("kubernetes", &byo, &refs).await.unwrap();
    eprintln!(
        "switch to given groups: {:?}",
        diff(&mutation_counts(&metrics), &before)
    );
    let lb = w.adapter.elb().load_balancer(&name).await.unwrap().unwrap();
    assert_eq!(lb.security_groups, [SecurityGroupId::new(&mine)]);
    assert!(
        !w.group_exists(&managed).await,
        "the managed group is deleted, not leaked"
    );
    assert_eq!(
        w.node_group_sources().await,
        std::slice::from_ref(&mine),
        "rules now from the given group"
    );
    let before = mutations(&metrics);
    lbs.ensure_load_balancer("kubernetes", &byo, &refs).await.unwrap();
    assert_eq!(mutations(&metrics) - before, 0);

    lbs.ensure_load_balancer_deleted("kubernetes", &byo)
        .await
        .unwrap();
    assert!(w.adapter.elb().load_balancer(&name).await.unwrap().is_none());
    assert!(
        w.group_exists(&mine).await,
        "a group given by annotation is never deleted"
    );
}

#[tokio::test]
async fn https_listeners_with_policies_are_steady_after_creation() {
    let w = world(94).await;
    let lbs = w.lbs(w.config.clone());
    let metrics = w.adapter.metrics().clone();
    let nodes = w.nodes();
    let refs: Vec<&NodeView> = nodes.iter().collect();
    let cert = "arn:aws:iam::123456789012:server-certificate/test";
    let svc = service(
        &uid(),
        &[(80, 30080), (443, 30443)],
        &[
            (Key::SslCert, cert),
            (Key::SslPorts, "443"),
            // moto reports every listener's instance protocol as its front-end protocol (it drops
            // InstanceProtocol), so only listeners whose two protocols are equal can be steady against it:
            // `https` gives HTTPS/HTTPS on 443 and TCP/TCP on 80. HTTPS/HTTP (backend `http`) is unit-tested.
            (Key::BackendProtocol, "https"),
            (Key::SslNegotiationPolicy, "ELBSecurityPolicy-TLS-1-2-2017-01"),
            (Key::ProxyProtocol, "*"),
            (Key::HealthcheckPath, "/ready"),
            (Key::HealthcheckProtocol, "HTTP"),
            (Key::AdditionalResourceTags, "team=web,cost-center="),
        ],
    );
    let name = lbs.load_balancer_name("kubernetes", &svc);
    let before = mutation_counts(&metrics);
    lbs.ensure_load_balancer("kubernetes", &svc, &refs).await.unwrap();
    eprintln!(
        "create with HTTPS and policies: {:?}",
        diff(&mutation_counts(&metrics), &before)
    );
    let lb = w.adapter.elb().load_balancer(&name).await.unwrap().unwrap();
    let mut listeners: Vec<(String, i32, String, Option<String>)> = lb
        .listeners
        .iter()
        .map(|l| {
            (
                l.protocol.clone(),
                l.load_balancer_port,
                l.instance_protocol.clone(),
                l.ssl_certificate_id.clone(),
            )
        })
        .collect();
    listeners.sort();
    assert_eq!(
        listeners,
        [
            ("HTTPS".to_owned(), 443, "HTTPS".to_owned(), Some(cert.to_owned())),
            ("TCP".to_owned(), 80, "TCP".to_owned(), None),
        ]
    );
    let https = lb.listeners.iter().find(|l| l.load_balancer_port == 443).unwrap();
    assert_eq!(
        https.policy_names,
        ["k8s-SSLNegotiationPolicy-ELBSecurityPolicy-TLS-1-2-2017-01"]
    );
    assert_eq!(lb.health_check.as_ref().unwrap().target, "HTTP:30080/ready");
    assert_eq!(lb.backend_policies.len(), 2, "{:?}", lb.backend_policies);
    let tags = w.adapter.elb().tags(&name).await.unwrap();
    assert_eq!(tags.get("team").map(String::as_str), Some("web"));
    assert_eq!(tags.get("cost-center").map(String::as_str), Some(""));

    let before = mutations(&metrics);
    lbs.ensure_load_balancer("kubernetes", &svc, &refs).await.unwrap();
    assert_eq!(mutations(&metrics) - before, 0, "{:?}", mutation_counts(&metrics));
    lbs.ensure_load_balancer_deleted("kubernetes", &svc)
        .await
        .unwrap();
}

#[tokio::test]
async fn a_scheme_change_recreates_the_classic_elb_at_any_crash_point() {
    let w = world(95).await;
    let metrics = w.adapter.metrics().clone();
    let nodes = w.nodes();
    let refs: Vec<&NodeView> = nodes.iter().collect();
    let healthy = w.lbs(w.config.clone());
    let elb = w.adapter.elb();
    let mut crashed = 0;
    for k in 1.. {
        let uid = uid();
        let public = service(&uid, &[(80, 30080)], &[(Key::ProxyProtocol, "*")]);
        let internal = service(
            &uid,
            &[(80, 30080)],
            &[
                (Key::ProxyProtocol, "*"),
                (Key::Internal, "true"),
                (Key::AllowRecreation, "true"),
            ],
        );
        let name = healthy.load_balancer_name("kubernetes", &public);
        healthy
            .ensure_load_balancer("kubernetes", &public, &refs)
            .await
            .unwrap();
        let group = elb.load_balancer(&name).await.unwrap().unwrap().security_groups;

        let faulty = w.faulty_lbs(w.config.clone(), k);
        let done = match faulty
            .ensure_load_balancer_reporting("kubernetes", &internal, &refs)
            .await
        {
            Ok(ensured) => {
                // The uninterrupted run reports the recreation for the Service's Events.
                assert_eq!(ensured.notices.len(), 1, "{:?}", ensured.notices);
                let notice = &ensured.notices[0];
                assert!(notice.warning && notice.reason == "RecreatingLoadBalancer");
                assert!(
                    notice.message.contains("scheme internet-facing -> internal"),
                    "{}",
                    notice.message
                );
                true
            }
            Err(e) => {
                let message = e.to_string();
                assert!(
                    message.starts_with("recreating the Classic ELB (scheme internet-facing -> internal)"),
                    "crash before mutation {k}: {message}"
                );
                crashed += 1;
                false
            }
        };
        // The next run converges: internal, same group (the nodes' rule kept), instances and policies back.
        healthy
            .ensure_load_balancer("kubernetes", &internal, &refs)
            .await
            .unwrap();
        let lb = elb.load_balancer(&name).await.unwrap().unwrap();
        assert!(lb.internal, "crash before mutation {k}");
        assert_eq!(lb.security_groups, group, "crash before mutation {k}");
        assert_eq!(lb.instances.len(), 3, "crash before mutation {k}");
        assert_eq!(lb.backend_policies.len(), 1, "crash before mutation {k}");
        assert!(
            w.node_group_sources().await.contains(&group[0].to_string()),
            "crash before mutation {k}"
        );
        let before = mutations(&metrics);
        healthy
            .ensure_load_balancer("kubernetes", &internal, &refs)
            .await
            .unwrap();
        assert_eq!(
            mutations(&metrics) - before,
            0,
            "crash before mutation {k}: not converged"
        );
        healthy
            .ensure_load_balancer_deleted("kubernetes", &internal)
            .await
            .unwrap();
        if done {
            break;
        }
    }
    eprintln!("the recreation crashed and recovered before each of its {crashed} mutating calls");
    assert!(crashed >= 4, "{crashed}");
}
