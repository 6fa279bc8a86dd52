//! Node helpers for tests and the sandbox: whether the CCM has initialized a Node, and a one-line summary.

use k8s_openapi::api::core::v1::Node;

/// The taint kubelets with `--cloud-provider=external` register with.
pub const UNINITIALIZED: &str = "node.cloudprovider.kubernetes.io/uninitialized";

/// Initialized by a CCM: a provider ID, an InternalIP and no uninitialized taint.
pub fn is_initialized(n: &Node) -> bool {
    let spec = n.spec.clone().unwrap_or_default();
    let addresses = n
        .status
        .as_ref()
        .and_then(|s| s.addresses.clone())
        .unwrap_or_default();
    spec.provider_id.is_some()
        && addresses.iter().any(|a| a.type_ == "InternalIP")
        && !spec
            .taints
            .unwrap_or_default()
            .iter()
            .any(|t| t.key == UNINITIALIZED)
}

/// Name, provider ID, zone, instance type, InternalIP and taints on one line.
pub fn summary(n: &Node) -> String {
    let dash = || "-".to_owned();
    let label = |k: &str| n.metadata.labels.as_ref().and_then(|l| l.get(k)).cloned();
    let spec = n.spec.clone().unwrap_or_default();
    let addresses = n
        .status
        .as_ref()
        .and_then(|s| s.addresses.clone())
        .unwrap_or_default();
    let ip = addresses
        .into_iter()
        .find(|a| a.type_ == "InternalIP")
        .map(|a| a.address);
    let taints: Vec<String> = spec
        .taints
        .unwrap_or_default()
        .into_iter()
        .map(|t| t.key)
        .collect();
    format!(
        "{:<30} providerID={:<36} zone={:<11} type={:<9} InternalIP={:<12} taints={taints:?}",
        n.metadata.name.clone().unwrap_or_default(),
        spec.provider_id.unwrap_or_else(dash),
        label("topology.kubernetes.io/zone").unwrap_or_else(dash),
        label("node.kubernetes.io/instance-type").unwrap_or_else(dash),
        ip.unwrap_or_else(dash),
    )
}

/// The keys of the Node's taints.
pub fn taint_keys(n: &Node) -> Vec<String> {
    let taints = n.spec.as_ref().and_then(|s| s.taints.as_ref());
    taints
        .map(|t| t.iter().map(|t| t.key.clone()).collect())
        .unwrap_or_default()
}

/// The value of label `key`.
pub fn label<'a>(n: &'a Node, key: &str) -> Option<&'a str> {
    n.metadata.labels.as_ref()?.get(key).map(String::as_str)
}
