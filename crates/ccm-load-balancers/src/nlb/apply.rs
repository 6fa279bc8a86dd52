//! [`apply`]: an NLB's plan run against AWS in order, the only code here that changes AWS; one function per
//! resource kind (the managed group, target groups, targets, the load balancer, listeners, the nodes' rules).

use std::collections::BTreeMap;

use ccm_aws_api::{
    Ec2, Elbv2, InstanceId, SecurityGroupId, SubnetId,
    ec2::{IpPermission, SourceGroup},
    elbv2::{LoadBalancerV2, NewNetworkLoadBalancer, NewTargetGroup, SubnetMapping, Target, TargetId},
};

mod listeners;

use super::{Change, Observed, node_rules};
use crate::{
    Error, LoadBalancerConfig,
    ownership::Claim,
    shared::{self, GroupRef, Rule},
    spec::IpAddressType,
};

/// What [`apply`] reports (fields may be added).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Applied {
    /// The load balancer created by this run.
    pub created: Option<LoadBalancerV2>,
    /// Mutating calls made (one per change; node rule changes count once each).
    pub mutations: usize,
    /// The ARN of every target group known after the run, by name (observed or created).
    pub target_groups: BTreeMap<String, String>,
}

struct Context<'a, E, V> {
    ec2: &'a E,
    elbv2: &'a V,
    config: &'a LoadBalancerConfig,
    name: &'a str,
    /// The claim the run writes under; a create that finds the name taken claims what it found afresh.
    claim: Claim,
    lb_arn: Option<String>,
    target_groups: BTreeMap<String, String>,
    managed: Option<SecurityGroupId>,
    applied: Applied,
}

impl<E: Ec2, V: Elbv2> Context<'_, E, V> {
    fn lb_arn(&self) -> Result<String, Error> {
        self.lb_arn
            .clone()
            .ok_or_else(|| Error::NotFound(self.name.to_owned()))
    }

    fn target_group(&self, name: &str) -> Result<String, Error> {
        self.target_groups
            .get(name)
            .cloned()
            .ok_or_else(|| Error::NotFound(format!("target group {name}")))
    }

    fn group(&self, group: &GroupRef) -> Result<SecurityGroupId, Error> {
        match group {
            GroupRef::Id(id) => Ok(SecurityGroupId::new(id.clone())),
            GroupRef::Managed => self
                .managed
                .clone()
                .ok_or_else(|| Error::NotFound(format!("the managed security group of {}", self.name))),
        }
    }

    /// One change, by the kind of resource it changes.
    async fn run(&mut self, change: &Change) -> Result<(), Error> {
        if let Change::RecreationWithheld { .. } = change {
            return Ok(());
        }
        self.applied.mutations += 1;
        match change {
            Change::CreateSecurityGroup { .. }
            | Change::AuthorizeIngress { .. }
            | Change::RevokeIngress { .. }
            | Change::RevokeReference { .. }
            | Change::TagSecurityGroup { .. }
            | Change::DeleteSecurityGroup { .. } => self.security_group(change).await,
            Change::CreateTargetGroup { .. }
            | Change::ModifyTargetGroup { .. }
            | Change::ModifyTargetGroupAttributes { .. }
            | Change::DeleteTargetGroup { .. } => self.target_groups(change).await,
            Change::RegisterTargets { .. }
            | Change::RegisterIpTargets { .. }
            | Change::DeregisterTargets { .. } => self.targets(change).await,
            Change::DeleteLoadBalancer { .. } | Change::CreateLoadBalancer { .. } => {
                self.load_balancer(change).await
            }
            Change::SetSubnets { .. }
            | Change::SetIpAddressType { .. }
            | Change::SetSecurityGroups { .. }
            | Change::ModifyAttributes { .. }
            | Change::AddTags { .. }
            | Change::RemoveTags { .. } => self.load_balancer_settings(change).await,
            Change::DeleteListener { .. }
            | Change::CreateListener { .. }
            | Change::ModifyListener { .. }
            | Change::ModifyListenerAttributes { .. }
            | Change::ListenerCertificates { .. } => self.listener(change).await,
            Change::NodeRules(rule) if rule.needs_managed_group() => {
                let managed = self.group(&GroupRef::Managed)?;
                node_rules::apply(self.ec2, &rule.with_managed_group(managed.as_str())).await
            }
            Change::NodeRules(rule) => node_rules::apply(self.ec2, rule).await,
            Change::RecreationWithheld { .. } => Ok(()),
        }
    }

    /// The managed group and the rules referencing it (other kinds of change are not sent here).
    async fn security_group(&mut self, change: &Change) -> Result<(), Error> {
        let ec2 = self.ec2;
        match change {
            Change::CreateSecurityGroup {
                name,
                description,
                tags,
            } => {
                self.managed =
                    Some(shared::create_or_adopt_group(ec2, self.config, name, description, tags).await?);
            }
            Change::AuthorizeIngress { rules } => {
                let perms: Vec<IpPermission> = rules.iter().map(Rule::to_permission).collect();
                shared::authorize_idempotent(
                    ec2,
                    &self.group(&GroupRef::Managed)?,
                    &perms,
                    "authorizing NLB ingress",
                )
                .await?;
            }
            Change::RevokeIngress { rules } => {
                let perms: Vec<IpPermission> = rules.iter().map(Rule::to_permission).collect();
                shared::revoke_idempotent(
                    ec2,
                    &self.group(&GroupRef::Managed)?,
                    &perms,
                    "revoking NLB ingress",
                )
                .await?;
            }
            Change::RevokeReference { group, permission } => {
                let perm = IpPermission {
                    protocol: permission.protocol.clone(),
                    from_port: permission.from_port,
                    to_port: permission.to_port,
                    source_groups: vec![SourceGroup {
                        group_id: SecurityGroupId::new(permission.source.clone()),
                        description: None,
                    }],
                    ..IpPermission::default()
                };
                match ec2
                    .revoke_ingress(&SecurityGroupId::new(group.clone()), &[perm])
                    .await
                {
                    Err(e) if !e.is_not_found() => {
                        return Err(Error::aws("revoking a rule referencing the NLB's group")(e));
                    }
                    _ => {}
                }
            }
            Change::TagSecurityGroup { add, remove } => {
                shared::retag_group(ec2, &self.group(&GroupRef::Managed)?, add, remove).await?;
            }
            Change::DeleteSecurityGroup { group } => {
                match ec2
                    .delete_security_group(&SecurityGroupId::new(group.clone()))
                    .await
                {
                    Ok(()) => {}
                    Err(e) if e.is_not_found() => {}
                    Err(e) if e.kind() == ccm_aws_api::ErrorKind::Conflict => {
                        return Err(Error::GroupInUse {
                            group: group.clone(),
                            name: self.name.to_owned(),
                        });
                    }
                    Err(e) => return Err(Error::aws("deleting the NLB's security group")(e)),
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// Target groups (other kinds of change are not sent here).
    async fn target_groups(&mut self, change: &Change) -> Result<(), Error> {
        let elbv2 = self.elbv2;
        match change {
            Change::CreateTargetGroup {
                target_group,
                health_check,
                tags,
            } => {
                let created = elbv2
                    .create_target_group(&NewTargetGroup {
                        name: target_group.name.clone(),
                        protocol: target_group.protocol.clone(),
                        port: target_group.port,
                        vpc_id: self.config.vpc_id.clone(),
                        target_type: target_group.target_type,
                        ip_address_type: target_group.ip_family(),
                        health_check: health_check.to_aws(),
                        tags: tags.clone(),
                    })
                    .await;
                let arn = match created {
                    Ok(g) => g.arn,
                    Err(e) if e.is_already_exists() => elbv2
                        .target_group(&target_group.name)
                        .await
                        .map_err(Error::aws("adopting a target group"))?
                        .map(|g| g.arn)
                        .ok_or_else(|| Error::aws("creating a target group")(e))?,
                    Err(e) => return Err(Error::aws("creating a target group")(e)),
                };
                self.target_groups.insert(target_group.name.clone(), arn);
            }
            Change::ModifyTargetGroup { name, health_check } => {
                let arn = self.target_group(name)?;
                elbv2
                    .modify_target_group(&arn, &health_check.to_aws())
                    .await
                    .map_err(Error::aws("modifying a target group's health check"))?;
            }
            Change::ModifyTargetGroupAttributes { name, attributes } => {
                let arn = self.target_group(name)?;
                elbv2
                    .modify_target_group_attributes(&arn, attributes)
                    .await
                    .map_err(Error::aws("setting target group attributes"))?;
            }
            Change::DeleteTargetGroup { arn, name } => match elbv2.delete_target_group(arn).await {
                // Right after its NLB or listener is deleted, AWS answers ResourceInUse for a while.
                Err(e) if e.kind() == ccm_aws_api::ErrorKind::Conflict => {
                    return Err(Error::TargetGroupInUse {
                        group: name.clone(),
                        name: self.name.to_owned(),
                    });
                }
                Err(e) if !e.is_not_found() => return Err(Error::aws("deleting a target group")(e)),
                _ => {}
            },
            _ => {}
        }
        Ok(())
    }

    /// Registered targets (other kinds of change are not sent here).
    async fn targets(&mut self, change: &Change) -> Result<(), Error> {
        let elbv2 = self.elbv2;
        match change {
            Change::RegisterTargets {
                name,
                port,
                instances,
            } => {
                let arn = self.target_group(name)?;
                let targets: Vec<Target> = instances
                    .iter()
                    .map(|i| Target::instance(InstanceId::new(i.clone()), *port))
                    .collect();
                elbv2
                    .register_targets(&arn, &targets)
                    .await
                    .map_err(Error::aws("registering targets"))?;
            }
            Change::RegisterIpTargets { name, targets } => {
                let arn = self.target_group(name)?;
                elbv2
                    .register_targets(&arn, &aws_targets(targets))
                    .await
                    .map_err(Error::aws("registering IP targets"))?;
            }
            Change::DeregisterTargets { name, targets } => {
                let arn = self.target_group(name)?;
                elbv2
                    .deregister_targets(&arn, &aws_targets(targets))
                    .await
                    .map_err(Error::aws("deregistering targets"))?;
            }
            _ => {}
        }
        Ok(())
    }

    /// The load balancer's creation and deletion (other kinds of change are not sent here).
    async fn load_balancer(&mut self, change: &Change) -> Result<(), Error> {
        let elbv2 = self.elbv2;
        match change {
            Change::DeleteLoadBalancer { arn, .. } => {
                match elbv2.delete_load_balancer(arn).await {
                    Err(e) if !e.is_not_found() => return Err(Error::aws("deleting the NLB")(e)),
                    _ => {}
                }
                self.lb_arn = None;
            }
            Change::CreateLoadBalancer {
                name,
                internal,
                subnets,
                security_groups,
                ip_address_type,
                tags,
            } => {
                let groups = security_groups
                    .as_ref()
                    .map(|gs| gs.iter().map(|g| self.group(g)).collect::<Result<Vec<_>, _>>())
                    .transpose()?;
                let created = elbv2
                    .create_load_balancer(&NewNetworkLoadBalancer {
                        name: name.clone(),
                        internal: *internal,
                        subnet_mappings: subnets
                            .iter()
                            .map(|(subnet, eip, ip)| SubnetMapping {
                                subnet_id: Some(SubnetId::new(subnet.clone())),
                                allocation_id: eip.clone(),
                                private_ipv4_address: ip.clone(),
                            })
                            .collect(),
                        security_groups: groups,
                        // The AWS default is left implicit (IAM conditions and older endpoints see no change).
                        ip_address_type: (*ip_address_type != IpAddressType::Ipv4)
                            .then(|| ip_address_type.as_str().to_owned()),
                        tags: tags.clone(),
                    })
                    .await;
                let lb = match created {
                    Ok(lb) => lb,
                    Err(e) if e.is_already_exists() => self.adopt(name, e).await?,
                    Err(e) => return Err(Error::aws("creating the NLB")(e)),
                };
                self.lb_arn = Some(lb.arn.clone());
                self.applied.created = Some(lb);
            }
            _ => {}
        }
        Ok(())
    }

    /// `CreateLoadBalancer` answered that the name is taken (`DuplicateLoadBalancerName`: a create of a crashed
    /// run, or anyone else's load balancer of any type, since ELBv2 names are unique across types). What is there
    /// is read again and claimed like any load balancer found under the name: an NLB this Service may have is
    /// adopted; anything else (an ALB, another Service's or cluster's NLB) is refused before anything is written
    /// to it.
    async fn adopt(&mut self, name: &str, refused: ccm_aws_api::AwsError) -> Result<LoadBalancerV2, Error> {
        let context = "adopting the NLB";
        let Some(lb) = self
            .elbv2
            .load_balancer(name)
            .await
            .map_err(Error::aws(context))?
        else {
            return Err(Error::aws("creating the NLB")(refused));
        };
        if lb.lb_type != "network" {
            return Err(crate::ownership::other_type(name, &lb.lb_type));
        }
        let arns = [lb.arn.clone()];
        let mut tags = self.elbv2.tags(&arns).await.map_err(Error::aws(context))?;
        let tags = tags.remove(&lb.arn).unwrap_or_default();
        self.claim = self.claim.confirm(self.config, &tags)?;
        tracing::info!(
            load_balancer = name,
            "adopting the NLB a create found under its name"
        );
        Ok(lb)
    }

    /// The load balancer's subnets, address type, groups, attributes and tags (other kinds of change are not
    /// sent here).
    async fn load_balancer_settings(&mut self, change: &Change) -> Result<(), Error> {
        let elbv2 = self.elbv2;
        match change {
            Change::SetSubnets { subnets } => {
                let arn = self.lb_arn()?;
                let subnets: Vec<SubnetId> = subnets.iter().cloned().map(SubnetId::new).collect();
                elbv2
                    .set_subnets(&arn, &subnets)
                    .await
                    .map_err(Error::aws("adding subnets to the NLB"))?;
            }
            Change::SetIpAddressType { ip_address_type } => {
                let arn = self.lb_arn()?;
                elbv2
                    .set_ip_address_type(&arn, ip_address_type.as_str())
                    .await
                    .map_err(Error::aws("setting the NLB's IP address type"))?;
            }
            Change::SetSecurityGroups { groups } => {
                let arn = self.lb_arn()?;
                let groups = groups
                    .iter()
                    .map(|g| self.group(g))
                    .collect::<Result<Vec<_>, _>>()?;
                elbv2
                    .set_security_groups(&arn, &groups)
                    .await
                    .map_err(Error::aws("setting the NLB's security groups"))?;
            }
            Change::ModifyAttributes { attributes } => {
                let arn = self.lb_arn()?;
                elbv2
                    .modify_load_balancer_attributes(&arn, attributes)
                    .await
                    .map_err(Error::aws("setting NLB attributes"))?;
            }
            Change::RemoveTags { arns, keys } => elbv2
                .remove_tags(arns, keys)
                .await
                .map_err(Error::aws("removing tags dropped from the annotation"))?,
            Change::AddTags { arns, tags } => elbv2
                .add_tags(arns, tags)
                .await
                .map_err(Error::aws("tagging the NLB"))?,
            _ => {}
        }
        Ok(())
    }
}

/// Runs `changes` in order against AWS (the only function that mutates), under `claim` (made only by
/// [`crate::ownership::claim`]: the NLB is this Service's, or nothing is under its name). `observed` seeds the
/// ARNs and the managed group's ID. Stops at the first failure; re-observing and re-planning then completes the
/// work.
pub async fn apply<E: Ec2, V: Elbv2>(
    ec2: &E,
    elbv2: &V,
    config: &LoadBalancerConfig,
    claim: &Claim,
    observed: &Observed,
    changes: &[Change],
) -> Result<Applied, Error> {
    let name = claim.name();
    let mut ctx = Context {
        ec2,
        elbv2,
        config,
        name,
        claim: claim.clone(),
        lb_arn: observed.load_balancer.as_ref().map(|lb| lb.arn.clone()),
        target_groups: observed
            .target_groups
            .iter()
            .map(|g| (g.group.name.clone(), g.group.arn.clone()))
            .collect(),
        managed: observed.managed_group.as_ref().map(|g| g.id.clone()),
        applied: Applied::default(),
    };
    for change in changes {
        if let Change::CreateLoadBalancer { name: other, .. } = change
            && other != name
        {
            // Plans are made for the claimed name only: anything else is a defect, never written.
            return Err(crate::ownership::unclaimed(other, name));
        }
        tracing::info!(load_balancer = name, ?change, "applying");
        ctx.run(change).await?;
    }
    ctx.applied.target_groups = ctx.target_groups;
    Ok(ctx.applied)
}

/// `(instance or address, port)` pairs as targets: an ID that reads as an address is an IP target.
fn aws_targets(targets: &[(String, i32)]) -> Vec<Target> {
    targets
        .iter()
        .map(|(id, port)| Target {
            id: TargetId::parse(id),
            port: *port,
        })
        .collect()
}
