//! The Node labels the cloud-node controller keeps: GA labels in step with their beta source, and the reserved
//! namespaces a provider's additional labels may not write.

use ccm_cloud_provider::NodeView;
use std::collections::BTreeMap;

use ccm_cloud_provider::CloudProvider;
use k8s_openapi::api::core::v1::Node;
use kube::{
    Api,
    api::{Patch, PatchParams},
};
use serde_json::json;

use super::Ctx;
use crate::{Error, instances::name_of, keys::*};

/// The label changes that keep GA labels equal to their beta source (upstream `reconcileNodeLabels`).
pub fn label_fixes(node: &NodeView) -> BTreeMap<String, String> {
    let labels = node.labels.to_map();
    [
        (LABEL_ZONE_BETA, LABEL_ZONE),
        (LABEL_REGION_BETA, LABEL_REGION),
        (LABEL_INSTANCE_TYPE_BETA, LABEL_INSTANCE_TYPE),
    ]
    .into_iter()
    .filter_map(|(primary, secondary)| {
        let value = labels.get(primary)?;
        (labels.get(secondary) != Some(value)).then(|| (secondary.to_owned(), value.clone()))
    })
    .collect()
}

/// Writes [`label_fixes`] of `node`, if any.
pub(super) async fn reconcile_labels<P: CloudProvider>(ctx: &Ctx<P>, node: &NodeView) -> Result<(), Error> {
    let fixes = label_fixes(node);
    if fixes.is_empty() {
        return Ok(());
    }
    ctx.config.metrics.api_write();
    let patch = json!({ "metadata": { "labels": fixes } });
    Api::<Node>::all(ctx.client.clone())
        .patch(name_of(node), &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(|e| Error::kube("failed update labels for node", name_of(node), e))?;
    Ok(())
}

/// Whether a label key is in a reserved Kubernetes namespace (`kubernetes.io/`, `k8s.io/` or a subdomain).
pub fn is_reserved_label(key: &str) -> bool {
    let Some((prefix, _)) = key.split_once('/') else {
        return false;
    };
    ["kubernetes.io", "k8s.io"]
        .iter()
        .any(|d| prefix == *d || prefix.strip_suffix(d).is_some_and(|p| p.ends_with('.')))
}
