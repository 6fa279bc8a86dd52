/// A provider ID that is not of the form `<provider-name>://<instance>`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ProviderIdError {
    /// The string has no `://` separator, or nothing before or after it.
    #[error("provider ID {provider_id:?} is not of the form <provider-name>://<instance>")]
    Malformed {
        /// The offending value.
        provider_id: String,
    },
    /// The scheme names another provider.
    #[error("provider ID {provider_id:?} belongs to provider {found:?}, expected {expected:?}")]
    OtherProvider {
        /// The offending value.
        provider_id: String,
        /// The scheme found.
        found: String,
        /// The scheme expected.
        expected: String,
    },
}

/// The provider ID of an instance: `<provider_name>://<instance>` (upstream `GetInstanceProviderID`). The format
/// is part of every Node's immutable `spec.providerID` and must never change incompatibly.
pub fn format_provider_id(provider_name: &str, instance: &str) -> String {
    format!("{provider_name}://{instance}")
}

/// Splits a provider ID into its provider name and the provider-specific rest (which may contain further
/// slashes, such as AWS's `/us-east-1a/i-0123`). With `expected` set, a different provider name is an error.
pub fn split_provider_id<'a>(
    provider_id: &'a str,
    expected: Option<&str>,
) -> Result<(&'a str, &'a str), ProviderIdError> {
    let malformed = || ProviderIdError::Malformed {
        provider_id: provider_id.to_owned(),
    };
    let (scheme, rest) = provider_id.split_once("://").ok_or_else(malformed)?;
    if scheme.is_empty() || rest.is_empty() {
        return Err(malformed());
    }
    if let Some(expected) = expected
        && scheme != expected
    {
        return Err(ProviderIdError::OtherProvider {
            provider_id: provider_id.to_owned(),
            found: scheme.to_owned(),
            expected: expected.to_owned(),
        });
    }
    Ok((scheme, rest))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn format_and_split_round_trip() {
        let id = format_provider_id("aws", "/us-east-1a/i-0123");
        assert_eq!(id, "aws:///us-east-1a/i-0123");
        assert_eq!(
            split_provider_id(&id, Some("aws")),
            Ok(("aws", "/us-east-1a/i-0123"))
        );
        assert_eq!(split_provider_id("fake://12345", None), Ok(("fake", "12345")));
    }

    #[test]
    fn bad_provider_ids_are_named() {
        for bad in ["", "i-0123", "://x", "aws://"] {
            assert!(
                matches!(
                    split_provider_id(bad, None),
                    Err(ProviderIdError::Malformed { .. })
                ),
                "{bad:?}"
            );
        }
        let err = split_provider_id("gce://p/z/i", Some("aws")).unwrap_err();
        assert_eq!(
            err.to_string(),
            r#"provider ID "gce://p/z/i" belongs to provider "gce", expected "aws""#
        );
    }
}
