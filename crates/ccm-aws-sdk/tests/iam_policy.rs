//! The IAM policies in `deploy/iam/` grant exactly what the adapter calls.
//!
//! Every AWS operation of this crate is declared as an `Op` constant (`Op::new(Service::X, "Name", ..)`, or the
//! per-file `op("Name", ..)` shorthand) and every SDK call goes through one; role assumption (`role.rs`) calls
//! the STS client directly. This test reads `src/*.rs`, collects those operations and the SDK fluent calls
//! (`client.describe_instances()`), and checks them against the table below and the policy files:
//! - an operation the code calls without a table entry fails (add its IAM action to the policy and the table);
//! - a fluent call with no `Op` of that name in its file fails (so a new call cannot bypass the scan);
//! - a table entry nothing calls fails, and so does a policy action no entry (or [`EXTRA`]) accounts for.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::{
    collections::{BTreeMap, BTreeSet},
    fs,
    path::{Path, PathBuf},
};

/// Where the IAM permission of an operation lives.
#[derive(Debug, Clone, Copy)]
enum Grant {
    /// These actions, in this policy file under `deploy/iam/`.
    Actions(&'static str, &'static [&'static str]),
    /// No permission of the caller is evaluated (the reason says why).
    NotNeeded(&'static str),
}

use Grant::{Actions, NotNeeded};

const CP: &str = "control-plane.json";
const ROLE: &str = "control-plane-assume-role.json";
const NODE: &str = "node.json";

/// (service as in `Service::X`, operation) -> grant.
const TABLE: &[(&str, &str, Grant)] = &[
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
const EXTRA: &[(&str, &str, &str)] = &[
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
const DIRECT_CALL_SERVICE: &[(&str, &str)] = &[("role.rs", "Sts")];

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// Skips whitespace and `//` comments.
fn skip_ws(s: &str) -> &str {
    let mut s = s.trim_start();
    while let Some(rest) = s.strip_prefix("//") {
        s = rest.split_once('\n').map_or("", |(_, r)| r).trim_start();
    }
    s
}

/// Positions right after each occurrence of `token` that is not preceded by an identifier character.
fn after_token<'a>(src: &'a str, token: &str) -> Vec<&'a str> {
    src.match_indices(token)
        .filter(|(i, _)| !src[..*i].chars().next_back().is_some_and(is_ident))
        .map(|(i, t)| &src[i + t.len()..])
        .collect()
}

fn string_literal(s: &str) -> Option<&str> {
    let s = skip_ws(s).strip_prefix('"')?;
    s.split_once('"').map(|(lit, _)| lit)
}

fn ident(s: &str) -> &str {
    let end = s.find(|c: char| !is_ident(c)).unwrap_or(s.len());
    &s[..end]
}

/// The operations of one source file: `(service, name)` from `Op::new` and the file's `op(...)` shorthand.
fn declared_ops(src: &str) -> BTreeSet<(String, String)> {
    let mut ops = BTreeSet::new();
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
                ops.insert((service.to_owned(), name.to_owned()));
            }
            // `const fn op(name: &'static str, ..) -> Op { Op::new(Service::X, name, class) }`
            None => shorthand_service = Some(service.to_owned()),
        }
    }
    if let Some(service) = shorthand_service {
        for rest in after_token(src, "op(") {
            if let Some(name) = string_literal(rest) {
                ops.insert((service.clone(), name.to_owned()));
            }
        }
    }
    ops
}

/// SDK fluent calls on a client: `client.describe_instances()`, `self.sts.assume_role()` (across line breaks).
fn fluent_calls(src: &str) -> BTreeSet<String> {
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

fn camel(snake: &str) -> String {
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
fn called_ops() -> BTreeMap<(String, String), String> {
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

fn policy_actions(file: &str) -> BTreeSet<String> {
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

#[test]
fn every_called_operation_is_granted_and_nothing_else() {
    let called = called_ops();
    // The scan itself must see the adapter: a broken scanner would otherwise pass vacuously.
    for must in [
        ("Ec2", "DescribeInstances"),
        ("Elb", "CreateLoadBalancer"),
        ("Elbv2", "RegisterTargets"),
    ] {
        assert!(
            called.contains_key(&(must.0.to_owned(), must.1.to_owned())),
            "the scan of src/*.rs missed {must:?}: fix the scanner ({} operations found)",
            called.len()
        );
    }
    assert!(called.len() >= 60, "only {} operations found", called.len());

    let table: BTreeMap<(String, String), Grant> = TABLE
        .iter()
        .map(|(s, o, g)| (((*s).to_owned(), (*o).to_owned()), *g))
        .collect();
    assert_eq!(table.len(), TABLE.len(), "duplicate table entries");

    let missing: Vec<String> = called
        .iter()
        .filter(|(k, _)| !table.contains_key(*k))
        .map(|((s, o), file)| format!("{s}::{o} (src/{file})"))
        .collect();
    assert!(
        missing.is_empty(),
        "operations called without an IAM entry: {missing:?}; add the IAM action to the right deploy/iam/*.json \
         and the operation to TABLE in crates/ccm-aws-sdk/tests/iam_policy.rs (and docs/iam.md)"
    );
    let stale: Vec<String> = table
        .keys()
        .filter(|k| !called.contains_key(*k))
        .map(|(s, o)| format!("{s}::{o}"))
        .collect();
    assert!(
        stale.is_empty(),
        "TABLE lists operations nothing calls any more: {stale:?}; remove them and their IAM actions"
    );

    let mut needed: BTreeMap<&str, BTreeSet<String>> = BTreeMap::new();
    for grant in table.values() {
        if let Actions(file, actions) = grant {
            needed
                .entry(file)
                .or_default()
                .extend(actions.iter().map(|a| (*a).to_owned()));
        }
    }
    for (file, action, why) in EXTRA {
        assert!(!why.is_empty(), "EXTRA {action}: give the reason");
        needed.entry(file).or_default().insert((*action).to_owned());
    }
    for grant in table.values() {
        if let NotNeeded(why) = grant {
            assert!(!why.is_empty(), "NotNeeded entries carry the reason");
        }
    }
    for file in [CP, ROLE, NODE] {
        let granted = policy_actions(file);
        let want = needed.remove(file).unwrap_or_default();
        let not_granted: Vec<_> = want.difference(&granted).collect();
        let unused: Vec<_> = granted.difference(&want).collect();
        assert!(
            not_granted.is_empty(),
            "deploy/iam/{file} lacks actions the code needs: {not_granted:?}"
        );
        assert!(
            unused.is_empty(),
            "deploy/iam/{file} grants actions nothing calls: {unused:?} (remove them, or list them in EXTRA \
             with the reason)"
        );
    }
    assert!(
        needed.is_empty(),
        "TABLE names policy files that are not checked: {needed:?}"
    );
}

#[test]
fn the_docs_show_every_policy() {
    let doc = fs::read_to_string(repo().join("docs/iam.md")).unwrap();
    for file in [CP, ROLE, NODE] {
        assert!(
            doc.contains(&format!("deploy/iam/{file}")),
            "docs/iam.md does not mention deploy/iam/{file}"
        );
        for action in policy_actions(file) {
            assert!(
                doc.contains(&action),
                "docs/iam.md does not explain {action} (deploy/iam/{file})"
            );
        }
    }
}

#[test]
fn the_scanner_sees_declarations_and_calls() {
    let src = r#"
        const fn op(name: &'static str, class: ActionClass) -> Op {
            Op::new(Service::Elb, name, class)
        }
        const A: Op = op("DescribeTags", ActionClass::NonMutating);
        const B: Op = Op::new(
            Service::Ec2, // comment
            "CreateRoute",
            ActionClass::Mutating,
        );
        fn f() { stop("x"); self.client
            .describe_tags().send(); raw.client.create_route(); self.client_name.len(); client.clone(); }
    "#;
    let ops = declared_ops(src);
    let want: BTreeSet<(String, String)> = [("Elb", "DescribeTags"), ("Ec2", "CreateRoute")]
        .into_iter()
        .map(|(s, o)| (s.to_owned(), o.to_owned()))
        .collect();
    assert_eq!(ops, want);
    let calls = fluent_calls(src);
    assert_eq!(
        calls,
        ["CreateRoute", "DescribeTags"]
            .into_iter()
            .map(String::from)
            .collect()
    );
}
