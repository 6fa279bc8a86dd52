//! The tagging controller's settings (upstream's "tagging controller" flag set) and their validation.

use std::{collections::BTreeMap, fmt};

use md5::{Digest, Md5};

use ccm_tagging::{Tags, is_aws_reserved};

/// The Node label holding the checksum of the tags last applied to the node's instance.
pub const CHECKSUM_LABEL: &str = "k8s.io/cloud-provider-aws";

/// The resource kinds `--resources` accepts.
pub const SUPPORTED_RESOURCES: [&str; 1] = ["instance"];

/// AWS's limits on tag keys and values (characters).
const MAX_TAG_KEY: usize = 128;
const MAX_TAG_VALUE: usize = 256;

/// The tagging controller's settings. Build it from flags (`TaggingArgs`, with the `cli` feature) or by hand,
/// then [`TaggingConfig::validate`]. By hand, start from [`TaggingConfig::new`] (or `Default`) and set the fields.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct TaggingConfig {
    /// `--tags`: the tags every node's instance gets (required).
    pub tags: Tags,
    /// `--resources`: what to tag; only `instance` is supported (required).
    pub resources: Vec<String>,
    /// `--tagging-controller-rate-limit`: work items per second over the whole queue (0: no queue-wide limit).
    pub rate_limit: f64,
    /// `--tagging-controller-burst-limit`: the bucket size of that limit (0: no queue-wide limit).
    pub burst_limit: i64,
    /// `--tagging-controller-concurrent-node-syncs`: workers (default 1).
    pub concurrent_node_syncs: i64,
    /// `--tagging-controller-enable-batching`: each worker takes up to [`MAX_BATCH`](super::MAX_BATCH) queued
    /// nodes at once, so that their `CreateTags` coalesce into one call (default true).
    pub enable_batching: bool,
}

/// One thing wrong with a [`TaggingConfig`].
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigProblem {
    /// No tags.
    #[error("--tags must not be empty and must be a form of key=value")]
    NoTags,
    /// A tag key AWS would refuse.
    #[error("--tags: invalid tag key {key:?}: {reason}")]
    InvalidTagKey {
        /// The key.
        key: String,
        /// Why.
        reason: &'static str,
    },
    /// A tag value AWS would refuse.
    #[error("--tags: the value of {key:?} is longer than {MAX_TAG_VALUE} characters")]
    TagValueTooLong {
        /// The key.
        key: String,
    },
    /// No resources.
    #[error("--resources must not be empty. Current supported resources [instance]")]
    NoResources,
    /// An unsupported resource kind.
    #[error("{0} is not a supported resource. Current supported resources [instance]")]
    UnsupportedResource(String),
    /// A negative or non-finite rate.
    #[error("--tagging-controller-rate-limit must be a number >= 0, got {0}")]
    RateLimit(f64),
    /// A negative burst.
    #[error("--tagging-controller-burst-limit must be >= 0, got {0}")]
    BurstLimit(i64),
    /// No workers.
    #[error("--tagging-controller-concurrent-node-syncs must be > 0, got {0}")]
    ConcurrentNodeSyncs(i64),
}

/// Every problem of a [`TaggingConfig`], shown as upstream's fatal message:
/// `Tagging controller inputs are not properly set: <problem>; <problem>`.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub struct InvalidConfig {
    /// The problems, in flag order.
    pub problems: Vec<ConfigProblem>,
}

/// A `--tags` value that is not `key=value[,key=value...]`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{value:?} must be formatted as key=value (several separated by commas)")]
pub struct TagsParseError {
    /// The offending value.
    pub value: String,
}

// === impl TaggingConfig ===

impl Default for TaggingConfig {
    fn default() -> Self {
        Self {
            tags: Tags::new(),
            resources: Vec::new(),
            rate_limit: 0.0,
            burst_limit: 0,
            concurrent_node_syncs: 1,
            enable_batching: true,
        }
    }
}

impl TaggingConfig {
    /// A configuration tagging instances with `tags`, other settings at their defaults.
    pub fn new(tags: Tags) -> Self {
        Self {
            tags,
            resources: vec![SUPPORTED_RESOURCES[0].to_owned()],
            ..Self::default()
        }
    }

    /// Checks every setting; the error lists all problems.
    pub fn validate(&self) -> Result<(), InvalidConfig> {
        let mut problems = Vec::new();
        if self.tags.is_empty() {
            problems.push(ConfigProblem::NoTags);
        }
        for (key, value) in &self.tags {
            let reason = if key.trim().is_empty() {
                Some("empty")
            } else if key.chars().count() > MAX_TAG_KEY {
                Some("longer than 128 characters")
            } else if is_aws_reserved(key) {
                Some("the aws: prefix is reserved by AWS")
            } else {
                None
            };
            if let Some(reason) = reason {
                problems.push(ConfigProblem::InvalidTagKey {
                    key: key.clone(),
                    reason,
                });
            }
            if value.chars().count() > MAX_TAG_VALUE {
                problems.push(ConfigProblem::TagValueTooLong { key: key.clone() });
            }
        }
        if self.resources.is_empty() {
            problems.push(ConfigProblem::NoResources);
        }
        for r in &self.resources {
            if !SUPPORTED_RESOURCES.contains(&r.as_str()) {
                problems.push(ConfigProblem::UnsupportedResource(r.clone()));
            }
        }
        if !(self.rate_limit.is_finite() && self.rate_limit >= 0.0) {
            problems.push(ConfigProblem::RateLimit(self.rate_limit));
        }
        if self.burst_limit < 0 {
            problems.push(ConfigProblem::BurstLimit(self.burst_limit));
        }
        if self.concurrent_node_syncs <= 0 {
            problems.push(ConfigProblem::ConcurrentNodeSyncs(self.concurrent_node_syncs));
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(InvalidConfig { problems })
        }
    }

    /// The label value of nodes whose instance carries these tags: see [`tags_checksum`].
    pub fn checksum(&self) -> String {
        tags_checksum(&self.tags)
    }
}

impl fmt::Display for InvalidConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Tagging controller inputs are not properly set: ")?;
        for (i, p) in self.problems.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            write!(f, "{p}")?;
        }
        Ok(())
    }
}

/// The MD5 (lower-case hex) of the tags as `k=v` pairs sorted by key and joined with `,`: the value upstream
/// writes to the [`CHECKSUM_LABEL`] label, so nodes tagged by either implementation are recognised by both.
pub fn tags_checksum(tags: &Tags) -> String {
    let joined = tags
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",");
    Md5::digest(joined.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Parses one `--tags` value, `key=value[,key=value...]` (pflag's `StringToString`); an empty value is no tags.
pub fn parse_tags(value: &str) -> Result<Tags, TagsParseError> {
    let mut out = BTreeMap::new();
    for pair in value.split(',').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').ok_or_else(|| TagsParseError {
            value: value.to_owned(),
        })?;
        out.insert(k.to_owned(), v.to_owned());
    }
    Ok(out)
}

#[cfg(feature = "cli")]
pub use cli::TaggingArgs;

/// The flags, with the `cli` feature: a library user who builds the config by hand does not compile clap.
#[cfg(feature = "cli")]
mod cli {
    use super::{TaggingConfig, Tags, parse_tags};

    /// Go's `strconv.ParseBool`, as pflag reads a boolean flag (the controller manager's flags read them the same
    /// way; this crate does not depend on it).
    fn parse_go_bool(s: &str) -> Result<bool, String> {
        match s {
            "1" | "t" | "T" | "true" | "TRUE" | "True" => Ok(true),
            "0" | "f" | "F" | "false" | "FALSE" | "False" => Ok(false),
            _ => Err(format!(
                "{s:?} is not a boolean (accepted: true, false, 1, 0, t, f)"
            )),
        }
    }

    /// The upstream "tagging controller" flags, for a `clap` command (`#[command(flatten)]`). Argument IDs are
    /// prefixed `tagging_` so that they never collide with the controller manager's (`concurrent_node_syncs`).
    #[derive(Debug, Clone, clap::Args)]
    #[command(next_help_heading = "Tagging controller")]
    pub struct TaggingArgs {
        /// Tags for the instances of nodes, key=value[,key=value...]; repeatable.
        #[arg(id = "tagging_tags", long = "tags", value_name = "KEY=VALUE,...", value_parser = parse_tags, action = clap::ArgAction::Append)]
        pub tags: Vec<Tags>,
        /// Resources to tag; only instance is supported. Repeatable.
        #[arg(id = "tagging_resources", long = "resources", value_name = "RESOURCE", action = clap::ArgAction::Append)]
        pub resources: Vec<String>,
        /// Work items per second over the whole queue (0: no queue-wide limit).
        #[arg(
            id = "tagging_rate_limit",
            long = "tagging-controller-rate-limit",
            default_value_t = 0.0
        )]
        pub rate_limit: f64,
        /// Bucket size of the queue-wide limit (0: no queue-wide limit).
        #[arg(
            id = "tagging_burst_limit",
            long = "tagging-controller-burst-limit",
            default_value_t = 0,
            allow_negative_numbers = true
        )]
        pub burst_limit: i64,
        /// Nodes synced at once.
        #[arg(
            id = "tagging_concurrent_node_syncs",
            long = "tagging-controller-concurrent-node-syncs",
            default_value_t = 1,
            allow_negative_numbers = true
        )]
        pub concurrent_node_syncs: i64,
        /// Tag many nodes with one CreateTags call.
        #[arg(
            id = "tagging_enable_batching",
            long = "tagging-controller-enable-batching",
            default_value_t = true,
            num_args = 0..=1,
            require_equals = true,
            default_missing_value = "true",
            action = clap::ArgAction::Set,
            value_parser = parse_go_bool
        )]
        pub enable_batching: bool,
    }

    impl From<TaggingArgs> for TaggingConfig {
        fn from(args: TaggingArgs) -> Self {
            Self {
                tags: args.tags.into_iter().flatten().collect(),
                resources: args.resources,
                rate_limit: args.rate_limit,
                burst_limit: args.burst_limit,
                concurrent_node_syncs: args.concurrent_node_syncs,
                enable_batching: args.enable_batching,
            }
        }
    }
}
