//! Which load balancer a Service gets ([`Flavour`], from the type annotation), and the annotations that belong
//! to the other flavour: rejected where setting them would mislead, otherwise ignored (a bad value of an ignored
//! annotation never blocks the Service).

use std::collections::BTreeMap;

use serde::Serialize;

use super::Findings;
use crate::annotations::{Annotations, Applies, Key, LISTENER_ATTRIBUTES_PREFIX};

/// Where the load balancer of a Service comes from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub enum Flavour {
    /// A Classic ELB (the default).
    Classic,
    /// An NLB with instance targets.
    Network,
    /// `nlb-ip` or `external`: the AWS Load Balancer Controller's business.
    External,
}

/// The flavour the type annotation names.
pub(crate) fn of(a: &Annotations) -> Flavour {
    match a.text(Key::Type) {
        Some("nlb") => Flavour::Network,
        Some("nlb-ip" | "external") => Flavour::External,
        _ => Flavour::Classic,
    }
}

/// Annotations of the other flavour that are errors rather than ignored.
pub(crate) fn reject_other_flavours_annotations(
    flavour: &Flavour,
    raw: &BTreeMap<String, String>,
    found: &mut Findings,
) {
    for key in Key::ALL {
        let rejected = match key.def().applies {
            Applies::ClbRejectedOnNlb => *flavour == Flavour::Network,
            Applies::NlbRejectedOnClb => *flavour == Flavour::Classic,
            _ => false,
        };
        if rejected && let Some(v) = raw.get(key.name()) {
            let other = if *flavour == Flavour::Network {
                "not supported on NLB: remove the annotation"
            } else {
                "only supported on NLB: remove the annotation"
            };
            found.problem(key.name(), v.clone(), other);
        }
    }
    if *flavour == Flavour::Classic {
        for (name, v) in raw
            .iter()
            .filter(|(k, _)| k.starts_with(LISTENER_ATTRIBUTES_PREFIX))
        {
            found.problem(name, v.clone(), "only supported on NLB: remove the annotation");
        }
    }
}

/// Whether `field` is an annotation this flavour ignores (a bad value of it is only logged).
pub(crate) fn ignores(flavour: &Flavour, field: &str) -> bool {
    Key::ALL.iter().any(|k| {
        k.name() == field
            && matches!(
                (k.def().applies, flavour),
                (Applies::Clb, Flavour::Network) | (Applies::Nlb, Flavour::Classic)
            )
    })
}
