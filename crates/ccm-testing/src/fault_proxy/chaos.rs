//! The seeded random-fault mode of the fault proxy: which requests get a fault, and which one, drawn from the
//! seed, the action and the request's rank among that action's requests.

use std::time::Duration;

use super::Fault;

/// The seeded random-fault mode of [`FaultProxy::set_chaos`](super::FaultProxy::set_chaos).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Chaos {
    /// The seed.
    pub seed: u64,
    /// Requests answered with a fault, per thousand.
    pub per_mille: u16,
    /// The longest latency added by a [`ChaosKind::Latency`] fault.
    pub max_delay: Duration,
}

/// The kinds of fault [`Chaos`] injects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum ChaosKind {
    /// The service's throttling error.
    Throttle,
    /// HTTP 500 `InternalError` or 503 `ServiceUnavailable`.
    ServerError,
    /// The connection closed before the request reaches moto.
    Reset,
    /// The request reaches moto, then the connection is closed without its answer (the call took effect but
    /// the caller cannot know).
    ResetAfter,
    /// Forwarded after a delay of up to [`Chaos::max_delay`].
    Latency,
    /// `DependencyViolation` on `DeleteSecurityGroup` (a deleted load balancer's interfaces still hold it).
    DependencyViolation,
    /// `ResourceInUse` on `DeleteTargetGroup` and ELBv2 `DeleteLoadBalancer`.
    ResourceInUse,
    /// `InvalidConfigurationRequest` on ELBv2 `CreateListener`: AWS refusing a create, which must never be taken
    /// for "exists" (the Service is served only once AWS accepts).
    Refused,
}

// === impl Chaos ===

impl Chaos {
    /// The fault for the `rank`-th request (from 1) of `action`, if any.
    pub(super) fn draw(&self, action: &str, rank: u64, is_ec2: bool) -> Option<(ChaosKind, Fault)> {
        let name = action.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        });
        let roll = splitmix(self.seed ^ name ^ splitmix(rank));
        if roll % 1000 >= u64::from(self.per_mille) {
            return None;
        }
        let pick = splitmix(roll);
        let special = match action {
            "DeleteSecurityGroup" => Some((ChaosKind::DependencyViolation, "DependencyViolation")),
            "DeleteTargetGroup" => Some((ChaosKind::ResourceInUse, "ResourceInUse")),
            "DeleteLoadBalancer" if !is_ec2 => Some((ChaosKind::ResourceInUse, "ResourceInUse")),
            "CreateListener" if !is_ec2 => Some((ChaosKind::Refused, "InvalidConfigurationRequest")),
            _ => None,
        };
        if let Some((kind, code)) = special.filter(|_| pick.is_multiple_of(2)) {
            let message = match kind {
                ChaosKind::Refused => "Injected: the request is refused in the current configuration",
                _ => "Injected: resource in use by another resource",
            };
            return Some((kind, Fault::error(400, code).with_message(message)));
        }
        Some(match (pick >> 8) % 100 {
            0..30 => (ChaosKind::Throttle, Fault::Throttle),
            30..45 => (ChaosKind::ServerError, Fault::error(500, "InternalError")),
            45..50 => (ChaosKind::ServerError, Fault::error(503, "ServiceUnavailable")),
            50..65 => (ChaosKind::Reset, Fault::Drop),
            65..75 => (ChaosKind::ResetAfter, Fault::DropAfterForward),
            _ => {
                let max = u64::try_from(self.max_delay.as_millis())
                    .unwrap_or(u64::MAX)
                    .max(1);
                let delay = Duration::from_millis(splitmix(pick) % max);
                (ChaosKind::Latency, Fault::Delay(delay))
            }
        })
    }
}

/// SplitMix64's finalizer: a well-mixed 64-bit value from any input.
fn splitmix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl std::fmt::Display for ChaosKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Throttle => "throttling",
            Self::ServerError => "5xx",
            Self::Reset => "connection reset",
            Self::ResetAfter => "reset after the call",
            Self::Latency => "latency",
            Self::DependencyViolation => "DependencyViolation",
            Self::Refused => "refused CreateListener",
            Self::ResourceInUse => "ResourceInUse",
        })
    }
}
