//! The annotation values the Go controller (cloud-provider-aws) served, read with Go's meaning before the table
//! validates them, so that a Service keeps working when the Go image is swapped for this one. Go's parsing, key
//! by key (`aws.go`, `aws_loadbalancer.go`):
//!
//! - most keys are read as `annotations[key] != ""`: an empty value is the same as no annotation;
//! - `type` is compared exactly: only `nlb` is an NLB, `nlb-ip`/`external` are left alone, anything else
//!   (`NLB`, `alb`, ...) is a Classic ELB;
//! - `internal` is `!= "false"`: any other non-empty value (`1`, `yes`, even `False` or `0`) is internal;
//! - `backend-protocol` without a certificate is `== "http"` on Classic ELBs and `== "ssl"` on NLBs, anything
//!   else being TCP; with a certificate only the four lower-case words are accepted;
//! - key/value lists (`additional-resource-tags`, `target-node-labels`, `target-group-attributes`) skip items
//!   with an empty key, and target group attributes a target group does not have;
//! - `ssl-ports` items that are neither a number nor a port name simply match no port.
//!
//! Where Go failed (bad booleans and integers, an unknown `backend-protocol` with a certificate, a
//! `proxy-protocol` other than `*`) or AWS would refuse the call, the table stays strict. Where Go's meaning is
//! surprising the value is served with Go's meaning and a [`Warning`] says so (in the log, and in
//! `ServiceSpec::warnings` for the caller to post as a Warning Event).

use std::{collections::BTreeMap, fmt};

use serde::Serialize;

use super::{AttributeKeys, AttributeKind, Key, parse_value};

/// A value served with the Go controller's meaning, which is probably not what its author meant.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Warning {
    /// The annotation.
    pub field: String,
    /// Its value, as written.
    pub value: String,
    /// What the value means here (as it did in Go) and what to write instead.
    pub message: String,
}

impl fmt::Display for Warning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}={:?}: {}", self.field, self.value, self.message)
    }
}

/// What Go made of a raw value: `None` when Go treated it as absent, else the value for the table (possibly
/// rewritten to the one with Go's meaning), and a warning when that meaning is surprising. Go applied any
/// target group attribute an NLB target group has (AWS's list, [`AttributeKeys`]) and skipped the others; the
/// operator's extra keys count as ones it has.
pub(crate) fn go_value(
    key: Key,
    raw: &str,
    all: &BTreeMap<String, String>,
    keys: &AttributeKeys,
) -> (Option<String>, Option<String>) {
    let trimmed = raw.trim();
    // getSGListFromAnnotation drops empty items: a list of nothing is no list.
    let no_items = matches!(key, Key::SecurityGroups | Key::ExtraSecurityGroups)
        && raw.split(',').all(|i| i.trim().is_empty());
    if (trimmed.is_empty() && empty_is_absent(key)) || no_items {
        return (None, None);
    }
    match key {
        Key::Type => type_value(trimmed),
        Key::Internal => internal_value(trimmed),
        Key::BackendProtocol => backend_protocol_value(trimmed, all),
        Key::AdditionalResourceTags | Key::TargetNodeLabels | Key::TargetGroupAttributes => {
            pairs_value(key, raw, keys)
        }
        Key::SslPorts => ssl_ports_value(raw),
        _ => (Some(raw.to_owned()), None),
    }
}

/// The keys Go read as `value != ""` (or as a list that may be empty): empty means unset. Not the prefix lists
/// (the AWS Load Balancer Controller's key): an empty list there lets nobody in, where absent lets the default
/// `0.0.0.0/0` in, so empty is an error.
fn empty_is_absent(key: Key) -> bool {
    !matches!(
        key,
        Key::Subnets
            | Key::SslNegotiationPolicy
            | Key::HealthcheckProtocol
            | Key::HealthcheckPort
            | Key::HealthcheckHealthyThreshold
            | Key::HealthcheckUnhealthyThreshold
            | Key::HealthcheckTimeout
            | Key::HealthcheckInterval
            | Key::EipAllocations
            | Key::PrivateIpv4Addresses
            | Key::IpAddressType
            | Key::SecurityGroupPrefixLists
    )
}

fn type_value(v: &str) -> (Option<String>, Option<String>) {
    match v {
        "nlb" | "nlb-ip" | "external" => (Some(v.to_owned()), None),
        _ if v.eq_ignore_ascii_case("classic") || v.eq_ignore_ascii_case("clb") => (Some(v.to_owned()), None),
        _ => (
            Some("classic".to_owned()),
            Some(
                "served as a Classic ELB, as the Go controller did: only the lower-case values nlb, nlb-ip and \
                 external select another type"
                    .to_owned(),
            ),
        ),
    }
}

fn internal_value(v: &str) -> (Option<String>, Option<String>) {
    match v {
        "true" | "false" | "0.0.0.0/0" => (Some(v.to_owned()), None),
        _ => {
            let false_like = super::parse_bool(v) == Some(false)
                || ["no", "n", "off", "false"]
                    .iter()
                    .any(|f| v.eq_ignore_ascii_case(f));
            let warning = false_like.then(|| {
                "served as internal, as the Go controller did (only the exact value false means \
                 internet-facing): write false for an internet-facing load balancer, true for an internal one"
                    .to_owned()
            });
            (Some("true".to_owned()), warning)
        }
    }
}

fn backend_protocol_value(v: &str, all: &BTreeMap<String, String>) -> (Option<String>, Option<String>) {
    let known = ["http", "https", "ssl", "tcp"];
    let has_cert = all.get(Key::SslCert.name()).is_some_and(|c| !c.trim().is_empty());
    if known.contains(&v) || has_cert {
        // With a certificate Go refused anything but the four words: the table stays strict.
        return (Some(v.to_owned()), None);
    }
    let nlb = all.get(Key::Type.name()).map(String::as_str) == Some("nlb");
    let (meaning, used) = if nlb { ("ssl", "TLS") } else { ("http", "HTTP") };
    let lower = v.to_ascii_lowercase();
    // Go compared the Classic health check case-insensitively: HTTPS and SSL still gave an SSL health check.
    let served = if !nlb && matches!(lower.as_str(), "https" | "ssl") {
        lower
    } else {
        "tcp".to_owned()
    };
    (
        Some(served.clone()),
        Some(format!(
            "served as {served}, as the Go controller did (only the lower-case {meaning} gives {used} to the \
             nodes here): write one of {}",
            known.join(", ")
        )),
    )
}

fn pairs_value(key: Key, raw: &str, keys: &AttributeKeys) -> (Option<String>, Option<String>) {
    let mut kept = Vec::new();
    let mut dropped = Vec::new();
    let mut truncated = Vec::new();
    for item in raw.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        let k = item.split('=').next().unwrap_or("").trim();
        if k.is_empty() || (key == Key::TargetGroupAttributes && !keys.accepts(AttributeKind::TargetGroup, k))
        {
            dropped.push(item);
        } else {
            if key == Key::AdditionalResourceTags && item.matches('=').count() > 1 {
                truncated.push(item);
            }
            kept.push(item);
        }
    }
    let mut notes = Vec::new();
    if !dropped.is_empty() {
        let why = if key == Key::TargetGroupAttributes {
            "not a target group attribute of an NLB, or with an empty key"
        } else {
            "with an empty key"
        };
        notes.push(format!(
            "ignored {} ({why}), as the Go controller did",
            dropped.join(", ")
        ));
    }
    if !truncated.is_empty() {
        notes.push(format!(
            "the value of {} is everything after the first '=' here; the Go controller kept only the text \
             up to the second '='",
            truncated.join(", ")
        ));
    }
    let warning = (!notes.is_empty()).then(|| notes.join("; "));
    if kept.is_empty() {
        return (None, warning);
    }
    (Some(kept.join(",")), warning)
}

fn ssl_ports_value(raw: &str) -> (Option<String>, Option<String>) {
    let items: Vec<&str> = raw.split(',').map(str::trim).filter(|i| !i.is_empty()).collect();
    let (kept, dropped): (Vec<&str>, Vec<&str>) =
        items.iter().partition(|i| parse_value(Key::SslPorts, i).is_ok());
    if dropped.is_empty() {
        return (Some(raw.to_owned()), None);
    }
    let warning = format!(
        "{} match no port (neither a port number nor a port name), as in the Go controller",
        dropped.join(", ")
    );
    if kept.is_empty() {
        // Go's port set held only names matching nothing: no port gets the certificate.
        return (Some(NO_PORT.to_owned()), Some(warning));
    }
    (Some(kept.join(",")), Some(warning))
}

/// An `ssl-ports` value that matches no port: a valid item of the table that no Kubernetes port name can equal
/// (a port name contains a letter).
pub(crate) const NO_PORT: &str = "-";

#[cfg(test)]
mod tests;
