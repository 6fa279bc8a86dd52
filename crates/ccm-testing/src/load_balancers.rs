//! Load balancers in moto as an operator reads them with the AWS CLI: a Classic ELB with its registered
//! instances, an NLB with the targets of its target groups. Read-only, for tests and the sandbox.

use aws_sdk_elasticloadbalancing as elb;
use aws_sdk_elasticloadbalancingv2 as elbv2;

/// The upstream load-balancer name of a Service: `a` and its UID without dashes, 32 characters.
pub fn name_for_uid(uid: &str) -> String {
    format!("a{}", uid.replace('-', "")).chars().take(32).collect()
}

/// What a load balancer looks like from outside.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    /// The DNS name (what the Service's status hostname must be).
    pub dns_name: String,
    /// The listener ports, sorted.
    pub ports: Vec<i32>,
    /// Registered instances (Classic) or target IDs of every target group (NLB), sorted.
    pub members: Vec<String>,
}

/// Readers of moto's ELB and ELBv2.
#[derive(Debug, Clone)]
pub struct LoadBalancers {
    classic: elb::Client,
    v2: elbv2::Client,
}

impl LoadBalancers {
    /// Clients for the test environment's moto.
    pub async fn connect(env: &crate::TestEnv) -> Self {
        let config = env.aws_config().await;
        Self {
            classic: elb::Client::new(&config),
            v2: elbv2::Client::new(&config),
        }
    }

    /// The Classic ELB `name`, if it exists.
    pub async fn classic(&self, name: &str) -> Option<Seen> {
        let out = self
            .classic
            .describe_load_balancers()
            .load_balancer_names(name)
            .send()
            .await;
        let lb = out.ok()?.load_balancer_descriptions().first()?.clone();
        let mut ports: Vec<i32> = lb
            .listener_descriptions()
            .iter()
            .filter_map(|l| l.listener().map(|l| l.load_balancer_port()))
            .collect();
        ports.sort_unstable();
        let mut members: Vec<String> = lb
            .instances()
            .iter()
            .filter_map(|i| i.instance_id().map(str::to_owned))
            .collect();
        members.sort();
        Some(Seen {
            dns_name: lb.dns_name().unwrap_or_default().to_owned(),
            ports,
            members,
        })
    }

    /// The ELBv2 load balancer (NLB) `name`, if it exists.
    pub async fn network(&self, name: &str) -> Option<Seen> {
        let out = self.v2.describe_load_balancers().names(name).send().await;
        let lb = out.ok()?.load_balancers().first()?.clone();
        let arn = lb.load_balancer_arn().unwrap_or_default();
        let listeners = self
            .v2
            .describe_listeners()
            .load_balancer_arn(arn)
            .send()
            .await
            .ok()?;
        let mut ports: Vec<i32> = listeners.listeners().iter().filter_map(|l| l.port()).collect();
        ports.sort_unstable();
        let groups = self
            .v2
            .describe_target_groups()
            .load_balancer_arn(arn)
            .send()
            .await
            .ok()?;
        let mut members = Vec::new();
        for group in groups.target_groups() {
            let health = self
                .v2
                .describe_target_health()
                .target_group_arn(group.target_group_arn().unwrap_or_default())
                .send()
                .await
                .ok()?;
            let targets = health.target_health_descriptions().iter();
            members.extend(targets.filter_map(|t| t.target()?.id().map(str::to_owned)));
        }
        members.sort();
        members.dedup();
        Some(Seen {
            dns_name: lb.dns_name().unwrap_or_default().to_owned(),
            ports,
            members,
        })
    }

    /// The names of every load balancer (Classic and ELBv2) and target group in the VPC `vpc`, each with its
    /// kind (`clb`, `nlb`, `tg`), sorted: what a clean-up must leave empty. Reads every page.
    pub async fn in_vpc(&self, vpc: &str) -> Result<Vec<String>, String> {
        let mut out = Vec::new();
        let mut pages = self.classic.describe_load_balancers().into_paginator().send();
        while let Some(page) = pages.next().await {
            let page = page.map_err(|e| format!("DescribeLoadBalancers (ELB): {e:?}"))?;
            let lbs = page.load_balancer_descriptions().iter();
            let lbs = lbs.filter(|lb| lb.vpc_id() == Some(vpc));
            out.extend(lbs.filter_map(|lb| Some(format!("clb {}", lb.load_balancer_name()?))));
        }
        let mut pages = self.v2.describe_load_balancers().into_paginator().send();
        while let Some(page) = pages.next().await {
            let page = page.map_err(|e| format!("DescribeLoadBalancers (ELBv2): {e:?}"))?;
            let lbs = page.load_balancers().iter().filter(|lb| lb.vpc_id() == Some(vpc));
            out.extend(lbs.filter_map(|lb| Some(format!("nlb {}", lb.load_balancer_name()?))));
        }
        let mut pages = self.v2.describe_target_groups().into_paginator().send();
        while let Some(page) = pages.next().await {
            let page = page.map_err(|e| format!("DescribeTargetGroups: {e:?}"))?;
            let groups = page.target_groups().iter().filter(|tg| tg.vpc_id() == Some(vpc));
            out.extend(groups.filter_map(|tg| Some(format!("tg {}", tg.target_group_name()?))));
        }
        out.sort();
        Ok(out)
    }
}
