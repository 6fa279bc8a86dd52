//! The load balancer names the service controller records on a Service before each ensure, so that a
//! provider's deletion finds a load balancer made under a name the Service's status never showed (an ensure that
//! created it and then failed, followed by a change of the name).

use k8s_openapi::api::core::v1::Service;

/// The annotation holding the recorded names: comma-separated, oldest first. Only names other than
/// [`default_load_balancer_name`] are recorded (that one follows from the UID). Written by the service
/// controller under its cleanup finalizer, read by providers when they delete.
pub const ANNOTATION_LOAD_BALANCER_NAMES: &str = "service.cloudprovider.kubernetes.io/load-balancer-names";

/// Upstream's `DefaultLoadBalancerName`: `a` followed by the Service UID without dashes, cut to 32 characters.
pub fn default_load_balancer_name(service: &Service) -> String {
    let uid = service.metadata.uid.as_deref().unwrap_or_default();
    std::iter::once('a')
        .chain(uid.chars().filter(|c| *c != '-'))
        .take(32)
        .collect()
}

/// The names recorded on `service`, oldest first (empty entries dropped).
pub fn recorded_load_balancer_names(service: &Service) -> Vec<String> {
    service
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(ANNOTATION_LOAD_BALANCER_NAMES))
        .map(|v| {
            v.split(',')
                .map(str::trim)
                .filter(|n| !n.is_empty())
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

/// The annotation's value once `name` is recorded on `service`: `None` when there is nothing to record (the
/// default name, an empty one, or one recorded already).
pub fn load_balancer_names_with(service: &Service, name: &str) -> Option<String> {
    if name.is_empty() || name == default_load_balancer_name(service) {
        return None;
    }
    let mut names = recorded_load_balancer_names(service);
    if names.iter().any(|n| n == name) {
        return None;
    }
    names.push(name.to_owned());
    Some(names.join(","))
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use super::*;

    fn service(recorded: Option<&str>) -> Service {
        Service {
            metadata: ObjectMeta {
                uid: Some("0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0".into()),
                annotations: recorded
                    .map(|r| [(ANNOTATION_LOAD_BALANCER_NAMES.to_owned(), r.to_owned())].into()),
                ..ObjectMeta::default()
            },
            ..Service::default()
        }
    }

    #[test]
    fn names_other_than_the_default_are_recorded_once_in_order() {
        let fresh = service(None);
        assert_eq!(
            default_load_balancer_name(&fresh),
            "a0f1e2d3c4b5a69788796a5b4c3d2e1f"
        );
        assert_eq!(
            load_balancer_names_with(&fresh, "a0f1e2d3c4b5a69788796a5b4c3d2e1f"),
            None
        );
        assert_eq!(load_balancer_names_with(&fresh, ""), None);
        assert_eq!(load_balancer_names_with(&fresh, "shop").as_deref(), Some("shop"));
        let one = service(Some("shop"));
        assert_eq!(load_balancer_names_with(&one, "shop"), None);
        assert_eq!(
            load_balancer_names_with(&one, "store").as_deref(),
            Some("shop,store")
        );
        assert_eq!(
            recorded_load_balancer_names(&service(Some(" shop, ,store"))),
            ["shop", "store"]
        );
    }
}
