//! Annotations whose value alone does not say what is served: several certificates (an NLB's TLS listeners take
//! them, a Classic ELB's one), health check success codes, and proxy protocol v2 on an NLB, which needs the
//! Service's consent.

use std::collections::BTreeMap;

use super::{Findings, Flavour};
use crate::annotations::{Annotations, Key, Warning};

/// The target group attribute of proxy protocol v2.
const PROXY_PROTOCOL_V2: &str = "proxy_protocol_v2.enabled";

/// Certificates besides the default one that an NLB listener takes (its quota, which AWS does not raise).
pub(crate) const MAX_EXTRA_CERTIFICATES: usize = 25;

/// The default certificate and the others, in the order given (repeats dropped). Several are comma-separated,
/// as the AWS Load Balancer Controller takes them; a Classic ELB listener takes one.
pub(crate) fn certificates(
    a: &Annotations,
    flavour: &Flavour,
    found: &mut Findings,
) -> (Option<String>, Vec<String>) {
    let Some(raw) = a.text(Key::SslCert) else {
        return (None, Vec::new());
    };
    let mut arns: Vec<String> = Vec::new();
    for arn in raw.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        if !arn.starts_with("arn:") {
            found.problem(
                Key::SslCert.name(),
                arn.to_owned(),
                "comma-separated ACM or IAM certificate ARNs (arn:...)",
            );
        } else if !arns.iter().any(|a| a == arn) {
            arns.push(arn.to_owned());
        }
    }
    if arns.len() > 1 && *flavour == Flavour::Classic {
        found.problem(
            Key::SslCert.name(),
            raw.to_owned(),
            "one certificate ARN on a Classic ELB (an NLB takes several, comma-separated)",
        );
    }
    if arns.len() > MAX_EXTRA_CERTIFICATES + 1 {
        found.problem(
            Key::SslCert.name(),
            format!("{} certificates", arns.len()),
            &format!(
                "at most {} (the default and {MAX_EXTRA_CERTIFICATES} more, an NLB listener's quota)",
                MAX_EXTRA_CERTIFICATES + 1
            ),
        );
    }
    let mut arns = arns.into_iter();
    (arns.next(), arns.collect())
}

/// The HTTP codes of a healthy answer (`aws-load-balancer-healthcheck-success-codes`), spaces dropped: codes
/// from 200 to 599, ranges and comma-separated lists of them, as an NLB's matcher takes them.
pub(crate) fn success_codes(a: &Annotations, found: &mut Findings) -> Option<String> {
    let raw = a.text(Key::HealthcheckSuccessCodes)?;
    let codes: Vec<&str> = raw.split(',').map(str::trim).collect();
    if codes.iter().all(|item| is_code_or_range(item)) {
        return Some(codes.join(","));
    }
    found.problem(
        Key::HealthcheckSuccessCodes.name(),
        raw.to_owned(),
        "HTTP codes from 200 to 599: one (200), a range (200-299) or a comma-separated list of them (200,202)",
    );
    None
}

fn is_code_or_range(item: &str) -> bool {
    let code = |s: &str| {
        (s.len() == 3)
            .then(|| s.parse::<u16>().ok())
            .flatten()
            .filter(|c| (200..=599).contains(c))
    };
    match item.split_once('-') {
        Some((low, high)) => code(low).zip(code(high)).is_some_and(|(l, h)| l <= h),
        None => code(item).is_some(),
    }
}

/// Proxy protocol v2 on an NLB's target groups: `aws-load-balancer-proxy-protocol: "*"` turns it on only with
/// `aws-load-balancer-allow-proxy-protocol: "true"`. The Go controller ignored the key on NLBs, so the back ends
/// of an NLB it made may not parse the header; without consent the Service gets a Warning and nothing changes.
/// Consent beside `target-group-attributes` saying `proxy_protocol_v2.enabled=false` is a problem naming both.
pub(crate) fn proxy_protocol_v2(
    a: &Annotations,
    flavour: &Flavour,
    attributes: &mut BTreeMap<String, String>,
    found: &mut Findings,
) {
    if *flavour != Flavour::Network {
        return;
    }
    // The Go controller ignored the key on NLBs whatever its value: a Service it served is never refused for it.
    found.problems_to_warnings(
        Key::ProxyProtocol.name(),
        "no effect on an NLB: only `*` turns proxy protocol v2 on (the Go controller ignored the key on NLBs)",
    );
    if a.text(Key::ProxyProtocol) != Some("*") {
        return;
    }
    let consent = a.bool(Key::AllowProxyProtocol) == Some(true);
    match attributes.get(PROXY_PROTOCOL_V2).map(String::as_str) {
        // Already asked for by the attributes annotation.
        Some("true") => {}
        Some(_) if consent => found.problem(
            Key::TargetGroupAttributes.name(),
            format!("{PROXY_PROTOCOL_V2}=false"),
            &format!(
                "{PROXY_PROTOCOL_V2}=true, as {} with {} says, or only one of the two",
                Key::ProxyProtocol.name(),
                Key::AllowProxyProtocol.name()
            ),
        ),
        _ if consent => {
            attributes.insert(PROXY_PROTOCOL_V2.to_owned(), "true".to_owned());
        }
        _ => found.warn(Warning {
            field: Key::ProxyProtocol.name().to_owned(),
            value: "*".to_owned(),
            message: format!(
                "no effect on this NLB without {}: \"true\" (proxy protocol v2 sends every back end a header \
                 before the client's bytes, which back ends served without it may not parse)",
                Key::AllowProxyProtocol.name()
            ),
        }),
    }
}

#[cfg(test)]
mod tests;
