//! End to end through the real service controller: a tenant names other Services' load balancers. Two victim
//! Services in `default`, a Classic ELB and an NLB under chosen names (`aws-load-balancer-name`), are served;
//! then a tenant, in a namespace of its own, creates a Service naming each of them, asking for no targets at
//! all (`aws-load-balancer-target-node-labels: nope=nope`); then a Node joins. The generic service controller
//! drives `AwsCloud` against the real apiserver and moto behind a fault proxy, with a long retry backoff so that
//! the Node's joining reaches the refused tenant's Services through the node sync alone. Each victim keeps every target (the joining
//! Node registered too) and every rule on the nodes' group; each tenant Service gets a `SyncLoadBalancerFailed`
//! Warning naming the holder; no deregistration, revocation or deletion ever reaches AWS, also when the tenant's
//! Services are deleted.
//! (An `e2e` file: it launches instances and runs alone, after the other tests.)
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::too_many_lines)]

mod common;

use std::{
    collections::{BTreeMap, BTreeSet},
    time::Duration,
};

use ccm_aws_api::{Ec2, Elb, Elbv2, Filter};
use ccm_testing::{FaultProxy, TestEnv, counts_since, unique_name};
use common::{Fixture, eventually, fixture_at};
use k8s_openapi::api::core::v1::{Event, Namespace, Node, Service};
use kube::{
    Api,
    api::{DeleteParams, ListParams, PostParams},
};
use serde_json::json;

const NAME: &str = "service.beta.kubernetes.io/aws-load-balancer-name";
const TYPE: &str = "service.beta.kubernetes.io/aws-load-balancer-type";
const INTERNAL: &str = "service.beta.kubernetes.io/aws-load-balancer-internal";
const NODE_LABELS: &str = "service.beta.kubernetes.io/aws-load-balancer-target-node-labels";

/// What must never reach AWS once the victims serve.
const FORBIDDEN: [&str; 4] = [
    "DeregisterInstancesFromLoadBalancer",
    "DeregisterTargets",
    "RevokeSecurityGroupIngress",
    "DeleteLoadBalancer",
];

/// A load balancer name of its own per run (names are unique in an account; moto outlives test runs).
fn chosen(tag: &str) -> String {
    let uuid = std::fs::read_to_string("/proc/sys/kernel/random/uuid").unwrap();
    format!("{tag}-{}", &uuid[..8])
}

/// A Service of this fixture's group, port 80, with `annotations` (an internal load balancer).
fn manifest(f: &Fixture, name: &str, annotations: &[(&str, &str)]) -> Service {
    let mut all: serde_json::Map<String, serde_json::Value> = annotations
        .iter()
        .map(|(k, v)| ((*k).to_owned(), json!(v)))
        .collect();
    all.insert(INTERNAL.to_owned(), json!("true"));
    serde_json::from_value(json!({
        "metadata": { "name": name, "labels": { "ccm-test/group": f.group }, "annotations": all },
        "spec": { "type": "LoadBalancer", "ports": [{ "port": 80, "protocol": "TCP" }] },
    }))
    .unwrap()
}

/// The instances behind the load balancer `name`: registered (Classic) or targets of any target group (NLB).
async fn members(f: &Fixture, name: &str, nlb: bool) -> BTreeSet<String> {
    if !nlb {
        let lb = f.adapter.elb().load_balancer(name).await.unwrap();
        return lb
            .map(|lb| lb.instances.iter().map(ToString::to_string).collect())
            .unwrap_or_default();
    }
    let elbv2 = f.adapter.elbv2();
    let Some(lb) = elbv2.load_balancer(name).await.unwrap() else {
        return BTreeSet::new();
    };
    let mut out = BTreeSet::new();
    for group in elbv2.target_groups(&lb.arn).await.unwrap_or_default() {
        let health = elbv2.target_health(&group.arn).await.unwrap();
        out.extend(health.into_iter().map(|t| t.target.id.to_string()));
    }
    out
}

/// The rules on `group`, one per (protocol, ports, source).
async fn rules(f: &Fixture, group: &str) -> BTreeSet<String> {
    let found = f
        .adapter
        .ec2()
        .security_groups(&[Filter::new("group-id", [group])])
        .await;
    let mut out = BTreeSet::new();
    for p in &found.unwrap()[0].ingress {
        let sources = p.ip_ranges.iter().chain(&p.ipv6_ranges).map(|r| r.cidr.clone());
        let sources = sources.chain(p.source_groups.iter().map(|g| g.group_id.to_string()));
        out.extend(sources.map(|s| format!("{} {:?}-{:?} from {s}", p.protocol, p.from_port, p.to_port)));
    }
    out
}

/// Launches `count` instances into the nodes' `group` and registers an initialized Node for each.
async fn join(f: &Fixture, group: &str, count: i32) -> Vec<String> {
    let key = format!("kubernetes.io/cluster/{}", f.cluster_id);
    let launched = f
        .network
        .launch_in(count, group, &[(&key, "owned")])
        .await
        .unwrap();
    for l in &launched {
        let node: Node = serde_json::from_value(json!({
            "metadata": { "name": l.id, "labels": { "ccm-test/group": f.group } },
            "spec": { "providerID": format!("aws:///{}/{}", l.zone, l.id) },
        }))
        .unwrap();
        f.nodes.create(&PostParams::default(), &node).await.unwrap();
    }
    launched.into_iter().map(|l| l.id).collect()
}

/// Whether `events` hold a `SyncLoadBalancerFailed` Warning about `name` saying `name_taken` and `holder`.
async fn warned(events: &Api<Event>, name: &str, taken: &str, holder: &str) -> bool {
    let lp = ListParams::default().fields(&format!("involvedObject.name={name}"));
    events.list(&lp).await.unwrap().items.iter().any(|e| {
        e.type_.as_deref() == Some("Warning")
            && e.reason.as_deref() == Some("SyncLoadBalancerFailed")
            && e.message
                .as_deref()
                .is_some_and(|m| m.contains(taken) && m.contains(holder))
    })
}

/// Creates the victim Services (a Classic ELB and an NLB under chosen names) and waits until each serves exactly
/// `instances`: (load balancer name, NLB) each.
async fn serve_victims(f: &Fixture, services: &Api<Service>, instances: &[String]) -> Vec<(String, bool)> {
    let victims = vec![(chosen("e2eclb"), false), (chosen("e2enlb"), true)];
    for (name, nlb) in &victims {
        let mut annotations = vec![(NAME, name.as_str())];
        if *nlb {
            annotations.push((TYPE, "nlb"));
        }
        let svc = manifest(f, &format!("{}-{name}", f.group), &annotations);
        services.create(&PostParams::default(), &svc).await.unwrap();
    }
    let want: BTreeSet<String> = instances.iter().cloned().collect();
    for (name, nlb) in &victims {
        eventually(&format!("{name} served with every node"), 90, async || {
            members(f, name, *nlb).await == want
        })
        .await;
    }
    victims
}

/// The tenant's Service naming each victim (`steal-<name>`, no target wanted), in `namespace`; waits for the
/// Warning naming each holder.
async fn tenant_moves_in(f: &Fixture, client: &kube::Client, namespace: &str, victims: &[(String, bool)]) {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let ns = serde_json::from_value(json!({ "metadata": { "name": namespace } })).unwrap();
    namespaces.create(&PostParams::default(), &ns).await.unwrap();
    let tenant: Api<Service> = Api::namespaced(client.clone(), namespace);
    let events: Api<Event> = Api::namespaced(client.clone(), namespace);
    for (name, nlb) in victims {
        let mut annotations = vec![(NAME, name.as_str()), (NODE_LABELS, "nope=nope")];
        if *nlb {
            annotations.push((TYPE, "nlb"));
        }
        let svc = manifest(f, &format!("steal-{name}"), &annotations);
        tenant.create(&PostParams::default(), &svc).await.unwrap();
    }
    for (name, _) in victims {
        let holder = format!("Service default/{}-{name}", f.group);
        eventually(&format!("a Warning naming {holder}"), 60, async || {
            warned(
                &events,
                &format!("steal-{name}"),
                &format!("{name} is taken"),
                &holder,
            )
            .await
        })
        .await;
    }
}

#[tokio::test]
async fn e2e_a_tenant_naming_other_services_load_balancers_never_touches_them() {
    let proxy = FaultProxy::start(&TestEnv::get().aws_endpoint).await.unwrap();
    let f = fixture_at(Some(&proxy.url())).await;
    let client = TestEnv::get().kube_client().await.unwrap();
    let key = format!("kubernetes.io/cluster/{}", f.cluster_id);
    let group = f.network.security_group(&[(&key, "owned")]).await.unwrap();
    let mut instances = join(&f, &group, 2).await;
    // A refused Service is retried only after a long backoff and no drift pass runs: between its refusal and
    // its retry, only the node sync may touch it, which is the path that once deregistered the victims (its
    // retries and the drift passes re-ensure it, which hides that path). The drift passes are in the matrix
    // (lb_ownership_gate_moto.rs).
    let stop = f.run_service_controller(&client, |config| {
        config.node_sync_window = Duration::from_millis(200);
        config.min_retry_delay = Duration::from_secs(60);
        config.max_retry_delay = Duration::from_secs(120);
        config.load_balancer_resync_period = Duration::from_secs(3600);
    });
    let services: Api<Service> = Api::namespaced(client.clone(), "default");
    let victims = serve_victims(&f, &services, &instances).await;
    let base = Baseline {
        calls: proxy.requests_by_action(),
        rules: rules(&f, &group).await,
        group: group.clone(),
    };
    assert!(!base.rules.is_empty(), "the victims' node rules");
    let namespace = unique_name("tenant");
    tenant_moves_in(&f, &client, &namespace, &victims).await;

    // A Node joins: the victims register it and keep the others; the tenant's Services, refused and waiting for
    // their retry, get a full sync from the node sync (refused again), never a host update of the victims.
    instances.extend(join(&f, &group, 1).await);
    let want: BTreeSet<String> = instances.iter().cloned().collect();
    for (name, nlb) in &victims {
        eventually(&format!("{name} serving the joining node"), 60, async || {
            members(&f, name, *nlb).await == want
        })
        .await;
    }
    tokio::time::sleep(Duration::from_secs(6)).await;
    check_victims(&f, &proxy, &base, &victims, &want, "after the join").await;
    let tenant: Api<Service> = Api::namespaced(client.clone(), &namespace);
    for (name, _) in &victims {
        let svc = tenant.get(&format!("steal-{name}")).await.unwrap();
        let ingress = svc.status.and_then(|s| s.load_balancer).and_then(|l| l.ingress);
        assert!(
            ingress.unwrap_or_default().is_empty(),
            "the tenant's {name} has no address"
        );
    }

    // The tenant's Services deleted: their deletion leaves the victims too.
    for (name, _) in &victims {
        tenant
            .delete(&format!("steal-{name}"), &DeleteParams::default())
            .await
            .unwrap();
    }
    eventually("the tenant's Services gone", 60, async || {
        tenant
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty()
    })
    .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    check_victims(&f, &proxy, &base, &victims, &want, "after the tenant left").await;

    for (name, _) in &victims {
        services
            .delete(&format!("{}-{name}", f.group), &DeleteParams::default())
            .await
            .unwrap();
    }
    eventually("the victims' Services gone", 90, async || {
        let lp = ListParams::default().labels(&f.selector());
        services.list(&lp).await.unwrap().items.is_empty()
    })
    .await;
    stop.send(()).ok();
    f.cleanup().await;
    let namespaces: Api<Namespace> = Api::all(client.clone());
    namespaces.delete(&namespace, &DeleteParams::default()).await.ok();
}

/// What the victims had once served: the calls so far, the nodes' group and its rules.
struct Baseline {
    calls: BTreeMap<String, u64>,
    group: String,
    rules: BTreeSet<String>,
}

/// Each victim serves exactly `want`, the nodes' group keeps every rule it had, and nothing of [`FORBIDDEN`]
/// reached AWS since the baseline.
async fn check_victims(
    f: &Fixture,
    proxy: &FaultProxy,
    base: &Baseline,
    victims: &[(String, bool)],
    want: &BTreeSet<String>,
    when: &str,
) {
    for (name, nlb) in victims {
        assert_eq!(
            &members(f, name, *nlb).await,
            want,
            "{when}: {name} serves every node"
        );
    }
    let now = rules(f, &base.group).await;
    let lost: Vec<&String> = base.rules.difference(&now).collect();
    assert!(lost.is_empty(), "{when}: the nodes' group lost {lost:?}");
    let calls = counts_since(&base.calls, &proxy.requests_by_action());
    eprintln!("{when}: AWS calls since the victims served: {calls:?}");
    let forbidden: Vec<(&String, &u64)> = calls
        .iter()
        .filter(|(a, _)| FORBIDDEN.contains(&a.as_str()))
        .collect();
    assert!(
        forbidden.is_empty(),
        "{when}: {forbidden:?} reached AWS (all calls since the victims served: {calls:?})"
    );
}
