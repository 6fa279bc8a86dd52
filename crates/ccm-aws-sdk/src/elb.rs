//! [`Elb`] on aws-sdk-elasticloadbalancing.

use std::{collections::BTreeMap, sync::Arc, time::SystemTime};

use aws_sdk_elasticloadbalancing::types as sdk;
use ccm_aws_api::{
    Elb, InstanceId, Result, SecurityGroupId, SubnetId, Tags, VpcId,
    elb::{
        BackendPolicies, ClassicAccessLog, ClassicAttributes, ClassicHealthCheck, ClassicListener,
        ClassicLoadBalancer, ClassicPolicy, NewClassicLoadBalancer,
    },
};

use crate::{
    invalid,
    limiter::{ActionClass, Service},
    runtime::{Op, Runtime},
};
use convert::{load_balancer, sdk_instances, sdk_listener, sdk_tags};

const fn op(name: &'static str, class: ActionClass) -> Op {
    Op::new(Service::Elb, name, class)
}

const DESCRIBE_LOAD_BALANCERS: Op = op("DescribeLoadBalancers", ActionClass::NonMutating);
const CREATE_LOAD_BALANCER: Op = op("CreateLoadBalancer", ActionClass::ResourceIntensive);
const DELETE_LOAD_BALANCER: Op = op("DeleteLoadBalancer", ActionClass::Mutating);
const CREATE_LISTENERS: Op = op("CreateLoadBalancerListeners", ActionClass::Mutating);
const DELETE_LISTENERS: Op = op("DeleteLoadBalancerListeners", ActionClass::Mutating);
const CONFIGURE_HEALTH_CHECK: Op = op("ConfigureHealthCheck", ActionClass::Mutating);
const REGISTER_INSTANCES: Op = op("RegisterInstancesWithLoadBalancer", ActionClass::Registration);
const DEREGISTER_INSTANCES: Op = op("DeregisterInstancesFromLoadBalancer", ActionClass::Registration);
const DESCRIBE_ATTRIBUTES: Op = op("DescribeLoadBalancerAttributes", ActionClass::NonMutating);
const MODIFY_ATTRIBUTES: Op = op("ModifyLoadBalancerAttributes", ActionClass::Mutating);
const APPLY_SECURITY_GROUPS: Op = op("ApplySecurityGroupsToLoadBalancer", ActionClass::Mutating);
const ATTACH_SUBNETS: Op = op("AttachLoadBalancerToSubnets", ActionClass::ResourceIntensive);
const DETACH_SUBNETS: Op = op("DetachLoadBalancerFromSubnets", ActionClass::ResourceIntensive);
const DESCRIBE_TAGS: Op = op("DescribeTags", ActionClass::NonMutating);
const ADD_TAGS: Op = op("AddTags", ActionClass::Mutating);
const REMOVE_TAGS: Op = op("RemoveTags", ActionClass::Mutating);
const DESCRIBE_POLICIES: Op = op("DescribeLoadBalancerPolicies", ActionClass::NonMutating);
const CREATE_POLICY: Op = op("CreateLoadBalancerPolicy", ActionClass::Mutating);
const SET_LISTENER_POLICIES: Op = op("SetLoadBalancerPoliciesOfListener", ActionClass::Mutating);
const SET_BACKEND_POLICIES: Op = op("SetLoadBalancerPoliciesForBackendServer", ActionClass::Mutating);
/// AWS's limit on load balancer names per `DescribeTags`.
const NAMES_PER_TAG_CALL: usize = 20;
/// Load balancers per page of the region's listing (AWS allows 1 to 400).
const CLASSIC_PAGE_SIZE: i32 = 100;

/// The Classic ELB port on aws-sdk-elasticloadbalancing. Cheap to clone.
#[derive(Debug, Clone)]
pub struct AwsElb {
    client: aws_sdk_elasticloadbalancing::Client,
    rt: Arc<Runtime>,
}

// === impl AwsElb ===

impl AwsElb {
    pub(crate) fn new(client: aws_sdk_elasticloadbalancing::Client, rt: Arc<Runtime>) -> Self {
        Self { client, rt }
    }

    /// One `DescribeTags` for at most 20 names; AWS refuses the whole call when one of them is gone.
    async fn tags_batch(&self, names: &[String]) -> Result<BTreeMap<String, Tags>> {
        let out = self
            .rt
            .call(DESCRIBE_TAGS, || {
                self.client
                    .describe_tags()
                    .set_load_balancer_names(Some(names.to_vec()))
                    .send()
            })
            .await?;
        Ok(out
            .tag_descriptions()
            .iter()
            .filter_map(|d| {
                let tags = d
                    .tags()
                    .iter()
                    .map(|t| (t.key().to_owned(), t.value().unwrap_or_default().to_owned()))
                    .collect();
                Some((d.load_balancer_name()?.to_owned(), tags))
            })
            .collect())
    }
}

impl Elb for AwsElb {
    async fn load_balancer(&self, name: &str) -> Result<Option<ClassicLoadBalancer>> {
        let result = self
            .rt
            .call(DESCRIBE_LOAD_BALANCERS, || {
                self.client
                    .describe_load_balancers()
                    .load_balancer_names(name)
                    .send()
            })
            .await;
        match result {
            Ok(out) => Ok(out.load_balancer_descriptions().iter().find_map(load_balancer)),
            Err(err) if err.is_not_found() => Ok(None),
            Err(err) => Err(err),
        }
    }

    async fn create_load_balancer(&self, lb: &NewClassicLoadBalancer) -> Result<String> {
        let listeners = lb
            .listeners
            .iter()
            .map(|l| sdk_listener(l, CREATE_LOAD_BALANCER))
            .collect::<Result<Vec<_>>>()?;
        let tags = sdk_tags(&lb.tags, CREATE_LOAD_BALANCER)?;
        let out = self
            .rt
            .call(CREATE_LOAD_BALANCER, || {
                let mut request = self
                    .client
                    .create_load_balancer()
                    .load_balancer_name(&lb.name)
                    .set_listeners(Some(listeners.clone()))
                    .set_subnets(Some(lb.subnets.iter().map(|s| s.as_str().to_owned()).collect()))
                    .set_security_groups(Some(
                        lb.security_groups.iter().map(|s| s.as_str().to_owned()).collect(),
                    ));
                if lb.internal {
                    request = request.scheme("internal");
                }
                if !tags.is_empty() {
                    request = request.set_tags(Some(tags.clone()));
                }
                request.send()
            })
            .await?;
        Ok(out.dns_name().unwrap_or_default().to_owned())
    }

    async fn delete_load_balancer(&self, name: &str) -> Result<()> {
        self.rt
            .call(DELETE_LOAD_BALANCER, || {
                self.client.delete_load_balancer().load_balancer_name(name).send()
            })
            .await?;
        Ok(())
    }

    async fn create_listeners(&self, name: &str, listeners: &[ClassicListener]) -> Result<()> {
        let listeners = listeners
            .iter()
            .map(|l| sdk_listener(l, CREATE_LISTENERS))
            .collect::<Result<Vec<_>>>()?;
        self.rt
            .call(CREATE_LISTENERS, || {
                self.client
                    .create_load_balancer_listeners()
                    .load_balancer_name(name)
                    .set_listeners(Some(listeners.clone()))
                    .send()
            })
            .await?;
        Ok(())
    }

    async fn delete_listeners(&self, name: &str, ports: &[i32]) -> Result<()> {
        self.rt
            .call(DELETE_LISTENERS, || {
                self.client
                    .delete_load_balancer_listeners()
                    .load_balancer_name(name)
                    .set_load_balancer_ports(Some(ports.to_vec()))
                    .send()
            })
            .await?;
        Ok(())
    }

    async fn configure_health_check(&self, name: &str, health_check: &ClassicHealthCheck) -> Result<()> {
        let check = sdk::HealthCheck::builder()
            .target(&health_check.target)
            .interval(health_check.interval)
            .timeout(health_check.timeout)
            .healthy_threshold(health_check.healthy_threshold)
            .unhealthy_threshold(health_check.unhealthy_threshold)
            .build()
            .map_err(|e| invalid(Service::Elb, CONFIGURE_HEALTH_CHECK.name, e.to_string()))?;
        self.rt
            .call(CONFIGURE_HEALTH_CHECK, || {
                self.client
                    .configure_health_check()
                    .load_balancer_name(name)
                    .health_check(check.clone())
                    .send()
            })
            .await?;
        Ok(())
    }

    async fn register_instances(&self, name: &str, instances: &[InstanceId]) -> Result<()> {
        if instances.is_empty() {
            return Ok(());
        }
        let instances = sdk_instances(instances);
        self.rt
            .call(REGISTER_INSTANCES, || {
                self.client
                    .register_instances_with_load_balancer()
                    .load_balancer_name(name)
                    .set_instances(Some(instances.clone()))
                    .send()
            })
            .await?;
        Ok(())
    }

    async fn deregister_instances(&self, name: &str, instances: &[InstanceId]) -> Result<()> {
        if instances.is_empty() {
            return Ok(());
        }
        let instances = sdk_instances(instances);
        self.rt
            .call(DEREGISTER_INSTANCES, || {
                self.client
                    .deregister_instances_from_load_balancer()
                    .load_balancer_name(name)
                    .set_instances(Some(instances.clone()))
                    .send()
            })
            .await?;
        Ok(())
    }

    async fn attributes(&self, name: &str) -> Result<ClassicAttributes> {
        let out = self
            .rt
            .call(DESCRIBE_ATTRIBUTES, || {
                self.client
                    .describe_load_balancer_attributes()
                    .load_balancer_name(name)
                    .send()
            })
            .await?;
        let Some(a) = out.load_balancer_attributes() else {
            return Ok(ClassicAttributes::default());
        };
        Ok(ClassicAttributes {
            cross_zone: a.cross_zone_load_balancing().is_some_and(|c| c.enabled()),
            access_log: a
                .access_log()
                .map_or_else(ClassicAccessLog::default, |l| ClassicAccessLog {
                    enabled: l.enabled(),
                    emit_interval: l.emit_interval(),
                    s3_bucket_name: l.s3_bucket_name().filter(|s| !s.is_empty()).map(str::to_owned),
                    s3_bucket_prefix: l.s3_bucket_prefix().filter(|s| !s.is_empty()).map(str::to_owned),
                }),
            connection_draining_enabled: a.connection_draining().is_some_and(|d| d.enabled()),
            connection_draining_timeout: a.connection_draining().and_then(|d| d.timeout()),
            idle_timeout: a.connection_settings().map(|s| s.idle_timeout()),
        })
    }

    async fn modify_attributes(&self, name: &str, attributes: &ClassicAttributes) -> Result<()> {
        let err = |e: aws_sdk_elasticloadbalancing::error::BuildError| {
            invalid(Service::Elb, MODIFY_ATTRIBUTES.name, e.to_string())
        };
        let mut built = sdk::LoadBalancerAttributes::builder()
            .cross_zone_load_balancing(
                sdk::CrossZoneLoadBalancing::builder()
                    .enabled(attributes.cross_zone)
                    .build(),
            )
            .access_log(
                sdk::AccessLog::builder()
                    .enabled(attributes.access_log.enabled)
                    .set_emit_interval(attributes.access_log.emit_interval)
                    .set_s3_bucket_name(attributes.access_log.s3_bucket_name.clone())
                    .set_s3_bucket_prefix(attributes.access_log.s3_bucket_prefix.clone())
                    .build(),
            )
            .connection_draining(
                sdk::ConnectionDraining::builder()
                    .enabled(attributes.connection_draining_enabled)
                    .set_timeout(attributes.connection_draining_timeout)
                    .build(),
            );
        if let Some(idle) = attributes.idle_timeout {
            built = built.connection_settings(
                sdk::ConnectionSettings::builder()
                    .idle_timeout(idle)
                    .build()
                    .map_err(err)?,
            );
        }
        let built = built.build();
        self.rt
            .call(MODIFY_ATTRIBUTES, || {
                self.client
                    .modify_load_balancer_attributes()
                    .load_balancer_name(name)
                    .load_balancer_attributes(built.clone())
                    .send()
            })
            .await?;
        Ok(())
    }

    async fn apply_security_groups(&self, name: &str, groups: &[SecurityGroupId]) -> Result<()> {
        let groups: Vec<String> = groups.iter().map(|g| g.as_str().to_owned()).collect();
        self.rt
            .call(APPLY_SECURITY_GROUPS, || {
                self.client
                    .apply_security_groups_to_load_balancer()
                    .load_balancer_name(name)
                    .set_security_groups(Some(groups.clone()))
                    .send()
            })
            .await?;
        Ok(())
    }

    async fn attach_subnets(&self, name: &str, subnets: &[SubnetId]) -> Result<()> {
        let subnets: Vec<String> = subnets.iter().map(|s| s.as_str().to_owned()).collect();
        self.rt
            .call(ATTACH_SUBNETS, || {
                self.client
                    .attach_load_balancer_to_subnets()
                    .load_balancer_name(name)
                    .set_subnets(Some(subnets.clone()))
                    .send()
            })
            .await?;
        Ok(())
    }

    async fn detach_subnets(&self, name: &str, subnets: &[SubnetId]) -> Result<()> {
        let subnets: Vec<String> = subnets.iter().map(|s| s.as_str().to_owned()).collect();
        self.rt
            .call(DETACH_SUBNETS, || {
                self.client
                    .detach_load_balancer_from_subnets()
                    .load_balancer_name(name)
                    .set_subnets(Some(subnets.clone()))
                    .send()
            })
            .await?;
        Ok(())
    }

    async fn tags(&self, name: &str) -> Result<Tags> {
        let out = self
            .rt
            .call(DESCRIBE_TAGS, || {
                self.client.describe_tags().load_balancer_names(name).send()
            })
            .await?;
        Ok(out
            .tag_descriptions()
            .iter()
            .filter(|d| d.load_balancer_name() == Some(name))
            .flat_map(|d| d.tags())
            .map(|t| (t.key().to_owned(), t.value().unwrap_or_default().to_owned()))
            .collect())
    }

    async fn all_load_balancers(&self) -> Result<Vec<ClassicLoadBalancer>> {
        self.rt
            .paged(
                DESCRIBE_LOAD_BALANCERS,
                |marker| {
                    self.client
                        .describe_load_balancers()
                        // A quarter of the largest page AWS gives: a description lists every registered
                        // instance, so a page of 400 load balancers of 100 nodes was a transient of 40,000
                        // instance records in the SDK's decoding, each drift pass (docs/performance.md, run 15).
                        .page_size(CLASSIC_PAGE_SIZE)
                        .set_marker(marker)
                        .send()
                },
                |page, out| {
                    out.extend(page.load_balancer_descriptions().iter().filter_map(load_balancer));
                    page.next_marker().map(str::to_owned)
                },
            )
            .await
    }

    async fn tags_of(&self, names: &[String]) -> Result<BTreeMap<String, Tags>> {
        let mut out = BTreeMap::new();
        for chunk in names.chunks(NAMES_PER_TAG_CALL) {
            match self.tags_batch(chunk).await {
                Ok(found) => out.extend(found),
                // A load balancer of the batch was deleted since it was listed: ask name by name, skipping it.
                Err(err) if err.is_not_found() => {
                    for name in chunk {
                        match self.tags_batch(std::slice::from_ref(name)).await {
                            Ok(found) => out.extend(found),
                            Err(err) if err.is_not_found() => {}
                            Err(err) => return Err(err),
                        }
                    }
                }
                Err(err) => return Err(err),
            }
        }
        Ok(out)
    }

    async fn add_tags(&self, name: &str, tags: &Tags) -> Result<()> {
        if tags.is_empty() {
            return Ok(());
        }
        let tags = sdk_tags(tags, ADD_TAGS)?;
        self.rt
            .call(ADD_TAGS, || {
                self.client
                    .add_tags()
                    .load_balancer_names(name)
                    .set_tags(Some(tags.clone()))
                    .send()
            })
            .await?;
        Ok(())
    }

    async fn remove_tags(&self, name: &str, keys: &[String]) -> Result<()> {
        if keys.is_empty() {
            return Ok(());
        }
        let keys: Vec<sdk::TagKeyOnly> = keys
            .iter()
            .map(|k| sdk::TagKeyOnly::builder().key(k).build())
            .collect();
        self.rt
            .call(REMOVE_TAGS, || {
                self.client
                    .remove_tags()
                    .load_balancer_names(name)
                    .set_tags(Some(keys.clone()))
                    .send()
            })
            .await?;
        Ok(())
    }

    async fn policies(&self, name: &str, policy_names: &[String]) -> Result<Vec<ClassicPolicy>> {
        let out = self
            .rt
            .call(DESCRIBE_POLICIES, || {
                self.client
                    .describe_load_balancer_policies()
                    .load_balancer_name(name)
                    .set_policy_names(Some(policy_names.to_vec()))
                    .send()
            })
            .await?;
        Ok(out
            .policy_descriptions()
            .iter()
            .map(|p| ClassicPolicy {
                name: p.policy_name().unwrap_or_default().to_owned(),
                type_name: p.policy_type_name().unwrap_or_default().to_owned(),
                attributes: p
                    .policy_attribute_descriptions()
                    .iter()
                    .map(|a| {
                        (
                            a.attribute_name().unwrap_or_default().to_owned(),
                            a.attribute_value().unwrap_or_default().to_owned(),
                        )
                    })
                    .collect(),
            })
            .collect())
    }

    async fn create_policy(&self, name: &str, policy: &ClassicPolicy) -> Result<()> {
        let attributes: Vec<sdk::PolicyAttribute> = policy
            .attributes
            .iter()
            .map(|(k, v)| {
                sdk::PolicyAttribute::builder()
                    .attribute_name(k)
                    .attribute_value(v)
                    .build()
            })
            .collect();
        self.rt
            .call(CREATE_POLICY, || {
                self.client
                    .create_load_balancer_policy()
                    .load_balancer_name(name)
                    .policy_name(&policy.name)
                    .policy_type_name(&policy.type_name)
                    .set_policy_attributes(Some(attributes.clone()))
                    .send()
            })
            .await?;
        Ok(())
    }

    async fn set_listener_policies(&self, name: &str, port: i32, policy_names: &[String]) -> Result<()> {
        self.rt
            .call(SET_LISTENER_POLICIES, || {
                self.client
                    .set_load_balancer_policies_of_listener()
                    .load_balancer_name(name)
                    .load_balancer_port(port)
                    .set_policy_names(Some(policy_names.to_vec()))
                    .send()
            })
            .await?;
        Ok(())
    }

    async fn set_backend_policies(
        &self,
        name: &str,
        instance_port: i32,
        policy_names: &[String],
    ) -> Result<()> {
        self.rt
            .call(SET_BACKEND_POLICIES, || {
                self.client
                    .set_load_balancer_policies_for_backend_server()
                    .load_balancer_name(name)
                    .instance_port(instance_port)
                    .set_policy_names(Some(policy_names.to_vec()))
                    .send()
            })
            .await?;
        Ok(())
    }
}

mod convert;
