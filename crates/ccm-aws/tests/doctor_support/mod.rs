//! What the `doctor` integration tests share: a VPC in moto with the adapter's ports, the apiserver client, and
//! planting helpers.
#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

use std::{
    hash::{DefaultHasher, Hash, Hasher},
    time::SystemTime,
};

use ccm_aws::doctor::{Ports, Snapshot};
use ccm_aws_api::{
    Ec2, Elb, Elbv2, Filter, SecurityGroupId, SubnetId, Tags, VpcId,
    ec2::NewSecurityGroup,
    elb::{ClassicListener, NewClassicLoadBalancer},
    elbv2::{NewTargetGroup, TargetGroupHealthCheck},
};
use ccm_aws_sdk::{Adapter, AwsEc2, AwsElb, AwsElbv2};
use k8s_openapi::api::core::v1::{Event, Node, Service};
use kube::{Api, api::ListParams};

/// A generated-looking load balancer name (`a` + 31 hex digits) that no Service's UID gives.
pub fn fake_lb_name(seed: &str) -> String {
    let mut out = String::from("a");
    for salt in 0..2u8 {
        let mut h = DefaultHasher::new();
        (seed, salt).hash(&mut h);
        out.push_str(&format!("{:016x}", h.finish()));
    }
    out.truncate(32);
    out
}

/// Ages are measured against moto's creation times, which are real time.
#[allow(clippy::disallowed_methods)]
pub fn now() -> SystemTime {
    SystemTime::now()
}

pub fn tags(pairs: &[(&str, &str)]) -> Tags {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

pub struct World {
    pub adapter: Adapter,
    pub vpc: VpcId,
    pub subnet: SubnetId,
    pub client: kube::Client,
}

impl World {
    pub fn ports(&self) -> Ports<'_, AwsEc2, AwsElb, AwsElbv2> {
        Ports {
            ec2: self.adapter.ec2(),
            elb: self.adapter.elb(),
            elbv2: self.adapter.elbv2(),
        }
    }

    pub async fn group(&self, name: &str, tags: Tags) -> SecurityGroupId {
        let group = NewSecurityGroup {
            name: name.to_owned(),
            description: "doctor test".into(),
            vpc_id: self.vpc.clone(),
            tags,
        };
        self.adapter.ec2().create_security_group(&group).await.unwrap()
    }

    pub async fn classic(&self, name: &str, group: &SecurityGroupId, tags: Tags) {
        let lb = NewClassicLoadBalancer {
            name: name.to_owned(),
            internal: false,
            subnets: vec![self.subnet.clone()],
            security_groups: vec![group.clone()],
            listeners: vec![ClassicListener::new("TCP", 80, "TCP", 30080)],
            tags,
        };
        self.adapter.elb().create_load_balancer(&lb).await.unwrap();
    }

    pub async fn target_group(&self, name: &str, tags: Tags) -> String {
        let group = NewTargetGroup {
            name: name.to_owned(),
            protocol: "TCP".into(),
            port: 30080,
            vpc_id: self.vpc.clone(),
            target_type: ccm_aws_api::elbv2::TargetType::Instance,
            ip_address_type: ccm_aws_api::elbv2::TargetIpFamily::Ipv4,
            health_check: TargetGroupHealthCheck::default(),
            tags,
        };
        self.adapter
            .elbv2()
            .create_target_group(&group)
            .await
            .unwrap()
            .arn
    }

    /// The apiserver without its Nodes: what the leak tests judge. The shared apiserver holds other tests'
    /// Nodes, whose instances carry other clusters' tags: `--delete` would take it for another cluster's.
    pub async fn snapshot_without_nodes(&self) -> Snapshot {
        Snapshot {
            nodes: Vec::new(),
            ..self.snapshot().await
        }
    }

    pub async fn snapshot(&self) -> Snapshot {
        let lp = ListParams::default();
        Snapshot {
            services: Api::<Service>::all(self.client.clone())
                .list(&lp)
                .await
                .unwrap()
                .items,
            nodes: Api::<Node>::all(self.client.clone())
                .list(&lp)
                .await
                .unwrap()
                .items,
            events: Api::<Event>::all(self.client.clone())
                .list(&lp)
                .await
                .unwrap()
                .items,
        }
    }

    pub async fn group_exists(&self, id: &SecurityGroupId) -> bool {
        let filter = Filter::new("group-id", [id.as_str()]);
        !self
            .adapter
            .ec2()
            .security_groups(&[filter])
            .await
            .unwrap()
            .is_empty()
    }

    pub async fn target_group_exists(&self, name: &str) -> bool {
        self.adapter.elbv2().target_group(name).await.unwrap().is_some()
    }
}
