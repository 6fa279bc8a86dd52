//! The one way every crate names an object in keys, logs, tags and Events.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// `<namespace>/<name>` of a namespaced object, `<name>` of a cluster-scoped one: the key of client-go's
/// `MetaNamespaceKeyFunc`, by which work queues, caches, logs, Events and the load balancers' service-name tag
/// name an object.
pub fn object_key(meta: &ObjectMeta) -> String {
    namespaced_key(
        meta.namespace.as_deref().unwrap_or_default(),
        meta.name.as_deref().unwrap_or_default(),
    )
}

/// [`object_key`] from its parts: `<namespace>/<name>`, or `<name>` when `namespace` is empty.
pub fn namespaced_key(namespace: &str, name: &str) -> String {
    if namespace.is_empty() {
        name.to_owned()
    } else {
        format!("{namespace}/{name}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn namespaced_and_cluster_scoped_objects() {
        let meta = |ns: Option<&str>| ObjectMeta {
            namespace: ns.map(str::to_owned),
            name: Some("web".to_owned()),
            ..ObjectMeta::default()
        };
        assert_eq!(object_key(&meta(Some("shop"))), "shop/web");
        assert_eq!(object_key(&meta(None)), "web");
        assert_eq!(namespaced_key("", "node-1"), "node-1");
    }
}
