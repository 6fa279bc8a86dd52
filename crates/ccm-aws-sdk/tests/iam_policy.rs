//! The IAM policies in `deploy/iam/` grant exactly what the adapter calls.
//!
//! Every AWS operation of this crate is declared as an `Op` constant (`Op::new(Service::X, "Name", ..)`, or the
//! per-file `op("Name", ..)` shorthand) and every SDK call goes through one; role assumption (`role.rs`) calls
//! the STS client directly. This test reads `src/*.rs`, collects those operations and the SDK fluent calls
//! (`client.describe_instances()`), and checks them against the table below and the policy files:
//! - an operation the code calls without a table entry fails (add its IAM action to the policy and the table);
//! - a fluent call with no `Op` of that name in its file fails (so a new call cannot bypass the scan);
//! - a table entry nothing calls fails, and so does a policy action no entry (or [`EXTRA`]) accounts for.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::too_many_lines)]

mod iam;

use std::{
    collections::{BTreeMap, BTreeSet},
    fs,
};

use iam::*;

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
    let classes = declared_op_classes(src);
    assert_eq!(
        classes[&("Elb".to_owned(), "DescribeTags".to_owned())],
        "NonMutating"
    );
    assert_eq!(classes[&("Ec2".to_owned(), "CreateRoute".to_owned())], "Mutating");
    let calls = fluent_calls(src);
    assert_eq!(
        calls,
        ["CreateRoute", "DescribeTags"]
            .into_iter()
            .map(String::from)
            .collect()
    );
}
