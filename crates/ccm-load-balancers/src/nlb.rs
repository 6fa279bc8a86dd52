//! Network Load Balancers with instance targets: the desired model ([`build`], pure), the observed state
//! ([`observe`], reads only), the ordered plan ([`plan`], pure) and [`apply`], the only function here that
//! changes AWS; deletion through [`observe_delete`], [`plan_delete`] and the same [`apply`].
//!
//! Crash safety: every name is deterministic — the load balancer `a<uid>`, each target group
//! [`target_group_name`] (from the Service UID, port, node port and target protocol), the managed security group
//! [`managed_group_name`] — and every lookup goes by that name, so a run interrupted between any two calls is
//! completed by the next one: a target group created just before a crash is adopted by name, not leaked; a load
//! balancer deleted for recreation is created again by the next run.
//!
//! Where the Go version is wrong this one is not: listeners are keyed by port, so a protocol change (TCP to TLS)
//! modifies or replaces the listener instead of failing with `DuplicateListener`; the health check timeout is
//! applied and every field is compared, so unchanged checks make no call and an unhealthy-threshold change is
//! not missed; tags are reconciled; a scheme, subnet, address or security group change that needs a new NLB
//! recreates it (reported as a Warning Event); a `failed` NLB is an error.
//!
//! [`node_rules`]: the rules an NLB needs on the nodes' security groups.

pub mod node_rules;

use std::collections::{BTreeMap, BTreeSet};

use ccm_aws_api::{
    Ec2, Elbv2, Filter, InstanceId, SecurityGroupId, SubnetId, Tags,
    ec2::{IpPermission, SecurityGroup, SourceGroup},
    elbv2::{
        ListenerChange, ListenerV2, LoadBalancerV2, NewListener, NewNetworkLoadBalancer, NewTargetGroup,
        SubnetMapping, Target, TargetGroup, TargetGroupHealthCheck, TargetHealth,
    },
};
use k8s_openapi::api::core::v1::Node;
use serde::Serialize;
use sha1::Sha1;
use sha2::{Digest, Sha256};

use crate::{
    Error, InvalidService, LoadBalancerConfig,
    annotations::{Key, Problem},
    classic::{GroupRef, ManagedGroup},
    shared::{self, HealthProbeMode, Rule},
    spec::{IpAddressType, PortSpec, ServiceSpec},
};

use node_rules::{NodeAccess, RuleChange};

/// The description of the managed security group (as upstream).
pub const MANAGED_GROUP_DESCRIPTION: &str = "[k8s] Managed SecurityGroup for LoadBalancer";
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
}

/// A target group: one per listener.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub struct TargetGroupSpec {
    /// The deterministic name ([`target_group_name`]).
    pub name: String,
    /// `TCP`, `UDP`, `TCP_UDP`, `TLS`.
    pub protocol: String,
    /// The node port.
    pub port: i32,
}

/// A listener.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub struct Listener {
    /// The front-end port (the key: one listener per port).
    pub port: i32,
    /// `TCP`, `UDP`, `TCP_UDP`, `TLS`.
    pub protocol: String,
    /// The certificate ARN of TLS listeners.
    pub certificate: Option<String>,
    /// The TLS policy (`None`: AWS's default, never changed).
    pub ssl_policy: Option<String>,
    /// The target group it forwards to.
    pub target_group: TargetGroupSpec,
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
}

/// One step of a plan. Plans are ordered: security group, recreation, target groups and targets, the load
/// balancer, tags and attributes, listeners, unwanted target groups, a released managed group, node rules.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "change", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Change {
    /// Create the managed group.
    CreateSecurityGroup {
        /// Name.
        name: String,
        /// Description.
        description: String,
        /// Tags.
        tags: Tags,
    },
    /// Add missing tags to the managed group.
    TagSecurityGroup {
        /// Tags to add.
        tags: Tags,
    },
    /// Add CIDR rules to the managed group.
    AuthorizeIngress {
        /// The rules.
        rules: Vec<Rule>,
    },
    /// Remove CIDR rules from the managed group.
    RevokeIngress {
        /// The rules.
        rules: Vec<Rule>,
    },
    /// Delete the load balancer (deletion, or before creating it again).
    DeleteLoadBalancer {
        /// Its name.
        name: String,
        /// Its ARN.
        arn: String,
        /// Why it is recreated (`None`: deleted with the Service).
        recreate_because: Option<String>,
    },
    /// Create a target group.
    CreateTargetGroup {
        /// The group.
        target_group: TargetGroupSpec,
        /// Its health check.
        health_check: HealthCheck,
        /// Tags.
        tags: Tags,
    },
    /// Change a target group's health check.
    ModifyTargetGroup {
        /// The group's name.
        name: String,
        /// The health check.
        health_check: HealthCheck,
    },
    /// Set target group attributes.
    ModifyTargetGroupAttributes {
        /// The group's name.
        name: String,
        /// The attributes to set.
        attributes: BTreeMap<String, String>,
    },
    /// Register instances on the node port.
    RegisterTargets {
        /// The group's name.
        name: String,
        /// The node port.
        port: i32,
        /// The instances.
        instances: Vec<String>,
    },
    /// Deregister targets.
    DeregisterTargets {
        /// The group's name.
        name: String,
        /// (instance, port) pairs.
        targets: Vec<(String, i32)>,
    },
    /// Create the load balancer.
    CreateLoadBalancer {
        /// Name.
        name: String,
        /// Scheme.
        internal: bool,
        /// Subnets with their optional EIP or private address.
        subnets: Vec<(String, Option<String>, Option<String>)>,
        /// Groups (`None`: an NLB without groups).
        security_groups: Option<Vec<GroupRef>>,
        /// `ipv4` or `dualstack`.
        ip_address_type: IpAddressType,
        /// Tags.
        tags: Tags,
    },
    /// Add subnets (in new Availability Zones) to the load balancer in place: the whole list wanted.
    SetSubnets {
        /// The subnets, the current ones included.
        subnets: Vec<String>,
    },
    /// Change the load balancer's IP address type in place.
    SetIpAddressType {
        /// The type wanted.
        ip_address_type: IpAddressType,
    },
    /// Replace the load balancer's groups.
    SetSecurityGroups {
        /// The groups.
        groups: Vec<GroupRef>,
    },
    /// Set load balancer attributes.
    ModifyAttributes {
        /// The attributes to set.
        attributes: BTreeMap<String, String>,
    },
    /// Add or overwrite tags of existing resources (load balancer, target groups, listeners).
    AddTags {
        /// The resources' ARNs.
        arns: Vec<String>,
        /// The tags.
        tags: Tags,
    },
    /// Delete a listener.
    DeleteListener {
        /// Its port.
        port: i32,
        /// Its ARN.
        arn: String,
    },
    /// Create a listener.
    CreateListener {
        /// The listener.
        listener: Listener,
        /// Tags.
        tags: Tags,
    },
    /// Change a listener in place.
    ModifyListener {
        /// Its ARN.
        arn: String,
        /// Its port.
        port: i32,
        /// A new protocol.
        protocol: Option<String>,
        /// A new certificate.
        certificate: Option<String>,
        /// A new TLS policy.
        ssl_policy: Option<String>,
        /// A new target group (by name).
        target_group: Option<String>,
    },
    /// Delete a target group no longer wanted.
    DeleteTargetGroup {
        /// Its name.
        name: String,
        /// Its ARN.
        arn: String,
    },
    /// Remove a rule of another group that references the managed group being released.
    RevokeReference {
        /// The group holding the rule.
        group: String,
        /// The permission (with the managed group as source).
        permission: ReferencePermission,
    },
    /// Delete the managed group (owned by this cluster only).
    DeleteSecurityGroup {
        /// The group.
        group: String,
    },
    /// A change to the nodes' groups.
    NodeRules(RuleChange),
}

/// A permission referencing a group, for [`Change::RevokeReference`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ReferencePermission {
    /// The protocol (`-1` for all).
    pub protocol: String,
    /// First port.
    pub from_port: Option<i32>,
    /// Last port.
    pub to_port: Option<i32>,
    /// The referenced group.
    pub source: String,
}

/// A target group as observed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObservedTargetGroup {
    /// The group.
    pub group: TargetGroup,
    /// Its attributes (read only when some are owned).
    pub attributes: BTreeMap<String, String>,
    /// Its targets (read only for wanted groups).
    pub targets: Vec<TargetHealth>,
}

/// The AWS state a plan is made against.
#[derive(Debug, Clone, Default)]
pub struct Observed {
    /// The load balancer, if it exists.
    pub load_balancer: Option<LoadBalancerV2>,
    /// Its attributes.
    pub attributes: BTreeMap<String, String>,
    /// Its listeners.
    pub listeners: Vec<ListenerV2>,
    /// Its target groups and the wanted ones found by name.
    pub target_groups: Vec<ObservedTargetGroup>,
    /// Tags by ARN (load balancer, target groups, listeners).
    pub tags: BTreeMap<String, Tags>,
    /// The managed group, if it exists.
    pub managed_group: Option<SecurityGroup>,
    /// When the managed group is being released: the permissions of other groups referencing it.
    pub references: Vec<(SecurityGroupId, ReferencePermission)>,
    /// The nodes' groups (`None`: node rules not managed or not observed).
    pub node_rules: Option<node_rules::Observed>,
}

/// What [`observe`] reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Everything a full ensure needs.
    Full,
    /// Only what the targets and node rules need (`UpdateLoadBalancer`).
    Hosts,
}

/// What [`apply`] reports.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Applied {
    /// The load balancer created by this run.
    pub created: Option<LoadBalancerV2>,
    /// Mutating calls made (one per change; node rule changes count once each).
    pub mutations: usize,
}

fn sha256_hex(input: &str) -> String {
    Sha256::digest(input.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn alnum_prefix(s: &str, n: usize) -> String {
    s.chars().filter(char::is_ascii_alphanumeric).take(n).collect()
}

/// `k8s-<namespace:8>-<name:8>-` (non-alphanumeric characters dropped): how upstream begins the names of a
/// Service's target groups and managed group.
fn name_prefix(namespace: &str, name: &str) -> String {
    format!("k8s-{}-{}-", alnum_prefix(namespace, 8), alnum_prefix(name, 8))
}

/// The target group name of one listener, exactly as upstream names it, so that the groups of NLBs made by the Go
/// controller are found (and kept) after a migration: `k8s-<namespace:8>-<name:8>-<hash:10>` (non-alphanumeric
/// characters dropped), the hash being the first 10 hex digits of sha1 over the cluster ID, namespace, name,
/// port, node port, target protocol, target type (`instance`), health check protocol and interval. A change of
/// any of those needs a new group (AWS cannot change the first ones in place; upstream names the last two too);
/// every other health check field is modified in place.
pub fn target_group_name(
    cluster_id: &str,
    spec: &ServiceSpec,
    port: i32,
    node_port: i32,
    protocol: &str,
    health_check: &HealthCheck,
) -> String {
    let mut hasher = Sha1::new();
    for part in [
        cluster_id,
        &spec.namespace,
        &spec.name,
        &port.to_string(),
        &node_port.to_string(),
        protocol,
        "instance",
        &health_check.protocol,
        &health_check.interval.to_string(),
    ] {
        hasher.update(part.as_bytes());
    }
    let hash: String = hasher.finalize().iter().map(|b| format!("{b:02x}")).collect();
    format!("{}{}", name_prefix(&spec.namespace, &spec.name), &hash[..10])
}

/// The managed security group's name, as upstream: `k8s-<namespace:8>-<name:8>-<hash:10>`, the hash being
/// sha256 hex of `<cluster name><name><namespace><uid>` (`cluster_name` is the controller's `--cluster-name`).
pub fn managed_group_name(cluster_name: &str, namespace: &str, name: &str, uid: &str) -> String {
    let hash = sha256_hex(&format!("{cluster_name}{name}{namespace}{uid}"));
    format!("{}{}", name_prefix(namespace, name), &hash[..10])
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
    let mut ssl_policy = None;
    let mut target_protocol = protocol;
    if protocol == "TCP"
        && let Some(cert) = &spec.ssl_cert
        && spec.is_ssl_port(first)
    {
        protocol = "TLS";
        certificate = Some(cert.clone());
        ssl_policy.clone_from(&spec.ssl_negotiation_policy);
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
        ssl_policy,
        target_group: TargetGroupSpec {
            name: target_group_name(
                cluster_id,
                spec,
                first.port,
                first.node_port,
                target_protocol,
                health_check,
            ),
            protocol: target_protocol.to_owned(),
            port: first.node_port,
        },
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
        (true, Some(port), _) => HealthCheck {
            protocol: "HTTP".to_owned(),
            port: port.to_string(),
            path: Some("/healthz".to_owned()),
            interval: 10,
            timeout: 10,
            healthy_threshold: 2,
            unhealthy_threshold: 2,
        },
        (false, _, HealthProbeMode::Shared { port, path }) => HealthCheck {
            protocol: "HTTP".to_owned(),
            port: port.to_string(),
            path: Some(path.clone()),
            interval: 30,
            timeout: 10,
            healthy_threshold: 3,
            unhealthy_threshold: 3,
        },
        _ => HealthCheck {
            protocol: "TCP".to_owned(),
            port: "traffic-port".to_owned(),
            path: None,
            interval: 30,
            timeout: 10,
            healthy_threshold: 3,
            unhealthy_threshold: 3,
        },
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
    hc
}

/// The desired NLB (pure). `subnets` come from [`shared::resolve_subnets`]; `cluster_name` is the controller's
/// `--cluster-name` (it names the managed security group). Every problem is collected.
pub fn build(
    spec: &ServiceSpec,
    nodes: &[&Node],
    config: &LoadBalancerConfig,
    cluster_name: &str,
    subnets: &[SubnetId],
) -> Result<Desired, Error> {
    let name = shared::load_balancer_name(&spec.uid)?;
    let mut subnets: Vec<String> = subnets.iter().map(ToString::to_string).collect();
    subnets.sort();
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
    if !problems.is_empty() {
        return Err(InvalidService {
            namespace: spec.namespace.clone(),
            name: spec.name.clone(),
            problems,
        }
        .into());
    }

    let listeners = listeners(spec, config);
    let health_check = health_check(spec, config);

    let security = match (&spec.security_groups, config.nlb_managed_security_groups) {
        (_, false) => Security::Unmanaged,
        (Some(given), true) => Security::Given(given.clone()),
        (None, true) => {
            // A dualstack NLB also takes IPv6 clients: the default "everyone" then includes `::/0` (ranges the
            // user gave are taken as they are).
            let mut source_ranges = spec.source_ranges.clone();
            if spec.ip_address_type == IpAddressType::Dualstack && spec.source_ranges_defaulted {
                source_ranges.push("::/0".to_owned());
            }
            let mut ingress = BTreeSet::new();
            for l in &listeners {
                let protocols: &[&str] = match l.protocol.as_str() {
                    "UDP" => &["udp"],
                    "TCP_UDP" => &["tcp", "udp"],
                    _ => &["tcp"],
                };
                for protocol in protocols {
                    ingress.extend(shared::load_balancer_ingress(protocol, &[l.port], &source_ranges));
                }
            }
            Security::Managed(ManagedGroup {
                name: managed_group_name(cluster_name, &spec.namespace, &spec.name, &spec.uid),
                description: MANAGED_GROUP_DESCRIPTION.to_owned(),
                tags: shared::security_group_tags(&config.cluster, spec),
                ingress,
            })
        }
    };

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
    let instances: Vec<String> = shared::target_instances(nodes, &spec.target_node_labels)
        .into_iter()
        .map(InstanceId::into_string)
        .collect();
    let node_access = config.manage_node_security_groups.then(|| {
        let mut client_ports = BTreeSet::new();
        let mut health_ports = BTreeSet::new();
        for l in &listeners {
            let node_port = l.target_group.port;
            if matches!(l.protocol.as_str(), "UDP" | "TCP_UDP") {
                client_ports.insert(("udp".to_owned(), node_port));
            }
            if l.protocol != "UDP" {
                client_ports.insert(("tcp".to_owned(), node_port));
            }
            match health_check.port.parse::<i32>() {
                Ok(p) => health_ports.insert(p),
                Err(_) => health_ports.insert(node_port),
            };
        }
        NodeAccess {
            load_balancer: name.clone(),
            client_ports,
            client_cidrs: spec.source_ranges.clone(),
            health_ports,
            instances: instances.clone(),
        }
    });
    Ok(Desired {
        service: spec.key(),
        internal: spec.internal,
        subnets_pinned: spec.subnets.is_some(),
        eip_allocations: spec.eip_allocations.clone(),
        private_ipv4_addresses: spec.private_ipv4_addresses.clone(),
        ip_address_type: spec.ip_address_type,
        security,
        managed_group_name: managed_group_name(cluster_name, &spec.namespace, &spec.name, &spec.uid),
        listeners,
        health_check,
        target_group_attributes: spec.target_group_attributes.clone(),
        attributes,
        instances,
        tags: shared::load_balancer_tags(&config.cluster, spec),
        node_access,
        subnets,
        name,
    })
}

// === impl HealthCheck ===

impl HealthCheck {
    fn is_http(&self) -> bool {
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
    }

    fn to_aws(&self) -> TargetGroupHealthCheck {
        TargetGroupHealthCheck {
            protocol: Some(self.protocol.clone()),
            port: Some(self.port.clone()),
            path: self.path.clone().filter(|_| self.is_http()),
            interval_seconds: Some(self.interval),
            timeout_seconds: Some(self.timeout),
            healthy_threshold: Some(self.healthy_threshold),
            unhealthy_threshold: Some(self.unhealthy_threshold),
        }
    }
}

// === impl Desired ===

impl Desired {
    /// The wanted target groups (one per listener).
    pub fn target_groups(&self) -> impl Iterator<Item = &TargetGroupSpec> {
        self.listeners.iter().map(|l| &l.target_group)
    }

    fn wants_groups(&self) -> bool {
        !matches!(self.security, Security::Unmanaged)
    }
}

/// The permissions of cluster-tagged groups that reference `source`.
async fn references<E: Ec2>(
    ec2: &E,
    config: &LoadBalancerConfig,
    source: &SecurityGroupId,
) -> Result<Vec<(SecurityGroupId, ReferencePermission)>, Error> {
    let groups = ec2
        .security_groups(&[Filter::new("ip-permission.group-id", [source.as_str()])])
        .await
        .map_err(Error::aws("reading the rules that reference the managed group"))?;
    let mut out = Vec::new();
    for g in groups
        .iter()
        .filter(|g| g.id != *source && config.cluster.is_tagged(&g.tags))
    {
        for p in &g.ingress {
            if p.source_groups.iter().any(|s| s.group_id == *source) {
                out.push((
                    g.id.clone(),
                    ReferencePermission {
                        protocol: p.protocol.clone(),
                        from_port: p.from_port,
                        to_port: p.to_port,
                        source: source.to_string(),
                    },
                ));
            }
        }
    }
    Ok(out)
}

async fn target_groups_of<V: Elbv2>(elbv2: &V, lb: &LoadBalancerV2) -> Result<Vec<TargetGroup>, Error> {
    match elbv2.target_groups(&lb.arn).await {
        Ok(groups) => Ok(groups),
        // No target group at all (moto answers TargetGroupNotFound).
        Err(e) if e.is_not_found() => Ok(Vec::new()),
        Err(e) => Err(Error::aws("reading the NLB's target groups")(e)),
    }
}

/// Reads what the plan needs: the NLB, its attributes, listeners and target groups (the wanted ones not attached
/// to it are looked up by name, so a group created just before a crash is adopted), the wanted groups' targets
/// (and attributes when some are owned), every tag in one call, the managed group (and, when it is being
/// released, the rules referencing it) and the nodes' groups. A steady NLB costs one read per listed item.
pub async fn observe<E: Ec2, V: Elbv2>(
    ec2: &E,
    elbv2: &V,
    config: &LoadBalancerConfig,
    desired: &Desired,
    scope: Scope,
) -> Result<Observed, Error> {
    let full = scope == Scope::Full;
    let context = "reading the NLB";
    let load_balancer = elbv2
        .load_balancer(&desired.name)
        .await
        .map_err(Error::aws(context))?
        .filter(|lb| lb.lb_type == "network");
    let mut observed = Observed::default();
    let mut groups = Vec::new();
    if let Some(lb) = &load_balancer {
        if lb.state == "failed" {
            return Err(Error::LoadBalancerFailed(desired.name.clone()));
        }
        groups = target_groups_of(elbv2, lb).await?;
        if full {
            let (attributes, listeners) =
                tokio::join!(elbv2.load_balancer_attributes(&lb.arn), elbv2.listeners(&lb.arn));
            observed.attributes = attributes.map_err(Error::aws(context))?;
            observed.listeners = listeners.map_err(Error::aws(context))?;
        }
    }
    for wanted in desired.target_groups() {
        // (Never in steady state: the wanted groups are attached. Moto does not attach a group that a listener
        // was moved to, so the updates need the lookup too.)
        if !groups.iter().any(|g| g.name == wanted.name)
            && let Some(g) = elbv2
                .target_group(&wanted.name)
                .await
                .map_err(Error::aws(context))?
        {
            groups.push(g);
        }
    }
    let wanted: BTreeSet<&str> = desired.target_groups().map(|g| g.name.as_str()).collect();
    for group in groups {
        let mut o = ObservedTargetGroup {
            group,
            attributes: BTreeMap::new(),
            targets: Vec::new(),
        };
        if wanted.contains(o.group.name.as_str()) {
            o.targets = elbv2
                .target_health(&o.group.arn)
                .await
                .map_err(Error::aws("reading targets"))?;
            if full && !desired.target_group_attributes.is_empty() {
                o.attributes = elbv2
                    .target_group_attributes(&o.group.arn)
                    .await
                    .map_err(Error::aws("reading target group attributes"))?;
            }
        }
        observed.target_groups.push(o);
    }
    // Tags: needed for the adoption check of groups found by name and for deleting unwanted ones.
    let arns: Vec<String> = load_balancer
        .iter()
        .map(|lb| lb.arn.clone())
        .filter(|_| full)
        .chain(observed.target_groups.iter().map(|g| g.group.arn.clone()))
        .chain(observed.listeners.iter().map(|l| l.arn.clone()))
        .collect();
    if full && !arns.is_empty() {
        observed.tags = elbv2.tags(&arns).await.map_err(Error::aws(context))?;
    }
    // Another cluster's (or, unless adoption is configured, an untagged) NLB under this name is never touched.
    if full && let Some(lb) = &load_balancer {
        let tags = observed.tags.get(&lb.arn).cloned().unwrap_or_default();
        crate::ownership::check(config, &lb.name, &tags)?;
    }
    for g in &observed.target_groups {
        let tags = observed.tags.get(&g.group.arn);
        let attached = load_balancer
            .as_ref()
            .is_some_and(|lb| g.group.load_balancer_arns.contains(&lb.arn));
        if !attached && let Some(tags) = tags {
            config.cluster.ensure_owned(&g.group.name, tags)?;
        }
    }
    if full {
        if desired.wants_groups() {
            observed.managed_group = shared::find_group(ec2, config, &desired.managed_group_name).await?;
        }
        if let (Security::Given(given), Some(group)) = (&desired.security, &observed.managed_group)
            && !given.iter().any(|g| g == group.id.as_str())
            && config.cluster.is_owned(&group.tags)
        {
            observed.references = references(ec2, config, &group.id).await?;
        }
    }
    if let Some(access) = &desired.node_access {
        // The subnets the NLB has after this run: pinned ones are made so (in place or by recreation).
        let subnets: Vec<SubnetId> = match &load_balancer {
            Some(lb) if !desired.subnets_pinned => lb
                .availability_zones
                .iter()
                .filter_map(|z| z.subnet_id.clone())
                .collect(),
            _ => desired.subnets.iter().map(|s| SubnetId::new(s.clone())).collect(),
        };
        observed.node_rules = Some(node_rules::observe(ec2, config, access, &subnets).await?);
    }
    observed.load_balancer = load_balancer;
    Ok(observed)
}

/// Why an existing NLB must be replaced (empty: it can be kept): what cannot change on a live NLB.
pub fn recreation_reasons(desired: &Desired, lb: &LoadBalancerV2) -> Vec<String> {
    let mut reasons = Vec::new();
    if lb.internal != desired.internal {
        reasons.push(format!(
            "scheme {} -> {}",
            shared::scheme(lb.internal),
            shared::scheme(desired.internal)
        ));
    }
    let current: BTreeSet<String> = lb
        .availability_zones
        .iter()
        .filter_map(|z| z.subnet_id.as_ref().map(ToString::to_string))
        .collect();
    let wanted: BTreeSet<String> = desired.subnets.iter().cloned().collect();
    if desired.subnets_pinned && current != wanted && !subnets_added_in_place(desired, lb) {
        reasons.push(format!(
            "subnets {} -> {}",
            current.into_iter().collect::<Vec<_>>().join(","),
            desired.subnets.join(",")
        ));
    }
    let addresses = || lb.availability_zones.iter().flat_map(|z| z.addresses.iter());
    let eips: BTreeSet<String> = addresses().filter_map(|a| a.allocation_id.clone()).collect();
    if !desired.eip_allocations.is_empty()
        && eips != desired.eip_allocations.iter().cloned().collect::<BTreeSet<_>>()
    {
        reasons.push(format!(
            "EIP allocations {} -> {}",
            eips.into_iter().collect::<Vec<_>>().join(","),
            desired.eip_allocations.join(",")
        ));
    }
    let ips: BTreeSet<String> = addresses()
        .filter_map(|a| a.private_ipv4_address.clone())
        .collect();
    if !desired.private_ipv4_addresses.is_empty()
        && ips
            != desired
                .private_ipv4_addresses
                .iter()
                .cloned()
                .collect::<BTreeSet<_>>()
    {
        reasons.push(format!(
            "private IPv4 addresses {} -> {}",
            ips.into_iter().collect::<Vec<_>>().join(","),
            desired.private_ipv4_addresses.join(",")
        ));
    }
    if let Security::Given(groups) = &desired.security
        && lb.security_groups.is_empty()
    {
        reasons.push(format!(
            "security groups {} requested on an NLB created without security groups (AWS cannot add them later)",
            groups.join(",")
        ));
    }
    reasons
}

/// Whether the NLB's pinned subnets change only by subnets added (in zones the NLB does not use yet: one subnet
/// per zone is AWS's rule and its error names the zone otherwise), which `SetSubnets` does in place, keeping the
/// DNS name. Removing or swapping a subnet, or adding one where EIPs or private addresses are pinned (their
/// index mapping onto the sorted subnets shifts), needs a new NLB.
fn subnets_added_in_place(desired: &Desired, lb: &LoadBalancerV2) -> bool {
    let current: BTreeSet<&str> = lb
        .availability_zones
        .iter()
        .filter_map(|z| z.subnet_id.as_ref().map(SubnetId::as_str))
        .collect();
    let wanted: BTreeSet<&str> = desired.subnets.iter().map(String::as_str).collect();
    desired.subnets_pinned
        && desired.eip_allocations.is_empty()
        && desired.private_ipv4_addresses.is_empty()
        && !current.is_empty()
        && current.is_subset(&wanted)
        && current != wanted
}

/// The attributes of a fresh NLB, also assumed for keys AWS does not report.
fn default_attributes() -> BTreeMap<String, String> {
    BTreeMap::from([
        (CROSS_ZONE_ATTRIBUTE.to_owned(), "false".to_owned()),
        (ACCESS_LOGS_ATTRIBUTE.to_owned(), "false".to_owned()),
        (ACCESS_LOGS_PREFIX_ATTRIBUTE.to_owned(), String::new()),
    ])
}

fn add_tags_if_missing(arns: &mut Vec<String>, arn: &str, current: Option<&Tags>, desired: &Tags) {
    let empty = Tags::new();
    if !ccm_tagging::additions(current.unwrap_or(&empty), desired).is_empty() {
        arns.push(arn.to_owned());
    }
}

/// The ordered plan from `observed` to `desired` (pure). Only owned fields are compared: a steady Service plans
/// nothing.
pub fn plan(desired: &Desired, observed: &Observed) -> Vec<Change> {
    let mut changes = Vec::new();
    let mut lb = observed.load_balancer.as_ref();

    // 0. A load balancer that cannot become what is wanted is deleted first (and created again below).
    if let Some(current) = lb {
        let reasons = recreation_reasons(desired, current);
        if !reasons.is_empty() {
            changes.push(Change::DeleteLoadBalancer {
                name: desired.name.clone(),
                arn: current.arn.clone(),
                recreate_because: Some(reasons.join("; ")),
            });
            lb = None;
        }
    }
    // An NLB created without groups can never have some: with managed mode it stays without (as upstream).
    let groupless = lb.is_some_and(|l| l.security_groups.is_empty());

    // 1. The managed group and its rules.
    if let Security::Managed(managed) = &desired.security
        && !groupless
    {
        let diff = managed.diff(observed.managed_group.as_ref());
        if diff.create {
            changes.push(Change::CreateSecurityGroup {
                name: managed.name.clone(),
                description: managed.description.clone(),
                tags: managed.tags.clone(),
            });
        }
        if !diff.missing_tags.is_empty() {
            changes.push(Change::TagSecurityGroup {
                tags: diff.missing_tags,
            });
        }
        if !diff.authorize.is_empty() {
            changes.push(Change::AuthorizeIngress {
                rules: diff.authorize,
            });
        }
        if !diff.revoke.is_empty() {
            changes.push(Change::RevokeIngress { rules: diff.revoke });
        }
    }

    // 2. Target groups, their health checks, attributes and targets (before the listeners that use them).
    let observed_group = |name: &str| observed.target_groups.iter().find(|g| g.group.name == name);
    let mut tag_arns = Vec::new();
    let mut seen = BTreeSet::new();
    for tg in desired.target_groups() {
        if !seen.insert(tg.name.as_str()) {
            continue;
        }
        match observed_group(&tg.name) {
            None => {
                changes.push(Change::CreateTargetGroup {
                    target_group: tg.clone(),
                    health_check: desired.health_check.clone(),
                    tags: desired.tags.clone(),
                });
                if !desired.target_group_attributes.is_empty() {
                    changes.push(Change::ModifyTargetGroupAttributes {
                        name: tg.name.clone(),
                        attributes: desired.target_group_attributes.clone(),
                    });
                }
                if !desired.instances.is_empty() {
                    changes.push(Change::RegisterTargets {
                        name: tg.name.clone(),
                        port: tg.port,
                        instances: desired.instances.clone(),
                    });
                }
            }
            Some(o) => {
                if !desired.health_check.matches(&o.group.health_check) {
                    changes.push(Change::ModifyTargetGroup {
                        name: tg.name.clone(),
                        health_check: desired.health_check.clone(),
                    });
                }
                let attributes: BTreeMap<String, String> = desired
                    .target_group_attributes
                    .iter()
                    .filter(|(k, v)| o.attributes.get(*k) != Some(*v))
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                if !attributes.is_empty() {
                    changes.push(Change::ModifyTargetGroupAttributes {
                        name: tg.name.clone(),
                        attributes,
                    });
                }
                changes.extend(target_changes(desired, tg, &o.targets));
                if !observed.tags.is_empty() {
                    add_tags_if_missing(
                        &mut tag_arns,
                        &o.group.arn,
                        observed.tags.get(&o.group.arn),
                        &desired.tags,
                    );
                }
            }
        }
    }

    // 3. The load balancer, its groups, tags and attributes.
    let groups_wanted: Option<Vec<GroupRef>> = match &desired.security {
        Security::Unmanaged => None,
        Security::Managed(_) => Some(vec![GroupRef::Managed]),
        Security::Given(ids) => Some(ids.iter().cloned().map(GroupRef::Id).collect()),
    };
    let fresh_attributes = default_attributes();
    let current_attributes = match lb {
        None => {
            let addresses = |i: usize, list: &[String]| list.get(i).cloned();
            changes.push(Change::CreateLoadBalancer {
                name: desired.name.clone(),
                internal: desired.internal,
                subnets: desired
                    .subnets
                    .iter()
                    .enumerate()
                    .map(|(i, s)| {
                        (
                            s.clone(),
                            addresses(i, &desired.eip_allocations),
                            addresses(i, &desired.private_ipv4_addresses),
                        )
                    })
                    .collect(),
                security_groups: groups_wanted,
                ip_address_type: desired.ip_address_type,
                tags: desired.tags.clone(),
            });
            &fresh_attributes
        }
        Some(current) => {
            // AWS always reports the type; an empty one (never seen) is the AWS default.
            let current_type = if current.ip_address_type.is_empty() {
                IpAddressType::Ipv4.as_str()
            } else {
                current.ip_address_type.as_str()
            };
            // Subnets first: a dual-stack NLB needs every subnet, new ones included, to have IPv6.
            if subnets_added_in_place(desired, current) {
                changes.push(Change::SetSubnets {
                    subnets: desired.subnets.clone(),
                });
            }
            if !current_type.eq_ignore_ascii_case(desired.ip_address_type.as_str()) {
                changes.push(Change::SetIpAddressType {
                    ip_address_type: desired.ip_address_type,
                });
            }
            if let Some(wanted) = groups_wanted
                && !groupless
            {
                let managed_id = observed.managed_group.as_ref().map(|g| g.id.to_string());
                let wanted_ids: Option<BTreeSet<String>> = wanted
                    .iter()
                    .map(|g| match g {
                        GroupRef::Managed => managed_id.clone(),
                        GroupRef::Id(id) => Some(id.clone()),
                    })
                    .collect();
                let current_ids: BTreeSet<String> =
                    current.security_groups.iter().map(ToString::to_string).collect();
                if wanted_ids.as_ref() != Some(&current_ids) {
                    changes.push(Change::SetSecurityGroups { groups: wanted });
                }
            }
            if !observed.tags.is_empty() {
                add_tags_if_missing(
                    &mut tag_arns,
                    &current.arn,
                    observed.tags.get(&current.arn),
                    &desired.tags,
                );
            }
            &observed.attributes
        }
    };
    let defaults = default_attributes();
    let attributes: BTreeMap<String, String> = desired
        .attributes
        .iter()
        .filter(|(k, v)| current_attributes.get(*k).or_else(|| defaults.get(*k)) != Some(*v))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    if !attributes.is_empty() {
        changes.push(Change::ModifyAttributes { attributes });
    }

    // 4. Listeners, keyed by port: a protocol change is a modification (TCP <-> TLS) or a replacement.
    let current_listeners: &[ListenerV2] = if lb.is_some() { &observed.listeners } else { &[] };
    let by_port: BTreeMap<i32, &ListenerV2> = current_listeners.iter().map(|l| (l.port, l)).collect();
    let wanted_ports: BTreeSet<i32> = desired.listeners.iter().map(|l| l.port).collect();
    for l in current_listeners
        .iter()
        .filter(|l| !wanted_ports.contains(&l.port))
    {
        changes.push(Change::DeleteListener {
            port: l.port,
            arn: l.arn.clone(),
        });
    }
    for l in &desired.listeners {
        let Some(current) = by_port.get(&l.port) else {
            changes.push(Change::CreateListener {
                listener: l.clone(),
                tags: desired.tags.clone(),
            });
            continue;
        };
        let tg_arn = observed_group(&l.target_group.name).map(|g| g.group.arn.as_str());
        let tg_differs = tg_arn.is_none_or(|arn| current.default_target_groups != [arn]);
        let same_protocol = current.protocol.eq_ignore_ascii_case(&l.protocol);
        let tls = l.protocol == "TLS";
        let cert_differs = tls && current.certificates.first() != l.certificate.as_ref();
        let policy_differs = tls && l.ssl_policy.is_some() && current.ssl_policy != l.ssl_policy;
        if same_protocol && !tg_differs && !cert_differs && !policy_differs {
            if !observed.tags.is_empty() {
                add_tags_if_missing(
                    &mut tag_arns,
                    &current.arn,
                    observed.tags.get(&current.arn),
                    &desired.tags,
                );
            }
            continue;
        }
        if same_protocol {
            changes.push(Change::ModifyListener {
                arn: current.arn.clone(),
                port: l.port,
                protocol: None,
                certificate: l.certificate.clone().filter(|_| cert_differs),
                ssl_policy: l.ssl_policy.clone().filter(|_| policy_differs),
                target_group: tg_differs.then(|| l.target_group.name.clone()),
            });
            if !observed.tags.is_empty() {
                add_tags_if_missing(
                    &mut tag_arns,
                    &current.arn,
                    observed.tags.get(&current.arn),
                    &desired.tags,
                );
            }
        } else {
            // A protocol change (TCP -> TLS, TCP -> UDP, ...) replaces the listener of that port: deleted first,
            // so no DuplicateListener; ModifyListener cannot make every such change (UDP, TCP_UDP, TLS -> TCP).
            changes.push(Change::DeleteListener {
                port: current.port,
                arn: current.arn.clone(),
            });
            changes.push(Change::CreateListener {
                listener: l.clone(),
                tags: desired.tags.clone(),
            });
        }
    }
    if !tag_arns.is_empty() {
        changes.push(Change::AddTags {
            arns: tag_arns,
            tags: desired.tags.clone(),
        });
    }

    // 5. Target groups no longer wanted (owned by this cluster only), once no listener uses them.
    let wanted_groups: BTreeSet<&str> = desired.target_groups().map(|g| g.name.as_str()).collect();
    for o in &observed.target_groups {
        let owned = observed
            .tags
            .get(&o.group.arn)
            .is_some_and(|tags| desired_owner(desired, tags));
        if !wanted_groups.contains(o.group.name.as_str()) && owned {
            changes.push(Change::DeleteTargetGroup {
                name: o.group.name.clone(),
                arn: o.group.arn.clone(),
            });
        }
    }

    // 6. A managed group released for given groups: references revoked, then deleted.
    if let (Security::Given(given), Some(group)) = (&desired.security, &observed.managed_group)
        && !given.iter().any(|g| g == group.id.as_str())
        && desired_owner(desired, &group.tags)
    {
        for (holder, permission) in &observed.references {
            changes.push(Change::RevokeReference {
                group: holder.to_string(),
                permission: permission.clone(),
            });
        }
        changes.push(Change::DeleteSecurityGroup {
            group: group.id.to_string(),
        });
    }

    // 7. The nodes' rules.
    if let (Some(access), Some(nodes)) = (&desired.node_access, &observed.node_rules) {
        changes.extend(node_rules::plan(access, nodes).into_iter().map(Change::NodeRules));
    }
    changes
}

/// Whether `tags` say the resource belongs to this cluster and this Service (the cluster tag `owned` as in the
/// desired tags, and the Service name tag).
fn desired_owner(desired: &Desired, tags: &Tags) -> bool {
    desired
        .tags
        .iter()
        .filter(|(k, v)| k.starts_with(ccm_tagging::CLUSTER_TAG_PREFIX) && *v == "owned")
        .all(|(k, v)| tags.get(k) == Some(v))
        && tags.get(shared::SERVICE_NAME_TAG) == Some(&desired.service)
}

/// The target changes of one group: deregister what is no longer wanted (targets already draining are left
/// alone), then register what is missing.
fn target_changes(desired: &Desired, tg: &TargetGroupSpec, targets: &[TargetHealth]) -> Vec<Change> {
    let mut changes = Vec::new();
    let registered: BTreeSet<(String, i32)> = targets
        .iter()
        .filter(|t| t.reason.as_deref() != Some("Target.DeregistrationInProgress") && t.state != "draining")
        .map(|t| (t.target.id.to_string(), t.target.port))
        .collect();
    let wanted: BTreeSet<(String, i32)> = desired.instances.iter().map(|i| (i.clone(), tg.port)).collect();
    let remove: Vec<(String, i32)> = registered.difference(&wanted).cloned().collect();
    let add: Vec<String> = wanted.difference(&registered).map(|(i, _)| i.clone()).collect();
    if !remove.is_empty() {
        changes.push(Change::DeregisterTargets {
            name: tg.name.clone(),
            targets: remove,
        });
    }
    if !add.is_empty() {
        changes.push(Change::RegisterTargets {
            name: tg.name.clone(),
            port: tg.port,
            instances: add,
        });
    }
    changes
}

/// Whether a change only concerns the targets and the nodes' rules (what `UpdateLoadBalancer` may do).
pub fn is_host_change(change: &Change) -> bool {
    matches!(
        change,
        Change::RegisterTargets { .. } | Change::DeregisterTargets { .. } | Change::NodeRules(_)
    )
}

/// What changed that makes a plan recreate the load balancer (`None`: no recreation).
pub fn recreation_reason(changes: &[Change]) -> Option<&str> {
    changes.iter().find_map(|c| match c {
        Change::DeleteLoadBalancer {
            recreate_because: Some(reason),
            ..
        } => Some(reason.as_str()),
        _ => None,
    })
}

/// The notice of a plan that recreates the NLB: a Warning naming what changed.
pub fn recreation(name: &str, changes: &[Change]) -> Option<String> {
    recreation_reason(changes).map(|reason| shared::recreation_notice("NLB", name, reason))
}

struct Context<'a, E, V> {
    ec2: &'a E,
    elbv2: &'a V,
    config: &'a LoadBalancerConfig,
    name: &'a str,
    lb_arn: Option<String>,
    target_groups: BTreeMap<String, String>,
    managed: Option<SecurityGroupId>,
    applied: Applied,
}

impl<E: Ec2, V: Elbv2> Context<'_, E, V> {
    fn lb_arn(&self) -> Result<String, Error> {
        self.lb_arn
            .clone()
            .ok_or_else(|| Error::NotFound(self.name.to_owned()))
    }

    fn target_group(&self, name: &str) -> Result<String, Error> {
        self.target_groups
            .get(name)
            .cloned()
            .ok_or_else(|| Error::NotFound(format!("target group {name}")))
    }

    fn group(&self, group: &GroupRef) -> Result<SecurityGroupId, Error> {
        match group {
            GroupRef::Id(id) => Ok(SecurityGroupId::new(id.clone())),
            GroupRef::Managed => self
                .managed
                .clone()
                .ok_or_else(|| Error::NotFound(format!("the managed security group of {}", self.name))),
        }
    }

    #[allow(clippy::too_many_lines)]
    async fn run(&mut self, change: &Change) -> Result<(), Error> {
        let (ec2, elbv2) = (self.ec2, self.elbv2);
        self.applied.mutations += 1;
        match change {
            Change::CreateSecurityGroup {
                name,
                description,
                tags,
            } => {
                self.managed =
                    Some(shared::create_or_adopt_group(ec2, self.config, name, description, tags).await?);
            }
            Change::TagSecurityGroup { tags } => {
                let id = self.group(&GroupRef::Managed)?;
                ec2.create_tags(&[id.into_string()], tags)
                    .await
                    .map_err(Error::aws("tagging the NLB's security group"))?;
            }
            Change::AuthorizeIngress { rules } => {
                let perms: Vec<IpPermission> = rules.iter().map(Rule::to_permission).collect();
                shared::authorize_idempotent(
                    ec2,
                    &self.group(&GroupRef::Managed)?,
                    &perms,
                    "authorizing NLB ingress",
                )
                .await?;
            }
            Change::RevokeIngress { rules } => {
                let perms: Vec<IpPermission> = rules.iter().map(Rule::to_permission).collect();
                shared::revoke_idempotent(
                    ec2,
                    &self.group(&GroupRef::Managed)?,
                    &perms,
                    "revoking NLB ingress",
                )
                .await?;
            }
            Change::DeleteLoadBalancer { arn, .. } => {
                match elbv2.delete_load_balancer(arn).await {
                    Err(e) if !e.is_not_found() => return Err(Error::aws("deleting the NLB")(e)),
                    _ => {}
                }
                self.lb_arn = None;
            }
            Change::CreateTargetGroup {
                target_group,
                health_check,
                tags,
            } => {
                let created = elbv2
                    .create_target_group(&NewTargetGroup {
                        name: target_group.name.clone(),
                        protocol: target_group.protocol.clone(),
                        port: target_group.port,
                        vpc_id: self.config.vpc_id.clone(),
                        health_check: health_check.to_aws(),
                        tags: tags.clone(),
                    })
                    .await;
                let arn = match created {
                    Ok(g) => g.arn,
                    Err(e) if e.kind() == ccm_aws_api::ErrorKind::Conflict => elbv2
                        .target_group(&target_group.name)
                        .await
                        .map_err(Error::aws("adopting a target group"))?
                        .map(|g| g.arn)
                        .ok_or_else(|| Error::aws("creating a target group")(e))?,
                    Err(e) => return Err(Error::aws("creating a target group")(e)),
                };
                self.target_groups.insert(target_group.name.clone(), arn);
            }
            Change::ModifyTargetGroup { name, health_check } => {
                let arn = self.target_group(name)?;
                elbv2
                    .modify_target_group(&arn, &health_check.to_aws())
                    .await
                    .map_err(Error::aws("modifying a target group's health check"))?;
            }
            Change::ModifyTargetGroupAttributes { name, attributes } => {
                let arn = self.target_group(name)?;
                elbv2
                    .modify_target_group_attributes(&arn, attributes)
                    .await
                    .map_err(Error::aws("setting target group attributes"))?;
            }
            Change::RegisterTargets {
                name,
                port,
                instances,
            } => {
                let arn = self.target_group(name)?;
                let targets: Vec<Target> = instances
                    .iter()
                    .map(|i| Target {
                        id: InstanceId::new(i.clone()),
                        port: *port,
                    })
                    .collect();
                elbv2
                    .register_targets(&arn, &targets)
                    .await
                    .map_err(Error::aws("registering targets"))?;
            }
            Change::DeregisterTargets { name, targets } => {
                let arn = self.target_group(name)?;
                let targets: Vec<Target> = targets
                    .iter()
                    .map(|(i, port)| Target {
                        id: InstanceId::new(i.clone()),
                        port: *port,
                    })
                    .collect();
                elbv2
                    .deregister_targets(&arn, &targets)
                    .await
                    .map_err(Error::aws("deregistering targets"))?;
            }
            Change::CreateLoadBalancer {
                name,
                internal,
                subnets,
                security_groups,
                ip_address_type,
                tags,
            } => {
                let groups = security_groups
                    .as_ref()
                    .map(|gs| gs.iter().map(|g| self.group(g)).collect::<Result<Vec<_>, _>>())
                    .transpose()?;
                let created = elbv2
                    .create_load_balancer(&NewNetworkLoadBalancer {
                        name: name.clone(),
                        internal: *internal,
                        subnet_mappings: subnets
                            .iter()
                            .map(|(subnet, eip, ip)| SubnetMapping {
                                subnet_id: Some(SubnetId::new(subnet.clone())),
                                allocation_id: eip.clone(),
                                private_ipv4_address: ip.clone(),
                            })
                            .collect(),
                        security_groups: groups,
                        // The AWS default is left implicit (IAM conditions and older endpoints see no change).
                        ip_address_type: (*ip_address_type != IpAddressType::Ipv4)
                            .then(|| ip_address_type.as_str().to_owned()),
                        tags: tags.clone(),
                    })
                    .await;
                let lb = match created {
                    Ok(lb) => lb,
                    Err(e) if e.kind() == ccm_aws_api::ErrorKind::Conflict => elbv2
                        .load_balancer(name)
                        .await
                        .map_err(Error::aws("adopting the NLB"))?
                        .ok_or_else(|| Error::aws("creating the NLB")(e))?,
                    Err(e) => return Err(Error::aws("creating the NLB")(e)),
                };
                self.lb_arn = Some(lb.arn.clone());
                self.applied.created = Some(lb);
            }
            Change::SetSubnets { subnets } => {
                let arn = self.lb_arn()?;
                let subnets: Vec<SubnetId> = subnets.iter().cloned().map(SubnetId::new).collect();
                elbv2
                    .set_subnets(&arn, &subnets)
                    .await
                    .map_err(Error::aws("adding subnets to the NLB"))?;
            }
            Change::SetIpAddressType { ip_address_type } => {
                let arn = self.lb_arn()?;
                elbv2
                    .set_ip_address_type(&arn, ip_address_type.as_str())
                    .await
                    .map_err(Error::aws("setting the NLB's IP address type"))?;
            }
            Change::SetSecurityGroups { groups } => {
                let arn = self.lb_arn()?;
                let groups = groups
                    .iter()
                    .map(|g| self.group(g))
                    .collect::<Result<Vec<_>, _>>()?;
                elbv2
                    .set_security_groups(&arn, &groups)
                    .await
                    .map_err(Error::aws("setting the NLB's security groups"))?;
            }
            Change::ModifyAttributes { attributes } => {
                let arn = self.lb_arn()?;
                elbv2
                    .modify_load_balancer_attributes(&arn, attributes)
                    .await
                    .map_err(Error::aws("setting NLB attributes"))?;
            }
            Change::AddTags { arns, tags } => elbv2
                .add_tags(arns, tags)
                .await
                .map_err(Error::aws("tagging the NLB"))?,
            Change::DeleteListener { arn, .. } => match elbv2.delete_listener(arn).await {
                Err(e) if !e.is_not_found() => return Err(Error::aws("deleting a listener")(e)),
                _ => {}
            },
            Change::CreateListener { listener, tags } => {
                let created = elbv2
                    .create_listener(&NewListener {
                        load_balancer_arn: self.lb_arn()?,
                        port: listener.port,
                        protocol: listener.protocol.clone(),
                        certificate_arn: listener.certificate.clone(),
                        ssl_policy: listener.ssl_policy.clone(),
                        target_group_arn: self.target_group(&listener.target_group.name)?,
                        tags: tags.clone(),
                    })
                    .await;
                match created {
                    // A listener created by a crashed run: the next plan compares and fixes it.
                    Err(e) if e.kind() != ccm_aws_api::ErrorKind::Conflict => {
                        return Err(Error::aws("creating a listener")(e));
                    }
                    _ => {}
                }
            }
            Change::ModifyListener {
                arn,
                protocol,
                certificate,
                ssl_policy,
                target_group,
                ..
            } => {
                let target_group_arn = target_group
                    .as_deref()
                    .map(|name| self.target_group(name))
                    .transpose()?;
                elbv2
                    .modify_listener(&ListenerChange {
                        listener_arn: arn.clone(),
                        port: None,
                        protocol: protocol.clone(),
                        certificate_arn: certificate.clone(),
                        ssl_policy: ssl_policy.clone(),
                        target_group_arn,
                    })
                    .await
                    .map_err(Error::aws("modifying a listener"))?;
            }
            Change::DeleteTargetGroup { arn, name } => match elbv2.delete_target_group(arn).await {
                // Right after its NLB or listener is deleted, AWS answers ResourceInUse for a while.
                Err(e) if e.kind() == ccm_aws_api::ErrorKind::Conflict => {
                    return Err(Error::TargetGroupInUse {
                        group: name.clone(),
                        name: self.name.to_owned(),
                    });
                }
                Err(e) if !e.is_not_found() => return Err(Error::aws("deleting a target group")(e)),
                _ => {}
            },
            Change::RevokeReference { group, permission } => {
                let perm = IpPermission {
                    protocol: permission.protocol.clone(),
                    from_port: permission.from_port,
                    to_port: permission.to_port,
                    ip_ranges: Vec::new(),
                    ipv6_ranges: Vec::new(),
                    source_groups: vec![SourceGroup {
                        group_id: SecurityGroupId::new(permission.source.clone()),
                        description: None,
                    }],
                };
                match ec2
                    .revoke_ingress(&SecurityGroupId::new(group.clone()), &[perm])
                    .await
                {
                    Err(e) if !e.is_not_found() => {
                        return Err(Error::aws("revoking a rule referencing the NLB's group")(e));
                    }
                    _ => {}
                }
            }
            Change::DeleteSecurityGroup { group } => {
                match ec2
                    .delete_security_group(&SecurityGroupId::new(group.clone()))
                    .await
                {
                    Ok(()) => {}
                    Err(e) if e.is_not_found() => {}
                    Err(e) if e.kind() == ccm_aws_api::ErrorKind::Conflict => {
                        return Err(Error::GroupInUse {
                            group: group.clone(),
                            name: self.name.to_owned(),
                        });
                    }
                    Err(e) => return Err(Error::aws("deleting the NLB's security group")(e)),
                }
            }
            Change::NodeRules(rule) => node_rules::apply(ec2, rule).await?,
        }
        Ok(())
    }
}

/// Runs `changes` in order against AWS (the only function that mutates). `observed` seeds the ARNs and the
/// managed group's ID. Stops at the first failure; re-observing and re-planning then completes the work.
pub async fn apply<E: Ec2, V: Elbv2>(
    ec2: &E,
    elbv2: &V,
    config: &LoadBalancerConfig,
    name: &str,
    observed: &Observed,
    changes: &[Change],
) -> Result<Applied, Error> {
    let mut ctx = Context {
        ec2,
        elbv2,
        config,
        name,
        lb_arn: observed.load_balancer.as_ref().map(|lb| lb.arn.clone()),
        target_groups: observed
            .target_groups
            .iter()
            .map(|g| (g.group.name.clone(), g.group.arn.clone()))
            .collect(),
        managed: observed.managed_group.as_ref().map(|g| g.id.clone()),
        applied: Applied::default(),
    };
    for change in changes {
        tracing::info!(load_balancer = name, ?change, "applying");
        ctx.run(change).await?;
    }
    Ok(ctx.applied)
}

/// What deletion found.
#[derive(Debug, Clone, Default)]
pub struct DeleteObserved {
    /// The NLB, if it still exists.
    pub load_balancer: Option<LoadBalancerV2>,
    /// Owned target groups to delete: the NLB's, those of the current ports, and the Service's unattached ones.
    pub target_groups: Vec<TargetGroup>,
    /// The managed group, when owned by this cluster.
    pub managed_group: Option<SecurityGroupId>,
    /// Rules of other groups referencing the managed group.
    pub references: Vec<(SecurityGroupId, ReferencePermission)>,
    /// The nodes' groups (`None`: node rules not managed).
    pub node_rules: Option<node_rules::Observed>,
}

/// Reads what deletion of NLB `name` of Service `(namespace, name)` needs. `target_group_names` are the names
/// the Service's current ports give; `managed_group_name` is the managed group's name (`None` when unknown). Only
/// resources owned by this cluster are deleted; groups given by annotation never are.
///
/// Target groups no load balancer uses are found in one listing of the region's groups: those named for the
/// current ports (made by a run that crashed before attaching them) and any other with the Service's name prefix
/// and `kubernetes.io/service-name` tag (left by a run that crashed between moving a listener to a new group and
/// deleting the old one). Deletion is rare, so this sweep is paid there rather than on every sync.
pub async fn observe_delete<E: Ec2, V: Elbv2>(
    ec2: &E,
    elbv2: &V,
    config: &LoadBalancerConfig,
    name: &str,
    service: (&str, &str),
    target_group_names: &[String],
    managed_group_name: Option<&str>,
) -> Result<DeleteObserved, Error> {
    let context = "reading the NLB to delete";
    let load_balancer = elbv2
        .load_balancer(name)
        .await
        .map_err(Error::aws(context))?
        .filter(|lb| lb.lb_type == "network");
    // One listing serves all three kinds: the groups the NLB uses, those named for the current ports, and the
    // Service's unattached ones by name prefix.
    let (namespace, service_name) = service;
    let prefix = name_prefix(namespace, service_name);
    let mut groups = Vec::new();
    let mut by_prefix = BTreeSet::new();
    for g in elbv2.all_target_groups().await.map_err(Error::aws(context))? {
        let attached = load_balancer
            .as_ref()
            .is_some_and(|lb| g.load_balancer_arns.contains(&lb.arn));
        if attached || target_group_names.contains(&g.name) {
            groups.push(g);
        } else if g.name.starts_with(&prefix) && g.load_balancer_arns.is_empty() {
            // Only unattached ones: a group another load balancer uses is never a leftover of this Service.
            by_prefix.insert(g.arn.clone());
            groups.push(g);
        }
    }
    let key = format!("{namespace}/{service_name}");
    let mut load_balancer = load_balancer;
    let arns: Vec<String> = load_balancer
        .iter()
        .map(|lb| lb.arn.clone())
        .chain(groups.iter().map(|g| g.arn.clone()))
        .collect();
    if !arns.is_empty() {
        let tags = elbv2.tags(&arns).await.map_err(Error::aws(context))?;
        // A prefix is shared by Services whose names agree on 8 characters: those groups must name this one.
        groups.retain(|g| {
            tags.get(&g.arn).is_some_and(|t| {
                config.cluster.is_owned(t)
                    && (!by_prefix.contains(&g.arn) || t.get(shared::SERVICE_NAME_TAG) == Some(&key))
            })
        });
        // An NLB under this name that is not ours (another cluster's, or untagged without adoption configured)
        // is left alone.
        if let Some(lb) = &load_balancer
            && let Err(refused) =
                crate::ownership::check(config, name, &tags.get(&lb.arn).cloned().unwrap_or_default())
        {
            tracing::warn!(load_balancer = name, %refused, "not deleting a load balancer this cluster does not own");
            load_balancer = None;
        }
    }
    let mut observed = DeleteObserved {
        target_groups: groups,
        ..DeleteObserved::default()
    };
    if let Some(group_name) = managed_group_name
        && let Some(group) = shared::find_group(ec2, config, group_name).await?
        && config.cluster.is_owned(&group.tags)
    {
        observed.references = references(ec2, config, &group.id).await?;
        observed.managed_group = Some(group.id);
    }
    // The nodes' rules go first, so with neither the NLB nor a target group left there are none to find (and a
    // Classic ELB's deletion, which sweeps here too, pays no read for them).
    if config.manage_node_security_groups && (load_balancer.is_some() || !observed.target_groups.is_empty()) {
        let subnets: Vec<SubnetId> = load_balancer
            .iter()
            .flat_map(|lb| lb.availability_zones.iter().filter_map(|z| z.subnet_id.clone()))
            .collect();
        // The instances still registered lead to the nodes' untagged groups, which no tag finds (deletion runs
        // without the node list); the nodes' rules are revoked before the target groups go, so a repeated
        // deletion still sees them.
        let mut instances = std::collections::BTreeSet::new();
        for tg in &observed.target_groups {
            for health in elbv2.target_health(&tg.arn).await.map_err(Error::aws(context))? {
                instances.insert(health.target.id.to_string());
            }
        }
        let access = NodeAccess {
            instances: instances.into_iter().collect(),
            ..NodeAccess::none(name)
        };
        observed.node_rules = Some(node_rules::observe(ec2, config, &access, &subnets).await?);
    }
    observed.load_balancer = load_balancer;
    Ok(observed)
}

/// The deletion plan (pure): the nodes' rules of this NLB, the NLB (its listeners go with it), its target
/// groups, the rules referencing the managed group, the managed group.
pub fn plan_delete(name: &str, observed: &DeleteObserved) -> Vec<Change> {
    let mut changes = Vec::new();
    if let Some(nodes) = &observed.node_rules {
        changes.extend(
            node_rules::plan(&NodeAccess::none(name), nodes)
                .into_iter()
                .map(Change::NodeRules),
        );
    }
    if let Some(lb) = &observed.load_balancer {
        changes.push(Change::DeleteLoadBalancer {
            name: name.to_owned(),
            arn: lb.arn.clone(),
            recreate_because: None,
        });
    }
    changes.extend(observed.target_groups.iter().map(|g| Change::DeleteTargetGroup {
        name: g.name.clone(),
        arn: g.arn.clone(),
    }));
    if let Some(group) = &observed.managed_group {
        for (holder, permission) in &observed.references {
            changes.push(Change::RevokeReference {
                group: holder.to_string(),
                permission: permission.clone(),
            });
        }
        changes.push(Change::DeleteSecurityGroup {
            group: group.to_string(),
        });
    }
    changes
}

/// The status hostname of an observed or created NLB: its DNS name while `active`, `active_impaired` or
/// `provisioning`; a `failed` NLB is an error (upstream reports an empty status and no error).
pub fn status_hostname(lb: &LoadBalancerV2) -> Result<Option<String>, Error> {
    match lb.state.as_str() {
        "failed" => Err(Error::LoadBalancerFailed(lb.name.clone())),
        "active" | "active_impaired" | "provisioning" | "" => {
            Ok(Some(lb.dns_name.clone()).filter(|d| !d.is_empty()))
        }
        _ => Ok(None),
    }
}

#[cfg(test)]
pub(crate) mod tests;
