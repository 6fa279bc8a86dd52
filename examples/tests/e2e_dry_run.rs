//! End to end: `--dry-run` beside a cluster, with the `aws-cloud-controller-manager` binary against moto (behind
//! the fault proxy, which counts every request that reaches AWS) and the real kube-apiserver.
//!
//! First a cluster nobody served yet: uninitialized Nodes with pod CIDRs and a LoadBalancer Service. The dry run
//! (`--dry-run --leader-elect=true`, every controller) sends no mutating AWS request, and leaves the Nodes, the
//! Service, the Events and the Leases as they were; its report and gauge name the pending work (each Node for
//! cloud-node and route, the Service's load-balancer plan). Then the same cluster served by a normal run (load
//! balancers made, Nodes initialized and tagged) and one Service edited since: the dry run reports exactly that
//! Service's change, and nothing else of this cluster.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::too_many_lines)]

mod common;

use std::collections::BTreeMap;

use ccm_testing::{FaultProxy, TestEnv, counts_since, unique_name};
use common::{
    Ccm, World, eventually, fetch, initialized,
    lb::{Elb, lb_name, public_subnet, service},
    mutations,
};
use k8s_openapi::api::{
    coordination::v1::Lease,
    core::v1::{Event, Namespace, Node, Service},
};
use kube::{
    Api,
    api::{Patch, PatchParams, PostParams},
};
use serde_json::{Value, json};

const DRY_RUN: &[&str] = &[
    "--dry-run",
    "--leader-elect=true",
    "--authorization-always-allow-paths=/healthz,/metrics,/dry-run",
];

const ROUTES: &[&str] = &[
    "--configure-cloud-routes=true",
    "--allocate-node-cidrs=true",
    "--cluster-cidr=10.244.0.0/16",
    "--route-reconciliation-period=2s",
    "--controllers=*,tagging",
    "--tags=team=e2e",
    "--resources=instance",
];

const HEALTHCHECK: &str = "service.beta.kubernetes.io/aws-load-balancer-healthcheck-interval";

#[tokio::test]
async fn e2e_a_dry_run_writes_nothing_and_reports_the_pending_work() {
    let env = TestEnv::get();
    let world = World::new("").await;
    public_subnet(&world).await;
    let table = world
        .network
        .route_table(&[(&world.cluster_key(), "owned")])
        .await
        .unwrap();
    let client = env.kube_client().await.unwrap();
    let namespace = unique_name("dry");
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let ns = json!({ "metadata": { "name": namespace } });
    namespaces
        .create(&PostParams::default(), &serde_json::from_value(ns).unwrap())
        .await
        .unwrap();
    let services: Api<Service> = Api::namespaced(client.clone(), &namespace);
    let events: Api<Event> = Api::namespaced(client.clone(), &namespace);
    let leases: Api<Lease> = Api::namespaced(client, "kube-system");
    let launched = world.launch(2).await;
    let names: Vec<String> = launched.iter().map(|l| l.id.clone()).collect();
    for (k, name) in names.iter().enumerate() {
        world.register_node(name, Some(&format!("10.244.{k}.0/24"))).await;
    }
    let web = services
        .create(&PostParams::default(), &service("web", &[80], &BTreeMap::new()))
        .await
        .unwrap();
    let proxy = FaultProxy::start(&env.aws_endpoint).await.unwrap();
    let via_proxy = world.config_via("proxy.conf", &proxy.url());
    let before = world.nodes.get(&names[0]).await.unwrap();

    // 1. Nothing served yet.
    let args: Vec<&str> = DRY_RUN.iter().chain(ROUTES).copied().collect();
    let mut ccm = Ccm::start_with_config(&world, &via_proxy, &args);
    let port = ccm.port;
    let web_key = format!("{namespace}/web");
    eventually(&mut ccm, "the pending work in the report", 60, async || {
        let r = report(port).await;
        let nodes_pending = names.iter().all(|n| {
            pending_write(&r, "cloud-node", n)
                && route_lines(&r, n).iter().any(|l| l.starts_with("create route"))
        });
        nodes_pending && plan_of(&r, &web_key).is_some()
    })
    .await;
    let r = report(port).await;
    let plan = plan_of(&r, &web_key).unwrap();
    assert_eq!(plan["replaces"], false, "{r:#}");
    let changes = plan["changes"].to_string();
    assert!(
        changes.contains("create"),
        "a plan that makes the load balancer: {r:#}"
    );
    let metrics = ccm.metrics().await;
    for controller in ["cloud-node", "route", "service"] {
        let line = format!("cloud_controller_dry_run_pending_changes{{controller=\"{controller}\"}}");
        let value = metrics
            .lines()
            .find_map(|l| l.strip_prefix(&line))
            .and_then(|v| v.trim().parse::<f64>().ok());
        assert!(value.is_some_and(|v| v >= 1.0), "{line}: {value:?}\n{metrics}");
    }
    assert_no_mutation_between(&BTreeMap::new(), &proxy.requests_by_action());
    // Nothing written to the cluster: the Node as it was, the Service unserved, no Event, no Lease.
    let after = world.nodes.get(&names[0]).await.unwrap();
    assert_eq!(after.metadata.resource_version, before.metadata.resource_version);
    assert!(!initialized(&after));
    let now = services.get("web").await.unwrap();
    assert_eq!(now.metadata.resource_version, web.metadata.resource_version);
    assert_eq!(now.metadata.finalizers, None);
    assert!(events.list(&Default::default()).await.unwrap().items.is_empty());
    assert!(
        leases.get_opt(&ccm.lease).await.unwrap().is_none(),
        "a Lease was taken"
    );
    let status = ccm.terminate().await;
    assert!(status.success(), "{status}\n{}", ccm.log_text());

    // 2. A normal run serves the cluster; a second Service is edited after it stopped.
    let api = services.clone();
    let created = api
        .create(&PostParams::default(), &service("api", &[443], &BTreeMap::new()))
        .await
        .unwrap();
    let elb = Elb(aws_sdk_elasticloadbalancing::Client::new(&env.aws_config().await));
    let uids = [web.metadata.uid.clone(), created.metadata.uid.clone()];
    let balancers: Vec<String> = uids.iter().map(|u| lb_name(u.as_deref().unwrap())).collect();
    let mut ccm = Ccm::start(&world, ROUTES);
    eventually(
        &mut ccm,
        "both Services served, both Nodes initialized",
        120,
        async || {
            let mut done = true;
            for name in ["web", "api"] {
                done &= served(&services.get(name).await.unwrap());
            }
            for name in &names {
                done &= world.nodes.get(name).await.is_ok_and(|n| initialized(&n));
            }
            done
        },
    )
    .await;
    // Converged before it stops: a Node initialized after a load balancer was made is registered by a later
    // host update, which the dry run would report as pending.
    let mut instances = names.clone();
    instances.sort();
    eventually(&mut ccm, "the routes, tags and registrations", 60, async || {
        let mut done = world.network.instance_routes(&table).await.unwrap().len() == names.len()
            && nodes_labelled(&world.nodes, &names).await;
        for lb in &balancers {
            done &= elb.instances(lb).await == instances;
        }
        done
    })
    .await;
    // And nothing left in flight (the nodes' rules follow the registrations): no mutating call for 2 s.
    let port = ccm.port;
    let mut last = mutations(port).await;
    eventually(&mut ccm, "no more mutating calls", 60, async || {
        tokio::time::sleep(std::time::Duration::from_secs(2)).await;
        let now = mutations(port).await;
        std::mem::replace(&mut last, now.clone()) == now
    })
    .await;
    let status = ccm.terminate().await;
    assert!(status.success(), "{status}\n{}", ccm.log_text());
    let patch = json!({ "metadata": { "annotations": { HEALTHCHECK: "30" } } });
    api.patch("api", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();

    let before_proxy = proxy.requests_by_action();
    let events_before = events.list(&Default::default()).await.unwrap().items.len();
    let mut ccm = Ccm::start_with_config(&world, &via_proxy, &args);
    let port = ccm.port;
    let api_key = format!("{namespace}/api");
    eventually(&mut ccm, "the edited Service's plan", 60, async || {
        plan_of(&report(port).await, &api_key).is_some()
    })
    .await;
    // The other Service's sync, a few route passes and tagging rounds, so that anything they would report is in.
    tokio::time::sleep(std::time::Duration::from_secs(5)).await;
    let r = report(port).await;
    let ours: Vec<&Value> = r["load_balancers"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| {
            p["service"]
                .as_str()
                .unwrap_or_default()
                .starts_with(&format!("{namespace}/"))
        })
        .collect();
    assert_eq!(ours.len(), 1, "only the edited Service: {r:#}");
    let changes = ours[0]["changes"].to_string();
    assert!(changes.contains("health"), "the health check interval: {r:#}");
    assert_eq!(ours[0]["replaces"], false, "{r:#}");
    for name in &names {
        assert!(!pending_write(&r, "cloud-node", name), "{r:#}");
        assert!(route_lines(&r, name).is_empty(), "{r:#}");
        let tagging = r["changes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["object"] == format!("/api/v1/nodes/{name}"));
        assert!(!tagging, "{r:#}");
    }
    let after_proxy = proxy.requests_by_action();
    assert_no_mutation_between(&before_proxy, &after_proxy);
    let events_after = events.list(&Default::default()).await.unwrap().items.len();
    assert_eq!(events_after, events_before, "the dry run posted Events");
    drop(ccm);

    namespaces.delete(&namespace, &Default::default()).await.unwrap();
    world.cleanup().await;
}

/// `/dry-run` of the CCM on `port` (`null` while it is not up).
async fn report(port: u16) -> Value {
    let text = fetch(port, "/dry-run").await.unwrap_or_default();
    serde_json::from_str(&text).unwrap_or(Value::Null)
}

fn plan_of<'r>(report: &'r Value, service: &str) -> Option<&'r Value> {
    report["load_balancers"]
        .as_array()?
        .iter()
        .find(|p| p["service"] == service)
}

fn pending_write(report: &Value, controller: &str, node: &str) -> bool {
    let path = format!("/api/v1/nodes/{node}");
    report["writes"].as_array().is_some_and(|w| {
        w.iter().any(|w| {
            w["controller"] == controller && w["path"].as_str().is_some_and(|p| p.starts_with(&path))
        })
    })
}

fn route_lines(report: &Value, node: &str) -> Vec<String> {
    report["routes"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|r| r["node"] == node)
        .flat_map(|r| r["changes"].as_array().cloned().unwrap_or_default())
        .filter_map(|l| l.as_str().map(str::to_owned))
        .collect()
}

fn served(svc: &Service) -> bool {
    svc.status
        .as_ref()
        .and_then(|s| s.load_balancer.as_ref())
        .and_then(|l| l.ingress.as_ref())
        .is_some_and(|i| !i.is_empty())
}

async fn nodes_labelled(nodes: &Api<Node>, names: &[String]) -> bool {
    for name in names {
        let node = nodes.get(name).await.unwrap();
        let labels = node.metadata.labels.unwrap_or_default();
        if !labels.contains_key("k8s.io/cloud-provider-aws") {
            return false;
        }
    }
    true
}

fn is_mutating(action: &str) -> bool {
    !["Describe", "Get", "List"].iter().any(|p| action.starts_with(p))
}

/// No mutating request reached AWS through the proxy between two readings of its counts.
fn assert_no_mutation_between(before: &BTreeMap<String, u64>, after: &BTreeMap<String, u64>) {
    let mutating: Vec<String> = counts_since(before, after)
        .into_keys()
        .filter(|a| is_mutating(a))
        .collect();
    assert!(mutating.is_empty(), "mutating requests reached AWS: {mutating:?}");
}
