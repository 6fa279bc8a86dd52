//! Image reference to registry: which ECR registry (private in a region and partition, or ECR Public) serves an
//! image, from the host part of its reference alone.

use std::fmt;

use crate::{Error, Result};

/// The host of ECR Public's registry.
pub const ECR_PUBLIC_HOST: &str = "public.ecr.aws";

/// ECR Public's other host name (accepted as the Go provider accepts it).
const ECR_PUBLIC_ALT_HOST: &str = "ecr-public.aws.com";

/// The DNS suffixes of private ECR registries, each with the partition it belongs to and whether it is a
/// dual-stack (IPv4 and IPv6) endpoint. GovCloud shares the commercial suffixes and is told apart by region.
const PRIVATE_SUFFIXES: &[(&str, Partition, bool)] = &[
    ("amazonaws.com", Partition::Aws, false),
    ("amazonaws.com.cn", Partition::AwsCn, false),
    ("amazonaws.eu", Partition::AwsEusc, false),
    ("on.aws", Partition::Aws, true),
    ("on.amazonwebservices.com.cn", Partition::AwsCn, true),
    ("c2s.ic.gov", Partition::AwsIso, false),
    ("sc2s.sgov.gov", Partition::AwsIsoB, false),
    ("cloud.adc-e.uk", Partition::AwsIsoE, false),
    ("csp.hci.ic.gov", Partition::AwsIsoF, false),
];

/// The registry an image is pulled from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Registry {
    host: String,
    kind: RegistryKind,
}

/// Which kind of ECR registry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RegistryKind {
    /// A private registry: `<account>.dkr.ecr[-fips].<region>.<suffix>` or the dual-stack
    /// `<account>.dkr-ecr[-fips].<region>.<suffix>`.
    Private(PrivateRegistry),
    /// ECR Public (`public.ecr.aws`), whose tokens come from `us-east-1`.
    Public,
}

/// The parts of a private registry's host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrivateRegistry {
    /// The 12-digit account that owns the registry.
    pub account_id: String,
    /// The region, lower case (`eu-west-1`, `cn-north-1`, `us-gov-west-1`, `us-iso-east-1`, ...).
    pub region: String,
    /// The partition, from the DNS suffix (and the region for GovCloud).
    pub partition: Partition,
    /// Whether the host is a FIPS endpoint (`dkr.ecr-fips`).
    pub fips: bool,
    /// Whether the host is a dual-stack endpoint (`.on.aws`, `.on.amazonwebservices.com.cn`).
    pub dual_stack: bool,
}

/// An AWS partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Partition {
    /// `aws`: the commercial regions.
    Aws,
    /// `aws-cn`: China.
    AwsCn,
    /// `aws-us-gov`: GovCloud (US).
    AwsUsGov,
    /// `aws-iso` (US ISO East and West, `c2s.ic.gov`).
    AwsIso,
    /// `aws-iso-b` (`sc2s.sgov.gov`).
    AwsIsoB,
    /// `aws-iso-e` (`cloud.adc-e.uk`).
    AwsIsoE,
    /// `aws-iso-f` (`csp.hci.ic.gov`).
    AwsIsoF,
    /// `aws-eusc`: the European Sovereign Cloud (`amazonaws.eu`).
    AwsEusc,
}

// === impl Registry ===

impl Registry {
    /// The registry of `image`, an image reference as the kubelet passes it
    /// (`123456789012.dkr.ecr.eu-west-1.amazonaws.com/team/app:1.2`, optionally with a scheme or a port).
    ///
    /// Fails when the image is empty, has no usable host, or is not served by ECR: ECR credentials are never
    /// offered to any other registry.
    pub fn from_image(image: &str) -> Result<Self> {
        let host = host_of(image)?;
        let lower = host.to_ascii_lowercase();
        if lower == ECR_PUBLIC_HOST || lower == ECR_PUBLIC_ALT_HOST {
            return Ok(Self {
                host: host.to_owned(),
                kind: RegistryKind::Public,
            });
        }
        match parse_private(&lower) {
            Some(private) => Ok(Self {
                host: host.to_owned(),
                kind: RegistryKind::Private(private),
            }),
            None => Err(Error::NotEcr {
                image: image.to_owned(),
                host: host.to_owned(),
            }),
        }
    }

    /// The host, as written in the image reference but without scheme or port: the key of the response's
    /// `auth` map.
    pub fn host(&self) -> &str {
        &self.host
    }

    /// Private or public, with the private registry's parts.
    pub fn kind(&self) -> &RegistryKind {
        &self.kind
    }

    /// The region whose endpoints serve the registry's tokens (and STS, in service-account-token mode).
    pub fn region(&self) -> &str {
        match &self.kind {
            RegistryKind::Private(private) => &private.region,
            RegistryKind::Public => ccm_aws_api::ecr::ECR_PUBLIC_REGION,
        }
    }
}

impl fmt::Display for Registry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.host)
    }
}

// === impl Partition ===

impl Partition {
    /// The partition's ID as ARNs spell it (`aws`, `aws-cn`, `aws-us-gov`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Aws => "aws",
            Self::AwsCn => "aws-cn",
            Self::AwsUsGov => "aws-us-gov",
            Self::AwsIso => "aws-iso",
            Self::AwsIsoB => "aws-iso-b",
            Self::AwsIsoE => "aws-iso-e",
            Self::AwsIsoF => "aws-iso-f",
            Self::AwsEusc => "aws-eusc",
        }
    }
}

impl fmt::Display for Partition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

// === parsing ===

/// The host of an image reference: the part before the first `/` (after an optional `scheme://`), without a
/// port. Mirrors how the kubelet and the Go provider read it (`url.Parse("https://" + image).Hostname()`).
fn host_of(image: &str) -> Result<&str> {
    if image.is_empty() {
        return Err(Error::EmptyImage);
    }
    let invalid = |reason| Error::InvalidImage {
        image: image.to_owned(),
        reason,
    };
    let rest = match image.split_once("://") {
        Some((scheme, rest)) if is_scheme(scheme) => rest,
        _ => image,
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    if authority.contains('@') {
        return Err(invalid("the registry part holds a user name (`user@host`)"));
    }
    let host = if authority.starts_with('[') {
        // An IPv6 literal: never an ECR registry, but report it as such rather than as a parse error.
        authority
            .split_once(']')
            .map_or(authority, |(host, _)| host)
            .trim_start_matches('[')
    } else {
        match authority.rsplit_once(':') {
            Some((host, port)) if port.is_empty() || port.bytes().all(|b| b.is_ascii_digit()) => host,
            Some(_) => return Err(invalid("the port after `:` in the registry host is not a number")),
            None => authority,
        }
    };
    if host.is_empty() {
        return Err(invalid("the registry host is empty"));
    }
    if host
        .bytes()
        .any(|b| b.is_ascii_whitespace() || b.is_ascii_control())
    {
        return Err(invalid(
            "the registry host contains white space or control characters",
        ));
    }
    Ok(host)
}

/// `^(\d{12})\.dkr[.-]ecr(-fips)?\.(<region>)\.(<suffix>)$`, matched by hand on a lower-case host (no regex
/// engine to build at start-up, and every part is named).
fn parse_private(host: &str) -> Option<PrivateRegistry> {
    let (account_id, rest) = host.split_at_checked(12)?;
    if !account_id.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let rest = rest.strip_prefix(".dkr")?;
    let rest = rest.strip_prefix(".ecr").or_else(|| rest.strip_prefix("-ecr"))?;
    let (fips, rest) = match rest.strip_prefix("-fips") {
        Some(rest) => (true, rest),
        None => (false, rest),
    };
    let (region, suffix) = rest.strip_prefix('.')?.split_once('.')?;
    if !is_region(region) {
        return None;
    }
    let &(_, partition, dual_stack) = PRIVATE_SUFFIXES.iter().find(|(known, ..)| *known == suffix)?;
    let partition = match partition {
        Partition::Aws if region.starts_with("us-gov-") => Partition::AwsUsGov,
        other => other,
    };
    Some(PrivateRegistry {
        account_id: account_id.to_owned(),
        region: region.to_owned(),
        partition,
        fips,
        dual_stack,
    })
}

/// A URL scheme (`https`, `oci`, ...): a letter, then letters, digits, `+`, `-` or `.`; never a `/`, so that
/// `evil.example/x://<ecr host>/app` keeps `evil.example` as its host.
fn is_scheme(scheme: &str) -> bool {
    let mut bytes = scheme.bytes();
    bytes.next().is_some_and(|b| b.is_ascii_alphabetic())
        && bytes.all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.'))
}

/// `[a-z0-9][a-z0-9-_]*`, the region pattern the Go provider accepts (on a lower-cased host).
fn is_region(region: &str) -> bool {
    let mut bytes = region.bytes();
    bytes.next().is_some_and(|b| b.is_ascii_alphanumeric())
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

#[cfg(test)]
mod tests;
