//! The instance metadata port (IMDSv2): who and where the process runs.

use std::future::Future;

use crate::{AwsError, ErrorKind, InstanceId, Result};

/// The instance identity document (`/latest/dynamic/instance-identity/document`), reduced to what is used.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct InstanceIdentity {
    /// The instance.
    pub instance_id: InstanceId,
    /// The region.
    pub region: String,
    /// The availability zone.
    pub availability_zone: String,
    /// The account.
    pub account_id: String,
    /// The instance type.
    pub instance_type: String,
    /// The primary private IPv4 address.
    pub private_ip: Option<String>,
}

/// Instance metadata lookups. A path IMDS does not serve is [`ErrorKind::NotFound`];
/// an unreachable endpoint is `Transient` after the adapter's short timeouts (the process may not run on EC2).
#[cfg_attr(feature = "mock", mockall::automock)]
pub trait Metadata {
    /// `meta-data/instance-id`.
    fn instance_id(&self) -> impl Future<Output = Result<InstanceId>> + Send;

    /// The region (`meta-data/placement/region`).
    fn region(&self) -> impl Future<Output = Result<String>> + Send;

    /// `meta-data/placement/availability-zone`.
    fn availability_zone(&self) -> impl Future<Output = Result<String>> + Send;

    /// The identity document (logged at start-up; carries the account).
    fn identity_document(&self) -> impl Future<Output = Result<InstanceIdentity>> + Send;
}

// === impl InstanceIdentity ===

impl InstanceIdentity {
    /// An identity (for fakes and tests).
    pub fn new(instance_id: InstanceId, region: &str, availability_zone: &str) -> Self {
        Self {
            instance_id,
            region: region.to_owned(),
            availability_zone: availability_zone.to_owned(),
            account_id: String::new(),
            instance_type: String::new(),
            private_ip: None,
        }
    }

    /// Reads an instance identity document (the JSON IMDS serves at
    /// `/latest/dynamic/instance-identity/document`). Unreadable JSON or a missing `instanceId` is
    /// [`ErrorKind::Transient`]: IMDS serves the document whole once the instance is up. Fields of other types
    /// than string read as empty.
    pub fn from_document(raw: &str) -> Result<Self> {
        const OPERATION: &str = "GetInstanceIdentityDocument";
        let doc: serde_json::Value = serde_json::from_str(raw).map_err(|e| {
            AwsError::new(ErrorKind::Transient, "imds", OPERATION)
                .with_message("unreadable identity document")
                .with_source(e)
        })?;
        let field = |name: &str| {
            doc.get(name)
                .and_then(|v| v.as_str())
                .unwrap_or_default()
                .to_owned()
        };
        let instance_id = field("instanceId");
        if instance_id.is_empty() {
            return Err(AwsError::new(ErrorKind::Transient, "imds", OPERATION)
                .with_message("identity document has no instanceId"));
        }
        let mut identity = Self::new(
            InstanceId::new(instance_id),
            &field("region"),
            &field("availabilityZone"),
        );
        identity.account_id = field("accountId");
        identity.instance_type = field("instanceType");
        identity.private_ip = Some(field("privateIp")).filter(|s| !s.is_empty());
        Ok(identity)
    }
}

/// The region of an availability zone, for IMDS versions that serve no `placement/region`: `us-east-1a` ->
/// `us-east-1`; local zones (`us-west-2-lax-1a`) -> `us-west-2`. `None` when nothing region-shaped leads it.
pub fn region_of_zone(zone: &str) -> Option<String> {
    // The region is the longest prefix of the form `<letters>(-<letters>)*-<digits>`.
    let parts: Vec<&str> = zone.split('-').collect();
    for end in (1..parts.len()).rev() {
        let candidate = &parts[..=end];
        let last = candidate[end];
        let digits: String = last.chars().take_while(char::is_ascii_digit).collect();
        let head_ok = candidate[..end]
            .iter()
            .all(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_alphabetic()));
        if head_ok && !digits.is_empty() {
            let mut region = candidate[..end].join("-");
            region.push('-');
            region.push_str(&digits);
            return Some(region);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn regions_from_zones() {
        assert_eq!(region_of_zone("us-east-1a").as_deref(), Some("us-east-1"));
        assert_eq!(region_of_zone("us-gov-west-1b").as_deref(), Some("us-gov-west-1"));
        assert_eq!(region_of_zone("us-west-2-lax-1a").as_deref(), Some("us-west-2"));
        assert_eq!(region_of_zone("cn-north-1a").as_deref(), Some("cn-north-1"));
        assert_eq!(region_of_zone("nonsense"), None);
        assert_eq!(region_of_zone(""), None);
    }

    #[test]
    fn identity_documents_read_or_fail_transient() {
        let doc = r#"{"instanceId":"i-0abc","region":"eu-west-1","availabilityZone":"eu-west-1b",
            "accountId":"123456789012","instanceType":"m5.large","privateIp":"10.0.0.1","other":1}"#;
        let identity = InstanceIdentity::from_document(doc).unwrap();
        assert_eq!(identity.instance_id.as_str(), "i-0abc");
        assert_eq!(identity.region, "eu-west-1");
        assert_eq!(identity.availability_zone, "eu-west-1b");
        assert_eq!(identity.account_id, "123456789012");
        assert_eq!(identity.instance_type, "m5.large");
        assert_eq!(identity.private_ip.as_deref(), Some("10.0.0.1"));
        for bad in [
            "",
            "{",
            "[]",
            "null",
            r#"{"instanceId":42}"#,
            r#"{"instanceId":""}"#,
        ] {
            let err = InstanceIdentity::from_document(bad).unwrap_err();
            assert_eq!(err.kind(), ErrorKind::Transient, "{bad:?}");
        }
    }
}
