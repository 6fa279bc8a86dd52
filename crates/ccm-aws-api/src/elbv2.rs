//! The ELBv2 port (Network Load Balancers, API version 2015-12-01).

use std::{collections::BTreeMap, future::Future, time::SystemTime};

use crate::{InstanceId, Result, SecurityGroupId, SubnetId, Tags, VpcId};

/// A load balancer as ELBv2 `DescribeLoadBalancers` reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct LoadBalancerV2 {
    /// The ARN.
    pub arn: String,
    /// The name.
    pub name: String,
    /// The DNS name.
    pub dns_name: String,
    /// `network`, `application` or `gateway`.
    pub lb_type: String,
    /// Whether the scheme is `internal`.
    pub internal: bool,
    /// `provisioning`, `active`, `active_impaired`, `failed`.
    pub state: String,
    /// The VPC.
    pub vpc_id: Option<VpcId>,
    /// Zones with their subnets and addresses.
    pub availability_zones: Vec<LoadBalancerZone>,
    /// Security groups (NLBs created without any can never have some).
    pub security_groups: Vec<SecurityGroupId>,
    /// `ipv4` or `dualstack` (ALBs also `dualstack-without-public-ipv4`); empty when AWS does not say.
    pub ip_address_type: String,
    /// When AWS created it (`CreatedTime`), when reported.
    pub created_time: Option<SystemTime>,
}

/// A zone of a load balancer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadBalancerZone {
    /// The zone name.
    pub zone_name: String,
    /// The subnet in that zone.
    pub subnet_id: Option<SubnetId>,
    /// EIP allocations and private addresses of the zone.
    pub addresses: Vec<SubnetMapping>,
}

/// A subnet of a new load balancer, with an optional EIP or private address.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct SubnetMapping {
    /// The subnet.
    pub subnet_id: Option<SubnetId>,
    /// An EIP allocation (`eipalloc-...`).
    pub allocation_id: Option<String>,
    /// A private IPv4 address (internal NLBs).
    pub private_ipv4_address: Option<String>,
}

/// What to create with [`Elbv2::create_load_balancer`] (always type `network`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewNetworkLoadBalancer {
    /// The name.
    pub name: String,
    /// `internal` when true.
    pub internal: bool,
    /// Subnets with optional EIPs/addresses.
    pub subnet_mappings: Vec<SubnetMapping>,
    /// Security groups; `None` creates an NLB that can never have any.
    pub security_groups: Option<Vec<SecurityGroupId>>,
    /// `ipv4` or `dualstack`; `None` leaves the AWS default (`ipv4`).
    pub ip_address_type: Option<String>,
    /// Tags applied at creation.
    pub tags: Tags,
}

/// A listener.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ListenerV2 {
    /// The ARN.
    pub arn: String,
    /// The load balancer's ARN.
    pub load_balancer_arn: String,
    /// The port.
    pub port: i32,
    /// `TCP`, `UDP`, `TCP_UDP`, `TLS`.
    pub protocol: String,
    /// Certificate ARNs (the first is the default).
    pub certificates: Vec<String>,
    /// The TLS policy.
    pub ssl_policy: Option<String>,
    /// The ALPN policy of a TLS listener (`HTTP2Preferred`, ...; `None` when AWS reports none).
    pub alpn_policy: Option<String>,
    /// Target groups of the default forward actions.
    pub default_target_groups: Vec<String>,
}

/// What to create with [`Elbv2::create_listener`] (one forward action).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewListener {
    /// The load balancer.
    pub load_balancer_arn: String,
    /// The port.
    pub port: i32,
    /// The protocol.
    pub protocol: String,
    /// The certificate ARN, for TLS.
    pub certificate_arn: Option<String>,
    /// The TLS policy.
    pub ssl_policy: Option<String>,
    /// The ALPN policy, for TLS.
    pub alpn_policy: Option<String>,
    /// The target group to forward to.
    pub target_group_arn: String,
    /// Tags applied at creation.
    pub tags: Tags,
}

/// A change to a listener; `None` fields are left alone.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ListenerChange {
    /// The listener.
    pub listener_arn: String,
    /// A new port.
    pub port: Option<i32>,
    /// A new protocol.
    pub protocol: Option<String>,
    /// A new default certificate.
    pub certificate_arn: Option<String>,
    /// A new TLS policy.
    pub ssl_policy: Option<String>,
    /// A new ALPN policy (`None` the policy: `Some("None")`).
    pub alpn_policy: Option<String>,
    /// A new target group to forward to.
    pub target_group_arn: Option<String>,
}

/// A target group.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct TargetGroup {
    /// The ARN.
    pub arn: String,
    /// The name.
    pub name: String,
    /// `TCP`, `UDP`, `TCP_UDP`, `TLS`.
    pub protocol: String,
    /// The traffic port.
    pub port: i32,
    /// The VPC.
    pub vpc_id: Option<VpcId>,
    /// `instance` or `ip`.
    pub target_type: String,
    /// The health check.
    pub health_check: TargetGroupHealthCheck,
    /// Load balancers forwarding to it.
    pub load_balancer_arns: Vec<String>,
    /// The address family of its targets.
    pub ip_address_type: TargetIpFamily,
}

/// A target group's health check.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct TargetGroupHealthCheck {
    /// `TCP`, `HTTP`, `HTTPS`.
    pub protocol: Option<String>,
    /// `traffic-port` or a number.
    pub port: Option<String>,
    /// The HTTP(S) path.
    pub path: Option<String>,
    /// Seconds between checks.
    pub interval_seconds: Option<i32>,
    /// Seconds before a check fails.
    pub timeout_seconds: Option<i32>,
    /// Successes to become healthy.
    pub healthy_threshold: Option<i32>,
    /// Failures to become unhealthy.
    pub unhealthy_threshold: Option<i32>,
    /// The HTTP codes of a healthy answer to an HTTP or HTTPS check (`200-399`, `200,202`; `Matcher.HttpCode`).
    pub matcher: Option<String>,
}

/// What to create with [`Elbv2::create_target_group`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewTargetGroup {
    /// The name (at most 32 characters).
    pub name: String,
    /// The protocol.
    pub protocol: String,
    /// The traffic port.
    pub port: i32,
    /// The VPC.
    pub vpc_id: VpcId,
    /// `instance` (nodes on their node port) or `ip` (pod addresses on their target port).
    pub target_type: TargetType,
    /// The address family of the targets (AWS's `IpAddressType`): fixed at creation.
    pub ip_address_type: TargetIpFamily,
    /// The health check.
    pub health_check: TargetGroupHealthCheck,
    /// Tags applied at creation.
    pub tags: Tags,
}

/// The address family of a target group's targets (AWS's target group `IpAddressType`): fixed at creation. An
/// `ipv6` group serves only a dual-stack load balancer; its instance targets are reached on their primary IPv6
/// address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub enum TargetIpFamily {
    /// IPv4 (AWS's default).
    #[default]
    Ipv4,
    /// IPv6.
    Ipv6,
}

impl TargetIpFamily {
    /// AWS's name: `ipv4` or `ipv6`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ipv4 => "ipv4",
            Self::Ipv6 => "ipv6",
        }
    }
}

/// What a target group's targets are: fixed at creation (AWS's `TargetType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub enum TargetType {
    /// EC2 instances by ID.
    #[default]
    Instance,
    /// IP addresses (inside the VPC: no zone is given).
    Ip,
}

/// A registered target.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Target {
    /// The instance or address.
    pub id: TargetId,
    /// The port (the node port of an instance, the target port of an address).
    pub port: i32,
}

/// The ID of a target: an instance, or an IP address (of a pod, usually).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TargetId {
    /// An instance target.
    Instance(InstanceId),
    /// An IP target.
    Ip(std::net::IpAddr),
}

// === impl TargetType ===

impl TargetType {
    /// AWS's name: `instance` or `ip`.
    pub fn as_str(self) -> &'static str {
        match self {
            TargetType::Instance => "instance",
            TargetType::Ip => "ip",
        }
    }
}

impl std::fmt::Display for TargetType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

// === impl TargetId ===

impl TargetId {
    /// The ID as AWS reports it: an address when it parses as one, else an instance ID.
    pub fn parse(id: &str) -> Self {
        match id.parse() {
            Ok(address) => TargetId::Ip(address),
            Err(_) => TargetId::Instance(InstanceId::new(id)),
        }
    }

    /// The instance, for an instance target.
    pub fn instance(&self) -> Option<&InstanceId> {
        match self {
            TargetId::Instance(id) => Some(id),
            TargetId::Ip(_) => None,
        }
    }
}

impl From<InstanceId> for TargetId {
    fn from(id: InstanceId) -> Self {
        TargetId::Instance(id)
    }
}

impl std::fmt::Display for TargetId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TargetId::Instance(id) => f.write_str(id.as_str()),
            TargetId::Ip(address) => address.fmt(f),
        }
    }
}

// === impl Target ===

impl Target {
    /// An instance target on `port`.
    pub fn instance(id: InstanceId, port: i32) -> Self {
        Self {
            id: TargetId::Instance(id),
            port,
        }
    }
}

/// A target and its health.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TargetHealth {
    /// The target.
    pub target: Target,
    /// `initial`, `healthy`, `unhealthy`, `unused`, `draining`, `unavailable`.
    pub state: String,
    /// The reason code, e.g. `Target.DeregistrationInProgress`.
    pub reason: Option<String>,
}

port! {
    /// The ELBv2 operations the workspace needs. Unknown resources are
    /// [`ErrorKind::NotFound`](crate::ErrorKind::NotFound) (`LoadBalancerNotFound`, `TargetGroupNotFound`,
    /// `ListenerNotFound`) except where a method returns an `Option`.
    #[cfg_attr(feature = "mock", mockall::automock)]
    pub trait Elbv2 {
        /// The load balancer named `name`, or `None`.
        fn load_balancer(&self, name: &str) -> impl Future<Output = Result<Option<LoadBalancerV2>>> + Send;

        /// Creates a network load balancer.
        #[doc(alias = "CreateLoadBalancer")]
        fn create_load_balancer(
            &self,
            lb: &NewNetworkLoadBalancer,
        ) -> impl Future<Output = Result<LoadBalancerV2>> + Send;

        /// Deletes a load balancer.
        #[doc(alias = "DeleteLoadBalancer")]
        fn delete_load_balancer(&self, arn: &str) -> impl Future<Output = Result<()>> + Send;

        /// Replaces the security groups.
        #[doc(alias = "SetSecurityGroups")]
        fn set_security_groups(
            &self,
            arn: &str,
            groups: &[SecurityGroupId],
        ) -> impl Future<Output = Result<()>> + Send;

        /// Replaces the subnets (one per Availability Zone). On an NLB, AWS accepts subnets in additional zones;
        /// callers must not rely on removing or swapping a zone's subnet in place.
        #[doc(alias = "SetSubnets")]
        fn set_subnets(&self, arn: &str, subnets: &[SubnetId]) -> impl Future<Output = Result<()>> + Send;

        /// Sets the IP address type (`ipv4` or `dualstack`; dualstack needs subnets with IPv6 CIDR blocks).
        #[doc(alias = "SetIpAddressType")]
        fn set_ip_address_type(
            &self,
            arn: &str,
            ip_address_type: &str,
        ) -> impl Future<Output = Result<()>> + Send;

        /// The load balancer attributes (`load_balancing.cross_zone.enabled`, `access_logs.s3.enabled`, ...).
        fn load_balancer_attributes(
            &self,
            arn: &str,
        ) -> impl Future<Output = Result<BTreeMap<String, String>>> + Send;

        /// Sets the given load balancer attributes.
        #[doc(alias = "ModifyLoadBalancerAttributes")]
        fn modify_load_balancer_attributes(
            &self,
            arn: &str,
            attributes: &BTreeMap<String, String>,
        ) -> impl Future<Output = Result<()>> + Send;

        /// The listeners of a load balancer.
        fn listeners(&self, load_balancer_arn: &str) -> impl Future<Output = Result<Vec<ListenerV2>>> + Send;

        /// A listener's attributes (`tcp.idle_timeout.seconds` on an NLB's TCP listener).
        fn listener_attributes(&self, arn: &str)
        -> impl Future<Output = Result<BTreeMap<String, String>>> + Send;

        /// Sets the given listener attributes.
        #[doc(alias = "ModifyListenerAttributes")]
        fn modify_listener_attributes(
            &self,
            arn: &str,
            attributes: &BTreeMap<String, String>,
        ) -> impl Future<Output = Result<()>> + Send;

        /// Creates a listener.
        #[doc(alias = "CreateListener")]
        fn create_listener(&self, listener: &NewListener) -> impl Future<Output = Result<ListenerV2>> + Send;

        /// Changes a listener.
        #[doc(alias = "ModifyListener")]
        fn modify_listener(&self, change: &ListenerChange) -> impl Future<Output = Result<()>> + Send;

        /// The certificate ARNs of a TLS listener besides its default one (all pages).
        fn listener_certificates(&self, arn: &str) -> impl Future<Output = Result<Vec<String>>> + Send;

        /// Adds certificates to a TLS listener's list (besides its default one; one already there is kept).
        #[doc(alias = "AddListenerCertificates")]
        fn add_listener_certificates(
            &self,
            arn: &str,
            certificates: &[String],
        ) -> impl Future<Output = Result<()>> + Send;

        /// Removes certificates from a TLS listener's list (never its default one).
        #[doc(alias = "RemoveListenerCertificates")]
        fn remove_listener_certificates(
            &self,
            arn: &str,
            certificates: &[String],
        ) -> impl Future<Output = Result<()>> + Send;

        /// Deletes a listener.
        #[doc(alias = "DeleteListener")]
        fn delete_listener(&self, arn: &str) -> impl Future<Output = Result<()>> + Send;

        /// The target groups of a load balancer.
        fn target_groups(&self, load_balancer_arn: &str)
        -> impl Future<Output = Result<Vec<TargetGroup>>> + Send;

        /// Every target group of the region, paged: how a deletion finds groups no load balancer uses any more.
        fn all_target_groups(&self) -> impl Future<Output = Result<Vec<TargetGroup>>> + Send;

        /// Every load balancer of the region (every type), all pages: how the leak report finds what no Service
        /// names any more.
        fn all_load_balancers(&self) -> impl Future<Output = Result<Vec<LoadBalancerV2>>> + Send;

        /// The target group named `name`, or `None` (found whether or not a load balancer uses it: crash-safe
        /// adoption and cleanup go by the deterministic name).
        fn target_group(&self, name: &str) -> impl Future<Output = Result<Option<TargetGroup>>> + Send;

        /// Creates a target group.
        #[doc(alias = "CreateTargetGroup")]
        fn create_target_group(&self, group: &NewTargetGroup)
        -> impl Future<Output = Result<TargetGroup>> + Send;

        /// Changes a target group's health check (`None` fields are left alone).
        #[doc(alias = "ModifyTargetGroup")]
        fn modify_target_group(
            &self,
            arn: &str,
            health_check: &TargetGroupHealthCheck,
        ) -> impl Future<Output = Result<()>> + Send;

        /// Deletes a target group; still in use is `Conflict` (`ResourceInUse`).
        #[doc(alias = "DeleteTargetGroup")]
        fn delete_target_group(&self, arn: &str) -> impl Future<Output = Result<()>> + Send;

        /// The target group attributes (`preserve_client_ip.enabled`, `proxy_protocol_v2.enabled`, ...).
        fn target_group_attributes(
            &self,
            arn: &str,
        ) -> impl Future<Output = Result<BTreeMap<String, String>>> + Send;

        /// Sets the given target group attributes.
        #[doc(alias = "ModifyTargetGroupAttributes")]
        fn modify_target_group_attributes(
            &self,
            arn: &str,
            attributes: &BTreeMap<String, String>,
        ) -> impl Future<Output = Result<()>> + Send;

        /// The registered targets and their health.
        fn target_health(&self, target_group_arn: &str)
        -> impl Future<Output = Result<Vec<TargetHealth>>> + Send;

        /// Registers targets (the adapter splits large lists).
        #[doc(alias = "RegisterTargets")]
        fn register_targets(
            &self,
            target_group_arn: &str,
            targets: &[Target],
        ) -> impl Future<Output = Result<()>> + Send;

        /// Deregisters targets (the adapter splits large lists).
        #[doc(alias = "DeregisterTargets")]
        fn deregister_targets(
            &self,
            target_group_arn: &str,
            targets: &[Target],
        ) -> impl Future<Output = Result<()>> + Send;

        /// The tags of each resource (load balancers, target groups, listeners), by ARN; resources deleted
        /// meanwhile are absent, never an error (AWS fails a whole `DescribeTags` for one of them: the adapter then
        /// asks for each alone).
        fn tags(&self, arns: &[String]) -> impl Future<Output = Result<BTreeMap<String, Tags>>> + Send;

        /// Adds or overwrites tags on resources.
        #[doc(alias = "AddTags")]
        fn add_tags(&self, arns: &[String], tags: &Tags) -> impl Future<Output = Result<()>> + Send;

        /// Removes the tags with these keys from resources (absent keys are not an error).
        #[doc(alias = "RemoveTags")]
        fn remove_tags(&self, arns: &[String], keys: &[String]) -> impl Future<Output = Result<()>> + Send;
    }
}

// === impl LoadBalancerV2 ===

impl LoadBalancerV2 {
    /// A network load balancer with ARN, name and DNS name, state `active` (for fakes and tests).
    pub fn new(arn: &str, name: &str, dns_name: &str) -> Self {
        Self {
            arn: arn.to_owned(),
            name: name.to_owned(),
            dns_name: dns_name.to_owned(),
            lb_type: "network".to_owned(),
            internal: false,
            state: "active".to_owned(),
            vpc_id: None,
            availability_zones: Vec::new(),
            security_groups: Vec::new(),
            ip_address_type: "ipv4".to_owned(),
            created_time: None,
        }
    }
}

// === impl ListenerV2 ===

impl ListenerV2 {
    /// A listener forwarding to one target group (for fakes and tests).
    pub fn new(arn: &str, load_balancer_arn: &str, port: i32, protocol: &str, target_group: &str) -> Self {
        Self {
            arn: arn.to_owned(),
            load_balancer_arn: load_balancer_arn.to_owned(),
            port,
            protocol: protocol.to_owned(),
            certificates: Vec::new(),
            ssl_policy: None,
            alpn_policy: None,
            default_target_groups: vec![target_group.to_owned()],
        }
    }
}

// === impl TargetGroup ===

impl TargetGroup {
    /// An instance target group (for fakes and tests).
    pub fn new(arn: &str, name: &str, protocol: &str, port: i32) -> Self {
        Self {
            arn: arn.to_owned(),
            name: name.to_owned(),
            protocol: protocol.to_owned(),
            port,
            vpc_id: None,
            target_type: "instance".to_owned(),
            health_check: TargetGroupHealthCheck::default(),
            load_balancer_arns: Vec::new(),
            ip_address_type: TargetIpFamily::Ipv4,
        }
    }
}
