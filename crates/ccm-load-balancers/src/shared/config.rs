//! What the load balancers need from the cloud config and the cluster: [`LoadBalancerConfig`] and its health
//! probe mode.

use ccm_aws_api::{SecurityGroupId, SubnetId, VpcId};
use ccm_tagging::ClusterTags;

use crate::annotations::AttributeKeys;

/// How health checks of `externalTrafficPolicy: Cluster` Services probe the nodes
/// (`ClusterServiceLoadBalancerHealthProbeMode`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum HealthProbeMode {
    /// The traffic node port (upstream default `ServiceNodePort`).
    #[default]
    ServiceNodePort,
    /// kube-proxy's health endpoint (`Shared`): HTTP on `port` (10256) at `path` (`/healthz`).
    Shared {
        /// The port.
        port: i32,
        /// The path.
        path: String,
    },
}

/// What the load balancers need from the cloud config and the cluster. Start from [`LoadBalancerConfig::new`]
/// and set the rest with the `with_*` methods.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct LoadBalancerConfig {
    /// The cluster's ownership tags (`KubernetesClusterID`, legacy mode).
    pub cluster: ClusterTags,
    /// The cluster's VPC (`[Global] VPC`, else the VPC of the CCM's own instance).
    pub vpc_id: VpcId,
    /// The subnet used when discovery finds no tagged subnet (`[Global] SubnetID`, else the CCM's own subnet).
    pub fallback_subnet: Option<SubnetId>,
    /// `[Global] ElbSecurityGroup`: one group for every Classic ELB instead of a managed group per load
    /// balancer; never modified or deleted.
    pub elb_security_group: Option<SecurityGroupId>,
    /// `![Global] DisableSecurityGroupIngress`: whether rules on the nodes' groups are managed.
    pub manage_node_security_groups: bool,
    /// `ClusterServiceLoadBalancerHealthProbeMode` and its port and path.
    pub health_probe: HealthProbeMode,
    /// `[Global] NLBSecurityGroupMode = Managed`: new NLBs get a managed security group (or the groups of the
    /// `security-groups` annotation).
    pub nlb_managed_security_groups: bool,
    /// The keys the attribute annotations accept: AWS's documented ones and `[Global]
    /// ExtraLoadBalancerAttributeKeys` (see [`AttributeKeys`]).
    pub attribute_keys: AttributeKeys,
    /// `[Global] AdoptUntaggedLoadBalancers`: a load balancer under a Service's name that carries no cluster tag
    /// at all is adopted (tagged `owned`, then managed and deleted) instead of refused. Off by default: this
    /// controller tags everything it creates, so an untagged one was most likely made by someone else.
    pub adopt_untagged: bool,
    /// `--allow-load-balancer-recreation`: every Service consents to its load balancer being replaced when a
    /// change can only be applied to a new one, as if annotated `aws-load-balancer-allow-recreation: "true"`.
    /// Off by default: a serving load balancer is never replaced unasked.
    pub allow_recreation: bool,
    /// Ports a Service may name in `aws-load-balancer-healthcheck-port` beside its own node ports, its
    /// `healthCheckNodePort` and the shared health probe's port (`[Global] AllowedHealthCheckPorts`, inclusive
    /// ranges; empty by default). The health-check port is opened on every target node: see
    /// [`LoadBalancerConfig::check_health_check_port`].
    pub allowed_health_check_ports: Vec<(i32, i32)>,
}

// === impl LoadBalancerConfig ===

impl LoadBalancerConfig {
    /// A configuration with the defaults of the reference implementation: node rules managed, probes on the
    /// node port, no fallback subnet, no shared ELB group.
    pub fn new(cluster: ClusterTags, vpc_id: VpcId) -> Self {
        Self {
            cluster,
            vpc_id,
            fallback_subnet: None,
            elb_security_group: None,
            manage_node_security_groups: true,
            health_probe: HealthProbeMode::ServiceNodePort,
            nlb_managed_security_groups: false,
            attribute_keys: AttributeKeys::default(),
            adopt_untagged: false,
            allow_recreation: false,
            allowed_health_check_ports: Vec::new(),
        }
    }

    /// Sets the subnet used when discovery finds none (`[Global] SubnetID`, else the CCM's own subnet).
    #[must_use]
    pub fn with_fallback_subnet(mut self, subnet: Option<SubnetId>) -> Self {
        self.fallback_subnet = subnet;
        self
    }

    /// Sets `[Global] ElbSecurityGroup`.
    #[must_use]
    pub fn with_elb_security_group(mut self, group: Option<SecurityGroupId>) -> Self {
        self.elb_security_group = group;
        self
    }

    /// Sets whether the nodes' groups get rules (`false` for `[Global] DisableSecurityGroupIngress = true`).
    #[must_use]
    pub fn with_node_security_group_rules(mut self, manage: bool) -> Self {
        self.manage_node_security_groups = manage;
        self
    }

    /// Sets `[Global] NLBSecurityGroupMode = Managed` (true) or unset (false).
    #[must_use]
    pub fn with_nlb_managed_security_groups(mut self, managed: bool) -> Self {
        self.nlb_managed_security_groups = managed;
        self
    }

    /// Sets `[Global] ExtraLoadBalancerAttributeKeys`: attribute keys AWS added after this controller's list,
    /// accepted in the attribute annotations beside the documented ones.
    #[must_use]
    pub fn with_extra_attribute_keys<I, S>(mut self, keys: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        self.attribute_keys = AttributeKeys::with_extra(keys);
        self
    }

    /// Sets `[Global] AdoptUntaggedLoadBalancers`: adopt load balancers under a Service's name that carry no
    /// cluster tag (see [`crate::ownership`]).
    #[must_use]
    pub fn with_adopt_untagged(mut self, adopt: bool) -> Self {
        self.adopt_untagged = adopt;
        self
    }

    /// Sets `[Global] AllowedHealthCheckPorts`: inclusive port ranges a Service may use as its health-check port
    /// (see [`LoadBalancerConfig::check_health_check_port`]).
    #[must_use]
    pub fn with_allowed_health_check_ports(mut self, ranges: Vec<(i32, i32)>) -> Self {
        self.allowed_health_check_ports = ranges;
        self
    }

    /// The check of an annotated health-check port (`aws-load-balancer-healthcheck-port`), before anything is
    /// built: the port is opened on every target node (from the load balancer's group, or for a default NLB from
    /// its subnets' CIDRs), so a Service author may name only one of the Service's node ports, its
    /// `healthCheckNodePort`, the shared health probe's port (kube-proxy's, with
    /// `ClusterServiceLoadBalancerHealthProbeMode = Shared`) or a port the operator allows
    /// (`allowed_health_check_ports`). Anything else (the kubelet's 10250, SSH, an exporter) is refused, naming
    /// the key and the ports allowed; nothing is written.
    pub fn check_health_check_port(&self, spec: &crate::ServiceSpec) -> Result<(), crate::Error> {
        let Some(Some(port)) = spec.health_check.port else {
            return Ok(());
        };
        let mut own: Vec<i32> = spec.ports.iter().map(|p| p.node_port).collect();
        own.extend(spec.health_check_node_port);
        if let HealthProbeMode::Shared { port: shared, .. } = &self.health_probe {
            own.push(*shared);
        }
        let allowed_range = self
            .allowed_health_check_ports
            .iter()
            .any(|(from, to)| (*from..=*to).contains(&port));
        if own.contains(&port) || allowed_range {
            return Ok(());
        }
        own.sort_unstable();
        own.dedup();
        let mut allowed: Vec<String> = own.iter().map(ToString::to_string).collect();
        allowed.extend(self.allowed_health_check_ports.iter().map(|(from, to)| {
            if from == to {
                from.to_string()
            } else {
                format!("{from}-{to}")
            }
        }));
        Err(crate::Error::HealthCheckPortRefused {
            port,
            allowed: allowed.join(", "),
        })
    }

    /// Sets `--allow-load-balancer-recreation`: consent to recreation for every Service (see
    /// [`LoadBalancerConfig::allow_recreation`]).
    #[must_use]
    pub fn with_recreation_allowed(mut self, allowed: bool) -> Self {
        self.allow_recreation = allowed;
        self
    }

    /// Sets the health probe mode of `externalTrafficPolicy: Cluster` Services.
    #[must_use]
    pub fn with_health_probe(mut self, mode: HealthProbeMode) -> Self {
        self.health_probe = mode;
        self
    }
}
