//! Annotation values: each raw value validated against its key's declared type ([`parse_value`]), and the
//! annotations of a Service parsed once ([`Annotations`]) with typed accessors.

use std::{collections::BTreeMap, fmt, net::Ipv4Addr};

use serde::Serialize;

use super::{AttributeKeys, Key, ValueType, Warning, go_compat};

/// A parsed annotation value.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Value {
    /// A boolean.
    Bool(bool),
    /// An integer.
    Int(i64),
    /// A word or text, as written (trimmed); one-of values are lower-cased except health check protocols,
    /// which are upper-cased.
    Text(String),
    /// `None` for `traffic-port`, else the port.
    Port(Option<i32>),
    /// The name of one of the Service's ports (a health check port: that port's node port).
    PortName(String),
    /// A list of items (trimmed, empty items dropped).
    List(Vec<String>),
    /// Key/value pairs in order of appearance (values may be empty).
    Pairs(Vec<(String, String)>),
}

// === impl ValueType ===

impl ValueType {
    /// What the type accepts, in words (used in errors and docs).
    pub fn accepted(&self) -> String {
        match self {
            Self::Bool => "true or false".to_owned(),
            Self::Int { min, max } => format!("an integer from {min} to {max}"),
            Self::IntOneOf(values) => format!(
                "one of {}",
                values.iter().map(i64::to_string).collect::<Vec<_>>().join(", ")
            ),
            Self::OneOf(values) => format!("one of {}", values.join(", ")),
            Self::Text => "a non-empty string".to_owned(),
            Self::Arn => "an ACM or IAM certificate ARN (arn:...)".to_owned(),
            Self::Path => "a path starting with /".to_owned(),
            Self::HealthCheckPort => {
                "traffic-port, a port number from 1 to 65535, or the name of a Service port".to_owned()
            }
            Self::IdList(prefix) => format!("comma-separated IDs starting with {prefix}"),
            Self::PrefixListIds => "comma-separated managed prefix list IDs: pl- followed by 1 to 17 hexadecimal \
                                    digits (pl-63a5400a, pl-0123456789abcdef0)"
                .to_owned(),
            Self::SubnetList => "comma-separated subnet IDs (subnet-...) or subnet Name tags".to_owned(),
            Self::PortList => "* or comma-separated port numbers or port names".to_owned(),
            Self::Ipv4List => "comma-separated IPv4 addresses".to_owned(),
            Self::CidrList => "comma-separated CIDRs (10.0.0.0/8, 2001:db8::/32)".to_owned(),
            Self::TagList => {
                "comma-separated key=value tags (key 1-128 characters, not aws:... and not the controller's own \
                 kubernetes.io/cluster/..., KubernetesCluster, kubernetes.io/service-name, \
                 kubernetes.io/additional-resource-tags, kubernetes.io/cloud-controller/managed-tags, \
                 kubernetes.io/hand-over/... or kubernetes.io/adopted; value up to 256)"
                    .to_owned()
            }
            Self::LabelList => "comma-separated key=value node labels (value may be empty)".to_owned(),
            Self::TargetGroupAttributes => format!(
                "comma-separated preserve_client_ip.enabled=true|false, proxy_protocol_v2.enabled=true|false, \
                 deregistration_delay.timeout_seconds=0..3600, or another attribute of NLB target groups that \
                 AWS documents ({}; AWS checks its value), each key once; {EXTRA_KEYS}",
                others(super::NLB_TARGET_GROUP_ATTRIBUTE_KEYS, CHECKED_TARGET_GROUP_KEYS)
            ),
            Self::ListenerAttributes => format!(
                "comma-separated key=value listener attributes, each key once: {}={}..{} (TCP listeners; the \
                 only key AWS documents for NLB listeners); {EXTRA_KEYS}",
                super::TCP_IDLE_TIMEOUT.0,
                super::TCP_IDLE_TIMEOUT.2.start(),
                super::TCP_IDLE_TIMEOUT.2.end()
            ),
            Self::LoadBalancerName => "1 to 32 letters, digits and hyphens, neither beginning nor ending with a \
                                       hyphen, not beginning with internal-"
                .to_owned(),
            Self::LoadBalancerAttributes => format!(
                "comma-separated key=value NLB attributes, each key once: {}, or another attribute of NLBs \
                 that AWS documents ({}; AWS checks its value); {EXTRA_KEYS}",
                super::NLB_ATTRIBUTES
                    .iter()
                    .map(|(k, values)| format!("{k}={}", values.join("|")))
                    .collect::<Vec<_>>()
                    .join(", "),
                others(
                    super::NLB_ATTRIBUTE_KEYS,
                    &super::NLB_ATTRIBUTES.iter().map(|(k, _)| *k).collect::<Vec<_>>()
                )
            ),
        }
    }
}

/// How the attribute annotations' texts name the escape hatch for keys AWS adds later.
const EXTRA_KEYS: &str = "other keys only when the cloud config allows them ([Global] \
                          ExtraLoadBalancerAttributeKeys)";

/// The target group attributes whose values the table checks itself.
const CHECKED_TARGET_GROUP_KEYS: &[&str] = &[
    "preserve_client_ip.enabled",
    "proxy_protocol_v2.enabled",
    "deregistration_delay.timeout_seconds",
];

/// The keys of `all` but `checked`, comma-separated.
fn others(all: &[&str], checked: &[&str]) -> String {
    all.iter()
        .filter(|k| !checked.contains(k))
        .copied()
        .collect::<Vec<_>>()
        .join(", ")
}

/// Parses Go's `strconv.ParseBool` forms.
pub fn parse_bool(raw: &str) -> Option<bool> {
    match raw {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Some(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Some(false),
        _ => None,
    }
}

fn csv(raw: &str) -> Vec<String> {
    raw.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect()
}

fn pairs(raw: &str) -> Vec<(String, String)> {
    csv(raw)
        .into_iter()
        .map(|item| match item.split_once('=') {
            Some((k, v)) => (k.trim().to_owned(), v.trim().to_owned()),
            None => (item, String::new()),
        })
        .collect()
}

/// Whether `name` is a Kubernetes port name (an IANA service name: 1 to 15 lower-case letters, digits and inner
/// single hyphens, with at least one letter).
fn is_port_name(name: &str) -> bool {
    (1..=15).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && name.bytes().any(|b| b.is_ascii_lowercase())
        && !name.starts_with('-')
        && !name.ends_with('-')
        && !name.contains("--")
}

/// Whether `s` is an IPv4 or IPv6 CIDR.
pub fn is_cidr(s: &str) -> bool {
    let Some((addr, len)) = s.split_once('/') else {
        return false;
    };
    let Ok(len) = len.parse::<u8>() else {
        return false;
    };
    match addr.parse::<std::net::IpAddr>() {
        Ok(std::net::IpAddr::V4(_)) => len <= 32,
        Ok(std::net::IpAddr::V6(_)) => len <= 128,
        Err(_) => false,
    }
}

/// Whether `id` is a managed prefix list ID as EC2 makes them: `pl-` and lower-case hexadecimal digits (8 for
/// the AWS-managed lists, 17 for those of an account).
pub fn is_prefix_list_id(id: &str) -> bool {
    id.strip_prefix("pl-").is_some_and(|hex| {
        (1..=17).contains(&hex.len())
            && hex
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    })
}

/// Validates one raw value of `key` against the table; the error is the text of what is accepted.
pub fn parse_value(key: Key, raw: &str) -> Result<Value, String> {
    let ty = key.def().value;
    if matches!(ty, ValueType::TagList)
        && let Some(refused) = pairs(raw)
            .into_iter()
            .map(|(k, _)| k)
            .find(|k| is_controller_tag(k))
    {
        // Named on its own: a Service author must not make another cluster (or its leak report) treat these
        // resources as its own, nor detach them from their Service.
        return Err(format!(
            "{}; the key {refused:?} is refused: it is one of the controller's own tags",
            ty.accepted()
        ));
    }
    let value = match ty {
        ValueType::IdList(_)
        | ValueType::PrefixListIds
        | ValueType::SubnetList
        | ValueType::PortList
        | ValueType::Ipv4List
        | ValueType::CidrList => list_value(ty, raw),
        ValueType::TagList
        | ValueType::LabelList
        | ValueType::TargetGroupAttributes
        | ValueType::LoadBalancerAttributes
        | ValueType::ListenerAttributes => pairs_value(ty, raw),
        _ => scalar_value(ty, raw.trim()),
    };
    value.ok_or_else(|| ty.accepted())
}

/// Whether a tag key is one the controller writes itself: cluster ownership (`kubernetes.io/cluster/<id>`,
/// `KubernetesCluster`), the Service a load balancer belongs to (`kubernetes.io/service-name`) or the record of
/// the annotation's keys (`kubernetes.io/additional-resource-tags`, and the Go controller's
/// `kubernetes.io/cloud-controller/managed-tags`), and adoption's (`kubernetes.io/hand-over/<cluster ID>`,
/// `kubernetes.io/adopted`).
fn is_controller_tag(key: &str) -> bool {
    use crate::shared::names::{
        ADOPTED_TAG, ANNOTATION_TAGS_MARKER, HAND_OVER_TAG_PREFIX, SERVICE_NAME_TAG, UPSTREAM_TAGS_MARKER,
    };
    ccm_tagging::is_ownership_key(key)
        || key
            .get(..HAND_OVER_TAG_PREFIX.len())
            .is_some_and(|p| p.eq_ignore_ascii_case(HAND_OVER_TAG_PREFIX))
        || [
            SERVICE_NAME_TAG,
            ANNOTATION_TAGS_MARKER,
            UPSTREAM_TAGS_MARKER,
            ADOPTED_TAG,
        ]
        .iter()
        .any(|own| key.eq_ignore_ascii_case(own))
}

/// A single value (`trimmed`), if valid.
fn scalar_value(ty: ValueType, trimmed: &str) -> Option<Value> {
    match ty {
        ValueType::Bool => parse_bool(trimmed).map(Value::Bool),
        ValueType::Int { min, max } => trimmed
            .parse::<i64>()
            .ok()
            .filter(|v| (min..=max).contains(v))
            .map(Value::Int),
        ValueType::IntOneOf(values) => trimmed
            .parse::<i64>()
            .ok()
            .filter(|v| values.contains(v))
            .map(Value::Int),
        ValueType::OneOf(values) => values
            .iter()
            .find(|v| v.eq_ignore_ascii_case(trimmed))
            .map(|v| Value::Text((*v).to_owned())),
        ValueType::Text => (!trimmed.is_empty()).then(|| Value::Text(trimmed.to_owned())),
        ValueType::Arn => trimmed
            .starts_with("arn:")
            .then(|| Value::Text(trimmed.to_owned())),
        ValueType::Path => trimmed.starts_with('/').then(|| Value::Text(trimmed.to_owned())),
        ValueType::HealthCheckPort if trimmed == "traffic-port" => Some(Value::Port(None)),
        ValueType::HealthCheckPort => match trimmed.parse::<i32>() {
            Ok(p) => (1..=65535).contains(&p).then_some(Value::Port(Some(p))),
            Err(_) => is_port_name(trimmed).then(|| Value::PortName(trimmed.to_owned())),
        },
        ValueType::LoadBalancerName => {
            crate::shared::is_load_balancer_name(trimmed).then(|| Value::Text(trimmed.to_owned()))
        }
        _ => None,
    }
}

/// A comma-separated list, if every item is valid.
fn list_value(ty: ValueType, raw: &str) -> Option<Value> {
    let items = csv(raw);
    let valid = match ty {
        ValueType::IdList(prefix) => {
            !items.is_empty()
                && items
                    .iter()
                    .all(|i| i.starts_with(prefix) && i.len() != prefix.len())
        }
        ValueType::PrefixListIds => !items.is_empty() && items.iter().all(|i| is_prefix_list_id(i)),
        ValueType::SubnetList => !items.is_empty(),
        ValueType::PortList if items.iter().any(|i| i == "*") => return Some(Value::List(Vec::new())),
        ValueType::PortList => !items.iter().any(|i| {
            i.parse::<i32>().map_or_else(
                // A port name: lower-case alphanumerics and '-', at most 15 (IANA_SVC_NAME).
                |_| i.len() > 15 || !i.chars().all(|c| c.is_ascii_alphanumeric() || c == '-'),
                |p| !(1..=65535).contains(&p),
            )
        }),
        ValueType::Ipv4List => !items.is_empty() && items.iter().all(|i| i.parse::<Ipv4Addr>().is_ok()),
        ValueType::CidrList => !items.is_empty() && items.iter().all(|i| is_cidr(i)),
        _ => false,
    };
    valid.then_some(Value::List(items))
}

/// A comma-separated list of `key=value` pairs, if every pair is valid.
fn pairs_value(ty: ValueType, raw: &str) -> Option<Value> {
    let items = pairs(raw);
    let valid = match ty {
        ValueType::TagList => !items
            .iter()
            .any(|(k, v)| k.is_empty() || k.len() > 128 || v.len() > 256 || ccm_tagging::is_aws_reserved(k)),
        ValueType::LabelList => !items.iter().any(|(k, _)| k.is_empty()),
        ValueType::TargetGroupAttributes => {
            let valid = |k: &str, v: &str| match k {
                "preserve_client_ip.enabled" | "proxy_protocol_v2.enabled" => matches!(v, "true" | "false"),
                // AWS's range; the default is 300 s.
                "deregistration_delay.timeout_seconds" => v.parse::<u16>().is_ok_and(|s| s <= 3600),
                // Any other well-formed key: whether AWS knows it is the question of `AttributeKeys::check`
                // (which knows the operator's extra keys); AWS checks the value.
                k => is_attribute_key(k) && !v.is_empty(),
            };
            // A key given twice is refused (upstream #1452): one of the two values would win silently.
            let mut seen = std::collections::BTreeSet::new();
            !items.is_empty() && items.iter().all(|(k, v)| valid(k, v) && seen.insert(k.as_str()))
        }
        ValueType::LoadBalancerAttributes => {
            let valid = |k: &str, v: &str| match super::NLB_ATTRIBUTES.iter().find(|(key, _)| *key == k) {
                Some((_, values)) => values.contains(&v),
                None => is_attribute_key(k) && !v.is_empty(),
            };
            let mut seen = std::collections::BTreeSet::new();
            !items.is_empty() && items.iter().all(|(k, v)| valid(k, v) && seen.insert(k.as_str()))
        }
        ValueType::ListenerAttributes => {
            let (idle, _, range) = super::TCP_IDLE_TIMEOUT;
            let valid = |k: &str, v: &str| match k {
                k if k == idle => v.parse::<i64>().is_ok_and(|s| range.contains(&s)),
                k => is_attribute_key(k) && !v.is_empty(),
            };
            let mut seen = std::collections::BTreeSet::new();
            !items.is_empty() && items.iter().all(|(k, v)| valid(k, v) && seen.insert(k.as_str()))
        }
        _ => false,
    };
    valid.then_some(Value::Pairs(items))
}

/// ELBv2's attribute keys: lower case, digits, `_` and `.`, with at least one `.` (AWS checks the value).
fn is_attribute_key(k: &str) -> bool {
    k.contains('.')
        && k.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '.')
}

/// What one `aws-load-balancer-listener-attributes.<PROTOCOL>-<port>` annotation sets.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ListenerAttributes {
    /// The whole annotation name (for errors).
    pub annotation: String,
    /// The listener's protocol, upper case.
    pub protocol: String,
    /// The listener's port.
    pub port: i32,
    /// The attributes, in order of appearance.
    pub attributes: Vec<(String, String)>,
}

/// Parses one listener attribute annotation, or says what is accepted.
fn listener_attributes(name: &str, value: &str) -> Result<ListenerAttributes, String> {
    let suffix = name
        .strip_prefix(super::LISTENER_ATTRIBUTES_PREFIX)
        .unwrap_or_default();
    let listener = suffix.rsplit_once('-').and_then(|(protocol, port)| {
        let protocol = protocol.to_ascii_uppercase();
        let port = port.parse::<i32>().ok().filter(|p| (1..=65535).contains(p))?;
        super::LISTENER_PROTOCOLS
            .contains(&protocol.as_str())
            .then_some((protocol, port))
    });
    let Some((protocol, port)) = listener else {
        return Err(format!(
            "a name ending in .<PROTOCOL>-<port> (PROTOCOL one of {}, a port from 1 to 65535)",
            super::LISTENER_PROTOCOLS.join(", ")
        ));
    };
    let attributes = match parse_value(Key::ListenerAttributes, value)? {
        Value::Pairs(pairs) => pairs,
        _ => Vec::new(),
    };
    Ok(ListenerAttributes {
        annotation: name.to_owned(),
        protocol,
        port,
        attributes,
    })
}

/// The annotations of the table present on a Service, validated; collects a [`Problem`] per bad value and a
/// [`Warning`] per value served with the Go controller's surprising meaning.
#[derive(Debug, Default)]
pub struct Annotations {
    values: BTreeMap<Key, Value>,
    listener_attributes: Vec<ListenerAttributes>,
    /// Every problem found.
    pub problems: Vec<Problem>,
    /// Every value the Go controller accepted with a meaning its author probably did not intend.
    pub warnings: Vec<Warning>,
}

// === impl Annotations ===

impl Annotations {
    /// Validates every table annotation present in `raw`, read first as the Go controller read it (an empty
    /// value is usually no annotation; see the `go_compat` module). Attribute keys are checked against the keys
    /// AWS documents only: [`Annotations::parse_with`] takes the operator's extra keys too.
    pub fn parse(raw: &BTreeMap<String, String>) -> Self {
        Self::parse_with(raw, &AttributeKeys::default())
    }

    /// [`Annotations::parse`], the attribute annotations accepting the keys of `keys` (the documented ones and
    /// `[Global] ExtraLoadBalancerAttributeKeys`): an unknown key is a problem like a bad value, before any call
    /// to AWS (which would refuse it only after making the security group, target groups and the NLB).
    pub fn parse_with(raw: &BTreeMap<String, String>, keys: &AttributeKeys) -> Self {
        let mut out = Self::default();
        for key in Key::ALL {
            let Some(value) = raw.get(key.name()) else {
                continue;
            };
            let (served, warning) = go_compat::go_value(*key, value, raw, keys);
            if let Some(message) = warning {
                out.warnings.push(Warning {
                    field: key.name().to_owned(),
                    value: value.clone(),
                    message,
                });
            }
            let Some(served) = served else {
                continue;
            };
            match parse_value(*key, &served) {
                Ok(v) => {
                    out.values.insert(*key, v);
                }
                Err(accepted) => out.problems.push(Problem {
                    field: key.name().to_owned(),
                    value: value.clone(),
                    accepted,
                }),
            }
        }
        let prefix = super::LISTENER_ATTRIBUTES_PREFIX;
        for (name, value) in raw.iter().filter(|(k, _)| k.starts_with(prefix)) {
            match listener_attributes(name, value) {
                Ok(l) => out.listener_attributes.push(l),
                Err(accepted) => out.problems.push(Problem {
                    field: name.clone(),
                    value: value.clone(),
                    accepted,
                }),
            }
        }
        let unknown_keys = keys.check(&out);
        out.problems.extend(unknown_keys);
        super::albc::check(raw, &mut out.warnings, &mut out.problems);
        out
    }

    /// The valid `aws-load-balancer-listener-attributes.<PROTOCOL>-<port>` annotations.
    pub fn listener_attributes(&self) -> &[ListenerAttributes] {
        &self.listener_attributes
    }

    /// Whether the annotation is present with a valid value.
    pub fn has(&self, key: Key) -> bool {
        self.values.contains_key(&key)
    }

    /// The parsed value.
    pub fn get(&self, key: Key) -> Option<&Value> {
        self.values.get(&key)
    }

    /// A boolean annotation.
    pub fn bool(&self, key: Key) -> Option<bool> {
        match self.get(key) {
            Some(Value::Bool(b)) => Some(*b),
            _ => None,
        }
    }

    /// An integer annotation.
    pub fn int(&self, key: Key) -> Option<i64> {
        match self.get(key) {
            Some(Value::Int(v)) => Some(*v),
            _ => None,
        }
    }

    /// A text annotation.
    pub fn text(&self, key: Key) -> Option<&str> {
        match self.get(key) {
            Some(Value::Text(v)) => Some(v),
            _ => None,
        }
    }

    /// A list annotation.
    pub fn list(&self, key: Key) -> Option<&[String]> {
        match self.get(key) {
            Some(Value::List(v)) => Some(v),
            _ => None,
        }
    }

    /// A key/value list annotation.
    pub fn pairs(&self, key: Key) -> Option<&[(String, String)]> {
        match self.get(key) {
            Some(Value::Pairs(v)) => Some(v),
            _ => None,
        }
    }

    /// The health check port annotation: `Some(None)` for `traffic-port`.
    pub fn port(&self, key: Key) -> Option<Option<i32>> {
        match self.get(key) {
            Some(Value::Port(p)) => Some(*p),
            _ => None,
        }
    }

    /// The health check port annotation when it names one of the Service's ports.
    pub fn port_name(&self, key: Key) -> Option<&str> {
        match self.get(key) {
            Some(Value::PortName(name)) => Some(name),
            _ => None,
        }
    }
}

/// One problem with a Service: the field or annotation, the bad value, and what is accepted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Problem {
    /// The annotation name or the Service field (`spec.ports[0].protocol`, ...).
    pub field: String,
    /// The refused value.
    pub value: String,
    /// What would be accepted, or what to do instead.
    pub accepted: String,
}

// === impl Problem ===

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}={:?}: {}", self.field, self.value, self.accepted)
    }
}
