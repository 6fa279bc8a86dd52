//! Test support shared by the moto tests: [`Faulty`], port wrappers that refuse the k-th mutating call, as if
//! the process died just before it.
#![allow(dead_code)]

pub mod world;

use std::{
    collections::BTreeMap,
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
};

use ccm_aws_api::{
    AwsError, Ec2, Elb, Elbv2, ErrorKind, Filter, InstanceId, Result, RouteTableId, SecurityGroupId,
    SubnetId, Tags,
    ec2::{
        AvailabilityZone, Instance, InstanceTopology, IpPermission, NetworkInterface, NewSecurityGroup,
        RouteTable, SecurityGroup, Subnet,
    },
    elb::{
        ClassicAttributes, ClassicHealthCheck, ClassicListener, ClassicLoadBalancer, ClassicPolicy,
        NewClassicLoadBalancer,
    },
    elbv2::{
        ListenerChange, ListenerV2, LoadBalancerV2, NewListener, NewNetworkLoadBalancer, NewTargetGroup,
        Target, TargetGroup, TargetGroupHealthCheck, TargetHealth,
    },
};

/// A port wrapper that refuses its `fail_at`-th mutating call (as if the process died just before it).
#[derive(Clone)]
pub struct Faulty<T> {
    /// The real port.
    pub inner: T,
    /// Mutating calls so far (shared by the wrappers of one run).
    pub count: Arc<AtomicUsize>,
    /// The call that fails (1-based).
    pub fail_at: usize,
}

impl<T> Faulty<T> {
    fn tick(&self, op: &'static str) -> Result<()> {
        let n = self.count.fetch_add(1, Ordering::SeqCst) + 1;
        if n == self.fail_at {
            Err(AwsError::new(ErrorKind::Transient, "fault", op).with_message("injected crash"))
        } else {
            Ok(())
        }
    }
}

impl<T: Ec2 + Sync> Ec2 for Faulty<T> {
    async fn instances_by_id(&self, ids: &[InstanceId]) -> Result<Vec<Instance>> {
        self.inner.instances_by_id(ids).await
    }
    async fn instances(&self, filters: &[Filter]) -> Result<Vec<Instance>> {
        self.inner.instances(filters).await
    }
    async fn instances_page(
        &self,
        filters: &[Filter],
        token: Option<String>,
    ) -> Result<(Vec<Instance>, Option<String>)> {
        self.inner.instances_page(filters, token).await
    }
    async fn network_interfaces(&self, filters: &[Filter]) -> Result<Vec<NetworkInterface>> {
        self.inner.network_interfaces(filters).await
    }
    async fn availability_zones(&self) -> Result<Vec<AvailabilityZone>> {
        self.inner.availability_zones().await
    }
    async fn instance_topology(&self, ids: &[InstanceId]) -> Result<Vec<InstanceTopology>> {
        self.inner.instance_topology(ids).await
    }
    async fn set_source_dest_check(&self, instance: &InstanceId, enabled: bool) -> Result<()> {
        self.tick("ModifyInstanceAttribute")?;
        self.inner.set_source_dest_check(instance, enabled).await
    }
    async fn security_groups(&self, filters: &[Filter]) -> Result<Vec<SecurityGroup>> {
        self.inner.security_groups(filters).await
    }
    async fn create_security_group(&self, group: &NewSecurityGroup) -> Result<SecurityGroupId> {
        self.tick("CreateSecurityGroup")?;
        self.inner.create_security_group(group).await
    }
    async fn delete_security_group(&self, group: &SecurityGroupId) -> Result<()> {
        self.tick("DeleteSecurityGroup")?;
        self.inner.delete_security_group(group).await
    }
    async fn authorize_ingress(&self, group: &SecurityGroupId, permissions: &[IpPermission]) -> Result<()> {
        self.tick("AuthorizeSecurityGroupIngress")?;
        self.inner.authorize_ingress(group, permissions).await
    }
    async fn revoke_ingress(&self, group: &SecurityGroupId, permissions: &[IpPermission]) -> Result<()> {
        self.tick("RevokeSecurityGroupIngress")?;
        self.inner.revoke_ingress(group, permissions).await
    }
    async fn subnets(&self, filters: &[Filter]) -> Result<Vec<Subnet>> {
        self.inner.subnets(filters).await
    }
    async fn route_tables(&self, filters: &[Filter]) -> Result<Vec<RouteTable>> {
        self.inner.route_tables(filters).await
    }
    async fn create_route(&self, table: &RouteTableId, cidr: &str, instance: &InstanceId) -> Result<()> {
        self.tick("CreateRoute")?;
        self.inner.create_route(table, cidr, instance).await
    }
    async fn replace_route(&self, table: &RouteTableId, cidr: &str, instance: &InstanceId) -> Result<()> {
        self.tick("ReplaceRoute")?;
        self.inner.replace_route(table, cidr, instance).await
    }
    async fn delete_route(&self, table: &RouteTableId, cidr: &str) -> Result<()> {
        self.tick("DeleteRoute")?;
        self.inner.delete_route(table, cidr).await
    }
    async fn create_tags(&self, resources: &[String], tags: &Tags) -> Result<()> {
        self.tick("CreateTags")?;
        self.inner.create_tags(resources, tags).await
    }
    async fn delete_tags(&self, resources: &[String], tags: &BTreeMap<String, Option<String>>) -> Result<()> {
        self.tick("DeleteTags")?;
        self.inner.delete_tags(resources, tags).await
    }
}

impl<T: Elb + Sync> Elb for Faulty<T> {
    async fn load_balancer(&self, name: &str) -> Result<Option<ClassicLoadBalancer>> {
        self.inner.load_balancer(name).await
    }
    async fn create_load_balancer(&self, lb: &NewClassicLoadBalancer) -> Result<String> {
        self.tick("CreateLoadBalancer")?;
        self.inner.create_load_balancer(lb).await
    }
    async fn delete_load_balancer(&self, name: &str) -> Result<()> {
        self.tick("DeleteLoadBalancer")?;
        self.inner.delete_load_balancer(name).await
    }
    async fn create_listeners(&self, name: &str, listeners: &[ClassicListener]) -> Result<()> {
        self.tick("CreateLoadBalancerListeners")?;
        self.inner.create_listeners(name, listeners).await
    }
    async fn delete_listeners(&self, name: &str, ports: &[i32]) -> Result<()> {
        self.tick("DeleteLoadBalancerListeners")?;
        self.inner.delete_listeners(name, ports).await
    }
    async fn configure_health_check(&self, name: &str, health_check: &ClassicHealthCheck) -> Result<()> {
        self.tick("ConfigureHealthCheck")?;
        self.inner.configure_health_check(name, health_check).await
    }
    async fn register_instances(&self, name: &str, instances: &[InstanceId]) -> Result<()> {
        self.tick("RegisterInstancesWithLoadBalancer")?;
        self.inner.register_instances(name, instances).await
    }
    async fn deregister_instances(&self, name: &str, instances: &[InstanceId]) -> Result<()> {
        self.tick("DeregisterInstancesFromLoadBalancer")?;
        self.inner.deregister_instances(name, instances).await
    }
    async fn attributes(&self, name: &str) -> Result<ClassicAttributes> {
        self.inner.attributes(name).await
    }
    async fn modify_attributes(&self, name: &str, attributes: &ClassicAttributes) -> Result<()> {
        self.tick("ModifyLoadBalancerAttributes")?;
        self.inner.modify_attributes(name, attributes).await
    }
    async fn apply_security_groups(&self, name: &str, groups: &[SecurityGroupId]) -> Result<()> {
        self.tick("ApplySecurityGroupsToLoadBalancer")?;
        self.inner.apply_security_groups(name, groups).await
    }
    async fn attach_subnets(&self, name: &str, subnets: &[SubnetId]) -> Result<()> {
        self.tick("AttachLoadBalancerToSubnets")?;
        self.inner.attach_subnets(name, subnets).await
    }
    async fn detach_subnets(&self, name: &str, subnets: &[SubnetId]) -> Result<()> {
        self.tick("DetachLoadBalancerFromSubnets")?;
        self.inner.detach_subnets(name, subnets).await
    }
    async fn tags(&self, name: &str) -> Result<Tags> {
        self.inner.tags(name).await
    }
    async fn add_tags(&self, name: &str, tags: &Tags) -> Result<()> {
        self.tick("AddTags")?;
        self.inner.add_tags(name, tags).await
    }
    async fn remove_tags(&self, name: &str, keys: &[String]) -> Result<()> {
        self.tick("RemoveTags")?;
        self.inner.remove_tags(name, keys).await
    }
    async fn policies(&self, name: &str, policy_names: &[String]) -> Result<Vec<ClassicPolicy>> {
        self.inner.policies(name, policy_names).await
    }
    async fn create_policy(&self, name: &str, policy: &ClassicPolicy) -> Result<()> {
        self.tick("CreateLoadBalancerPolicy")?;
        self.inner.create_policy(name, policy).await
    }
    async fn set_listener_policies(&self, name: &str, port: i32, policy_names: &[String]) -> Result<()> {
        self.tick("SetLoadBalancerPoliciesOfListener")?;
        self.inner.set_listener_policies(name, port, policy_names).await
    }
    async fn set_backend_policies(
        &self,
        name: &str,
        instance_port: i32,
        policy_names: &[String],
    ) -> Result<()> {
        self.tick("SetLoadBalancerPoliciesForBackendServer")?;
        self.inner
            .set_backend_policies(name, instance_port, policy_names)
            .await
    }
}

impl<T: Elbv2 + Sync> Elbv2 for Faulty<T> {
    async fn load_balancer(&self, name: &str) -> Result<Option<LoadBalancerV2>> {
        self.inner.load_balancer(name).await
    }
    async fn create_load_balancer(&self, lb: &NewNetworkLoadBalancer) -> Result<LoadBalancerV2> {
        self.tick("CreateLoadBalancer")?;
        self.inner.create_load_balancer(lb).await
    }
    async fn delete_load_balancer(&self, arn: &str) -> Result<()> {
        self.tick("DeleteLoadBalancer")?;
        self.inner.delete_load_balancer(arn).await
    }
    async fn set_security_groups(&self, arn: &str, groups: &[SecurityGroupId]) -> Result<()> {
        self.tick("SetSecurityGroups")?;
        self.inner.set_security_groups(arn, groups).await
    }
    async fn set_subnets(&self, arn: &str, subnets: &[SubnetId]) -> Result<()> {
        self.tick("SetSubnets")?;
        self.inner.set_subnets(arn, subnets).await
    }
    async fn set_ip_address_type(&self, arn: &str, ip_address_type: &str) -> Result<()> {
        self.tick("SetIpAddressType")?;
        self.inner.set_ip_address_type(arn, ip_address_type).await
    }
    async fn load_balancer_attributes(&self, arn: &str) -> Result<BTreeMap<String, String>> {
        self.inner.load_balancer_attributes(arn).await
    }
    async fn modify_load_balancer_attributes(
        &self,
        arn: &str,
        attributes: &BTreeMap<String, String>,
    ) -> Result<()> {
        self.tick("ModifyLoadBalancerAttributes")?;
        self.inner.modify_load_balancer_attributes(arn, attributes).await
    }
    async fn listeners(&self, load_balancer_arn: &str) -> Result<Vec<ListenerV2>> {
        self.inner.listeners(load_balancer_arn).await
    }
    async fn listener_attributes(&self, arn: &str) -> Result<BTreeMap<String, String>> {
        self.inner.listener_attributes(arn).await
    }
    async fn modify_listener_attributes(
        &self,
        arn: &str,
        attributes: &BTreeMap<String, String>,
    ) -> Result<()> {
        self.tick("ModifyListenerAttributes")?;
        self.inner.modify_listener_attributes(arn, attributes).await
    }
    async fn create_listener(&self, listener: &NewListener) -> Result<ListenerV2> {
        self.tick("CreateListener")?;
        self.inner.create_listener(listener).await
    }
    async fn modify_listener(&self, change: &ListenerChange) -> Result<()> {
        self.tick("ModifyListener")?;
        self.inner.modify_listener(change).await
    }
    async fn delete_listener(&self, arn: &str) -> Result<()> {
        self.tick("DeleteListener")?;
        self.inner.delete_listener(arn).await
    }
    async fn target_groups(&self, load_balancer_arn: &str) -> Result<Vec<TargetGroup>> {
        self.inner.target_groups(load_balancer_arn).await
    }
    async fn all_target_groups(&self) -> Result<Vec<TargetGroup>> {
        self.inner.all_target_groups().await
    }
    async fn target_group(&self, name: &str) -> Result<Option<TargetGroup>> {
        self.inner.target_group(name).await
    }
    async fn create_target_group(&self, group: &NewTargetGroup) -> Result<TargetGroup> {
        self.tick("CreateTargetGroup")?;
        self.inner.create_target_group(group).await
    }
    async fn modify_target_group(&self, arn: &str, health_check: &TargetGroupHealthCheck) -> Result<()> {
        self.tick("ModifyTargetGroup")?;
        self.inner.modify_target_group(arn, health_check).await
    }
    async fn delete_target_group(&self, arn: &str) -> Result<()> {
        self.tick("DeleteTargetGroup")?;
        self.inner.delete_target_group(arn).await
    }
    async fn target_group_attributes(&self, arn: &str) -> Result<BTreeMap<String, String>> {
        self.inner.target_group_attributes(arn).await
    }
    async fn modify_target_group_attributes(
        &self,
        arn: &str,
        attributes: &BTreeMap<String, String>,
    ) -> Result<()> {
        self.tick("ModifyTargetGroupAttributes")?;
        self.inner.modify_target_group_attributes(arn, attributes).await
    }
    async fn target_health(&self, target_group_arn: &str) -> Result<Vec<TargetHealth>> {
        self.inner.target_health(target_group_arn).await
    }
    async fn register_targets(&self, target_group_arn: &str, targets: &[Target]) -> Result<()> {
        self.tick("RegisterTargets")?;
        self.inner.register_targets(target_group_arn, targets).await
    }
    async fn deregister_targets(&self, target_group_arn: &str, targets: &[Target]) -> Result<()> {
        self.tick("DeregisterTargets")?;
        self.inner.deregister_targets(target_group_arn, targets).await
    }
    async fn tags(&self, arns: &[String]) -> Result<BTreeMap<String, Tags>> {
        self.inner.tags(arns).await
    }
    async fn add_tags(&self, arns: &[String], tags: &Tags) -> Result<()> {
        self.tick("AddTags")?;
        self.inner.add_tags(arns, tags).await
    }
    async fn remove_tags(&self, arns: &[String], keys: &[String]) -> Result<()> {
        self.tick("RemoveTags")?;
        self.inner.remove_tags(arns, keys).await
    }
}
