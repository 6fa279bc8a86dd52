//! The chaos task: every few seconds one random event among launching an instance and registering its Node
//! (half of them labelled [`POOL`], which some Services target), terminating an instance (its kubelet stops: the
//! Node goes NotReady, the CCM must delete it), a scale-in (Node deleted, then the instance), a replacement at
//! the dead instance's address (`replace.rs`), a Node marked NotReady or Ready again (its instance runs: the CCM
//! must keep it), the leader SIGKILLed, a forced leader change (the leader stopped gracefully, releasing the
//! lease), and the leader cut off from the apiserver while its `CreateTags` fail (`partition.rs`). Killed
//! replicas come back a moment later, as a Deployment's would.

use std::{collections::BTreeMap, sync::Arc, time::Duration};

use ccm_testing::{ec2::Launched, nodes::UNINITIALIZED};
use k8s_openapi::api::core::v1::Node;
use kube::api::{Patch, PostParams};
use rand::{RngExt, SeedableRng, rngs::StdRng, seq::IteratorRandom};
use serde_json::json;
use tokio::{
    sync::{Mutex, watch},
    task::JoinSet,
};

use crate::soak::{
    Soak,
    replace::{NAME_WAIT, Replacement, provider_id},
    replicas::Replicas,
    spec::POOL,
};

/// The harness's Nodes: name to instance, and whether the instance runs.
#[derive(Default)]
pub struct Fleet {
    pub nodes: BTreeMap<String, Member>,
}

pub struct Member {
    pub instance: String,
    /// Its availability zone (the providerID's).
    pub zone: String,
    /// Its private address, which a replacement may take over once it is terminated.
    pub ip: String,
    pub running: bool,
    /// The harness deleted the Node itself (a scale-in).
    pub deleted: bool,
    pub ready: bool,
    /// The Node carries the [`POOL`] label.
    pub pool: bool,
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
    // The providerID checks of replacements, which outlast their event.
    let mut checks = JoinSet::new();
    loop {
        let pause = Duration::from_millis(rng.random_range(2_000..8_000));
        if tokio::time::timeout(pause, stop.changed()).await.is_ok() || *stop.borrow() {
            while checks.join_next().await.is_some() {}
            return Ok(());
        }
        let live = soak
            .fleet()
            .nodes
            .values()
            .filter(|m| m.running && !m.deleted)
            .count();
        match rng.random_range(0..100) {
            0..14 if live < MAX_NODES => {
                let (by_id, pool) = (rng.random_bool(0.5), rng.random_bool(0.5));
                if let Some(new) = soak.add_node(by_id, pool).await? {
                    checks.spawn(soak.clone().watch_provider_id(new));
                }
            }
            14..24 if live > MIN_NODES => soak.terminate_node(&mut rng, false).await?,
            24..32 if live > MIN_NODES => soak.terminate_node(&mut rng, true).await?,
            32..48 => {
                if let Some(new) = soak.replace_node(&mut rng).await? {
                    checks.spawn(soak.clone().watch_provider_id(new));
                }
            }
            48..58 => soak.toggle_ready(&mut rng).await?,
            58..72 => soak.failover(&replicas, &mut rng, true).await?,
            72..84 => soak.failover(&replicas, &mut rng, false).await?,
            84..100 => soak.partition(&replicas, &mut rng).await?,
            _ => {}
        }
        let exited = replicas.lock().await.restart_exited()?;
        soak.stats().crashes += exited;
    }
}

impl Soak {
    /// Launches an instance and registers its Node as a kubelet does (tainted uninitialized, Ready), named by
    /// instance ID or by private DNS name, labelled [`POOL`] when `pool`. Moto hands out a terminated instance's
    /// freed address first: the new Node to check when the instance took one (a reuse like a replacement's).
    pub async fn add_node(&self, by_id: bool, pool: bool) -> anyhow::Result<Option<Replacement>> {
        let launched = self.world.launch_node(None).await?;
        let name = if by_id {
            launched.id.clone()
        } else {
            launched.private_dns.clone()
        };
        let dead = self.dead_at(&launched.private_ip);
        let want = provider_id(&launched);
        self.event(&format!(
            "launched {} at {} (before: {dead:?}), its Node {name} (pool {pool})",
            launched.id, launched.private_ip
        ));
        let Some(uid) = self.register(&name, launched, pool).await? else {
            return Ok(None);
        };
        let mut stats = self.stats();
        stats.node_events.launched += 1;
        stats.node_events.launched_reused += u32::from(dead.is_some());
        Ok(dead.map(|dead| Replacement {
            name,
            uid,
            want,
            dead,
        }))
    }

    /// A terminated instance of the fleet that had the address `ip`.
    pub fn dead_at(&self, ip: &str) -> Option<String> {
        let fleet = self.fleet();
        let dead = fleet.nodes.values().find(|m| !m.running && m.ip == ip);
        dead.map(|m| m.instance.clone())
    }

    /// Registers the Node `name` of `launched` (tainted uninitialized, Ready) and records it in the fleet; the
    /// Node's UID. A dead instance's Node of that name (registered by DNS name) must first be deleted by the
    /// CCM, as a kubelet cannot register beside it; when it is not within [`NAME_WAIT`], the instance is
    /// terminated again, a stall recorded, and `None` returned.
    pub async fn register(
        &self,
        name: &str,
        launched: Launched,
        pool: bool,
    ) -> anyhow::Result<Option<String>> {
        if !self.await_name_free(name).await? {
            self.world.terminate(&launched.id).await?;
            self.stats().stuck.push(format!(
                "{} at {}: a Node {name} still there {} s after its launch",
                launched.id,
                launched.private_ip,
                NAME_WAIT.as_secs()
            ));
            return Ok(None);
        }
        let mut labels = json!({ "soak": self.world.id });
        if pool {
            labels[POOL.0] = json!(POOL.1);
        }
        let node: Node = serde_json::from_value(json!({
            "metadata": { "name": name, "labels": labels },
            "spec": { "taints": [{ "key": UNINITIALIZED, "value": "true", "effect": "NoSchedule" }] },
        }))?;
        let created = self.nodes.create(&PostParams::default(), &node).await?;
        self.set_ready(name, true).await?;
        let member = Member {
            instance: launched.id,
            zone: launched.zone,
            ip: launched.private_ip,
            running: true,
            deleted: false,
            ready: true,
            pool,
        };
        self.fleet().nodes.insert(name.to_owned(), member);
        Ok(Some(created.metadata.uid.unwrap_or_default()))
    }

    /// Terminates a running instance; `scale_in` deletes its Node first, else the Node goes NotReady.
    async fn terminate_node(&self, rng: &mut StdRng, scale_in: bool) -> anyhow::Result<()> {
        if self.retire(rng, scale_in).await?.is_none() {
            return Ok(());
        }
        let mut stats = self.stats();
        if scale_in {
            stats.node_events.scaled_in += 1;
        } else {
            stats.node_events.terminated += 1;
        }
        Ok(())
    }

    /// Terminates a random running instance, its Node deleted first when `scale_in`, else marked NotReady (its
    /// kubelet stopped); the Node's name, the instance and its private address, or `None` without one.
    pub async fn retire(
        &self,
        rng: &mut StdRng,
        scale_in: bool,
    ) -> anyhow::Result<Option<(String, String, String)>> {
        let picked = {
            let fleet = self.fleet();
            let live = fleet.nodes.iter().filter(|(_, m)| m.running && !m.deleted);
            live.map(|(n, m)| (n.clone(), m.instance.clone(), m.ip.clone()))
                .choose(rng)
        };
        let Some((name, instance, ip)) = picked else {
            return Ok(None);
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
        }
        let node = if scale_in { "deleted" } else { "NotReady" };
        self.event(&format!("terminated {instance} ({ip}), its Node {name} {node}"));
        Ok(Some((name, instance, ip)))
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
        self.event(&format!("Node {name} Ready {}", !ready));
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
        self.event(&format!(
            "leader {} stopped (SIGKILL {kill})",
            replicas.members[leader].name
        ));
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

    /// Instance IDs a load balancer of the cluster must hold: those of the existing Nodes whose instance runs
    /// (with `pool`, of those labelled [`POOL`] only).
    pub async fn expected_members(&self, pool: bool) -> anyhow::Result<std::collections::BTreeSet<String>> {
        let listed = self.nodes.list(&self.node_selector()).await?.items;
        let fleet = self.fleet();
        Ok(listed
            .iter()
            .filter(|n| n.metadata.deletion_timestamp.is_none())
            .filter_map(|n| fleet.nodes.get(n.metadata.name.as_deref()?))
            .filter(|m| m.running && (m.pool || !pool))
            .map(|m| m.instance.clone())
            .collect())
    }
}
