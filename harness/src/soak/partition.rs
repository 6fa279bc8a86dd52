//! The leader cut off from the apiserver while its `CreateTags` fail (#35): its own fault proxy answers every
//! `CreateTags` with throttling or a 500, the Nodes' tag checksum label is removed (so that its tagging
//! controller tags every instance again, and is retrying failed calls when the cut comes), then its TCP proxy
//! to the apiserver holds everything it sends for longer than the renew deadline. It must stop its controllers
//! (`running_managed_controllers` 0 on its /metrics) and, from then on, call AWS no more, even once `CreateTags`
//! answers again (the fault is cleared as soon as the other replica leads), while the other replica takes the
//! lease and retags. The cut is healed a few seconds later; any AWS call the replica sent between reporting its
//! controllers stopped and two seconds after the heal is a problem.

use std::{collections::BTreeMap, time::Duration};

use ccm_aws::tagging::CHECKSUM_LABEL;
use ccm_testing::{Fault, FaultProxy};
use kube::api::{Patch, PatchParams};
use rand::{RngExt, rngs::StdRng};
use serde_json::json;
use tokio::{sync::Mutex, time::Instant};

use crate::soak::{
    Soak,
    replicas::{Replica, Replicas},
};

/// How long the cut-off leader may take to stop its controllers (renew deadline 4 s, then the controllers'
/// shutdown).
const STOP_WAIT: Duration = Duration::from_secs(20);

/// What one partition saw.
struct Cut {
    /// A `CreateTags` of the leader had failed before the cut.
    tagging: bool,
    /// When the replica reported its controllers stopped, and its AWS calls by action then.
    stopped: Option<(Instant, BTreeMap<String, u64>)>,
}

impl Soak {
    /// Cuts the leader off for longer than the renew deadline while its `CreateTags` fail, then heals the cut.
    pub async fn partition(&self, replicas: &Mutex<Replicas>, rng: &mut StdRng) -> anyhow::Result<()> {
        let replicas = replicas.lock().await;
        let Some(leader) = replicas.leader().await else {
            return Ok(());
        };
        let (r, aws) = (&replicas.members[leader], &self.world.proxies[leader]);
        let fault = if rng.random_bool(0.5) {
            Fault::Throttle
        } else {
            Fault::error(500, "InternalError")
        };
        // Longer than the renew deadline (4 s) past the stop: the stopped leader is watched that long.
        let hold = Duration::from_millis(rng.random_range(6_000..12_000));
        let tags_before = aws.requests("CreateTags");
        aws.inject("CreateTags", fault, 1_000_000);
        let tagging = self.retag(aws).await?;
        if r.controllers_stopped().await {
            // Not running its controllers yet (it has just taken the lease): nothing to watch stop.
            aws.clear("CreateTags");
            return Ok(());
        }
        let started = Instant::now();
        r.apiserver.set_partitioned(true);
        self.event(&format!(
            "replica {} cut off from the apiserver (CreateTags failing: {tagging})",
            r.name
        ));
        let cut = Cut {
            tagging,
            stopped: await_stop(r, aws).await,
        };
        let stop = cut.stopped.as_ref().map(|(at, _)| *at - started);
        self.event(&format!("replica {}: controllers stopped after {stop:?}", r.name));
        let failover = replicas
            .await_other_leader(leader, 30)
            .await
            .map(|_| started.elapsed());
        self.event(&format!("the other replica leads after {failover:?}"));
        aws.clear("CreateTags");
        let refused = aws.requests("CreateTags") - tags_before;
        match (&cut.stopped, failover) {
            (Some((at, calls)), Some(_)) => {
                tokio::time::sleep_until(*at + hold).await;
                r.apiserver.set_partitioned(false);
                self.event(&format!("replica {} reconnected", r.name));
                // Requests held by the cut reach the apiserver now; their answers must not revive a controller.
                tokio::time::sleep(Duration::from_secs(2)).await;
                self.check_silence(r, aws, calls);
            }
            _ => {
                r.apiserver.set_partitioned(false);
                self.event(&format!("replica {} reconnected", r.name));
            }
        }
        self.count_partition(r, &cut, failover, refused);
        Ok(())
    }

    /// Removes the tag checksum label from the soak's Nodes, so that the leader tags their instances again;
    /// whether a `CreateTags` reached (and failed at) the leader's proxy within 10 s.
    async fn retag(&self, aws: &FaultProxy) -> anyhow::Result<bool> {
        let before = aws.requests("CreateTags");
        let patch = json!({ "metadata": { "labels": { CHECKSUM_LABEL: null } } });
        for node in self.nodes.list(&self.node_selector()).await? {
            let labelled = node
                .metadata
                .labels
                .as_ref()
                .is_some_and(|l| l.contains_key(CHECKSUM_LABEL));
            let Some(name) = node.metadata.name.filter(|_| labelled) else {
                continue;
            };
            match self
                .nodes
                .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
            {
                // The CCM deleted the Node meanwhile.
                Err(kube::Error::Api(e)) if e.code == 404 => {}
                other => drop(other?),
            }
        }
        let started = Instant::now();
        while started.elapsed() < Duration::from_secs(10) {
            if aws.requests("CreateTags") > before {
                return Ok(true);
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Ok(false)
    }

    /// Records the AWS calls `r` sent (through `aws`) since it reported its controllers stopped (`calls` then) as
    /// a problem.
    fn check_silence(&self, r: &Replica, aws: &FaultProxy, calls: &BTreeMap<String, u64>) {
        let now = aws.requests_by_action();
        let sent: Vec<String> = now
            .iter()
            .filter_map(|(action, n)| {
                let more = n.saturating_sub(calls.get(action).copied().unwrap_or(0));
                (more > 0).then(|| format!("{action} {more}"))
            })
            .collect();
        if !sent.is_empty() {
            let partition = self.stats().partitions.count + 1;
            let what = format!(
                "replica {} (partition {partition}) sent {} after its controllers stopped",
                r.name,
                sent.join(", ")
            );
            self.event(&what);
            self.stats().partitions.after_stop.push(what);
        }
    }

    /// Counts the partition; `failover`: how long after the cut the other replica led.
    fn count_partition(&self, r: &Replica, cut: &Cut, failover: Option<Duration>, refused: u64) {
        let mut stats = self.stats();
        stats.partitions.count += 1;
        stats.partitions.while_tagging += u32::from(cut.tagging);
        stats.partitions.refused += refused;
        if cut.stopped.is_none() {
            stats.stuck.push(format!(
                "replica {} cut off from the apiserver: controllers still running {} s later",
                r.name,
                STOP_WAIT.as_secs()
            ));
        }
        if let Some(took) = failover {
            stats.failovers += 1;
            stats.failover_times.push(took);
        } else {
            stats
                .stuck
                .push("no other replica took the lease within 30 s of a partition".to_owned());
        }
    }
}

/// Waits until `r` reports its controllers stopped: then, and its AWS calls (through `aws`) by action at that
/// moment.
async fn await_stop(r: &Replica, aws: &FaultProxy) -> Option<(Instant, BTreeMap<String, u64>)> {
    let started = Instant::now();
    while started.elapsed() < STOP_WAIT {
        if r.controllers_stopped().await {
            return Some((Instant::now(), aws.requests_by_action()));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    None
}
