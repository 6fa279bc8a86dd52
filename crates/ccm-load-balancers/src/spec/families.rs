//! The IP families of a Service (`spec.ipFamilies`, `spec.ipFamilyPolicy`) as a load balancer's address type
//! (upstream #1219, #243): a Service the cluster made dual-stack, or one that requires it, gets a dual-stack NLB
//! unless `aws-load-balancer-ip-address-type` says otherwise (the annotation wins). A Classic ELB is IPv4 only:
//! a Service that prefers dual-stack gets one with a Warning, one that requires it (or is IPv6 only) an error.
//! A Service of the IPv6 family only is served by a dual-stack NLB (AWS has no IPv6-only NLB) whose target groups
//! are IPv6 ([`ipv6_targets`]), with a Warning saying so.

use k8s_openapi::api::core::v1::ServiceSpec as K8sServiceSpec;

use super::{Findings, Flavour, IpAddressType};
use crate::annotations::{Annotations, Key, Warning};

/// The address type and whether it only comes from a preference (`PreferDualStack`: an NLB whose subnets lack
/// IPv6 then falls back to IPv4 with a Warning instead of failing).
pub(super) fn address_type(
    k8s: &K8sServiceSpec,
    a: &Annotations,
    flavour: &Flavour,
    found: &mut Findings,
) -> (IpAddressType, bool) {
    match a.text(Key::IpAddressType) {
        Some("dualstack") => return (IpAddressType::Dualstack, false),
        Some(_) => return (IpAddressType::Ipv4, false),
        None => {}
    }
    let families = k8s.ip_families.as_deref().unwrap_or_default();
    let policy = k8s.ip_family_policy.as_deref().unwrap_or("SingleStack");
    let has_ipv6 = families.iter().any(|f| f == "IPv6");
    let has_ipv4 = families.is_empty() || families.iter().any(|f| f == "IPv4");
    let required = policy == "RequireDualStack" || !has_ipv4;
    if !has_ipv6 && policy != "RequireDualStack" {
        return (IpAddressType::Ipv4, false);
    }
    if *flavour == Flavour::Network {
        return (IpAddressType::Dualstack, !required);
    }
    if required {
        let (field, value) = if has_ipv4 {
            ("spec.ipFamilyPolicy", policy.to_owned())
        } else {
            ("spec.ipFamilies", families.join(","))
        };
        found.problem(
            field,
            value,
            "IPv4 (SingleStack or PreferDualStack): a Classic ELB serves IPv4 only; an NLB \
             (service.beta.kubernetes.io/aws-load-balancer-type: nlb) serves both families",
        );
    } else {
        found.warn(Warning {
            field: "spec.ipFamilyPolicy".to_owned(),
            value: policy.to_owned(),
            message: "a Classic ELB serves IPv4 only: the load balancer is IPv4 (an NLB, \
                      service.beta.kubernetes.io/aws-load-balancer-type: nlb, serves both families)"
                .to_owned(),
        });
    }
    (IpAddressType::Ipv4, false)
}

/// Whether the NLB's targets are IPv6: a Service of the IPv6 family only (`spec.ipFamilies: [IPv6]`), whose
/// nodes and pods are reached on IPv6, on a dual-stack NLB. Served, with a Warning on `spec.ipFamilies`: AWS has
/// no IPv6-only NLB, so IPv4 clients reach it too (from the NLB's own IPv6 addresses, without their own), and
/// instance targets need the nodes' primary IPv6 addresses. `aws-load-balancer-ip-address-type: ipv4` keeps
/// IPv4 targets (the annotation wins; an IPv4 NLB cannot use IPv6 groups), with a Warning too.
pub(super) fn ipv6_targets(
    k8s: &K8sServiceSpec,
    a: &Annotations,
    flavour: &Flavour,
    found: &mut Findings,
) -> bool {
    let families = k8s.ip_families.as_deref().unwrap_or_default();
    if *flavour != Flavour::Network || families.is_empty() || families.iter().any(|f| f != "IPv6") {
        return false;
    }
    let value = families.join(",");
    if a.text(Key::IpAddressType) == Some("ipv4") {
        found.warn(Warning {
            field: "spec.ipFamilies".to_owned(),
            value,
            message: "an IPv6-only Service on an IPv4 NLB (aws-load-balancer-ip-address-type: ipv4): its targets are \
                      the nodes' and pods' IPv4 addresses, which an IPv6-only cluster may not serve"
                .to_owned(),
        });
        return false;
    }
    found.warn(Warning {
        field: "spec.ipFamilies".to_owned(),
        value,
        message: "an IPv6-only Service is served by a dual-stack NLB (AWS has no IPv6-only NLB) with IPv6 target \
                  groups: IPv4 clients reach it too, and arrive from the NLB's own IPv6 addresses; instance targets \
                  need the nodes' primary IPv6 addresses"
            .to_owned(),
    });
    true
}
