//! Which load balancers found under a Service's name this cluster may touch.
//!
//! A Service's load balancer name (`a` + its UID) is deterministic, so a load balancer under that name is
//! normally ours. It is not when two clusters share Service UIDs (one restored from the other's etcd backup)
//! or when someone made it by hand. The policy, for both flavours, on ensure, update and delete alike:
//!
//! | the load balancer's tags | decision |
//! | --- | --- |
//! | `kubernetes.io/cluster/<this cluster>=owned` (or legacy `KubernetesCluster=<id>`) | ours |
//! | another cluster's tag only | refused: never modified, adopted or deleted |
//! | `kubernetes.io/cluster/<this cluster>` with another value (`shared`) | refused: used by us, not ours |
//! | no cluster tag at all | refused, unless `[Global] AdoptUntaggedLoadBalancers = true`: then adopted |
//!
//! Untagged ones are refused by default because this controller (like the Go one) tags everything it creates,
//! in the create call itself: an untagged load balancer under our name was most likely made by someone else.
//! A cluster migrated from a Go controller that ran without a cluster ID has untagged load balancers: set the
//! option to adopt them (they are then tagged `owned`).

use ccm_aws_api::Tags;
use ccm_tagging::{CLUSTER_TAG_PREFIX, LEGACY_CLUSTER_TAG, Ownership};

use crate::LoadBalancerConfig;

/// A load balancer under a Service's name that this cluster must not touch.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "load balancer {name} already exists under this Service's name but {found}: it is never modified, adopted or \
     deleted by this cluster{hint}"
)]
pub struct NotOurs {
    /// The load balancer.
    pub name: String,
    /// What its tags say (names the tag).
    pub found: String,
    /// How to resolve it, with a leading separator (empty when there is nothing to suggest).
    pub hint: String,
}

/// The check before modifying or deleting the load balancer `name` with `tags`: `Ok(true)` when it is owned,
/// `Ok(false)` when it is untagged and adoption is configured (the plan then tags it), else [`NotOurs`].
pub fn check(config: &LoadBalancerConfig, name: &str, tags: &Tags) -> Result<bool, NotOurs> {
    let refuse = |found: String, hint: &str| NotOurs {
        name: name.to_owned(),
        found,
        hint: hint.to_owned(),
    };
    match config.cluster.ownership(tags) {
        Ownership::Owned => Ok(true),
        Ownership::Untagged if config.adopt_untagged => Ok(false),
        Ownership::Untagged => Err(refuse(
            "it carries no cluster tag, so it was not made by this cluster's controller".to_owned(),
            "; to adopt it, set AdoptUntaggedLoadBalancers = true in the cloud config's [Global] section",
        )),
        Ownership::Shared => Err(refuse(
            format!("it is tagged {}", cluster_tags(tags).join(", ")),
            "; only `owned` load balancers are managed",
        )),
        Ownership::Foreign => Err(refuse(
            format!(
                "it belongs to another cluster (tagged {})",
                cluster_tags(tags).join(", ")
            ),
            "; delete and re-create the Service to get a load balancer of its own",
        )),
    }
}

/// The check of a load balancer under a name that is not the Service's UID name (chosen with
/// `aws-load-balancer-name`, or kept from before a rename): on top of [`check`], it must be owned (never
/// adopted: an untagged load balancer of any name could be claimed so) and its `kubernetes.io/service-name` tag
/// must name `service`. Else [`crate::Error::NameTaken`]: a Service author must not take over, and then delete,
/// another Service's load balancer by naming it.
pub fn check_claim(
    config: &LoadBalancerConfig,
    name: &str,
    tags: &Tags,
    service: &str,
) -> Result<(), crate::Error> {
    let holder = tags.get(crate::shared::SERVICE_NAME_TAG).map(String::as_str);
    if config.cluster.ownership(tags) == Ownership::Owned && holder == Some(service) {
        return Ok(());
    }
    let held_by = match holder {
        Some(other) if config.cluster.ownership(tags) == Ownership::Owned => format!("Service {other}"),
        _ => "nothing of this cluster".to_owned(),
    };
    Err(crate::Error::NameTaken {
        name: name.to_owned(),
        held_by,
    })
}

/// The cluster tags among `tags`, as `key=value`.
pub(crate) fn cluster_tags(tags: &Tags) -> Vec<String> {
    tags.iter()
        .filter(|(k, _)| k.starts_with(CLUSTER_TAG_PREFIX) || *k == LEGACY_CLUSTER_TAG)
        .map(|(k, v)| format!("{k}={v}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use ccm_aws_api::VpcId;
    use ccm_tagging::ClusterTags;

    use super::*;

    fn config(adopt: bool) -> LoadBalancerConfig {
        let cluster = ClusterTags::new("c1", false).unwrap();
        LoadBalancerConfig::new(cluster, VpcId::new("vpc-1")).with_adopt_untagged(adopt)
    }

    fn tags(pairs: &[(&str, &str)]) -> Tags {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    /// Under a chosen name, only an owned load balancer naming this Service is its own: never another
    /// Service's, never an untagged one (even with adoption configured), never another cluster's.
    #[test]
    fn a_chosen_name_must_be_claimed_by_the_service() {
        let mine = tags(&[
            ("kubernetes.io/cluster/c1", "owned"),
            ("kubernetes.io/service-name", "ns/a"),
        ]);
        let other = tags(&[
            ("kubernetes.io/cluster/c1", "owned"),
            ("kubernetes.io/service-name", "ns/b"),
        ]);
        let untagged = tags(&[("kubernetes.io/service-name", "ns/a")]);
        let foreign = tags(&[
            ("kubernetes.io/cluster/c2", "owned"),
            ("kubernetes.io/service-name", "ns/a"),
        ]);
        let c = config(true);
        assert!(check_claim(&c, "web", &mine, "ns/a").is_ok());
        let e = check_claim(&c, "web", &other, "ns/a").unwrap_err();
        assert!(matches!(e, crate::Error::NameTaken { .. }), "{e}");
        assert!(e.to_string().contains("Service ns/b"), "{e}");
        assert!(e.to_string().contains("aws-load-balancer-name"), "{e}");
        for t in [&untagged, &foreign] {
            let e = check_claim(&c, "web", t, "ns/a").unwrap_err();
            assert!(e.to_string().contains("nothing of this cluster"), "{e}");
        }
    }

    #[test]
    fn the_policy_table() {
        let owned = tags(&[("kubernetes.io/cluster/c1", "owned"), ("x", "y")]);
        let legacy = tags(&[("KubernetesCluster", "c1")]);
        let foreign = tags(&[("kubernetes.io/cluster/c2", "owned")]);
        let shared = tags(&[("kubernetes.io/cluster/c1", "shared")]);
        let untagged = tags(&[("kubernetes.io/service-name", "ns/svc")]);
        for adopt in [false, true] {
            let c = config(adopt);
            assert_eq!(check(&c, "a1", &owned), Ok(true));
            assert_eq!(check(&c, "a1", &legacy), Ok(true));
            let e = check(&c, "a1", &foreign).unwrap_err();
            assert!(e.to_string().contains("kubernetes.io/cluster/c2=owned"), "{e}");
            assert!(e.to_string().contains("load balancer a1"), "{e}");
            let e = check(&c, "a1", &shared).unwrap_err();
            assert!(e.to_string().contains("kubernetes.io/cluster/c1=shared"), "{e}");
        }
        let e = check(&config(false), "a1", &untagged).unwrap_err();
        assert!(e.to_string().contains("AdoptUntaggedLoadBalancers"), "{e}");
        assert_eq!(check(&config(true), "a1", &untagged), Ok(false));
    }
}
