//! The flavour-change rule, and its only home: a Service keeps the load balancer flavour it was created with.
//! Changing the type annotation afterwards is refused (the Service is invalid, nothing in AWS changes) until it
//! is restored or the Service is re-created. Two checks apply it: `check_status` from the hostname in the
//! Service's status while parsing, and `refusal` when the provider finds the other flavour in AWS under the
//! Service's name before creating a load balancer.

use k8s_openapi::api::core::v1::Service;

use super::{Findings, Flavour, InvalidService, ServiceSpec};
use crate::annotations::{Annotations, Key, Problem};

/// The hostname suffixes of Classic ELBs (the China partition included, unlike upstream's check).
const CLB_SUFFIXES: &[&str] = &[".elb.amazonaws.com", ".elb.amazonaws.com.cn"];

/// What an existing load balancer's hostname says it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExistingFlavour {
    /// A Classic ELB.
    Classic,
    /// An NLB.
    Network,
    /// Not an AWS ELB hostname.
    NotElb,
}

/// What flavour the hostname of an existing load balancer says it is.
pub fn existing_flavour(hostname: &str) -> ExistingFlavour {
    if CLB_SUFFIXES.iter().any(|s| hostname.ends_with(s)) {
        ExistingFlavour::Classic
    } else if hostname.contains(".elb.")
        && (hostname.ends_with(".amazonaws.com") || hostname.ends_with(".amazonaws.com.cn"))
    {
        ExistingFlavour::Network
    } else {
        ExistingFlavour::NotElb
    }
}

/// The rule against the Service's status: only the unambiguous case, an NLB hostname on a Service that wants a
/// Classic ELB (moto names NLBs like Classic ELBs, so an NLB wanted over a Classic-looking hostname is checked
/// against AWS by the provider, with [`refusal`]).
pub(crate) fn check_status(service: &Service, flavour: &Flavour, a: &Annotations, found: &mut Findings) {
    let hostname = service
        .status
        .as_ref()
        .and_then(|s| s.load_balancer.as_ref())
        .and_then(|lb| lb.ingress.as_ref())
        .and_then(|i| i.first())
        .and_then(|i| i.hostname.as_deref());
    if *flavour == Flavour::Classic && hostname.map(existing_flavour) == Some(ExistingFlavour::Network) {
        let value = a.text(Key::Type).unwrap_or("(absent: classic)");
        found.problem(Key::Type.name(), value.to_owned(), &accepted("an NLB"));
    }
}

/// The refusal of a flavour change found in AWS: the Service wants `spec.flavour` but already `has` the other
/// flavour's load balancer (`"an NLB"`, `"a Classic ELB"`).
pub(crate) fn refusal(spec: &ServiceSpec, has: &str) -> InvalidService {
    InvalidService {
        namespace: spec.namespace.clone(),
        name: spec.name.clone(),
        problems: vec![Problem {
            field: Key::Type.name().to_owned(),
            value: if spec.flavour == Flavour::Network {
                "nlb".to_owned()
            } else {
                "(absent: classic)".to_owned()
            },
            accepted: accepted(has),
        }],
    }
}

fn accepted(has: &str) -> String {
    format!(
        "the Service already has {has}: the type cannot change after creation; delete and re-create the Service \
         (or restore the annotation)"
    )
}
