//! What the IAM policy tests share: the table from the adapter's operations to IAM actions, and the scanner that
//! finds those operations (and their `ActionClass`) in `crates/ccm-aws-sdk/src/*.rs`.
//!
//! Every AWS operation of this crate is declared as an `Op` constant (`Op::new(Service::X, "Name", ..)`, or the
//! per-file `op("Name", ..)` shorthand) and every SDK call goes through one; role assumption (`role.rs`) calls
//! the STS client directly.
#![allow(dead_code)] // each test crate uses part of it

use std::{
    collections::{BTreeMap, BTreeSet},
    fs,
    path::{Path, PathBuf},
};

/// Where the IAM permission of an operation lives.
#[derive(Debug, Clone, Copy)]
pub enum Grant {
    /// These actions, in this policy file under `deploy/iam/`.
    Actions(&'static str, &'static [&'static str]),
    /// No permission of the caller is evaluated (the reason says why).
    NotNeeded(&'static str),
}

pub use Grant::{Actions, NotNeeded};

pub const CP: &str = "control-plane.json";
pub const ROLE: &str = "control-plane-assume-role.json";
pub const NODE: &str = "node.json";

/// (service as in `Service::X`, operation) -> grant.
pub const TABLE: &[(&str, &str, Grant)] = &[
    // EC2 (instances, routes, security groups, tags).
    (
        "Ec2",
        "DescribeInstances",
        Actions(CP, &["ec2:DescribeInstances"]),
    ),
    (
        "Ec2",
        "DescribeNetworkInterfaces",
        Actions(CP, &["ec2:DescribeNetworkInterfaces"]),
    ),
    (
        "Ec2",
        "DescribeAvailabilityZones",
        Actions(CP, &["ec2:DescribeAvailabilityZones"]),
    ),
    (
        "Ec2",
        "DescribeInstanceTopology",
        Actions(CP, &["ec2:DescribeInstanceTopology"]),
    ),
    (
        "Ec2",
        "ModifyInstanceAttribute",
        Actions(CP, &["ec2:ModifyInstanceAttribute"]),
    ),
    (
        "Ec2",
        "DescribeSecurityGroups",
        Actions(CP, &["ec2:DescribeSecurityGroups"]),
    ),
    // Created with TagSpecifications: tag-on-create is authorized as ec2:CreateTags (granted below).
    (
        "Ec2",
        "CreateSecurityGroup",
        Actions(CP, &["ec2:CreateSecurityGroup", "ec2:CreateTags"]),
    ),
    (
        "Ec2",
        "DeleteSecurityGroup",
        Actions(CP, &["ec2:DeleteSecurityGroup"]),
    ),
    (
        "Ec2",
        "AuthorizeSecurityGroupIngress",
        Actions(CP, &["ec2:AuthorizeSecurityGroupIngress"]),
    ),
    (
        "Ec2",
        "RevokeSecurityGroupIngress",
        Actions(CP, &["ec2:RevokeSecurityGroupIngress"]),
    ),
    ("Ec2", "DescribeSubnets", Actions(CP, &["ec2:DescribeSubnets"])),
    (
        "Ec2",
        "DescribeRouteTables",
        Actions(CP, &["ec2:DescribeRouteTables"]),
    ),
    ("Ec2", "CreateRoute", Actions(CP, &["ec2:CreateRoute"])),
    ("Ec2", "ReplaceRoute", Actions(CP, &["ec2:ReplaceRoute"])),
    ("Ec2", "DeleteRoute", Actions(CP, &["ec2:DeleteRoute"])),
    ("Ec2", "CreateTags", Actions(CP, &["ec2:CreateTags"])),
    ("Ec2", "DeleteTags", Actions(CP, &["ec2:DeleteTags"])),
    // Classic ELB.
    (
        "Elb",
        "DescribeLoadBalancers",
        Actions(CP, &["elasticloadbalancing:DescribeLoadBalancers"]),
    ),
    // Created with tags: tag-on-create needs AddTags too.
    (
        "Elb",
        "CreateLoadBalancer",
        Actions(
            CP,
            &[
                "elasticloadbalancing:CreateLoadBalancer",
                "elasticloadbalancing:AddTags",
            ],
        ),
    ),
    (
        "Elb",
        "DeleteLoadBalancer",
        Actions(CP, &["elasticloadbalancing:DeleteLoadBalancer"]),
    ),
    (
        "Elb",
        "CreateLoadBalancerListeners",
        Actions(CP, &["elasticloadbalancing:CreateLoadBalancerListeners"]),
    ),
    (
        "Elb",
        "DeleteLoadBalancerListeners",
        Actions(CP, &["elasticloadbalancing:DeleteLoadBalancerListeners"]),
    ),
    (
        "Elb",
        "ConfigureHealthCheck",
        Actions(CP, &["elasticloadbalancing:ConfigureHealthCheck"]),
    ),
    (
        "Elb",
        "RegisterInstancesWithLoadBalancer",
        Actions(CP, &["elasticloadbalancing:RegisterInstancesWithLoadBalancer"]),
    ),
    (
        "Elb",
        "DeregisterInstancesFromLoadBalancer",
        Actions(CP, &["elasticloadbalancing:DeregisterInstancesFromLoadBalancer"]),
    ),
    (
        "Elb",
        "DescribeLoadBalancerAttributes",
        Actions(CP, &["elasticloadbalancing:DescribeLoadBalancerAttributes"]),
    ),
    (
        "Elb",
        "ModifyLoadBalancerAttributes",
        Actions(CP, &["elasticloadbalancing:ModifyLoadBalancerAttributes"]),
    ),
    (
        "Elb",
        "ApplySecurityGroupsToLoadBalancer",
        Actions(CP, &["elasticloadbalancing:ApplySecurityGroupsToLoadBalancer"]),
    ),
    (
        "Elb",
        "AttachLoadBalancerToSubnets",
        Actions(CP, &["elasticloadbalancing:AttachLoadBalancerToSubnets"]),
    ),
    (
        "Elb",
        "DetachLoadBalancerFromSubnets",
        Actions(CP, &["elasticloadbalancing:DetachLoadBalancerFromSubnets"]),
    ),
    (
        "Elb",
        "DescribeTags",
        Actions(CP, &["elasticloadbalancing:DescribeTags"]),
    ),
    ("Elb", "AddTags", Actions(CP, &["elasticloadbalancing:AddTags"])),
    (
        "Elb",
        "RemoveTags",
        Actions(CP, &["elasticloadbalancing:RemoveTags"]),
    ),
    (
        "Elb",
        "DescribeLoadBalancerPolicies",
        Actions(CP, &["elasticloadbalancing:DescribeLoadBalancerPolicies"]),
    ),
    (
        "Elb",
        "CreateLoadBalancerPolicy",
        Actions(CP, &["elasticloadbalancing:CreateLoadBalancerPolicy"]),
    ),
    (
        "Elb",
        "SetLoadBalancerPoliciesOfListener",
        Actions(CP, &["elasticloadbalancing:SetLoadBalancerPoliciesOfListener"]),
    ),
    (
        "Elb",
        "SetLoadBalancerPoliciesForBackendServer",
        Actions(
            CP,
            &["elasticloadbalancing:SetLoadBalancerPoliciesForBackendServer"],
        ),
    ),
    // ELBv2 (the same IAM prefix as Classic ELB).
    (
        "Elbv2",
        "DescribeLoadBalancers",
        Actions(CP, &["elasticloadbalancing:DescribeLoadBalancers"]),
    ),
    (
        "Elbv2",
        "CreateLoadBalancer",
        Actions(
            CP,
            &[
                "elasticloadbalancing:CreateLoadBalancer",
                "elasticloadbalancing:AddTags",
            ],
        ),
    ),
    (
        "Elbv2",
        "DeleteLoadBalancer",
        Actions(CP, &["elasticloadbalancing:DeleteLoadBalancer"]),
    ),
    (
        "Elbv2",
        "SetSecurityGroups",
        Actions(CP, &["elasticloadbalancing:SetSecurityGroups"]),
    ),
    (
        "Elbv2",
        "SetIpAddressType",
        Actions(CP, &["elasticloadbalancing:SetIpAddressType"]),
    ),
    (
        "Elbv2",
        "SetSubnets",
        Actions(CP, &["elasticloadbalancing:SetSubnets"]),
    ),
    (
        "Elbv2",
        "DescribeLoadBalancerAttributes",
        Actions(CP, &["elasticloadbalancing:DescribeLoadBalancerAttributes"]),
    ),
    (
        "Elbv2",
        "ModifyLoadBalancerAttributes",
        Actions(CP, &["elasticloadbalancing:ModifyLoadBalancerAttributes"]),
    ),
    (
        "Elbv2",
        "DescribeListeners",
        Actions(CP, &["elasticloadbalancing:DescribeListeners"]),
    ),
    (
        "Elbv2",
        "CreateListener",
        Actions(CP, &["elasticloadbalancing:CreateListener"]),
    ),
    (
        "Elbv2",
        "ModifyListener",
        Actions(CP, &["elasticloadbalancing:ModifyListener"]),
    ),
    (
        "Elbv2",
        "DescribeListenerAttributes",
        Actions(CP, &["elasticloadbalancing:DescribeListenerAttributes"]),
    ),
    (
        "Elbv2",
        "ModifyListenerAttributes",
        Actions(CP, &["elasticloadbalancing:ModifyListenerAttributes"]),
    ),
    (
        "Elbv2",
        "DescribeListenerCertificates",
        Actions(CP, &["elasticloadbalancing:DescribeListenerCertificates"]),
    ),
    (
        "Elbv2",
        "AddListenerCertificates",
        Actions(CP, &["elasticloadbalancing:AddListenerCertificates"]),
    ),
    (
        "Elbv2",
        "RemoveListenerCertificates",
        Actions(CP, &["elasticloadbalancing:RemoveListenerCertificates"]),
    ),
    (
        "Elbv2",
        "DeleteListener",
        Actions(CP, &["elasticloadbalancing:DeleteListener"]),
    ),
    (
        "Elbv2",
        "DescribeTargetGroups",
        Actions(CP, &["elasticloadbalancing:DescribeTargetGroups"]),
    ),
    (
        "Elbv2",
        "CreateTargetGroup",
        Actions(
            CP,
            &[
                "elasticloadbalancing:CreateTargetGroup",
                "elasticloadbalancing:AddTags",
            ],
        ),
    ),
    (
        "Elbv2",
        "ModifyTargetGroup",
        Actions(CP, &["elasticloadbalancing:ModifyTargetGroup"]),
    ),
    (
        "Elbv2",
        "DeleteTargetGroup",
        Actions(CP, &["elasticloadbalancing:DeleteTargetGroup"]),
    ),
    (
        "Elbv2",
        "DescribeTargetGroupAttributes",
        Actions(CP, &["elasticloadbalancing:DescribeTargetGroupAttributes"]),
    ),
    (
        "Elbv2",
        "ModifyTargetGroupAttributes",
        Actions(CP, &["elasticloadbalancing:ModifyTargetGroupAttributes"]),
    ),
    (
        "Elbv2",
        "DescribeTargetHealth",
        Actions(CP, &["elasticloadbalancing:DescribeTargetHealth"]),
    ),
    (
        "Elbv2",
        "RegisterTargets",
        Actions(CP, &["elasticloadbalancing:RegisterTargets"]),
    ),
    (
        "Elbv2",
        "DeregisterTargets",
        Actions(CP, &["elasticloadbalancing:DeregisterTargets"]),
    ),
    (
        "Elbv2",
        "DescribeTags",
        Actions(CP, &["elasticloadbalancing:DescribeTags"]),
    ),
    ("Elbv2", "AddTags", Actions(CP, &["elasticloadbalancing:AddTags"])),
    (
        "Elbv2",
        "RemoveTags",
        Actions(CP, &["elasticloadbalancing:RemoveTags"]),
    ),
    // Cloud config RoleARN: granted on that role only, in a policy of its own with the ARN filled in.
    ("Sts", "AssumeRole", Actions(ROLE, &["sts:AssumeRole"])),
    // The ECR credential provider (nodes).
    (
        "Ecr",
        "GetAuthorizationToken",
        Actions(NODE, &["ecr:GetAuthorizationToken"]),
    ),
    (
        "Ecr",
        "GetPublicAuthorizationToken",
        Actions(
            NODE,
            &["ecr-public:GetAuthorizationToken", "sts:GetServiceBearerToken"],
        ),
    ),
    (
        "Sts",
        "AssumeRoleWithWebIdentity",
        NotNeeded("authorized by the role's trust policy (web identity), not by the caller's policy"),
    ),
    (
        "Sts",
        "GetCallerIdentity",
        NotNeeded("always allowed by AWS, no IAM permission exists"),
    ),
];

/// Policy actions no operation of ours calls, and why they are granted anyway.
pub const EXTRA: &[(&str, &str, &str)] = &[
    (
        CP,
        "iam:CreateServiceLinkedRole",
        "AWS creates the ELB service-linked role on the account's first load balancer, as the caller",
    ),
    (
        NODE,
        "ecr:BatchGetImage",
        "the container runtime pulls with the token, as the token's principal",
    ),
    (
        NODE,
        "ecr:GetDownloadUrlForLayer",
        "the container runtime pulls with the token",
    ),
    (
        NODE,
        "ecr:BatchCheckLayerAvailability",
        "the container runtime pulls with the token",
    ),
];

/// Service of the direct (Op-less) SDK calls of a file.
pub const DIRECT_CALL_SERVICE: &[(&str, &str)] = &[("role.rs", "Sts")];

pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

pub fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// Skips whitespace and `//` comments.
pub fn skip_ws(s: &str) -> &str {
    let mut s = s.trim_start();
    while let Some(rest) = s.strip_prefix("//") {
        s = rest.split_once('\n').map_or("", |(_, r)| r).trim_start();
    }
    s
}

/// Positions right after each occurrence of `token` that is not preceded by an identifier character.
pub fn after_token<'a>(src: &'a str, token: &str) -> Vec<&'a str> {
    src.match_indices(token)
        .filter(|(i, _)| !src[..*i].chars().next_back().is_some_and(is_ident))
        .map(|(i, t)| &src[i + t.len()..])
        .collect()
}

pub fn string_literal(s: &str) -> Option<&str> {
    let s = skip_ws(s).strip_prefix('"')?;
    s.split_once('"').map(|(lit, _)| lit)
}

pub fn ident(s: &str) -> &str {
    let end = s.find(|c: char| !is_ident(c)).unwrap_or(s.len());
    &s[..end]
}

/// The operations of one source file: `(service, name)` from `Op::new` and the file's `op(...)` shorthand.
pub fn declared_ops(src: &str) -> BTreeSet<(String, String)> {
    declared_op_classes(src).into_keys().collect()
}

/// The `ActionClass` written after an operation's name (`"Name", ActionClass::Mutating`), if any.
pub fn class_after(literal_rest: &str) -> String {
    let rest = skip_ws(literal_rest).strip_prefix(',').unwrap_or_default();
    skip_ws(rest)
        .strip_prefix("ActionClass::")
        .map(ident)
        .unwrap_or_default()
        .to_owned()
}

/// As [`declared_ops`], with each operation's `ActionClass` (empty when not written next to the name).
pub fn declared_op_classes(src: &str) -> BTreeMap<(String, String), String> {
    let mut ops = BTreeMap::new();
    let mut shorthand_service = None;
    for rest in after_token(src, "Op::new(") {
        let Some(rest) = skip_ws(rest).strip_prefix("Service::") else {
            continue;
        };
        let service = ident(rest);
        let rest = skip_ws(&rest[service.len()..])
            .strip_prefix(',')
            .unwrap_or_default();
        match string_literal(rest) {
            Some(name) => {
                let after = &skip_ws(rest)[name.len() + 2..];
                ops.insert((service.to_owned(), name.to_owned()), class_after(after));
            }
            // `const fn op(name: &'static str, ..) -> Op { Op::new(Service::X, name, class) }`
            None => shorthand_service = Some(service.to_owned()),
        }
    }
    if let Some(service) = shorthand_service {
        for rest in after_token(src, "op(") {
            if let Some(name) = string_literal(rest) {
                let after = &skip_ws(rest)[name.len() + 2..];
                ops.insert((service.clone(), name.to_owned()), class_after(after));
            }
        }
    }
    ops
}

/// SDK fluent calls on a client: `client.describe_instances()`, `self.sts.assume_role()` (across line breaks).
pub fn fluent_calls(src: &str) -> BTreeSet<String> {
    let mut calls = BTreeSet::new();
    for token in ["client", "sts"] {
        for rest in after_token(src, token) {
            if rest.starts_with(is_ident) {
                continue; // a longer identifier (`client_name`)
            }
            let Some(rest) = skip_ws(rest).strip_prefix('.') else {
                continue;
            };
            let method = ident(rest);
            if method.is_empty() || !rest[method.len()..].starts_with("()") {
                continue;
            }
            if matches!(method, "clone" | "config" | "as_ref" | "build") {
                continue;
            }
            calls.insert(camel(method));
        }
    }
    calls
}

pub fn camel(snake: &str) -> String {
    snake
        .split('_')
        .map(|w| {
            let mut c = w.chars();
            c.next()
                .map(|f| f.to_ascii_uppercase().to_string() + c.as_str())
                .unwrap_or_default()
        })
        .collect()
}

/// Every operation the adapter calls, with the file it is in; panics on a fluent call without its `Op`.
pub fn called_ops() -> BTreeMap<(String, String), String> {
    let dir = repo().join("crates/ccm-aws-sdk/src");
    let mut found = BTreeMap::new();
    let mut unexplained = Vec::new();
    for entry in fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "rs") {
            continue;
        }
        let file = path.file_name().unwrap().to_string_lossy().into_owned();
        let src = fs::read_to_string(&path).unwrap();
        let declared = declared_ops(&src);
        let names: BTreeSet<&str> = declared.iter().map(|(_, n)| n.as_str()).collect();
        for call in fluent_calls(&src) {
            if names.contains(call.as_str()) {
                continue;
            }
            match DIRECT_CALL_SERVICE.iter().find(|(f, _)| *f == file) {
                Some((_, service)) => {
                    found.insert(((*service).to_owned(), call), file.clone());
                }
                None => unexplained.push(format!("{file}: {call}")),
            }
        }
        for op in declared {
            found.insert(op, file.clone());
        }
    }
    assert!(
        unexplained.is_empty(),
        "SDK calls without an `Op` constant of the same name in their file (declare one, so that metrics, \
         limits and this IAM check see it): {unexplained:?}"
    );
    found
}

pub fn policy_actions(file: &str) -> BTreeSet<String> {
    let path = repo().join("deploy/iam").join(file);
    let text = fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let doc: serde_json::Value =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: invalid JSON: {e}", path.display()));
    assert_eq!(doc["Version"], "2012-10-17", "{file}: Version");
    let mut actions = BTreeSet::new();
    for st in doc["Statement"]
        .as_array()
        .unwrap_or_else(|| panic!("{file}: no Statement array"))
    {
        assert_eq!(st["Effect"], "Allow", "{file}: only Allow statements");
        assert!(
            st.get("Resource").is_some(),
            "{file}: statement without Resource: {st}"
        );
        match &st["Action"] {
            serde_json::Value::String(a) => {
                actions.insert(a.clone());
            }
            serde_json::Value::Array(list) => {
                for a in list {
                    let a = a
                        .as_str()
                        .unwrap_or_else(|| panic!("{file}: non-string action {a}"));
                    assert!(actions.insert(a.to_owned()), "{file}: {a} granted twice");
                }
            }
            other => panic!("{file}: Action must be a string or a list, got {other}"),
        }
    }
    assert!(
        actions.iter().all(|a| !a.contains('*')),
        "{file}: no wildcard actions: {actions:?}"
    );
    actions
}

/// The `ActionClass` of every operation declared in `src/*.rs` (direct STS calls have none).
pub fn op_classes() -> BTreeMap<(String, String), String> {
    let mut classes = BTreeMap::new();
    for entry in fs::read_dir(repo().join("crates/ccm-aws-sdk/src")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "rs") {
            classes.extend(declared_op_classes(&fs::read_to_string(&path).unwrap()));
        }
    }
    classes
}

/// The statements of a policy file under `deploy/iam/`.
pub fn policy_statements(file: &str) -> Vec<serde_json::Value> {
    let path = repo().join("deploy/iam").join(file);
    let text = fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let doc: serde_json::Value =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: invalid JSON: {e}", path.display()));
    assert_eq!(doc["Version"], "2012-10-17", "{file}: Version");
    doc["Statement"]
        .as_array()
        .unwrap_or_else(|| panic!("{file}: no Statement array"))
        .clone()
}

/// A string or a list of strings (IAM's `Action`, `Resource` and condition values).
pub fn strings(v: &serde_json::Value) -> Vec<String> {
    match v {
        serde_json::Value::String(s) => vec![s.clone()],
        serde_json::Value::Array(list) => list
            .iter()
            .map(|s| {
                s.as_str()
                    .unwrap_or_else(|| panic!("not a string: {s}"))
                    .to_owned()
            })
            .collect(),
        other => panic!("expected a string or a list of strings, got {other}"),
    }
}
