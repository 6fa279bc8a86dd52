//! The deletion plan of an NLB ([`plan_delete`], pure) and what deletion protection asks of it ([`unprotect`]).

use std::collections::{BTreeMap, BTreeSet};

use ccm_aws_api::SecurityGroupId;

use super::super::{
    Change, DeleteObserved, ReferencePermission,
    node_rules::{self, NodeAccess, RuleChange},
};
use crate::annotations::DELETION_PROTECTION;

/// What deletion protection asks of a deletion (pure): nothing while it is off; turning it off first when the
/// Service consents (`aws-load-balancer-attributes` says `deletion_protection.enabled=false`); else
/// [`crate::Error::DeletionProtected`], before anything is changed.
pub fn unprotect(
    name: &str,
    observed: &DeleteObserved,
    consent: bool,
) -> Result<Option<Change>, crate::Error> {
    if !observed.deletion_protection || observed.load_balancer.is_none() {
        return Ok(None);
    }
    if !consent {
        return Err(crate::Error::DeletionProtected(name.to_owned()));
    }
    Ok(Some(Change::ModifyAttributes {
        attributes: BTreeMap::from([(DELETION_PROTECTION.to_owned(), "false".to_owned())]),
    }))
}

/// The deletion plan (pure): the nodes' rules of this NLB, the NLB (its listeners go with it), its target
/// groups, the rules referencing the managed group, the managed group.
pub fn plan_delete(name: &str, observed: &DeleteObserved) -> Vec<Change> {
    let node_changes = observed
        .node_rules
        .as_ref()
        .map(|nodes| node_rules::plan(&NodeAccess::none(name), nodes))
        .unwrap_or_default();
    let mut changes: Vec<Change> = node_changes.iter().cloned().map(Change::NodeRules).collect();
    if let Some(lb) = &observed.load_balancer {
        changes.push(Change::DeleteLoadBalancer {
            name: name.to_owned(),
            arn: lb.arn.clone(),
            recreate_because: None,
        });
    }
    changes.extend(observed.target_groups.iter().map(|g| Change::DeleteTargetGroup {
        name: g.name.clone(),
        arn: g.arn.clone(),
    }));
    if let Some(group) = &observed.managed_group {
        changes.extend(revoke_references(&observed.references, &node_changes));
        changes.push(Change::DeleteSecurityGroup {
            group: group.to_string(),
        });
    }
    changes
}

/// The revocations of the rules referencing a managed group about to go, but those `node_changes` revoke
/// already (each would be a second call, answered "not found").
pub(super) fn revoke_references(
    references: &[(SecurityGroupId, ReferencePermission)],
    node_changes: &[RuleChange],
) -> Vec<Change> {
    let revoked: BTreeSet<(&str, &str, i32, i32, &str)> = node_changes
        .iter()
        .filter(|c| matches!(c, RuleChange::Revoke { .. }))
        .flat_map(|c| {
            c.rules().iter().map(move |r| {
                let rule = &r.rule;
                (
                    c.group(),
                    rule.protocol.as_str(),
                    rule.from_port,
                    rule.to_port,
                    rule.source.as_str(),
                )
            })
        })
        .collect();
    references
        .iter()
        .filter(|(holder, p)| {
            let (Some(from), Some(to)) = (p.from_port, p.to_port) else {
                return true;
            };
            let protocol = node_rules::protocol_name(&p.protocol);
            !revoked.contains(&(holder.as_str(), protocol.as_str(), from, to, p.source.as_str()))
        })
        .map(|(holder, permission)| Change::RevokeReference {
            group: holder.to_string(),
            permission: permission.clone(),
        })
        .collect()
}
