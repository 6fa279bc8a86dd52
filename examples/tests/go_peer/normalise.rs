//! Snapshots of two controllers' runs made comparable: every name, ID, ARN and node port that differs only because
//! a run made its own resources is replaced by the table's case name (`clb-ssl`, `sg:clb-ssl`, `np:clb-ssl:1`,
//! `tg:nlb-tls:np:nlb-tls:1`...), and what no two runs share (DNS names, ARNs, creation times) is dropped. What then differs between the runs is a
//! difference of the controllers, to be checked against the list of known differences.
#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

use std::collections::BTreeMap;

use super::{Delta, Snapshot};

/// What one run made, by case: its load balancers' names and its Services' node ports.
#[derive(Debug, Default)]
pub struct Run {
    /// Load balancer name -> case.
    pub lbs: BTreeMap<String, String>,
    /// Node port -> `np:<case>:<index>` (`hc:<case>` for a health-check node port).
    pub ports: BTreeMap<String, String>,
}

/// `facts` of one run, named by `run`.
pub fn normalise(facts: &Snapshot, run: &Run) -> Snapshot {
    let mut names = replacements(facts, &run.lbs);
    // Longest first: an ARN holds its load balancer's name.
    names.sort_by(|a, b| b.0.len().cmp(&a.0.len()).then_with(|| a.0.cmp(&b.0)));
    let rename = |s: &str| {
        let named = names
            .iter()
            .fold(s.to_owned(), |acc, (from, to)| acc.replace(from.as_str(), to));
        renumber(&named, &run.ports)
    };
    facts
        .iter()
        .filter(|(k, _)| ![" created", " dns", " arn"].iter().any(|end| k.ends_with(end)))
        .map(|(k, v)| (rename(k), rename(v)))
        .collect()
}

/// `text` with each number that `ports` names replaced, a whole number only (not digits inside an ID).
pub fn renumber(text: &str, ports: &BTreeMap<String, String>) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find(|c: char| c.is_ascii_alphanumeric()) {
        out.push_str(&rest[..start]);
        let word = &rest[start..];
        let end = word
            .find(|c: char| !c.is_ascii_alphanumeric())
            .unwrap_or(word.len());
        let token = &word[..end];
        out.push_str(ports.get(token).map_or(token, String::as_str));
        rest = &word[end..];
    }
    out.push_str(rest);
    out
}

/// (from, to) for the load balancers' names, the managed groups' IDs, the NLBs' and listeners' ARNs, and the
/// target groups' names and ARNs.
fn replacements(facts: &Snapshot, lbs: &BTreeMap<String, String>) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = lbs.iter().map(|(lb, case)| (lb.clone(), case.clone())).collect();
    let mut nlb_arns = BTreeMap::new();
    for (key, value) in facts {
        let words: Vec<&str> = key.split(' ').collect();
        match words.as_slice() {
            ["sg", id, "name"] => {
                let owner = value.strip_prefix("k8s-elb-").and_then(|lb| lbs.get(lb));
                if let Some(case) = owner {
                    out.push(((*id).to_owned(), format!("sg:{case}")));
                }
            }
            ["nlb", lb, "arn"] => {
                if let Some(case) = lbs.get(*lb) {
                    nlb_arns.insert(value.clone(), case.clone());
                    out.push((value.clone(), format!("nlb-arn:{case}")));
                }
            }
            ["nlb", lb, "listener", port] => {
                let arn = value.split(' ').find_map(|w| w.strip_prefix("arn="));
                if let (Some(case), Some(arn)) = (lbs.get(*lb), arn) {
                    out.push((arn.to_owned(), format!("listener:{case}:{port}")));
                }
            }
            _ => {}
        }
    }
    for (key, value) in facts {
        let Some(name) = key.strip_prefix("tg ").and_then(|k| k.strip_suffix(" arn")) else {
            continue;
        };
        let owner = facts
            .get(&format!("tg {name} load-balancers"))
            .and_then(|arns| arns.split(',').find_map(|a| nlb_arns.get(a)));
        let port = facts
            .get(&format!("tg {name} target"))
            .and_then(|t| t.split("Some(").nth(2))
            .and_then(|t| t.split(')').next());
        if let (Some(case), Some(port)) = (owner, port) {
            out.push((name.to_owned(), format!("tg:{case}:{port}")));
            out.push((value.clone(), format!("tg-arn:{case}:{port}")));
        }
    }
    out
}

/// A difference between the Go controller's resources and ours that is known and explained (docs/
/// migration-from-go.md lists each with the same reason).
#[derive(Clone, Copy)]
pub struct Known {
    /// The fact's key, `*` matching any run of characters.
    pub key: &'static str,
    /// `added` (only ours has it), `removed` (only Go's), or `changed`.
    pub change: &'static str,
    pub reason: &'static str,
}

/// Whether `text` matches `pattern`, where `*` matches any run of characters.
pub fn glob(pattern: &str, text: &str) -> bool {
    let mut parts = pattern.split('*');
    let first = parts.next().unwrap_or_default();
    let Some(mut rest) = text.strip_prefix(first) else {
        return false;
    };
    let parts: Vec<&str> = parts.collect();
    let Some((last, middle)) = parts.split_last() else {
        return rest.is_empty();
    };
    for part in middle {
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    rest.ends_with(last)
}

/// The differences no entry of `known` explains, and the entries that explained none (a list that is no longer
/// true).
pub fn unexplained<'k>(
    differences: &BTreeMap<String, Delta>,
    known: &'k [Known],
) -> (BTreeMap<String, Delta>, Vec<&'k Known>) {
    let kind = |d: &Delta| match d {
        Delta::Added(_) => "added",
        Delta::Removed(_) => "removed",
        Delta::Changed(..) => "changed",
    };
    let mut used = vec![false; known.len()];
    let mut left = BTreeMap::new();
    for (key, delta) in differences {
        let hit = known
            .iter()
            .position(|k| k.change == kind(delta) && glob(k.key, key));
        match hit {
            Some(i) => used[i] = true,
            None => {
                left.insert(key.clone(), delta.clone());
            }
        }
    }
    let stale = known
        .iter()
        .zip(used)
        .filter(|(_, u)| !u)
        .map(|(k, _)| k)
        .collect();
    (left, stale)
}
