//! The desired Classic ELB of a Service ([`build`], pure): its listeners, health check, attributes, groups and
//! instances, and how each compares with (and converts to) what AWS reports.

use ccm_aws_api::{
    InstanceId, SubnetId, Tags,
    elb::{ClassicAccessLog, ClassicAttributes, ClassicHealthCheck, ClassicListener},
};
use ccm_cloud_provider::NodeView;
use serde::Serialize;

use crate::{
    Error, LoadBalancerConfig,
    shared::{self, GroupRef, HealthProbeMode, ManagedGroup},
    spec::{PortSpec, ServiceSpec},
};

/// The proxy protocol policy's name.
pub const PROXY_PROTOCOL_POLICY: &str = "k8s-proxyprotocol-enabled";

/// The prefix of the SSL negotiation policies this controller (and upstream) creates.
pub(crate) const SSL_POLICY_PREFIX: &str = "k8s-SSLNegotiationPolicy-";

/// The SSL negotiation policy's name for the predefined policy `reference`.
pub fn ssl_policy_name(reference: &str) -> String {
    format!("{SSL_POLICY_PREFIX}{reference}")
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
    /// Whether a change only a new load balancer can apply may replace this one (the Service's
    /// `aws-load-balancer-allow-recreation`, or `--allow-load-balancer-recreation`).
    pub allow_recreation: bool,
    /// `aws-load-balancer-release-on-deletion` (`None`: release only an adopted load balancer); an adopted one is
    /// recreated only when this is `Some(false)`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub release_on_deletion: Option<bool>,
    /// Whether the name is not the Service's UID name (`aws-load-balancer-name`, or one kept from before a
    /// rename): a name anyone may choose proves nothing, so a load balancer under it must also name this
    /// Service in its `kubernetes.io/service-name` tag ([`crate::ownership::claim`]).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub name_chosen: bool,
}

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

pub(crate) fn health_check(spec: &ServiceSpec, config: &LoadBalancerConfig) -> HealthCheck {
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
    nodes: &[&NodeView],
    config: &LoadBalancerConfig,
    subnets: &[SubnetId],
) -> Result<Desired, Error> {
    config.check_health_check_port(spec)?;
    let name = shared::service_load_balancer_name(spec)?;
    let name_chosen = name != shared::load_balancer_name(&spec.uid)?;
    let listeners: Vec<Listener> = spec.ports.iter().map(|p| listener(spec, p)).collect();
    let configured = "the cloud config gives every Classic ELB the group ElbSecurityGroup";
    shared::check_prefix_lists(spec, config.elb_security_group.as_ref().map(|_| configured))?;
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
                    ingress: shared::load_balancer_ingress(
                        protocol,
                        &ports,
                        &spec.source_ranges,
                        &spec.prefix_lists,
                    ),
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
        allow_recreation: spec.allow_recreation || config.allow_recreation,
        release_on_deletion: spec.release_on_deletion,
        name_chosen,
        listeners,
        name,
    })
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

    pub(crate) fn to_aws(&self) -> ClassicListener {
        let mut l = ClassicListener::new(
            &self.protocol,
            self.port,
            &self.instance_protocol,
            self.instance_port,
        );
        l.ssl_certificate_id.clone_from(&self.ssl_certificate_id);
        l
    }

    pub(crate) fn is_secure(&self) -> bool {
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

    pub(crate) fn to_aws(&self) -> ClassicHealthCheck {
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
    pub(crate) fn matches(&self, observed: &ClassicAttributes) -> bool {
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
    pub(crate) fn to_aws(&self) -> ClassicAttributes {
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
pub(crate) fn fresh_attributes() -> ClassicAttributes {
    ClassicAttributes {
        cross_zone: false,
        access_log: ClassicAccessLog::default(),
        connection_draining_enabled: false,
        connection_draining_timeout: Some(300),
        idle_timeout: Some(60),
    }
}
