//! [`AwsCloud`]: the AWS [`CloudProvider`], composed from the domain crates on the EC2 port.
//!
//! Start-up follows the reference implementation, minus its dead ends: the region comes from the cloud config
//! (`Zone`, else `Region`) or IMDS; the instance the CCM runs on from IMDS, unless the config describes a control
//! plane outside the cluster's VPC (`VPC`, `SubnetID` or `RoleARN`, and a cluster ID); the cluster ID from the
//! config or that instance's tags; the VPC from the config or that instance. One DescribeInstances at most.

use ccm_aws_api::{
    Catalog, Ec2, Elb, Elbv2, InstanceCatalog, InstanceId, Metadata, RouteTableId, SecurityGroupId, SubnetId,
    VpcId, ec2::Instance,
};
use ccm_aws_sdk::{Adapter, AdapterOptions, AwsEc2, AwsElb, AwsElbv2, AwsMetadata};
use ccm_cloud_provider::{CloudProvider, Unsupported};
use ccm_instances::{AwsInstances, InstancesConfig};
use ccm_load_balancers::{AwsLoadBalancers, HealthProbeMode, LoadBalancerConfig};
use ccm_routes::{AwsRoutes, NodeIndex, RoutesConfig};
use ccm_tagging::ClusterTags;
use regex::Regex;
use tracing::{info, warn};

use std::sync::Arc;

use crate::{
    CloudConfig, adapter_options,
    cloud_config::{self, IpFamily},
    cluster_id::{self, ClusterIdError},
    membership::{MemberInstances, Membership},
};

/// The provider name, for `--cloud-provider`; defined once, in `ccm-aws-api`.
pub use ccm_aws_api::PROVIDER_NAME;

/// The AWS cloud provider, generic over the EC2, ELB and ELBv2 ports so that tests can run it on fakes.
#[derive(Debug)]
pub struct AwsCloud<E = AwsEc2, L = AwsElb, V = AwsElbv2> {
    ec2: E,
    catalog: Arc<InstanceCatalog>,
    membership: Arc<Membership<Catalog<E>>>,
    instances: MemberInstances<E>,
    routes: AwsRoutes<E, NodeIndex>,
    load_balancers: Option<AwsLoadBalancers<E, L, V>>,
    cluster: ClusterTags,
    region: String,
    vpc_id: Option<VpcId>,
}

/// What the CCM found out about where it runs, before any capability is built.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Environment {
    /// The region every client uses.
    pub region: String,
    /// The cluster's tags.
    pub cluster: ClusterTags,
    /// The cluster's VPC, when known.
    pub vpc_id: Option<VpcId>,
    /// The instance the CCM runs on, unless the control plane is external.
    pub self_instance: Option<Instance>,
}

/// Why the provider could not start. Each is fatal: the message says what to change.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AwsCloudError {
    /// IMDS could not tell the instance ID or region.
    #[error(
        "reading {what} from the instance metadata service: {source}; off EC2, set Region, VPC, SubnetID \
         and KubernetesClusterID in the cloud config [Global] section"
    )]
    Metadata {
        /// What was asked.
        what: &'static str,
        /// The failure.
        #[source]
        source: Box<ccm_aws_api::AwsError>,
    },
    /// The cluster ID is missing or unusable.
    #[error(transparent)]
    ClusterId(#[from] ClusterIdError),
    /// The instance the CCM runs on could not be described.
    #[error("describing the instance the CCM runs on ({instance})")]
    SelfInstance {
        /// The instance.
        instance: InstanceId,
        /// The failure.
        #[source]
        source: Box<ccm_aws_api::AwsError>,
    },
    /// `SupportedTopologyInstanceTypePattern` is not a regular expression.
    #[error("cloud config [Global] SupportedTopologyInstanceTypePattern: {0}")]
    TopologyPattern(#[source] regex::Error),
}

// === impl AwsCloud ===

impl AwsCloud<AwsEc2, AwsElb, AwsElbv2> {
    /// Starts the provider as the CCM does: IMDS (unless the control plane is external), then the SDK adapter
    /// with the config's endpoint overrides and role, then the environment. Returns the adapter too, for its
    /// call metrics.
    pub async fn connect(
        config: &CloudConfig,
        options: AdapterOptions,
    ) -> Result<(Self, Adapter), AwsCloudError> {
        let external = config.global.is_external_control_plane();
        let metadata = if external {
            None
        } else {
            Some(
                AwsMetadata::new(&adapter_options::imds_options(config)).map_err(|source| {
                    AwsCloudError::Metadata {
                        what: "the endpoint",
                        source: Box::new(source),
                    }
                })?,
            )
        };
        let self_id = match &metadata {
            Some(m) => Some(m.instance_id().await.map_err(|source| AwsCloudError::Metadata {
                what: "the instance ID",
                source: Box::new(source),
            })?),
            None => None,
        };
        let region = match (config.global.configured_region(), &metadata) {
            (Some(region), _) => region,
            (None, Some(m)) => m.region().await.map_err(|source| AwsCloudError::Metadata {
                what: "the region",
                source: Box::new(source),
            })?,
            // An external control plane names its cluster but may omit the region: the SDK's chain decides.
            (None, None) => String::new(),
        };
        let region_opt = Some(region.clone()).filter(|r| !r.is_empty());
        let mut options =
            options.with_endpoint_overrides(adapter_options::endpoint_overrides(config, &region));
        if let Some(role) = adapter_options::assume_role(config) {
            options = options.with_assume_role(role);
        }
        let adapter = Adapter::from_env(region_opt, options).await;
        let region = adapter.region().map_or(region, str::to_owned);
        let env = discover(config, adapter.ec2(), region, self_id.as_ref()).await?;
        let cloud = Self::new(
            config,
            adapter.ec2().clone(),
            adapter.elb().clone(),
            adapter.elbv2().clone(),
            env,
        )?;
        Ok((cloud, adapter))
    }
}

impl<E, L, V> AwsCloud<E, L, V>
where
    E: Ec2 + Clone + Send + Sync + 'static,
    L: Elb + Send + Sync + 'static,
    V: Elbv2 + Send + Sync + 'static,
{
    /// The provider on the `ec2`, `elb` and `elbv2` ports for an already discovered environment.
    pub fn new(
        config: &CloudConfig,
        ec2: E,
        elb: L,
        elbv2: V,
        env: Environment,
    ) -> Result<Self, AwsCloudError> {
        let global = &config.global;
        let pattern = Regex::new(&global.supported_topology_instance_type_pattern)
            .map_err(AwsCloudError::TopologyPattern)?;
        let families = global
            .node_ip_families
            .iter()
            .map(|f| match f {
                IpFamily::Ipv4 => ccm_instances::IpFamily::Ipv4,
                IpFamily::Ipv6 => ccm_instances::IpFamily::Ipv6,
            })
            .collect();
        let mut instances_config = InstancesConfig::new(env.region.clone())
            .with_node_ip_families(families)
            .with_topology_instance_types(pattern)
            .with_cluster(env.cluster.clone())
            .with_zone_form(crate::zone_labels::zone_form(global));
        if let Some(vpc) = &env.vpc_id {
            instances_config = instances_config.with_vpc_id(vpc.clone());
        }
        info!(
            region = %env.region,
            cluster_id = env.cluster.id(),
            vpc = env.vpc_id.as_ref().map(VpcId::as_str),
            zone_label = global.node_zone_label.as_str(),
            "AWS cloud provider ready"
        );
        let mut routes_config = RoutesConfig::new(env.cluster.clone())
            .with_route_table_ids(global.route_table_id.as_deref().map(RouteTableId::from));
        if let Some(vpc) = &env.vpc_id {
            routes_config = routes_config.with_vpc_id(vpc.clone());
        }
        // One instance catalog for every reader: node initialization, the address refresh, membership, the
        // load balancers and the routes read instances through it and answer from it (ccm_aws_api::catalog).
        let catalog = Arc::new(InstanceCatalog::new());
        catalog.start_expiry();
        let membership = Arc::new(Membership::new(catalog.over(ec2.clone()), env.cluster.clone()));
        // The route controller hands the routes the Nodes it watches (`Routes::observe_nodes`), so that a route to
        // an instance is named by the Node that runs there, whatever the node-name scheme.
        // Nothing is changed for a Node whose instance lacks the cluster tag (crate::membership).
        let routes = AwsRoutes::new(ec2.clone(), routes_config)
            .with_instance_catalog(&catalog)
            .with_node_names(NodeIndex::new())
            .with_route_targets(membership.clone());
        let load_balancers = match &env.vpc_id {
            Some(vpc) => Some(
                AwsLoadBalancers::new(
                    ec2.clone(),
                    elb,
                    elbv2,
                    load_balancer_config(config, &env, vpc.clone()),
                )
                .with_instance_catalog(&catalog)
                .with_node_targets(membership.clone()),
            ),
            None => {
                warn!(
                    "no VPC known (set VPC in the cloud config): Services of type LoadBalancer are not served"
                );
                None
            }
        };
        Ok(Self {
            load_balancers,
            instances: MemberInstances::new(
                AwsInstances::new(ec2.clone(), instances_config).with_instance_catalog(&catalog),
                membership.clone(),
            ),
            membership,
            catalog,
            routes,
            ec2,
            cluster: env.cluster,
            region: env.region,
            vpc_id: env.vpc_id,
        })
    }

    /// Consent to load balancer recreation for every Service when `allowed` (`--allow-load-balancer-recreation`):
    /// a change only a new load balancer can apply then replaces the serving one, as the Service annotation
    /// `aws-load-balancer-allow-recreation: "true"` does for one Service. Off by default.
    #[must_use]
    pub fn with_load_balancer_recreation(mut self, allowed: bool) -> Self {
        self.load_balancers = self
            .load_balancers
            .map(|lbs| lbs.with_recreation_allowed(allowed));
        self
    }

    /// The EC2 port (shared with the provider controllers, e.g. tagging).
    pub fn ec2(&self) -> &E {
        &self.ec2
    }

    /// Which instances are the cluster's, as every capability learnt it (share it with the tagging
    /// controller: [`TaggingController::with_members`](crate::tagging::TaggingController::with_members)).
    pub fn membership(&self) -> &Arc<Membership<Catalog<E>>> {
        &self.membership
    }

    /// The instance catalog every capability reads instances through (its size: [`crate::CatalogMetrics`]).
    pub fn instance_catalog(&self) -> &Arc<InstanceCatalog> {
        &self.catalog
    }

    /// The cluster's tags.
    pub fn cluster(&self) -> &ClusterTags {
        &self.cluster
    }

    /// The region.
    pub fn region(&self) -> &str {
        &self.region
    }

    /// The cluster's VPC, when known.
    pub fn vpc_id(&self) -> Option<&VpcId> {
        self.vpc_id.as_ref()
    }
}

impl<E, L, V> CloudProvider for AwsCloud<E, L, V>
where
    E: Ec2 + Clone + Send + Sync + 'static,
    L: Elb + Send + Sync + 'static,
    V: Elbv2 + Send + Sync + 'static,
{
    type InstancesV2 = MemberInstances<E>;
    type Instances = Unsupported;
    type Zones = Unsupported;
    type LoadBalancer = AwsLoadBalancers<E, L, V>;
    type Routes = AwsRoutes<E, NodeIndex>;

    fn provider_name(&self) -> &str {
        PROVIDER_NAME
    }

    fn instances_v2(&self) -> Option<&Self::InstancesV2> {
        Some(&self.instances)
    }

    fn routes(&self) -> Option<&Self::Routes> {
        Some(&self.routes)
    }

    fn load_balancer(&self) -> Option<&Self::LoadBalancer> {
        self.load_balancers.as_ref()
    }
}

/// The load balancers' settings from the cloud config: the fallback subnet is `SubnetID`, else the subnet of the
/// instance the CCM runs on (as upstream).
fn load_balancer_config(config: &CloudConfig, env: &Environment, vpc: VpcId) -> LoadBalancerConfig {
    let global = &config.global;
    let fallback_subnet = global
        .subnet_id
        .as_deref()
        .map(SubnetId::from)
        .or_else(|| env.self_instance.as_ref().and_then(|i| i.subnet_id.clone()));
    let health_probe = match global.health_probe_mode {
        cloud_config::HealthProbeMode::ServiceNodePort => HealthProbeMode::ServiceNodePort,
        cloud_config::HealthProbeMode::Shared => HealthProbeMode::Shared {
            port: i32::from(global.shared_health_probe_port),
            path: global.shared_health_probe_path.clone(),
        },
    };
    LoadBalancerConfig::new(env.cluster.clone(), vpc)
        .with_fallback_subnet(fallback_subnet)
        .with_elb_security_group(global.elb_security_group.as_deref().map(SecurityGroupId::from))
        .with_node_security_group_rules(!global.disable_security_group_ingress)
        .with_health_probe(health_probe)
        .with_nlb_managed_security_groups(
            global.nlb_security_group_mode == cloud_config::NlbSecurityGroupMode::Managed,
        )
        .with_adopt_untagged(global.adopt_untagged_load_balancers)
        .with_extra_attribute_keys(&global.extra_load_balancer_attribute_keys)
        .with_allowed_health_check_ports(allowed_health_check_ports(global))
}

/// The ports a Service may name as its health-check port beside its own: `AllowedHealthCheckPorts`, and the
/// shared health probe's port (kube-proxy's health endpoint, which every node serves), whatever the probe mode.
fn allowed_health_check_ports(global: &cloud_config::GlobalConfig) -> Vec<(i32, i32)> {
    let shared = i32::from(global.shared_health_probe_port);
    global
        .allowed_health_check_ports
        .iter()
        .map(|(from, to)| (i32::from(*from), i32::from(*to)))
        .chain([(shared, shared)])
        .collect()
}

/// Finds the cluster and VPC: from the config where it says, else from the instance `self_id` (one
/// DescribeInstances, only when something is missing).
pub async fn discover<E: Ec2>(
    config: &CloudConfig,
    ec2: &E,
    region: String,
    self_id: Option<&InstanceId>,
) -> Result<Environment, AwsCloudError> {
    let global = &config.global;
    // The instance also gives load balancers their fallback subnet when `SubnetID` is not set (as upstream, which
    // always read its own instance unless the control plane is external).
    let needs_instance = global.cluster_id().is_none() || global.vpc.is_none() || global.subnet_id.is_none();
    let self_instance = match self_id {
        Some(id) if needs_instance => Some(describe_self(ec2, id).await?),
        _ => None,
    };
    let cluster = cluster_id::from_config_or_tags(global, self_instance.as_ref())?;
    let vpc_id = global
        .vpc
        .as_deref()
        .map(VpcId::from)
        .or_else(|| self_instance.as_ref().and_then(|i| i.vpc_id.clone()));
    Ok(Environment {
        region,
        cluster,
        vpc_id,
        self_instance,
    })
}

async fn describe_self<E: Ec2>(ec2: &E, id: &InstanceId) -> Result<Instance, AwsCloudError> {
    let found = ec2
        .instances_by_id(std::slice::from_ref(id))
        .await
        .map_err(|source| AwsCloudError::SelfInstance {
            instance: id.clone(),
            source: Box::new(source),
        })?;
    found
        .into_iter()
        .find(|i| i.id == *id)
        .ok_or_else(|| ClusterIdError::InstanceNotFound(id.clone()).into())
}

#[cfg(test)]
mod tests;
