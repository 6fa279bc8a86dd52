//! The hardened control-plane policy (`deploy/iam/control-plane-hardened.json`) grants the same actions as
//! `control-plane.json`, but every mutating operation the adapter calls only under a tag condition:
//! - which operations mutate comes from the adapter itself: each `Op` declares its `ActionClass` (the scan of
//!   `src/*.rs` in `tests/iam`), and its IAM actions come from the same table as the plain policy's test;
//! - deletes and changes of security groups, load balancers and target groups need the resource's
//!   `kubernetes.io/cluster/<id>` tag to be `owned` (ingress rules and routes: `owned` or `shared`);
//! - creations need the request to carry that tag as `owned` (`aws:RequestTag`), tag-on-create is allowed
//!   only as part of those creations;
//! - `ModifyInstanceAttribute` only turns the source/destination check off, on the cluster's instances.
//!
//! Statements without a condition are allowed only where the table [`UNCONDITIONED`] says why.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::too_many_lines)]

mod iam;

use std::{collections::BTreeSet, fs};

use iam::*;
use serde_json::{Value, json};

const HARDENED: &str = "control-plane-hardened.json";
const TAKEOVER: &str = "control-plane-hardened-listener-takeover.json";
const RESOURCE_TAG: &str = "aws:ResourceTag/kubernetes.io/cluster/CLUSTER_ID";
const REQUEST_TAG: &str = "aws:RequestTag/kubernetes.io/cluster/CLUSTER_ID";

/// Statements that grant mutating actions without a tag condition, with the resources they are limited to.
const UNCONDITIONED: &[(&str, &str, &str)] = &[(
    "CreateSecurityGroupsInVpcs",
    "arn:aws:ec2:*:*:vpc/*",
    "CreateSecurityGroup is also authorized on the VPC, which the cluster need not tag; the group itself \
         must be requested with the owned tag (CreateOwnedSecurityGroups)",
)];

/// Mutating classes of `ActionClass` (the others only read).
const MUTATING: &[&str] = &["Mutating", "ResourceIntensive", "Tags", "Registration"];

/// The IAM actions of the control-plane operations the adapter declares as mutating.
fn mutating_actions() -> BTreeSet<String> {
    let classes = op_classes();
    let mut actions = BTreeSet::new();
    for (service, op, grant) in TABLE {
        let Actions(file, granted) = grant else { continue };
        if *file != CP {
            continue;
        }
        let class = classes
            .get(&((*service).to_owned(), (*op).to_owned()))
            .unwrap_or_else(|| panic!("{service}::{op} is in TABLE but not declared with an ActionClass"));
        if MUTATING.contains(&class.as_str()) {
            actions.extend(granted.iter().map(|a| (*a).to_owned()));
        }
    }
    actions
}

/// The values a statement's condition requires for `key` under `StringEquals`.
fn equals(statement: &Value, key: &str) -> Vec<String> {
    statement["Condition"]["StringEquals"]
        .get(key)
        .map(strings)
        .unwrap_or_default()
}

/// Why `action`, granted by `statement`, is not guarded as the hardened policy promises (None: it is).
fn violation(action: &str, statement: &Value) -> Option<String> {
    let sid = statement["Sid"].as_str().unwrap_or("(no Sid)");
    let resources = strings(&statement["Resource"]);
    if statement.get("Condition").is_none() {
        return match UNCONDITIONED.iter().find(|(s, _, _)| *s == sid) {
            Some((_, resource, _)) if resources == [*resource] => None,
            Some((_, resource, _)) => Some(format!("{sid}: must be limited to {resource}, is {resources:?}")),
            None => Some(format!("{sid} grants {action} without a condition")),
        };
    }
    let resource_tag = equals(statement, RESOURCE_TAG);
    let request_tag = equals(statement, REQUEST_TAG);
    let create_action = [
        equals(statement, "ec2:CreateAction"),
        equals(statement, "elasticloadbalancing:CreateAction"),
    ]
    .concat();
    let owned_only = resource_tag == ["owned"];
    let owned_or_shared =
        !resource_tag.is_empty() && resource_tag.iter().all(|v| v == "owned" || v == "shared");
    let ok = match action {
        // Deletes and changes of what the cluster makes: only what it owns.
        "ec2:DeleteSecurityGroup" => owned_only,
        // Node groups and route tables may be shared with other clusters; rules and routes are still ours.
        "ec2:AuthorizeSecurityGroupIngress"
        | "ec2:RevokeSecurityGroupIngress"
        | "ec2:CreateRoute"
        | "ec2:ReplaceRoute"
        | "ec2:DeleteRoute" => owned_or_shared,
        "ec2:ModifyInstanceAttribute" => {
            owned_or_shared && equals(statement, "ec2:Attribute/SourceDestCheck") == ["false"]
        }
        "ec2:CreateSecurityGroup" => request_tag == ["owned"],
        // Tag-on-create of the group, tags of owned groups, or the tagging controller's tags on the cluster's
        // instances (which must not touch the ownership tags).
        "ec2:CreateTags" | "ec2:DeleteTags" => {
            create_action == ["CreateSecurityGroup"]
                || owned_only
                || (owned_or_shared
                    && resources == ["arn:aws:ec2:*:*:instance/*"]
                    && statement["Condition"]["ForAllValues:StringNotLike"]["aws:TagKeys"]
                        == json!(["kubernetes.io/cluster/*", "KubernetesCluster"]))
        }
        "elasticloadbalancing:CreateLoadBalancer" | "elasticloadbalancing:CreateTargetGroup" => {
            request_tag == ["owned"]
        }
        "elasticloadbalancing:AddTags" => {
            owned_only
                // The owned tag on an NLB listener, on create only: tagging an existing listener `owned` would
                // open it to `ChangeOwnedNetworkLoadBalancerListeners` (the Go-era takeover tag is opt-in, in
                // `control-plane-hardened-listener-takeover.json`).
                || (request_tag == ["owned"]
                    && create_action == ["CreateListener"]
                    && resources == ["arn:aws:elasticloadbalancing:*:*:listener/net/*"])
                || (request_tag == ["owned"]
                    && create_action
                        .iter()
                        .all(|a| a == "CreateLoadBalancer" || a == "CreateTargetGroup")
                    && !create_action.is_empty())
        }
        a if a.starts_with("elasticloadbalancing:") => owned_only,
        _ => false,
    };
    (!ok).then(|| format!("{sid}: {action} is not guarded by the expected tag condition"))
}

/// Every violation of the hardened policy's promises in `statements`.
fn violations(statements: &[Value]) -> Vec<String> {
    let mutating = mutating_actions();
    let mut out = Vec::new();
    for st in statements {
        for action in strings(&st["Action"]) {
            if mutating.contains(&action) {
                out.extend(violation(&action, st));
            }
        }
    }
    out
}

#[test]
fn hardened_policy_grants_what_the_plain_one_does() {
    let statements = policy_statements(HARDENED);
    let mut sids = BTreeSet::new();
    let mut granted = BTreeSet::new();
    for st in &statements {
        assert_eq!(st["Effect"], "Allow", "{HARDENED}: only Allow statements: {st}");
        let sid = st["Sid"]
            .as_str()
            .expect("every statement has a Sid (docs/iam.md explains each)");
        assert!(sids.insert(sid.to_owned()), "{HARDENED}: Sid {sid} twice");
        assert!(st.get("Resource").is_some(), "{HARDENED}: {sid} without Resource");
        let actions = strings(&st["Action"]);
        let unique: BTreeSet<&String> = actions.iter().collect();
        assert_eq!(
            unique.len(),
            actions.len(),
            "{HARDENED}: {sid} lists an action twice"
        );
        granted.extend(actions);
    }
    let plain = policy_actions(CP);
    assert_eq!(
        granted.difference(&plain).collect::<Vec<_>>(),
        Vec::<&String>::new(),
        "{HARDENED} grants actions control-plane.json does not"
    );
    assert_eq!(
        plain.difference(&granted).collect::<Vec<_>>(),
        Vec::<&String>::new(),
        "{HARDENED} lacks actions the adapter calls (control-plane.json has them)"
    );
}

#[test]
fn every_mutating_call_is_granted_only_under_a_tag_condition() {
    let mutating = mutating_actions();
    // The scan must see the adapter's classes: a broken scanner would pass vacuously.
    for must in [
        "ec2:DeleteSecurityGroup",
        "ec2:RevokeSecurityGroupIngress",
        "ec2:ModifyInstanceAttribute",
        "elasticloadbalancing:DeleteLoadBalancer",
        "elasticloadbalancing:CreateTargetGroup",
    ] {
        assert!(mutating.contains(must), "{must} not found mutating: {mutating:?}");
    }
    assert!(
        !mutating.contains("ec2:DescribeInstances"),
        "reads are not mutating"
    );
    assert!(
        mutating.len() >= 35,
        "only {} mutating actions found",
        mutating.len()
    );
    assert_eq!(violations(&policy_statements(HARDENED)), Vec::<String>::new());
}

/// A statement's Sid and a change that weakens it.
type Loosening = (&'static str, fn(&mut Value));

#[test]
fn a_loosened_statement_is_caught() {
    // The check must be able to fail: drop or weaken conditions one at a time and expect a violation.
    let statements = policy_statements(HARDENED);
    let loosen: [Loosening; 8] = [
        ("ChangeOwnedLoadBalancersAndTargetGroups", |st| {
            st.as_object_mut().unwrap().remove("Condition");
        }),
        ("ChangeOwnedSecurityGroups", |st| {
            st["Condition"]["StringEquals"][RESOURCE_TAG] = json!(["owned", "shared"]);
        }),
        ("CreateOwnedLoadBalancers", |st| {
            st["Condition"]["StringEquals"] = json!({RESOURCE_TAG: "owned"});
        }),
        ("SourceDestCheckOffOnClusterInstances", |st| {
            st["Condition"]["StringEquals"]
                .as_object_mut()
                .unwrap()
                .remove("ec2:Attribute/SourceDestCheck");
        }),
        ("ChangeOwnedNetworkLoadBalancerListeners", |st| {
            st.as_object_mut().unwrap().remove("Condition");
        }),
        ("TagNetworkLoadBalancerListenersOnCreate", |st| {
            st["Resource"] = json!("*")
        }),
        ("TagNetworkLoadBalancerListenersOnCreate", |st| {
            st["Condition"]["StringEquals"] = json!({REQUEST_TAG: ["owned", "shared"], "elasticloadbalancing:CreateAction": "CreateListener"});
        }),
        // The opt-in takeover statement's shape inside the main policy: any listener could be tagged `owned`.
        ("TagNetworkLoadBalancerListenersOnCreate", |st| {
            st["Condition"]["StringEquals"]
                .as_object_mut()
                .unwrap()
                .remove("elasticloadbalancing:CreateAction");
        }),
    ];
    for (sid, change) in loosen {
        let mut changed = statements.clone();
        let st = changed
            .iter_mut()
            .find(|s| s["Sid"] == sid)
            .unwrap_or_else(|| panic!("no statement {sid}"));
        change(st);
        assert!(!violations(&changed).is_empty(), "loosening {sid} went unnoticed");
    }
}

/// The Go-era listener takeover is a separate, opt-in policy: one statement, AddTags of the `owned` tag on NLB
/// listeners only, which the main hardened policy alone does not grant (checked above).
#[test]
fn the_listener_takeover_is_an_opt_in_policy_of_one_statement() {
    let statements = policy_statements(TAKEOVER);
    assert_eq!(statements.len(), 1, "{TAKEOVER}: one statement");
    let st = &statements[0];
    assert_eq!(strings(&st["Action"]), ["elasticloadbalancing:AddTags"]);
    assert_eq!(
        strings(&st["Resource"]),
        ["arn:aws:elasticloadbalancing:*:*:listener/net/*"]
    );
    assert_eq!(equals(st, REQUEST_TAG), ["owned"]);
    // Within the main policy it would be a violation: that is why it is apart.
    let mut with = policy_statements(HARDENED);
    with.push(st.clone());
    assert!(
        !violations(&with).is_empty(),
        "the takeover statement passes as a hardened one"
    );
    let doc = fs::read_to_string(repo().join("docs/iam.md")).unwrap();
    assert!(
        doc.contains(&format!("deploy/iam/{TAKEOVER}")),
        "docs/iam.md does not explain {TAKEOVER}"
    );
}

#[test]
fn the_docs_explain_the_hardened_policy_and_how_to_install_it() {
    let doc = fs::read_to_string(repo().join("docs/iam.md")).unwrap();
    for needle in [
        format!("deploy/iam/{HARDENED}"),
        "aws iam create-policy".to_owned(),
        "aws iam attach-role-policy".to_owned(),
        "CLUSTER_ID".to_owned(),
    ] {
        assert!(doc.contains(&needle), "docs/iam.md does not mention {needle}");
    }
    for st in policy_statements(HARDENED) {
        let sid = st["Sid"].as_str().unwrap();
        assert!(
            doc.contains(&format!("`{sid}`")),
            "docs/iam.md does not explain statement {sid}"
        );
    }
}
