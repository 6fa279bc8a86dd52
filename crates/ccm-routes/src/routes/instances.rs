//! The instances behind routes: a node's instance (by name, through the node-name map or the private DNS
//! name) and the source/destination check a route target needs disabled.

use super::*;

/// How recent a read of a route target without the cluster tag must be to leave it unnamed (it may be tagged
/// after launch).
const UNTAGGED_READ: Duration = Duration::from_secs(60);

impl<E, N> AwsRoutes<E, N>
where
    E: Ec2 + Send + Sync,
    N: NodeNames,
{
    pub(super) async fn disable_source_dest_check(&self, instance: &InstanceId) -> Result<(), RoutesError> {
        if self.lock_state().source_dest_disabled.contains(instance) {
            return Ok(());
        }
        self.ec2
            .set_source_dest_check(instance, false)
            .await
            .map_err(|e| {
                RoutesError::aws(
                    format!("failed to disable the source/destination check of instance {instance}"),
                    e,
                )
            })?;
        tracing::info!(%instance, "disabled the source/destination check");
        self.lock_state().source_dest_disabled.insert(instance.clone());
        Ok(())
    }

    /// Reads instances through `catalog`, shared with the other controllers, instead of a catalog of their own.
    #[must_use]
    pub fn with_instance_catalog(mut self, catalog: &Arc<InstanceCatalog>) -> Self {
        let (ec2, _) = self.ec2.into_parts();
        self.ec2 = catalog.over(ec2);
        self
    }

    /// Refuses routes to instances that are not the cluster's or not the Node's: asks the [`RouteTargets`]
    /// given to [`AwsRoutes::with_route_targets`] (the default refuses nothing).
    pub fn with_route_targets(mut self, targets: impl RouteTargets + 'static) -> Self {
        self.targets = Arc::new(targets);
        self
    }

    /// Refuses `route` when its target may not have one (see [`RouteTargets`]), before anything is written.
    pub(super) async fn refuse_foreign_target(&self, route: &Route) -> Result<(), RoutesError> {
        let node = route.target_node.as_str();
        let instance = self.named_instance(node);
        let refusal = self.targets.refusal(node, instance.as_ref()).await.map_err(|e| {
            let what = match &instance {
                Some(id) => format!("failed to read whether instance {id} carries the cluster tag"),
                None => format!("failed to read whether the instance of node {node} is the cluster's"),
            };
            RoutesError::aws(what, e)
        })?;
        match refusal {
            None => Ok(()),
            Some(reason) => Err(RoutesError::Refused {
                cidr: route.destination_cidr.clone(),
                node: node.to_owned(),
                reason,
            }),
        }
    }

    // --- names ---

    /// The instance that Node `node` names: through [`NodeNames`], or an `i-...` name (text before the first dot).
    fn named_instance(&self, node: &str) -> Option<InstanceId> {
        self.names.instance_id(node).or_else(|| {
            node.starts_with("i-")
                .then(|| InstanceId::new(node.split('.').next().unwrap_or(node)))
        })
    }

    /// The instance of node `node`: from [`NodeNames`], from an `i-...` name (text before the first dot), or the
    /// one live, cluster-tagged instance with that private DNS name.
    pub(super) async fn instance_of(&self, node: &str) -> Result<InstanceId, RoutesError> {
        if let Some(id) = self.named_instance(node) {
            return Ok(id);
        }
        if node.is_empty() {
            return Err(RoutesError::InstanceNotFound { node: String::new() });
        }
        let filters = [
            Filter::new("private-dns-name", [node]),
            Filter::new("instance-state-name", LIVE_STATES),
        ];
        let mut found: Vec<_> = self
            .ec2
            .instances(&filters)
            .await
            .map_err(|e| RoutesError::aws(format!("failed to find the instance of node {node}"), e))?
            .into_iter()
            .filter(|i| self.config.cluster.is_tagged(&i.tags))
            .collect();
        match found.len() {
            0 => Err(RoutesError::InstanceNotFound {
                node: node.to_owned(),
            }),
            1 => {
                let instance = found.remove(0);
                if instance.source_dest_check == Some(false) {
                    self.lock_state().source_dest_disabled.insert(instance.id.clone());
                }
                Ok(instance.id)
            }
            _ => Err(RoutesError::MultipleInstances {
                node: node.to_owned(),
                ids: found.into_iter().map(|i| i.id).collect(),
            }),
        }
    }

    /// Node names of `instances`: [`NodeNames`] first, then the instance catalog (any read of an instance names
    /// it: a private DNS name never changes), then one `DescribeInstances` for the rest (cluster-tagged instances
    /// are named by their private DNS name; others stay unnamed).
    pub(super) async fn node_names(
        &self,
        instances: &BTreeSet<InstanceId>,
    ) -> Result<HashMap<InstanceId, String>, RoutesError> {
        let mut out = HashMap::new();
        let mut unknown = Vec::new();
        for id in instances {
            match self.names.node_name(id) {
                Some(name) => {
                    out.insert(id.clone(), name);
                }
                None => unknown.push(id.clone()),
            }
        }
        if unknown.is_empty() {
            return Ok(out);
        }
        let failed = |e| RoutesError::aws("failed to describe the instances routes point at", e);
        let mut untagged = Vec::new();
        let described = self
            .ec2
            .lookup(&unknown, Freshness::within(Duration::MAX))
            .await
            .map_err(failed)?;
        for instance in described.found {
            if !self.config.cluster.is_tagged(&instance.cluster_tags()) {
                untagged.push(instance.id.clone());
            } else if let Some(name) = &instance.private_dns_name {
                out.insert(instance.id.clone(), name.clone());
            }
        }
        if untagged.is_empty() {
            return Ok(out);
        }
        // An instance may be tagged after launch: one without the tag is read again unless read recently.
        let again = self
            .ec2
            .lookup(&untagged, Freshness::within(UNTAGGED_READ))
            .await
            .map_err(failed)?;
        for instance in again.found {
            match &instance.private_dns_name {
                Some(name) if self.config.cluster.is_tagged(&instance.cluster_tags()) => {
                    out.insert(instance.id.clone(), name.clone());
                }
                _ => {
                    tracing::debug!(instance = %instance.id, "route target is not tagged for this cluster: left alone")
                }
            }
        }
        Ok(out)
    }
}
