//! Conversions between the Classic ELB port's types and aws-sdk-elasticloadbalancing's.

use super::*;

// === conversions ===

pub(super) fn sdk_listener(l: &ClassicListener, op: Op) -> Result<sdk::Listener> {
    sdk::Listener::builder()
        .protocol(&l.protocol)
        .load_balancer_port(l.load_balancer_port)
        .instance_protocol(&l.instance_protocol)
        .instance_port(l.instance_port)
        .set_ssl_certificate_id(l.ssl_certificate_id.clone())
        .build()
        .map_err(|e| invalid(Service::Elb, op.name, e.to_string()))
}

pub(super) fn sdk_tags(tags: &Tags, op: Op) -> Result<Vec<sdk::Tag>> {
    tags.iter()
        .map(|(k, v)| {
            sdk::Tag::builder()
                .key(k)
                .value(v)
                .build()
                .map_err(|e| invalid(Service::Elb, op.name, e.to_string()))
        })
        .collect()
}

pub(super) fn sdk_instances(instances: &[InstanceId]) -> Vec<sdk::Instance> {
    instances
        .iter()
        .map(|i| sdk::Instance::builder().instance_id(i.as_str()).build())
        .collect()
}

pub(super) fn load_balancer(d: &sdk::LoadBalancerDescription) -> Option<ClassicLoadBalancer> {
    let mut lb = ClassicLoadBalancer::new(d.load_balancer_name()?, d.dns_name().unwrap_or_default());
    lb.internal = d.scheme() == Some("internal");
    lb.vpc_id = d.vpc_id().filter(|v| !v.is_empty()).map(VpcId::new);
    lb.subnets = d.subnets().iter().map(|s| SubnetId::new(s.as_str())).collect();
    lb.availability_zones = d.availability_zones().to_vec();
    lb.security_groups = d
        .security_groups()
        .iter()
        .map(|s| SecurityGroupId::new(s.as_str()))
        .collect();
    lb.listeners = d
        .listener_descriptions()
        .iter()
        .filter_map(|ld| {
            let l = ld.listener()?;
            let mut out = ClassicListener::new(
                l.protocol(),
                l.load_balancer_port(),
                l.instance_protocol().unwrap_or_else(|| l.protocol()),
                l.instance_port(),
            );
            out.ssl_certificate_id = l
                .ssl_certificate_id()
                .filter(|s| !s.is_empty())
                .map(str::to_owned);
            out.policy_names = ld.policy_names().to_vec();
            Some(out)
        })
        .collect();
    lb.health_check = d.health_check().map(|h| ClassicHealthCheck {
        target: h.target().to_owned(),
        interval: h.interval(),
        timeout: h.timeout(),
        healthy_threshold: h.healthy_threshold(),
        unhealthy_threshold: h.unhealthy_threshold(),
    });
    lb.instances = d
        .instances()
        .iter()
        .filter_map(|i| i.instance_id())
        .map(InstanceId::new)
        .collect();
    lb.backend_policies = d
        .backend_server_descriptions()
        .iter()
        .filter_map(|b| {
            Some(BackendPolicies {
                instance_port: b.instance_port()?,
                policy_names: b.policy_names().to_vec(),
            })
        })
        .collect();
    lb.created_time = d.created_time().and_then(|t| SystemTime::try_from(*t).ok());
    Some(lb)
}
