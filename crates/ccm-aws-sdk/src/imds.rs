//! [`Metadata`] on aws-config's IMDSv2 client: session token first (PUT with a TTL header), then GETs, with
//! short timeouts so that a process off EC2 finds out in about a second.

use std::time::Duration;

use aws_config::imds::client::{Client, error::ImdsError};
use ccm_aws_api::{AwsError, ErrorKind, InstanceId, Metadata, Result, metadata::InstanceIdentity};

const SERVICE: &str = "imds";

/// Where and how to reach the instance metadata service.
///
/// Start from [`ImdsOptions::default`] (EC2's endpoint, 1 s per attempt, 2 attempts) and set the fields.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ImdsOptions {
    /// The endpoint (`http://169.254.169.254` on EC2; tests point this at an emulator on loopback).
    pub endpoint: String,
    /// Connect and read timeout of each attempt.
    pub timeout: Duration,
    /// Attempts per lookup.
    pub max_attempts: u32,
}

/// The metadata port on IMDSv2.
#[derive(Debug, Clone)]
pub struct AwsMetadata {
    client: Client,
}

// === impl ImdsOptions ===

impl Default for ImdsOptions {
    fn default() -> Self {
        Self {
            endpoint: "http://169.254.169.254".to_owned(),
            timeout: Duration::from_secs(1),
            max_attempts: 2,
        }
    }
}

// === impl AwsMetadata ===

impl AwsMetadata {
    /// A client for `options.endpoint`. A malformed endpoint is [`ErrorKind::Invalid`].
    pub fn new(options: &ImdsOptions) -> Result<Self> {
        let builder = Client::builder().endpoint(&options.endpoint).map_err(|e| {
            AwsError::new(ErrorKind::Invalid, SERVICE, "Configure")
                .with_message(format!("invalid IMDS endpoint {:?}", options.endpoint))
                .with_source(e)
        })?;
        let client = builder
            .connect_timeout(options.timeout)
            .read_timeout(options.timeout)
            .operation_timeout(options.timeout * (options.max_attempts.max(1) + 1))
            .max_attempts(options.max_attempts.max(1))
            .build();
        Ok(Self { client })
    }

    async fn get(&self, operation: &'static str, path: &str) -> Result<String> {
        match self.client.get(path).await {
            Ok(value) => Ok(value.as_ref().trim().to_owned()),
            Err(err) => Err(map_error(operation, path, err)),
        }
    }
}

fn map_error(operation: &'static str, path: &str, err: ImdsError) -> AwsError {
    let kind = match &err {
        ImdsError::ErrorResponse(response) => match response.response().status().as_u16() {
            404 => ErrorKind::NotFound,
            401 | 403 => ErrorKind::AccessDenied,
            429 => ErrorKind::Throttled,
            _ => ErrorKind::Transient,
        },
        _ => ErrorKind::Transient,
    };
    AwsError::new(kind, SERVICE, operation)
        .with_message(format!("reading {path}"))
        .with_source(err)
}

impl Metadata for AwsMetadata {
    async fn instance_id(&self) -> Result<InstanceId> {
        self.get("GetInstanceId", "/latest/meta-data/instance-id")
            .await
            .map(InstanceId::new)
    }

    async fn region(&self) -> Result<String> {
        match self.get("GetRegion", "/latest/meta-data/placement/region").await {
            // Older IMDS versions do not serve placement/region: derive it from the zone.
            Err(err) if err.is_not_found() => {
                let zone = self.availability_zone().await?;
                region_of_zone(&zone).ok_or_else(|| {
                    AwsError::new(ErrorKind::Invalid, SERVICE, "GetRegion")
                        .with_message(format!("cannot derive a region from zone {zone:?}"))
                })
            }
            other => other,
        }
    }

    async fn availability_zone(&self) -> Result<String> {
        self.get(
            "GetAvailabilityZone",
            "/latest/meta-data/placement/availability-zone",
        )
        .await
    }

    async fn identity_document(&self) -> Result<InstanceIdentity> {
        let raw = self
            .get(IDENTITY_OP, "/latest/dynamic/instance-identity/document")
            .await?;
        identity_document(&raw)
    }
}

const IDENTITY_OP: &str = "GetInstanceIdentityDocument";

/// Reads an instance identity document (JSON). Unreadable JSON or a missing `instanceId` is transient: IMDS
/// serves the document whole once the instance is up. Fields of other types than string read as empty.
pub(crate) fn identity_document(raw: &str) -> Result<InstanceIdentity> {
    let doc: serde_json::Value = serde_json::from_str(raw).map_err(|e| {
        AwsError::new(ErrorKind::Transient, SERVICE, IDENTITY_OP)
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
        return Err(AwsError::new(ErrorKind::Transient, SERVICE, IDENTITY_OP)
            .with_message("identity document has no instanceId"));
    }
    let mut identity = InstanceIdentity::new(
        InstanceId::new(instance_id),
        &field("region"),
        &field("availabilityZone"),
    );
    identity.account_id = field("accountId");
    identity.instance_type = field("instanceType");
    identity.private_ip = Some(field("privateIp")).filter(|s| !s.is_empty());
    Ok(identity)
}

/// `us-east-1a` → `us-east-1`; local zones (`us-west-2-lax-1a`) → `us-west-2`.
pub(crate) fn region_of_zone(zone: &str) -> Option<String> {
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
        let identity = identity_document(doc).unwrap();
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
            let err = identity_document(bad).unwrap_err();
            assert_eq!(err.kind(), ErrorKind::Transient, "{bad:?}");
        }
    }
}
