//! What a soak Service asks for, drawn at random, and the random changes made to it: flavour (Classic ELB or
//! NLB), ports, source ranges, `internal`, health-check and attribute annotations, the given security group and
//! the target node labels.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Service, ServicePort};
use rand::{RngExt, rngs::StdRng, seq::IndexedRandom};

const PREFIX: &str = "service.beta.kubernetes.io/aws-load-balancer-";
/// The label (key, value) the chaos gives a random share of the Nodes, and `target-node-labels` asks for.
pub const POOL: (&str, &str) = ("soak/pool", "a");
const RANGES: [&str; 4] = [
    "10.0.0.0/8",
    "192.168.0.0/16",
    "203.0.113.0/24",
    "198.51.100.7/32",
];

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Spec {
    pub nlb: bool,
    pub ports: Vec<i32>,
    pub internal: bool,
    pub ranges: Vec<String>,
    pub interval: Option<u32>,
    pub cross_zone: bool,
    pub idle_timeout: Option<u32>,
    /// The given group (`security-groups` annotation) instead of a managed one; shared by every Service that
    /// has it, so Classic ELBs share the source of their node rules.
    pub byo_group: bool,
    /// `target-node-labels` [`POOL`]: only the labelled Nodes are targets. Services with and without it share the
    /// given group, so one's node rules must survive the other's changes (#35).
    pub node_labels: bool,
}

/// One random change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    Flavour,
    AddPort,
    RemovePort,
    Ranges,
    Internal,
    HealthCheck,
    Attributes,
    SecurityGroups,
    NodeLabels,
}

impl Spec {
    pub fn random(rng: &mut StdRng) -> Self {
        let mut spec = Self {
            nlb: rng.random_bool(0.5),
            ports: vec![80],
            internal: rng.random_bool(0.2),
            ranges: Vec::new(),
            interval: None,
            cross_zone: false,
            idle_timeout: None,
            byo_group: false,
            node_labels: rng.random_bool(0.5),
        };
        for _ in 0..rng.random_range(0..2) {
            spec.apply(rng, Change::AddPort);
        }
        for change in [Change::Ranges, Change::HealthCheck, Change::Attributes] {
            if rng.random_bool(0.25) {
                spec.apply(rng, change);
            }
        }
        // Most Classic ELBs take the given group, so that two of them (with and without node labels) often share
        // it at the same time, in four slots.
        if rng.random_bool(if spec.nlb { 0.25 } else { 0.75 }) {
            spec.apply(rng, Change::SecurityGroups);
        }
        spec
    }

    /// Applies a random change; returns which.
    pub fn mutate(&mut self, rng: &mut StdRng) -> Change {
        let all = [
            Change::Flavour,
            Change::AddPort,
            Change::RemovePort,
            Change::Ranges,
            Change::Internal,
            Change::HealthCheck,
            Change::Attributes,
            Change::SecurityGroups,
            Change::NodeLabels,
        ];
        let change = *all.choose(rng).unwrap_or(&Change::AddPort);
        self.apply(rng, change);
        change
    }

    fn apply(&mut self, rng: &mut StdRng, change: Change) {
        match change {
            Change::Flavour => self.nlb = !self.nlb,
            Change::AddPort => {
                let free: Vec<i32> = [80, 443, 8080, 9000, 5432]
                    .into_iter()
                    .filter(|p| !self.ports.contains(p))
                    .collect();
                if let Some(p) = free.choose(rng) {
                    self.ports.push(*p);
                    self.ports.sort_unstable();
                }
            }
            Change::RemovePort if self.ports.len() > 1 => {
                let k = rng.random_range(0..self.ports.len());
                self.ports.remove(k);
            }
            Change::RemovePort => {}
            Change::Ranges => {
                let n = rng.random_range(0..3);
                self.ranges = RANGES.sample(rng, n).map(|r| (*r).to_owned()).collect();
                self.ranges.sort();
            }
            Change::Internal => self.internal = !self.internal,
            Change::HealthCheck => {
                self.interval = [None, Some(10), Some(20), Some(30)]
                    .choose(rng)
                    .copied()
                    .flatten()
            }
            Change::Attributes => {
                self.cross_zone = rng.random_bool(0.5);
                self.idle_timeout = [None, Some(120), Some(300)].choose(rng).copied().flatten();
            }
            Change::SecurityGroups => self.byo_group = !self.byo_group,
            Change::NodeLabels => self.node_labels = !self.node_labels,
        }
    }

    /// The annotations this spec sets; every key the soak manages is present (`None`: removed).
    pub fn annotations(&self, byo_group: &str) -> BTreeMap<String, Option<String>> {
        let mut out = BTreeMap::new();
        let mut set = |suffix: &str, value: Option<String>| {
            out.insert(format!("{PREFIX}{suffix}"), value);
        };
        set("type", self.nlb.then(|| "nlb".to_owned()));
        set("internal", self.internal.then(|| "true".to_owned()));
        // The soak changes the scheme and expects the load balancer to follow: its Services consent to the
        // recreation that takes (without, the load balancer is kept, with a Warning).
        set("allow-recreation", Some("true".to_owned()));
        set("healthcheck-interval", self.interval.map(|i| i.to_string()));
        set(
            "cross-zone-load-balancing-enabled",
            Some(self.cross_zone.to_string()),
        );
        // Classic only; an NLB ignores it.
        set(
            "connection-idle-timeout",
            self.idle_timeout.map(|t| t.to_string()),
        );
        set("security-groups", self.byo_group.then(|| byo_group.to_owned()));
        let (key, value) = POOL;
        set(
            "target-node-labels",
            self.node_labels.then(|| format!("{key}={value}")),
        );
        out
    }

    /// Writes this spec into `svc` (a Service read from the apiserver: node ports of kept ports stay).
    pub fn write(&self, svc: &mut Service, byo_group: &str) {
        let annotations = svc.metadata.annotations.get_or_insert_with(BTreeMap::new);
        for (key, value) in self.annotations(byo_group) {
            match value {
                Some(v) => annotations.insert(key, v),
                None => annotations.remove(&key),
            };
        }
        let Some(spec) = svc.spec.as_mut() else {
            return;
        };
        let old = spec.ports.take().unwrap_or_default();
        let ports = self.ports.iter().map(|p| {
            let kept = old.iter().find(|o| o.port == *p).cloned();
            kept.unwrap_or_else(|| ServicePort {
                name: Some(format!("p{p}")),
                port: *p,
                protocol: Some("TCP".to_owned()),
                target_port: Some(k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(
                    8080,
                )),
                ..ServicePort::default()
            })
        });
        spec.ports = Some(ports.collect());
        spec.load_balancer_source_ranges = (!self.ranges.is_empty()).then(|| self.ranges.clone());
    }
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;

    use super::*;

    const LABELS: &str = "service.beta.kubernetes.io/aws-load-balancer-target-node-labels";

    #[test]
    fn node_labels_ask_for_the_pool_and_are_removed_when_off() {
        let mut spec = Spec::random(&mut StdRng::seed_from_u64(1));
        spec.node_labels = true;
        let on = spec.annotations("sg-1");
        assert_eq!(on.get(LABELS), Some(&Some("soak/pool=a".to_owned())));
        spec.apply(&mut StdRng::seed_from_u64(1), Change::NodeLabels);
        assert_eq!(spec.annotations("sg-1").get(LABELS), Some(&None));
    }
}
