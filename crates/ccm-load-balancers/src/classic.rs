//! Classic ELB: the desired model ([`build`], pure), the observed state ([`observe`], reads only), the ordered
//! plan ([`plan`], pure) and [`apply`], the only function here that changes AWS.
//!
//! Crash safety: every name is deterministic (the load balancer from the Service UID, its group from the load
//! balancer name) and every lookup goes by that name, so a run interrupted between any two calls is completed by
//! the next one: the next observation sees what the last run created and plans only what is missing.

use std::collections::{BTreeMap, BTreeSet};

use ccm_aws_api::{
    Ec2, Elb, Filter, InstanceId, SecurityGroupId, SubnetId, Tags,
    ec2::{IpPermission, SecurityGroup, SourceGroup},
    elb::{
        ClassicAccessLog, ClassicAttributes, ClassicHealthCheck, ClassicListener, ClassicLoadBalancer,
        ClassicPolicy, NewClassicLoadBalancer,
    },
};
use k8s_openapi::api::core::v1::Node;
use serde::Serialize;

use crate::{
    Error, LoadBalancerConfig,
    shared::{self, HealthProbeMode, Rule},
    spec::{PortSpec, ServiceSpec},
};

/// The proxy protocol policy's name.
pub const PROXY_PROTOCOL_POLICY: &str = "k8s-proxyprotocol-enabled";

/// A security group of the load balancer: the managed one (whose ID is known only once it exists) or a given ID.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub enum GroupRef {
    /// The managed group `k8s-elb-<name>`.
    Managed,
    /// A group by ID (annotation, `ElbSecurityGroup`, or an existing group).
    Id(String),
}

/// The managed security group.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ManagedGroup {
    /// Its name.
    pub name: String,
    /// Its description.
    pub description: String,
    /// Its creation tags.
    pub tags: Tags,
    /// Exactly these CIDR rules.
    pub ingress: BTreeSet<Rule>,
}

/// What brings the observed managed group to [`ManagedGroup`]: both flavours plan it the same way.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GroupDiff {
    /// The group is missing: create it (with its tags).
    pub create: bool,
    /// Tags the existing group lacks (read-repair; existing values are never overwritten).
    pub missing_tags: Tags,
    /// Rules to add.
    pub authorize: Vec<Rule>,
    /// Rules to remove.
    pub revoke: Vec<Rule>,
}

/// A listener.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub struct Listener {
    /// `TCP`, `SSL`, `HTTP`, `HTTPS`.
    pub protocol: String,
    /// Front-end port.
    pub port: i32,
    /// Back-end protocol.
    pub instance_protocol: String,
    /// Back-end (node) port.
    pub instance_port: i32,
    /// The certificate ARN of SSL and HTTPS listeners.
    pub ssl_certificate_id: Option<String>,
}

/// A health check.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub struct HealthCheck {
    /// `TCP:30080`, `HTTP:31000/healthz`, ...
    pub target: String,
    /// Seconds between checks.
    pub interval: i32,
    /// Seconds before a check fails.
    pub timeout: i32,
    /// Successes to become healthy.
    pub healthy_threshold: i32,
    /// Failures to become unhealthy.
    pub unhealthy_threshold: i32,
}

/// The attributes this controller owns.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub struct Attributes {
    /// Cross-zone load balancing.
    pub cross_zone: bool,
    /// Access logs.
    pub access_log_enabled: bool,
    /// Minutes between log files (compared only while logs are enabled; AWS's default 60).
    pub access_log_emit_interval: Option<i32>,
    /// The bucket (while enabled).
    pub access_log_bucket: Option<String>,
    /// The prefix (while enabled).
    pub access_log_prefix: Option<String>,
    /// Connection draining.
    pub draining_enabled: bool,
    /// The draining timeout; `None` leaves AWS's value alone.
    pub draining_timeout: Option<i32>,
    /// The idle timeout.
    pub idle_timeout: i32,
}

/// The desired Classic ELB of a Service: pure data, serializable for dry runs and snapshots.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Desired {
    /// The load balancer name.
    pub name: String,
    /// `<namespace>/<name>` of the Service.
    pub service: String,
    /// `internal` scheme.
    pub internal: bool,
    /// Subnets (one per zone).
    pub subnets: Vec<String>,
    /// The managed group, unless groups are given by annotation or `ElbSecurityGroup`.
    pub managed_group: Option<ManagedGroup>,
    /// The load balancer's groups in order; the first one is the source of the node rules.
    pub security_groups: Vec<GroupRef>,
    /// Listeners in Service port order.
    pub listeners: Vec<Listener>,
    /// The health check.
    pub health_check: HealthCheck,
    /// The attributes.
    pub attributes: Attributes,
    /// Proxy protocol on every back-end port.
    pub proxy_protocol: bool,
    /// The SSL negotiation policy for SSL and HTTPS listeners (`None`: listener policies are left alone).
    pub ssl_negotiation_policy: Option<String>,
    /// Registered instances, sorted.
    pub instances: Vec<String>,
    /// Tags (added, never removed).
    pub tags: Tags,
    /// Whether the nodes' groups get a rule allowing the load balancer's first group.
    pub manage_node_rules: bool,
}

/// One step of a plan. Plans are ordered: groups first, then the load balancer, its health check, attributes,
/// policies, instances, and last the nodes' rules.
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
    /// Add missing tags to a group.
    TagSecurityGroup {
        /// The group.
        group: GroupRef,
        /// Tags to add.
        tags: Tags,
    },
    /// Add CIDR rules to a group.
    AuthorizeIngress {
        /// The group.
        group: GroupRef,
        /// The rules.
        rules: Vec<Rule>,
    },
    /// Remove CIDR rules from a group.
    RevokeIngress {
        /// The group.
        group: GroupRef,
        /// The rules.
        rules: Vec<Rule>,
    },
    /// Create the load balancer.
    CreateLoadBalancer {
        /// Name.
        name: String,
        /// Scheme.
        internal: bool,
        /// Subnets.
        subnets: Vec<String>,
        /// Groups.
        security_groups: Vec<GroupRef>,
        /// Listeners.
        listeners: Vec<Listener>,
        /// Tags.
        tags: Tags,
    },
    /// Add or overwrite tags of the load balancer.
    AddTags {
        /// The tags.
        tags: Tags,
    },
    /// Remove listeners.
    DeleteListeners {
        /// Front-end ports.
        ports: Vec<i32>,
    },
    /// Add listeners.
    CreateListeners {
        /// The listeners.
        listeners: Vec<Listener>,
    },
    /// Attach subnets.
    AttachSubnets {
        /// The subnets.
        subnets: Vec<String>,
    },
    /// Detach subnets.
    DetachSubnets {
        /// The subnets.
        subnets: Vec<String>,
    },
    /// Replace the load balancer's groups.
    ApplySecurityGroups {
        /// The groups.
        groups: Vec<GroupRef>,
    },
    /// Set the health check.
    ConfigureHealthCheck {
        /// The check.
        health_check: HealthCheck,
    },
    /// Set the attributes (every field AWS takes; the draining timeout kept when not owned).
    ModifyAttributes {
        /// The attributes.
        attributes: Attributes,
    },
    /// Create a policy on the load balancer.
    CreatePolicy {
        /// Policy name.
        name: String,
        /// Policy type.
        type_name: String,
        /// Attributes.
        attributes: Vec<(String, String)>,
    },
    /// Set the policies of a back-end port.
    SetBackendPolicies {
        /// The instance port.
        instance_port: i32,
        /// The policies.
        policies: Vec<String>,
    },
    /// Set the policies of a listener.
    SetListenerPolicies {
        /// The front-end port.
        port: i32,
        /// The policies.
        policies: Vec<String>,
    },
    /// Register instances.
    RegisterInstances {
        /// The instances.
        instances: Vec<String>,
    },
    /// Deregister instances.
    DeregisterInstances {
        /// The instances.
        instances: Vec<String>,
    },
    /// Allow all traffic from `from` into a node group.
    AuthorizeNodeAccess {
        /// The node group.
        group: String,
        /// The load balancer's group.
        from: GroupRef,
    },
    /// Remove the rule allowing `from` from a group.
    RevokeNodeAccess {
        /// The group.
        group: String,
        /// The load balancer's group.
        from: GroupRef,
    },
    /// Delete the load balancer.
    DeleteLoadBalancer {
        /// Its name.
        name: String,
        /// Why it is recreated (`None`: deleted with the Service).
        #[serde(skip_serializing_if = "Option::is_none")]
        recreate_because: Option<String>,
    },
    /// Delete an owned security group.
    DeleteSecurityGroup {
        /// The group.
        group: String,
    },
}

/// The nodes' groups as observed for the node rules.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeGroups {
    /// The group of each target instance that should allow the load balancer's group.
    pub wanted: BTreeSet<SecurityGroupId>,
    /// Groups that allow all traffic from the load balancer's group now.
    pub with_rule: BTreeSet<SecurityGroupId>,
    /// Those of `with_rule` this controller may revoke from (tagged for the cluster, or any group when the
    /// source is the managed group: the rule is then ours alone).
    pub revocable: BTreeSet<SecurityGroupId>,
}

/// The AWS state a plan is made against.
#[derive(Debug, Clone, Default)]
pub struct Observed {
    /// The load balancer, if it exists.
    pub load_balancer: Option<ClassicLoadBalancer>,
    /// Its tags.
    pub tags: Tags,
    /// Whether its tags say this cluster owns it (`None`: tags not read): only an owned load balancer is ever
    /// recreated.
    pub owned: Option<bool>,
    /// Its attributes (`None` if not read).
    pub attributes: Option<ClassicAttributes>,
    /// Which of our policies exist on it.
    pub policies: BTreeSet<String>,
    /// The managed group, if it exists.
    pub managed_group: Option<SecurityGroup>,
    /// The nodes' groups (`None`: node rules not managed or not observed).
    pub node_groups: Option<NodeGroups>,
    /// The target instances that exist (not terminated); `None` when not read (no filtering then).
    pub existing_instances: Option<BTreeSet<String>>,
    /// The managed group left behind when the Service switched to given groups: owned by this cluster, it is
    /// detached, its rules on other groups revoked, and deleted.
    pub orphaned_group: Option<OrphanedGroup>,
}

/// A managed group no longer wanted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OrphanedGroup {
    /// The group.
    pub id: SecurityGroupId,
    /// Groups allowing all traffic from it.
    pub referenced_by: Vec<SecurityGroupId>,
}

/// What [`observe`] reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Everything a full ensure needs.
    Full,
    /// Only what the back-end hosts need (the load balancer, its group, the node groups).
    Hosts,
}

/// What [`apply`] reports.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Applied {
    /// The DNS name of a load balancer created by this run.
    pub created_dns_name: Option<String>,
    /// Mutating calls made.
    pub mutations: usize,
}

/// The SSL negotiation policy's name for the predefined policy `reference`.
pub fn ssl_policy_name(reference: &str) -> String {
    format!("{SSL_POLICY_PREFIX}{reference}")
}

/// The prefix of the SSL negotiation policies this controller (and upstream) creates.
const SSL_POLICY_PREFIX: &str = "k8s-SSLNegotiationPolicy-";

fn listener(spec: &ServiceSpec, p: &PortSpec) -> Listener {
    let backend = spec.backend_protocol.as_deref();
    let (protocol, instance_protocol, cert) = match &spec.ssl_cert {
        Some(cert) if spec.is_ssl_port(p) => {
            let (front, back) = match backend {
                Some("https") => ("HTTPS", "HTTPS"),
                Some("http") => ("HTTPS", "HTTP"),
                Some("ssl") => ("SSL", "SSL"),
                _ => ("SSL", "TCP"),
            };
            (front, back, Some(cert.clone()))
        }
        _ if backend == Some("http") => ("HTTP", "HTTP", None),
        _ => ("TCP", "TCP", None),
    };
    Listener {
        protocol: protocol.to_owned(),
        port: p.port,
        instance_protocol: instance_protocol.to_owned(),
        instance_port: p.node_port,
        ssl_certificate_id: cert,
    }
}

fn health_check(spec: &ServiceSpec, config: &LoadBalancerConfig) -> HealthCheck {
    let first = spec.ports.first().map_or(0, |p| p.node_port);
    let (mut protocol, mut port, default_path) = match (
        spec.local_traffic,
        spec.health_check_node_port,
        &config.health_probe,
    ) {
        (true, Some(hc), _) => ("HTTP".to_owned(), hc, Some("/healthz".to_owned())),
        (false, _, HealthProbeMode::Shared { port, path }) => ("HTTP".to_owned(), *port, Some(path.clone())),
        _ if matches!(spec.backend_protocol.as_deref(), Some("https" | "ssl")) => {
            ("SSL".to_owned(), first, None)
        }
        _ => ("TCP".to_owned(), first, None),
    };
    let a = &spec.health_check;
    if let Some(p) = &a.protocol {
        protocol.clone_from(p);
    }
    match a.port {
        Some(None) => port = first,
        Some(Some(p)) => port = p,
        None => {}
    }
    let target = if protocol == "HTTP" || protocol == "HTTPS" {
        let path = a.path.clone().or(default_path).unwrap_or_else(|| "/".to_owned());
        format!("{protocol}:{port}{path}")
    } else {
        format!("{protocol}:{port}")
    };
    HealthCheck {
        target,
        interval: a.interval.unwrap_or(10),
        timeout: a.timeout.unwrap_or(5),
        healthy_threshold: a.healthy_threshold.unwrap_or(2),
        unhealthy_threshold: a.unhealthy_threshold.unwrap_or(6),
    }
}

/// The desired Classic ELB (pure). `subnets` come from [`shared::resolve_subnets`].
pub fn build(
    spec: &ServiceSpec,
    nodes: &[&Node],
    config: &LoadBalancerConfig,
    subnets: &[SubnetId],
) -> Result<Desired, Error> {
    let name = shared::load_balancer_name(&spec.uid)?;
    let listeners: Vec<Listener> = spec.ports.iter().map(|p| listener(spec, p)).collect();
    let (managed_group, mut security_groups) = match (&spec.security_groups, &config.elb_security_group) {
        (Some(given), _) => (None, given.iter().cloned().map(GroupRef::Id).collect::<Vec<_>>()),
        (None, Some(shared)) => (None, vec![GroupRef::Id(shared.to_string())]),
        (None, None) => {
            let ports: Vec<i32> = spec.ports.iter().map(|p| p.port).collect();
            let protocol = spec.ports.first().map_or("tcp", |p| p.protocol.as_str());
            (
                Some(ManagedGroup {
                    name: shared::security_group_name(&name),
                    description: shared::security_group_description(&name, spec),
                    tags: shared::security_group_tags(&config.cluster, spec),
                    ingress: shared::load_balancer_ingress(protocol, &ports, &spec.source_ranges),
                }),
                vec![GroupRef::Managed],
            )
        }
    };
    for extra in &spec.extra_security_groups {
        let extra = GroupRef::Id(extra.clone());
        if !security_groups.contains(&extra) {
            security_groups.push(extra);
        }
    }
    let access_log_enabled = spec.access_log.enabled;
    Ok(Desired {
        service: spec.key(),
        internal: spec.internal,
        subnets: subnets.iter().map(ToString::to_string).collect(),
        managed_group,
        security_groups,
        health_check: health_check(spec, config),
        attributes: Attributes {
            cross_zone: spec.cross_zone,
            access_log_enabled,
            access_log_emit_interval: spec.access_log.emit_interval.filter(|_| access_log_enabled),
            access_log_bucket: spec.access_log.bucket.clone().filter(|_| access_log_enabled),
            access_log_prefix: spec.access_log.prefix.clone().filter(|_| access_log_enabled),
            draining_enabled: spec.draining_enabled,
            draining_timeout: spec.draining_timeout,
            idle_timeout: spec.idle_timeout,
        },
        proxy_protocol: spec.proxy_protocol,
        ssl_negotiation_policy: spec.ssl_negotiation_policy.clone(),
        instances: shared::target_instances(nodes, &spec.target_node_labels)
            .into_iter()
            .map(InstanceId::into_string)
            .collect(),
        tags: shared::load_balancer_tags(&config.cluster, spec),
        manage_node_rules: config.manage_node_security_groups,
        listeners,
        name,
    })
}

// === impl ManagedGroup ===

impl ManagedGroup {
    /// What `observed` (the group found by name, if any) lacks or has too much.
    pub fn diff(&self, observed: Option<&SecurityGroup>) -> GroupDiff {
        let (create, missing_tags, current) = match observed {
            None => (true, Tags::new(), BTreeSet::new()),
            Some(group) => (
                false,
                self.tags
                    .iter()
                    .filter(|(k, _)| !group.tags.contains_key(*k))
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect(),
                shared::observed_rules(group),
            ),
        };
        GroupDiff {
            create,
            missing_tags,
            authorize: self.ingress.difference(&current).cloned().collect(),
            revoke: current.difference(&self.ingress).cloned().collect(),
        }
    }
}

// === impl Listener ===

impl Listener {
    pub(crate) fn matches(&self, observed: &ClassicListener) -> bool {
        self.protocol.eq_ignore_ascii_case(&observed.protocol)
            && self
                .instance_protocol
                .eq_ignore_ascii_case(&observed.instance_protocol)
            && self.port == observed.load_balancer_port
            && self.instance_port == observed.instance_port
            && match (&self.ssl_certificate_id, &observed.ssl_certificate_id) {
                (None, None) => true,
                (Some(a), Some(b)) => a.eq_ignore_ascii_case(b),
                _ => false,
            }
    }

    fn to_aws(&self) -> ClassicListener {
        let mut l = ClassicListener::new(
            &self.protocol,
            self.port,
            &self.instance_protocol,
            self.instance_port,
        );
        l.ssl_certificate_id.clone_from(&self.ssl_certificate_id);
        l
    }

    fn is_secure(&self) -> bool {
        self.protocol.eq_ignore_ascii_case("SSL") || self.protocol.eq_ignore_ascii_case("HTTPS")
    }
}

// === impl HealthCheck ===

impl HealthCheck {
    pub(crate) fn matches(&self, observed: &ClassicHealthCheck) -> bool {
        self.target.eq_ignore_ascii_case(&observed.target)
            && self.interval == observed.interval
            && self.timeout == observed.timeout
            && self.healthy_threshold == observed.healthy_threshold
            && self.unhealthy_threshold == observed.unhealthy_threshold
    }

    fn to_aws(&self) -> ClassicHealthCheck {
        ClassicHealthCheck {
            target: self.target.clone(),
            interval: self.interval,
            timeout: self.timeout,
            healthy_threshold: self.healthy_threshold,
            unhealthy_threshold: self.unhealthy_threshold,
        }
    }
}

// === impl Attributes ===

impl Attributes {
    /// Whether the owned fields of `observed` equal these.
    fn matches(&self, observed: &ClassicAttributes) -> bool {
        let log = &observed.access_log;
        self.cross_zone == observed.cross_zone
            && self.access_log_enabled == log.enabled
            && (!self.access_log_enabled
                || (self.access_log_emit_interval.unwrap_or(60) == log.emit_interval.unwrap_or(60)
                    && self.access_log_bucket == log.s3_bucket_name
                    && self.access_log_prefix.as_deref().unwrap_or_default()
                        == log.s3_bucket_prefix.as_deref().unwrap_or_default()))
            && self.draining_enabled == observed.connection_draining_enabled
            && self
                .draining_timeout
                .is_none_or(|t| Some(t) == observed.connection_draining_timeout)
            && Some(self.idle_timeout) == observed.idle_timeout
    }

    /// The full attribute set to send.
    fn to_aws(&self) -> ClassicAttributes {
        ClassicAttributes {
            cross_zone: self.cross_zone,
            access_log: ClassicAccessLog {
                enabled: self.access_log_enabled,
                emit_interval: self.access_log_emit_interval.filter(|_| self.access_log_enabled),
                s3_bucket_name: self.access_log_bucket.clone(),
                s3_bucket_prefix: self.access_log_prefix.clone(),
            },
            connection_draining_enabled: self.draining_enabled,
            connection_draining_timeout: self.draining_timeout,
            idle_timeout: Some(self.idle_timeout),
        }
    }
}

/// The attributes of a Classic ELB fresh from `CreateLoadBalancer`.
fn fresh_attributes() -> ClassicAttributes {
    ClassicAttributes {
        cross_zone: false,
        access_log: ClassicAccessLog::default(),
        connection_draining_enabled: false,
        connection_draining_timeout: Some(300),
        idle_timeout: Some(60),
    }
}

/// The ordered plan from `observed` to `desired` (pure). Only owned fields are compared: a steady Service plans
/// nothing.
pub fn plan(desired: &Desired, observed: &Observed) -> Vec<Change> {
    let mut changes = Vec::new();

    // 1. The managed group and its rules.
    if let Some(managed) = &desired.managed_group {
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
                group: GroupRef::Managed,
                tags: diff.missing_tags,
            });
        }
        if !diff.authorize.is_empty() {
            changes.push(Change::AuthorizeIngress {
                group: GroupRef::Managed,
                rules: diff.authorize,
            });
        }
        if !diff.revoke.is_empty() {
            changes.push(Change::RevokeIngress {
                group: GroupRef::Managed,
                rules: diff.revoke,
            });
        }
    }

    // 2. The load balancer itself; a missing one is planned against what creation yields. A Classic ELB cannot
    // change its scheme: an owned one is deleted and created again under the same name (its group, and so the
    // nodes' rules, are kept); another's is left as it is, with a warning.
    let mut current = observed.load_balancer.as_ref();
    if let Some(lb) = current
        && lb.internal != desired.internal
    {
        let reason = format!(
            "scheme {} -> {}",
            shared::scheme(lb.internal),
            shared::scheme(desired.internal)
        );
        if observed.owned == Some(true) {
            changes.push(Change::DeleteLoadBalancer {
                name: desired.name.clone(),
                recreate_because: Some(reason),
            });
            current = None;
        } else if observed.owned == Some(false) {
            tracing::warn!(
                load_balancer = %desired.name,
                %reason,
                "the load balancer is not owned by this cluster (no cluster tag `owned`): its scheme is left as it is"
            );
        }
    }
    let no_policies = BTreeSet::new();
    let created;
    let (lb, tags, attributes, policies) = match current {
        Some(lb) => (
            lb,
            &observed.tags,
            observed.attributes.clone(),
            &observed.policies,
        ),
        None => {
            changes.push(Change::CreateLoadBalancer {
                name: desired.name.clone(),
                internal: desired.internal,
                subnets: desired.subnets.clone(),
                security_groups: desired.security_groups.clone(),
                listeners: desired.listeners.clone(),
                tags: desired.tags.clone(),
            });
            let mut fresh = ClassicLoadBalancer::new(&desired.name, "");
            fresh.listeners = desired.listeners.iter().map(Listener::to_aws).collect();
            fresh.subnets = desired.subnets.iter().map(|s| SubnetId::new(s.clone())).collect();
            created = fresh;
            (
                &created,
                &desired.tags,
                Some(fresh_attributes()),
                // A load balancer's policies go with it.
                &no_policies,
            )
        }
    };
    let exists = current.is_some();
    let mut recreated_ports = BTreeSet::new();
    if exists {
        let add_tags = ccm_tagging::additions(tags, &desired.tags);
        if !add_tags.is_empty() {
            changes.push(Change::AddTags { tags: add_tags });
        }
        let by_port: BTreeMap<i32, &ClassicListener> =
            lb.listeners.iter().map(|l| (l.load_balancer_port, l)).collect();
        let wanted_ports: BTreeSet<i32> = desired.listeners.iter().map(|l| l.port).collect();
        let mut delete: Vec<i32> = lb
            .listeners
            .iter()
            .map(|l| l.load_balancer_port)
            .filter(|p| !wanted_ports.contains(p))
            .collect();
        let mut create = Vec::new();
        for l in &desired.listeners {
            match by_port.get(&l.port) {
                Some(current) if l.matches(current) => {}
                Some(_) => {
                    delete.push(l.port);
                    create.push(l.clone());
                    recreated_ports.insert(l.port);
                }
                None => {
                    create.push(l.clone());
                    recreated_ports.insert(l.port);
                }
            }
        }
        delete.sort_unstable();
        delete.dedup();
        if !delete.is_empty() {
            changes.push(Change::DeleteListeners { ports: delete });
        }
        if !create.is_empty() {
            changes.push(Change::CreateListeners { listeners: create });
        }
        let current: BTreeSet<&str> = lb.subnets.iter().map(SubnetId::as_str).collect();
        let wanted: BTreeSet<&str> = desired.subnets.iter().map(String::as_str).collect();
        let attach: Vec<String> = wanted.difference(&current).map(|s| (*s).to_owned()).collect();
        let detach: Vec<String> = current.difference(&wanted).map(|s| (*s).to_owned()).collect();
        // A Classic ELB takes one subnet per zone and needs at least one: detach first when a subnet stays (so a
        // replacement in the same zone can attach), attach first when all are replaced.
        let attach = (!attach.is_empty()).then_some(Change::AttachSubnets { subnets: attach });
        let detach = (!detach.is_empty()).then_some(Change::DetachSubnets { subnets: detach });
        if current.intersection(&wanted).next().is_some() {
            changes.extend(detach.into_iter().chain(attach));
        } else {
            changes.extend(attach.into_iter().chain(detach));
        }
        let managed_id = observed.managed_group.as_ref().map(|g| g.id.to_string());
        let resolved: Option<BTreeSet<String>> = desired
            .security_groups
            .iter()
            .map(|g| match g {
                GroupRef::Managed => managed_id.clone(),
                GroupRef::Id(id) => Some(id.clone()),
            })
            .collect();
        let current: BTreeSet<String> = lb.security_groups.iter().map(ToString::to_string).collect();
        if resolved.as_ref() != Some(&current) {
            changes.push(Change::ApplySecurityGroups {
                groups: desired.security_groups.clone(),
            });
        }
    }

    // 3. Health check and attributes.
    if !lb
        .health_check
        .as_ref()
        .is_some_and(|h| desired.health_check.matches(h))
    {
        changes.push(Change::ConfigureHealthCheck {
            health_check: desired.health_check.clone(),
        });
    }
    if let Some(current) = &attributes
        && !desired.attributes.matches(current)
    {
        // AWS takes every attribute at once: keep its draining timeout where we own none.
        let mut attributes = desired.attributes.clone();
        if attributes.draining_timeout.is_none() {
            attributes.draining_timeout = current.connection_draining_timeout;
        }
        changes.push(Change::ModifyAttributes { attributes });
    }

    // 4. Policies: proxy protocol on back ends, SSL negotiation on secure listeners.
    let backend: BTreeMap<i32, &Vec<String>> = lb
        .backend_policies
        .iter()
        .map(|b| (b.instance_port, &b.policy_names))
        .collect();
    let instance_ports: BTreeSet<i32> = desired.listeners.iter().map(|l| l.instance_port).collect();
    if desired.proxy_protocol && !policies.contains(PROXY_PROTOCOL_POLICY) {
        changes.push(Change::CreatePolicy {
            name: PROXY_PROTOCOL_POLICY.to_owned(),
            type_name: "ProxyProtocolPolicyType".to_owned(),
            attributes: vec![("ProxyProtocol".to_owned(), "true".to_owned())],
        });
    }
    for port in &instance_ports {
        let current: Vec<String> = backend.get(port).map(|v| (*v).clone()).unwrap_or_default();
        let has = current.iter().any(|p| p == PROXY_PROTOCOL_POLICY);
        if desired.proxy_protocol && !has {
            let mut policies = current.clone();
            policies.push(PROXY_PROTOCOL_POLICY.to_owned());
            changes.push(Change::SetBackendPolicies {
                instance_port: *port,
                policies,
            });
        } else if !desired.proxy_protocol && has {
            changes.push(Change::SetBackendPolicies {
                instance_port: *port,
                policies: current
                    .into_iter()
                    .filter(|p| p != PROXY_PROTOCOL_POLICY)
                    .collect(),
            });
        }
    }
    if let Some(reference) = &desired.ssl_negotiation_policy
        && desired.listeners.iter().any(Listener::is_secure)
    {
        let policy = ssl_policy_name(reference);
        if !policies.contains(&policy) {
            changes.push(Change::CreatePolicy {
                name: policy.clone(),
                type_name: "SSLNegotiationPolicyType".to_owned(),
                attributes: vec![("Reference-Security-Policy".to_owned(), reference.clone())],
            });
        }
        for l in desired.listeners.iter().filter(|l| l.is_secure()) {
            let current = if recreated_ports.contains(&l.port) {
                Vec::new()
            } else {
                lb.listeners
                    .iter()
                    .find(|o| o.load_balancer_port == l.port)
                    .map(|o| o.policy_names.clone())
                    .unwrap_or_default()
            };
            // Only our negotiation policy is swapped: other policies on the listener (a stickiness policy set
            // by hand, say) stay, where upstream replaces the whole list.
            let mut wanted: Vec<String> = current
                .iter()
                .filter(|p| !p.starts_with(SSL_POLICY_PREFIX))
                .cloned()
                .collect();
            wanted.push(policy.clone());
            let differs = current.len() != wanted.len() || !wanted.iter().all(|p| current.contains(p));
            if differs {
                changes.push(Change::SetListenerPolicies {
                    port: l.port,
                    policies: wanted,
                });
            }
        }
    }

    // 5. Instances: register first, then deregister.
    let current: BTreeSet<&str> = lb.instances.iter().map(InstanceId::as_str).collect();
    let wanted: BTreeSet<&str> = desired
        .instances
        .iter()
        .filter(|i| {
            observed
                .existing_instances
                .as_ref()
                .is_none_or(|e| e.contains(*i))
        })
        .map(String::as_str)
        .collect();
    let register: Vec<String> = wanted.difference(&current).map(|s| (*s).to_owned()).collect();
    let deregister: Vec<String> = current.difference(&wanted).map(|s| (*s).to_owned()).collect();
    if !register.is_empty() {
        changes.push(Change::RegisterInstances { instances: register });
    }
    if !deregister.is_empty() {
        changes.push(Change::DeregisterInstances {
            instances: deregister,
        });
    }

    // 6. The nodes' groups.
    if desired.manage_node_rules
        && let (Some(nodes), Some(from)) = (&observed.node_groups, desired.security_groups.first())
    {
        for group in nodes.wanted.difference(&nodes.with_rule) {
            changes.push(Change::AuthorizeNodeAccess {
                group: group.to_string(),
                from: from.clone(),
            });
        }
        for group in nodes.with_rule.difference(&nodes.wanted) {
            if nodes.revocable.contains(group) {
                changes.push(Change::RevokeNodeAccess {
                    group: group.to_string(),
                    from: from.clone(),
                });
            }
        }
    }

    // 7. A managed group replaced by given groups: its rules on other groups, then the group itself.
    if let Some(orphan) = &observed.orphaned_group
        && desired.managed_group.is_none()
        && !desired
            .security_groups
            .contains(&GroupRef::Id(orphan.id.to_string()))
    {
        for group in &orphan.referenced_by {
            changes.push(Change::RevokeNodeAccess {
                group: group.to_string(),
                from: GroupRef::Id(orphan.id.to_string()),
            });
        }
        changes.push(Change::DeleteSecurityGroup {
            group: orphan.id.to_string(),
        });
    }
    changes
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

/// The notice of a plan that recreates the load balancer: a Warning naming what changed.
pub fn recreation(name: &str, changes: &[Change]) -> Option<String> {
    recreation_reason(changes).map(|reason| shared::recreation_notice("Classic ELB", name, reason))
}

/// Whether a change only concerns the back-end hosts (what `UpdateLoadBalancer` may do).
pub fn is_host_change(change: &Change) -> bool {
    matches!(
        change,
        Change::RegisterInstances { .. }
            | Change::DeregisterInstances { .. }
            | Change::AuthorizeNodeAccess { .. }
            | Change::RevokeNodeAccess { .. }
    )
}

/// The group of each target instance that should allow the load balancer, and the targets that exist.
async fn target_groups<E: Ec2>(
    ec2: &E,
    config: &LoadBalancerConfig,
    instances: &[String],
) -> Result<(BTreeSet<SecurityGroupId>, BTreeSet<String>), Error> {
    let context = "reading the nodes' security groups";
    let mut wanted = BTreeSet::new();
    let mut existing = BTreeSet::new();
    if instances.is_empty() {
        return Ok((wanted, existing));
    }
    let ids: Vec<InstanceId> = instances.iter().map(|s| InstanceId::new(s.clone())).collect();
    let mut found = ec2.instances_by_id(&ids).await.map_err(Error::aws(context))?;
    // Terminated instances cannot be registered (nor do their groups matter).
    found.retain(|i| !matches!(i.state, ccm_aws_api::ec2::InstanceState::Terminated));
    existing.extend(found.iter().map(|i| i.id.to_string()));
    let group_ids: BTreeSet<&str> = found
        .iter()
        .flat_map(|i| i.security_groups.iter().map(SecurityGroupId::as_str))
        .collect();
    if group_ids.is_empty() {
        return Ok((wanted, existing));
    }
    let groups = ec2
        .security_groups(&[Filter::new("group-id", group_ids.iter().copied())])
        .await
        .map_err(Error::aws(context))?;
    let by_id: BTreeMap<&SecurityGroupId, &SecurityGroup> = groups.iter().map(|g| (&g.id, g)).collect();
    for instance in &found {
        let mine: Vec<&SecurityGroup> = instance
            .security_groups
            .iter()
            .filter_map(|id| by_id.get(id).copied())
            .collect();
        if let Some(group) = shared::instance_group(&instance.id, &mine, &config.cluster)? {
            wanted.insert(group);
        }
    }
    Ok((wanted, existing))
}

/// The groups (other than `source` itself) that allow all traffic from `source`.
async fn referencing<E: Ec2>(ec2: &E, source: &SecurityGroupId) -> Result<Vec<SecurityGroup>, Error> {
    let groups = ec2
        .security_groups(&[Filter::new("ip-permission.group-id", [source.as_str()])])
        .await
        .map_err(Error::aws(
            "reading the groups that allow the load balancer's group",
        ))?;
    Ok(groups
        .into_iter()
        .filter(|g| g.id != *source && shared::allows_all_from(g, source))
        .collect())
}

async fn policies<L: Elb>(elb: &L, desired: &Desired) -> Result<BTreeSet<String>, Error> {
    let mut wanted = Vec::new();
    if desired.proxy_protocol {
        wanted.push(PROXY_PROTOCOL_POLICY.to_owned());
    }
    if let Some(reference) = &desired.ssl_negotiation_policy {
        wanted.push(ssl_policy_name(reference));
    }
    let mut existing = BTreeSet::new();
    for policy in wanted {
        match elb.policies(&desired.name, std::slice::from_ref(&policy)).await {
            Ok(found) if found.iter().any(|p| p.name == policy) => {
                existing.insert(policy);
            }
            Ok(_) => {}
            Err(e) if e.is_not_found() => {}
            Err(e) => return Err(Error::aws("reading the load balancer's policies")(e)),
        }
    }
    Ok(existing)
}

/// Reads what [`plan`] needs (no mutation), in two rounds of concurrent calls. Errors when the managed group
/// found by name belongs to another cluster.
pub async fn observe<E: Ec2, L: Elb>(
    ec2: &E,
    elb: &L,
    config: &LoadBalancerConfig,
    desired: &Desired,
    scope: Scope,
) -> Result<Observed, Error> {
    let context = "reading the load balancer";
    let full = scope == Scope::Full;
    let group_name = shared::security_group_name(&desired.name);
    // Round 1: the load balancer, the managed group (also when given groups replaced it), the targets.
    let (load_balancer, group, targets) = tokio::join!(
        async {
            elb.load_balancer(&desired.name)
                .await
                .map_err(Error::aws(context))
        },
        async {
            if desired.managed_group.is_some() || full {
                shared::find_group(ec2, config, &group_name).await
            } else {
                Ok(None)
            }
        },
        async {
            if desired.manage_node_rules {
                target_groups(ec2, config, &desired.instances).await.map(Some)
            } else {
                Ok(None)
            }
        },
    );
    let (load_balancer, group, targets) = (load_balancer?, group?, targets?);
    let mut observed = Observed {
        load_balancer,
        ..Observed::default()
    };
    let mut orphan = None;
    match group {
        Some(group) if desired.managed_group.is_some() => {
            config
                .cluster
                .missing_ownership_tags(group.id.as_str(), &group.tags)?;
            observed.managed_group = Some(group);
        }
        Some(group) if config.cluster.is_owned(&group.tags) => orphan = Some(group.id),
        _ => {}
    }
    let source = match desired.security_groups.first() {
        Some(GroupRef::Managed) => observed.managed_group.as_ref().map(|g| (g.id.clone(), true)),
        Some(GroupRef::Id(id)) => Some((SecurityGroupId::new(id.clone()), false)),
        None => None,
    }
    .filter(|_| desired.manage_node_rules);

    // Round 2: what depends on round 1.
    let exists = observed.load_balancer.is_some();
    let (details, with_rule, orphan_refs) = tokio::join!(
        async {
            if full && exists {
                let (tags, attributes, policies) = tokio::join!(
                    elb.tags(&desired.name),
                    elb.attributes(&desired.name),
                    policies(elb, desired)
                );
                Ok::<_, Error>(Some((
                    tags.map_err(Error::aws(context))?,
                    attributes.map_err(Error::aws(context))?,
                    policies?,
                )))
            } else {
                Ok(None)
            }
        },
        async {
            match &source {
                Some((id, _)) => referencing(ec2, id).await.map(Some),
                None => Ok(None),
            }
        },
        async {
            match &orphan {
                Some(id) => referencing(ec2, id).await.map(Some),
                None => Ok(None),
            }
        },
    );
    if let Some((tags, attributes, policies)) = details? {
        // Another cluster's (or, unless adoption is configured, an untagged) load balancer under our name is
        // never touched: refuse before anything is planned.
        crate::ownership::check(config, &desired.name, &tags)?;
        observed.owned = Some(config.cluster.is_owned(&tags));
        observed.tags = tags;
        observed.attributes = Some(attributes);
        observed.policies = policies;
    }
    if let Some((wanted, existing)) = targets {
        let mut groups = NodeGroups {
            wanted,
            ..NodeGroups::default()
        };
        let managed_source = source.as_ref().is_some_and(|(_, managed)| *managed);
        for group in with_rule?.unwrap_or_default() {
            if managed_source || config.cluster.is_tagged(&group.tags) {
                groups.revocable.insert(group.id.clone());
            }
            groups.with_rule.insert(group.id);
        }
        observed.node_groups = Some(groups);
        observed.existing_instances = Some(existing);
    }
    if let (Some(id), Some(refs)) = (orphan, orphan_refs?) {
        observed.orphaned_group = Some(OrphanedGroup {
            id,
            referenced_by: refs.into_iter().map(|g| g.id).collect(),
        });
    }
    Ok(observed)
}

fn node_rule(from: &SecurityGroupId) -> IpPermission {
    IpPermission {
        protocol: "-1".to_owned(),
        source_groups: vec![SourceGroup {
            group_id: from.clone(),
            description: None,
        }],
        ..IpPermission::default()
    }
}

struct Context<'a, E, L> {
    ec2: &'a E,
    elb: &'a L,
    config: &'a LoadBalancerConfig,
    name: &'a str,
    managed: Option<SecurityGroupId>,
    applied: Applied,
}

impl<E: Ec2, L: Elb> Context<'_, E, L> {
    fn group(&self, group: &GroupRef) -> Result<SecurityGroupId, Error> {
        match group {
            GroupRef::Id(id) => Ok(SecurityGroupId::new(id.clone())),
            GroupRef::Managed => self.managed.clone().ok_or(Error::NotFound(format!(
                "security group {}",
                shared::security_group_name(self.name)
            ))),
        }
    }

    async fn run(&mut self, change: &Change) -> Result<(), Error> {
        let (ec2, elb, name) = (self.ec2, self.elb, self.name);
        self.applied.mutations += 1;
        match change {
            Change::CreateSecurityGroup {
                name: group_name,
                description,
                tags,
            } => {
                self.managed = Some(
                    shared::create_or_adopt_group(ec2, self.config, group_name, description, tags).await?,
                );
            }
            Change::TagSecurityGroup { group, tags } => {
                let id = self.group(group)?;
                ec2.create_tags(&[id.into_string()], tags)
                    .await
                    .map_err(Error::aws("tagging the load balancer's security group"))?;
            }
            Change::AuthorizeIngress { group, rules } => {
                let perms: Vec<IpPermission> = rules.iter().map(Rule::to_permission).collect();
                shared::authorize_idempotent(
                    ec2,
                    &self.group(group)?,
                    &perms,
                    "authorizing load balancer ingress",
                )
                .await?;
            }
            Change::RevokeIngress { group, rules } => {
                let perms: Vec<IpPermission> = rules.iter().map(Rule::to_permission).collect();
                shared::revoke_idempotent(ec2, &self.group(group)?, &perms, "revoking load balancer ingress")
                    .await?;
            }
            Change::CreateLoadBalancer {
                name: lb_name,
                internal,
                subnets,
                security_groups,
                listeners,
                tags,
            } => {
                let groups = security_groups
                    .iter()
                    .map(|g| self.group(g))
                    .collect::<Result<Vec<_>, _>>()?;
                let dns = elb
                    .create_load_balancer(&NewClassicLoadBalancer {
                        name: lb_name.clone(),
                        internal: *internal,
                        subnets: subnets.iter().map(|s| SubnetId::new(s.clone())).collect(),
                        security_groups: groups,
                        listeners: listeners.iter().map(Listener::to_aws).collect(),
                        tags: tags.clone(),
                    })
                    .await
                    .map_err(Error::aws("creating the load balancer"))?;
                self.applied.created_dns_name = Some(dns);
            }
            Change::AddTags { tags } => elb
                .add_tags(name, tags)
                .await
                .map_err(Error::aws("tagging the load balancer"))?,
            Change::DeleteListeners { ports } => elb
                .delete_listeners(name, ports)
                .await
                .map_err(Error::aws("deleting listeners"))?,
            Change::CreateListeners { listeners } => {
                let listeners: Vec<ClassicListener> = listeners.iter().map(Listener::to_aws).collect();
                elb.create_listeners(name, &listeners)
                    .await
                    .map_err(Error::aws("creating listeners"))?;
            }
            Change::AttachSubnets { subnets } => {
                let subnets: Vec<SubnetId> = subnets.iter().map(|s| SubnetId::new(s.clone())).collect();
                elb.attach_subnets(name, &subnets)
                    .await
                    .map_err(Error::aws("attaching subnets"))?;
            }
            Change::DetachSubnets { subnets } => {
                let subnets: Vec<SubnetId> = subnets.iter().map(|s| SubnetId::new(s.clone())).collect();
                elb.detach_subnets(name, &subnets)
                    .await
                    .map_err(Error::aws("detaching subnets"))?;
            }
            Change::ApplySecurityGroups { groups } => {
                let groups = groups
                    .iter()
                    .map(|g| self.group(g))
                    .collect::<Result<Vec<_>, _>>()?;
                elb.apply_security_groups(name, &groups)
                    .await
                    .map_err(Error::aws("setting the load balancer's security groups"))?;
            }
            Change::ConfigureHealthCheck { health_check } => elb
                .configure_health_check(name, &health_check.to_aws())
                .await
                .map_err(Error::aws("configuring the health check"))?,
            Change::ModifyAttributes { attributes } => elb
                .modify_attributes(name, &attributes.to_aws())
                .await
                .map_err(Error::aws("setting attributes"))?,
            Change::CreatePolicy {
                name: policy,
                type_name,
                attributes,
            } => {
                let created = elb
                    .create_policy(
                        name,
                        &ClassicPolicy {
                            name: policy.clone(),
                            type_name: type_name.clone(),
                            attributes: attributes.clone(),
                        },
                    )
                    .await;
                match created {
                    Err(e) if e.kind() != ccm_aws_api::ErrorKind::Conflict => {
                        return Err(Error::aws("creating a load balancer policy")(e));
                    }
                    _ => {}
                }
            }
            Change::SetBackendPolicies {
                instance_port,
                policies,
            } => elb
                .set_backend_policies(name, *instance_port, policies)
                .await
                .map_err(Error::aws("setting back-end policies"))?,
            Change::SetListenerPolicies { port, policies } => elb
                .set_listener_policies(name, *port, policies)
                .await
                .map_err(Error::aws("setting listener policies"))?,
            Change::RegisterInstances { instances } => {
                let ids: Vec<InstanceId> = instances.iter().map(|s| InstanceId::new(s.clone())).collect();
                elb.register_instances(name, &ids)
                    .await
                    .map_err(Error::aws("registering instances"))?;
            }
            Change::DeregisterInstances { instances } => {
                let ids: Vec<InstanceId> = instances.iter().map(|s| InstanceId::new(s.clone())).collect();
                elb.deregister_instances(name, &ids)
                    .await
                    .map_err(Error::aws("deregistering instances"))?;
            }
            Change::AuthorizeNodeAccess { group, from } => {
                let from = self.group(from)?;
                match ec2
                    .authorize_ingress(&SecurityGroupId::new(group.clone()), &[node_rule(&from)])
                    .await
                {
                    Err(e) if e.kind() != ccm_aws_api::ErrorKind::Conflict => {
                        return Err(Error::aws("allowing the load balancer into a node group")(e));
                    }
                    _ => {}
                }
            }
            Change::RevokeNodeAccess { group, from } => {
                let from = self.group(from)?;
                match ec2
                    .revoke_ingress(&SecurityGroupId::new(group.clone()), &[node_rule(&from)])
                    .await
                {
                    Err(e) if !e.is_not_found() => {
                        return Err(Error::aws("revoking the load balancer's node rule")(e));
                    }
                    _ => {}
                }
            }
            Change::DeleteLoadBalancer { name: lb_name, .. } => elb
                .delete_load_balancer(lb_name)
                .await
                .map_err(Error::aws("deleting the load balancer"))?,
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
                            name: name.to_owned(),
                        });
                    }
                    Err(e) => return Err(Error::aws("deleting the load balancer's security group")(e)),
                }
            }
        }
        Ok(())
    }
}

/// Runs `changes` in order against AWS (the only function that mutates). `managed` is the observed managed
/// group, if any. Stops at the first failure; re-observing and re-planning then completes the work.
pub async fn apply<E: Ec2, L: Elb>(
    ec2: &E,
    elb: &L,
    config: &LoadBalancerConfig,
    name: &str,
    managed: Option<SecurityGroupId>,
    changes: &[Change],
) -> Result<Applied, Error> {
    let mut ctx = Context {
        ec2,
        elb,
        config,
        name,
        managed,
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
    /// The load balancer, if it still exists.
    pub load_balancer: Option<ClassicLoadBalancer>,
    /// Owned groups to delete.
    pub groups: Vec<SecurityGroupId>,
    /// (group, source) pairs: `group` allows all traffic from the owned group `source`.
    pub references: Vec<(SecurityGroupId, SecurityGroupId)>,
}

/// Reads what deletion needs: the load balancer, the groups this controller made for it (the managed group,
/// found by name too in case an earlier deletion stopped after the load balancer was gone; any other group it
/// uses only when owned by this cluster **and** tagged with this Service's name), and the rules referencing them.
/// Shared and untagged groups, `ElbSecurityGroup`, groups named by annotation and groups made for other Services
/// are never deleted.
pub async fn observe_delete<E: Ec2, L: Elb>(
    ec2: &E,
    elb: &L,
    config: &LoadBalancerConfig,
    name: &str,
    service_key: &str,
    keep: &BTreeSet<String>,
) -> Result<DeleteObserved, Error> {
    let context = "reading the load balancer to delete";
    let mut load_balancer = elb.load_balancer(name).await.map_err(Error::aws(context))?;
    if load_balancer.is_some() {
        let tags = elb.tags(name).await.map_err(Error::aws(context))?;
        if let Err(refused) = crate::ownership::check(config, name, &tags) {
            // Not ours: left alone with the groups it uses; our own leftovers are still found by name below.
            tracing::warn!(load_balancer = name, %refused, "not deleting a load balancer this cluster does not own");
            load_balancer = None;
        }
    }
    let mut candidates: BTreeSet<SecurityGroupId> = load_balancer
        .as_ref()
        .map(|lb| lb.security_groups.iter().cloned().collect())
        .unwrap_or_default();
    let mut groups = Vec::new();
    if let Some(managed) = shared::find_group(ec2, config, &shared::security_group_name(name)).await? {
        candidates.remove(&managed.id);
        if config.cluster.is_owned(&managed.tags) {
            groups.push(managed.id);
        }
    }
    candidates.retain(|g| !keep.contains(g.as_str()) && config.elb_security_group.as_ref() != Some(g));
    if !candidates.is_empty() {
        let found = ec2
            .security_groups(&[Filter::new(
                "group-id",
                candidates.iter().map(SecurityGroupId::as_str),
            )])
            .await
            .map_err(Error::aws(context))?;
        groups.extend(
            found
                .into_iter()
                .filter(|g| {
                    config.cluster.is_owned(&g.tags)
                        && g.tags.get(shared::SERVICE_NAME_TAG).map(String::as_str) == Some(service_key)
                })
                .map(|g| g.id),
        );
    }
    let mut references = Vec::new();
    if !groups.is_empty() {
        let referencing = ec2
            .security_groups(&[Filter::new(
                "ip-permission.group-id",
                groups.iter().map(SecurityGroupId::as_str),
            )])
            .await
            .map_err(Error::aws(context))?;
        for g in &referencing {
            for source in &groups {
                if g.id != *source && shared::allows_all_from(g, source) {
                    references.push((g.id.clone(), source.clone()));
                }
            }
        }
    }
    Ok(DeleteObserved {
        load_balancer,
        groups,
        references,
    })
}

/// The deletion plan (pure): revoke the rules referencing the owned groups, delete the load balancer, delete
/// the owned groups.
pub fn plan_delete(name: &str, observed: &DeleteObserved) -> Vec<Change> {
    let mut changes: Vec<Change> = observed
        .references
        .iter()
        .map(|(group, source)| Change::RevokeNodeAccess {
            group: group.to_string(),
            from: GroupRef::Id(source.to_string()),
        })
        .collect();
    if observed.load_balancer.is_some() {
        changes.push(Change::DeleteLoadBalancer {
            name: name.to_owned(),
            recreate_because: None,
        });
    }
    changes.extend(
        observed
            .groups
            .iter()
            .map(|g| Change::DeleteSecurityGroup { group: g.to_string() }),
    );
    changes
}

#[cfg(test)]
pub(crate) mod tests;
