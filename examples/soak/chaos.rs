//! The chaos task: every few seconds one random event among launching an instance and registering its Node,
//! terminating an instance (its kubelet stops: the Node goes NotReady, the CCM must delete it), a scale-in
//! (Node deleted, then the instance), a Node marked NotReady or Ready again (its instance runs: the CCM must keep
//! it), the leader SIGKILLed, and a forced leader change (the leader stopped gracefully, releasing the lease).
//! Killed replicas come back a moment later, as a Deployment's would.

use std::{collections::BTreeMap, sync::Arc, time::Duration};

use ccm_testing::nodes::UNINITIALIZED;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Patch, PostParams};
use rand::{Rng, SeedableRng, rngs::StdRng, seq::IteratorRandom};
use serde_json::json;
use tokio::sync::{Mutex, watch};

use crate::{Soak, replicas::Replicas};

/// The harness's Nodes: name to instance, and whether the instance runs.
#[derive(Default)]
pub struct Fleet {
    pub nodes: BTreeMap<String, Member>,
}

pub struct Member {
    pub instance: String,
    pub running: bool,
    /// The harness deleted the Node itself (a scale-in).
    pub deleted: bool,
    pub ready: bool,
}

const MIN_NODES: usize = 2;
const MAX_NODES: usize = 6;

/// Runs events until `stop` turns true.
pub async fn run(
    soak: Arc<Soak>,
    replicas: Arc<Mutex<Replicas>>,
    mut stop: watch::Receiver<bool>,
) -> anyhow::Result<()> {
    let mut rng = StdRng::seed_from_u64(soak.seed ^ 0xc4a0_5eed);
    loop {
        let pause = Duration::from_millis(rng.random_range(2_000..8_000));
        if tokio::time::timeout(pause, stop.changed()).await.is_ok() || *stop.borrow() {
            return Ok(());
        }
        let live = soak
            .fleet()
            .nodes
            .values()
            .filter(|m| m.running && !m.deleted)
            .count();
        match rng.random_range(0..100) {
            0..20 if live < MAX_NODES => soak.add_node(rng.random_bool(0.5)).await?,
            20..35 if live > MIN_NODES => soak.terminate_node(&mut rng, false).await?,
            35..45 if live > MIN_NODES => soak.terminate_node(&mut rng, true).await?,
            45..60 => soak.toggle_ready(&mut rng).await?,
            60..80 => soak.failover(&replicas, &mut rng, true).await?,
            80..100 => soak.failover(&replicas, &mut rng, false).await?,
            _ => {}
        }
        let exited = replicas.lock().await.restart_exited()?;
        soak.stats().crashes += exited;
    }
}

impl Soak {
    /// Launches an instance and registers its Node as a kubelet does (tainted uninitialized, Ready), named by
    /// instance ID or by private DNS name.
    pub async fn add_node(&self, by_id: bool) -> anyhow::Result<()> {
        let launched = self.world.launch_node().await?;
        let name = if by_id {
            launched.id.clone()
        } else {
            launched.private_dns.clone()
        };
        let node: Node = serde_json::from_value(json!({
            "metadata": { "name": name, "labels": { "soak": self.world.id } },
            "spec": { "taints": [{ "key": UNINITIALIZED, "value": "true", "effect": "NoSchedule" }] },
        }))?;
        self.nodes.create(&PostParams::default(), &node).await?;
        self.set_ready(&name, true).await?;
        let member = Member {
            instance: launched.id,
            running: true,
            deleted: false,
            ready: true,
        };
        self.fleet().nodes.insert(name, member);
        self.stats().node_events.launched += 1;
        Ok(())
    }

    /// Terminates a running instance; `scale_in` deletes its Node first, else the Node goes NotReady.
    async fn terminate_node(&self, rng: &mut StdRng, scale_in: bool) -> anyhow::Result<()> {
        let picked = {
            let fleet = self.fleet();
            let live = fleet.nodes.iter().filter(|(_, m)| m.running && !m.deleted);
            live.map(|(n, m)| (n.clone(), m.instance.clone())).choose(rng)
        };
        let Some((name, instance)) = picked else {
            return Ok(());
        };
        if scale_in {
            self.nodes.delete(&name, &Default::default()).await?;
        }
        self.world.terminate(&instance).await?;
        if let Some(m) = self.fleet().nodes.get_mut(&name) {
            m.running = false;
            m.deleted = scale_in;
        }
        if !scale_in {
            self.set_ready(&name, false).await?;
            self.stats().node_events.terminated += 1;
        } else {
            self.stats().node_events.scaled_in += 1;
        }
        Ok(())
    }

    /// Marks a Node of a running instance NotReady, or Ready again.
    async fn toggle_ready(&self, rng: &mut StdRng) -> anyhow::Result<()> {
        let picked = {
            let fleet = self.fleet();
            let live = fleet.nodes.iter().filter(|(_, m)| m.running && !m.deleted);
            live.map(|(n, m)| (n.clone(), m.ready)).choose(rng)
        };
        let Some((name, ready)) = picked else {
            return Ok(());
        };
        self.set_ready(&name, !ready).await?;
        if let Some(m) = self.fleet().nodes.get_mut(&name) {
            m.ready = !ready;
        }
        self.stats().node_events.ready_flips += 1;
        Ok(())
    }

    pub async fn set_ready(&self, name: &str, ready: bool) -> anyhow::Result<()> {
        let status = if ready { "True" } else { "False" };
        let patch =
            json!({ "status": { "conditions": [{ "type": "Ready", "status": status, "reason": "Soak" }] } });
        self.nodes
            .patch_status(name, &Default::default(), &Patch::Strategic(&patch))
            .await?;
        Ok(())
    }

    /// Takes the leader down (`kill`: SIGKILL, else SIGTERM), waits for the other replica to lead, restarts the
    /// stopped one after a moment.
    async fn failover(&self, replicas: &Mutex<Replicas>, rng: &mut StdRng, kill: bool) -> anyhow::Result<()> {
        let mut replicas = replicas.lock().await;
        let Some(leader) = replicas.leader().await else {
            return Ok(());
        };
        if kill {
            replicas.kill(leader);
            self.stats().kills += 1;
        } else {
            replicas.stop(leader).await;
            self.stats().forced += 1;
        }
        match replicas.await_leader(30).await {
            Some((k, took)) if k != leader => {
                let mut stats = self.stats();
                stats.failovers += 1;
                stats.failover_times.push(took);
            }
            _ => self.stats().stuck.push(format!(
                "no other replica took the lease within 30 s (kill {kill})"
            )),
        }
        tokio::time::sleep(Duration::from_millis(rng.random_range(200..3_000))).await;
        replicas.spawn(leader)
    }

    /// Instance IDs a load balancer of the cluster must hold: those of the existing Nodes whose instance runs.
    pub async fn expected_members(&self) -> anyhow::Result<std::collections::BTreeSet<String>> {
        let listed = self.nodes.list(&self.node_selector()).await?.items;
        let fleet = self.fleet();
        Ok(listed
            .iter()
            .filter(|n| n.metadata.deletion_timestamp.is_none())
            .filter_map(|n| fleet.nodes.get(n.metadata.name.as_deref()?))
            .filter(|m| m.running)
            .map(|m| m.instance.clone())
            .collect())
    }
}
