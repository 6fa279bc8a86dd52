//! `aws-load-balancer-name` against moto, both flavours: a load balancer made, kept and deleted under the
//! chosen name; a name another Service's load balancer holds refused and left alone (also by that Service's
//! deletion); a name change withheld without consent and made, the old load balancer deleted, with it.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::too_many_lines)]

use ccm_aws_api::{Ec2, Elb, Elbv2, Filter};
use ccm_cloud_provider::{LoadBalancer, LoadBalancerStatus, NodeView};
use ccm_load_balancers::annotations::Key;
use ccm_testing::fixtures::ServiceBuilder;
use ccm_testing::lb_world::{Lbs, World, diff, mutation_counts, uid};
use k8s_openapi::api::core::v1::{Service, ServiceStatus};

const CLUSTER_NAME: &str = "kubernetes";

/// Service `moto/<name>` with `uid`, port 80, the flavour's type and `annotations`.
fn service(name: &str, uid: &str, nlb: bool, annotations: &[(Key, &str)]) -> Service {
    let mut svc = ServiceBuilder::new("moto", name)
        .uid(uid)
        .port(80, "TCP", Some(30080));
    if nlb {
        svc = svc.annotation(Key::Type.name(), "nlb");
    }
    for (key, value) in annotations {
        svc = svc.annotation(key.name(), value);
    }
    svc.build()
}

/// `svc` with the status an ensure returned, as the service controller writes it.
fn with_status(mut svc: Service, status: &LoadBalancerStatus) -> Service {
    svc.status = Some(ServiceStatus {
        load_balancer: Some(k8s_openapi::api::core::v1::LoadBalancerStatus {
            ingress: status.ingress.clone(),
        }),
        ..ServiceStatus::default()
    });
    svc
}

fn hostname(status: &LoadBalancerStatus) -> String {
    status.ingress.as_ref().unwrap()[0].hostname.clone().unwrap()
}

/// A name of its own per run: names are unique in an account and moto outlives test runs.
fn chosen(tag: &str) -> String {
    format!("{tag}-{}", &uid()[..8])
}

/// Whether a load balancer of either flavour exists under `name`.
async fn exists(w: &World, name: &str) -> bool {
    w.adapter.elb().load_balancer(name).await.unwrap().is_some()
        || w.adapter.elbv2().load_balancer(name).await.unwrap().is_some()
}

/// The id of the group named `name` in the world's VPC, if any.
async fn group_named(w: &World, name: &str) -> Option<String> {
    let filters = [
        Filter::new("group-name", [name]),
        Filter::new("vpc-id", [w.vpc.as_str()]),
    ];
    let groups = w.adapter.ec2().security_groups(&filters).await.unwrap();
    groups.first().map(|g| g.id.to_string())
}

async fn ensure(
    lbs: &Lbs,
    w: &World,
    svc: &Service,
) -> ccm_cloud_provider::Result<ccm_cloud_provider::Ensured> {
    let nodes = w.nodes();
    let nodes: Vec<&NodeView> = nodes.iter().collect();
    lbs.ensure_load_balancer_reporting(CLUSTER_NAME, svc, &nodes)
        .await
}

#[tokio::test]
async fn a_chosen_name_is_made_kept_and_deleted_in_both_flavours() {
    let w = ccm_testing::lb_world::world(168, "named", false).await;
    let lbs = w.lbs(w.config.clone());
    for nlb in [false, true] {
        let name = chosen(if nlb { "nlb" } else { "clb" });
        let svc = service("web", &uid(), nlb, &[(Key::LoadBalancerName, &name)]);
        assert_eq!(lbs.load_balancer_name(CLUSTER_NAME, &svc), name);
        let status = ensure(&lbs, &w, &svc).await.unwrap().status;
        assert!(hostname(&status).starts_with(&name), "{status:?}");
        let tags = if nlb {
            let lb = w.adapter.elbv2().load_balancer(&name).await.unwrap().unwrap();
            w.adapter
                .elbv2()
                .tags(std::slice::from_ref(&lb.arn))
                .await
                .unwrap()
                .remove(&lb.arn)
                .unwrap()
        } else {
            w.adapter.elb().tags(&name).await.unwrap()
        };
        assert_eq!(tags["kubernetes.io/service-name"], "moto/web");
        if !nlb {
            assert!(group_named(&w, &format!("k8s-elb-{name}")).await.is_some());
        }

        // Steady: nothing written; found by get, under the name and through the status.
        let svc = with_status(svc, &status);
        let before = mutation_counts(w.adapter.metrics());
        ensure(&lbs, &w, &svc).await.unwrap();
        assert_eq!(
            diff(&mutation_counts(w.adapter.metrics()), &before),
            Default::default()
        );
        let got = lbs.get_load_balancer(CLUSTER_NAME, &svc).await.unwrap().unwrap();
        assert_eq!(hostname(&got), hostname(&status));

        lbs.ensure_load_balancer_deleted(CLUSTER_NAME, &svc)
            .await
            .unwrap();
        assert!(!exists(&w, &name).await, "{name} deleted");
        assert_eq!(group_named(&w, &format!("k8s-elb-{name}")).await, None);
        assert_eq!(lbs.get_load_balancer(CLUSTER_NAME, &svc).await.unwrap(), None);
    }
}

/// A Service author naming another Service's load balancer gets an error naming the holder, writes nothing,
/// and deleting his Service leaves that load balancer alone.
#[tokio::test]
async fn a_name_another_service_holds_is_refused_and_left_alone() {
    let w = ccm_testing::lb_world::world(169, "taken", false).await;
    let lbs = w.lbs(w.config.clone());
    for nlb in [false, true] {
        let name = chosen("held");
        let holder = service("web", &uid(), nlb, &[(Key::LoadBalancerName, &name)]);
        ensure(&lbs, &w, &holder).await.unwrap();
        let thief = service("thief", &uid(), nlb, &[(Key::LoadBalancerName, &name)]);
        let before = mutation_counts(w.adapter.metrics());
        let e = ensure(&lbs, &w, &thief).await.unwrap_err().to_string();
        assert!(e.contains(&format!("load balancer name {name} is taken")), "{e}");
        assert!(e.contains("Service moto/web"), "{e}");
        assert_eq!(lbs.get_load_balancer(CLUSTER_NAME, &thief).await.unwrap(), None);
        lbs.ensure_load_balancer_deleted(CLUSTER_NAME, &thief)
            .await
            .unwrap();
        assert_eq!(
            diff(&mutation_counts(w.adapter.metrics()), &before),
            Default::default()
        );
        assert!(exists(&w, &name).await, "the holder's load balancer is untouched");
        if !nlb {
            assert!(group_named(&w, &format!("k8s-elb-{name}")).await.is_some());
        }
        lbs.ensure_load_balancer_deleted(CLUSTER_NAME, &holder)
            .await
            .unwrap();
        assert!(!exists(&w, &name).await);
    }
}

/// A name change: without consent the load balancer keeps its name (a Warning says why, nothing is written);
/// with consent the old one goes with its group and the new one serves.
#[tokio::test]
async fn a_rename_waits_for_consent_then_replaces_the_load_balancer() {
    let w = ccm_testing::lb_world::world(170, "rename", false).await;
    let lbs = w.lbs(w.config.clone());
    for nlb in [false, true] {
        let uid = uid();
        let svc = service("web", &uid, nlb, &[]);
        let old = lbs.load_balancer_name(CLUSTER_NAME, &svc);
        let status = ensure(&lbs, &w, &svc).await.unwrap().status;
        let old_group = group_named(&w, &format!("k8s-elb-{old}")).await;
        assert_eq!(old_group.is_some(), !nlb);

        let name = chosen("renamed");
        let renamed = with_status(
            service("web", &uid, nlb, &[(Key::LoadBalancerName, &name)]),
            &status,
        );
        let before = mutation_counts(w.adapter.metrics());
        let kept = ensure(&lbs, &w, &renamed).await.unwrap();
        assert_eq!(
            hostname(&kept.status),
            hostname(&status),
            "the old load balancer serves on"
        );
        assert_eq!(
            diff(&mutation_counts(w.adapter.metrics()), &before),
            Default::default()
        );
        let reasons: Vec<&str> = kept.notices.iter().map(|n| n.reason.as_str()).collect();
        assert_eq!(reasons, ["LoadBalancerRecreationRequired"]);
        assert!(
            kept.notices[0].message.contains(&format!("{old} -> {name}")),
            "{:?}",
            kept.notices
        );
        assert!(!exists(&w, &name).await);
        // A host update goes to the serving one.
        let nodes = w.nodes();
        let one: Vec<&NodeView> = nodes.iter().take(1).collect();
        lbs.update_load_balancer(CLUSTER_NAME, &renamed, &one)
            .await
            .unwrap();
        assert!(exists(&w, &old).await);

        let consenting = with_status(
            service(
                "web",
                &uid,
                nlb,
                &[(Key::LoadBalancerName, &name), (Key::AllowRecreation, "true")],
            ),
            &status,
        );
        // The dry run says so, in both cases, and writes nothing.
        let refs: Vec<&NodeView> = nodes.iter().collect();
        let before = mutation_counts(w.adapter.metrics());
        for (svc, replaces) in [(&renamed, false), (&consenting, true)] {
            let run = lbs.dry_run(CLUSTER_NAME, svc, &refs).await.unwrap();
            let recreation = run.recreation.expect("a rename is a recreation");
            assert_eq!(recreation.replaces, replaces);
            assert!(
                recreation.reason.contains(&format!("{old} -> {name}")),
                "{}",
                recreation.reason
            );
        }
        assert_eq!(
            diff(&mutation_counts(w.adapter.metrics()), &before),
            Default::default()
        );
        let made = ensure(&lbs, &w, &consenting).await.unwrap();
        let reasons: Vec<&str> = made.notices.iter().map(|n| n.reason.as_str()).collect();
        assert_eq!(reasons, ["RecreatingLoadBalancer"]);
        assert!(hostname(&made.status).starts_with(&name), "{:?}", made.status);
        assert!(!exists(&w, &old).await, "the old load balancer is deleted");
        if let Some(group) = old_group {
            assert!(!w.group_exists(&group).await, "with its group");
        }
        assert!(exists(&w, &name).await);

        // Settled: the status names the new one, and the next ensure writes nothing.
        let settled = with_status(consenting, &made.status);
        let before = mutation_counts(w.adapter.metrics());
        let again = ensure(&lbs, &w, &settled).await.unwrap();
        assert!(again.notices.is_empty(), "{:?}", again.notices);
        assert_eq!(
            diff(&mutation_counts(w.adapter.metrics()), &before),
            Default::default()
        );
        lbs.ensure_load_balancer_deleted(CLUSTER_NAME, &settled)
            .await
            .unwrap();
        assert!(!exists(&w, &name).await);
    }
}

/// A chosen name the status never showed (the ensure that made its load balancer failed later), recorded by the
/// service controller before that ensure: a later change of the name renames it like one the status shows (kept
/// without consent, deleted with it), and the Service's deletion finds it. Before names were recorded, it was
/// left behind for good.
#[tokio::test]
async fn a_recorded_name_the_status_never_showed_is_renamed_and_deleted() {
    let w = ccm_testing::lb_world::world(176, "recorded", false).await;
    let lbs = w.lbs(w.config.clone());
    for nlb in [false, true] {
        let uid = uid();
        let first = chosen("first");
        let svc = service("web", &uid, nlb, &[(Key::LoadBalancerName, &first)]);
        // Made, but no status written (as after an ensure that failed past the create).
        ensure(&lbs, &w, &svc).await.unwrap();
        assert!(exists(&w, &first).await);
        let second = chosen("second");
        let recorded = |annotations: &[(Key, &str)]| {
            let mut svc = service("web", &uid, nlb, annotations);
            svc.metadata.annotations.get_or_insert_default().insert(
                ccm_cloud_provider::ANNOTATION_LOAD_BALANCER_NAMES.to_owned(),
                format!("{first},{second}"),
            );
            svc
        };
        // Without consent the first one serves on; with it, it goes and the second is made.
        let kept = ensure(&lbs, &w, &recorded(&[(Key::LoadBalancerName, &second)]))
            .await
            .unwrap();
        assert!(hostname(&kept.status).starts_with(&first), "{:?}", kept.status);
        assert!(!exists(&w, &second).await);
        let consenting = recorded(&[(Key::LoadBalancerName, &second), (Key::AllowRecreation, "true")]);
        let made = ensure(&lbs, &w, &consenting).await.unwrap();
        assert!(hostname(&made.status).starts_with(&second), "{:?}", made.status);
        assert!(
            !exists(&w, &first).await,
            "the first name's load balancer is deleted"
        );

        // Made again under the first name (as by a crash), then the Service deleted without a status: both go.
        ensure(&lbs, &w, &svc).await.unwrap();
        lbs.ensure_load_balancer_deleted(CLUSTER_NAME, &consenting)
            .await
            .unwrap();
        assert!(!exists(&w, &first).await && !exists(&w, &second).await);
    }
}
