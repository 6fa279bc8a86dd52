//! The `Routes` contract over [`AwsRoutes`]'s own methods.

use super::*;

impl<E, N> Routes for AwsRoutes<E, N>
where
    E: Ec2 + Send + Sync,
    N: NodeNames,
{
    async fn list_routes(&self, cluster_name: &str) -> ccm_cloud_provider::Result<Vec<Route>> {
        self.list(cluster_name).await.map_err(CloudError::from)
    }

    async fn create_route(
        &self,
        cluster_name: &str,
        _name_hint: &str,
        route: &Route,
    ) -> ccm_cloud_provider::Result<()> {
        self.create(cluster_name, route).await.map_err(CloudError::from)
    }

    async fn delete_route(&self, cluster_name: &str, route: &Route) -> ccm_cloud_provider::Result<()> {
        self.delete(cluster_name, route).await.map_err(CloudError::from)
    }

    fn observe_nodes(&self, nodes: &[&NodeView]) {
        let pairs: Vec<(&str, Option<&str>)> = nodes
            .iter()
            .filter(|n| !n.name.is_empty())
            .map(|n| (n.name.as_str(), n.provider_id.as_deref()))
            .collect();
        self.targets.observe(nodes);
        self.names.observe(&pairs);
    }
}
