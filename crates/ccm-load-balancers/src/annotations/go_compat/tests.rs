//! Each annotation's values as the Go controller (cloud-provider-aws `aws.go`, `aws_loadbalancer.go`) parsed
//! them: what it served (and with which meaning), what it treated as absent, and where it failed.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;

use crate::annotations::{Annotations, Key, Value};

#[derive(Debug)]
enum Go {
    /// Served with this value; `true` when the meaning is surprising (a Warning).
    Served(Value, bool),
    /// Treated as if the annotation were absent.
    Absent,
    /// Go failed the Service (or AWS refused the call): still a problem here.
    Failed,
}

use Go::{Absent, Failed, Served};

fn text(s: &str) -> Value {
    Value::Text(s.to_owned())
}

fn list(items: &[&str]) -> Value {
    Value::List(items.iter().map(|s| (*s).to_owned()).collect())
}

fn pairs(items: &[(&str, &str)]) -> Value {
    Value::Pairs(
        items
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
    )
}

const CERT: &[(Key, &str)] = &[(Key::SslCert, "arn:aws:acm:us-east-1:1:certificate/x")];
const NLB: &[(Key, &str)] = &[(Key::Type, "nlb")];

/// One case: the annotation, its value, the other annotations beside it, what Go did.
type Row = (Key, &'static str, &'static [(Key, &'static str)], Go);

fn table() -> Vec<Row> {
    vec![
        // type: isNLB is `== "nlb"`, isLBExternal `== "nlb-ip" || == "external"`, anything else Classic.
        (Key::Type, "nlb", &[], Served(text("nlb"), false)),
        (Key::Type, "nlb-ip", &[], Served(text("nlb-ip"), false)),
        (Key::Type, "external", &[], Served(text("external"), false)),
        (Key::Type, "", &[], Absent),
        (Key::Type, "classic", &[], Served(text("classic"), false)),
        (Key::Type, "NLB", &[], Served(text("classic"), true)),
        (Key::Type, "alb", &[], Served(text("classic"), true)),
        (Key::Type, "elb", &[], Served(text("classic"), true)),
        // internal: `== "false"` public, other non-empty values internal.
        (Key::Internal, "true", &[], Served(text("true"), false)),
        (Key::Internal, "false", &[], Served(text("false"), false)),
        (Key::Internal, "", &[], Absent),
        (Key::Internal, "1", &[], Served(text("true"), false)),
        (Key::Internal, "yes", &[], Served(text("true"), false)),
        (Key::Internal, "True", &[], Served(text("true"), false)),
        (Key::Internal, "0.0.0.0/0", &[], Served(text("0.0.0.0/0"), false)),
        (Key::Internal, "False", &[], Served(text("true"), true)),
        (Key::Internal, "0", &[], Served(text("true"), true)),
        (Key::Internal, "no", &[], Served(text("true"), true)),
        // Booleans: `!= ""` then strconv.ParseBool, an error on anything else.
        (
            Key::CrossZoneLoadBalancingEnabled,
            "True",
            &[],
            Served(Value::Bool(true), false),
        ),
        (
            Key::CrossZoneLoadBalancingEnabled,
            "1",
            &[],
            Served(Value::Bool(true), false),
        ),
        (
            Key::CrossZoneLoadBalancingEnabled,
            "t",
            &[],
            Served(Value::Bool(true), false),
        ),
        (
            Key::CrossZoneLoadBalancingEnabled,
            "F",
            &[],
            Served(Value::Bool(false), false),
        ),
        (Key::CrossZoneLoadBalancingEnabled, "", &[], Absent),
        (Key::CrossZoneLoadBalancingEnabled, "yes", &[], Failed),
        (
            Key::AccessLogEnabled,
            "TRUE",
            &[],
            Served(Value::Bool(true), false),
        ),
        (Key::AccessLogEnabled, "", &[], Absent),
        (
            Key::ConnectionDrainingEnabled,
            "0",
            &[],
            Served(Value::Bool(false), false),
        ),
        (Key::ConnectionDrainingEnabled, "", &[], Absent),
        (Key::ConnectionDrainingEnabled, "on", &[], Failed),
        // Integers of the Classic attributes: `!= ""` then ParseInt (AWS checks the range).
        (Key::ConnectionIdleTimeout, "", &[], Absent),
        (
            Key::ConnectionIdleTimeout,
            "120",
            &[],
            Served(Value::Int(120), false),
        ),
        (Key::ConnectionIdleTimeout, "2m", &[], Failed),
        (Key::ConnectionDrainingTimeout, "", &[], Absent),
        (Key::AccessLogEmitInterval, "", &[], Absent),
        (Key::AccessLogEmitInterval, "5", &[], Served(Value::Int(5), false)),
        (Key::AccessLogS3BucketName, "", &[], Absent),
        (Key::AccessLogS3BucketPrefix, "", &[], Absent),
        // Health check integers: ParseInt whenever present, so empty fails.
        (Key::HealthcheckInterval, "", &[], Failed),
        (Key::HealthcheckInterval, "30", &[], Served(Value::Int(30), false)),
        (Key::HealthcheckTimeout, "x", &[], Failed),
        (
            Key::HealthcheckHealthyThreshold,
            "3",
            &[],
            Served(Value::Int(3), false),
        ),
        (Key::HealthcheckUnhealthyThreshold, "", &[], Failed),
        // Health check protocol: upper-cased (NLB) or passed to AWS (Classic), empty refused by both.
        (Key::HealthcheckProtocol, "http", &[], Served(text("HTTP"), false)),
        (Key::HealthcheckProtocol, "", &[], Failed),
        (
            Key::HealthcheckPort,
            "traffic-port",
            &[],
            Served(Value::Port(None), false),
        ),
        (
            Key::HealthcheckPort,
            "8080",
            &[],
            Served(Value::Port(Some(8080)), false),
        ),
        (Key::HealthcheckPort, "", &[], Failed),
        // Path: Classic reads `s != ""`, so empty is the default path.
        (Key::HealthcheckPath, "", &[], Absent),
        (Key::HealthcheckPath, "/ready", &[], Served(text("/ready"), false)),
        // proxy-protocol: `!= ""`, then only `*`.
        (Key::ProxyProtocol, "", &[], Absent),
        (Key::ProxyProtocol, "*", &[], Served(text("*"), false)),
        (Key::ProxyProtocol, "true", &[], Failed),
        // ssl-cert: `certID != ""`.
        (Key::SslCert, "", &[], Absent),
        (
            Key::SslCert,
            "arn:aws:acm:us-east-1:1:certificate/x",
            &[],
            Served(text("arn:aws:acm:us-east-1:1:certificate/x"), false),
        ),
        // ssl-ports: getPortSets: "" and "*" are every port, non-numbers are names that may match nothing.
        (Key::SslPorts, "", &[], Absent),
        (Key::SslPorts, "*", &[], Served(list(&[]), false)),
        (
            Key::SslPorts,
            "443,https",
            &[],
            Served(list(&["443", "https"]), false),
        ),
        (Key::SslPorts, "443,my_port", &[], Served(list(&["443"]), true)),
        (Key::SslPorts, "my_port", &[], Served(list(&["-"]), true)),
        // ssl-negotiation-policy: read with `ok`, so empty reached AWS, which refused it.
        (Key::SslNegotiationPolicy, "", &[], Failed),
        // backend-protocol: without a certificate Classic compares `== "http"` (else TCP), NLB `== "ssl"`.
        (Key::BackendProtocol, "", &[], Absent),
        (Key::BackendProtocol, "http", &[], Served(text("http"), false)),
        (Key::BackendProtocol, "HTTP", &[], Served(text("tcp"), true)),
        (Key::BackendProtocol, "grpc", &[], Served(text("tcp"), true)),
        (Key::BackendProtocol, "SSL", &[], Served(text("ssl"), true)),
        (Key::BackendProtocol, "SSL", NLB, Served(text("tcp"), true)),
        (Key::BackendProtocol, "grpc", CERT, Failed),
        (Key::BackendProtocol, "ssl", CERT, Served(text("ssl"), false)),
        // Security groups: getSGListFromAnnotation drops empty items; an empty list means the default group.
        (Key::SecurityGroups, "", &[], Absent),
        (Key::SecurityGroups, " , ", &[], Absent),
        (
            Key::SecurityGroups,
            "sg-1, sg-2",
            &[],
            Served(list(&["sg-1", "sg-2"]), false),
        ),
        (Key::SecurityGroups, "default", &[], Failed),
        (Key::ExtraSecurityGroups, "", &[], Absent),
        // Subnets: an empty list failed ("unable to resolve empty subnet slice").
        (Key::Subnets, "", &[], Failed),
        (
            Key::Subnets,
            "subnet-1,public-a",
            &[],
            Served(list(&["subnet-1", "public-a"]), false),
        ),
        // Key/value lists: getKeyValuePropertiesFromAnnotation skips items with an empty key.
        (Key::AdditionalResourceTags, "", &[], Absent),
        (
            Key::AdditionalResourceTags,
            "team=a,=x,env",
            &[],
            Served(pairs(&[("team", "a"), ("env", "")]), true),
        ),
        (
            Key::AdditionalResourceTags,
            "url=a=b",
            &[],
            Served(pairs(&[("url", "a=b")]), true),
        ),
        (Key::AdditionalResourceTags, "aws:x=1", &[], Failed),
        (Key::TargetNodeLabels, "", &[], Absent),
        (Key::TargetNodeLabels, "=x", &[], Absent),
        (
            Key::TargetNodeLabels,
            "role=edge,=x",
            &[],
            Served(pairs(&[("role", "edge")]), true),
        ),
        // Target group attributes: any attribute the target group has is applied, others skipped.
        (Key::TargetGroupAttributes, "", NLB, Absent),
        (
            Key::TargetGroupAttributes,
            "stickiness.enabled=true",
            NLB,
            Served(pairs(&[("stickiness.enabled", "true")]), false),
        ),
        (
            Key::TargetGroupAttributes,
            "proxy_protocol_v2.enabled=true,made.up=1",
            NLB,
            Served(pairs(&[("proxy_protocol_v2.enabled", "true")]), true),
        ),
        (
            Key::TargetGroupAttributes,
            "preserve_client_ip.enabled=yes",
            NLB,
            Failed,
        ),
        // EIPs and private addresses: strings.Split, so empty gave one empty ID that AWS refused.
        (Key::EipAllocations, "", NLB, Failed),
        (Key::PrivateIpv4Addresses, "", NLB, Failed),
        // Source ranges: GetLoadBalancerSourceRanges defaults an empty (trimmed) value to 0.0.0.0/0.
        (Key::SourceRanges, "", &[], Absent),
        (Key::SourceRanges, " ", &[], Absent),
        (Key::SourceRanges, "10.0.0.0", &[], Failed),
    ]
}

#[test]
fn annotation_values_mean_what_they_meant_in_go() {
    for (key, raw, context, go) in table() {
        let mut map: BTreeMap<String, String> = context
            .iter()
            .map(|(k, v)| (k.name().to_owned(), (*v).to_owned()))
            .collect();
        map.insert(key.name().to_owned(), raw.to_owned());
        let a = Annotations::parse(&map);
        let case = format!("{}={raw:?} with {context:?}", key.name());
        let problem = a.problems.iter().find(|p| p.field == key.name());
        let warning = a.warnings.iter().find(|w| w.field == key.name());
        match go {
            Served(value, warns) => {
                assert!(problem.is_none(), "{case}: refused: {problem:?}");
                assert_eq!(a.get(key), Some(&value), "{case}");
                assert_eq!(warning.is_some(), warns, "{case}: warning {warning:?}");
            }
            Absent => {
                assert!(problem.is_none(), "{case}: refused: {problem:?}");
                assert_eq!(a.get(key), None, "{case}: served as absent");
            }
            Failed => {
                assert!(problem.is_some(), "{case}: Go failed on it, so must this");
            }
        }
    }
}

#[test]
fn every_annotation_has_a_row() {
    let rows = table();
    for key in Key::ALL {
        if key.origin() != crate::annotations::Origin::Go {
            continue; // not Go annotations (the AWS Load Balancer Controller's keys; this controller's own)
        }
        assert!(rows.iter().any(|(k, ..)| k == key), "{} has no row", key.name());
    }
}
