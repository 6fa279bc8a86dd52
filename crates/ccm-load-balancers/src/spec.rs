//! A Service parsed once into a typed [`ServiceSpec`]: the annotations of the table, the relevant Service fields,
//! and every problem collected (never only the first). [`parse_service`] runs three parts: [`flavour`] (which
//! load balancer, and the annotations of the other one), [`flavour_change`] (the only home of the rule that a
//! Service keeps the flavour it was created with) and [`fields`] (the rest of the spec, each field validated).

mod families;
pub mod fields;
pub mod flavour;
pub mod flavour_change;
mod nlb_options;

use std::collections::BTreeMap;

use ccm_aws_api::Tags;
use k8s_openapi::api::core::v1::Service;
use serde::Serialize;

use crate::annotations::{Annotations, AttributeKeys, Key, Problem, Warning};

pub use flavour::Flavour;
pub use flavour_change::{ExistingFlavour, existing_flavour};

/// The IP address type of an NLB (`aws-load-balancer-ip-address-type`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum IpAddressType {
    /// IPv4 addresses only (the default).
    #[default]
    Ipv4,
    /// IPv4 and IPv6 addresses.
    Dualstack,
}

/// One Service port with a node port.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct PortSpec {
    /// The port name (may be empty).
    pub name: String,
    /// `TCP` or `UDP`.
    pub protocol: String,
    /// The front-end port.
    pub port: i32,
    /// The node port (the back end).
    pub node_port: i32,
    /// The target port when it is a number (`None`: a named port, resolved per pod by its EndpointSlices).
    pub target_port: Option<i32>,
}

/// Access log settings.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct AccessLogSpec {
    /// Whether logs are written.
    pub enabled: bool,
    /// Minutes between files (Classic: 5 or 60).
    pub emit_interval: Option<i32>,
    /// The bucket.
    pub bucket: Option<String>,
    /// The key prefix.
    pub prefix: Option<String>,
}

/// The health check annotations (all optional: the builder applies the flavour's defaults).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct HealthCheckSpec {
    /// `TCP`, `SSL`, `HTTP`, `HTTPS`.
    pub protocol: Option<String>,
    /// `Some(None)` = `traffic-port`, `Some(Some(p))` = port `p`.
    pub port: Option<Option<i32>>,
    /// The path.
    pub path: Option<String>,
    /// Healthy threshold.
    pub healthy_threshold: Option<i32>,
    /// Unhealthy threshold.
    pub unhealthy_threshold: Option<i32>,
    /// Timeout in seconds.
    pub timeout: Option<i32>,
    /// Interval in seconds.
    pub interval: Option<i32>,
}

/// Everything about a Service that decides its load balancer, parsed and validated. Non-exhaustive: it grows
/// with the annotations served.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct ServiceSpec {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// `metadata.uid`.
    pub uid: String,
    /// The flavour.
    pub flavour: Flavour,
    /// `internal` scheme.
    pub internal: bool,
    /// The ports with node ports, in spec order.
    pub ports: Vec<PortSpec>,
    /// Client CIDRs: empty when only managed prefix lists are given.
    pub source_ranges: Vec<String>,
    /// Whether `source_ranges` is the default (`0.0.0.0/0`), not given by the user (false when prefix lists
    /// replace that default).
    pub source_ranges_defaulted: bool,
    /// Managed prefix list IDs (`pl-…`) let in on the listener ports, by the load balancer's own group only
    /// (`aws-load-balancer-security-group-prefix-lists`).
    pub prefix_lists: Vec<String>,
    /// `externalTrafficPolicy: Local`.
    pub local_traffic: bool,
    /// `spec.healthCheckNodePort` (for `Local`).
    pub health_check_node_port: Option<i32>,
    /// Subnet IDs or names from the annotation.
    pub subnets: Option<Vec<String>>,
    /// BYO security groups.
    pub security_groups: Option<Vec<String>>,
    /// Extra security groups.
    pub extra_security_groups: Vec<String>,
    /// Additional tags.
    pub additional_tags: Tags,
    /// Node label filter (empty value = any value).
    pub target_node_labels: Vec<(String, String)>,
    /// `aws-load-balancer-target-nodes-with-endpoints` on an NLB under `externalTrafficPolicy: Local`: only the
    /// nodes that run a ready endpoint of the Service are targets.
    pub endpoint_nodes_only: bool,
    /// `aws-load-balancer-nlb-target-type: ip` on an NLB: the pods' addresses are the targets.
    pub ip_targets: bool,
    /// Whether `spec.selector` chooses pods: only then does the endpoint-slice controller write (and correct)
    /// the Service's slices, so only then can IP targets trust them.
    pub has_selector: bool,
    /// The endpoints IP targets are made of: the ready, non-terminating endpoints of slices the endpoint-slice
    /// controller wrote, as the service controller handed them ([`ServiceSpec::with_endpoints`]). `None` where
    /// they are not known (drift repair, a caller that hands none): the IP targets registered are then left as
    /// they are, never taken for "no pods".
    #[serde(skip)]
    pub pod_endpoints: Option<Vec<ccm_cloud_provider::Endpoint>>,
    /// `http`, `https`, `ssl`, `tcp`.
    pub backend_protocol: Option<String>,
    /// The certificate ARN (of several, the first: the listeners' default).
    pub ssl_cert: Option<String>,
    /// The certificates after the first (NLB TLS listeners only: their certificate list, chosen by SNI).
    pub extra_ssl_certs: Vec<String>,
    /// Ports or names getting the certificate; empty = all.
    pub ssl_ports: Vec<String>,
    /// SSL negotiation policy name.
    pub ssl_negotiation_policy: Option<String>,
    /// The ALPN policy of NLB TLS listeners (`None` when not annotated).
    pub alpn_policy: Option<String>,
    /// Proxy protocol on the back ends.
    pub proxy_protocol: bool,
    /// Idle timeout in seconds.
    pub idle_timeout: i32,
    /// Connection draining.
    pub draining_enabled: bool,
    /// Draining timeout, if set.
    pub draining_timeout: Option<i32>,
    /// Cross-zone load balancing.
    pub cross_zone: bool,
    /// Access logs.
    pub access_log: AccessLogSpec,
    /// Health check annotations.
    pub health_check: HealthCheckSpec,
    /// The HTTP codes of a healthy answer to an NLB's HTTP or HTTPS health check (`None`: left as it is).
    pub health_check_success_codes: Option<String>,
    /// NLB Elastic IP allocations.
    pub eip_allocations: Vec<String>,
    /// NLB private IPv4 addresses.
    pub private_ipv4_addresses: Vec<String>,
    /// NLB target group attributes (validated keys and values, as AWS takes them).
    pub target_group_attributes: BTreeMap<String, String>,
    /// NLB attributes from `aws-load-balancer-attributes` (owned while given; cross zone and access logs
    /// agree with their own annotations).
    pub load_balancer_attributes: BTreeMap<String, String>,
    /// NLB listener attributes from `aws-load-balancer-listener-attributes.<PROTOCOL>-<port>` (checked against
    /// the listeners when the NLB is modelled).
    pub listener_attributes: Vec<crate::annotations::ListenerAttributes>,
    /// `aws-load-balancer-allow-recreation`: the Service consents to its load balancer being replaced.
    pub allow_recreation: bool,
    /// `aws-load-balancer-adopt`: the Service consents to adopt the load balancer handed over to it.
    pub adopt: bool,
    /// `aws-load-balancer-release-on-deletion` (`None`: release only an adopted load balancer).
    pub release_on_deletion: Option<bool>,
    /// `aws-load-balancer-name`: the load balancer's name chosen by the Service (`None`: the UID name).
    pub load_balancer_name: Option<String>,
    /// NLB IP address type.
    pub ip_address_type: IpAddressType,
    /// Whether the NLB's targets are IPv6 (target groups of IP address type `ipv6`): a Service of the IPv6 family
    /// only (`spec.ipFamilies: [IPv6]`) on a dual-stack NLB.
    pub ipv6_targets: bool,
    /// Whether dual-stack comes only from `spec.ipFamilyPolicy: PreferDualStack`: an NLB whose subnets lack
    /// IPv6 then falls back to IPv4 (with a Warning) instead of failing.
    pub dual_stack_preferred: bool,
    /// Values served with the Go controller's surprising meaning (they never block the Service): logged at
    /// warning level by [`parse_service`], for the caller to post as Warning Events.
    pub warnings: Vec<Warning>,
}

/// A Service whose load balancer cannot be built: every problem found, each naming the field or annotation,
/// the value and what is accepted. Nothing in AWS is changed for such a Service.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid Service {namespace}/{name} for a load balancer: {}", problems.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
pub struct InvalidService {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// Every problem.
    pub problems: Vec<Problem>,
}

// === impl InvalidService ===

impl InvalidService {
    /// `Ok` without problems, else the Service's error naming every one.
    pub fn check(spec: &ServiceSpec, problems: Vec<Problem>) -> Result<(), Self> {
        if problems.is_empty() {
            return Ok(());
        }
        Err(Self {
            namespace: spec.namespace.clone(),
            name: spec.name.clone(),
            problems,
        })
    }
}

/// The problems and warnings found while parsing, in the order they were found.
#[derive(Debug, Default)]
pub(crate) struct Findings {
    problems: Vec<Problem>,
    warnings: Vec<Warning>,
}

/// Parses and validates a Service; every problem is collected. Attribute keys are checked against the keys AWS
/// documents only: a controller with a cloud config uses [`parse_service_with`].
pub fn parse_service(service: &Service) -> Result<ServiceSpec, InvalidService> {
    parse_service_with(service, &AttributeKeys::default())
}

/// [`parse_service`], the attribute annotations accepting `keys` (the documented keys and the cloud config's
/// `[Global] ExtraLoadBalancerAttributeKeys`, [`crate::LoadBalancerConfig::attribute_keys`]).
pub fn parse_service_with(service: &Service, keys: &AttributeKeys) -> Result<ServiceSpec, InvalidService> {
    let empty = BTreeMap::new();
    let raw = service.metadata.annotations.as_ref().unwrap_or(&empty);
    let a = Annotations::parse_with(raw, keys);
    let k8s_default = Default::default();
    let k8s = service.spec.as_ref().unwrap_or(&k8s_default);
    let mut found = Findings {
        problems: a.problems.clone(),
        warnings: a.warnings.clone(),
    };
    fields::source_ranges_field_wins(k8s, raw, &mut found);
    let flavour = flavour::of(&a);
    if flavour != Flavour::External {
        flavour::reject_other_flavours_annotations(&flavour, raw, &mut found);
        flavour_change::check_status(service, &flavour, &a, &mut found);
        fields::check_unsupported(k8s, &mut found);
    }
    let spec = fields::spec(service, k8s, &a, flavour, &mut found);
    found.finish(spec)
}

// === impl Findings ===

impl Findings {
    /// Records a warning: the Service is served, differently from what it asks.
    pub(crate) fn warn(&mut self, warning: Warning) {
        self.warnings.push(warning);
    }

    /// Turns the problems of `field` into warnings saying `message`: a value served as the Go controller served
    /// it (ignored), never refused.
    pub(crate) fn problems_to_warnings(&mut self, field: &str, message: &str) {
        let (demoted, kept) = std::mem::take(&mut self.problems)
            .into_iter()
            .partition(|p| p.field == field);
        self.problems = kept;
        self.warnings
            .extend(demoted.into_iter().map(|p: Problem| Warning {
                field: p.field,
                value: p.value,
                message: message.to_owned(),
            }));
    }

    /// Records a problem with `field`'s `value`, saying what is `accepted`.
    pub(crate) fn problem(&mut self, field: &str, value: String, accepted: &str) {
        self.problems.push(Problem {
            field: field.to_owned(),
            value,
            accepted: accepted.to_owned(),
        });
    }

    /// The spec, or every problem that blocks it. Warnings are logged; the problems of annotations the flavour
    /// ignores are logged and dropped (an `External` Service keeps only its type's).
    fn finish(mut self, mut out: ServiceSpec) -> Result<ServiceSpec, InvalidService> {
        if out.flavour == Flavour::External {
            self.warnings.retain(|w| w.field == Key::Type.name());
        }
        out.warnings = self.warnings;
        for w in &out.warnings {
            tracing::warn!(service = %out.key(), annotation = %w.field, value = %w.value, "{}", w.message);
        }
        if out.flavour == Flavour::External {
            // Only the type matters: the other controller validates the rest.
            self.problems.retain(|p| p.field == Key::Type.name());
        }
        // A bad value of an annotation the flavour ignores does not block the Service (it is only logged).
        self.problems.retain(|p| {
            let keep = !flavour::ignores(&out.flavour, &p.field);
            if !keep {
                tracing::warn!(service = %out.key(), annotation = %p.field, value = %p.value, "invalid value of an annotation this load balancer type ignores");
            }
            keep
        });
        if self.problems.is_empty() {
            Ok(out)
        } else {
            Err(InvalidService {
                namespace: out.namespace,
                name: out.name,
                problems: self.problems,
            })
        }
    }
}

// === impl PortSpec ===

impl PortSpec {
    /// A TCP or UDP port (`protocol`) with its node port and numeric target port (tests and tools).
    pub fn new(name: &str, protocol: &str, port: i32, node_port: i32, target_port: Option<i32>) -> Self {
        Self {
            name: name.to_owned(),
            protocol: protocol.to_owned(),
            port,
            node_port,
            target_port,
        }
    }
}

// === impl IpAddressType ===

impl IpAddressType {
    /// The value AWS takes (`ipv4`, `dualstack`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ipv4 => "ipv4",
            Self::Dualstack => "dualstack",
        }
    }
}

// === impl ServiceSpec ===

impl ServiceSpec {
    /// `<namespace>/<name>`.
    pub fn key(&self) -> String {
        ccm_cloud_provider::namespaced_key(&self.namespace, &self.name)
    }

    /// This spec with the endpoints its IP targets are made of, when it has IP targets and `endpoints` are
    /// known: only the ready, non-terminating endpoints of slices the endpoint-slice controller wrote. Endpoints
    /// of slices anybody else wrote (a Service without a selector) could point the NLB at any address the
    /// nodes reach, so they never become targets.
    #[must_use]
    pub fn with_endpoints(mut self, endpoints: Option<&ccm_cloud_provider::ServiceEndpoints>) -> Self {
        if self.ip_targets
            && let Some(endpoints) = endpoints
        {
            // Without a selector no controller writes (or corrects) the slices: whoever labels one as the
            // controller's could name any address. Such a Service has no pod targets (a Warning says so).
            let usable = endpoints.ready().filter(|e| e.managed && self.has_selector);
            self.pod_endpoints = Some(usable.cloned().collect());
        }
        self
    }

    /// Whether port `p` gets the certificate (Classic: names compared case-insensitively).
    pub fn is_ssl_port(&self, p: &PortSpec) -> bool {
        self.ssl_ports.is_empty()
            || self
                .ssl_ports
                .iter()
                .any(|s| s.parse::<i32>().is_ok_and(|n| n == p.port) || s.eq_ignore_ascii_case(&p.name))
    }
}

/// The Service's namespace and name; a Service without a namespace (a manifest given to `lb-plan`) is in
/// `default`, as `kubectl apply` would put it.
pub(crate) fn namespace_and_name(service: &Service) -> (&str, &str) {
    let meta = &service.metadata;
    (
        meta.namespace.as_deref().unwrap_or("default"),
        meta.name.as_deref().unwrap_or_default(),
    )
}

#[cfg(test)]
mod tests;
