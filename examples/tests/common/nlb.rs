//! NLB helpers for the end-to-end tests: reading load balancers, listeners, target groups, targets and tags
//! from moto's ELBv2, an ACM certificate, and NLB Services.
#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

use std::collections::BTreeMap;

use aws_sdk_elasticloadbalancingv2::types::{Listener, LoadBalancer, TargetGroup};
use ccm_testing::TestEnv;
use ccm_testing::fixtures::ServiceBuilder;
use k8s_openapi::api::core::v1::Service;

/// The `service.beta.kubernetes.io/aws-load-balancer-` annotation `suffix`.
pub fn key(suffix: &str) -> String {
    format!("service.beta.kubernetes.io/aws-load-balancer-{suffix}")
}

/// A Service of type LoadBalancer with `type: nlb` and `annotations` (full keys), labelled `e2e-nlb=true`, in the
/// namespace of the API it is created by; ports as (port, protocol).
pub fn service(name: &str, ports: &[(i32, &str)], annotations: &BTreeMap<String, String>) -> Service {
    let mut svc = ServiceBuilder::new("", name).label("e2e-nlb", "true");
    for (k, value) in annotations {
        svc = svc.annotation(k, value);
    }
    svc = svc.annotation(&key("type"), "nlb");
    for (port, protocol) in ports {
        svc = svc.port(*port, protocol, None);
    }
    let mut svc = svc.build();
    svc.metadata.namespace = None;
    svc
}

/// moto's ELBv2, read the way an operator would with the AWS CLI.
pub struct Nlb(pub aws_sdk_elasticloadbalancingv2::Client);

impl Nlb {
    pub async fn connect() -> Self {
        Self(aws_sdk_elasticloadbalancingv2::Client::new(
            &TestEnv::get().aws_config().await,
        ))
    }

    pub async fn describe(&self, name: &str) -> Option<LoadBalancer> {
        let out = self.0.describe_load_balancers().names(name).send().await;
        out.ok()?.load_balancers().first().cloned()
    }

    pub async fn listeners(&self, lb_arn: &str) -> Vec<Listener> {
        let out = self
            .0
            .describe_listeners()
            .load_balancer_arn(lb_arn)
            .send()
            .await
            .unwrap();
        let mut listeners = out.listeners().to_vec();
        listeners.sort_by_key(|l| l.port());
        listeners
    }

    /// (port, protocol) of each listener, sorted.
    pub async fn listener_summary(&self, name: &str) -> Vec<(i32, String)> {
        let Some(lb) = self.describe(name).await else {
            return Vec::new();
        };
        self.listeners(lb.load_balancer_arn().unwrap())
            .await
            .iter()
            .map(|l| {
                (
                    l.port().unwrap_or_default(),
                    l.protocol().map(|p| p.as_str().to_owned()).unwrap_or_default(),
                )
            })
            .collect()
    }

    /// The load balancer's target groups; none while it has no listener yet (moto then answers
    /// `TargetGroupNotFound`, which a poll taken between the CCM's `CreateLoadBalancer` and `CreateListener` sees).
    pub async fn target_groups(&self, lb_arn: &str) -> Vec<TargetGroup> {
        let out = self
            .0
            .describe_target_groups()
            .load_balancer_arn(lb_arn)
            .send()
            .await;
        match out {
            Ok(out) => out.target_groups().to_vec(),
            Err(e)
                if e.as_service_error()
                    .is_some_and(|e| e.is_target_group_not_found_exception()) =>
            {
                Vec::new()
            }
            Err(e) => panic!("DescribeTargetGroups of {lb_arn}: {e:?}"),
        }
    }

    /// Every target group in the region.
    pub async fn all_target_groups(&self) -> Vec<TargetGroup> {
        self.0
            .describe_target_groups()
            .send()
            .await
            .unwrap()
            .target_groups()
            .to_vec()
    }

    /// Every load balancer in the region.
    pub async fn all_load_balancers(&self) -> Vec<LoadBalancer> {
        self.0
            .describe_load_balancers()
            .send()
            .await
            .unwrap()
            .load_balancers()
            .to_vec()
    }

    /// The registered instance IDs of a target group, sorted.
    pub async fn targets(&self, tg_arn: &str) -> Vec<String> {
        let out = self
            .0
            .describe_target_health()
            .target_group_arn(tg_arn)
            .send()
            .await
            .unwrap();
        let mut ids: Vec<String> = out
            .target_health_descriptions()
            .iter()
            .filter_map(|d| d.target()?.id().map(str::to_owned))
            .collect();
        ids.sort();
        ids
    }

    pub async fn target_group_attributes(&self, tg_arn: &str) -> BTreeMap<String, String> {
        let out = self
            .0
            .describe_target_group_attributes()
            .target_group_arn(tg_arn)
            .send()
            .await
            .unwrap();
        out.attributes()
            .iter()
            .filter_map(|a| Some((a.key()?.to_owned(), a.value()?.to_owned())))
            .collect()
    }

    /// The tags of each resource, by ARN.
    pub async fn tags(&self, arns: &[String]) -> BTreeMap<String, BTreeMap<String, String>> {
        let mut all = BTreeMap::new();
        for chunk in arns.chunks(20) {
            let out = self
                .0
                .describe_tags()
                .set_resource_arns(Some(chunk.to_vec()))
                .send()
                .await
                .unwrap();
            for d in out.tag_descriptions() {
                let tags = d
                    .tags()
                    .iter()
                    .filter_map(|t| Some((t.key()?.to_owned(), t.value().unwrap_or_default().to_owned())))
                    .collect();
                all.insert(d.resource_arn().unwrap_or_default().to_owned(), tags);
            }
        }
        all
    }

    /// ARNs of load balancers and target groups tagged `cluster_key` (any value).
    pub async fn cluster_resources(&self, cluster_key: &str) -> Vec<String> {
        let mut arns: Vec<String> = self
            .all_load_balancers()
            .await
            .iter()
            .filter_map(|l| l.load_balancer_arn().map(str::to_owned))
            .collect();
        arns.extend(
            self.all_target_groups()
                .await
                .iter()
                .filter_map(|t| t.target_group_arn().map(str::to_owned)),
        );
        self.tags(&arns)
            .await
            .into_iter()
            .filter(|(_, tags)| tags.contains_key(cluster_key))
            .map(|(arn, _)| arn)
            .collect()
    }
}

/// A certificate from moto's ACM.
pub use ccm_testing::lb_world::acm_certificate as certificate;
