use super::*;

fn tags(pairs: &[(&str, &str)]) -> Tags {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

fn cluster() -> ClusterTags {
    ClusterTags::new("prod", false).unwrap()
}

#[test]
fn cluster_ids_must_fit_a_tag_key() {
    assert!(ClusterTags::new("prod", false).is_ok());
    for bad in ["", "a/b", " prod", &"x".repeat(107)] {
        let err = ClusterTags::new(bad, false).unwrap_err();
        assert!(
            matches!(err, OwnershipError::InvalidClusterId { max: 106, .. }),
            "{bad:?}"
        );
        assert!(err.to_string().contains("1 to 106 characters"), "{err}");
    }
    assert!(ClusterTags::new("x".repeat(106), false).is_ok());
}

#[test]
fn ownership_table() {
    let c = cluster();
    let table: &[(&[(&str, &str)], Ownership)] = &[
        (&[("kubernetes.io/cluster/prod", "owned")], Ownership::Owned),
        (&[("kubernetes.io/cluster/prod", "shared")], Ownership::Shared),
        (&[("kubernetes.io/cluster/prod", "")], Ownership::Shared),
        (&[("KubernetesCluster", "prod")], Ownership::Owned),
        (
            &[
                ("KubernetesCluster", "prod"),
                ("kubernetes.io/cluster/prod", "shared"),
            ],
            Ownership::Owned,
        ),
        (&[("KubernetesCluster", "other")], Ownership::Foreign),
        (&[("kubernetes.io/cluster/other", "owned")], Ownership::Foreign),
        (
            &[("kubernetes.io/cluster/production", "owned")],
            Ownership::Foreign,
        ),
        (&[("Name", "x")], Ownership::Untagged),
        (&[], Ownership::Untagged),
    ];
    for (pairs, expected) in table {
        let t = tags(pairs);
        assert_eq!(c.ownership(&t), *expected, "{pairs:?}");
        assert_eq!(c.is_owned(&t), *expected == Ownership::Owned);
        assert_eq!(
            c.is_tagged(&t),
            matches!(expected, Ownership::Owned | Ownership::Shared)
        );
        assert_eq!(c.ensure_owned("sg-1", &t).is_ok(), *expected == Ownership::Owned);
    }
    let err = c
        .ensure_owned("sg-1", &tags(&[("kubernetes.io/cluster/prod", "shared")]))
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "resource sg-1 is Shared for cluster prod, not owned: it will not be modified or deleted"
    );
}

#[test]
fn creation_tags_add_ownership_over_additional_tags() {
    let additional = tags(&[
        ("team", "blue"),
        ("kubernetes.io/cluster/prod", "shared"),
        ("aws:x", "y"),
    ]);
    assert_eq!(
        cluster().creation_tags(&additional),
        tags(&[("team", "blue"), ("kubernetes.io/cluster/prod", "owned")])
    );
    let legacy = ClusterTags::new("prod", true).unwrap();
    assert_eq!(
        legacy.creation_tags(&Tags::new()),
        tags(&[
            ("kubernetes.io/cluster/prod", "owned"),
            ("KubernetesCluster", "prod")
        ])
    );
}

#[test]
fn read_repair_adds_missing_tags_and_refuses_foreign_values() {
    let legacy = ClusterTags::new("prod", true).unwrap();
    let missing = legacy
        .missing_ownership_tags("sg-1", &tags(&[("KubernetesCluster", "prod")]))
        .unwrap();
    assert_eq!(missing, tags(&[("kubernetes.io/cluster/prod", "owned")]));
    let none = legacy
        .missing_ownership_tags("sg-1", &legacy.ownership_tags())
        .unwrap();
    assert!(none.is_empty());
    let err = legacy
        .missing_ownership_tags("sg-1", &tags(&[("KubernetesCluster", "other")]))
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "resource sg-1 has tag belonging to another cluster: KubernetesCluster=other (expected prod); \
         fix or remove the tag by hand"
    );
}

#[test]
fn discovery_table() {
    let ok = |pairs: &[(&str, &str)]| discover_cluster_id(&tags(pairs));
    assert_eq!(
        ok(&[("kubernetes.io/cluster/prod", "owned"), ("Name", "n")]).unwrap(),
        DiscoveredCluster {
            id: "prod".into(),
            legacy: false
        }
    );
    assert_eq!(
        ok(&[
            ("kubernetes.io/cluster/prod", "shared"),
            ("KubernetesCluster", "prod")
        ])
        .unwrap(),
        DiscoveredCluster {
            id: "prod".into(),
            legacy: false
        }
    );
    assert_eq!(
        ok(&[("KubernetesCluster", "old")]).unwrap(),
        DiscoveredCluster {
            id: "old".into(),
            legacy: true
        }
    );
    assert_eq!(
        ok(&[
            ("kubernetes.io/cluster/a", "owned"),
            ("kubernetes.io/cluster/b", "owned")
        ])
        .unwrap_err(),
        DiscoveryError::MultipleClusterTags {
            first: "a".into(),
            second: "b".into()
        }
    );
    assert_eq!(
        ok(&[("kubernetes.io/cluster/a", "owned"), ("KubernetesCluster", "b")]).unwrap_err(),
        DiscoveryError::Mismatch {
            tag: "a".into(),
            legacy: "b".into()
        }
    );
    assert_eq!(
        ok(&[("Name", "n"), ("KubernetesCluster", "")]).unwrap_err(),
        DiscoveryError::Missing
    );
    assert_eq!(
        ok(&[("kubernetes.io/cluster/", "owned")]).unwrap_err(),
        DiscoveryError::Missing
    );
    assert!(
        DiscoveryError::Missing
            .to_string()
            .contains("KubernetesClusterID")
    );
}

#[test]
fn diffs_ignore_aws_keys() {
    let current = tags(&[
        ("a", "1"),
        ("b", "2"),
        ("aws:cloudformation:stack", "s"),
        ("AWS:Other", "o"),
    ]);
    let desired = tags(&[
        ("a", "1"),
        ("b", "3"),
        ("c", "4"),
        ("aws:cloudformation:stack", "changed"),
    ]);
    let d = diff(&current, &desired);
    assert_eq!(d.to_set, tags(&[("b", "3"), ("c", "4")]));
    assert!(d.to_remove.is_empty(), "{:?}", d.to_remove);
    let d = diff(&current, &tags(&[("a", "1")]));
    assert_eq!(d.to_remove, ["b"]);
    assert!(d.to_set.is_empty());
    assert!(diff(&current, &current).is_empty());
    assert_eq!(additions(&current, &desired), tags(&[("b", "3"), ("c", "4")]));
    assert!(
        is_aws_reserved("aws:x")
            && is_aws_reserved("AWS:x")
            && !is_aws_reserved("awsx")
            && !is_aws_reserved("a")
    );
}

#[test]
fn membership_needs_the_cluster_tag_and_names_what_is_missing() {
    let c = cluster();
    for member in [
        tags(&[("kubernetes.io/cluster/prod", "owned")]),
        tags(&[("kubernetes.io/cluster/prod", "shared")]),
        tags(&[("KubernetesCluster", "prod")]),
    ] {
        assert_eq!(c.not_member("instance i-1", &member), None, "{member:?}");
    }
    let untagged = c.not_member("instance i-1", &tags(&[("Name", "db")])).unwrap();
    assert_eq!(
        untagged,
        "instance i-1 carries neither the tag kubernetes.io/cluster/prod (owned or shared) nor KubernetesCluster=prod"
    );
    let foreign = c
        .not_member("instance i-1", &tags(&[("kubernetes.io/cluster/other", "owned")]))
        .unwrap();
    assert!(foreign.ends_with("(it is tagged for cluster other)"), "{foreign}");
    let legacy = c
        .not_member("instance i-1", &tags(&[("KubernetesCluster", "old")]))
        .unwrap();
    assert!(legacy.ends_with("(it is tagged for cluster old)"), "{legacy}");
}
