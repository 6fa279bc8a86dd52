//! The values the NLB attribute, listener attribute and ALPN annotations accept: AWS's keys, ranges and
//! policies, as the annotation table and the parsers check them, and the attribute keys each annotation accepts
//! ([`AttributeKeys`]).

use super::{Annotations, Key, Problem};

/// The name of the listener attribute annotations up to `<PROTOCOL>-<port>`.
pub const LISTENER_ATTRIBUTES_PREFIX: &str =
    "service.beta.kubernetes.io/aws-load-balancer-listener-attributes.";

/// The listener protocols a listener attribute annotation names.
pub const LISTENER_PROTOCOLS: &[&str] = &["TCP", "UDP", "TCP_UDP", "TLS"];

/// The NLB listener attribute of the TCP idle timeout, and AWS's default and range for it.
pub const TCP_IDLE_TIMEOUT: (&str, &str, std::ops::RangeInclusive<i64>) =
    ("tcp.idle_timeout.seconds", "350", 60..=6000);

/// The NLB attributes whose values are checked here (AWS checks the others): key and accepted values.
pub const NLB_ATTRIBUTES: &[(&str, &[&str])] = &[
    ("deletion_protection.enabled", &["true", "false"]),
    ("load_balancing.cross_zone.enabled", &["true", "false"]),
    (
        "dns_record.client_routing_policy",
        &[
            "availability_zone_affinity",
            "partial_availability_zone_affinity",
            "any_availability_zone",
        ],
    ),
    ("ipv6.deny_all_igw_traffic", &["true", "false"]),
    ("zonal_shift.config.enabled", &["true", "false"]),
    ("access_logs.s3.enabled", &["true", "false"]),
];

/// The NLB attribute that keeps AWS from deleting the load balancer.
pub const DELETION_PROTECTION: &str = "deletion_protection.enabled";

/// The accepted values of `aws-load-balancer-alpn-policy` (ELBv2's).
pub const ALPN_POLICIES: &[&str] = &[
    "HTTP1Only",
    "HTTP2Only",
    "HTTP2Optional",
    "HTTP2Preferred",
    "None",
];

/// The keys AWS documents for Network Load Balancers in `LoadBalancerAttribute` (ELBv2 API reference): those of
/// all load balancers, of ALBs and NLBs, and of NLBs only. ALB-only keys (`idle_timeout.timeout_seconds`,
/// `routing.http.*`, ...) are refused by AWS on an NLB, so they are refused here too.
pub const NLB_ATTRIBUTE_KEYS: &[&str] = &[
    "deletion_protection.enabled",
    "load_balancing.cross_zone.enabled",
    "access_logs.s3.enabled",
    "access_logs.s3.bucket",
    "access_logs.s3.prefix",
    "ipv6.deny_all_igw_traffic",
    "zonal_shift.config.enabled",
    "dns_record.client_routing_policy",
    "secondary_ips.auto_assigned.per_subnet",
];

/// The keys AWS documents for NLB listeners in `ListenerAttribute` (the others are ALB or Gateway Load Balancer
/// keys).
pub const NLB_LISTENER_ATTRIBUTE_KEYS: &[&str] = &[TCP_IDLE_TIMEOUT.0];

/// The keys AWS documents for NLB target groups in `TargetGroupAttribute` (those of all load balancers, of ALBs
/// and NLBs, and of NLBs only). The Go controller applied any of them and skipped the others, which
/// `go_compat` still does (with a warning).
pub const NLB_TARGET_GROUP_ATTRIBUTE_KEYS: &[&str] = &[
    "deregistration_delay.timeout_seconds",
    "deregistration_delay.connection_termination.enabled",
    "preserve_client_ip.enabled",
    "proxy_protocol_v2.enabled",
    "stickiness.enabled",
    "stickiness.type",
    "load_balancing.cross_zone.enabled",
    "target_health_state.unhealthy.connection_termination.enabled",
    "target_health_state.unhealthy.draining_interval_seconds",
    "target_group_health.dns_failover.minimum_healthy_targets.count",
    "target_group_health.dns_failover.minimum_healthy_targets.percentage",
    "target_group_health.unhealthy_state_routing.minimum_healthy_targets.count",
    "target_group_health.unhealthy_state_routing.minimum_healthy_targets.percentage",
];

/// What an attribute annotation sets the attributes of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttributeKind {
    /// The NLB (`aws-load-balancer-attributes`).
    LoadBalancer,
    /// One NLB listener (`aws-load-balancer-listener-attributes.<PROTOCOL>-<port>`).
    Listener,
    /// Every target group of the NLB (`aws-load-balancer-target-group-attributes`).
    TargetGroup,
}

/// The attribute keys the attribute annotations accept: the keys AWS documents for NLBs, their listeners and
/// their target groups, plus the operator's `[Global] ExtraLoadBalancerAttributeKeys` (keys AWS added after this
/// list, accepted in all three annotations; AWS still checks them). AWS refuses an unknown key only in the call
/// that sets it, after the security group, target groups, targets and the NLB itself were made: checking keys
/// with the other annotation values means a Service with one gets its error before anything is written.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AttributeKeys {
    extra: std::collections::BTreeSet<String>,
}

// === impl AttributeKind ===

impl AttributeKind {
    /// The keys AWS documents for this kind on an NLB.
    pub fn documented(self) -> &'static [&'static str] {
        match self {
            Self::LoadBalancer => NLB_ATTRIBUTE_KEYS,
            Self::Listener => NLB_LISTENER_ATTRIBUTE_KEYS,
            Self::TargetGroup => NLB_TARGET_GROUP_ATTRIBUTE_KEYS,
        }
    }

    /// In words, for errors.
    fn noun(self) -> &'static str {
        match self {
            Self::LoadBalancer => "NLB attribute",
            Self::Listener => "NLB listener attribute",
            Self::TargetGroup => "NLB target group attribute",
        }
    }
}

// === impl AttributeKeys ===

impl AttributeKeys {
    /// The documented keys plus `extra` (trimmed; empty items dropped).
    pub fn with_extra<I, S>(extra: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let extra = extra
            .into_iter()
            .map(|k| k.as_ref().trim().to_owned())
            .filter(|k| !k.is_empty())
            .collect();
        Self { extra }
    }

    /// The operator's extra keys, sorted.
    pub fn extra(&self) -> impl Iterator<Item = &str> {
        self.extra.iter().map(String::as_str)
    }

    /// Whether `key` may be set on `kind`.
    pub fn accepts(&self, kind: AttributeKind, key: &str) -> bool {
        kind.documented().contains(&key) || self.extra.contains(key)
    }

    /// What `kind` accepts, in words: every key, and where more come from.
    pub fn accepted(&self, kind: AttributeKind) -> String {
        let mut keys: Vec<&str> = kind.documented().to_vec();
        keys.extend(self.extra().filter(|k| !kind.documented().contains(k)));
        format!(
            "a key AWS documents as an {}: {} (a key AWS added since can be allowed with [Global] \
             ExtraLoadBalancerAttributeKeys in the cloud config)",
            kind.noun(),
            keys.join(", ")
        )
    }

    /// The problems of `pairs` (the value of `field`) for `kind`: one per unknown key, naming it and the
    /// accepted keys.
    pub fn problems(&self, kind: AttributeKind, field: &str, pairs: &[(String, String)]) -> Vec<Problem> {
        pairs
            .iter()
            .filter(|(k, _)| !self.accepts(kind, k))
            .map(|(k, v)| Problem {
                field: field.to_owned(),
                value: format!("{k}={v}"),
                accepted: format!("the key {k:?} is unknown: {}", self.accepted(kind)),
            })
            .collect()
    }

    /// The problems of every attribute annotation `annotations` holds: one per unknown key.
    pub fn check(&self, annotations: &Annotations) -> Vec<Problem> {
        let mut problems = Vec::new();
        for (key, kind) in [
            (Key::LoadBalancerAttributes, AttributeKind::LoadBalancer),
            (Key::TargetGroupAttributes, AttributeKind::TargetGroup),
        ] {
            let pairs = annotations.pairs(key).unwrap_or_default();
            problems.extend(self.problems(kind, key.name(), pairs));
        }
        for listener in annotations.listener_attributes() {
            let field = listener.annotation.as_str();
            problems.extend(self.problems(AttributeKind::Listener, field, &listener.attributes));
        }
        problems
    }
}
