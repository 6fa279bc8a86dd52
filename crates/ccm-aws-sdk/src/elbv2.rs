//! [`Elbv2`] on aws-sdk-elasticloadbalancingv2.

use std::{collections::BTreeMap, sync::Arc};

use aws_sdk_elasticloadbalancingv2::types as sdk;
use ccm_aws_api::{
    Elbv2, ErrorKind, Result, SecurityGroupId, SubnetId, Tags, VpcId,
    elbv2::{
        ListenerChange, ListenerV2, LoadBalancerV2, LoadBalancerZone, NewListener, NewNetworkLoadBalancer,
        NewTargetGroup, SubnetMapping, Target, TargetGroup, TargetGroupHealthCheck, TargetHealth, TargetId,
        TargetIpFamily,
    },
};

use crate::{
    limiter::{ActionClass, Service},
    runtime::{Op, Runtime},
};
use certificates::matcher;
use convert::{forward, listener, load_balancer, non_empty_tags, sdk_targets, target_group};

/// Targets per (de)registration call.
const TARGETS_PER_CALL: usize = 100;
/// ARNs per `DescribeTags`/`AddTags` call.
const ARNS_PER_TAG_CALL: usize = 20;

const fn op(name: &'static str, class: ActionClass) -> Op {
    Op::new(Service::Elbv2, name, class)
}

const DESCRIBE_LOAD_BALANCERS: Op = op("DescribeLoadBalancers", ActionClass::NonMutating);
const CREATE_LOAD_BALANCER: Op = op("CreateLoadBalancer", ActionClass::ResourceIntensive);
const DELETE_LOAD_BALANCER: Op = op("DeleteLoadBalancer", ActionClass::Mutating);
const SET_SECURITY_GROUPS: Op = op("SetSecurityGroups", ActionClass::Mutating);
const SET_IP_ADDRESS_TYPE: Op = op("SetIpAddressType", ActionClass::Mutating);
const SET_SUBNETS: Op = op("SetSubnets", ActionClass::Mutating);
const DESCRIBE_LB_ATTRIBUTES: Op = op("DescribeLoadBalancerAttributes", ActionClass::NonMutating);
const MODIFY_LB_ATTRIBUTES: Op = op("ModifyLoadBalancerAttributes", ActionClass::Mutating);
const DESCRIBE_LISTENERS: Op = op("DescribeListeners", ActionClass::NonMutating);
const DESCRIBE_LISTENER_ATTRIBUTES: Op = op("DescribeListenerAttributes", ActionClass::NonMutating);
const MODIFY_LISTENER_ATTRIBUTES: Op = op("ModifyListenerAttributes", ActionClass::Mutating);
const CREATE_LISTENER: Op = op("CreateListener", ActionClass::Mutating);
const MODIFY_LISTENER: Op = op("ModifyListener", ActionClass::Mutating);
const DELETE_LISTENER: Op = op("DeleteListener", ActionClass::Mutating);
const DESCRIBE_LISTENER_CERTIFICATES: Op = op("DescribeListenerCertificates", ActionClass::NonMutating);
const ADD_LISTENER_CERTIFICATES: Op = op("AddListenerCertificates", ActionClass::Mutating);
const REMOVE_LISTENER_CERTIFICATES: Op = op("RemoveListenerCertificates", ActionClass::Mutating);
const DESCRIBE_TARGET_GROUPS: Op = op("DescribeTargetGroups", ActionClass::NonMutating);
const CREATE_TARGET_GROUP: Op = op("CreateTargetGroup", ActionClass::Mutating);
const MODIFY_TARGET_GROUP: Op = op("ModifyTargetGroup", ActionClass::Mutating);
const DELETE_TARGET_GROUP: Op = op("DeleteTargetGroup", ActionClass::Mutating);
const DESCRIBE_TG_ATTRIBUTES: Op = op("DescribeTargetGroupAttributes", ActionClass::NonMutating);
const MODIFY_TG_ATTRIBUTES: Op = op("ModifyTargetGroupAttributes", ActionClass::Mutating);
const DESCRIBE_TARGET_HEALTH: Op = op("DescribeTargetHealth", ActionClass::NonMutating);
const REGISTER_TARGETS: Op = op("RegisterTargets", ActionClass::Registration);
const DEREGISTER_TARGETS: Op = op("DeregisterTargets", ActionClass::Registration);
const DESCRIBE_TAGS: Op = op("DescribeTags", ActionClass::NonMutating);
const ADD_TAGS: Op = op("AddTags", ActionClass::Mutating);
const REMOVE_TAGS: Op = op("RemoveTags", ActionClass::Mutating);

/// The ELBv2 port on aws-sdk-elasticloadbalancingv2. Cheap to clone.
#[derive(Debug, Clone)]
pub struct AwsElbv2 {
    client: aws_sdk_elasticloadbalancingv2::Client,
    rt: Arc<Runtime>,
}

// === impl AwsElbv2 ===

impl AwsElbv2 {
    pub(crate) fn new(client: aws_sdk_elasticloadbalancingv2::Client, rt: Arc<Runtime>) -> Self {
        Self { client, rt }
    }

    /// One `DescribeTags` of at most [`ARNS_PER_TAG_CALL`] resources.
    async fn describe_tags(&self, arns: &[String]) -> Result<BTreeMap<String, Tags>> {
        let page = self
            .rt
            .call(DESCRIBE_TAGS, || {
                self.client
                    .describe_tags()
                    .set_resource_arns(Some(arns.to_vec()))
                    .send()
            })
            .await?;
        let mut out = BTreeMap::new();
        for d in page.tag_descriptions() {
            let Some(arn) = d.resource_arn() else { continue };
            let tags: Tags = d
                .tags()
                .iter()
                .filter_map(|t| Some((t.key()?.to_owned(), t.value().unwrap_or_default().to_owned())))
                .collect();
            out.insert(arn.to_owned(), tags);
        }
        Ok(out)
    }

    /// `DescribeTargetGroups` of one load balancer, or of the whole region, every page.
    async fn target_groups_paged(&self, load_balancer_arn: Option<&str>) -> Result<Vec<TargetGroup>> {
        self.rt
            .paged(
                DESCRIBE_TARGET_GROUPS,
                |marker| {
                    self.client
                        .describe_target_groups()
                        .set_load_balancer_arn(load_balancer_arn.map(str::to_owned))
                        // The largest page AWS gives: most accounts' groups fit in one call.
                        .page_size(400)
                        .set_marker(marker)
                        .send()
                },
                |page, out| {
                    out.extend(page.target_groups().iter().filter_map(target_group));
                    page.next_marker().map(str::to_owned)
                },
            )
            .await
    }
}

impl Elbv2 for AwsElbv2 {
    async fn load_balancer(&self, name: &str) -> Result<Option<LoadBalancerV2>> {
        let result = self
            .rt
            .call(DESCRIBE_LOAD_BALANCERS, || {
                self.client.describe_load_balancers().names(name).send()
            })
            .await;
        match result {
            Ok(out) => Ok(out.load_balancers().iter().find_map(load_balancer)),
            Err(err) if err.is_not_found() => Ok(None),
            Err(err) => Err(err),
        }
    }

    async fn create_load_balancer(&self, lb: &NewNetworkLoadBalancer) -> Result<LoadBalancerV2> {
        let mappings: Vec<sdk::SubnetMapping> = lb
            .subnet_mappings
            .iter()
            .map(|m| {
                sdk::SubnetMapping::builder()
                    .set_subnet_id(m.subnet_id.as_ref().map(|s| s.as_str().to_owned()))
                    .set_allocation_id(m.allocation_id.clone())
                    .set_private_ipv4_address(m.private_ipv4_address.clone())
                    .build()
            })
            .collect();
        let groups = lb
            .security_groups
            .as_ref()
            .map(|g| g.iter().map(|s| s.as_str().to_owned()).collect());
        let out = self
            .rt
            .call(CREATE_LOAD_BALANCER, || {
                self.client
                    .create_load_balancer()
                    .name(&lb.name)
                    .r#type(sdk::LoadBalancerTypeEnum::Network)
                    .scheme(if lb.internal {
                        sdk::LoadBalancerSchemeEnum::Internal
                    } else {
                        sdk::LoadBalancerSchemeEnum::InternetFacing
                    })
                    .set_subnet_mappings(Some(mappings.clone()))
                    .set_security_groups(groups.clone())
                    .set_ip_address_type(lb.ip_address_type.as_deref().map(sdk::IpAddressType::from))
                    .set_tags(non_empty_tags(&lb.tags))
                    .send()
            })
            .await?;
        out.load_balancers()
            .iter()
            .find_map(load_balancer)
            .ok_or_else(|| {
                CREATE_LOAD_BALANCER.error(ccm_aws_api::ErrorKind::Transient, "AWS returned no load balancer")
            })
    }

    async fn delete_load_balancer(&self, arn: &str) -> Result<()> {
        self.rt
            .call(DELETE_LOAD_BALANCER, || {
                self.client.delete_load_balancer().load_balancer_arn(arn).send()
            })
            .await?;
        Ok(())
    }

    async fn set_security_groups(&self, arn: &str, groups: &[SecurityGroupId]) -> Result<()> {
        let groups: Vec<String> = groups.iter().map(|g| g.as_str().to_owned()).collect();
        self.rt
            .call(SET_SECURITY_GROUPS, || {
                self.client
                    .set_security_groups()
                    .load_balancer_arn(arn)
                    .set_security_groups(Some(groups.clone()))
                    .send()
            })
            .await?;
        Ok(())
    }

    async fn set_subnets(&self, arn: &str, subnets: &[SubnetId]) -> Result<()> {
        let subnets: Vec<String> = subnets.iter().map(|s| s.as_str().to_owned()).collect();
        self.rt
            .call(SET_SUBNETS, || {
                self.client
                    .set_subnets()
                    .load_balancer_arn(arn)
                    .set_subnets(Some(subnets.clone()))
                    .send()
            })
            .await?;
        Ok(())
    }

    async fn set_ip_address_type(&self, arn: &str, ip_address_type: &str) -> Result<()> {
        self.rt
            .call(SET_IP_ADDRESS_TYPE, || {
                self.client
                    .set_ip_address_type()
                    .load_balancer_arn(arn)
                    .ip_address_type(sdk::IpAddressType::from(ip_address_type))
                    .send()
            })
            .await?;
        Ok(())
    }

    async fn load_balancer_attributes(&self, arn: &str) -> Result<BTreeMap<String, String>> {
        self.describe_lb_attributes(arn).await
    }

    async fn modify_load_balancer_attributes(
        &self,
        arn: &str,
        attributes: &BTreeMap<String, String>,
    ) -> Result<()> {
        self.set_lb_attributes(arn, attributes).await
    }

    async fn listener_attributes(&self, arn: &str) -> Result<BTreeMap<String, String>> {
        self.describe_listener_attrs(arn).await
    }

    async fn modify_listener_attributes(
        &self,
        arn: &str,
        attributes: &BTreeMap<String, String>,
    ) -> Result<()> {
        self.set_listener_attributes(arn, attributes).await
    }

    async fn listeners(&self, load_balancer_arn: &str) -> Result<Vec<ListenerV2>> {
        self.rt
            .paged(
                DESCRIBE_LISTENERS,
                |marker| {
                    self.client
                        .describe_listeners()
                        .load_balancer_arn(load_balancer_arn)
                        .set_marker(marker)
                        .send()
                },
                |page, out| {
                    out.extend(page.listeners().iter().filter_map(listener));
                    page.next_marker().map(str::to_owned)
                },
            )
            .await
    }

    async fn create_listener(&self, l: &NewListener) -> Result<ListenerV2> {
        let out = self
            .rt
            .call(CREATE_LISTENER, || {
                self.client
                    .create_listener()
                    .load_balancer_arn(&l.load_balancer_arn)
                    .port(l.port)
                    .protocol(sdk::ProtocolEnum::from(l.protocol.as_str()))
                    .set_certificates(
                        l.certificate_arn
                            .as_ref()
                            .map(|c| vec![sdk::Certificate::builder().certificate_arn(c).build()]),
                    )
                    .set_ssl_policy(l.ssl_policy.clone())
                    .set_alpn_policy(l.alpn_policy.clone().map(|p| vec![p]))
                    .default_actions(forward(&l.target_group_arn))
                    .set_tags(non_empty_tags(&l.tags))
                    .send()
            })
            .await?;
        out.listeners().iter().find_map(listener).ok_or_else(|| {
            CREATE_LISTENER.error(ccm_aws_api::ErrorKind::Transient, "AWS returned no listener")
        })
    }

    async fn modify_listener(&self, change: &ListenerChange) -> Result<()> {
        self.rt
            .call(MODIFY_LISTENER, || {
                self.client
                    .modify_listener()
                    .listener_arn(&change.listener_arn)
                    .set_port(change.port)
                    .set_protocol(change.protocol.as_deref().map(sdk::ProtocolEnum::from))
                    .set_certificates(
                        change
                            .certificate_arn
                            .as_ref()
                            .map(|c| vec![sdk::Certificate::builder().certificate_arn(c).build()]),
                    )
                    .set_ssl_policy(change.ssl_policy.clone())
                    .set_alpn_policy(change.alpn_policy.clone().map(|p| vec![p]))
                    .set_default_actions(change.target_group_arn.as_deref().map(|tg| vec![forward(tg)]))
                    .send()
            })
            .await?;
        Ok(())
    }

    async fn listener_certificates(&self, arn: &str) -> Result<Vec<String>> {
        self.describe_listener_certificates(arn).await
    }

    async fn add_listener_certificates(&self, arn: &str, certificates: &[String]) -> Result<()> {
        self.add_certificates(arn, certificates).await
    }

    async fn remove_listener_certificates(&self, arn: &str, certificates: &[String]) -> Result<()> {
        self.remove_certificates(arn, certificates).await
    }

    async fn delete_listener(&self, arn: &str) -> Result<()> {
        self.rt
            .call(DELETE_LISTENER, || {
                self.client.delete_listener().listener_arn(arn).send()
            })
            .await?;
        Ok(())
    }

    async fn target_groups(&self, load_balancer_arn: &str) -> Result<Vec<TargetGroup>> {
        self.target_groups_paged(Some(load_balancer_arn)).await
    }

    async fn all_target_groups(&self) -> Result<Vec<TargetGroup>> {
        self.target_groups_paged(None).await
    }

    async fn all_load_balancers(&self) -> Result<Vec<LoadBalancerV2>> {
        self.rt
            .paged(
                DESCRIBE_LOAD_BALANCERS,
                |marker| {
                    self.client
                        .describe_load_balancers()
                        // The largest page AWS gives.
                        .page_size(400)
                        .set_marker(marker)
                        .send()
                },
                |page, out| {
                    out.extend(page.load_balancers().iter().filter_map(load_balancer));
                    page.next_marker().map(str::to_owned)
                },
            )
            .await
    }

    async fn target_group(&self, name: &str) -> Result<Option<TargetGroup>> {
        let result = self
            .rt
            .call(DESCRIBE_TARGET_GROUPS, || {
                self.client.describe_target_groups().names(name).send()
            })
            .await;
        match result {
            Ok(out) => Ok(out
                .target_groups()
                .iter()
                .filter_map(target_group)
                .find(|g| g.name == name)),
            Err(err) if err.is_not_found() => Ok(None),
            Err(err) => Err(err),
        }
    }

    async fn create_target_group(&self, group: &NewTargetGroup) -> Result<TargetGroup> {
        let hc = &group.health_check;
        let out = self
            .rt
            .call(CREATE_TARGET_GROUP, || {
                self.client
                    .create_target_group()
                    .name(&group.name)
                    .protocol(sdk::ProtocolEnum::from(group.protocol.as_str()))
                    .port(group.port)
                    .vpc_id(group.vpc_id.as_str())
                    .target_type(sdk::TargetTypeEnum::from(group.target_type.as_str()))
                    // Only IPv6 is sent: an IPv4 request stays as it always was (AWS's default).
                    .set_ip_address_type(
                        (group.ip_address_type == TargetIpFamily::Ipv6)
                            .then(|| sdk::TargetGroupIpAddressTypeEnum::from(group.ip_address_type.as_str())),
                    )
                    .set_health_check_protocol(hc.protocol.as_deref().map(sdk::ProtocolEnum::from))
                    .set_health_check_port(hc.port.clone())
                    .set_health_check_path(hc.path.clone())
                    .set_health_check_interval_seconds(hc.interval_seconds)
                    .set_health_check_timeout_seconds(hc.timeout_seconds)
                    .set_healthy_threshold_count(hc.healthy_threshold)
                    .set_unhealthy_threshold_count(hc.unhealthy_threshold)
                    .set_matcher(matcher(hc))
                    .set_tags(non_empty_tags(&group.tags))
                    .send()
            })
            .await?;
        out.target_groups().iter().find_map(target_group).ok_or_else(|| {
            CREATE_TARGET_GROUP.error(ccm_aws_api::ErrorKind::Transient, "AWS returned no target group")
        })
    }

    async fn modify_target_group(&self, arn: &str, hc: &TargetGroupHealthCheck) -> Result<()> {
        self.rt
            .call(MODIFY_TARGET_GROUP, || {
                self.client
                    .modify_target_group()
                    .target_group_arn(arn)
                    .set_health_check_protocol(hc.protocol.as_deref().map(sdk::ProtocolEnum::from))
                    .set_health_check_port(hc.port.clone())
                    .set_health_check_path(hc.path.clone())
                    .set_health_check_interval_seconds(hc.interval_seconds)
                    .set_health_check_timeout_seconds(hc.timeout_seconds)
                    .set_healthy_threshold_count(hc.healthy_threshold)
                    .set_unhealthy_threshold_count(hc.unhealthy_threshold)
                    .set_matcher(matcher(hc))
                    .send()
            })
            .await?;
        Ok(())
    }

    async fn delete_target_group(&self, arn: &str) -> Result<()> {
        self.rt
            .call(DELETE_TARGET_GROUP, || {
                self.client.delete_target_group().target_group_arn(arn).send()
            })
            .await?;
        Ok(())
    }

    async fn target_group_attributes(&self, arn: &str) -> Result<BTreeMap<String, String>> {
        self.describe_tg_attributes(arn).await
    }

    async fn modify_target_group_attributes(
        &self,
        arn: &str,
        attributes: &BTreeMap<String, String>,
    ) -> Result<()> {
        self.set_tg_attributes(arn, attributes).await
    }

    async fn target_health(&self, target_group_arn: &str) -> Result<Vec<TargetHealth>> {
        let out = self
            .rt
            .call(DESCRIBE_TARGET_HEALTH, || {
                self.client
                    .describe_target_health()
                    .target_group_arn(target_group_arn)
                    .send()
            })
            .await?;
        Ok(out
            .target_health_descriptions()
            .iter()
            .filter_map(|d| {
                let t = d.target()?;
                Some(TargetHealth {
                    target: Target {
                        id: TargetId::parse(t.id()?),
                        port: t.port().unwrap_or_default(),
                    },
                    state: d
                        .target_health()
                        .and_then(|h| h.state())
                        .map(|s| s.as_str().to_owned())
                        .unwrap_or_default(),
                    reason: d
                        .target_health()
                        .and_then(|h| h.reason())
                        .map(|r| r.as_str().to_owned()),
                })
            })
            .collect())
    }

    async fn register_targets(&self, target_group_arn: &str, targets: &[Target]) -> Result<()> {
        for chunk in targets.chunks(TARGETS_PER_CALL) {
            let chunk = sdk_targets(chunk);
            self.rt
                .call(REGISTER_TARGETS, || {
                    self.client
                        .register_targets()
                        .target_group_arn(target_group_arn)
                        .set_targets(Some(chunk.clone()))
                        .send()
                })
                .await?;
        }
        Ok(())
    }

    async fn deregister_targets(&self, target_group_arn: &str, targets: &[Target]) -> Result<()> {
        for chunk in targets.chunks(TARGETS_PER_CALL) {
            let chunk = sdk_targets(chunk);
            self.rt
                .call(DEREGISTER_TARGETS, || {
                    self.client
                        .deregister_targets()
                        .target_group_arn(target_group_arn)
                        .set_targets(Some(chunk.clone()))
                        .send()
                })
                .await?;
        }
        Ok(())
    }

    async fn tags(&self, arns: &[String]) -> Result<BTreeMap<String, Tags>> {
        let mut out = BTreeMap::new();
        for chunk in arns.chunks(ARNS_PER_TAG_CALL) {
            match self.describe_tags(chunk).await {
                Ok(found) => out.extend(found),
                // One resource deleted since it was listed fails the whole call (`TargetGroupNotFound`,
                // `LoadBalancerNotFound`): each is asked alone, and those gone are left out.
                Err(e) if e.kind() == ErrorKind::NotFound => {
                    for arn in chunk.iter().filter(|_| chunk.len() > 1) {
                        match self.describe_tags(std::slice::from_ref(arn)).await {
                            Ok(found) => out.extend(found),
                            Err(e) if e.kind() == ErrorKind::NotFound => {}
                            Err(e) => return Err(e),
                        }
                    }
                }
                Err(e) => return Err(e),
            }
        }
        Ok(out)
    }

    async fn add_tags(&self, arns: &[String], tags: &Tags) -> Result<()> {
        let Some(tags) = non_empty_tags(tags) else {
            return Ok(());
        };
        for chunk in arns.chunks(ARNS_PER_TAG_CALL) {
            self.rt
                .call(ADD_TAGS, || {
                    self.client
                        .add_tags()
                        .set_resource_arns(Some(chunk.to_vec()))
                        .set_tags(Some(tags.clone()))
                        .send()
                })
                .await?;
        }
        Ok(())
    }

    async fn remove_tags(&self, arns: &[String], keys: &[String]) -> Result<()> {
        if keys.is_empty() {
            return Ok(());
        }
        for chunk in arns.chunks(ARNS_PER_TAG_CALL) {
            self.rt
                .call(REMOVE_TAGS, || {
                    self.client
                        .remove_tags()
                        .set_resource_arns(Some(chunk.to_vec()))
                        .set_tag_keys(Some(keys.to_vec()))
                        .send()
                })
                .await?;
        }
        Ok(())
    }
}

mod attributes;
mod certificates;
mod convert;
