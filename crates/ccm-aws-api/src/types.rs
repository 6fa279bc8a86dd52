//! Identifiers, tags and filters shared by the ports.

use std::{borrow::Borrow, collections::BTreeMap, fmt};

/// Resource tags: key to value, ordered by key so that diffs and logs are deterministic.
pub type Tags = BTreeMap<String, String>;

/// A server-side filter (`Name=tag:Name`, `Values=[...]`) for the EC2 `Describe*` calls that take one. Values of
/// one filter are ORed; filters are ANDed.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Filter {
    /// The filter name (`vpc-id`, `tag:kubernetes.io/cluster/x`, `instance-state-name`, ...).
    pub name: String,
    /// The accepted values (at most 200 per filter on AWS).
    pub values: Vec<String>,
}

macro_rules! id_type {
    ($(#[$meta:meta])* $name:ident) => {
        $(#[$meta])*
        #[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(String);

        impl $name {
            /// Wraps an identifier as AWS spells it. No validation: AWS is the judge of what exists.
            pub fn new(id: impl Into<String>) -> Self {
                Self(id.into())
            }

            /// The identifier as AWS spells it.
            pub fn as_str(&self) -> &str {
                &self.0
            }

            /// The owned identifier.
            pub fn into_string(self) -> String {
                self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Debug::fmt(&self.0, f)
            }
        }

        impl From<String> for $name {
            fn from(id: String) -> Self {
                Self(id)
            }
        }

        impl From<&str> for $name {
            fn from(id: &str) -> Self {
                Self(id.to_owned())
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }

        impl Borrow<str> for $name {
            fn borrow(&self) -> &str {
                &self.0
            }
        }
    };
}

id_type!(
    /// An EC2 instance ID (`i-0123456789abcdef0`).
    InstanceId
);
id_type!(
    /// A VPC ID (`vpc-...`).
    VpcId
);
id_type!(
    /// A subnet ID (`subnet-...`).
    SubnetId
);
id_type!(
    /// A security group ID (`sg-...`).
    SecurityGroupId
);
id_type!(
    /// A route table ID (`rtb-...`).
    RouteTableId
);
id_type!(
    /// An elastic network interface ID (`eni-...`).
    NetworkInterfaceId
);

// === impl Filter ===

impl Filter {
    /// A filter `name` accepting any of `values`.
    pub fn new<V: Into<String>>(name: impl Into<String>, values: impl IntoIterator<Item = V>) -> Self {
        Self {
            name: name.into(),
            values: values.into_iter().map(Into::into).collect(),
        }
    }

    /// A filter on a tag's value (`tag:<key>`).
    pub fn tag(key: &str, values: impl IntoIterator<Item = impl Into<String>>) -> Self {
        Self::new(format!("tag:{key}"), values)
    }

    /// A filter on a tag key being present with any value (`tag-key`).
    pub fn tag_key(key: impl Into<String>) -> Self {
        Self::new("tag-key", [key.into()])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_display_and_debug_as_the_aws_string() {
        let id = InstanceId::new("i-1");
        assert_eq!(id.to_string(), "i-1");
        assert_eq!(format!("{id:?}"), "\"i-1\"");
        assert_eq!(id.as_str(), "i-1");
        let set: std::collections::HashSet<InstanceId> = [id].into();
        assert!(set.contains("i-1"));
    }

    #[test]
    fn filters() {
        assert_eq!(
            Filter::tag("Name", ["a"]),
            Filter {
                name: "tag:Name".into(),
                values: vec!["a".into()]
            }
        );
        assert_eq!(Filter::tag_key("k").name, "tag-key");
    }
}
