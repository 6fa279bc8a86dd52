//! AWS provider IDs (a Node's `spec.providerID`): every form upstream accepts, the one form it writes, and the
//! instance a provider ID or node name points at. The one home of this vocabulary: instances, routes, load
//! balancers, tagging and `doctor` all read provider IDs through [`ProviderId`].
//!
//! Path depth: the instance is the *last* path segment, whatever comes before it, as upstream's
//! `KubernetesInstanceID.MapToAWSInstanceID` reads it. EKS Fargate nodes carry a segment between the zone and the
//! pod (`aws:///us-west-2c/1abc-2def/fargate-ip-192-168-164-88.internal`), so a rule of "at most `<zone>/<id>`"
//! would refuse real nodes.

use std::{
    fmt,
    net::{IpAddr, Ipv4Addr},
    str::FromStr,
};

use crate::InstanceId;

/// The provider name: the scheme of every AWS provider ID and the `--cloud-provider` value.
pub const PROVIDER_NAME: &str = "aws";

/// The prefix of Fargate "instances" (`fargate-<ip>` or `fargate-ip-<a-b-c-d>[.<domain>]`).
pub const FARGATE_PREFIX: &str = "fargate-";

/// The forms [`ProviderId::parse`] accepts, as every [`ProviderIdError`] lists them.
pub const ACCEPTED_FORMS: &str = "aws:///<zone>/<instance>, aws:////<instance>, aws://<zone>/<instance>, \
     aws:///<zone>/<...>/<instance>, or a bare <instance>, where <instance> is i-<id>, fargate-<ip> or \
     fargate-ip-<a-b-c-d>[.<domain>]";

/// A parsed AWS provider ID: the instance it names and, when it names one, the zone.
///
/// [`fmt::Display`] writes the form upstream produces, `aws:///<zone>/<instance>` (`aws:////<instance>` without a
/// zone); parsing accepts more forms than that (see [`ProviderId::parse`]), so a Node's own `spec.providerID`,
/// which is immutable, is kept as written rather than re-formatted.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ProviderId {
    zone: Option<String>,
    instance: InstanceRef,
}

/// What a provider ID or node name points at.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum InstanceRef {
    /// An EC2 instance.
    Ec2(InstanceId),
    /// A Fargate pod, known by its network interface's private IP.
    Fargate {
        /// The token after `fargate-` as written (kept to reproduce the provider ID).
        name: String,
        /// The pod's IP.
        ip: IpAddr,
    },
}

/// A provider ID, or an instance token, that is not one of the [`ACCEPTED_FORMS`]. The Node's `spec.providerID`
/// (or name) must be fixed; retrying cannot help.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid AWS provider ID {value:?}: {reason}; accepted: {ACCEPTED_FORMS}")]
pub struct ProviderIdError {
    value: String,
    reason: ProviderIdReason,
}

/// What is wrong with a provider ID.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, thiserror::Error)]
#[non_exhaustive]
pub enum ProviderIdReason {
    /// The value is empty, or its path is.
    #[error("the instance is empty")]
    Empty,
    /// A `<scheme>://` other than `aws://`.
    #[error("the scheme is not aws")]
    OtherScheme,
    /// `aws://<host>` with no path after the host.
    #[error("there is no instance after the zone")]
    NoPath,
    /// The last path segment is neither `i-<id>` nor `fargate-...`.
    #[error("the instance is neither i-<id> nor fargate-<ip>")]
    NotAnInstance,
    /// `fargate-<x>` where `<x>` is neither an IP nor `ip-<a-b-c-d>[.<domain>]`.
    #[error("the Fargate address is not an IP nor ip-<a-b-c-d>")]
    BadFargateAddress,
    /// An EC2 instance ID that is not `i-` and 8 or 17 lowercase hexadecimal digits (see
    /// [`InstanceId::is_well_formed`]); only callers that need a real EC2 ID ask for this.
    #[error("an EC2 instance ID is i- and 8 or 17 lowercase hexadecimal digits")]
    MalformedInstanceId,
}

// === impl ProviderId ===

impl ProviderId {
    /// The provider ID of `instance` in `zone` (an empty zone is none).
    pub fn new(zone: impl Into<String>, instance: impl Into<InstanceRef>) -> Self {
        let zone = zone.into();
        Self {
            zone: (!zone.is_empty()).then_some(zone),
            instance: instance.into(),
        }
    }

    /// Parses a provider ID in any accepted form: `aws:///<zone>/<instance>`, `aws:////<instance>`,
    /// `aws://<zone>/<instance>`, `aws:///<zone>/<...>/<instance>` or a bare `<instance>` (also `<zone>/<instance>`),
    /// where `<instance>` is `i-...` or a Fargate token (`fargate-<ip>`, `fargate-ip-<a-b-c-d>[.<domain>]`).
    ///
    /// Upstream `MapToAWSInstanceID`, except that another scheme is refused (upstream reads `gce://p/z/i-1` as a
    /// bare ID and finds `i-1`), an EC2 token may not hold whitespace, and Fargate IPs are checked here rather
    /// than at the first API call. The zone is the first path segment when the path has two or more, else the
    /// URL host (`aws://<zone>/<instance>`).
    pub fn parse(value: &str) -> Result<Self, ProviderIdError> {
        let invalid = |reason| ProviderIdError::new(value, reason);
        let (host, path) = match value.split_once("://") {
            None => ("", value),
            Some((scheme, _)) if scheme != PROVIDER_NAME => {
                return Err(invalid(ProviderIdReason::OtherScheme));
            }
            Some((_, rest)) => rest
                .split_once('/')
                .ok_or_else(|| invalid(ProviderIdReason::NoPath))?,
        };
        let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
        let (token, before) = segments.split_last().unwrap_or((&"", &[]));
        if token.is_empty() {
            return Err(invalid(ProviderIdReason::Empty));
        }
        let instance = InstanceRef::parse_token(token).map_err(invalid)?;
        let zone = before.first().copied().unwrap_or(host);
        Ok(Self::new(zone, instance))
    }

    /// The EC2 instance a provider ID names; `None` for Fargate, other providers and malformed values. For
    /// callers that act on EC2 instances only and skip every other Node.
    pub fn ec2_instance_of(value: &str) -> Option<InstanceId> {
        Self::parse(value).ok()?.into_instance().into_instance_id()
    }

    /// The zone, when the provider ID names one.
    pub fn zone(&self) -> Option<&str> {
        self.zone.as_deref()
    }

    /// What the provider ID points at.
    pub fn instance(&self) -> &InstanceRef {
        &self.instance
    }

    /// What the provider ID points at, owned.
    pub fn into_instance(self) -> InstanceRef {
        self.instance
    }

    /// The EC2 instance, unless this is a Fargate pod.
    pub fn instance_id(&self) -> Option<&InstanceId> {
        self.instance.instance_id()
    }
}

impl fmt::Display for ProviderId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let zone = self.zone.as_deref().unwrap_or_default();
        write!(f, "{PROVIDER_NAME}:///{zone}/{}", self.instance)
    }
}

impl FromStr for ProviderId {
    type Err = ProviderIdError;

    fn from_str(value: &str) -> Result<Self, Self::Err> {
        Self::parse(value)
    }
}

// === impl InstanceRef ===

impl InstanceRef {
    /// Parses the instance token of a provider ID: `i-<id>` or `fargate-<ip>` / `fargate-ip-<a-b-c-d>[.<domain>]`.
    pub fn parse(token: &str) -> Result<Self, ProviderIdError> {
        Self::parse_token(token).map_err(|reason| ProviderIdError::new(token, reason))
    }

    /// The instance a node name names: `i-<id>[.<domain>]` (resource-based names; the ID is the text before the
    /// first dot, as upstream's `getInstanceByNodeName`) or a Fargate name; `None` for other names, which are
    /// private DNS names to look up by filter.
    pub fn from_node_name(name: &str) -> Option<Result<Self, ProviderIdError>> {
        let token = if name.starts_with("i-") {
            name.split('.').next().unwrap_or(name)
        } else if name.starts_with(FARGATE_PREFIX) {
            name
        } else {
            return None;
        };
        Some(Self::parse_token(token).map_err(|reason| ProviderIdError::new(name, reason)))
    }

    /// The EC2 instance, unless this is a Fargate pod.
    pub fn instance_id(&self) -> Option<&InstanceId> {
        match self {
            Self::Ec2(id) => Some(id),
            Self::Fargate { .. } => None,
        }
    }

    /// The EC2 instance, owned, unless this is a Fargate pod.
    pub fn into_instance_id(self) -> Option<InstanceId> {
        match self {
            Self::Ec2(id) => Some(id),
            Self::Fargate { .. } => None,
        }
    }

    fn parse_token(token: &str) -> Result<Self, ProviderIdReason> {
        if let Some(rest) = token.strip_prefix(FARGATE_PREFIX) {
            return fargate_ip(rest)
                .map(|ip| Self::Fargate {
                    name: rest.to_owned(),
                    ip,
                })
                .ok_or(ProviderIdReason::BadFargateAddress);
        }
        match token.strip_prefix("i-") {
            Some(rest) if !rest.is_empty() && !rest.contains(|c: char| c == '/' || c.is_whitespace()) => {
                Ok(Self::Ec2(InstanceId::new(token)))
            }
            _ => Err(ProviderIdReason::NotAnInstance),
        }
    }
}

impl From<InstanceId> for InstanceRef {
    fn from(id: InstanceId) -> Self {
        Self::Ec2(id)
    }
}

impl fmt::Display for InstanceRef {
    /// The instance token as a provider ID holds it: `i-...` or `fargate-<name>`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Ec2(id) => f.write_str(id.as_str()),
            Self::Fargate { name, .. } => write!(f, "{FARGATE_PREFIX}{name}"),
        }
    }
}

// === impl ProviderIdError ===

impl ProviderIdError {
    /// `value` refused for `reason`.
    pub fn new(value: impl Into<String>, reason: ProviderIdReason) -> Self {
        Self {
            value: value.into(),
            reason,
        }
    }

    /// The refused value, as given.
    pub fn value(&self) -> &str {
        &self.value
    }

    /// What is wrong with it.
    pub fn reason(&self) -> ProviderIdReason {
        self.reason
    }
}

// === impl InstanceId ===

impl InstanceId {
    /// Whether this is an ID EC2 could have issued: `i-` and 8 or 17 lowercase hexadecimal digits. EC2 answers
    /// any other ID with `InvalidInstanceID.Malformed`; a test or kwok node's `i-kwok-node-1` parses as a provider
    /// ID but is not well formed.
    pub fn is_well_formed(&self) -> bool {
        self.as_str().strip_prefix("i-").is_some_and(|digits| {
            matches!(digits.len(), 8 | 17)
                && digits
                    .bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        })
    }
}

/// `10.0.0.1`, `2600:1f14::1` or `ip-10-0-0-1[.<domain>]`.
fn fargate_ip(rest: &str) -> Option<IpAddr> {
    if let Some(dns) = rest.strip_prefix("ip-") {
        let host = dns.split('.').next().unwrap_or(dns);
        return host.replace('-', ".").parse::<Ipv4Addr>().ok().map(IpAddr::V4);
    }
    rest.parse().ok()
}

#[cfg(test)]
mod tests;
