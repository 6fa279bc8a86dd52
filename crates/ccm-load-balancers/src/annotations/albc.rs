//! The AWS Load Balancer Controller's Service keys this controller does not serve. A Service it serves that carries
//! one gets a Warning naming the key, never silence: its author may expect that controller's behaviour. Where
//! leaving a key unserved would open the load balancer or the nodes wider than the Service asks, the Service is
//! refused instead, until the key goes (or the Service moves to that controller with `aws-load-balancer-type:
//! external`).

use std::collections::BTreeMap;

use super::{PREFIX, Problem, Warning};

/// The unserved keys, after [`PREFIX`] (the AWS Load Balancer Controller's names, v2.13).
pub const UNSERVED_KEYS: &[&str] = &[
    "proxy-protocol-per-target-group",
    "eip-allocations-discovery-tags",
    "ipv6-addresses",
    "manage-backend-security-group-rules",
    "inbound-sg-rules-on-private-link-traffic",
    "multi-cluster-target-group",
    "enable-prefix-for-ipv6-source-nat",
    "source-nat-ipv6-prefixes",
    "minimum-load-balancer-capacity",
    "enable-icmp-for-path-mtu-discovery",
    "enable-tcp-udp-listener",
    "disable-nlb-sg",
    "quic-enabled-ports",
    "quic-enabled-containers",
];

/// Whether `annotation` is one of [`UNSERVED_KEYS`].
pub fn is_unserved(annotation: &str) -> bool {
    annotation
        .strip_prefix(PREFIX)
        .is_some_and(|suffix| UNSERVED_KEYS.contains(&suffix))
}

/// Why leaving `suffix` with `value` unserved would expose more than the Service asks, if it would.
fn widens(suffix: &str, value: &str) -> Option<&'static str> {
    match suffix {
        // `false` asks that no rule be added to the nodes' groups; this controller adds them.
        "manage-backend-security-group-rules" if value.trim().eq_ignore_ascii_case("false") => Some(
            "not served here: this controller adds the rules that let the load balancer reach the nodes' ports; \
             remove the annotation, or use the AWS Load Balancer Controller (aws-load-balancer-type: external)",
        ),
        _ => None,
    }
}

/// A Warning for each unserved key in `raw`, or a problem where ignoring it would widen exposure.
pub(crate) fn check(
    raw: &BTreeMap<String, String>,
    warnings: &mut Vec<Warning>,
    problems: &mut Vec<Problem>,
) {
    for (name, value) in raw {
        let Some(suffix) = name.strip_prefix(PREFIX) else {
            continue;
        };
        if !UNSERVED_KEYS.contains(&suffix) {
            continue;
        }
        if let Some(why) = widens(suffix, value) {
            problems.push(Problem {
                field: name.clone(),
                value: value.clone(),
                accepted: why.to_owned(),
            });
        } else {
            warnings.push(Warning {
                field: name.clone(),
                value: value.clone(),
                message:
                    "the AWS Load Balancer Controller's annotation has no effect here: this controller does \
                          not serve it"
                        .to_owned(),
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(pairs: &[(&str, &str)]) -> (Vec<Warning>, Vec<Problem>) {
        let raw = pairs
            .iter()
            .map(|(k, v)| (format!("{PREFIX}{k}"), (*v).to_owned()))
            .collect();
        let (mut warnings, mut problems) = (Vec::new(), Vec::new());
        check(&raw, &mut warnings, &mut problems);
        (warnings, problems)
    }

    #[test]
    fn each_unserved_key_is_named_in_a_warning() {
        for suffix in UNSERVED_KEYS {
            let (warnings, problems) = run(&[(*suffix, "x")]);
            let field = format!("{PREFIX}{suffix}");
            assert!(problems.is_empty(), "{suffix}: {problems:?}");
            assert_eq!(warnings.len(), 1, "{suffix}");
            assert_eq!(warnings[0].field, field);
            assert!(warnings[0].message.contains("no effect"), "{suffix}");
            assert!(is_unserved(&field));
        }
        // Served keys and other prefixes are not this module's.
        let (warnings, problems) = run(&[("internal", "true"), ("scheme", "internal"), ("name", "x")]);
        assert!(warnings.is_empty() && problems.is_empty());
        assert!(!is_unserved(
            "service.kubernetes.io/aws-load-balancer-nlb-target-type"
        ));
    }

    #[test]
    fn keys_whose_absence_widens_exposure_are_refused() {
        let (warnings, problems) = run(&[
            ("manage-backend-security-group-rules", "False"),
            // Served now: not this module's.
            ("security-group-prefix-lists", "pl-0123"),
        ]);
        assert!(warnings.is_empty(), "{warnings:?}");
        let fields: Vec<&str> = problems.iter().map(|p| p.field.as_str()).collect();
        assert_eq!(fields, [format!("{PREFIX}manage-backend-security-group-rules")]);
        // Asking for what this controller does anyway is only a warning, or nothing.
        let (warnings, problems) = run(&[("manage-backend-security-group-rules", "true")]);
        assert!(problems.is_empty());
        assert_eq!(warnings.len(), 1);
    }
}
