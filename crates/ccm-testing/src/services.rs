//! Services of type LoadBalancer for tests and the sandbox, and what the CCM writes back into them.

use std::collections::BTreeMap;

use k8s_openapi::{
    api::core::v1::{Service, ServicePort, ServiceSpec},
    apimachinery::pkg::{apis::meta::v1::ObjectMeta, util::intstr::IntOrString},
};

/// The annotation that asks for an NLB instead of a Classic ELB.
pub const LB_TYPE: &str = "service.beta.kubernetes.io/aws-load-balancer-type";

/// A Service of type LoadBalancer named `name` in `namespace`, selecting `app=<name>`, with one TCP port per
/// entry of `ports` (named `p<port>`, target port 8080) and `annotations`.
pub fn load_balancer(name: &str, namespace: &str, ports: &[i32], annotations: &[(&str, &str)]) -> Service {
    let ports = ports
        .iter()
        .map(|p| ServicePort {
            name: Some(format!("p{p}")),
            port: *p,
            protocol: Some("TCP".to_owned()),
            target_port: Some(IntOrString::Int(8080)),
            ..ServicePort::default()
        })
        .collect();
    let owned = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    };
    Service {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            namespace: Some(namespace.to_owned()),
            annotations: Some(owned(annotations)),
            ..ObjectMeta::default()
        },
        spec: Some(ServiceSpec {
            type_: Some("LoadBalancer".to_owned()),
            selector: Some(owned(&[("app", name)])),
            ports: Some(ports),
            ..ServiceSpec::default()
        }),
        status: None,
    }
}

/// The first ingress hostname of the Service's load-balancer status (set by the CCM once the load balancer is
/// up).
pub fn ingress_hostname(svc: &Service) -> Option<String> {
    let status = svc.status.as_ref()?.load_balancer.as_ref()?;
    status.ingress.as_ref()?.first()?.hostname.clone()
}
