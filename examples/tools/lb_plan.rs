//! `lb-plan`'s inputs (examples/lb_plan.rs): the Service from the cluster or a manifest, the Nodes from a
//! NodeList file, the Service's endpoints from the cluster when its load balancer follows them, and the warnings
//! about a plan that would mislead (no Nodes to target, a Service the controller would not serve).

use anyhow::{Context as _, anyhow, bail};
use ccm_cloud_provider::{LoadBalancer, ServiceEndpoints};
use ccm_controllers::service::list_service_endpoints;
use k8s_openapi::api::core::v1::{Node, Service};

use super::Cluster;

/// A plan without Nodes registers no instance: say so, rather than print a load balancer without targets as if
/// that were the controller's plan.
pub fn warn_without_targets(listed: usize, members: usize, source: &str, cluster_id: &str) {
    if listed == 0 {
        eprintln!(
            "lb-plan: warning: no Nodes in {source}: the plan has no instances or targets (the controller plans \
             with the cluster's Nodes; pass --nodes FILE or a kubeconfig of the cluster)"
        );
    } else if members == 0 {
        eprintln!(
            "lb-plan: warning: none of the {listed} Nodes of {source} is an instance of cluster {cluster_id} (a \
             provider ID aws:///<zone>/i-... of an instance tagged kubernetes.io/cluster/{cluster_id}): the plan \
             has no instances or targets"
        );
    }
}

/// The Service's endpoints from the cluster's EndpointSlices when its load balancer follows them (only the
/// nodes with a ready endpoint are its targets), as the controller hands them to the ensure. Unreadable, the plan
/// targets every node, with a warning saying so.
pub async fn endpoints_if_followed<L: LoadBalancer>(
    lbs: &L,
    service: &Service,
    cluster: &Cluster,
) -> Option<ServiceEndpoints> {
    if !lbs.follows_endpoints(service) {
        return None;
    }
    let namespace = service.metadata.namespace.as_deref().unwrap_or("default");
    let name = service.metadata.name.as_deref().unwrap_or_default();
    let read = async {
        let client = cluster.client().await?;
        list_service_endpoints(&client, namespace, name)
            .await
            .context("listing the Service's EndpointSlices")
    };
    match read.await {
        Ok(endpoints) => Some(endpoints),
        Err(e) => {
            eprintln!(
                "lb-plan: warning: the load balancer of {namespace}/{name} follows its EndpointSlices, which could \
                 not be read ({e:#}): the plan targets every node (node targets) or leaves the registered pods \
                 as they are (IP targets), where the controller follows the ready endpoints"
            );
            None
        }
    }
}

/// The controller plans only for Services of type LoadBalancer; any other is planned as if it were one.
pub fn warn_if_not_load_balancer(service: &Service) {
    let kind = service
        .spec
        .as_ref()
        .and_then(|s| s.type_.as_deref())
        .unwrap_or("ClusterIP");
    if kind != "LoadBalancer" {
        let (ns, name) = (
            service.metadata.namespace.as_deref(),
            service.metadata.name.as_deref(),
        );
        eprintln!(
            "lb-plan: warning: Service {}/{} is of type {kind}, not LoadBalancer: the controller makes no load \
             balancer for it; this is the plan it would make if the type were LoadBalancer",
            ns.unwrap_or("default"),
            name.unwrap_or_default()
        );
    }
}

/// The one Service of a manifest file.
pub fn service_from_file(path: &str) -> anyhow::Result<Service> {
    let objects = super::objects(super::read_manifest(path)?);
    let [object] = &objects[..] else {
        bail!("{path}: {} objects, not one Service", objects.len());
    };
    let kind = object["kind"].as_str().unwrap_or("no kind");
    if kind != "Service" {
        bail!("{path}: a {kind}, not a Service");
    }
    serde_json::from_value(object.clone()).with_context(|| format!("{path}: not a valid Service"))
}

/// The Nodes of a NodeList (or List, or one Node) file.
pub fn nodes_from_file(path: &str) -> anyhow::Result<Vec<Node>> {
    super::objects(super::read_manifest(path)?)
        .into_iter()
        .map(|node| serde_json::from_value(node).with_context(|| format!("{path}: not a list of Nodes")))
        .collect()
}

/// `NAMESPACE/NAME`, or `NAME` in `--namespace` (else the kubeconfig context's namespace).
pub async fn service_from_cluster(
    cluster: &Cluster,
    name: &str,
    namespace: Option<&str>,
) -> anyhow::Result<Service> {
    let client = cluster.client().await?;
    let (namespace, name) = match name.split_once('/') {
        Some((ns, n)) if !ns.is_empty() && !n.is_empty() && !n.contains('/') => (ns.to_owned(), n),
        Some(_) => bail!("{name:?} is not NAMESPACE/NAME or NAME"),
        None => (
            namespace.map_or_else(|| client.default_namespace().to_owned(), str::to_owned),
            name,
        ),
    };
    kube::Api::<Service>::namespaced(client, &namespace)
        .get_opt(name)
        .await
        .with_context(|| format!("reading Service {namespace}/{name}"))?
        .ok_or_else(|| anyhow!("Service {namespace}/{name} not found"))
}
