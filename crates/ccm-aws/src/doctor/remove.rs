//! `--delete`: removes the findings of a report that a fresh look still finds leaked, in dependency order (load
//! balancers, target groups, rules that reference leaked groups and stale NLB rules, groups, routes). Every step
//! is safe to repeat: something already gone counts as removed.

use std::collections::BTreeMap;

use ccm_aws_api::{AwsError, Ec2, Elb, Elbv2, ErrorKind, SecurityGroupId, ec2::IpPermission};
use serde::Serialize;

use super::{Action, Finding, Kind, Ports, Report};

/// What `--delete` did.
#[derive(Debug, Clone, Default, Serialize)]
pub struct DeleteOutcome {
    /// One entry per deletable finding of the report, in the order handled.
    pub removals: Vec<Removal>,
}

/// What became of one finding.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Removal {
    /// Its kind.
    pub kind: Kind,
    /// Its ID, as in the report.
    pub id: String,
    /// The result.
    pub outcome: Outcome,
    /// Why, for anything but [`Outcome::Deleted`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// The result of removing one finding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Outcome {
    /// Removed (or found gone already).
    Deleted,
    /// AWS still holds it (`DependencyViolation`, `ResourceInUse`): run again later.
    InUse,
    /// The fresh look no longer finds it leaked (its owner came back, or it is gone): left alone.
    Skipped,
    /// AWS refused; the message says why.
    Failed,
}

/// Removes what `report` and the fresh findings `current` agree on; the fresh finding's action is used, since
/// the rules referencing a group may have changed since the report.
pub(super) async fn run<E, L, V>(
    ports: Ports<'_, E, L, V>,
    report: &Report,
    current: &[Finding],
) -> DeleteOutcome
where
    E: Ec2 + Sync,
    L: Elb + Sync,
    V: Elbv2 + Sync,
{
    let fresh: BTreeMap<(Kind, &str), &Finding> = current
        .iter()
        .filter(|f| f.deletable)
        .map(|f| ((f.kind, f.id.as_str()), f))
        .collect();
    let mut outcome = DeleteOutcome::default();
    let mut todo = Vec::new();
    for finding in report.deletable() {
        match fresh.get(&(finding.kind, finding.id.as_str())) {
            Some(f) => todo.push(*f),
            None => outcome.push(
                finding,
                Outcome::Skipped,
                Some("no longer leaked in a fresh reading".to_owned()),
            ),
        }
    }
    todo.sort_by_key(|f| phase(f.kind));
    let (early, late): (Vec<&Finding>, Vec<&Finding>) = todo.into_iter().partition(|f| phase(f.kind) < 2);
    for f in early {
        outcome.record(f, apply(ports, f).await);
    }
    // Then the rules that reference the groups, all of them before any group, so that no group's deletion fails
    // on a rule of a group handled later.
    let mut revoke_failures: BTreeMap<&str, String> = BTreeMap::new();
    for f in &late {
        if let Some(Action::DeleteGroup(_, referencing)) = &f.action
            && let Err(err) = revoke_all(ports.ec2, referencing).await
        {
            revoke_failures.insert(
                f.id.as_str(),
                format!("revoking the rules that reference it: {err}"),
            );
        }
    }
    for f in late {
        match revoke_failures.get(f.id.as_str()) {
            Some(message) => outcome.push(f, Outcome::Failed, Some(message.clone())),
            None => outcome.record(f, apply(ports, f).await),
        }
    }
    outcome
}

/// The dependency order: load balancers, target groups, rules, groups, routes.
fn phase(kind: Kind) -> u8 {
    match kind {
        Kind::ClassicLoadBalancer | Kind::NetworkLoadBalancer => 0,
        Kind::TargetGroup => 1,
        Kind::NodeGroupRules => 2,
        Kind::SecurityGroup => 3,
        _ => 4,
    }
}

async fn apply<E, L, V>(ports: Ports<'_, E, L, V>, finding: &Finding) -> Result<(), AwsError>
where
    E: Ec2 + Sync,
    L: Elb + Sync,
    V: Elbv2 + Sync,
{
    let Some(action) = &finding.action else {
        return Ok(());
    };
    let result = match action {
        Action::DeleteClassic(name) => ports.elb.delete_load_balancer(name).await,
        Action::DeleteNetwork(arn) => ports.elbv2.delete_load_balancer(arn).await,
        Action::DeleteTargetGroup(arn) => ports.elbv2.delete_target_group(arn).await,
        Action::RevokeRules(rules) => revoke_all(ports.ec2, rules).await,
        // The referencing rules were revoked before any group was deleted.
        Action::DeleteGroup(group, _) => ports.ec2.delete_security_group(group).await,
        Action::DeleteRoute(table, cidr) => ports.ec2.delete_route(table, cidr).await,
    };
    match result {
        // Gone already (a previous run, the CCM itself): that is what was wanted.
        Err(err) if err.is_not_found() => Ok(()),
        other => other,
    }
}

/// Revokes rules per group; a batch that AWS refuses because part of it is gone already is revoked rule by rule.
async fn revoke_all<E: Ec2 + Sync>(
    ec2: &E,
    rules: &[(SecurityGroupId, Vec<IpPermission>)],
) -> Result<(), AwsError> {
    for (group, permissions) in rules {
        match ec2.revoke_ingress(group, permissions).await {
            Ok(()) => {}
            Err(err) if err.is_not_found() && permissions.len() > 1 => {
                for p in permissions {
                    match ec2.revoke_ingress(group, std::slice::from_ref(p)).await {
                        Err(err) if !err.is_not_found() => return Err(err),
                        _ => {}
                    }
                }
            }
            Err(err) if err.is_not_found() => {}
            Err(err) => return Err(err),
        }
    }
    Ok(())
}

// === impl DeleteOutcome ===

impl DeleteOutcome {
    fn record(&mut self, finding: &Finding, result: Result<(), AwsError>) {
        match result {
            Ok(()) => self.push(finding, Outcome::Deleted, None),
            Err(err) if err.kind() == ErrorKind::Conflict => {
                self.push(
                    finding,
                    Outcome::InUse,
                    Some(format!("still in use, run again later: {err}")),
                );
            }
            Err(err) => self.push(finding, Outcome::Failed, Some(err.to_string())),
        }
    }

    fn push(&mut self, finding: &Finding, outcome: Outcome, message: Option<String>) {
        self.removals.push(Removal {
            kind: finding.kind,
            id: finding.id.clone(),
            outcome,
            message,
        });
    }

    /// Whether some removal failed (not counting resources still in use).
    pub fn has_failures(&self) -> bool {
        self.removals.iter().any(|r| r.outcome == Outcome::Failed)
    }

    /// Whether something deletable is left for a later run (still in use).
    pub fn has_leftovers(&self) -> bool {
        self.removals.iter().any(|r| r.outcome == Outcome::InUse)
    }
}
