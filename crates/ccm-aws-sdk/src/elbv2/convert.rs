//! Conversions between aws-sdk-elasticloadbalancingv2's types and the port's.

use super::*;

pub(super) fn non_empty_tags(tags: &Tags) -> Option<Vec<sdk::Tag>> {
    (!tags.is_empty()).then(|| {
        tags.iter()
            .map(|(k, v)| sdk::Tag::builder().key(k).value(v).build())
            .collect()
    })
}

pub(super) fn forward(target_group_arn: &str) -> sdk::Action {
    sdk::Action::builder()
        .r#type(sdk::ActionTypeEnum::Forward)
        .target_group_arn(target_group_arn)
        .build()
}

pub(super) fn sdk_targets(targets: &[Target]) -> Vec<sdk::TargetDescription> {
    targets
        .iter()
        .map(|t| {
            sdk::TargetDescription::builder()
                .id(t.id.to_string())
                .port(t.port)
                .build()
        })
        .collect()
}

pub(super) fn load_balancer(l: &sdk::LoadBalancer) -> Option<LoadBalancerV2> {
    let mut out = LoadBalancerV2::new(
        l.load_balancer_arn()?,
        l.load_balancer_name().unwrap_or_default(),
        l.dns_name().unwrap_or_default(),
    );
    out.lb_type = l.r#type().map(|t| t.as_str().to_owned()).unwrap_or_default();
    out.internal = l.scheme() == Some(&sdk::LoadBalancerSchemeEnum::Internal);
    out.state = l
        .state()
        .and_then(|s| s.code())
        .map(|c| c.as_str().to_owned())
        .unwrap_or_default();
    out.vpc_id = l.vpc_id().filter(|v| !v.is_empty()).map(VpcId::new);
    out.availability_zones = l
        .availability_zones()
        .iter()
        .map(|z| LoadBalancerZone {
            zone_name: z.zone_name().unwrap_or_default().to_owned(),
            subnet_id: z.subnet_id().map(SubnetId::new),
            addresses: z
                .load_balancer_addresses()
                .iter()
                .map(|a| SubnetMapping {
                    subnet_id: z.subnet_id().map(SubnetId::new),
                    allocation_id: a.allocation_id().map(str::to_owned),
                    private_ipv4_address: a.private_ipv4_address().map(str::to_owned),
                })
                .collect(),
        })
        .collect();
    out.security_groups = l
        .security_groups()
        .iter()
        .map(|g| SecurityGroupId::new(g.as_str()))
        .collect();
    out.ip_address_type = l
        .ip_address_type()
        .map(|t| t.as_str().to_owned())
        .unwrap_or_default();
    out.created_time = l
        .created_time()
        .and_then(|t| std::time::SystemTime::try_from(*t).ok());
    Some(out)
}

pub(super) fn listener(l: &sdk::Listener) -> Option<ListenerV2> {
    let mut out = ListenerV2::new(
        l.listener_arn()?,
        l.load_balancer_arn().unwrap_or_default(),
        l.port().unwrap_or_default(),
        l.protocol().map_or("", |p| p.as_str()),
        "",
    );
    // The default certificate first.
    let mut certificates: Vec<(bool, String)> = l
        .certificates()
        .iter()
        .filter_map(|c| Some((c.is_default().unwrap_or(false), c.certificate_arn()?.to_owned())))
        .collect();
    certificates.sort_by_key(|(default, _)| !default);
    out.certificates = certificates.into_iter().map(|(_, arn)| arn).collect();
    out.ssl_policy = l.ssl_policy().filter(|s| !s.is_empty()).map(str::to_owned);
    out.alpn_policy = l.alpn_policy().first().filter(|s| !s.is_empty()).cloned();
    out.default_target_groups = l
        .default_actions()
        .iter()
        .flat_map(|a| {
            let direct = a.target_group_arn().map(str::to_owned);
            let forwarded = a
                .forward_config()
                .map(|f| {
                    f.target_groups()
                        .iter()
                        .filter_map(|t| t.target_group_arn())
                        .map(str::to_owned)
                        .collect()
                })
                .unwrap_or_else(Vec::new);
            direct.into_iter().chain(forwarded)
        })
        .fold(Vec::new(), |mut acc, arn| {
            if !acc.contains(&arn) {
                acc.push(arn);
            }
            acc
        });
    Some(out)
}

pub(super) fn target_group(t: &sdk::TargetGroup) -> Option<TargetGroup> {
    let mut out = TargetGroup::new(
        t.target_group_arn()?,
        t.target_group_name().unwrap_or_default(),
        t.protocol().map_or("", |p| p.as_str()),
        t.port().unwrap_or_default(),
    );
    out.vpc_id = t.vpc_id().filter(|v| !v.is_empty()).map(VpcId::new);
    out.target_type = t.target_type().map(|k| k.as_str().to_owned()).unwrap_or_default();
    if t.ip_address_type().is_some_and(|a| a.as_str() == "ipv6") {
        out.ip_address_type = TargetIpFamily::Ipv6;
    }
    out.health_check = TargetGroupHealthCheck {
        protocol: t.health_check_protocol().map(|p| p.as_str().to_owned()),
        port: t.health_check_port().map(str::to_owned),
        path: t.health_check_path().map(str::to_owned),
        interval_seconds: t.health_check_interval_seconds(),
        timeout_seconds: t.health_check_timeout_seconds(),
        healthy_threshold: t.healthy_threshold_count(),
        unhealthy_threshold: t.unhealthy_threshold_count(),
        matcher: t.matcher().and_then(|m| m.http_code()).map(str::to_owned),
    };
    out.load_balancer_arns = t.load_balancer_arns().to_vec();
    Some(out)
}
