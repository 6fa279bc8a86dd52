//! A node replaced at its predecessor's address (#35): an instance is terminated (its Node deleted first, as in
//! a scale-in, or left NotReady) and another launched at once at the same private address in the same subnet, so
//! under the same private DNS name; its Node is registered by that name straight away, while the dead
//! instance's Node (named by instance ID) may still exist. A lookup by name then finds both instances (moto, like
//! AWS for a while, reports the terminated one with its address and name): the CCM must give the new Node the new
//! instance's providerID, never the dead one's. Checked once per replacement (`watch_provider_id`) and for every
//! Node at the end (`provider_ids`).
//!
//! Moto frees a terminated instance's address only when its interface is deleted with it, which is why the
//! soak launches every node with an explicit primary interface deleted on termination, as AWS makes it
//! (`ccm_testing::ec2::launch_node`); launched without one, moto refuses the address for ever ("IP already in
//! use", an HTTP 500).

use std::{collections::BTreeMap, sync::Arc, time::Duration};

use ccm_testing::ec2::Launched;
use rand::{RngExt, rngs::StdRng};
use tokio::time::Instant;

use crate::soak::Soak;

/// How long a new Node waits for the CCM to delete a dead Node of its name before giving up (a stall).
pub const NAME_WAIT: Duration = Duration::from_secs(60);

/// A Node registered for a replacement, to check its providerID.
pub struct Replacement {
    pub name: String,
    pub uid: String,
    /// `aws:///<zone>/<new instance>`.
    pub want: String,
    /// The terminated instance whose address the new one took.
    pub dead: String,
}

impl Soak {
    /// Replaces a random running node at its address; the new Node, or `None` when nothing was replaced.
    pub async fn replace_node(&self, rng: &mut StdRng) -> anyhow::Result<Option<Replacement>> {
        let (scale_in, pool) = (rng.random_bool(0.3), rng.random_bool(0.5));
        let Some((dead_name, dead, ip)) = self.retire(rng, scale_in).await? else {
            return Ok(None);
        };
        let launched = self.world.launch_node(Some(&ip)).await?;
        let name = launched.private_dns.clone();
        let beside = dead_name != name && self.nodes.get_opt(&dead_name).await?.is_some();
        // The dead Node, NotReady, holds the new one's name until the CCM deletes it.
        let same_name = dead_name == name && !scale_in;
        let want = provider_id(&launched);
        self.event(&format!(
            "launched {} at {ip}, the address of {dead}; its Node {name} (beside the dead Node {dead_name}: \
             {beside}; after the dead Node of its name is deleted: {same_name})",
            launched.id
        ));
        // The dead Node may have this name (registered by DNS name): `register` waits for the CCM to delete it.
        let Some(uid) = self.register(&name, launched, pool).await? else {
            return Ok(None);
        };
        let mut stats = self.stats();
        stats.node_events.replaced += 1;
        stats.node_events.replaced_beside_dead += u32::from(beside);
        stats.node_events.replaced_same_name += u32::from(same_name);
        Ok(Some(Replacement {
            name,
            uid,
            want,
            dead,
        }))
    }

    /// Waits until no Node is named `name`; `false` after [`NAME_WAIT`].
    pub async fn await_name_free(&self, name: &str) -> anyhow::Result<bool> {
        let started = Instant::now();
        while self.nodes.get_opt(name).await?.is_some() {
            if started.elapsed() > NAME_WAIT {
                return Ok(false);
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        Ok(true)
    }

    /// Waits until the CCM gave the replacement's Node a providerID and records a problem when it is not the new
    /// instance's (or none came within the timeout). Ends early when the Node is deleted or replaced meanwhile.
    pub async fn watch_provider_id(self: Arc<Self>, r: Replacement) {
        let started = Instant::now();
        while started.elapsed() < self.timeout {
            match self.nodes.get_opt(&r.name).await {
                Ok(Some(node)) if node.metadata.uid.as_deref() == Some(r.uid.as_str()) => {
                    if let Some(id) = node.spec.and_then(|s| s.provider_id) {
                        if id != r.want {
                            self.stats().provider_ids.push(format!(
                                "{}: providerID {id}, want {} (the dead instance at its address: {})",
                                r.name, r.want, r.dead
                            ));
                        }
                        return;
                    }
                }
                Ok(_) => return,
                // A read failing is a "not yet".
                Err(_) => {}
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        self.stats().provider_ids.push(format!(
            "{}: no providerID {} s after its registration (want {})",
            r.name,
            self.timeout.as_secs(),
            r.want
        ));
    }
}

/// The Nodes of running instances (that the harness did not delete) whose providerID is not their instance's;
/// Nodes without one yet are waited for up to the timeout.
pub async fn provider_ids(soak: &Soak) -> anyhow::Result<Vec<String>> {
    let started = Instant::now();
    loop {
        let listed = soak.nodes.list(&soak.node_selector()).await?.items;
        let ids: BTreeMap<&str, Option<&str>> = listed
            .iter()
            .filter_map(|n| {
                let id = n.spec.as_ref().and_then(|s| s.provider_id.as_deref());
                Some((n.metadata.name.as_deref()?, id))
            })
            .collect();
        let (mut wrong, mut pending) = (Vec::new(), Vec::new());
        for (name, m) in soak.fleet().nodes.iter().filter(|(_, m)| m.running && !m.deleted) {
            let want = format!("aws:///{}/{}", m.zone, m.instance);
            match ids.get(name.as_str()) {
                // A lost Node is the final checks' other finding.
                None => {}
                Some(None) => pending.push(format!("{name}: no providerID, want {want}")),
                Some(Some(id)) if *id != want => wrong.push(format!("{name}: providerID {id}, want {want}")),
                Some(Some(_)) => {}
            }
        }
        if pending.is_empty() || started.elapsed() > soak.timeout {
            wrong.extend(pending);
            return Ok(wrong);
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// The providerID the CCM must give the Node of `launched`: `aws:///<zone>/<instance>`.
pub fn provider_id(launched: &Launched) -> String {
    format!("aws:///{}/{}", launched.zone, launched.id)
}
