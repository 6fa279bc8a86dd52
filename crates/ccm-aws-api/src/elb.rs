//! The Classic Load Balancer port (Elastic Load Balancing, API version 2012-06-01).

use std::{collections::BTreeMap, future::Future, time::SystemTime};

use crate::{InstanceId, Result, SecurityGroupId, SubnetId, Tags, VpcId};

/// A Classic Load Balancer as `DescribeLoadBalancers` reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ClassicLoadBalancer {
    /// The name (at most 32 characters).
    pub name: String,
    /// The DNS name clients use.
    pub dns_name: String,
    /// Whether the scheme is `internal` (else `internet-facing`).
    pub internal: bool,
    /// The VPC.
    pub vpc_id: Option<VpcId>,
    /// Attached subnets.
    pub subnets: Vec<SubnetId>,
    /// Enabled availability zones.
    pub availability_zones: Vec<String>,
    /// Security groups.
    pub security_groups: Vec<SecurityGroupId>,
    /// Listeners with their policies.
    pub listeners: Vec<ClassicListener>,
    /// The health check.
    pub health_check: Option<ClassicHealthCheck>,
    /// Registered instances.
    pub instances: Vec<InstanceId>,
    /// Back-end server policies per instance port.
    pub backend_policies: Vec<BackendPolicies>,
    /// When AWS created it (`CreatedTime`), when reported.
    pub created_time: Option<SystemTime>,
}

/// A Classic listener.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct ClassicListener {
    /// `TCP`, `SSL`, `HTTP`, `HTTPS`.
    pub protocol: String,
    /// The front-end port.
    pub load_balancer_port: i32,
    /// The back-end protocol.
    pub instance_protocol: String,
    /// The back-end port (the node port).
    pub instance_port: i32,
    /// The certificate ARN for SSL/HTTPS.
    pub ssl_certificate_id: Option<String>,
    /// Policies on the listener (read only; set them with [`Elb::set_listener_policies`]).
    pub policy_names: Vec<String>,
}

/// A Classic health check.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ClassicHealthCheck {
    /// `TCP:30080`, `HTTP:10256/healthz`, ...
    pub target: String,
    /// Seconds between checks.
    pub interval: i32,
    /// Seconds before a check fails.
    pub timeout: i32,
    /// Successes to become healthy.
    pub healthy_threshold: i32,
    /// Failures to become unhealthy.
    pub unhealthy_threshold: i32,
}

/// The policies of one back-end (instance) port.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct BackendPolicies {
    /// The instance port.
    pub instance_port: i32,
    /// The policy names.
    pub policy_names: Vec<String>,
}

/// The attributes of a Classic Load Balancer that the controllers manage.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct ClassicAttributes {
    /// Cross-zone load balancing.
    pub cross_zone: bool,
    /// Access logs.
    pub access_log: ClassicAccessLog,
    /// Connection draining: enabled and timeout in seconds.
    pub connection_draining_enabled: bool,
    /// The draining timeout in seconds.
    pub connection_draining_timeout: Option<i32>,
    /// The idle timeout in seconds.
    pub idle_timeout: Option<i32>,
}

/// Access log settings.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct ClassicAccessLog {
    /// Whether logs are written.
    pub enabled: bool,
    /// Minutes between log files (5 or 60).
    pub emit_interval: Option<i32>,
    /// The S3 bucket.
    pub s3_bucket_name: Option<String>,
    /// The S3 key prefix.
    pub s3_bucket_prefix: Option<String>,
}

/// A load balancer policy (`DescribeLoadBalancerPolicies`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ClassicPolicy {
    /// The policy name.
    pub name: String,
    /// Its type (`ProxyProtocolPolicyType`, `SSLNegotiationPolicyType`, ...).
    pub type_name: String,
    /// Its attributes in AWS's order.
    pub attributes: Vec<(String, String)>,
}

/// What to create with [`Elb::create_load_balancer`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewClassicLoadBalancer {
    /// The name.
    pub name: String,
    /// `internal` scheme when true, else `internet-facing`.
    pub internal: bool,
    /// Subnets (one per zone).
    pub subnets: Vec<SubnetId>,
    /// Security groups.
    pub security_groups: Vec<SecurityGroupId>,
    /// Listeners (policy names are ignored).
    pub listeners: Vec<ClassicListener>,
    /// Tags applied at creation.
    pub tags: Tags,
}

port! {
    /// The Classic ELB operations the workspace needs. An unknown load balancer is
    /// [`ErrorKind::NotFound`](crate::ErrorKind::NotFound) (`LoadBalancerNotFound`) except where a method returns
    /// an `Option`.
    #[cfg_attr(feature = "mock", mockall::automock)]
    pub trait Elb {
        /// The load balancer named `name`, or `None`.
        fn load_balancer(&self, name: &str) -> impl Future<Output = Result<Option<ClassicLoadBalancer>>> + Send;

        /// Creates a load balancer; returns its DNS name.
        #[doc(alias = "CreateLoadBalancer")]
        fn create_load_balancer(
            &self,
            lb: &NewClassicLoadBalancer,
        ) -> impl Future<Output = Result<String>> + Send;

        /// Deletes a load balancer; deleting one that does not exist succeeds (AWS makes this idempotent).
        #[doc(alias = "DeleteLoadBalancer")]
        fn delete_load_balancer(&self, name: &str) -> impl Future<Output = Result<()>> + Send;

        /// Adds listeners.
        #[doc(alias = "CreateLoadBalancerListeners")]
        fn create_listeners(
            &self,
            name: &str,
            listeners: &[ClassicListener],
        ) -> impl Future<Output = Result<()>> + Send;

        /// Removes the listeners on the given front-end ports.
        #[doc(alias = "DeleteLoadBalancerListeners")]
        fn delete_listeners(&self, name: &str, ports: &[i32]) -> impl Future<Output = Result<()>> + Send;

        /// Sets the health check.
        #[doc(alias = "ConfigureHealthCheck")]
        fn configure_health_check(
            &self,
            name: &str,
            health_check: &ClassicHealthCheck,
        ) -> impl Future<Output = Result<()>> + Send;

        /// Registers instances.
        #[doc(alias = "RegisterInstancesWithLoadBalancer")]
        fn register_instances(
            &self,
            name: &str,
            instances: &[InstanceId],
        ) -> impl Future<Output = Result<()>> + Send;

        /// Deregisters instances.
        #[doc(alias = "DeregisterInstancesFromLoadBalancer")]
        fn deregister_instances(
            &self,
            name: &str,
            instances: &[InstanceId],
        ) -> impl Future<Output = Result<()>> + Send;

        /// The managed attributes.
        fn attributes(&self, name: &str) -> impl Future<Output = Result<ClassicAttributes>> + Send;

        /// Sets the managed attributes (all of them).
        #[doc(alias = "ModifyLoadBalancerAttributes")]
        fn modify_attributes(
            &self,
            name: &str,
            attributes: &ClassicAttributes,
        ) -> impl Future<Output = Result<()>> + Send;

        /// Replaces the load balancer's security groups.
        #[doc(alias = "ApplySecurityGroupsToLoadBalancer")]
        fn apply_security_groups(
            &self,
            name: &str,
            groups: &[SecurityGroupId],
        ) -> impl Future<Output = Result<()>> + Send;

        /// Attaches subnets.
        #[doc(alias = "AttachLoadBalancerToSubnets")]
        fn attach_subnets(&self, name: &str, subnets: &[SubnetId]) -> impl Future<Output = Result<()>> + Send;

        /// Detaches subnets.
        #[doc(alias = "DetachLoadBalancerFromSubnets")]
        fn detach_subnets(&self, name: &str, subnets: &[SubnetId]) -> impl Future<Output = Result<()>> + Send;

        /// The load balancer's tags.
        fn tags(&self, name: &str) -> impl Future<Output = Result<Tags>> + Send;

        /// Every Classic load balancer of the region, all pages (how the leak report finds what no Service names any
        /// more).
        fn all_load_balancers(&self) -> impl Future<Output = Result<Vec<ClassicLoadBalancer>>> + Send;

        /// The tags of each load balancer of `names`, by name (the adapter asks AWS for 20 names at a time, its
        /// limit); load balancers deleted meanwhile are absent, never an error.
        fn tags_of(&self, names: &[String]) -> impl Future<Output = Result<BTreeMap<String, Tags>>> + Send;

        /// Adds or overwrites tags.
        #[doc(alias = "AddTags")]
        fn add_tags(&self, name: &str, tags: &Tags) -> impl Future<Output = Result<()>> + Send;

        /// Removes the tags with these keys (absent keys are not an error).
        #[doc(alias = "RemoveTags")]
        fn remove_tags(&self, name: &str, keys: &[String]) -> impl Future<Output = Result<()>> + Send;

        /// The named policies of the load balancer; an unknown policy is `NotFound` (`PolicyNotFound`).
        fn policies(
            &self,
            name: &str,
            policy_names: &[String],
        ) -> impl Future<Output = Result<Vec<ClassicPolicy>>> + Send;

        /// Creates a policy on the load balancer. An existing name is `AlreadyExists` (`DuplicatePolicyName`).
        #[doc(alias = "CreateLoadBalancerPolicy")]
        fn create_policy(&self, name: &str, policy: &ClassicPolicy) -> impl Future<Output = Result<()>> + Send;

        /// Replaces the policies of the listener on `port`.
        #[doc(alias = "SetLoadBalancerPoliciesOfListener")]
        fn set_listener_policies(
            &self,
            name: &str,
            port: i32,
            policy_names: &[String],
        ) -> impl Future<Output = Result<()>> + Send;

        /// Replaces the policies of back-end `instance_port`.
        #[doc(alias = "SetLoadBalancerPoliciesForBackendServer")]
        fn set_backend_policies(
            &self,
            name: &str,
            instance_port: i32,
            policy_names: &[String],
        ) -> impl Future<Output = Result<()>> + Send;
    }
}

// === impl ClassicLoadBalancer ===

impl ClassicLoadBalancer {
    /// A load balancer with a name and DNS name, nothing else (for fakes and tests).
    pub fn new(name: &str, dns_name: &str) -> Self {
        Self {
            name: name.to_owned(),
            dns_name: dns_name.to_owned(),
            internal: false,
            vpc_id: None,
            subnets: Vec::new(),
            availability_zones: Vec::new(),
            security_groups: Vec::new(),
            listeners: Vec::new(),
            health_check: None,
            instances: Vec::new(),
            backend_policies: Vec::new(),
            created_time: None,
        }
    }
}

// === impl ClassicListener ===

impl ClassicListener {
    /// A listener without certificate.
    pub fn new(protocol: &str, port: i32, instance_protocol: &str, instance_port: i32) -> Self {
        Self {
            protocol: protocol.to_owned(),
            load_balancer_port: port,
            instance_protocol: instance_protocol.to_owned(),
            instance_port,
            ssl_certificate_id: None,
            policy_names: Vec::new(),
        }
    }
}
