//! AWS provider IDs: every form upstream accepts, and the one it produces.

use std::net::IpAddr;

use ccm_aws_api::InstanceId;
use ccm_cloud_provider::format_provider_id;

use crate::InstancesError;

/// The provider name, the scheme of every AWS provider ID.
pub const PROVIDER_NAME: &str = "aws";

/// The prefix of Fargate "instances" (`fargate-<ip>` or `fargate-ip-<a-b-c-d>.<domain>`).
pub const FARGATE_PREFIX: &str = "fargate-";

/// What a provider ID (or node name) points at.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum AwsInstanceRef {
    /// An EC2 instance.
    Ec2(InstanceId),
    /// A Fargate pod, known by its network interface's private IP.
    Fargate {
        /// The token after `fargate-` as written (kept to reproduce the provider ID).
        name: String,
        /// The pod's IP.
        ip: IpAddr,
    },
}

/// Parses a provider ID in any accepted form: `aws:///<zone>/<id>`, `aws:////<id>`, `aws://<zone>/<id>` or a bare
/// `<id>`, where `<id>` is `i-...` or a Fargate token (`fargate-<ip>`, `fargate-ip-<a-b-c-d>[.<domain>]`).
/// Upstream `MapToAWSInstanceID`, with Fargate IPs validated here rather than at the first API call.
pub fn parse_provider_id(value: &str) -> Result<AwsInstanceRef, InstancesError> {
    let invalid = |reason| InstancesError::InvalidProviderId {
        value: value.to_owned(),
        reason,
    };
    let path = match value.split_once("://") {
        None => value,
        Some((scheme, _)) if scheme != PROVIDER_NAME => return Err(invalid("the scheme is not aws")),
        // `aws://<host>/<path>`: the host (a zone, or nothing) is ignored, as upstream's URL parsing does.
        Some((_, rest)) => match rest.split_once('/') {
            Some((_, path)) => path,
            None => return Err(invalid("there is no instance after the zone")),
        },
    };
    let tokens: Vec<&str> = path.trim_matches('/').split('/').collect();
    let id = match tokens.as_slice() {
        [id] | [_, id] => *id,
        _ => return Err(invalid("too many path segments")),
    };
    if id.is_empty() {
        return Err(invalid("the instance is empty"));
    }
    parse_instance_token(id).map_err(invalid)
}

/// Resolves the instance token of a node name that is an instance ID (`i-0123[.<domain>]`) or a Fargate name;
/// `None` for other names (private DNS names are looked up by filter).
pub fn instance_ref_from_node_name(name: &str) -> Option<Result<AwsInstanceRef, InstancesError>> {
    if name.starts_with("i-") {
        // Resource names: the instance ID, with or without a domain.
        let id = name.split('.').next().unwrap_or(name);
        return Some(
            parse_instance_token(id).map_err(|reason| InstancesError::InvalidProviderId {
                value: name.to_owned(),
                reason,
            }),
        );
    }
    if name.starts_with(FARGATE_PREFIX) {
        return Some(
            parse_instance_token(name).map_err(|reason| InstancesError::InvalidProviderId {
                value: name.to_owned(),
                reason,
            }),
        );
    }
    None
}

/// The provider ID upstream produces: `aws:///<zone>/<instance-id>` (`aws:////<id>` when the zone is unknown).
pub fn format_aws_provider_id(zone: &str, instance: &str) -> String {
    format_provider_id(PROVIDER_NAME, &format!("/{zone}/{instance}"))
}

fn parse_instance_token(token: &str) -> Result<AwsInstanceRef, &'static str> {
    if let Some(rest) = token.strip_prefix(FARGATE_PREFIX) {
        return fargate_ip(rest)
            .map(|ip| AwsInstanceRef::Fargate {
                name: rest.to_owned(),
                ip,
            })
            .ok_or("the Fargate address is not an IP nor ip-<a-b-c-d>");
    }
    match token.strip_prefix("i-") {
        Some(rest) if !rest.is_empty() && !rest.contains(['/', ' ']) => {
            Ok(AwsInstanceRef::Ec2(InstanceId::new(token)))
        }
        _ => Err("the instance is neither i-<id> nor fargate-<ip>"),
    }
}

/// `10.0.0.1`, `2600:1f14::1` or `ip-10-0-0-1[.<domain>]`.
fn fargate_ip(rest: &str) -> Option<IpAddr> {
    if let Some(dns) = rest.strip_prefix("ip-") {
        let host = dns.split('.').next().unwrap_or(dns);
        return host
            .replace('-', ".")
            .parse::<std::net::Ipv4Addr>()
            .ok()
            .map(IpAddr::V4);
    }
    rest.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ec2(id: &str) -> AwsInstanceRef {
        AwsInstanceRef::Ec2(InstanceId::new(id))
    }

    #[test]
    fn accepted_forms() {
        let fargate = |name: &str, ip: &str| AwsInstanceRef::Fargate {
            name: name.into(),
            ip: ip.parse().unwrap(),
        };
        let cases = [
            // Upstream TestMapToAWSInstanceIDs.
            ("aws:///us-east-1a/i-12345678", ec2("i-12345678")),
            ("aws:////i-12345678", ec2("i-12345678")),
            ("i-12345678", ec2("i-12345678")),
            ("aws:///us-east-1a/i-12345678abcdef01", ec2("i-12345678abcdef01")),
            ("aws:////i-12345678abcdef01", ec2("i-12345678abcdef01")),
            ("i-12345678abcdef01", ec2("i-12345678abcdef01")),
            ("aws://us-east-1a/i-0abc", ec2("i-0abc")),
            ("aws:///i-0abc", ec2("i-0abc")),
            ("aws:///us-west-2a/i-kwok-node-1", ec2("i-kwok-node-1")),
            (
                "aws:///us-west-2c/fargate-192.168.164.88",
                fargate("192.168.164.88", "192.168.164.88"),
            ),
            (
                "aws:///us-west-2c/fargate-ip-192-168-164-88.us-west-2.compute.internal",
                fargate("ip-192-168-164-88.us-west-2.compute.internal", "192.168.164.88"),
            ),
            ("fargate-10.0.0.1", fargate("10.0.0.1", "10.0.0.1")),
            (
                "aws:///us-west-2c/fargate-2600:1f14::1",
                fargate("2600:1f14::1", "2600:1f14::1"),
            ),
        ];
        for (input, want) in cases {
            assert_eq!(parse_provider_id(input).unwrap(), want, "{input}");
        }
    }

    #[test]
    fn rejected_forms_name_the_value() {
        let cases = [
            ("", "empty"),
            ("vol-123456789", "neither"),
            ("aws:///us-east-1a/vol-12345678abcdef01", "neither"),
            ("aws://accountid/vol-12345678abcdef01", "neither"),
            ("aws:///us-east-1a/i-12345678abcdef01/suffix", "too many"),
            ("gce://project/zone/i-1", "scheme"),
            ("aws://us-east-1a", "no instance"),
            ("aws:///us-east-1a/", "neither"),
            ("i-", "neither"),
            ("aws:///us-west-2c/fargate-", "Fargate"),
            ("aws:///us-west-2c/fargate-ip-10-0-0", "Fargate"),
            ("fargate-nonsense", "Fargate"),
        ];
        for (input, reason) in cases {
            let err = parse_provider_id(input).unwrap_err();
            let text = err.to_string();
            assert!(
                text.contains(&format!("{input:?}")) && text.contains(reason) && text.contains("accepted"),
                "{input}: {text}"
            );
        }
    }

    #[test]
    fn node_names() {
        assert_eq!(
            instance_ref_from_node_name("i-0abc").unwrap().unwrap(),
            ec2("i-0abc")
        );
        assert_eq!(
            instance_ref_from_node_name("i-0abc.us-west-2.compute.internal")
                .unwrap()
                .unwrap(),
            ec2("i-0abc")
        );
        assert!(matches!(
            instance_ref_from_node_name("fargate-ip-10-1-2-3.ec2.internal"),
            Some(Ok(AwsInstanceRef::Fargate { .. }))
        ));
        assert!(instance_ref_from_node_name("ip-10-0-0-1.ec2.internal").is_none());
        assert!(instance_ref_from_node_name("node-1").is_none());
        assert!(matches!(
            instance_ref_from_node_name("i-"),
            Some(Err(InstancesError::InvalidProviderId { .. }))
        ));
    }

    #[test]
    fn produced_form_round_trips() {
        let id = format_aws_provider_id("us-east-1a", "i-0abc");
        assert_eq!(id, "aws:///us-east-1a/i-0abc");
        assert_eq!(parse_provider_id(&id).unwrap(), ec2("i-0abc"));
        let no_zone = format_aws_provider_id("", "i-0abc");
        assert_eq!(no_zone, "aws:////i-0abc");
        assert_eq!(parse_provider_id(&no_zone).unwrap(), ec2("i-0abc"));
    }
}
