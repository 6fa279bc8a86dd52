//! What a soak Service asks for, drawn at random, and the random changes made to it: flavour (Classic ELB or
//! NLB), ports, source ranges, `internal`, health-check and attribute annotations, the NLB's security groups.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Service, ServicePort};
use rand::{Rng, rngs::StdRng, seq::IndexedRandom};

const PREFIX: &str = "service.beta.kubernetes.io/aws-load-balancer-";
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
        };
        for _ in 0..rng.random_range(0..2) {
            spec.apply(rng, Change::AddPort);
        }
        for change in [
            Change::Ranges,
            Change::HealthCheck,
            Change::Attributes,
            Change::SecurityGroups,
        ] {
            if rng.random_bool(0.25) {
                spec.apply(rng, change);
            }
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
                self.ranges = RANGES.choose_multiple(rng, n).map(|r| (*r).to_owned()).collect();
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
