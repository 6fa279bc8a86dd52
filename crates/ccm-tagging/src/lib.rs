//! Cluster ownership tags: the rules for `kubernetes.io/cluster/<id>` (`owned` or `shared`) and the legacy
//! `KubernetesCluster` tag, ownership checks made before any mutation, and tag diffs that ignore `aws:` keys.
//!
//! Everything here is pure: callers fetch tags through the `ccm-aws-api` ports and ask these rules what they may
//! do. Only resources *owned* by this cluster are deleted (and, with `AdoptUntaggedLoadBalancers`, an untagged
//! load balancer under a Service's name). What the cluster creates (load balancers, target
//! groups, their managed security groups) is found by name and modified only when owned
//! ([`ClusterTags::ensure_owned`]): under this cluster's `shared` tag or another cluster's it is left alone, and
//! untagged it is adopted (tagged `owned`) only where the caller allows it (a load balancer's managed group; a
//! load balancer with `AdoptUntaggedLoadBalancers`).
//!
//! What the cluster uses but did not create is a member when tagged `owned` or `shared`
//! ([`ClusterTags::is_tagged`]), and members are modified by design, never deleted:
//!
//! - the instances of Nodes: the route controller turns their source/destination check off, and the tagging
//!   controller adds its `--tags` to them and removes them when the Node goes;
//! - route tables: the route controller creates, replaces and deletes the routes of Nodes' pod CIDRs in them
//!   (never a route to another target; with `RouteTableID`, in that table whatever its tags);
//! - the nodes' security groups: load balancers add and revoke their rules on the group of each target instance
//!   that is tagged for the cluster (else on the instance's only untagged group).
//!
//! Subnets, `shared` or `owned`, are only read. A resource tagged for another cluster only is never modified,
//! except that a Classic ELB's rules whose source is a group this cluster owns are revoked from whichever group
//! holds them once not needed (and before that group is deleted).
//!
//! ```
//! use ccm_tagging::{ClusterTags, Ownership, Tags};
//!
//! let cluster = ClusterTags::new("prod", false).unwrap();
//! // What a load balancer created by this cluster is tagged with: the caller's tags, then the ownership tag.
//! let created = cluster.creation_tags(&Tags::from([("team".to_owned(), "web".to_owned())]));
//! assert_eq!(created["kubernetes.io/cluster/prod"], "owned");
//! assert!(cluster.ensure_owned("sg-1", &created).is_ok());
//!
//! // A subnet shared with the cluster may be used but never modified.
//! let shared = Tags::from([("kubernetes.io/cluster/prod".to_owned(), "shared".to_owned())]);
//! assert_eq!(cluster.ownership(&shared), Ownership::Shared);
//! let refused = cluster.ensure_owned("subnet-1", &shared).unwrap_err();
//! assert!(refused.to_string().contains("subnet-1"));
//!
//! // Tag diffs never touch the keys AWS reserves.
//! let current = Tags::from([("aws:cloudformation:stack-name".to_owned(), "s".to_owned())]);
//! assert!(ccm_tagging::diff(&current, &Tags::new()).is_empty());
//! ```
//!
//! The tagging controller, which applies `--tags` to the instances of Nodes, is not here: it needs a Kubernetes
//! client and the AWS ports, so it lives in the composition (`ccm_aws::tagging`); see `docs/tagging.md`.
//!
//! May depend on: `std`, `thiserror`. Never on `kube`, `aws-sdk-*` or other domain crates.

#![cfg_attr(
    test,
    allow(
        clippy::too_many_lines,
        reason = "the function limit is for code, not for tests"
    )
)]

use std::collections::BTreeMap;

/// Resource tags: key to value.
pub type Tags = BTreeMap<String, String>;

/// The prefix of the cluster tag key: `kubernetes.io/cluster/<cluster id>`.
pub const CLUSTER_TAG_PREFIX: &str = "kubernetes.io/cluster/";
/// The legacy cluster tag: `KubernetesCluster=<cluster id>`.
pub const LEGACY_CLUSTER_TAG: &str = "KubernetesCluster";
/// The cluster tag value of resources the cluster created and may delete.
pub const OWNED: &str = "owned";
/// The cluster tag value of resources the cluster uses but never deletes (what it modifies on them: the crate
/// documentation).
pub const SHARED: &str = "shared";
/// The prefix AWS reserves for its own tags; they are never diffed, added or removed.
pub const AWS_RESERVED_PREFIX: &str = "aws:";

/// AWS's limit on tag key length, which bounds the cluster ID (`kubernetes.io/cluster/` is 22 characters).
const MAX_TAG_KEY_LEN: usize = 128;

/// How a resource relates to this cluster, from its tags.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Ownership {
    /// `kubernetes.io/cluster/<id>=owned`, or the legacy `KubernetesCluster=<id>`: ours to modify and delete.
    Owned,
    /// `kubernetes.io/cluster/<id>` with any other value (normally `shared`): ours to use, never to delete; what
    /// is modified on such resources is listed in the crate documentation.
    Shared,
    /// Tagged for other clusters only: not ours at all.
    Foreign,
    /// No cluster tag of any cluster.
    Untagged,
}

/// The cluster's identity in tags.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ClusterTags {
    id: String,
    legacy: bool,
}

/// The cluster ID found on an instance's tags.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct DiscoveredCluster {
    /// The cluster ID.
    pub id: String,
    /// Whether only the legacy `KubernetesCluster` tag named it (the cluster then writes the legacy tag too).
    pub legacy: bool,
}

/// What it takes to go from one tag set to another, `aws:` keys left out.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TagDiff {
    /// Tags to create or overwrite.
    pub to_set: Tags,
    /// Keys to remove.
    pub to_remove: Vec<String>,
}

/// Why the cluster's tags refuse an operation.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum OwnershipError {
    /// The cluster ID cannot be used in a tag key.
    #[error(
        "invalid cluster ID {id:?}: it must be 1 to {max} characters without '/' (it becomes the tag key \
         kubernetes.io/cluster/<id>)"
    )]
    InvalidClusterId {
        /// The refused ID.
        id: String,
        /// The longest ID accepted.
        max: usize,
    },
    /// The resource is not owned by this cluster: it must not be modified or deleted.
    #[error(
        "resource {resource} is {ownership:?} for cluster {cluster}, not owned: it will not be modified or deleted"
    )]
    NotOwned {
        /// The resource ID.
        resource: String,
        /// What its tags say.
        ownership: Ownership,
        /// This cluster.
        cluster: String,
    },
    /// The resource carries a cluster tag with a value that contradicts this cluster's.
    #[error(
        "resource {resource} has tag belonging to another cluster: {key}={actual} (expected {expected}); \
         fix or remove the tag by hand"
    )]
    ConflictingTag {
        /// The resource ID.
        resource: String,
        /// The tag key.
        key: String,
        /// Its value on the resource.
        actual: String,
        /// The value this cluster expects.
        expected: String,
    },
}

/// Why no cluster ID could be read from tags.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DiscoveryError {
    /// Several `kubernetes.io/cluster/<id>` keys.
    #[error(
        "found multiple cluster tags with prefix {CLUSTER_TAG_PREFIX} ({first:?} and {second:?}): set KubernetesClusterID in the cloud config"
    )]
    MultipleClusterTags {
        /// One cluster ID.
        first: String,
        /// Another.
        second: String,
    },
    /// The new and the legacy tags name different clusters.
    #[error("cluster tags disagree: {CLUSTER_TAG_PREFIX}{tag} and {LEGACY_CLUSTER_TAG}={legacy}")]
    Mismatch {
        /// The ID of the `kubernetes.io/cluster/` key.
        tag: String,
        /// The legacy tag's value.
        legacy: String,
    },
    /// No cluster tag at all.
    #[error(
        "neither tag {LEGACY_CLUSTER_TAG} nor {CLUSTER_TAG_PREFIX}<id> was found on the instance: tag it, or set \
         KubernetesClusterID in the cloud config"
    )]
    Missing,
}

// === impl ClusterTags ===

impl ClusterTags {
    /// The tags of cluster `id`; `legacy` also writes and accepts `KubernetesCluster=<id>`.
    pub fn new(id: impl Into<String>, legacy: bool) -> Result<Self, OwnershipError> {
        let id = id.into();
        let max = MAX_TAG_KEY_LEN - CLUSTER_TAG_PREFIX.len();
        if id.is_empty() || id.len() > max || id.contains('/') || id.trim() != id {
            return Err(OwnershipError::InvalidClusterId { id, max });
        }
        Ok(Self { id, legacy })
    }

    /// The cluster ID.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Whether the legacy tag is written too.
    pub fn legacy(&self) -> bool {
        self.legacy
    }

    /// `kubernetes.io/cluster/<id>`.
    pub fn key(&self) -> String {
        format!("{CLUSTER_TAG_PREFIX}{}", self.id)
    }

    /// How a resource with `tags` relates to this cluster. The legacy tag is honoured whether or not this
    /// cluster writes it, as the reference implementation does.
    pub fn ownership(&self, tags: &Tags) -> Ownership {
        if tags.get(LEGACY_CLUSTER_TAG).is_some_and(|v| *v == self.id) {
            return Ownership::Owned;
        }
        match tags.get(&self.key()) {
            Some(v) if v == OWNED => Ownership::Owned,
            Some(_) => Ownership::Shared,
            None if tags.keys().any(|k| k.starts_with(CLUSTER_TAG_PREFIX))
                || tags.contains_key(LEGACY_CLUSTER_TAG) =>
            {
                Ownership::Foreign
            }
            None => Ownership::Untagged,
        }
    }

    /// Whether the resource carries this cluster's tag with any value (owned or shared).
    pub fn is_tagged(&self, tags: &Tags) -> bool {
        matches!(self.ownership(tags), Ownership::Owned | Ownership::Shared)
    }

    /// Whether the resource is owned by this cluster.
    pub fn is_owned(&self, tags: &Tags) -> bool {
        self.ownership(tags) == Ownership::Owned
    }

    /// The check to pass before modifying or deleting `resource`: it must be owned.
    pub fn ensure_owned(&self, resource: &str, tags: &Tags) -> Result<(), OwnershipError> {
        match self.ownership(tags) {
            Ownership::Owned => Ok(()),
            ownership => Err(OwnershipError::NotOwned {
                resource: resource.to_owned(),
                ownership,
                cluster: self.id.clone(),
            }),
        }
    }

    /// The tags a resource created by this cluster gets: `additional`, then the cluster tag `owned` (and the legacy
    /// tag), which win over an `additional` tag with the same key.
    pub fn creation_tags(&self, additional: &Tags) -> Tags {
        let mut tags: Tags = additional
            .iter()
            .filter(|(k, _)| !is_aws_reserved(k))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        tags.extend(self.ownership_tags());
        tags
    }

    /// Just the ownership tags: `kubernetes.io/cluster/<id>=owned` (and `KubernetesCluster=<id>` in legacy mode).
    pub fn ownership_tags(&self) -> Tags {
        let mut tags = Tags::from([(self.key(), OWNED.to_owned())]);
        if self.legacy {
            tags.insert(LEGACY_CLUSTER_TAG.to_owned(), self.id.clone());
        }
        tags
    }

    /// Why `resource` (an instance behind a Node) is not a member of this cluster: `None` when it carries the
    /// cluster tag (`owned` or `shared`) or the legacy `KubernetesCluster=<id>`, else a sentence naming the tag
    /// it lacks (and the cluster it belongs to, when another one's tag is there). Nodes of such instances are
    /// never acted for: a forged Node must not steer the controller to a resource the cluster does not own.
    pub fn not_member(&self, resource: &str, tags: &Tags) -> Option<String> {
        let ownership = self.ownership(tags);
        if matches!(ownership, Ownership::Owned | Ownership::Shared) {
            return None;
        }
        let mut reason = format!(
            "{resource} carries neither the tag {} (owned or shared) nor {LEGACY_CLUSTER_TAG}={}",
            self.key(),
            self.id
        );
        if ownership == Ownership::Foreign {
            let others: Vec<&str> = tags
                .iter()
                .filter_map(|(k, v)| match k.strip_prefix(CLUSTER_TAG_PREFIX) {
                    Some(id) => Some(id),
                    None => (k == LEGACY_CLUSTER_TAG).then_some(v.as_str()),
                })
                .collect();
            reason.push_str(&format!(" (it is tagged for cluster {})", others.join(", ")));
        }
        Some(reason)
    }

    /// Read-repair of a resource this cluster found by name and believes it owns: the ownership tags missing from
    /// `tags`, to be added; a cluster tag with another value is an error (the resource is someone else's).
    pub fn missing_ownership_tags(&self, resource: &str, tags: &Tags) -> Result<Tags, OwnershipError> {
        let mut missing = Tags::new();
        for (key, expected) in self.ownership_tags() {
            match tags.get(&key) {
                None => {
                    missing.insert(key, expected);
                }
                Some(actual) if *actual == expected => {}
                Some(actual) => {
                    return Err(OwnershipError::ConflictingTag {
                        resource: resource.to_owned(),
                        key,
                        actual: actual.clone(),
                        expected,
                    });
                }
            }
        }
        Ok(missing)
    }
}

/// The cluster ID named by an instance's tags (`kubernetes.io/cluster/<id>` keys and `KubernetesCluster`).
pub fn discover_cluster_id(tags: &Tags) -> Result<DiscoveredCluster, DiscoveryError> {
    let mut from_key: Option<&str> = None;
    for key in tags.keys() {
        let Some(id) = key.strip_prefix(CLUSTER_TAG_PREFIX) else {
            continue;
        };
        if id.is_empty() {
            continue;
        }
        if let Some(first) = from_key {
            return Err(DiscoveryError::MultipleClusterTags {
                first: first.to_owned(),
                second: id.to_owned(),
            });
        }
        from_key = Some(id);
    }
    let legacy = tags
        .get(LEGACY_CLUSTER_TAG)
        .map(String::as_str)
        .filter(|v| !v.is_empty());
    match (from_key, legacy) {
        (Some(tag), Some(legacy)) if tag != legacy => Err(DiscoveryError::Mismatch {
            tag: tag.to_owned(),
            legacy: legacy.to_owned(),
        }),
        (Some(id), _) => Ok(DiscoveredCluster {
            id: id.to_owned(),
            legacy: false,
        }),
        (None, Some(id)) => Ok(DiscoveredCluster {
            id: id.to_owned(),
            legacy: true,
        }),
        (None, None) => Err(DiscoveryError::Missing),
    }
}

/// Whether the key marks cluster ownership (`kubernetes.io/cluster/<id>` or the legacy `KubernetesCluster`, in any
/// letter case): such a tag makes a cluster treat the resource as its own, so it is never taken from user input
/// (a Service's `additional-resource-tags`, say): only the controller writes it, with its own cluster ID.
pub fn is_ownership_key(key: &str) -> bool {
    key.get(..CLUSTER_TAG_PREFIX.len())
        .is_some_and(|p| p.eq_ignore_ascii_case(CLUSTER_TAG_PREFIX))
        || key.eq_ignore_ascii_case(LEGACY_CLUSTER_TAG)
}

/// Whether AWS reserves the key (`aws:`): never diffed, set or removed.
pub fn is_aws_reserved(key: &str) -> bool {
    key.get(..AWS_RESERVED_PREFIX.len())
        .is_some_and(|p| p.eq_ignore_ascii_case(AWS_RESERVED_PREFIX))
}

/// The changes from `current` to exactly `desired`, `aws:` keys ignored on both sides.
pub fn diff(current: &Tags, desired: &Tags) -> TagDiff {
    let to_set = additions(current, desired);
    let to_remove = current
        .keys()
        .filter(|k| !is_aws_reserved(k) && !desired.contains_key(*k))
        .cloned()
        .collect();
    TagDiff { to_set, to_remove }
}

/// The tags of `desired` that `current` lacks or has with another value (nothing is removed), `aws:` keys ignored.
pub fn additions(current: &Tags, desired: &Tags) -> Tags {
    desired
        .iter()
        .filter(|(k, v)| !is_aws_reserved(k) && current.get(*k) != Some(*v))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

// === impl TagDiff ===

impl TagDiff {
    /// Whether nothing needs to change.
    pub fn is_empty(&self) -> bool {
        self.to_set.is_empty() && self.to_remove.is_empty()
    }
}

#[cfg(test)]
mod tests;

// The README's examples compile (and those without `no_run` run) as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeExamples;
