//! One view over the two instance capabilities: [`InstancesV2`] when the provider has it, else the legacy
//! [`Instances`] (+ [`Zones`]) with upstream's fallbacks. All methods take many nodes so that a V2 provider is
//! reached in batches.

use ccm_cloud_provider::NodeView;
use ccm_cloud_provider::{
    CloudError, CloudProvider, InstanceMetadata, Instances, InstancesV2, NodeAddress, Zones,
    format_provider_id,
};

use crate::ControllerMetrics;

pub(crate) enum InstanceSource<'a, P: CloudProvider> {
    V2(&'a P::InstancesV2),
    V1 {
        provider_name: &'a str,
        instances: &'a P::Instances,
        zones: Option<&'a P::Zones>,
    },
}

pub(crate) fn provider_id_of(node: &NodeView) -> &str {
    node.provider_id.as_deref().unwrap_or_default()
}

pub(crate) fn name_of(node: &NodeView) -> &str {
    node.name.as_str()
}

// === impl InstanceSource ===

impl<'a, P: CloudProvider> InstanceSource<'a, P> {
    /// The provider's instance capability; `None` if it has neither.
    pub(crate) fn of(provider: &'a P) -> Option<Self> {
        if let Some(v2) = provider.instances_v2() {
            return Some(Self::V2(v2));
        }
        provider.instances().map(|instances| Self::V1 {
            provider_name: provider.provider_name(),
            instances,
            zones: provider.zones(),
        })
    }

    pub(crate) fn is_v2(&self) -> bool {
        matches!(self, Self::V2(_))
    }

    /// Full metadata for initialization.
    pub(crate) async fn metadata(
        &self,
        nodes: &[&NodeView],
        metrics: &ControllerMetrics,
    ) -> Vec<Result<Option<InstanceMetadata>, CloudError>> {
        match self {
            Self::V2(v2) => {
                metrics.provider_call();
                v2.instance_metadata_batch(nodes).await
            }
            Self::V1 {
                provider_name,
                instances,
                zones,
            } => {
                let mut out = Vec::with_capacity(nodes.len());
                for node in nodes {
                    out.push(
                        v1_metadata(provider_name, *instances, *zones, node, metrics)
                            .await
                            .map(Some),
                    );
                }
                out
            }
        }
    }

    /// Only what the periodic address refresh needs (V2: the full metadata; V1: addresses only).
    pub(crate) async fn addresses(
        &self,
        nodes: &[&NodeView],
        metrics: &ControllerMetrics,
    ) -> Vec<Result<Option<InstanceMetadata>, CloudError>> {
        match self {
            Self::V2(_) => self.metadata(nodes, metrics).await,
            Self::V1 { instances, .. } => {
                let mut out = Vec::with_capacity(nodes.len());
                for node in nodes {
                    let addrs = v1_addresses(*instances, node, provider_id_of(node), metrics).await;
                    out.push(addrs.map(|node_addresses| {
                        Some(InstanceMetadata {
                            node_addresses,
                            ..Default::default()
                        })
                    }));
                }
                out
            }
        }
    }

    pub(crate) async fn exists(
        &self,
        nodes: &[&NodeView],
        metrics: &ControllerMetrics,
    ) -> Vec<Result<bool, CloudError>> {
        match self {
            Self::V2(v2) => {
                metrics.provider_call();
                v2.instance_exists_batch(nodes).await
            }
            Self::V1 {
                provider_name,
                instances,
                ..
            } => {
                let mut out = Vec::with_capacity(nodes.len());
                for node in nodes {
                    let r = match v1_provider_id(provider_name, *instances, node, metrics).await {
                        Err(CloudError::InstanceNotFound) => Ok(false),
                        Err(e) => Err(e),
                        Ok(id) => {
                            metrics.provider_call();
                            instances.instance_exists_by_provider_id(&id).await
                        }
                    };
                    out.push(r);
                }
                out
            }
        }
    }

    pub(crate) async fn shutdown(
        &self,
        nodes: &[&NodeView],
        metrics: &ControllerMetrics,
    ) -> Vec<Result<bool, CloudError>> {
        match self {
            Self::V2(v2) => {
                metrics.provider_call();
                v2.instance_shutdown_batch(nodes).await
            }
            Self::V1 {
                provider_name,
                instances,
                ..
            } => {
                let mut out = Vec::with_capacity(nodes.len());
                for node in nodes {
                    let r = match v1_provider_id(provider_name, *instances, node, metrics).await {
                        Err(CloudError::InstanceNotFound) => Ok(false),
                        Err(e) => Err(e),
                        Ok(id) => {
                            metrics.provider_call();
                            match instances.instance_shutdown_by_provider_id(&id).await {
                                Err(CloudError::NotImplemented | CloudError::InstanceNotFound) => Ok(false),
                                r => r,
                            }
                        }
                    };
                    out.push(r);
                }
                out
            }
        }
    }
}

/// The node's provider ID, or the one the legacy API derives from its name (upstream `GetInstanceProviderID`:
/// `NotImplemented` and `InstanceNotFound` are passed through as they are).
async fn v1_provider_id<I: Instances>(
    provider_name: &str,
    instances: &I,
    node: &NodeView,
    metrics: &ControllerMetrics,
) -> Result<String, CloudError> {
    let id = provider_id_of(node);
    if !id.is_empty() {
        return Ok(id.to_owned());
    }
    metrics.provider_call();
    match instances.instance_id(name_of(node)).await {
        Ok(id) => Ok(format_provider_id(provider_name, &id)),
        Err(e @ (CloudError::NotImplemented | CloudError::InstanceNotFound)) => Err(e),
        Err(e) => Err(CloudError::with_source(
            "failed to get instance ID from cloud provider",
            e,
        )),
    }
}

async fn v1_addresses<I: Instances>(
    instances: &I,
    node: &NodeView,
    provider_id: &str,
    metrics: &ControllerMetrics,
) -> Result<Vec<NodeAddress>, CloudError> {
    if !provider_id.is_empty() {
        metrics.provider_call();
        if let Ok(a) = instances.node_addresses_by_provider_id(provider_id).await {
            return Ok(a);
        }
    }
    metrics.provider_call();
    instances.node_addresses(name_of(node)).await
}

async fn v1_metadata<I: Instances, Z: Zones>(
    provider_name: &str,
    instances: &I,
    zones: Option<&Z>,
    node: &NodeView,
    metrics: &ControllerMetrics,
) -> Result<InstanceMetadata, CloudError> {
    let provider_id = match v1_provider_id(provider_name, instances, node, metrics).await {
        Ok(id) => id,
        Err(CloudError::NotImplemented) => {
            tracing::warn!(
                node = name_of(node),
                "cloud provider does not implement instance IDs; initializing without one"
            );
            String::new()
        }
        Err(e) => return Err(e),
    };
    let node_addresses = v1_addresses(instances, node, &provider_id, metrics).await?;
    let mut instance_type = None;
    if !provider_id.is_empty() {
        metrics.provider_call();
        instance_type = instances.instance_type_by_provider_id(&provider_id).await.ok();
    }
    let instance_type = match instance_type {
        Some(t) => t,
        None => {
            metrics.provider_call();
            instances.instance_type(name_of(node)).await?
        }
    };
    let (mut zone, mut region) = (String::new(), String::new());
    if let Some(zones) = zones {
        metrics.provider_call();
        let z = if provider_id.is_empty() {
            zones.zone_by_node_name(name_of(node)).await
        } else {
            zones.zone_by_provider_id(&provider_id).await
        }
        .map_err(|e| CloudError::with_source("failed to get zone from cloud provider", e))?;
        zone = z.failure_domain;
        region = z.region;
    }
    Ok(InstanceMetadata {
        provider_id,
        instance_type,
        node_addresses,
        zone,
        region,
        additional_labels: Default::default(),
        not_in_cluster: None,
    })
}

#[cfg(test)]
mod tests;
