//! What the soak's tasks share: the world, the Kubernetes APIs, the fleet of Nodes and the figures.

use std::{
    collections::BTreeMap,
    sync::{Mutex, MutexGuard},
    time::Duration,
};

use k8s_openapi::api::core::v1::{Node, Service};
use kube::{Api, api::ListParams};

use crate::soak::{chaos::Fleet, spec::Spec, world::World};

pub struct Soak {
    pub seed: u64,
    pub world: World,
    pub services: Api<Service>,
    pub nodes: Api<Node>,
    /// The first Service's name: the foreign resources carry it in their `kubernetes.io/service-name` tag.
    pub first_service: String,
    /// The untagged foreign group some NLBs are given (`security-groups`).
    pub byo_group: String,
    /// How long a Service may take to converge or to be deleted.
    pub timeout: Duration,
    pub fleet: Mutex<Fleet>,
    /// The spec last written into each Service that exists, for counting given groups shared by Services with
    /// and without node labels.
    pub live: Mutex<BTreeMap<String, Spec>>,
    pub stats: Mutex<Stats>,
}

#[derive(Default)]
pub struct Stats {
    pub lifecycles: u32,
    pub deleted_while_creating: u32,
    pub changes: BTreeMap<String, u32>,
    pub convergence: Vec<Duration>,
    pub deletions: Vec<Duration>,
    pub unconverged: Vec<String>,
    /// Deletions that did not finish, leaderless moments and other stalls.
    pub stuck: Vec<String>,
    pub node_events: NodeEvents,
    pub kills: u32,
    pub forced: u32,
    pub partitions: Partitions,
    pub failovers: u32,
    pub failover_times: Vec<Duration>,
    /// Replicas that exited without being stopped.
    pub crashes: u32,
    /// Classic ELBs with the given group that converged while a Classic ELB with the other node-label choice
    /// shared the group.
    pub mixed_sharing: u32,
    /// Nodes found with another instance's providerID (or none) after a replacement at a dead one's address.
    pub provider_ids: Vec<String>,
}

/// Leaders cut off from the apiserver while their `CreateTags` failed.
#[derive(Default)]
pub struct Partitions {
    pub count: u32,
    /// Partitions whose leader had sent a failing `CreateTags` before the cut (its tagging controller retrying).
    pub while_tagging: u32,
    /// `CreateTags` answered with the injected fault.
    pub refused: u64,
    /// AWS calls a cut-off leader sent after it reported its controllers stopped (each a problem).
    pub after_stop: Vec<String>,
}

#[derive(Default)]
pub struct NodeEvents {
    pub launched: u32,
    /// Launches that took a dead instance's address (moto hands a freed address out again first).
    pub launched_reused: u32,
    pub terminated: u32,
    pub scaled_in: u32,
    pub ready_flips: u32,
    /// Instances launched at the address of one just terminated, their Node registered by private DNS name.
    pub replaced: u32,
    /// Replacements registered while the dead instance's Node (named by instance ID) still existed.
    pub replaced_beside_dead: u32,
    /// Replacements registered once the CCM had deleted the dead instance's Node of the same name.
    pub replaced_same_name: u32,
}

impl Soak {
    pub fn stats(&self) -> MutexGuard<'_, Stats> {
        self.stats
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub fn fleet(&self) -> MutexGuard<'_, Fleet> {
        self.fleet
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub fn live_specs(&self) -> MutexGuard<'_, BTreeMap<String, Spec>> {
        self.live
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Appends `what` to `chaos.log` in the run's directory, stamped with the wall-clock time (UTC) as the
    /// replicas' logs are, so that a problem can be lined up with the events that preceded it.
    pub fn event(&self, what: &str) {
        use std::io::Write as _;
        #[allow(clippy::disallowed_methods)] // a stamp to compare with other processes' logs, not a deadline
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        let (secs, millis) = (now.as_secs() % 86_400, now.subsec_millis());
        let stamp = format!(
            "{:02}:{:02}:{:02}.{millis:03}",
            secs / 3600,
            secs / 60 % 60,
            secs % 60
        );
        let path = self.world.dir.join("chaos.log");
        if let Ok(mut file) = std::fs::OpenOptions::new().create(true).append(true).open(path) {
            let _ = writeln!(file, "{stamp} {what}");
        }
    }

    pub fn node_selector(&self) -> ListParams {
        ListParams::default().labels(&format!("soak={}", self.world.id))
    }
}

/// The `q` quantile (0..=100) of `samples`, in seconds.
pub fn percentile(samples: &[Duration], q: usize) -> f64 {
    let mut sorted = samples.to_vec();
    sorted.sort_unstable();
    if sorted.is_empty() {
        return 0.0;
    }
    let k = (sorted.len() * q).div_ceil(100).clamp(1, sorted.len()) - 1;
    sorted[k].as_secs_f64()
}
