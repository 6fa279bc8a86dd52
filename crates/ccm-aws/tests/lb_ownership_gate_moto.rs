//! The ownership gate as an adversarial matrix against moto. Victims, made first by their legitimate owners: a
//! Classic ELB and an NLB under a chosen name (Service `moto/web`), another cluster's NLB, and an ALB another
//! tool made. Actors: another Service of the same namespace, one of another namespace, and (where it is an
//! attack) a re-created incarnation of the victim's Service. Paths: ensure, a host update after a refused
//! ensure, the drift pass and its repair, a rename with and without consent, deletion (by annotation and/or a
//! status hostname naming the victim), the dry run; and a predecessor's cleanup beside its successor. Every
//! actor wants the victim's targets gone (`aws-load-balancer-target-node-labels: nope=nope`). Each cell: no
//! mutating call at all, the victim (load balancer, tags, listeners, targets, every security group of the
//! VPC) as it was, and a refused ensure names the holder. Every cell runs; the failures are listed together.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::too_many_lines)]

mod lb_gate;

use std::{future::Future, sync::Arc};

use aws_sdk_ec2::types::Tag;
use ccm_aws_api::{Elbv2, InstanceCatalog, VpcId};
use ccm_cloud_provider::{LoadBalancer, NodeView};
use ccm_load_balancers::{LoadBalancerConfig, annotations::Key};
use ccm_tagging::ClusterTags;
use ccm_testing::lb_world::{Lbs, World, diff, mutation_counts, uid};
use ccm_testing::unique_name;
use k8s_openapi::api::core::v1::Service;
use lb_gate::{
    Actor, CLUSTER, Kind, PATHS, Path, Seen, Victim, chosen, ensure, hostname, made, members, seen, service,
    status_of, with_status,
};

/// The actor's Service for `path`, made ready (a rename's actor gets its own load balancer first: writes
/// allowed, before the cell counts).
async fn prepare(w: &World, lbs: &Lbs, victim: &Victim, actor: Actor, path: Path) -> Service {
    let kind = victim.actor_kind();
    let uid = uid();
    let nope = (Key::TargetNodeLabels, "nope=nope");
    let named = (Key::LoadBalancerName, victim.name.as_str());
    match path {
        Path::Rename { consent } => {
            // Its own load balancer with the same node labels: only the name changes.
            let own = actor.service(&uid, kind, &[nope]);
            let status = ensure(lbs, w, &own)
                .await
                .expect("the actor's own load balancer")
                .status;
            let mut annotations = vec![named, nope];
            if consent {
                annotations.push((Key::AllowRecreation, "true"));
            }
            with_status(actor.service(&uid, kind, &annotations), &status)
        }
        Path::Delete { annotation, status } => {
            let annotations = if annotation { vec![named, nope] } else { vec![nope] };
            let svc = actor.service(&uid, kind, &annotations);
            if status {
                with_status(svc, &status_of(&victim.hostname))
            } else {
                svc
            }
        }
        _ => actor.service(&uid, kind, &[named, nope]),
    }
}

fn key(svc: &Service) -> String {
    let meta = &svc.metadata;
    format!(
        "{}/{}",
        meta.namespace.as_deref().unwrap(),
        meta.name.as_deref().unwrap()
    )
}

/// The actor's call: `Ok` with what it answered, `Err` with the error.
async fn act(w: &World, lbs: &Lbs, victim: &Victim, thief: &Service, path: Path) -> Result<String, String> {
    let nodes = w.nodes();
    let all: Vec<&NodeView> = nodes.iter().collect();
    let text = |e: ccm_cloud_provider::CloudError| e.to_string();
    match path {
        Path::Ensure | Path::Rename { .. } => {
            let ensured = ensure(lbs, w, thief).await.map_err(text)?;
            let reasons: Vec<&str> = ensured.notices.iter().map(|n| n.reason.as_str()).collect();
            Ok(format!("served {} {reasons:?}", hostname(&ensured.status)))
        }
        Path::HostUpdate => {
            if let Ok(ensured) = ensure(lbs, w, thief).await {
                return Ok(format!("the ensure was not refused: {:?}", ensured.status));
            }
            let one: Vec<&NodeView> = all.iter().copied().take(1).collect();
            let updated = lbs.update_load_balancer(CLUSTER, thief, &one).await;
            updated.map(|()| "host update done".to_owned()).map_err(text)
        }
        Path::Drift => {
            // Only this cluster's Services: another cluster's controller serves its own.
            let mut services: Vec<&Service> = victim.service.iter().filter(|_| victim.ours).collect();
            services.push(thief);
            let drifts = lbs.drifted(CLUSTER, &services, &all).await.map_err(text)?;
            let mut repairs = Vec::new();
            for svc in services
                .iter()
                .filter(|s| drifts.iter().any(|d| d.service == key(s)))
            {
                let repaired = ensure(lbs, w, svc).await.map(drop).map_err(text);
                repairs.push(format!("{}: {repaired:?}", key(svc)));
            }
            Ok(format!("drifts {drifts:?}, repairs {repairs:?}"))
        }
        Path::Delete { .. } => lbs
            .ensure_load_balancer_deleted(CLUSTER, thief)
            .await
            .map(|()| "deleted".to_owned())
            .map_err(text),
        Path::DryRun => lbs
            .plan_load_balancer(CLUSTER, thief, &all)
            .await
            .map(|plan| format!("plan {plan:?}"))
            .map_err(text),
    }
}

/// What differs between two sightings of a victim, for people.
fn changes(before: &Seen, after: &Seen) -> Vec<String> {
    let mut out = Vec::new();
    match (&before.load_balancer, &after.load_balancer) {
        (Some(_), None) => out.push("the victim's load balancer is gone".to_owned()),
        (Some((lb, tags)), Some((lb_after, tags_after))) => {
            let (m, m_after) = (members(before), members(after));
            if m != m_after {
                out.push(format!("members {m:?} -> {m_after:?}"));
            }
            if tags != tags_after {
                out.push(format!("tags {tags:?} -> {tags_after:?}"));
            }
            if lb != lb_after && m == m_after {
                out.push(format!("load balancer {lb:?} -> {lb_after:?}"));
            }
        }
        _ => out.push("the victim's load balancer was missing before".to_owned()),
    }
    for (id, rules) in &before.groups {
        match after.groups.get(id) {
            None => out.push(format!("security group {id} deleted")),
            Some(now) if now != rules => out.push(format!("security group {id}: {rules:?} -> {now:?}")),
            Some(_) => {}
        }
    }
    let made: Vec<&String> = after
        .groups
        .keys()
        .filter(|id| !before.groups.contains_key(*id))
        .collect();
    if !made.is_empty() {
        out.push(format!("security groups made: {made:?}"));
    }
    out
}

/// One cell of the matrix: `Ok` with a line saying what the actor got, `Err` with what went wrong.
async fn cell(w: &World, lbs: &Lbs, victim: &Victim, actor: Actor, path: Path) -> Result<String, String> {
    let label = format!("{} / {actor:?} / {path:?}", victim.what);
    let thief = prepare(w, lbs, victim, actor, path).await;
    checked(
        w,
        victim,
        &label,
        path.refused(),
        act(w, lbs, victim, &thief, path),
    )
    .await
}

/// Runs `call` between two sightings of the victim and two counts of mutating calls, and checks the outcome:
/// `refused` `Some(true)` wants an error naming the holder, `Some(false)` success, `None` either.
async fn checked(
    w: &World,
    victim: &Victim,
    label: &str,
    refused: Option<bool>,
    call: impl Future<Output = Result<String, String>>,
) -> Result<String, String> {
    let before_seen = seen(w, victim).await;
    let before = mutation_counts(w.adapter.metrics());
    let outcome = call.await;
    let writes = diff(&mutation_counts(w.adapter.metrics()), &before);
    let mut problems = changes(&before_seen, &seen(w, victim).await);
    if !writes.is_empty() {
        problems.insert(0, format!("mutating calls {writes:?}"));
    }
    match (refused, &outcome) {
        (Some(true), Ok(answer)) => problems.push(format!("not refused: {answer}")),
        (Some(true), Err(e)) => {
            let missing: Vec<String> = victim.refusal().into_iter().filter(|s| !e.contains(s)).collect();
            if !missing.is_empty() {
                problems.push(format!("the refusal does not say {missing:?}: {e}"));
            }
        }
        (Some(false), Err(e)) => problems.push(format!("failed: {e}")),
        _ => {}
    }
    if problems.is_empty() {
        Ok(format!("{label}: ok, {outcome:?}"))
    } else {
        Err(format!("{label}: {}", problems.join("; ")))
    }
}

/// Every applicable cell against `victim`; fails listing every failed cell.
async fn matrix(w: &World, lbs: &Lbs, victim: &Victim, actors: &[Actor]) {
    let (mut passed, mut failed) = (Vec::new(), Vec::new());
    for &actor in actors {
        for path in PATHS.into_iter().filter(|p| p.applies(victim, actor)) {
            match cell(w, lbs, victim, actor, path).await {
                Ok(line) => passed.push(line),
                Err(line) => failed.push(line),
            }
        }
    }
    eprintln!("passed:\n  {}", passed.join("\n  "));
    assert!(
        failed.is_empty(),
        "{} of {} cells failed:\n  {}",
        failed.len(),
        failed.len() + passed.len(),
        failed.join("\n  ")
    );
}

const ACTORS: [Actor; 3] = [Actor::SameNamespace, Actor::OtherNamespace, Actor::Recreated];

#[tokio::test]
async fn a_classic_elb_under_a_chosen_name_is_never_touched_by_another_service() {
    let w = ccm_testing::lb_world::world(171, "gateclb", false).await;
    let lbs = w.lbs(w.config.clone());
    let victim = made(&lbs, &w, Kind::Classic, "clb", true).await;
    assert_eq!(
        members(&seen(&w, &victim).await).len(),
        3,
        "the victim serves every node"
    );
    matrix(&w, &lbs, &victim, &ACTORS).await;
}

#[tokio::test]
async fn an_nlb_under_a_chosen_name_is_never_touched_by_another_service() {
    let w = ccm_testing::lb_world::world(172, "gatenlb", false).await;
    let lbs = w.lbs(w.config.clone());
    let victim = made(&lbs, &w, Kind::Network, "nlb", true).await;
    assert_eq!(
        members(&seen(&w, &victim).await).len(),
        3,
        "the victim serves every node"
    );
    matrix(&w, &lbs, &victim, &ACTORS).await;
}

/// Another cluster's NLB, in the same VPC (its subnets shared, the nodes' group tagged for both clusters).
#[tokio::test]
async fn another_clusters_nlb_is_never_touched_by_this_cluster() {
    let w = ccm_testing::lb_world::world(173, "gateforeign", false).await;
    let other = ClusterTags::new(unique_name("gateother"), false).unwrap();
    for (resources, value) in [
        (w.subnets.clone(), "shared"),
        (vec![w.node_group.clone()], "owned"),
    ] {
        let tag = Tag::builder().key(other.key()).value(value).build();
        w.raw
            .create_tags()
            .set_resources(Some(resources))
            .tags(tag)
            .send()
            .await
            .unwrap();
    }
    let foreign = w.lbs(LoadBalancerConfig::new(other, VpcId::new(&w.vpc)));
    let victim = made(&foreign, &w, Kind::Network, "foreign", false).await;
    assert_eq!(
        members(&seen(&w, &victim).await).len(),
        3,
        "the victim serves every node"
    );
    let lbs = w.lbs(w.config.clone());
    matrix(&w, &lbs, &victim, &ACTORS).await;
}

/// An ALB the AWS Load Balancer Controller made: an NLB Service naming it is refused before anything is made.
#[tokio::test]
async fn an_alb_of_another_tool_is_never_touched() {
    let w = ccm_testing::lb_world::world(174, "gatealb", false).await;
    let name = chosen("alb");
    let cluster = w.config.cluster.id().to_owned();
    let tags = [
        ("elbv2.k8s.aws/cluster", cluster.as_str()),
        ("ingress.k8s.aws/stack", "moto/web"),
    ];
    lb_gate::plant_alb(&w, &name, &tags).await;
    let lb = w.adapter.elbv2().load_balancer(&name).await.unwrap().unwrap();
    let victim = Victim {
        what: "alb",
        kind: Kind::Application,
        hostname: lb.dns_name,
        service: None,
        ours: false,
        holder: "a load balancer of type application, not an NLB".to_owned(),
        name,
    };
    let lbs = w.lbs(w.config.clone());
    matrix(&w, &lbs, &victim, &[Actor::SameNamespace, Actor::OtherNamespace]).await;
}

/// A Service deleted and re-created under the same chosen name while its cleanup waited: the predecessor's
/// cleanup deletes nothing the successor wants, before and after the successor's first ensure (which takes the
/// load balancer over: its UID tag names the successor), and the predecessor's plain deletion then leaves it too.
#[tokio::test]
async fn a_predecessors_cleanup_leaves_the_successors_load_balancer() {
    let w = ccm_testing::lb_world::world(175, "gatepred", false).await;
    let lbs = w.lbs(w.config.clone());
    let mut results = Vec::new();
    for (kind, what) in [(Kind::Classic, "pclb"), (Kind::Network, "pnlb")] {
        let victim = made(&lbs, &w, kind, what, true).await;
        let old = victim.service.clone().unwrap();
        let named = [(Key::LoadBalancerName, victim.name.as_str())];
        let new_uid = uid();
        let new = service("moto", "web", &new_uid, kind, &named);
        let cleanup = async |old: &Service, new: &Service| {
            let done = lbs
                .ensure_predecessor_load_balancer_deleted(CLUSTER, old, new)
                .await;
            done.map(|()| "cleaned up".to_owned()).map_err(|e| e.to_string())
        };
        let label = format!("{what} / predecessor cleanup before the successor's ensure");
        results.push(checked(&w, &victim, &label, Some(false), cleanup(&old, &new)).await);

        let status = ensure(&lbs, &w, &new)
            .await
            .expect("the successor takes over")
            .status;
        assert_eq!(
            hostname(&status),
            victim.hostname,
            "{what}: the same load balancer"
        );
        let Some((_, tags)) = seen(&w, &victim).await.load_balancer else {
            panic!("{what}: the successor's load balancer is gone");
        };
        assert_eq!(tags["kubernetes.io/service-uid"], new_uid, "{what}: taken over");
        let new = with_status(new, &status);
        let label = format!("{what} / predecessor cleanup after the successor's ensure");
        results.push(checked(&w, &victim, &label, Some(false), cleanup(&old, &new)).await);

        let delete = async || {
            let done = lbs.ensure_load_balancer_deleted(CLUSTER, &old).await;
            done.map(|()| "deleted".to_owned()).map_err(|e| e.to_string())
        };
        let label = format!("{what} / the predecessor's plain deletion after the successor's ensure");
        results.push(checked(&w, &victim, &label, Some(false), delete()).await);
    }
    let failed: Vec<&String> = results.iter().filter_map(|r| r.as_ref().err()).collect();
    let passed: Vec<&String> = results.iter().filter_map(|r| r.as_ref().ok()).collect();
    eprintln!("passed: {passed:#?}");
    assert!(failed.is_empty(), "failed: {failed:#?}");
}

/// An ALB another tool makes under the chosen name after the NLB's observation, before its create: ELBv2 names
/// are unique across types, so AWS answers `DuplicateLoadBalancerName` (ministack natively, moto through
/// scripts/moto-server.py). The adopt-on-duplicate path claims what it then finds like any load balancer under
/// the name: the ALB is refused, naming its type, and nothing is written to it. Runs on both emulators.
#[tokio::test]
async fn an_alb_made_between_the_observation_and_the_create_is_refused() {
    use ccm_aws_api::SubnetId;
    use ccm_load_balancers::{
        flavour::Scope,
        nlb, ownership,
        ownership::{Claimant, Purpose},
        parse_service,
    };
    let w = ccm_testing::lb_world::world(176, "gaterace", false).await;
    let name = chosen("race");
    let uid = uid();
    let svc = service(
        "moto",
        "web",
        &uid,
        Kind::Network,
        &[(Key::LoadBalancerName, name.as_str())],
    );
    let spec = parse_service(&svc).unwrap();
    let subnets: Vec<SubnetId> = w.subnets.iter().map(SubnetId::new).collect();
    let desired = nlb::build(&spec, &[], &w.config, CLUSTER, &subnets).unwrap();
    let ec2 = Arc::new(InstanceCatalog::new()).over(w.adapter.ec2().clone());
    let (elb, elbv2) = (w.adapter.elb(), w.adapter.elbv2());
    let observed = nlb::observe(&ec2, elb, elbv2, &w.config, &desired, Scope::Full)
        .await
        .unwrap();
    assert!(observed.load_balancer.is_none(), "nothing under the name yet");
    let claim = ownership::claim(
        &w.config,
        &Claimant::new(&name, "moto/web", &uid),
        None,
        Purpose::Serve,
    )
    .unwrap();
    let changes = nlb::plan(&desired, &observed);

    let cluster = w.config.cluster.id().to_owned();
    lb_gate::plant_alb(&w, &name, &[("elbv2.k8s.aws/cluster", cluster.as_str())]).await;
    let lb = elbv2.load_balancer(&name).await.unwrap().unwrap();
    let victim = Victim {
        what: "alb",
        kind: Kind::Application,
        hostname: lb.dns_name,
        service: None,
        ours: false,
        holder: "a load balancer of type application, not an NLB".to_owned(),
        name: name.clone(),
    };
    let before = seen(&w, &victim).await;
    let refused = nlb::apply(&ec2, elbv2, &w.config, &claim, &observed, &changes)
        .await
        .unwrap_err();
    assert!(
        refused.to_string().contains("type application"),
        "the refusal names what holds the name: {refused}"
    );
    assert_eq!(seen(&w, &victim).await, before, "nothing written to the ALB");
}
