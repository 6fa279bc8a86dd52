//! The runtime's own metrics on `/metrics`: which controllers run, which leases this process holds, and every
//! controller's counters.

use std::sync::{Arc, Mutex};

use ccm_controllers::ControllerMetrics;
use prometheus_client::{
    collector::Collector,
    encoding::{DescriptorEncoder, EncodeMetric},
    metrics::{MetricType, family::Family, gauge::Gauge},
    registry::Registry,
};

/// The runtime's own metrics, registered into the shared registry.
#[derive(Clone, Default)]
pub(crate) struct RuntimeMetrics {
    /// `running_managed_controllers{name, manager}`: 1 while a controller runs.
    pub(crate) running: Family<Vec<(String, String)>, Gauge>,
    /// `leader_election_master_status{name}`: 1 while this process holds the named lease.
    pub(crate) leader: Family<Vec<(String, String)>, Gauge>,
    /// Counters of the controllers, read at scrape time.
    pub(crate) controllers: ControllerCounters,
}

impl RuntimeMetrics {
    pub(crate) fn register(&self, registry: &mut Registry) {
        registry.register(
            "running_managed_controllers",
            "Whether a controller is running (1) or stopped (0), by controller",
            self.running.clone(),
        );
        registry.register(
            "leader_election_master_status",
            "Whether this process holds the named leader lease (1) or not (0)",
            self.leader.clone(),
        );
        registry.register_collector(Box::new(self.controllers.clone()));
        crate::upstream_metrics::register(registry);
    }

    pub(crate) fn set_running(&self, label: &str, running: bool) {
        self.running
            .get_or_create(&vec![
                ("name".to_owned(), label.to_owned()),
                ("manager".to_owned(), "cloud-controller-manager".to_owned()),
            ])
            .set(i64::from(running));
    }

    pub(crate) fn set_leader(&self, lease: &str, leading: bool) {
        // Upstream labels the metric with the Lease's name only (`cloud-controller-manager`), not its namespace.
        let name = lease.rsplit('/').next().unwrap_or(lease);
        self.leader
            .get_or_create(&vec![("name".to_owned(), name.to_owned())])
            .set(i64::from(leading));
    }
}

/// The [`ControllerMetrics`] of every controller, exported as `ccm_controller_*_total{controller}` counters.
#[derive(Clone, Default, Debug)]
pub(crate) struct ControllerCounters(Arc<Mutex<Vec<(String, ControllerMetrics)>>>);

impl ControllerCounters {
    pub(crate) fn add(&self, name: &str, metrics: ControllerMetrics) {
        let mut all = self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        all.retain(|(n, _)| n != name);
        all.push((name.to_owned(), metrics));
    }
}

impl Collector for ControllerCounters {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
        let all = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        let snapshots: Vec<_> = all.iter().map(|(n, m)| (n.clone(), m.snapshot())).collect();
        type Field = fn(&ccm_controllers::MetricsSnapshot) -> u64;
        let families: [(&str, &str, Field); 4] = [
            (
                "ccm_controller_reconciles",
                "Reconciles (objects synced, or passes of periodic controllers), by controller",
                |s| s.reconciles,
            ),
            (
                "ccm_controller_errors",
                "Reconciles or steps that failed, by controller",
                |s| s.errors,
            ),
            (
                "ccm_controller_provider_calls",
                "Calls into the cloud provider (a batch counts once), by controller",
                |s| s.provider_calls,
            ),
            (
                "ccm_controller_api_writes",
                "Writes to the Kubernetes API (updates, patches, deletes, Events), by controller",
                |s| s.api_writes,
            ),
        ];
        for (name, help, field) in families {
            let mut family = encoder.encode_descriptor(name, help, None, MetricType::Counter)?;
            for (controller, snapshot) in &snapshots {
                let labels = [("controller", controller.as_str())];
                let metric = family.encode_family(&labels)?;
                prometheus_client::metrics::counter::ConstCounter::new(field(snapshot)).encode(metric)?;
            }
        }
        let mut family = encoder.encode_descriptor(
            "ccm_controller_queue_depth",
            "Keys waiting in the controller's work queue (0 for periodic controllers), by controller",
            None,
            MetricType::Gauge,
        )?;
        for (controller, snapshot) in &snapshots {
            let labels = [("controller", controller.as_str())];
            let metric = family.encode_family(&labels)?;
            let depth = i64::try_from(snapshot.queue_depth).unwrap_or(i64::MAX);
            prometheus_client::metrics::gauge::ConstGauge::new(depth).encode(metric)?;
        }
        // Only the cloud-node controller counts them; one series, whoever runs it.
        let outside: u64 = snapshots.iter().map(|(_, s)| s.nodes_not_in_cluster).sum();
        let family = encoder.encode_descriptor(
            "ccm_nodes_not_in_cluster",
            "Nodes whose instance the cloud provider does not count as the cluster's (AWS: without the cluster \
             tag); nothing is changed on their behalf",
            None,
            MetricType::Gauge,
        )?;
        prometheus_client::metrics::gauge::ConstGauge::new(i64::try_from(outside).unwrap_or(i64::MAX))
            .encode(family)?;
        crate::upstream_metrics::encode_workqueues(&mut encoder, &all)
    }
}
