//! Whether a Classic ELB can reach its targets: each target instance's security groups (read from moto) allow
//! the load balancer's source group, its first group, on every port it sends to (listeners' instance ports and
//! the health-check port), and never all traffic. Services with and without node labels share the given group
//! (#35): a rule one of them still needs must never be revoked by another's change, which this check sees as a
//! converged Service losing a port. Also counts such sharing, so that a run shows it happened.

use std::collections::{BTreeMap, BTreeSet};

use ccm_aws_api::{Ec2, Filter, InstanceId, SecurityGroupId};
use ccm_load_balancers::classic::node_rules::{SourceRule, source_rules};

use crate::soak::{Soak, spec::Spec};

impl Soak {
    /// What keeps the instances `targets` from being reached from `source` on `ports`; `None` when nothing does.
    pub async fn node_rules_mismatch(
        &self,
        source: &str,
        targets: &BTreeSet<String>,
        ports: &BTreeSet<i32>,
    ) -> anyhow::Result<Option<String>> {
        if targets.is_empty() {
            return Ok(None);
        }
        let ec2 = self.world.aws.ec2();
        let ids: Vec<InstanceId> = targets.iter().map(InstanceId::new).collect();
        let instances = ec2.instances_by_id(&ids).await?;
        if instances.len() != ids.len() {
            // Never a vacuous pass: every target must be read.
            return Ok(Some(format!(
                "read {} of the targets {targets:?}",
                instances.len()
            )));
        }
        let groups: BTreeSet<String> = instances
            .iter()
            .flat_map(|i| i.security_groups.iter().map(ToString::to_string))
            .collect();
        let read = ec2.security_groups(&[Filter::new("group-id", groups)]).await?;
        let from = SecurityGroupId::new(source);
        let rules: BTreeMap<String, Vec<SourceRule>> = read
            .iter()
            .map(|g| (g.id.to_string(), source_rules(g, &from)))
            .collect();
        let reaches = |rules: &[SourceRule]| {
            let present: BTreeSet<i32> = rules.iter().filter_map(SourceRule::port).collect();
            ports.is_subset(&present) && !rules.iter().any(SourceRule::is_wide)
        };
        for i in &instances {
            let of = |g: &SecurityGroupId| rules.get(&g.to_string()).map_or(&[][..], Vec::as_slice);
            if !i.security_groups.iter().any(|g| reaches(of(g))) {
                let found: Vec<&[SourceRule]> = i.security_groups.iter().map(of).collect();
                return Ok(Some(format!(
                    "instance {} (groups {:?}): rules from {source} {found:?}, want ports {ports:?}",
                    i.id, i.security_groups
                )));
            }
        }
        Ok(None)
    }

    /// The rules on the nodes' group whose source is the given group.
    pub async fn rules_from_given_group(&self) -> anyhow::Result<Vec<SourceRule>> {
        let filter = Filter::new("group-id", [self.world.node_group.as_str()]);
        let read = self.world.aws.ec2().security_groups(&[filter]).await?;
        let source = SecurityGroupId::new(self.byo_group.clone());
        Ok(read.iter().flat_map(|g| source_rules(g, &source)).collect())
    }

    /// Counts a Classic ELB with the given group converged (`name`, `spec`) while another Service of the other
    /// node-label choice is a Classic ELB with the given group too.
    pub fn note_sharing(&self, name: &str, spec: &Spec) {
        let shares = |s: &Spec| !s.nlb && s.byo_group;
        let mixed = shares(spec)
            && self
                .live_specs()
                .iter()
                .any(|(n, s)| n != name && shares(s) && s.node_labels != spec.node_labels);
        if mixed {
            self.stats().mixed_sharing += 1;
        }
    }
}
