//! [`apply`]: a Classic ELB's plan run against AWS in order, the only code here that changes AWS; one function
//! per resource kind (security groups, the load balancer, listeners, policies, instances, node rules).

use ccm_aws_api::{
    Ec2, Elb, InstanceId, SecurityGroupId, SubnetId,
    ec2::IpPermission,
    elb::{ClassicListener, ClassicPolicy, NewClassicLoadBalancer},
};

use super::{Change, Listener, node_rules};
use crate::{
    Error, LoadBalancerConfig,
    ownership::Claim,
    shared::{self, GroupRef, Rule},
};

/// What [`apply`] reports.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Applied {
    /// The DNS name of a load balancer created by this run.
    pub created_dns_name: Option<String>,
    /// Mutating calls made.
    pub mutations: usize,
}

struct Context<'a, E, L> {
    ec2: &'a E,
    elb: &'a L,
    config: &'a LoadBalancerConfig,
    name: &'a str,
    managed: Option<SecurityGroupId>,
    applied: Applied,
}

impl<E: Ec2, L: Elb> Context<'_, E, L> {
    fn group(&self, group: &GroupRef) -> Result<SecurityGroupId, Error> {
        match group {
            GroupRef::Id(id) => Ok(SecurityGroupId::new(id.clone())),
            GroupRef::Managed => self.managed.clone().ok_or(Error::NotFound(format!(
                "security group {}",
                shared::security_group_name(self.name)
            ))),
        }
    }

    fn groups(&self, groups: &[GroupRef]) -> Result<Vec<SecurityGroupId>, Error> {
        groups.iter().map(|g| self.group(g)).collect()
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
            | Change::TagSecurityGroup { .. }
            | Change::DeleteSecurityGroup { .. } => self.security_group(change).await,
            Change::CreateLoadBalancer { .. }
            | Change::DeleteLoadBalancer { .. }
            | Change::AddTags { .. }
            | Change::RemoveTags { .. }
            | Change::AttachSubnets { .. }
            | Change::DetachSubnets { .. }
            | Change::ApplySecurityGroups { .. }
            | Change::ConfigureHealthCheck { .. }
            | Change::ModifyAttributes { .. } => self.load_balancer(change).await,
            Change::DeleteListeners { .. } | Change::CreateListeners { .. } => self.listeners(change).await,
            Change::CreatePolicy { .. }
            | Change::SetBackendPolicies { .. }
            | Change::SetListenerPolicies { .. } => self.policies(change).await,
            Change::RegisterInstances { .. } | Change::DeregisterInstances { .. } => {
                self.instances(change).await
            }
            Change::AuthorizeNodeAccess { .. }
            | Change::RevokeNodeAccess { .. }
            | Change::HandOverNodeAccess { .. } => self.node_access(change).await,
            Change::RecreationWithheld { .. } => Ok(()),
        }
    }

    /// The load balancer's own groups (other kinds of change are not sent here).
    async fn security_group(&mut self, change: &Change) -> Result<(), Error> {
        let ec2 = self.ec2;
        match change {
            Change::CreateSecurityGroup {
                name: group_name,
                description,
                tags,
            } => {
                self.managed = Some(
                    shared::create_or_adopt_group(ec2, self.config, group_name, description, tags).await?,
                );
            }
            Change::AuthorizeIngress { group, rules } => {
                let perms: Vec<IpPermission> = rules.iter().map(Rule::to_permission).collect();
                let context = "authorizing load balancer ingress";
                shared::authorize_idempotent(ec2, &self.group(group)?, &perms, context).await?;
            }
            Change::RevokeIngress { group, rules } => {
                let perms: Vec<IpPermission> = rules.iter().map(Rule::to_permission).collect();
                shared::revoke_idempotent(ec2, &self.group(group)?, &perms, "revoking load balancer ingress")
                    .await?;
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
                    Err(e) => return Err(Error::aws("deleting the load balancer's security group")(e)),
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// The load balancer: creation, deletion, tags, subnets, groups, health check, attributes (other kinds of
    /// change are not sent here).
    async fn load_balancer(&mut self, change: &Change) -> Result<(), Error> {
        let (elb, name) = (self.elb, self.name);
        match change {
            Change::CreateLoadBalancer {
                name: lb_name,
                internal,
                subnets,
                security_groups,
                listeners,
                tags,
            } => {
                let dns = elb
                    .create_load_balancer(&NewClassicLoadBalancer {
                        name: lb_name.clone(),
                        internal: *internal,
                        subnets: subnets.iter().map(|s| SubnetId::new(s.clone())).collect(),
                        security_groups: self.groups(security_groups)?,
                        listeners: listeners.iter().map(Listener::to_aws).collect(),
                        tags: tags.clone(),
                    })
                    .await
                    .map_err(Error::aws("creating the load balancer"))?;
                self.applied.created_dns_name = Some(dns);
            }
            Change::DeleteLoadBalancer { name: lb_name, .. } => elb
                .delete_load_balancer(lb_name)
                .await
                .map_err(Error::aws("deleting the load balancer"))?,
            Change::AddTags { tags } => elb
                .add_tags(name, tags)
                .await
                .map_err(Error::aws("tagging the load balancer"))?,
            Change::RemoveTags { keys } => elb
                .remove_tags(name, keys)
                .await
                .map_err(Error::aws("removing tags dropped from the annotation"))?,
            Change::AttachSubnets { subnets } => {
                let subnets: Vec<SubnetId> = subnets.iter().map(|s| SubnetId::new(s.clone())).collect();
                elb.attach_subnets(name, &subnets)
                    .await
                    .map_err(Error::aws("attaching subnets"))?;
            }
            Change::DetachSubnets { subnets } => {
                let subnets: Vec<SubnetId> = subnets.iter().map(|s| SubnetId::new(s.clone())).collect();
                elb.detach_subnets(name, &subnets)
                    .await
                    .map_err(Error::aws("detaching subnets"))?;
            }
            Change::ApplySecurityGroups { groups } => elb
                .apply_security_groups(name, &self.groups(groups)?)
                .await
                .map_err(Error::aws("setting the load balancer's security groups"))?,
            Change::ConfigureHealthCheck { health_check } => elb
                .configure_health_check(name, &health_check.to_aws())
                .await
                .map_err(Error::aws("configuring the health check"))?,
            Change::ModifyAttributes { attributes } => elb
                .modify_attributes(name, &attributes.to_aws())
                .await
                .map_err(Error::aws("setting attributes"))?,
            _ => {}
        }
        Ok(())
    }

    /// Listeners (other kinds of change are not sent here).
    async fn listeners(&self, change: &Change) -> Result<(), Error> {
        match change {
            Change::DeleteListeners { ports } => self
                .elb
                .delete_listeners(self.name, ports)
                .await
                .map_err(Error::aws("deleting listeners")),
            Change::CreateListeners { listeners } => {
                let listeners: Vec<ClassicListener> = listeners.iter().map(Listener::to_aws).collect();
                self.elb
                    .create_listeners(self.name, &listeners)
                    .await
                    .map_err(Error::aws("creating listeners"))
            }
            _ => Ok(()),
        }
    }

    /// Policies and where they apply (other kinds of change are not sent here).
    async fn policies(&self, change: &Change) -> Result<(), Error> {
        let (elb, name) = (self.elb, self.name);
        match change {
            Change::CreatePolicy {
                name: policy,
                type_name,
                attributes,
            } => {
                let policy = ClassicPolicy {
                    name: policy.clone(),
                    type_name: type_name.clone(),
                    attributes: attributes.clone(),
                };
                match elb.create_policy(name, &policy).await {
                    // `DuplicatePolicyName` only: a policy created by a crashed run.
                    Err(e) if !e.is_already_exists() => Err(Error::aws("creating a load balancer policy")(e)),
                    _ => Ok(()),
                }
            }
            Change::SetBackendPolicies {
                instance_port,
                policies,
            } => elb
                .set_backend_policies(name, *instance_port, policies)
                .await
                .map_err(Error::aws("setting back-end policies")),
            Change::SetListenerPolicies { port, policies } => elb
                .set_listener_policies(name, *port, policies)
                .await
                .map_err(Error::aws("setting listener policies")),
            _ => Ok(()),
        }
    }

    /// Registered instances (other kinds of change are not sent here).
    async fn instances(&self, change: &Change) -> Result<(), Error> {
        let ids = |instances: &[String]| -> Vec<InstanceId> {
            instances.iter().map(|s| InstanceId::new(s.clone())).collect()
        };
        match change {
            Change::RegisterInstances { instances } => self
                .elb
                .register_instances(self.name, &ids(instances))
                .await
                .map_err(Error::aws("registering instances")),
            Change::DeregisterInstances { instances } => self
                .elb
                .deregister_instances(self.name, &ids(instances))
                .await
                .map_err(Error::aws("deregistering instances")),
            _ => Ok(()),
        }
    }

    /// The rules allowing the load balancer's group into the nodes' groups (other kinds of change are not sent
    /// here): a duplicate to add or a missing rule to revoke (a crashed or concurrent run) is not an error.
    async fn node_access(&self, change: &Change) -> Result<(), Error> {
        match change {
            Change::AuthorizeNodeAccess { group, from, ports } => {
                let perms = node_rules::permissions(&self.group(from)?, ports, self.name);
                let context = "allowing the load balancer into a node group";
                shared::authorize_idempotent(self.ec2, &SecurityGroupId::new(group.clone()), &perms, context)
                    .await
            }
            Change::RevokeNodeAccess { group, from, rules } => {
                let source = self.group(from)?;
                let perms: Vec<IpPermission> = rules.iter().map(|r| r.to_permission(&source)).collect();
                let context = "revoking the load balancer's node rules";
                shared::revoke_idempotent(self.ec2, &SecurityGroupId::new(group.clone()), &perms, context)
                    .await
            }
            Change::HandOverNodeAccess {
                group,
                from,
                rules,
                heirs,
            } => {
                // Revoked as found, then authorized under the heir's name: AWS refuses the same rule twice.
                let (source, group) = (self.group(from)?, SecurityGroupId::new(group.clone()));
                let found: Vec<IpPermission> = rules.iter().map(|r| r.to_permission(&source)).collect();
                let handed: Vec<IpPermission> = heirs.iter().map(|r| r.to_permission(&source)).collect();
                let context = "handing node rules over to the load balancer that needs them";
                shared::revoke_idempotent(self.ec2, &group, &found, context).await?;
                shared::authorize_idempotent(self.ec2, &group, &handed, context).await
            }
            _ => Ok(()),
        }
    }
}

/// Runs `changes` in order against AWS (the only function that mutates), under `claim` (made only by
/// [`crate::ownership::claim`]: the load balancer is this Service's, or nothing is under its name). `managed` is
/// the observed managed group, if any. Stops at the first failure; re-observing and re-planning then completes
/// the work.
pub async fn apply<E: Ec2, L: Elb>(
    ec2: &E,
    elb: &L,
    config: &LoadBalancerConfig,
    claim: &Claim,
    managed: Option<SecurityGroupId>,
    changes: &[Change],
) -> Result<Applied, Error> {
    let name = claim.name();
    let mut ctx = Context {
        ec2,
        elb,
        config,
        name,
        managed,
        applied: Applied::default(),
    };
    for change in changes {
        if let Change::CreateLoadBalancer { name: other, .. } | Change::DeleteLoadBalancer { name: other, .. } =
            change
            && other != name
        {
            // Plans are made for the claimed name only: anything else is a defect, never written.
            return Err(crate::ownership::unclaimed(other, name));
        }
        tracing::info!(load_balancer = name, ?change, "applying");
        ctx.run(change).await?;
    }
    Ok(ctx.applied)
}
