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
                ccm_aws_api::metadata::region_of_zone(&zone).ok_or_else(|| {
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
            .get(
                "GetInstanceIdentityDocument",
                "/latest/dynamic/instance-identity/document",
            )
            .await?;
        InstanceIdentity::from_document(&raw)
    }
}
