//! What the soak's tasks share: the world, the Kubernetes APIs, the fleet of Nodes and the figures.

use std::{
    collections::BTreeMap,
    sync::{Mutex, MutexGuard},
    time::Duration,
};

use k8s_openapi::api::core::v1::{Node, Service};
use kube::{Api, api::ListParams};

use crate::{chaos::Fleet, world::World};

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
    pub failovers: u32,
    pub failover_times: Vec<Duration>,
    /// Replicas that exited without being stopped.
    pub crashes: u32,
}

#[derive(Default)]
pub struct NodeEvents {
    pub launched: u32,
    pub terminated: u32,
    pub scaled_in: u32,
    pub ready_flips: u32,
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
