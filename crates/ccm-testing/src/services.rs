//! Services of type LoadBalancer for tests and the sandbox, and what the CCM writes back into them.

use crate::fixtures::ServiceBuilder;
use k8s_openapi::{api::core::v1::Service, apimachinery::pkg::apis::meta::v1::ObjectMeta};
use kube::{
    Api,
    api::{ListParams, Patch, PatchParams},
};

/// The annotation that asks for an NLB instead of a Classic ELB.
pub const LB_TYPE: &str = "service.beta.kubernetes.io/aws-load-balancer-type";

/// A Service of type LoadBalancer named `name` in `namespace`, selecting `app=<name>`, with one TCP port per
/// entry of `ports` (named `p<port>`, target port 8080) and `annotations`.
pub fn load_balancer(name: &str, namespace: &str, ports: &[i32], annotations: &[(&str, &str)]) -> Service {
    let svc = ServiceBuilder::new(namespace, name).annotations(annotations);
    ports.iter().fold(svc, |svc, p| svc.port(*p, "TCP", None)).build()
}

/// The first ingress hostname of the Service's load-balancer status (set by the CCM once the load balancer is
/// up).
pub fn ingress_hostname(svc: &Service) -> Option<String> {
    let status = svc.status.as_ref()?.load_balancer.as_ref()?;
    status.ingress.as_ref()?.first()?.hostname.clone()
}

/// Deletes the LoadBalancer Services an earlier, failed run left behind, their finalizers removed first (no
/// controller of theirs runs any more): those of `namespace` (every namespace when `None`) that match the label
/// selector `labels` (all when `None`). A controller started afterwards, which serves every such Service of the
/// apiserver, then makes no load balancer for them. A Service already gone is not an error.
pub async fn force_delete_load_balancers(
    client: &kube::Client,
    namespace: Option<&str>,
    labels: Option<&str>,
) -> Result<(), kube::Error> {
    let listed: Api<Service> = match namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    };
    let params = labels.map_or_else(ListParams::default, |l| ListParams::default().labels(l));
    // A merge patch with an empty list clears the finalizers; the Service's other fields are absent, so kept.
    let no_finalizers = Service {
        metadata: ObjectMeta {
            finalizers: Some(Vec::new()),
            ..ObjectMeta::default()
        },
        ..Service::default()
    };
    for svc in listed.list(&params).await? {
        let load_balancer = svc.spec.as_ref().and_then(|s| s.type_.as_deref()) == Some("LoadBalancer");
        let (Some(name), Some(ns)) = (svc.metadata.name, svc.metadata.namespace) else {
            continue;
        };
        if !load_balancer {
            continue;
        }
        println!("deleting the stale LoadBalancer Service {ns}/{name}");
        let services: Api<Service> = Api::namespaced(client.clone(), &ns);
        let patch = Patch::Merge(&no_finalizers);
        ignore_not_found(
            services
                .patch(&name, &PatchParams::default(), &patch)
                .await
                .map(drop),
        )?;
        ignore_not_found(services.delete(&name, &Default::default()).await.map(drop))?;
    }
    Ok(())
}

fn ignore_not_found(result: Result<(), kube::Error>) -> Result<(), kube::Error> {
    match result {
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
        other => other,
    }
}
