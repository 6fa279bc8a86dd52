//! An NLB's host memory: the load balancer, each wanted target group with its targets, and the node groups
//! that carry its rules, after the last apply.

use std::{
    collections::{BTreeMap, BTreeSet},
    sync::Arc,
};

use ccm_aws_api::{
    InstanceId, SecurityGroupId,
    elbv2::{LoadBalancerV2, Target, TargetGroup, TargetHealth, TargetId, TargetType},
};

use super::{Fact, Facts, Ids, node_groups};
use crate::nlb::{Applied, Change, Desired, Observed, ObservedTargetGroup, node_rules};

/// What an NLB's host update plans from.
#[derive(Debug, Clone)]
pub(crate) struct NetworkMemory {
    load_balancer: LoadBalancerV2,
    /// The wanted target groups and their targets.
    target_groups: Vec<RememberedGroup>,
    /// The target instances' groups, which carry the NLB's rules (`None`: the nodes' rules are not managed).
    node_groups: Option<BTreeSet<SecurityGroupId>>,
    /// The target groups taken under their successor names ([`Observed::renamed`]).
    renamed: BTreeMap<String, String>,
}

/// A wanted target group as the last apply left it.
#[derive(Debug, Clone)]
struct RememberedGroup {
    group: TargetGroup,
    attributes: BTreeMap<String, String>,
    targets: Box<[RememberedTarget]>,
}

/// A registered target: its instance (the ID shared with the other load balancers' memories), its port, and
/// whether it is leaving. Of a target's health, a plan reads only that (`draining`, or deregistration in
/// progress: registered again if wanted), so only that is kept.
#[derive(Debug, Clone)]
struct RememberedTarget {
    id: Arc<str>,
    port: i32,
    leaving: bool,
}

/// The health a target whose deregistration is in progress reports.
const LEAVING: (&str, &str) = ("draining", "Target.DeregistrationInProgress");

impl RememberedGroup {
    fn of(observed: ObservedTargetGroup, ids: &Ids) -> Self {
        let targets = observed
            .targets
            .iter()
            .map(|t| RememberedTarget {
                id: ids.intern(&t.target.id.to_string()),
                port: t.target.port,
                leaving: t.state == LEAVING.0 || t.reason.as_deref() == Some(LEAVING.1),
            })
            .collect();
        Self {
            group: observed.group,
            attributes: observed.attributes,
            targets,
        }
    }

    /// As observed: a target that is not leaving reports `healthy` (what it reported is not kept).
    fn observed(&self) -> ObservedTargetGroup {
        let targets = self
            .targets
            .iter()
            .map(|t| TargetHealth {
                target: Target {
                    id: TargetId::parse(&t.id),
                    port: t.port,
                },
                state: if t.leaving { LEAVING.0 } else { "healthy" }.to_owned(),
                reason: t.leaving.then(|| LEAVING.1.to_owned()),
            })
            .collect();
        ObservedTargetGroup {
            group: self.group.clone(),
            attributes: self.attributes.clone(),
            targets,
        }
    }
}

impl NetworkMemory {
    /// The state after `changes` were applied to `observed` (`applied` reports what was created; its IDs held
    /// in `ids`); `None` when no load balancer is left or a wanted target group's ARN is unknown.
    pub(crate) fn after(
        desired: &Desired,
        observed: &Observed,
        applied: &Applied,
        changes: &[Change],
        ids: &Ids,
    ) -> Option<Self> {
        // IP targets follow the endpoints, which change far more often than nodes: their host updates read the
        // groups' targets, never a memory of them.
        if desired.target_groups().any(|g| g.target_type == TargetType::Ip) {
            return None;
        }
        let deleted = changes
            .iter()
            .any(|c| matches!(c, Change::DeleteLoadBalancer { .. }));
        let load_balancer = match (&applied.created, &observed.load_balancer) {
            (Some(created), _) => created.clone(),
            (None, Some(lb)) if !deleted => lb.clone(),
            _ => return None,
        };
        let desired = desired.named(&observed.renamed);
        let mut target_groups: Vec<ObservedTargetGroup> = Vec::new();
        for tg in desired.target_groups() {
            if target_groups.iter().any(|g| g.group.name == tg.name) {
                continue;
            }
            let arn = applied.target_groups.get(&tg.name)?;
            let group = match observed.target_groups.iter().find(|g| g.group.arn == *arn) {
                Some(o) => o.clone(),
                None => ObservedTargetGroup {
                    group: TargetGroup::new(arn, &tg.name, &tg.protocol, tg.port),
                    attributes: BTreeMap::new(),
                    targets: Vec::new(),
                },
            };
            target_groups.push(group);
        }
        for change in changes {
            targets_after(&mut target_groups, change);
        }
        let node_groups = match (&desired.node_access, &observed.node_rules) {
            (None, _) => None,
            (Some(access), Some(nodes)) => Some(
                access
                    .instances
                    .iter()
                    .filter_map(|i| nodes.instance_groups.get(i).cloned())
                    .collect(),
            ),
            (Some(_), None) => return None,
        };
        Some(Self {
            load_balancer,
            target_groups: target_groups
                .into_iter()
                .map(|g| RememberedGroup::of(g, ids))
                .collect(),
            node_groups,
            renamed: observed.renamed.clone(),
        })
    }

    /// The observed state a host plan of `desired` starts from, or `None` when a wanted target group is not
    /// remembered or the nodes' rules would change (planned from fresh reads). `facts` covers the desired
    /// instances when the nodes' rules are managed.
    pub(crate) fn recall(&self, desired: &Desired, facts: &Facts) -> Option<Observed> {
        if desired
            .named(&self.renamed)
            .target_groups()
            .any(|tg| !self.target_groups.iter().any(|g| g.group.name == tg.name))
        {
            return None;
        }
        let node_rules = match &desired.node_access {
            None if self.node_groups.is_some() => return None,
            None => None,
            Some(access) => {
                if self.node_groups.as_ref() != Some(&node_groups(&access.instances, facts)) {
                    return None;
                }
                let mut nodes = node_rules::Observed::default();
                for (id, fact) in facts {
                    match fact {
                        Fact::Running(Some(g)) => {
                            nodes.instance_groups.insert(id.clone(), g.clone());
                        }
                        Fact::Stopped(g) => {
                            nodes.instance_groups.extend(g.clone().map(|g| (id.clone(), g)));
                            nodes.not_running.insert(id.clone());
                        }
                        Fact::Gone => {
                            nodes.not_running.insert(id.clone());
                        }
                        Fact::Running(None) => {}
                    }
                }
                Some(nodes)
            }
        };
        Some(Observed {
            node_rule_source: desired.node_rule_source(Some(&self.load_balancer), None, false),
            load_balancer: Some(self.load_balancer.clone()),
            target_groups: self.target_groups.iter().map(RememberedGroup::observed).collect(),
            renamed: self.renamed.clone(),
            node_rules,
            ..Observed::default()
        })
    }
}

/// Applies a target change to the remembered target groups.
fn targets_after(groups: &mut [ObservedTargetGroup], change: &Change) {
    match change {
        Change::RegisterTargets {
            name,
            port,
            instances,
        } => {
            if let Some(g) = groups.iter_mut().find(|g| g.group.name == *name) {
                for i in instances {
                    let target = Target::instance(InstanceId::new(i.clone()), *port);
                    g.targets.retain(|t| t.target != target);
                    g.targets.push(TargetHealth {
                        target,
                        state: "initial".to_owned(),
                        reason: None,
                    });
                }
            }
        }
        Change::DeregisterTargets { name, targets } => {
            if let Some(g) = groups.iter_mut().find(|g| g.group.name == *name) {
                g.targets
                    .retain(|t| !targets.contains(&(t.target.id.to_string(), t.target.port)));
            }
        }
        _ => {}
    }
}

/// What an observation learnt about the target instances: the running ones' groups and the groups read.
pub(crate) fn learnt(observed: &Observed) -> super::Learnt {
    observed.node_rules.as_ref().map_or_else(Default::default, |n| {
        (
            n.instance_groups
                .iter()
                .filter(|(id, _)| !n.not_running.contains(*id))
                .map(|(id, g)| (id.clone(), Some(g.clone())))
                .collect(),
            n.groups.clone(),
        )
    })
}

/// The fingerprint of `desired` without its instances.
pub(crate) fn fingerprint(desired: &Desired) -> u64 {
    let mut hosts_free = desired.clone();
    hosts_free.instances.clear();
    if let Some(access) = &mut hosts_free.node_access {
        access.instances.clear();
    }
    super::fingerprint(&hosts_free)
}
