//! The service controller's writes to a Service: its status and our finalizer, each only onto the object whose UID
//! the sync read.

use ccm_cloud_provider::{CloudProvider, LoadBalancerStatus, object_key};
use k8s_openapi::api::core::v1::Service;
use kube::{
    Api,
    api::{Patch, PatchParams},
};
use serde_json::json;

use super::Ctx;
use crate::{Error, error::is_not_found, keys::FINALIZER_LB_CLEANUP};

/// `patch` made to apply only to the object with `uid`: the apiserver refuses it (`422 Invalid` on
/// `metadata.uid`, see `is_replaced`) for another
/// object of the same name, such as the Service re-created after the one a sync read.
pub fn with_uid_precondition(mut patch: serde_json::Value, uid: Option<&str>) -> serde_json::Value {
    if let (Some(uid), Some(body)) = (uid, patch.as_object_mut()) {
        let metadata = body.entry("metadata").or_insert_with(|| json!({}));
        if let Some(metadata) = metadata.as_object_mut() {
            metadata.insert("uid".to_owned(), json!(uid));
        }
    }
    patch
}

/// The status patch body: the whole `status.loadBalancer`, with `ingress: null` to clear it.
pub fn status_patch(status: &LoadBalancerStatus) -> serde_json::Value {
    match status.ingress.as_ref().filter(|i| !i.is_empty()) {
        Some(ingress) => json!({ "status": { "loadBalancer": { "ingress": ingress } } }),
        None => json!({ "status": { "loadBalancer": { "ingress": null } } }),
    }
}

pub(super) async fn patch_status<P: CloudProvider>(
    ctx: &Ctx<P>,
    svc: &Service,
    status: &LoadBalancerStatus,
) -> Result<(), Error> {
    let api: Api<Service> = Api::namespaced(
        ctx.client.clone(),
        svc.metadata.namespace.as_deref().unwrap_or_default(),
    );
    ctx.config.metrics.api_write();
    match api
        .patch_status(
            svc.metadata.name.as_deref().unwrap_or_default(),
            &PatchParams::default(),
            &Patch::Merge(&with_uid_precondition(
                status_patch(status),
                svc.metadata.uid.as_deref(),
            )),
        )
        .await
    {
        Ok(_) => Ok(()),
        // Gone, or replaced by a Service of the same name (the UID precondition): not this sync's to write.
        Err(e) if is_not_found(&e) || is_replaced(&e) => Ok(()),
        Err(e) => Err(Error::kube(
            "failed to update load balancer status",
            object_key(&svc.metadata),
            e,
        )),
    }
}

/// Before an ensure: our finalizer and, when `record` is given, the recorded load balancer names
/// ([`ccm_cloud_provider::ANNOTATION_LOAD_BALANCER_NAMES`]) in one patch, so that whatever the provider creates
/// under a name other than the default one is found by the deletion the finalizer guards, whatever happens to
/// the status (an ensure that fails after the create, then a change of the name).
pub(super) async fn patch_before_ensure<P: CloudProvider>(
    ctx: &Ctx<P>,
    svc: &Service,
    record: Option<&str>,
) -> Result<(), Error> {
    let Some(names) = record else {
        return patch_finalizer(ctx, svc, true).await;
    };
    let api: Api<Service> = Api::namespaced(
        ctx.client.clone(),
        svc.metadata.namespace.as_deref().unwrap_or_default(),
    );
    ctx.config.metrics.api_write();
    let mut patch = finalizer_patch(true);
    patch["metadata"]["annotations"] = json!({ ccm_cloud_provider::ANNOTATION_LOAD_BALANCER_NAMES: names });
    let patch = with_uid_precondition(patch, svc.metadata.uid.as_deref());
    api.patch_status(
        svc.metadata.name.as_deref().unwrap_or_default(),
        &PatchParams::default(),
        &Patch::Strategic(&patch),
    )
    .await
    .map(drop)
    .map_err(|e| {
        Error::kube(
            "failed to record the load balancer's name",
            object_key(&svc.metadata),
            e,
        )
    })
}

/// The strategic-merge patch that adds or removes only our finalizer.
pub fn finalizer_patch(add: bool) -> serde_json::Value {
    if add {
        json!({ "metadata": { "finalizers": [FINALIZER_LB_CLEANUP] } })
    } else {
        json!({ "metadata": { "$deleteFromPrimitiveList/finalizers": [FINALIZER_LB_CLEANUP] } })
    }
}

pub(super) async fn patch_finalizer<P: CloudProvider>(
    ctx: &Ctx<P>,
    svc: &Service,
    add: bool,
) -> Result<(), Error> {
    let api: Api<Service> = Api::namespaced(
        ctx.client.clone(),
        svc.metadata.namespace.as_deref().unwrap_or_default(),
    );
    ctx.config.metrics.api_write();
    // Like upstream, through the status subresource, which accepts metadata changes and ignores the spec.
    let patch = with_uid_precondition(finalizer_patch(add), svc.metadata.uid.as_deref());
    let result = api
        .patch_status(
            svc.metadata.name.as_deref().unwrap_or_default(),
            &PatchParams::default(),
            &Patch::Strategic(&patch),
        )
        .await;
    match result {
        Ok(_) => Ok(()),
        // Removing: the Service is gone, or replaced by one of the same name (the UID precondition), and our
        // finalizer with it. Adding fails either way: the Service read is not there to be served.
        Err(e) if !add && (is_not_found(&e) || is_replaced(&e)) => Ok(()),
        Err(e) => {
            let context = if add {
                "failed to add load balancer cleanup finalizer"
            } else {
                "failed to remove load balancer cleanup finalizer"
            };
            Err(Error::kube(context, object_key(&svc.metadata), e))
        }
    }
}

/// Whether the apiserver refused a patch for its UID precondition: the object of that name is another one.
/// (The uid in a patch body is checked as an immutable field: `422 Invalid` on `metadata.uid`; a Conflict
/// naming the UID is what the update path's own precondition answers.)
fn is_replaced(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(r)
        if (r.code == 422 && r.message.contains("metadata.uid")) || (r.code == 409 && r.message.contains("UID")))
}
