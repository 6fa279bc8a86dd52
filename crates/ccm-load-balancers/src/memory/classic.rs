//! A Classic ELB's host memory: its registered instances and its node groups after the last apply.

use std::{collections::BTreeSet, sync::Arc};

use ccm_aws_api::{InstanceId, SecurityGroupId, elb::ClassicLoadBalancer};

use super::{Fact, Facts, Ids, node_groups};
use crate::classic::{Change, Desired, NodeGroups, Observed, SourceRule, node_rules::node_ports};

/// What a Classic ELB's host update plans from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ClassicMemory {
    /// The registered instances, sorted, each ID shared with the other load balancers' memories.
    registered: Box<[Arc<str>]>,
    /// The target instances' groups, which carry the rule from the load balancer's group (`None`: the nodes'
    /// rules are not managed).
    node_groups: Option<BTreeSet<SecurityGroupId>>,
}

impl ClassicMemory {
    /// The state after `changes` were applied to `observed` (its IDs held in `ids`); `None` when no load
    /// balancer is left.
    pub(crate) fn after(observed: &Observed, changes: &[Change], ids: &Ids) -> Option<Self> {
        let mut exists = observed.load_balancer.is_some();
        let mut registered: BTreeSet<String> = observed
            .load_balancer
            .iter()
            .flat_map(|lb| lb.instances.iter().map(ToString::to_string))
            .collect();
        for change in changes {
            match change {
                Change::DeleteLoadBalancer { .. } => {
                    exists = false;
                    registered.clear();
                }
                Change::CreateLoadBalancer { .. } => {
                    exists = true;
                    registered.clear();
                }
                Change::RegisterInstances { instances } => registered.extend(instances.iter().cloned()),
                Change::DeregisterInstances { instances } => {
                    for i in instances {
                        registered.remove(i);
                    }
                }
                _ => {}
            }
        }
        exists.then(|| Self {
            registered: registered.iter().map(|i| ids.intern(i)).collect(),
            node_groups: observed.node_groups.as_ref().map(|n| n.wanted.clone()),
        })
    }

    /// The observed state a host plan of `desired` starts from, or `None` when the nodes' rules would change
    /// (planned from fresh reads). `facts` covers the desired instances when the nodes' rules are managed.
    pub(crate) fn recall(&self, desired: &Desired, facts: &Facts) -> Option<Observed> {
        let (node_groups, existing) = if desired.manage_node_rules {
            let wanted = node_groups(&desired.instances, facts);
            if self.node_groups.as_ref() != Some(&wanted) {
                return None;
            }
            let existing = desired
                .instances
                .iter()
                .filter(|i| matches!(facts.get(*i), Some(Fact::Running(_) | Fact::Stopped(_))))
                .cloned()
                .collect();
            // The rules the last apply left: this load balancer's ports on each wanted group.
            let ports = node_ports(&desired.listeners, &desired.health_check);
            let rules: Vec<SourceRule> = ports
                .iter()
                .map(|p| SourceRule::narrow(*p, &desired.name))
                .collect();
            let groups = NodeGroups {
                rules: wanted.iter().map(|g| (g.clone(), rules.clone())).collect(),
                wanted,
                ..NodeGroups::default()
            };
            (Some(groups), Some(existing))
        } else {
            if self.node_groups.is_some() {
                return None;
            }
            (None, None)
        };
        let mut lb = ClassicLoadBalancer::new(&desired.name, "");
        lb.internal = desired.internal;
        lb.instances = self
            .registered
            .iter()
            .map(|i| InstanceId::new(i.to_string()))
            .collect();
        Some(Observed {
            load_balancer: Some(lb),
            node_groups,
            existing_instances: existing,
            ..Observed::default()
        })
    }
}

/// What an observation learnt about the target instances: the running ones' groups and the groups read.
pub(crate) fn learnt(observed: &Observed) -> super::Learnt {
    observed.node_groups.as_ref().map_or_else(Default::default, |n| {
        (
            n.instances.running.clone().into_iter().collect(),
            n.instances.groups.values().cloned().collect(),
        )
    })
}

/// The fingerprint of `desired` without its instances.
pub(crate) fn fingerprint(desired: &Desired) -> u64 {
    let mut hosts_free = desired.clone();
    hosts_free.instances.clear();
    super::fingerprint(&hosts_free)
}

#[cfg(test)]
impl ClassicMemory {
    pub(crate) fn empty_for_tests() -> Self {
        Self {
            registered: Box::default(),
            node_groups: None,
        }
    }
}
