//! Drift detection in bulk: which Services' load balancers no longer look as the last ensure left them, from one
//! paged listing of the region's Classic ELBs (400 a page, with their listeners, instances, groups and health
//! check) and, for NLBs, one listing of the region's load balancers and one of its target groups (health checks
//! and attachments). What bulk reads cannot show is not compared: NLB listeners, NLB targets, attributes,
//! policies, tags and the nodes' rules, nor the load balancers of Services whose name change waits for consent;
//! the next full ensure of a Service (any change to it or a node
//! membership change) still repairs those.
//!
//! Cost per pass at 500 load balancers of one flavour: 2 `DescribeLoadBalancers` (Classic), or 2
//! `DescribeLoadBalancers` and 2 or 3 `DescribeTargetGroups` (NLB), whatever the number of Services.

use std::collections::{BTreeSet, HashMap};

use ccm_aws_api::{
    Elb, Elbv2,
    elb::ClassicLoadBalancer,
    elbv2::{LoadBalancerV2, TargetGroup},
};
use ccm_cloud_provider::{Drift, NodeView};
use k8s_openapi::api::core::v1::Service;

use crate::{
    Error, LoadBalancerConfig,
    classic::{self, GroupRef},
    nlb, shared,
    spec::{Flavour, ServiceSpec, parse_service_with},
};

/// The drifted load balancers among `services` (see the module doc). Invalid Services and those of other
/// controllers are skipped: their own syncs report them.
pub async fn drifted<L: Elb, V: Elbv2>(
    elb: &L,
    elbv2: &V,
    config: &LoadBalancerConfig,
    cluster_name: &str,
    services: &[&Service],
    nodes: &[&NodeView],
) -> Result<Vec<Drift>, Error> {
    let (mut classics, mut networks) = (Vec::new(), Vec::new());
    for (service, spec) in services.iter().filter_map(|s| {
        parse_service_with(s, &config.attribute_keys)
            .ok()
            .map(|spec| (s, spec))
    }) {
        // A name change waiting for consent: its load balancer keeps the old name, and its next full ensure
        // (not a bulk read) knows which one serves.
        if shared::service_load_balancer_name(&spec)
            .is_ok_and(|wanted| !shared::renamed_from(service, &wanted).is_empty())
        {
            continue;
        }
        match spec.flavour {
            Flavour::Classic => classics.push(spec),
            Flavour::Network => networks.push(spec),
            Flavour::External => {}
        }
    }
    let mut drifts = Vec::new();
    if !classics.is_empty() {
        let context = "listing the Classic ELBs for drift detection";
        let all: HashMap<String, ClassicLoadBalancer> = elb
            .all_load_balancers()
            .await
            .map_err(Error::aws(context))?
            .into_iter()
            .map(|lb| (lb.name.clone(), lb))
            .collect();
        for spec in &classics {
            let desired = classic::build(spec, nodes, config, &[])?;
            let what = match all.get(&desired.name) {
                Some(lb) => classic_differences(&desired, lb),
                None => vec![format!("Classic ELB {} is gone", desired.name)],
            };
            push(&mut drifts, spec, what);
        }
    }
    if !networks.is_empty() {
        let context = "listing the NLBs for drift detection";
        let (lbs, groups) = tokio::join!(elbv2.all_load_balancers(), elbv2.all_target_groups());
        let lbs: HashMap<String, LoadBalancerV2> = lbs
            .map_err(Error::aws(context))?
            .into_iter()
            .filter(|lb| lb.lb_type == "network")
            .map(|lb| (lb.name.clone(), lb))
            .collect();
        let groups = groups.map_err(Error::aws(context))?;
        for spec in &networks {
            let desired = nlb::build(spec, nodes, config, cluster_name, &[])?;
            let what = match lbs.get(&desired.name) {
                Some(lb) => nlb_differences(&desired, lb, &groups),
                None => vec![format!("NLB {} is gone", desired.name)],
            };
            push(&mut drifts, spec, what);
        }
    }
    Ok(drifts)
}

fn push(drifts: &mut Vec<Drift>, spec: &ServiceSpec, what: Vec<String>) {
    if !what.is_empty() {
        drifts.push(Drift::new(spec.key(), what));
    }
}

/// What differs between a Classic ELB as listed and as desired, in the fields a listing shows.
pub fn classic_differences(desired: &classic::Desired, lb: &ClassicLoadBalancer) -> Vec<String> {
    let mut what = Vec::new();
    // A scheme only a recreation can change is drift only where the Service consents to one (without, the
    // ensure keeps the scheme and a re-ensure would only repeat its Warning).
    if lb.internal != desired.internal && desired.allow_recreation {
        what.push(format!("scheme {}", shared::scheme(lb.internal)));
    }
    for l in &desired.listeners {
        match lb.listeners.iter().find(|o| o.load_balancer_port == l.port) {
            None => what.push(format!("listener {} missing", l.port)),
            Some(o) if !l.matches(o) => what.push(format!("listener {} changed", l.port)),
            Some(_) => {}
        }
    }
    let wanted: BTreeSet<i32> = desired.listeners.iter().map(|l| l.port).collect();
    for o in lb
        .listeners
        .iter()
        .filter(|o| !wanted.contains(&o.load_balancer_port))
    {
        what.push(format!("listener {} added", o.load_balancer_port));
    }
    if !lb
        .health_check
        .as_ref()
        .is_some_and(|h| desired.health_check.matches(h))
    {
        what.push("health check changed".to_owned());
    }
    for g in &desired.security_groups {
        if let GroupRef::Id(id) = g
            && !lb.security_groups.iter().any(|o| o.as_str() == id)
        {
            what.push(format!("security group {id} detached"));
        }
    }
    if lb.security_groups.len() != desired.security_groups.len() {
        what.push("security groups changed".to_owned());
    }
    let registered: BTreeSet<&str> = lb.instances.iter().map(|i| i.as_str()).collect();
    let wanted: BTreeSet<&str> = desired.instances.iter().map(String::as_str).collect();
    let missing: Vec<&str> = wanted.difference(&registered).copied().collect();
    let extra: Vec<&str> = registered.difference(&wanted).copied().collect();
    if !missing.is_empty() {
        what.push(format!("instances {} not registered", missing.join(", ")));
    }
    if !extra.is_empty() {
        what.push(format!(
            "instances {} registered by someone else",
            extra.join(", ")
        ));
    }
    what
}

/// What differs between an NLB and its attached target groups as listed and as desired, in the fields the
/// listings show.
pub fn nlb_differences(desired: &nlb::Desired, lb: &LoadBalancerV2, groups: &[TargetGroup]) -> Vec<String> {
    let mut what = Vec::new();
    // A scheme only a recreation can change is drift only where the Service consents to one (without, the
    // ensure keeps the scheme and a re-ensure would only repeat its Warning).
    if lb.internal != desired.internal && desired.allow_recreation {
        what.push(format!("scheme {}", shared::scheme(lb.internal)));
    }
    if lb.state == "failed" {
        what.push("state failed".to_owned());
    }
    for tg in desired.target_groups() {
        // Under its upstream name or, when another load balancer holds that one, its successor name.
        let successor = nlb::successor_target_group_name(&tg.name, &desired.name);
        let named = |g: &&TargetGroup| g.name == tg.name || g.name == successor;
        let found = groups
            .iter()
            .filter(named)
            .find(|g| g.load_balancer_arns.contains(&lb.arn))
            .or_else(|| groups.iter().find(|g| g.name == tg.name));
        match found {
            None => what.push(format!("target group {} is gone", tg.name)),
            Some(g) if !g.load_balancer_arns.contains(&lb.arn) => {
                what.push(format!("target group {} detached", tg.name));
            }
            Some(g) if !desired.health_check.matches(&g.health_check) => {
                what.push(format!("health check of target group {} changed", tg.name));
            }
            Some(_) => {}
        }
    }
    what
}

#[cfg(test)]
mod tests;
