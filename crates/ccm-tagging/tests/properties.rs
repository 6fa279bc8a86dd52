//! Property tests of the ownership rules: a resource tagged for other clusters only (or untagged, or shared) is
//! never called owned, whatever else it carries; the cluster's own `owned` tag always is. See
//! docs/reliability.md.

use ccm_tagging::{CLUSTER_TAG_PREFIX, ClusterTags, LEGACY_CLUSTER_TAG, OWNED, Ownership, Tags};
use proptest::prelude::*;

/// A cluster ID (a regex strategy: `&str` is a `Clone` strategy).
fn cluster_id() -> &'static str {
    "[a-zA-Z0-9][a-zA-Z0-9._-]{0,20}"
}

/// Tags of any resource not owned by `ours`: other clusters' tags (any value, `owned` included), the legacy tag
/// of other clusters, `aws:` tags and unrelated tags.
fn foreign_tags(ours: String) -> impl Strategy<Value = Tags> {
    let ours = std::sync::Arc::new(ours);
    let other_id = cluster_id().prop_filter("another cluster", move |id| *id != *ours);
    let value = prop_oneof![Just(OWNED.to_owned()), Just("shared".to_owned()), "\\PC{0,10}"].boxed();
    let entry = prop_oneof![
        (other_id.clone(), value.clone()).prop_map(|(id, v)| (format!("{CLUSTER_TAG_PREFIX}{id}"), v)),
        other_id.prop_map(|id| (LEGACY_CLUSTER_TAG.to_owned(), id)),
        ("aws:[a-z:]{1,20}", value.clone()),
        ("[a-zA-Z][a-zA-Z0-9/._-]{0,30}", value),
    ];
    prop::collection::vec(entry, 0..6).prop_map(|entries| entries.into_iter().collect())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn foreign_resources_are_never_owned(
        (ours, tags, legacy) in cluster_id().prop_flat_map(|id| (Just(id.clone()), foreign_tags(id), any::<bool>())),
    ) {
        prop_assume!(tags.get(LEGACY_CLUSTER_TAG) != Some(&ours));
        prop_assume!(!tags.contains_key(&format!("{CLUSTER_TAG_PREFIX}{ours}")));
        let cluster = ClusterTags::new(ours, legacy).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let ownership = cluster.ownership(&tags);
        prop_assert_ne!(ownership, Ownership::Owned, "{:?}", tags);
        prop_assert_ne!(ownership, Ownership::Shared, "{:?}", tags);
        prop_assert!(!cluster.is_tagged(&tags));
    }

    #[test]
    fn shared_resources_are_never_owned(
        ours in cluster_id(),
        value in "\\PC{0,10}".prop_filter("not owned", |v| v != OWNED),
        others in prop::collection::btree_map("[a-z]{1,10}", "[a-z]{0,5}", 0..4),
    ) {
        let cluster = ClusterTags::new(ours, false).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let mut tags: Tags = others;
        tags.insert(cluster.key(), value);
        prop_assert_eq!(cluster.ownership(&tags), Ownership::Shared);
    }

    #[test]
    fn the_clusters_owned_tag_always_owns(
        ours in cluster_id(),
        others in prop::collection::btree_map("\\PC{1,20}", "\\PC{0,10}", 0..6),
    ) {
        let cluster = ClusterTags::new(ours, false).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let mut tags: Tags = others;
        tags.insert(cluster.key(), OWNED.to_owned());
        prop_assert_eq!(cluster.ownership(&tags), Ownership::Owned);
    }

    /// Cluster IDs: accepted or refused with a typed error, never a panic; accepted IDs make a valid tag key.
    #[test]
    fn cluster_ids_never_panic(id in "\\PC{0,140}") {
        if let Ok(cluster) = ClusterTags::new(id.clone(), false) {
            prop_assert!(cluster.key().len() <= 128);
            prop_assert!(!id.contains('/'));
        }
    }
}
