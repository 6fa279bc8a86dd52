//! When an NLB must be replaced rather than changed in place, the deletion that replaces it (after deletion
//! protection, when the Service turns it off), and the notice that says so.

use std::collections::{BTreeMap, BTreeSet};

use ccm_aws_api::{SubnetId, elbv2::LoadBalancerV2};

use super::super::{Change, Desired, Observed, Security};
use crate::{
    annotations::DELETION_PROTECTION,
    flavour::{PlannedChange, recreation_reason as flavour_recreation_reason},
    shared,
};

/// Whether a change only concerns the targets and the nodes' rules (what `UpdateLoadBalancer` may do).
pub fn is_host_change(change: &Change) -> bool {
    change.is_host_change()
}

/// What changed that makes a plan recreate the load balancer (`None`: no recreation).
pub fn recreation_reason(changes: &[Change]) -> Option<&str> {
    flavour_recreation_reason(changes)
}

/// The notice of a plan that recreates the NLB: a Warning naming what changed.
pub fn recreation(name: &str, changes: &[Change]) -> Option<String> {
    recreation_reason(changes).map(|reason| shared::recreation_notice("NLB", name, reason))
}

/// Why an existing NLB must be replaced (empty: it can be kept): what cannot change on a live NLB.
pub fn recreation_reasons(desired: &Desired, lb: &LoadBalancerV2) -> Vec<String> {
    let mut reasons = Vec::new();
    if lb.internal != desired.internal {
        reasons.push(format!(
            "scheme {} -> {}",
            shared::scheme(lb.internal),
            shared::scheme(desired.internal)
        ));
    }
    let current: BTreeSet<String> = lb
        .availability_zones
        .iter()
        .filter_map(|z| z.subnet_id.as_ref().map(ToString::to_string))
        .collect();
    let wanted: BTreeSet<String> = desired.subnets.iter().cloned().collect();
    if desired.subnets_pinned && current != wanted && !subnets_added_in_place(desired, lb) {
        reasons.push(format!(
            "subnets {} -> {}",
            current.into_iter().collect::<Vec<_>>().join(","),
            desired.subnets.join(",")
        ));
    }
    let addresses = || lb.availability_zones.iter().flat_map(|z| z.addresses.iter());
    let eips: BTreeSet<String> = addresses().filter_map(|a| a.allocation_id.clone()).collect();
    if !desired.eip_allocations.is_empty()
        && eips != desired.eip_allocations.iter().cloned().collect::<BTreeSet<_>>()
    {
        reasons.push(format!(
            "EIP allocations {} -> {}",
            eips.into_iter().collect::<Vec<_>>().join(","),
            desired.eip_allocations.join(",")
        ));
    }
    let ips: BTreeSet<String> = addresses()
        .filter_map(|a| a.private_ipv4_address.clone())
        .collect();
    if !desired.private_ipv4_addresses.is_empty()
        && ips
            != desired
                .private_ipv4_addresses
                .iter()
                .cloned()
                .collect::<BTreeSet<_>>()
    {
        reasons.push(format!(
            "private IPv4 addresses {} -> {}",
            ips.into_iter().collect::<Vec<_>>().join(","),
            desired.private_ipv4_addresses.join(",")
        ));
    }
    if let Security::Given(groups) = &desired.security
        && lb.security_groups.is_empty()
    {
        reasons.push(format!(
            "security groups {} requested on an NLB created without security groups (AWS cannot add them later)",
            groups.join(",")
        ));
    }
    reasons
}

/// `desired` with what only a new NLB could change taken from `lb` as it is (scheme, pinned subnets, no
/// address or group wishes it cannot meet): what the rest of a plan is made against when a recreation is
/// withheld. Its [`recreation_reasons`] against `lb` are none.
pub(in crate::nlb) fn kept(desired: &Desired, lb: &LoadBalancerV2) -> Desired {
    let mut kept = desired.clone();
    kept.internal = lb.internal;
    kept.subnets = kept_subnets(desired, lb);
    // Addresses are chosen at creation only; the NLB keeps those it has.
    kept.eip_allocations.clear();
    kept.private_ipv4_addresses.clear();
    if matches!(desired.security, Security::Given(_)) && lb.security_groups.is_empty() {
        kept.security = Security::Unmanaged;
    }
    kept
}

/// The subnets an NLB serves from when its recreation is withheld: the pinned ones when they are added in place
/// (or unpinned: discovery never changes an existing NLB, see the observation), else the NLB's own, sorted.
pub(in crate::nlb) fn kept_subnets(desired: &Desired, lb: &LoadBalancerV2) -> Vec<String> {
    if !desired.subnets_pinned || subnets_added_in_place(desired, lb) {
        return desired.subnets.clone();
    }
    let mut subnets: Vec<String> = lb
        .availability_zones
        .iter()
        .filter_map(|z| z.subnet_id.as_ref().map(ToString::to_string))
        .collect();
    subnets.sort();
    subnets
}

/// Whether the NLB's pinned subnets change only by subnets added (in zones the NLB does not use yet: one subnet
/// per zone is AWS's rule and its error names the zone otherwise), which `SetSubnets` does in place, keeping the
/// DNS name. Removing or swapping a subnet, or adding one where EIPs or private addresses are pinned (their
/// index mapping onto the sorted subnets shifts), needs a new NLB.
pub(super) fn subnets_added_in_place(desired: &Desired, lb: &LoadBalancerV2) -> bool {
    let current: BTreeSet<&str> = lb
        .availability_zones
        .iter()
        .filter_map(|z| z.subnet_id.as_ref().map(SubnetId::as_str))
        .collect();
    let wanted: BTreeSet<&str> = desired.subnets.iter().map(String::as_str).collect();
    desired.subnets_pinned
        && desired.eip_allocations.is_empty()
        && desired.private_ipv4_addresses.is_empty()
        && !current.is_empty()
        && current.is_subset(&wanted)
        && current != wanted
}

/// The deletion of a load balancer that cannot become what is wanted, and the load balancer that remains.
pub(super) fn recreate<'a>(
    desired: &Desired,
    observed: &'a Observed,
) -> (Vec<Change>, Option<&'a LoadBalancerV2>) {
    let Some(current) = observed.load_balancer.as_ref() else {
        return (Vec::new(), None);
    };
    let reasons = recreation_reasons(desired, current);
    if reasons.is_empty() {
        return (Vec::new(), Some(current));
    }
    if !desired.allow_recreation {
        let withheld = Change::RecreationWithheld {
            name: desired.name.clone(),
            reason: reasons.join("; "),
        };
        return (vec![withheld], Some(current));
    }
    let delete = Change::DeleteLoadBalancer {
        name: desired.name.clone(),
        arn: current.arn.clone(),
        recreate_because: Some(reasons.join("; ")),
    };
    // A protected NLB is deleted only once protection is off, as a deletion does: first, when the Service's
    // attributes say so; otherwise the ensure stops before any write (`protected_recreation`).
    if is_protected(observed) && unprotects(desired) {
        let unprotect = Change::ModifyAttributes {
            attributes: BTreeMap::from([(DELETION_PROTECTION.to_owned(), "false".to_owned())]),
        };
        return (vec![unprotect, delete], None);
    }
    (vec![delete], None)
}

fn is_protected(observed: &Observed) -> bool {
    observed
        .attributes
        .get(DELETION_PROTECTION)
        .is_some_and(|v| v == "true")
}

fn unprotects(desired: &Desired) -> bool {
    desired
        .attributes
        .get(DELETION_PROTECTION)
        .is_some_and(|v| v == "false")
}

/// The refusal of a plan that recreates a deletion-protected NLB whose Service does not turn protection off:
/// the deletion's own error ([`crate::Error::DeletionProtected`]), before anything is changed.
pub fn protected_recreation(
    desired: &Desired,
    observed: &Observed,
    changes: &[Change],
) -> Result<(), crate::Error> {
    let recreates = changes.iter().any(|c| {
        matches!(
            c,
            Change::DeleteLoadBalancer {
                recreate_because: Some(_),
                ..
            }
        )
    });
    if recreates && is_protected(observed) && !unprotects(desired) {
        return Err(crate::Error::DeletionProtected(desired.name.clone()));
    }
    if recreates && is_adopted(observed) && desired.release_on_deletion != Some(false) {
        return Err(crate::Error::AdoptedNotRecreated(desired.name.clone()));
    }
    Ok(())
}

/// Whether the NLB observed was adopted ([`crate::shared::ADOPTED_TAG`]).
fn is_adopted(observed: &Observed) -> bool {
    observed
        .load_balancer
        .as_ref()
        .and_then(|lb| observed.tags.get(&lb.arn))
        .and_then(|tags| tags.get(crate::shared::ADOPTED_TAG))
        .is_some_and(|v| v == "true")
}
