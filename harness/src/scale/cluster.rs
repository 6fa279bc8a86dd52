//! The scale harness's Kubernetes side: Nodes registered as kubelets with `--cloud-provider=external` do (named
//! by private DNS name, tainted uninitialized, Ready or not yet), and Services of type LoadBalancer of both
//! flavours, each with one pool of Nodes as targets.

use std::time::Duration;

use anyhow::Context;
use ccm_testing::{
    ec2::Launched,
    load_balancers::name_for_uid,
    nodes::{self, UNINITIALIZED},
    services::{self, LB_TYPE},
};
use futures::{StreamExt, TryStreamExt, stream};
use k8s_openapi::api::core::v1::{Node, Service};
use kube::{
    Api,
    api::{DeleteParams, ListParams, Patch, PatchParams, PostParams},
};
use serde_json::json;
use tokio::time::Instant;

/// The Node label that puts a Node in a pool; each Service targets one pool.
pub const POOL_LABEL: &str = "scale-pool";
const TARGET_LABELS: &str = "service.beta.kubernetes.io/aws-load-balancer-target-node-labels";
/// Requests the harness keeps in flight at once.
const IN_FLIGHT: usize = 32;

/// The Node of `instance` in `pool`, labelled `scale=<group>`: tainted uninitialized when `tainted`; its
/// kubelet's Ready condition True when `ready`, else False (a kubelet whose network is not up yet).
pub fn node(
    instance: &Launched,
    group: &str,
    pool: usize,
    tainted: bool,
    ready: bool,
) -> anyhow::Result<Node> {
    let taints = if tainted {
        json!([{ "key": UNINITIALIZED, "value": "true", "effect": "NoSchedule" }])
    } else {
        json!([])
    };
    Ok(serde_json::from_value(json!({
        "metadata": { "name": instance.private_dns, "labels": { "scale": group, POOL_LABEL: pool.to_string() } },
        "spec": { "taints": taints },
        // Nodes may be created with their status: the kubelet's Ready condition, so that the node-lifecycle
        // controller sees healthy Nodes as in a cluster without churn.
        "status": { "conditions": [ready_condition(ready)] },
    }))?)
}

fn ready_condition(ready: bool) -> serde_json::Value {
    let (status, reason) = if ready {
        ("True", "KubeletReady")
    } else {
        ("False", "KubeletNotReady")
    };
    json!({ "type": "Ready", "status": status, "reason": reason })
}

/// Reports the Node `name` Ready, as its kubelet does once its network is up.
pub async fn set_ready(api: &Api<Node>, name: &str) -> anyhow::Result<()> {
    let patch = json!({ "status": { "conditions": [ready_condition(true)] } });
    api.patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .with_context(|| format!("reporting Node {name} Ready"))?;
    Ok(())
}

/// Creates `nodes`, 32 at a time.
pub async fn create_nodes(api: &Api<Node>, nodes: Vec<Node>) -> anyhow::Result<()> {
    stream::iter(nodes)
        .map(|n| async move { api.create(&PostParams::default(), &n).await.map(drop) })
        .buffer_unordered(IN_FLIGHT)
        .try_collect::<Vec<()>>()
        .await
        .context("creating Nodes")?;
    Ok(())
}

/// Waits until `count` Nodes matching `selector` are initialized (provider ID set, taint gone), up to `limit`.
pub async fn wait_initialized(
    api: &Api<Node>,
    selector: &ListParams,
    count: usize,
    limit: Duration,
) -> anyhow::Result<()> {
    let started = Instant::now();
    loop {
        let list = poll(api.list(selector)).await;
        let done = list.iter().filter(|n| nodes::is_initialized(n)).count();
        if list.len() >= count && done == list.len() {
            return Ok(());
        }
        anyhow::ensure!(
            started.elapsed() < limit,
            "{done} of {count} Nodes initialized after {} s",
            limit.as_secs()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// The objects of a poll; none when the list failed (the apiserver restarting, a dropped connection): a wait is
/// ended by its time limit only, never by one failed poll.
async fn poll<K: Clone>(list: impl Future<Output = kube::Result<kube::api::ObjectList<K>>>) -> Vec<K> {
    match list.await {
        Ok(list) => list.items,
        Err(e) => {
            println!("listing failed ({e}); polling again");
            Vec::new()
        }
    }
}

/// Deletes the Nodes matching `selector` and waits until none is left.
pub async fn delete_nodes(api: &Api<Node>, selector: &ListParams) -> anyhow::Result<()> {
    api.delete_collection(&DeleteParams::default(), selector).await?;
    while !api.list(selector).await?.items.is_empty() {
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    Ok(())
}

/// A Service's load balancer as the harness tracks it.
#[derive(Debug, Clone)]
pub struct Lb {
    /// The load balancer's name in AWS (`a` + the Service's UID).
    pub name: String,
    pub nlb: bool,
    pub pool: usize,
}

/// Creates Services `scale-<i>` for `i` in `range` (odd ones NLBs, even ones Classic ELBs; one TCP port), each
/// targeting the Nodes of pool `i % pools`.
pub async fn create_services(
    api: &Api<Service>,
    group: &str,
    range: std::ops::Range<usize>,
    pools: usize,
) -> anyhow::Result<Vec<Lb>> {
    stream::iter(range)
        .map(|i| async move {
            let (pool, nlb) = (i % pools.max(1), i % 2 == 1);
            let targets = format!("{POOL_LABEL}={pool}");
            let mut annotations = vec![(TARGET_LABELS, targets.as_str())];
            if nlb {
                annotations.push((LB_TYPE, "nlb"));
            }
            let name = format!("scale-{i}");
            let mut svc = services::load_balancer(&name, "default", &[80], &annotations);
            svc.metadata.labels = Some([("scale".to_owned(), group.to_owned())].into());
            let created = api.create(&PostParams::default(), &svc).await?;
            let uid = created.metadata.uid.unwrap_or_default();
            anyhow::Ok(Lb {
                name: name_for_uid(&uid),
                nlb,
                pool,
            })
        })
        .buffer_unordered(IN_FLIGHT)
        .try_collect()
        .await
}

/// Waits until `count` Services of the group have their load balancer's hostname, up to `limit`; how many did.
pub async fn wait_hostnames(
    api: &Api<Service>,
    group: &str,
    count: usize,
    limit: Duration,
) -> anyhow::Result<usize> {
    let started = Instant::now();
    let selector = ListParams::default().labels(&format!("scale={group}"));
    loop {
        let list = poll(api.list(&selector)).await;
        let done = list
            .iter()
            .filter(|s| services::ingress_hostname(s).is_some())
            .count();
        if done >= count {
            return Ok(done);
        }
        if started.elapsed() >= limit {
            // The Go controller may never serve them all (its NLB rules hit AWS's rules per group): the table
            // says how far it got, and the run goes on.
            println!(
                "{done} of {count} Services have a load balancer after {} s: going on",
                limit.as_secs()
            );
            return Ok(done);
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// Deletes the harness's Services and waits (up to `limit`) until the CCM has removed their load balancers and
/// finalizers.
pub async fn delete_services(api: &Api<Service>, group: &str, limit: Duration) -> anyhow::Result<()> {
    let selector = ListParams::default().labels(&format!("scale={group}"));
    // Services have no DELETE of a collection.
    for svc in api.list(&selector).await?.items {
        let name = svc.metadata.name.unwrap_or_default();
        api.delete(&name, &DeleteParams::default()).await?;
    }
    let started = Instant::now();
    while !api.list(&selector).await?.items.is_empty() {
        anyhow::ensure!(
            started.elapsed() < limit,
            "Services still there after {} s",
            limit.as_secs()
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::ResourceExt;

    fn ready(node: &Node) -> Option<(String, Option<String>)> {
        let conditions = node.status.as_ref()?.conditions.as_ref()?;
        let c = conditions.iter().find(|c| c.type_ == "Ready")?;
        Some((c.status.clone(), c.reason.clone()))
    }

    #[test]
    fn a_joining_node_registers_not_ready_and_burst_nodes_ready() {
        let instance = Launched {
            id: "i-0123".into(),
            private_ip: "10.0.0.1".into(),
            private_dns: "ip-10-0-0-1.ec2.internal".into(),
            zone: "us-east-1a".into(),
        };
        let joining = node(&instance, "g", 0, true, false).unwrap();
        assert_eq!(
            ready(&joining),
            Some(("False".into(), Some("KubeletNotReady".into())))
        );
        let taints = joining.spec.as_ref().and_then(|s| s.taints.as_ref()).unwrap();
        assert_eq!(taints[0].key, UNINITIALIZED);
        let burst = node(&instance, "g", 3, false, true).unwrap();
        assert_eq!(ready(&burst), Some(("True".into(), Some("KubeletReady".into()))));
        assert_eq!(burst.labels().get(POOL_LABEL).map(String::as_str), Some("3"));
    }
}
