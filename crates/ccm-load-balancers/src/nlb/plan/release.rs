//! The release of an NLB by its Service's deletion (`aws-load-balancer-release-on-deletion`, an adopted NLB's
//! default): what it reads ([`observe_release`]) and does ([`plan_release`], pure). The NLB, its listeners,
//! target groups and managed group stay in AWS, serving nothing of this cluster, handed over to the Service's
//! name so that a Service of that name re-created with `aws-load-balancer-adopt` gets them back (DNS name,
//! addresses, endpoint services).
//!
//! Order, each step safe to repeat after a crash: the hand-over tag first (from then on the NLB can always be
//! adopted again); the nodes' rules revoked and the targets deregistered (a node port the cluster gives to
//! another Service later must not receive this NLB's traffic); leftover target groups no listener uses deleted;
//! this cluster's tags removed from the listeners, target groups and managed group, and from the NLB last, so an
//! interrupted release is found and finished by the next deletion pass (a resource already released is no
//! longer this cluster's and is not read again).

use ccm_aws_api::{
    Elbv2, SecurityGroupId, Tags,
    ec2::SecurityGroup,
    elbv2::{ListenerV2, TargetGroup},
};

use super::super::{
    Change, DeleteObserved, Observed, ObservedTargetGroup,
    node_rules::{self, NodeAccess},
};
use super::delete::revoke_references;
use crate::Error;

/// What a release needs beyond deletion's reads: the NLB's listeners and the targets of its target groups,
/// as an observation the apply takes its ARNs from. `None` without an NLB.
pub async fn observe_release<V: Elbv2>(
    elbv2: &V,
    observed: &DeleteObserved,
) -> Result<Option<Observed>, Error> {
    let context = "reading the NLB to release";
    let Some(lb) = &observed.load_balancer else {
        return Ok(None);
    };
    let listeners = elbv2.listeners(&lb.arn).await.map_err(Error::aws(context))?;
    let mut target_groups = Vec::new();
    for group in &observed.target_groups {
        let targets = if attached(group, &lb.arn, &listeners) {
            elbv2
                .target_health(&group.arn)
                .await
                .map_err(Error::aws(context))?
        } else {
            Vec::new()
        };
        target_groups.push(ObservedTargetGroup {
            group: group.clone(),
            attributes: Default::default(),
            targets,
        });
    }
    let managed_group = observed
        .managed_group
        .as_ref()
        .map(|id: &SecurityGroupId| SecurityGroup::new(id.clone(), "", None, Tags::new()));
    Ok(Some(Observed {
        load_balancer: Some(lb.clone()),
        listeners,
        target_groups,
        managed_group,
        ..Observed::default()
    }))
}

/// Whether the NLB `lb_arn` uses `group`: as the group says, or as a listener says (a listener moved to a group
/// shows in the group's load balancers only some time later).
fn attached(group: &TargetGroup, lb_arn: &str, listeners: &[ListenerV2]) -> bool {
    group.load_balancer_arns.iter().any(|a| a == lb_arn)
        || listeners
            .iter()
            .any(|l| l.default_target_groups.contains(&group.arn))
}

/// The release of the NLB `name` (pure; see the module documentation), handed over to `service`
/// (`namespace/name`) under `hand_over_key`, removing `keys` ([`crate::shared::released_keys`]).
pub fn plan_release(
    name: &str,
    (hand_over_key, service): (&str, &str),
    keys: &[String],
    deleted: &DeleteObserved,
    found: &Observed,
) -> Vec<Change> {
    let Some(lb) = &found.load_balancer else {
        return Vec::new();
    };
    let mut changes = vec![Change::AddTags {
        arns: vec![lb.arn.clone()],
        tags: Tags::from([(hand_over_key.to_owned(), service.to_owned())]),
    }];
    let node_changes = deleted
        .node_rules
        .as_ref()
        .map(|nodes| node_rules::plan(&NodeAccess::none(name), nodes))
        .unwrap_or_default();
    changes.extend(node_changes.iter().cloned().map(Change::NodeRules));
    if found.managed_group.is_some() {
        changes.extend(revoke_references(&deleted.references, &node_changes));
    }
    let (attached, leftovers): (Vec<_>, Vec<_>) = found
        .target_groups
        .iter()
        .partition(|g| attached(&g.group, &lb.arn, &found.listeners));
    for g in attached.iter().filter(|g| !g.targets.is_empty()) {
        changes.push(Change::DeregisterTargets {
            name: g.group.name.clone(),
            targets: g
                .targets
                .iter()
                .map(|t| (t.target.id.to_string(), t.target.port))
                .collect(),
        });
    }
    changes.extend(leftovers.iter().map(|g| Change::DeleteTargetGroup {
        name: g.group.name.clone(),
        arn: g.group.arn.clone(),
    }));
    let parts: Vec<String> = found
        .listeners
        .iter()
        .map(|l| l.arn.clone())
        .chain(attached.iter().map(|g| g.group.arn.clone()))
        .collect();
    if !parts.is_empty() {
        changes.push(Change::RemoveTags {
            arns: parts,
            keys: keys.to_vec(),
        });
    }
    if found.managed_group.is_some() {
        changes.push(Change::TagSecurityGroup {
            add: Tags::new(),
            remove: keys.to_vec(),
        });
    }
    changes.push(Change::RemoveTags {
        arns: vec![lb.arn.clone()],
        keys: keys.to_vec(),
    });
    changes
}
