//! The annotation table: every `service.beta.kubernetes.io/aws-load-balancer-*` key declared once (key, value
//! type, default, flavours, doc). The table drives value validation ([`parse_value`]), the typed accessors the
//! spec parser uses, and the generated `docs/annotations.md` ([`render_markdown`]).

use serde::Serialize;

pub mod albc;
mod attributes;
mod go_compat;
mod markdown;
mod table;
mod values;

pub use attributes::{
    ALPN_POLICIES, AttributeKeys, AttributeKind, DELETION_PROTECTION, LISTENER_ATTRIBUTES_PREFIX,
    LISTENER_PROTOCOLS, NLB_ATTRIBUTE_KEYS, NLB_ATTRIBUTES, NLB_LISTENER_ATTRIBUTE_KEYS,
    NLB_TARGET_GROUP_ATTRIBUTE_KEYS, TCP_IDLE_TIMEOUT,
};
pub use go_compat::Warning;
pub use markdown::render_markdown;
pub use table::{ANNOTATIONS, TYPE_VALUES};
pub use values::{
    Annotations, ListenerAttributes, Problem, Value, is_cidr, is_prefix_list_id, parse_bool, parse_value,
};

/// The prefix shared by the AWS load-balancer annotations.
pub const PREFIX: &str = "service.beta.kubernetes.io/aws-load-balancer-";

/// Which load-balancer flavours an annotation affects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub enum Applies {
    /// Classic ELB and NLB.
    Both,
    /// Classic ELB only (ignored on NLB).
    Clb,
    /// NLB only (ignored on Classic ELB).
    Nlb,
    /// Classic ELB only; on an NLB it is an error.
    ClbRejectedOnNlb,
    /// NLB only; on a Classic ELB it is an error.
    NlbRejectedOnClb,
}

/// Where an annotation comes from: which controller's users already know it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub enum Origin {
    /// The Go controller (kubernetes/cloud-provider-aws) and Kubernetes itself.
    Go,
    /// The AWS Load Balancer Controller (same key and format, so a Service moves between the two unedited).
    AwsLoadBalancerController,
    /// This controller's own.
    Ours,
}

/// The value type of an annotation: what [`parse_value`] accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum ValueType {
    /// `true`/`false` (also Go's `1`, `t`, `T`, `TRUE`, `True`, `0`, `f`, `F`, `FALSE`, `False`).
    Bool,
    /// An integer in `min..=max`.
    Int {
        /// Smallest accepted value.
        min: i64,
        /// Largest accepted value.
        max: i64,
    },
    /// One of the listed integers.
    IntOneOf(&'static [i64]),
    /// One of the listed words (compared case-insensitively).
    OneOf(&'static [&'static str]),
    /// Free text (non-empty when present, except where the default is empty).
    Text,
    /// An ARN (`arn:...`).
    Arn,
    /// A path starting with `/`.
    Path,
    /// `traffic-port` or a port number 1..=65535.
    HealthCheckPort,
    /// Comma-separated IDs with the given prefix (`sg-`, `eipalloc-`), trimmed.
    IdList(&'static str),
    /// Comma-separated managed prefix list IDs (`pl-` and hexadecimal digits), trimmed.
    PrefixListIds,
    /// Comma-separated subnet IDs (`subnet-...`) or subnet `Name` tags, trimmed.
    SubnetList,
    /// Comma-separated port numbers or port names; `*` or empty means every port.
    PortList,
    /// Comma-separated IPv4 addresses.
    Ipv4List,
    /// Comma-separated CIDRs (IPv4 or IPv6).
    CidrList,
    /// `k1=v1,k2=,k3`: tags (key required, value may be empty).
    TagList,
    /// `k1=v1,k2=,k3`: node labels (empty value matches any value).
    LabelList,
    /// `preserve_client_ip.enabled=true|false,proxy_protocol_v2.enabled=true|false`: keys of
    /// [`NLB_TARGET_GROUP_ATTRIBUTE_KEYS`] (others skipped, as Go did) or the operator's extra keys.
    TargetGroupAttributes,
    /// `deletion_protection.enabled=true|false,...`: NLB attributes, keys of [`NLB_ATTRIBUTE_KEYS`] or the
    /// operator's extra keys ([`AttributeKeys`]); the values of [`NLB_ATTRIBUTES`] checked, others passed.
    LoadBalancerAttributes,
    /// `tcp.idle_timeout.seconds=60..6000`: the attributes of one NLB listener, keys of
    /// [`NLB_LISTENER_ATTRIBUTE_KEYS`] or the operator's extra keys.
    ListenerAttributes,
    /// A load balancer name as AWS accepts it ([`crate::shared::is_load_balancer_name`]).
    LoadBalancerName,
}

/// One annotation of the table.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct AnnotationDef {
    /// The key identifier.
    pub key: Key,
    /// The full annotation name.
    pub name: &'static str,
    /// The accepted values.
    pub value: ValueType,
    /// The default, in words.
    pub default: &'static str,
    /// The flavours it affects.
    pub applies: Applies,
    /// What it does (one or two sentences of Markdown).
    pub doc: &'static str,
}

macro_rules! keys {
    ($($variant:ident),* $(,)?) => {
        /// The identifier of every annotation of the table ([`ANNOTATIONS`] is in this order). Non-exhaustive:
        /// the table grows as keys are served.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
        #[non_exhaustive]
        pub enum Key {
            $(
                #[allow(missing_docs)]
                $variant,
            )*
        }

        impl Key {
            /// Every key, in table order.
            pub const ALL: &'static [Key] = &[$(Key::$variant),*];
        }
    };
}

keys!(
    Type,
    Internal,
    Scheme,
    Subnets,
    SourceRanges,
    SecurityGroupPrefixLists,
    SecurityGroups,
    ExtraSecurityGroups,
    AdditionalResourceTags,
    TargetNodeLabels,
    TargetNodesWithEndpoints,
    NlbTargetType,
    BackendProtocol,
    SslCert,
    SslPorts,
    SslNegotiationPolicy,
    ProxyProtocol,
    AllowProxyProtocol,
    ConnectionIdleTimeout,
    ConnectionDrainingEnabled,
    ConnectionDrainingTimeout,
    CrossZoneLoadBalancingEnabled,
    AccessLogEnabled,
    AccessLogEmitInterval,
    AccessLogS3BucketName,
    AccessLogS3BucketPrefix,
    HealthcheckProtocol,
    HealthcheckPort,
    HealthcheckPath,
    HealthcheckHealthyThreshold,
    HealthcheckUnhealthyThreshold,
    HealthcheckTimeout,
    HealthcheckInterval,
    HealthcheckSuccessCodes,
    EipAllocations,
    PrivateIpv4Addresses,
    IpAddressType,
    TargetGroupAttributes,
    AllowRecreation,
    AlpnPolicy,
    LoadBalancerAttributes,
    ListenerAttributes,
    LoadBalancerName,
    Adopt,
    ReleaseOnDeletion,
);

// === impl Key ===

impl Key {
    /// The table entry of this key.
    pub fn def(self) -> &'static AnnotationDef {
        // The table is in `Key::ALL` order; a unit test checks it.
        &ANNOTATIONS[self as usize]
    }

    /// The annotation name.
    pub fn name(self) -> &'static str {
        self.def().name
    }

    /// Where the annotation comes from.
    pub fn origin(self) -> Origin {
        match self {
            Key::IpAddressType
            | Key::AlpnPolicy
            | Key::LoadBalancerAttributes
            | Key::ListenerAttributes
            | Key::LoadBalancerName
            | Key::Scheme
            | Key::HealthcheckSuccessCodes
            | Key::SecurityGroupPrefixLists
            | Key::NlbTargetType => Origin::AwsLoadBalancerController,
            Key::AllowRecreation
            | Key::AllowProxyProtocol
            | Key::TargetNodesWithEndpoints
            | Key::Adopt
            | Key::ReleaseOnDeletion => Origin::Ours,
            _ => Origin::Go,
        }
    }
}

#[cfg(test)]
mod tests;
