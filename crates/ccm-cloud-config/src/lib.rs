//! The cloud config (`--cloud-config`): an INI file in the gcfg dialect with a `[Global]` section and any number
//! of `[ServiceOverride "<name>"]` sections.
//!
//! Section and key names are case-insensitive; values may be quoted (`"..."` with `\"`, `\\`, `\n`, `\t`
//! escapes); `;` and `#` start comments; a multi-valued key (`NodeIPFamilies`) is repeated on several lines; a
//! boolean key written alone means `true`. Parsing collects every problem: each error names its line, field and
//! the accepted values. Unknown keys and sections are not errors (the reference implementation tolerates them
//! too) but are reported as warnings.
//!
//! ```
//! use ccm_cloud_config::CloudConfig;
//!
//! let config = CloudConfig::parse("[Global]\nKubernetesClusterID = my-cluster\nZone = eu-west-1b\n").unwrap();
//! assert_eq!(config.global.configured_region().as_deref(), Some("eu-west-1"));
//! assert!(CloudConfig::parse("[Global]\nNLBSecurityGroupMode = Sometimes\n").is_err());
//! ```
//!
//! Parsing only: no AWS SDK and no I/O beyond [`CloudConfig::load`]'s file read, so that tools and the fuzz
//! targets read the file without building an AWS client. `ccm-aws` turns it into the adapter's options.
//!
//! May depend on: `regex`, `thiserror`. Nothing AWS, nothing Kubernetes, no workspace crate.

#![cfg_attr(
    test,
    allow(
        clippy::too_many_lines,
        reason = "the function limit is for code, not for tests"
    )
)]

use std::fmt;

use regex::Regex;

use parser::Parser;

/// The parsed cloud config.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct CloudConfig {
    /// `[Global]`.
    pub global: GlobalConfig,
    /// `[ServiceOverride "<name>"]` sections, in file order.
    pub service_overrides: Vec<ServiceOverride>,
    /// Unknown keys and sections, and repeated single-valued keys (the last value wins).
    pub warnings: Vec<String>,
}

/// The `[Global]` section.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct GlobalConfig {
    /// `Zone`: legacy; the region is derived from it and wins over `Region`.
    pub zone: Option<String>,
    /// `Region`; empty means "ask IMDS".
    pub region: Option<String>,
    /// `VPC`.
    pub vpc: Option<String>,
    /// `SubnetID`.
    pub subnet_id: Option<String>,
    /// `RouteTableID`.
    pub route_table_id: Option<String>,
    /// `RoleARN`: a role to assume for EC2 and ELB calls.
    pub role_arn: Option<String>,
    /// `SourceARN`: sent as `x-amz-source-arn` when assuming `RoleARN`.
    pub source_arn: Option<String>,
    /// `KubernetesClusterTag`: legacy cluster ID (also writes `KubernetesCluster=<id>`).
    pub kubernetes_cluster_tag: Option<String>,
    /// `KubernetesClusterID`.
    pub kubernetes_cluster_id: Option<String>,
    /// `DisableSecurityGroupIngress`.
    pub disable_security_group_ingress: bool,
    /// `ElbSecurityGroup`: one security group for every Classic load balancer.
    pub elb_security_group: Option<String>,
    /// `NodeIPFamilies`, in order (default `[ipv4]`).
    pub node_ip_families: Vec<IpFamily>,
    /// `ClusterServiceLoadBalancerHealthProbeMode`.
    pub health_probe_mode: HealthProbeMode,
    /// `ClusterServiceSharedLoadBalancerHealthProbePort` (0 in the file means the default 10256).
    pub shared_health_probe_port: u16,
    /// `ClusterServiceSharedLoadBalancerHealthProbePath`.
    pub shared_health_probe_path: String,
    /// `SupportedTopologyInstanceTypePattern` (a valid regular expression).
    pub supported_topology_instance_type_pattern: String,
    /// `NLBSecurityGroupMode`.
    pub nlb_security_group_mode: NlbSecurityGroupMode,
    /// `AdoptUntaggedLoadBalancers` (this implementation's own key, default false): a load balancer under a
    /// Service's name that carries no cluster tag is adopted instead of refused.
    pub adopt_untagged_load_balancers: bool,
    /// `ExtraLoadBalancerAttributeKeys` (this implementation's own key, comma-separated, default none): NLB,
    /// listener and target group attribute keys the attribute annotations accept beside those AWS documents
    /// (for keys AWS added after this controller's list).
    pub extra_load_balancer_attribute_keys: Vec<String>,
    /// `AllowedHealthCheckPorts` (this implementation's own key, comma-separated ports and inclusive ranges such as
    /// `8080, 9000-9100`, default none): ports a Service may name in `aws-load-balancer-healthcheck-port` beside
    /// its own node ports, its `healthCheckNodePort` and the shared probe port (the health-check port is opened on
    /// every target node).
    pub allowed_health_check_ports: Vec<(u16, u16)>,
    /// `NodeZoneLabel` (this implementation's own key, default `ZoneName`): what Nodes get in
    /// `topology.kubernetes.io/zone` (kubernetes/cloud-provider-aws#1185). Labels are written once, when a Node is
    /// initialized, so the form must not change once Nodes carry it: the CCM refuses to start then.
    pub node_zone_label: NodeZoneLabel,
}

/// An IP family of node addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IpFamily {
    /// `ipv4`
    Ipv4,
    /// `ipv6`
    Ipv6,
}

/// How load balancers of `externalTrafficPolicy: Cluster` Services check node health.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum HealthProbeMode {
    /// `ServiceNodePort` (or empty): the Service's own node port.
    #[default]
    ServiceNodePort,
    /// `Shared`: kube-proxy's health endpoint (`ClusterServiceSharedLoadBalancerHealthProbePort`/`Path`).
    Shared,
}

/// Whether NLBs get a managed security group.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum NlbSecurityGroupMode {
    /// Empty: NLBs are created without security groups.
    #[default]
    Off,
    /// `Managed`.
    Managed,
}

/// What a Node's zone label (`topology.kubernetes.io/zone`) holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum NodeZoneLabel {
    /// `ZoneName` (or empty): the zone name (`us-east-1a`), as upstream. Names map to physical zones differently
    /// in each account.
    #[default]
    ZoneName,
    /// `ZoneID`: the zone ID (`use1-az1`), the same physical zone in every account, for clusters whose Nodes or
    /// zonal resources span accounts.
    ZoneId,
}

/// A `[ServiceOverride "<name>"]` section.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct ServiceOverride {
    /// The section's name.
    pub name: String,
    /// `Service`: `EC2`, `Elastic Load Balancing`, `Elastic Load Balancing v2`, `STS`, `KMS`, `ec2imds` (the
    /// lower-case SDK v1 names `ec2`, `elasticloadbalancing`, `elasticloadbalancingv2`, `sts`, `kms` too).
    pub service: String,
    /// `Region`: the client region the override applies to.
    pub region: String,
    /// `URL`.
    pub url: String,
    /// `SigningRegion`.
    pub signing_region: String,
    /// `SigningMethod` (accepted, unused: requests are always signed with SigV4).
    pub signing_method: String,
    /// `SigningName`: the service name requests are signed for (the service's own when empty).
    pub signing_name: String,
}

/// The services a `ServiceOverride` can name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum OverrideService {
    /// EC2.
    Ec2,
    /// Classic ELB.
    Elb,
    /// ELBv2.
    Elbv2,
    /// STS.
    Sts,
    /// KMS (unused by this CCM; accepted for compatibility).
    Kms,
    /// The instance metadata service (`ec2imds`); its region is not matched.
    Imds,
}

/// One problem in the cloud config.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// The 1-based line, when the problem has one.
    pub line: Option<usize>,
    /// `Global.NodeIPFamilies`, `ServiceOverride "1".URL`, ...
    pub field: String,
    /// What is wrong.
    pub message: String,
    /// The accepted values, when there is a fixed set.
    pub accepted: Option<String>,
}

/// Every problem of a cloud config.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct CloudConfigErrors(pub Vec<ConfigError>);

/// The default `SupportedTopologyInstanceTypePattern`.
pub const DEFAULT_TOPOLOGY_PATTERN: &str = r"^(hpc|trn|p)[0-9]+[a-z]*(-[a-z0-9]+)?(\.[0-9a-z]*)$";
/// The default shared health probe port (kube-proxy's health check).
pub const DEFAULT_SHARED_PROBE_PORT: u16 = 10256;

/// The keys of `[Global]` the parser accepts, spelled as upstream documents them (matched ignoring case).
pub const GLOBAL_KEYS: &[&str] = &[
    "Zone",
    "Region",
    "VPC",
    "SubnetID",
    "RouteTableID",
    "RoleARN",
    "SourceARN",
    "KubernetesClusterTag",
    "KubernetesClusterID",
    "DisableSecurityGroupIngress",
    "ElbSecurityGroup",
    "NodeIPFamilies",
    "ClusterServiceLoadBalancerHealthProbeMode",
    "ClusterServiceSharedLoadBalancerHealthProbePort",
    "ClusterServiceSharedLoadBalancerHealthProbePath",
    "SupportedTopologyInstanceTypePattern",
    "NLBSecurityGroupMode",
    "AdoptUntaggedLoadBalancers",
    "ExtraLoadBalancerAttributeKeys",
    "AllowedHealthCheckPorts",
    "NodeZoneLabel",
];
/// The keys of a `[ServiceOverride "<n>"]` section the parser accepts (matched ignoring case).
pub const OVERRIDE_KEYS: &[&str] = &[
    "Service",
    "Region",
    "URL",
    "SigningRegion",
    "SigningMethod",
    "SigningName",
];
const ESCAPES: &str = r#"a value with balanced quotes and only the escapes \\ \" \n \t"#;
const BOOL_VALUES: &str = "true, false, yes, no, on, off, 1, 0 (or the key alone for true)";

/// Why the file named by `--cloud-config` gave no configuration.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LoadError {
    /// The file could not be read.
    #[error("--cloud-config={path}: {source}")]
    Read {
        /// The path.
        path: String,
        /// The failure.
        #[source]
        source: std::io::Error,
    },
    /// The file is not a valid cloud config.
    #[error("--cloud-config={path}: {errors}")]
    Invalid {
        /// The path.
        path: String,
        /// Every problem found.
        errors: CloudConfigErrors,
    },
}

// === impl CloudConfig ===

impl CloudConfig {
    /// Reads and parses the file `--cloud-config` names; an empty path means the defaults (as upstream, where the
    /// flag is optional). Warnings (unknown keys) are left in [`CloudConfig::warnings`] for the caller to log.
    pub fn load(path: &str) -> Result<Self, LoadError> {
        if path.is_empty() {
            return Ok(Self::default());
        }
        let text = std::fs::read_to_string(path).map_err(|source| LoadError::Read {
            path: path.to_owned(),
            source,
        })?;
        Self::parse(&text).map_err(|errors| LoadError::Invalid {
            path: path.to_owned(),
            errors,
        })
    }

    /// Parses and validates a cloud config.
    pub fn parse(text: &str) -> Result<Self, CloudConfigErrors> {
        Parser::default().run(text)
    }

    /// The override for `service` in `region` (IMDS overrides match any region).
    pub fn service_override(&self, service: OverrideService, region: &str) -> Option<&ServiceOverride> {
        let in_region = |o: &&ServiceOverride| service == OverrideService::Imds || o.region.trim() == region;
        self.service_overrides
            .iter()
            .filter(in_region)
            .find(|o| o.service_kind() == Some(service))
            .or_else(|| {
                // Under the Go SDK v1 both load balancer clients resolved the endpoint ID `elasticloadbalancing`,
                // so a legacy override of that name also reached ELBv2 (an explicit ELBv2 override wins).
                (service == OverrideService::Elbv2).then_some(())?;
                self.service_overrides
                    .iter()
                    .filter(in_region)
                    .find(|o| o.service.trim().eq_ignore_ascii_case("elasticloadbalancing"))
            })
    }
}

// === impl GlobalConfig ===

impl Default for GlobalConfig {
    fn default() -> Self {
        Self {
            zone: None,
            region: None,
            vpc: None,
            subnet_id: None,
            route_table_id: None,
            role_arn: None,
            source_arn: None,
            kubernetes_cluster_tag: None,
            kubernetes_cluster_id: None,
            disable_security_group_ingress: false,
            elb_security_group: None,
            node_ip_families: vec![IpFamily::Ipv4],
            health_probe_mode: HealthProbeMode::ServiceNodePort,
            shared_health_probe_port: DEFAULT_SHARED_PROBE_PORT,
            shared_health_probe_path: "/healthz".to_owned(),
            supported_topology_instance_type_pattern: DEFAULT_TOPOLOGY_PATTERN.to_owned(),
            nlb_security_group_mode: NlbSecurityGroupMode::Off,
            adopt_untagged_load_balancers: false,
            extra_load_balancer_attribute_keys: Vec::new(),
            allowed_health_check_ports: Vec::new(),
            node_zone_label: NodeZoneLabel::ZoneName,
        }
    }
}

impl GlobalConfig {
    /// The configured region: derived from `Zone` when set (it wins, as in the reference implementation), else
    /// `Region`; `None` means "ask IMDS".
    pub fn configured_region(&self) -> Option<String> {
        self.zone
            .as_deref()
            .and_then(region_of_zone)
            .or_else(|| self.region.clone())
    }

    /// The cluster ID from the config (`KubernetesClusterID`, else `KubernetesClusterTag`), and whether it is
    /// the legacy form.
    pub fn cluster_id(&self) -> Option<(&str, bool)> {
        match (&self.kubernetes_cluster_id, &self.kubernetes_cluster_tag) {
            (Some(id), legacy) => Some((id, legacy.is_some())),
            (None, Some(tag)) => Some((tag, true)),
            (None, None) => None,
        }
    }

    /// Whether the control plane runs outside the cluster's VPC (or account): `VPC`, `SubnetID` or `RoleARN`, and
    /// a cluster ID are all configured, so the CCM must not look itself up through IMDS.
    pub fn is_external_control_plane(&self) -> bool {
        self.vpc.is_some()
            && (self.subnet_id.is_some() || self.role_arn.is_some())
            && self.cluster_id().is_some()
    }
}

// === impl ServiceOverride ===

impl ServiceOverride {
    /// The service named, by SDK v2 service ID or legacy v1 name (case-insensitive).
    pub fn service_kind(&self) -> Option<OverrideService> {
        match self.service.trim().to_ascii_lowercase().as_str() {
            "ec2" => Some(OverrideService::Ec2),
            "elastic load balancing" | "elasticloadbalancing" => Some(OverrideService::Elb),
            "elastic load balancing v2" | "elasticloadbalancingv2" => Some(OverrideService::Elbv2),
            "sts" => Some(OverrideService::Sts),
            "kms" => Some(OverrideService::Kms),
            "ec2imds" => Some(OverrideService::Imds),
            _ => None,
        }
    }
}

// === impl IpFamily ===

impl IpFamily {
    /// `ipv4` or `ipv6`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ipv4 => "ipv4",
            Self::Ipv6 => "ipv6",
        }
    }
}

// === impl NodeZoneLabel ===

impl NodeZoneLabel {
    /// `ZoneName` or `ZoneID`, as the key takes it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ZoneName => "ZoneName",
            Self::ZoneId => "ZoneID",
        }
    }
}

// === impl ConfigError ===

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(line) = self.line {
            write!(f, "line {line}: ")?;
        }
        write!(f, "{}: {}", self.field, self.message)?;
        if let Some(accepted) = &self.accepted {
            write!(f, " (accepted: {accepted})")?;
        }
        Ok(())
    }
}

// === impl CloudConfigErrors ===

impl fmt::Display for CloudConfigErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "invalid cloud config ({} problem{})",
            self.0.len(),
            if self.0.len() == 1 { "" } else { "s" }
        )?;
        for error in &self.0 {
            write!(f, "; {error}")?;
        }
        Ok(())
    }
}

/// The region of an availability zone (`us-east-1a` → `us-east-1`), as `^([a-zA-Z]+-)+\d+`.
pub fn region_of_zone(zone: &str) -> Option<String> {
    static RE: std::sync::OnceLock<Option<Regex>> = std::sync::OnceLock::new();
    let re = RE
        .get_or_init(|| Regex::new(r"^([a-zA-Z]+-)+\d+").ok())
        .as_ref()?;
    re.find(zone).map(|m| m.as_str().to_owned())
}

mod parser;
#[cfg(test)]
mod tests;

// The README's examples compile (and those without `no_run` run) as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeExamples;
