//! The adapter's options from the cloud config: endpoint overrides per client, the IMDS endpoint and the role to
//! assume. The file itself is parsed by `ccm-cloud-config`, which knows nothing of the SDK.

use ccm_cloud_config::{CloudConfig, OverrideService};

/// The adapter's endpoint overrides for clients in `region` (IMDS and KMS overrides are not among them).
pub(crate) fn endpoint_overrides(config: &CloudConfig, region: &str) -> Vec<ccm_aws_sdk::EndpointOverride> {
    let services = [
        (OverrideService::Ec2, ccm_aws_sdk::Service::Ec2),
        (OverrideService::Elb, ccm_aws_sdk::Service::Elb),
        (OverrideService::Elbv2, ccm_aws_sdk::Service::Elbv2),
        (OverrideService::Sts, ccm_aws_sdk::Service::Sts),
    ];
    services
        .into_iter()
        .filter_map(|(kind, service)| {
            let o = config.service_override(kind, region)?;
            Some(
                ccm_aws_sdk::EndpointOverride::new(service, region, o.url.trim())
                    .with_signing_region(o.signing_region.trim())
                    .with_signing_name(Some(o.signing_name.trim().to_owned()).filter(|n| !n.is_empty())),
            )
        })
        .collect()
}

/// How to reach the instance metadata service: the `ec2imds` override's URL, else the default endpoint.
pub(crate) fn imds_options(config: &CloudConfig) -> ccm_aws_sdk::ImdsOptions {
    let mut options = ccm_aws_sdk::ImdsOptions::default();
    if let Some(o) = config.service_override(OverrideService::Imds, "") {
        options.endpoint = o.url.trim().to_owned();
    }
    options
}

/// The role to assume (`RoleARN`, with `SourceARN`), if any.
pub(crate) fn assume_role(config: &CloudConfig) -> Option<ccm_aws_sdk::AssumeRole> {
    let mut role = ccm_aws_sdk::AssumeRole::new(config.global.role_arn.clone()?);
    role.source_arn = config.global.source_arn.clone();
    Some(role)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_imds_endpoint_is_the_override_else_ec2s() {
        let config = CloudConfig::parse(
            "[ServiceOverride \"imds\"]\nService = ec2imds\nRegion = any\nURL = http://127.0.0.1:1338\n\
             SigningRegion = any\n",
        )
        .unwrap();
        assert_eq!(imds_options(&config).endpoint, "http://127.0.0.1:1338");
        assert_eq!(
            imds_options(&CloudConfig::default()).endpoint,
            "http://169.254.169.254"
        );
    }

    #[test]
    fn adapter_options_from_the_config() {
        let config = CloudConfig::parse(
            "[Global]\nRoleARN = arn:aws:iam::123456789012:role/r\nSourceARN = arn:aws:eks:us-east-1:123456789012:cluster/c\n\
             [ServiceOverride \"1\"]\nService = Elastic Load Balancing v2\nRegion = us-east-1\nURL = https://elbv2.example\n\
             SigningRegion = us-east-2\n",
        )
        .unwrap();
        let overrides = endpoint_overrides(&config, "us-east-1");
        assert_eq!(overrides.len(), 1);
        assert_eq!(overrides[0].service, ccm_aws_sdk::Service::Elbv2);
        assert_eq!(
            (overrides[0].url.as_str(), overrides[0].signing_region.as_str()),
            ("https://elbv2.example", "us-east-2")
        );
        assert!(endpoint_overrides(&config, "eu-west-1").is_empty());
        let role = assume_role(&config).unwrap();
        assert_eq!(role.account(), Some("123456789012"));
        assert_eq!(
            role.source_arn.as_deref(),
            Some("arn:aws:eks:us-east-1:123456789012:cluster/c")
        );
        assert_eq!(assume_role(&CloudConfig::default()), None);
    }

    #[test]
    fn a_legacy_elasticloadbalancing_override_also_reaches_elbv2() {
        let legacy = CloudConfig::parse(
            "[ServiceOverride \"1\"]\nService = elasticloadbalancing\nRegion = us-east-1\nURL = https://elb.example\n\
             SigningRegion = us-east-1\n",
        )
        .unwrap();
        let services: Vec<_> = endpoint_overrides(&legacy, "us-east-1")
            .into_iter()
            .map(|o| (o.service, o.url))
            .collect();
        assert_eq!(
            services,
            [
                (ccm_aws_sdk::Service::Elb, "https://elb.example".to_owned()),
                (ccm_aws_sdk::Service::Elbv2, "https://elb.example".to_owned()),
            ],
            "SDK v1 resolved both load balancer clients through the elasticloadbalancing endpoint ID"
        );
        // The SDK v2 name is the Classic ELB only; an explicit ELBv2 override wins over the legacy one.
        let v2 = CloudConfig::parse(
            "[ServiceOverride \"1\"]\nService = Elastic Load Balancing\nRegion = us-east-1\nURL = https://elb.example\n\
             SigningRegion = us-east-1\n\
             [ServiceOverride \"2\"]\nService = elasticloadbalancing\nRegion = eu-west-1\nURL = https://legacy.example\n\
             SigningRegion = eu-west-1\n\
             [ServiceOverride \"3\"]\nService = Elastic Load Balancing v2\nRegion = eu-west-1\nURL = https://v2.example\n\
             SigningRegion = eu-west-1\n",
        )
        .unwrap();
        let us: Vec<_> = endpoint_overrides(&v2, "us-east-1")
            .into_iter()
            .map(|o| o.service)
            .collect();
        assert_eq!(us, [ccm_aws_sdk::Service::Elb]);
        let eu: Vec<_> = endpoint_overrides(&v2, "eu-west-1")
            .into_iter()
            .map(|o| (o.service, o.url))
            .collect();
        assert_eq!(
            eu,
            [
                (ccm_aws_sdk::Service::Elb, "https://legacy.example".to_owned()),
                (ccm_aws_sdk::Service::Elbv2, "https://v2.example".to_owned()),
            ]
        );
    }
}
