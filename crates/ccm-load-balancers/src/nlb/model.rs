//! The desired NLB of a Service ([`build`], pure): listeners keyed by port, their target groups, the shared
//! health check, the security groups by mode, the attributes owned and the nodes' rules.

use std::collections::{BTreeMap, BTreeSet};

use ccm_aws_api::{
    InstanceId, SecurityGroupId, SubnetId, Tags,
    elbv2::{LoadBalancerV2, TargetGroupHealthCheck, TargetType},
};
use ccm_cloud_provider::NodeView;
use serde::Serialize;

mod access;
mod targets;

use access::node_access;

use super::{
    managed_group_name,
    node_rules::{MANAGED_GROUP_SOURCE, NodeAccess},
};
use crate::{
    Error, InvalidService, LoadBalancerConfig,
    annotations::{Key, Problem},
    shared::{self, HealthProbeMode, ManagedGroup},
    spec::{IpAddressType, PortSpec, ServiceSpec},
};

/// The description of the managed security group (as upstream).
pub const MANAGED_GROUP_DESCRIPTION: &str = "[k8s] Managed SecurityGroup for LoadBalancer";

/// The target group attribute of client IP preservation.
pub(super) const PRESERVE_CLIENT_IP: &str = "preserve_client_ip.enabled";

/// The load balancer attribute of cross-zone load balancing.
pub const CROSS_ZONE_ATTRIBUTE: &str = "load_balancing.cross_zone.enabled";

/// The load balancer attribute enabling access logs.
pub const ACCESS_LOGS_ATTRIBUTE: &str = "access_logs.s3.enabled";

/// The access log bucket attribute.
pub const ACCESS_LOGS_BUCKET_ATTRIBUTE: &str = "access_logs.s3.bucket";

/// The access log prefix attribute.
pub const ACCESS_LOGS_PREFIX_ATTRIBUTE: &str = "access_logs.s3.prefix";

/// The security groups of the NLB.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "mode", rename_all = "snake_case")]
pub enum Security {
    /// `NLBSecurityGroupMode` unset: new NLBs get no group, an existing NLB's groups are left alone.
    Unmanaged,
    /// `NLBSecurityGroupMode = Managed`: one managed group with exactly the listeners' rules.
    Managed(ManagedGroup),
    /// The `security-groups` annotation (with `Managed` mode): exactly these groups, never modified or deleted.
    Given(Vec<String>),
}

/// A health check (shared by every target group of the NLB).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
#[non_exhaustive]
pub struct HealthCheck {
    /// `TCP`, `HTTP`, `HTTPS`.
    pub protocol: String,
    /// `traffic-port` or a port number.
    pub port: String,
    /// The path of HTTP and HTTPS checks.
    pub path: Option<String>,
    /// Seconds between checks.
    pub interval: i32,
    /// Seconds before a check fails.
    pub timeout: i32,
    /// Successes to become healthy.
    pub healthy_threshold: i32,
    /// Failures to become unhealthy.
    pub unhealthy_threshold: i32,
    /// The HTTP codes of a healthy answer to an HTTP or HTTPS check, owned while annotated (`None`: left as
    /// it is).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub success_codes: Option<String>,
}

/// A target group: one per listener.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
#[non_exhaustive]
pub struct TargetGroupSpec {
    /// The deterministic name ([`target_group_name`](super::target_group_name), or
    /// [`ip_target_group_name`](super::ip_target_group_name)).
    pub name: String,
    /// `TCP`, `UDP`, `TCP_UDP`, `TLS`.
    pub protocol: String,
    /// The node port (instance targets), or the target port (IP targets: each target has its own port, this
    /// one the group's default).
    pub port: i32,
    /// `instance` or `ip`: fixed when the group is made, a change is a new group (its name differs).
    #[serde(serialize_with = "targets::target_type_name")]
    pub target_type: TargetType,
    /// The IP targets wanted, `(address, port)`: for IP groups whose endpoints are known; `None` for instance
    /// groups, and for IP groups when the endpoints are not known (their targets are then left as they are).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ip_targets: Option<BTreeSet<(String, i32)>>,
    /// Whether the targets are IPv6 (a Service of the IPv6 family only): fixed when the group is made, a change
    /// is a new group (its name differs).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub ipv6: bool,
}

// === impl TargetGroupSpec ===

impl TargetGroupSpec {
    /// The family of the group's targets, as AWS takes it.
    pub fn ip_family(&self) -> ccm_aws_api::elbv2::TargetIpFamily {
        if self.ipv6 {
            ccm_aws_api::elbv2::TargetIpFamily::Ipv6
        } else {
            ccm_aws_api::elbv2::TargetIpFamily::Ipv4
        }
    }
}

/// A listener.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
#[non_exhaustive]
pub struct Listener {
    /// The front-end port (the key: one listener per port).
    pub port: i32,
    /// `TCP`, `UDP`, `TCP_UDP`, `TLS`.
    pub protocol: String,
    /// The certificate ARN of TLS listeners (the default one).
    pub certificate: Option<String>,
    /// The other certificates of a TLS listener (its certificate list, chosen by SNI), owned while the
    /// annotation gives several.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub extra_certificates: Vec<String>,
    /// The TLS policy (`None`: AWS's default, never changed).
    pub ssl_policy: Option<String>,
    /// The ALPN policy of a TLS listener (`Some("None")` without the annotation: a removed annotation resets
    /// it); `None` for other protocols.
    pub alpn_policy: Option<String>,
    /// The target group it forwards to.
    pub target_group: TargetGroupSpec,
    /// Listener attributes owned (from the annotation for its protocol and port; others are left alone).
    pub attributes: BTreeMap<String, String>,
}

/// The desired NLB of a Service: pure data, serializable for dry runs and snapshots.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Desired {
    /// The load balancer name.
    pub name: String,
    /// `<namespace>/<name>` of the Service.
    pub service: String,
    /// `internal` scheme.
    pub internal: bool,
    /// Subnets (sorted).
    pub subnets: Vec<String>,
    /// Whether the subnets come from the annotation (then a difference is reconciled: subnets in added zones
    /// in place, anything else by recreation; discovered subnets never change an existing NLB: a newly tagged
    /// subnet must not touch every NLB of the cluster).
    pub subnets_pinned: bool,
    /// EIP allocations, index-mapped onto the sorted subnets.
    pub eip_allocations: Vec<String>,
    /// Private IPv4 addresses, index-mapped onto the sorted subnets.
    pub private_ipv4_addresses: Vec<String>,
    /// `ipv4` or `dualstack` (changed in place).
    pub ip_address_type: IpAddressType,
    /// Security groups.
    pub security: Security,
    /// The managed group's name (also when groups are given: a managed group left from before is released).
    pub managed_group_name: String,
    /// Listeners by port, in Service port order.
    pub listeners: Vec<Listener>,
    /// The health check of every target group.
    pub health_check: HealthCheck,
    /// Target group attributes owned (from the annotation; others are left alone).
    pub target_group_attributes: BTreeMap<String, String>,
    /// Load balancer attributes owned.
    pub attributes: BTreeMap<String, String>,
    /// Target instances, sorted.
    pub instances: Vec<String>,
    /// Tags of the load balancer, its target groups and listeners (added or overwritten, never removed).
    pub tags: Tags,
    /// The nodes' rules (`None` with `DisableSecurityGroupIngress`).
    pub node_access: Option<NodeAccess>,
    /// Whether a change only a new NLB can apply may replace this one (the Service's
    /// `aws-load-balancer-allow-recreation`, or `--allow-load-balancer-recreation`).
    pub allow_recreation: bool,
    /// `aws-load-balancer-release-on-deletion` (`None`: release only an adopted NLB); an adopted NLB is
    /// recreated only when this is `Some(false)`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub release_on_deletion: Option<bool>,
    /// Whether the name is not the Service's UID name (`aws-load-balancer-name`, or one kept from before a
    /// rename): a name anyone may choose proves nothing, so a load balancer under it must also name this
    /// Service in its `kubernetes.io/service-name` tag ([`crate::ownership::claim`]).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub name_chosen: bool,
}

/// The listeners of a Service, one per port number (TCP and UDP on one port: `TCP_UDP`), in port order.
pub fn listeners(spec: &ServiceSpec, config: &LoadBalancerConfig) -> Vec<Listener> {
    let health_check = health_check(spec, config);
    let mut by_port: Vec<(i32, Vec<&PortSpec>)> = Vec::new();
    for p in &spec.ports {
        match by_port.iter_mut().find(|(port, _)| *port == p.port) {
            Some((_, group)) => group.push(p),
            None => by_port.push((p.port, vec![p])),
        }
    }
    by_port
        .iter()
        .map(|(_, g)| listener(spec, config.cluster.id(), &health_check, g))
        .collect()
}

fn listener(
    spec: &ServiceSpec,
    cluster_id: &str,
    health_check: &HealthCheck,
    group: &[&PortSpec],
) -> Listener {
    let first = group[0];
    let has = |p: &str| group.iter().any(|g| g.protocol == p);
    let mut protocol = if has("TCP") && has("UDP") {
        "TCP_UDP"
    } else if has("UDP") {
        "UDP"
    } else {
        "TCP"
    };
    let mut certificate = None;
    let mut extra_certificates = Vec::new();
    let mut ssl_policy = None;
    let mut alpn_policy = None;
    let mut target_protocol = protocol;
    if protocol == "TCP"
        && let Some(cert) = &spec.ssl_cert
        && spec.is_ssl_port(first)
    {
        protocol = "TLS";
        certificate = Some(cert.clone());
        extra_certificates.clone_from(&spec.extra_ssl_certs);
        ssl_policy.clone_from(&spec.ssl_negotiation_policy);
        alpn_policy = Some(spec.alpn_policy.clone().unwrap_or_else(|| "None".to_owned()));
        target_protocol = if spec.backend_protocol.as_deref() == Some("ssl") {
            "TLS"
        } else {
            "TCP"
        };
    }
    Listener {
        port: first.port,
        protocol: protocol.to_owned(),
        certificate,
        extra_certificates,
        ssl_policy,
        alpn_policy,
        target_group: targets::target_group(spec, cluster_id, health_check, group, target_protocol),
        attributes: BTreeMap::new(),
    }
}

/// The health check (upstream's order, minus its bugs): the mode's defaults (`Local`: HTTP on the health check
/// node port at `/healthz`, 10/10/2/2; `Cluster`: TCP on the traffic port, 30/10/3/3, or kube-proxy's endpoint in
/// `Shared` probe mode), then every annotation on top (in `Shared` mode too).
pub fn health_check(spec: &ServiceSpec, config: &LoadBalancerConfig) -> HealthCheck {
    let mut hc = match (
        spec.local_traffic,
        spec.health_check_node_port,
        &config.health_probe,
    ) {
        // Pods are checked themselves: neither kube-proxy's port nor the health check node port is theirs.
        _ if spec.ip_targets => HealthCheck::tcp_traffic_port(),
        (true, Some(port), _) => HealthCheck {
            protocol: "HTTP".to_owned(),
            port: port.to_string(),
            path: Some("/healthz".to_owned()),
            interval: 10,
            timeout: 10,
            healthy_threshold: 2,
            unhealthy_threshold: 2,
            success_codes: None,
        },
        (false, _, HealthProbeMode::Shared { port, path }) => HealthCheck {
            protocol: "HTTP".to_owned(),
            port: port.to_string(),
            path: Some(path.clone()),
            interval: 30,
            timeout: 10,
            healthy_threshold: 3,
            unhealthy_threshold: 3,
            success_codes: None,
        },
        _ => HealthCheck::tcp_traffic_port(),
    };
    let a = &spec.health_check;
    if let Some(protocol) = &a.protocol {
        let protocol = protocol.to_ascii_uppercase();
        if protocol == "TCP" {
            hc.path = None;
        } else if hc.path.is_none() {
            hc.path = Some("/".to_owned());
        }
        hc.protocol = protocol;
    }
    if hc.protocol != "TCP"
        && let Some(path) = &a.path
    {
        hc.path = Some(path.clone());
    }
    match a.port {
        Some(None) => hc.port = "traffic-port".to_owned(),
        Some(Some(p)) => hc.port = p.to_string(),
        None => {}
    }
    hc.interval = a.interval.unwrap_or(hc.interval);
    hc.timeout = a.timeout.unwrap_or(hc.timeout);
    hc.healthy_threshold = a.healthy_threshold.unwrap_or(hc.healthy_threshold);
    hc.unhealthy_threshold = a.unhealthy_threshold.unwrap_or(hc.unhealthy_threshold);
    // A TCP check has no matcher: the codes then do nothing (the provider's Warning says so).
    if hc.is_http() {
        hc.success_codes.clone_from(&spec.health_check_success_codes);
    }
    hc
}

/// The desired NLB (pure). `subnets` come from [`shared::resolve_subnets`]; `cluster_name` is the controller's
/// `--cluster-name` (it names the managed security group). Every problem is collected.
pub fn build(
    spec: &ServiceSpec,
    nodes: &[&NodeView],
    config: &LoadBalancerConfig,
    cluster_name: &str,
    subnets: &[SubnetId],
) -> Result<Desired, Error> {
    config.check_health_check_port(spec)?;
    let name = shared::service_load_balancer_name(spec)?;
    let name_chosen = name != shared::load_balancer_name(&spec.uid)?;
    let mut subnets: Vec<String> = subnets.iter().map(ToString::to_string).collect();
    subnets.sort();
    check_addresses(spec, &subnets)?;
    let no_group = "the NLB has no security group (NLBSecurityGroupMode is not Managed)";
    shared::check_prefix_lists(spec, (!config.nlb_managed_security_groups).then_some(no_group))?;
    let mut listeners = listeners(spec, config);
    super::listener_attributes::attach(spec, &mut listeners)?;
    let health_check = health_check(spec, config);
    let instances: Vec<String> = shared::target_instances(nodes, &spec.target_node_labels)
        .into_iter()
        .map(InstanceId::into_string)
        .collect();
    // IP targets on a named target port whose endpoints are not known: the pods' ports are not known either,
    // and the nodes' rules are left as they are.
    let ports_known = !spec.ip_targets
        || spec.pod_endpoints.is_some()
        || spec.ports.iter().all(|p| p.target_port.is_some());
    let node_access = (config.manage_node_security_groups && ports_known)
        .then(|| node_access(spec, &name, &listeners, &health_check, &instances));
    let managed_group_name = managed_group_name(cluster_name, &spec.namespace, &spec.name, &spec.uid);
    Ok(Desired {
        service: spec.key(),
        internal: spec.internal,
        subnets_pinned: spec.subnets.is_some(),
        eip_allocations: spec.eip_allocations.clone(),
        private_ipv4_addresses: spec.private_ipv4_addresses.clone(),
        ip_address_type: spec.ip_address_type,
        security: security(spec, config, &listeners, &managed_group_name),
        managed_group_name,
        listeners,
        health_check,
        target_group_attributes: spec.target_group_attributes.clone(),
        attributes: attributes(spec),
        instances,
        tags: shared::network_load_balancer_tags(&config.cluster, spec),
        node_access,
        allow_recreation: spec.allow_recreation || config.allow_recreation,
        release_on_deletion: spec.release_on_deletion,
        name_chosen,
        subnets,
        name,
    })
}

/// EIP allocations and private addresses: exactly one per subnet, when given.
fn check_addresses(spec: &ServiceSpec, subnets: &[String]) -> Result<(), Error> {
    let mut problems = Vec::new();
    for (key, values) in [
        (Key::EipAllocations, &spec.eip_allocations),
        (Key::PrivateIpv4Addresses, &spec.private_ipv4_addresses),
    ] {
        if !values.is_empty() && values.len() != subnets.len() {
            problems.push(Problem {
                field: key.name().to_owned(),
                value: values.join(","),
                accepted: format!(
                    "exactly one per subnet: {} given for {} subnets ({})",
                    values.len(),
                    subnets.len(),
                    subnets.join(",")
                ),
            });
        }
    }
    Ok(InvalidService::check(spec, problems)?)
}

/// The NLB's security groups by `NLBSecurityGroupMode` and the `security-groups` annotation.
fn security(
    spec: &ServiceSpec,
    config: &LoadBalancerConfig,
    listeners: &[Listener],
    managed_group_name: &str,
) -> Security {
    match (&spec.security_groups, config.nlb_managed_security_groups) {
        (_, false) => Security::Unmanaged,
        (Some(given), true) => Security::Given(given.clone()),
        (None, true) => {
            // A dualstack NLB also takes IPv6 clients: the default "everyone" then includes `::/0` (ranges the
            // user gave are taken as they are).
            let mut ranges = spec.source_ranges.clone();
            if spec.ip_address_type == IpAddressType::Dualstack && spec.source_ranges_defaulted {
                ranges.push("::/0".to_owned());
            }
            let mut ingress = BTreeSet::new();
            for l in listeners {
                let protocols: &[&str] = match l.protocol.as_str() {
                    "UDP" => &["udp"],
                    "TCP_UDP" => &["tcp", "udp"],
                    _ => &["tcp"],
                };
                for protocol in protocols {
                    let lists = &spec.prefix_lists;
                    ingress.extend(shared::load_balancer_ingress(protocol, &[l.port], &ranges, lists));
                }
            }
            Security::Managed(ManagedGroup {
                name: managed_group_name.to_owned(),
                description: MANAGED_GROUP_DESCRIPTION.to_owned(),
                tags: shared::security_group_tags(&config.cluster, spec),
                ingress,
            })
        }
    }
}

/// The load balancer attributes owned: cross zone and access logs always, the annotation's while given.
fn attributes(spec: &ServiceSpec) -> BTreeMap<String, String> {
    let mut attributes = BTreeMap::from([
        (CROSS_ZONE_ATTRIBUTE.to_owned(), spec.cross_zone.to_string()),
        (
            ACCESS_LOGS_ATTRIBUTE.to_owned(),
            spec.access_log.enabled.to_string(),
        ),
    ]);
    if spec.access_log.enabled {
        attributes.insert(
            ACCESS_LOGS_BUCKET_ATTRIBUTE.to_owned(),
            spec.access_log.bucket.clone().unwrap_or_default(),
        );
        attributes.insert(
            ACCESS_LOGS_PREFIX_ATTRIBUTE.to_owned(),
            spec.access_log.prefix.clone().unwrap_or_default(),
        );
    }
    // `aws-load-balancer-attributes`: agreeing with the two above (checked when parsing), owned while given.
    attributes.extend(spec.load_balancer_attributes.clone());
    attributes
}

// === impl HealthCheck ===

impl HealthCheck {
    /// TCP on the traffic port, 30/10/3/3: the default without kube-proxy's check.
    fn tcp_traffic_port() -> Self {
        HealthCheck {
            protocol: "TCP".to_owned(),
            port: "traffic-port".to_owned(),
            path: None,
            interval: 30,
            timeout: 10,
            healthy_threshold: 3,
            unhealthy_threshold: 3,
            success_codes: None,
        }
    }

    pub(crate) fn is_http(&self) -> bool {
        self.protocol == "HTTP" || self.protocol == "HTTPS"
    }

    /// Whether `observed` has every owned field equal (the path only for HTTP and HTTPS checks).
    pub fn matches(&self, observed: &TargetGroupHealthCheck) -> bool {
        observed
            .protocol
            .as_deref()
            .is_some_and(|p| p.eq_ignore_ascii_case(&self.protocol))
            && observed.port.as_deref() == Some(self.port.as_str())
            && (!self.is_http() || observed.path == self.path)
            && observed.interval_seconds == Some(self.interval)
            && observed.timeout_seconds == Some(self.timeout)
            && observed.healthy_threshold == Some(self.healthy_threshold)
            && observed.unhealthy_threshold == Some(self.unhealthy_threshold)
            && (self.success_codes.is_none() || observed.matcher == self.success_codes)
    }

    pub(crate) fn to_aws(&self) -> TargetGroupHealthCheck {
        TargetGroupHealthCheck {
            protocol: Some(self.protocol.clone()),
            port: Some(self.port.clone()),
            path: self.path.clone().filter(|_| self.is_http()),
            interval_seconds: Some(self.interval),
            timeout_seconds: Some(self.timeout),
            healthy_threshold: Some(self.healthy_threshold),
            unhealthy_threshold: Some(self.unhealthy_threshold),
            matcher: self.success_codes.clone(),
        }
    }
}

// === impl Desired ===

impl Desired {
    /// The wanted target groups (one per listener).
    pub fn target_groups(&self) -> impl Iterator<Item = &TargetGroupSpec> {
        self.listeners.iter().map(|l| &l.target_group)
    }

    /// This desired state with the target groups taken under their successor names (upstream name -> name used,
    /// see [`successor_target_group_name`](super::successor_target_group_name)) renamed; borrowed when none is.
    pub fn named<'a>(&'a self, renamed: &BTreeMap<String, String>) -> std::borrow::Cow<'a, Self> {
        if renamed.is_empty() {
            return std::borrow::Cow::Borrowed(self);
        }
        let mut desired = self.clone();
        for listener in &mut desired.listeners {
            if let Some(name) = renamed.get(&listener.target_group.name) {
                listener.target_group.name.clone_from(name);
            }
        }
        std::borrow::Cow::Owned(desired)
    }

    pub(crate) fn wants_groups(&self) -> bool {
        !matches!(self.security, Security::Unmanaged)
    }

    /// The group the nodes' rules reference (`None`: CIDR rules): the NLB's own when it has groups, the first
    /// given one, or the managed one. `lb` is the NLB found; `managed` the managed group, when `groups_read`
    /// (a full observation looked it up; a host update did not, and takes the NLB's current group, as no group
    /// changes then). An NLB created without groups never gets any, so its nodes keep CIDR rules.
    pub fn node_rule_source(
        &self,
        lb: Option<&LoadBalancerV2>,
        managed: Option<&SecurityGroupId>,
        groups_read: bool,
    ) -> Option<String> {
        if lb.is_some_and(|lb| lb.security_groups.is_empty()) {
            return None;
        }
        match &self.security {
            Security::Unmanaged => None,
            Security::Given(given) => given.first().cloned(),
            Security::Managed(_) => match (managed, lb) {
                (Some(group), _) => Some(group.to_string()),
                (None, _) if groups_read => Some(MANAGED_GROUP_SOURCE.to_owned()),
                (None, Some(lb)) => lb.security_groups.first().map(ToString::to_string),
                (None, None) => None,
            },
        }
    }
}
