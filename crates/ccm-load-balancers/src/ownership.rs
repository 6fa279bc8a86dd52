//! The one ownership gate: which load balancers found under a name a Service may write to, and the [`Claim`]
//! every mutation needs.
//!
//! Every path that writes to a load balancer and what is derived from it (its managed group, target groups,
//! listeners, attributes, tags, the nodes' rules) goes through [`claim`]: ensure, host update, drift repair,
//! rename, delete, a predecessor's cleanup and adopt-on-duplicate. `classic::apply` and `nlb::apply` take a
//! [`Claim`], and only [`claim`] makes one, so a plan cannot be applied without it. The decision, for a
//! load balancer found under the name, in order:
//!
//! | what its tags say | decision |
//! | --- | --- |
//! | `kubernetes.io/cluster/<this cluster>=owned` (or legacy `KubernetesCluster=<id>`) | next row |
//! | another cluster's tag only | refused: never modified, adopted or deleted |
//! | `kubernetes.io/cluster/<this cluster>` with another value (`shared`) | refused: used by us, not ours |
//! | no cluster tag, under the Service's UID name, `[Global] AdoptUntaggedLoadBalancers = true` | adopted |
//! | no cluster tag otherwise | refused |
//! | `kubernetes.io/service-name` names another Service | refused (`NameTaken`, naming the holder) |
//! | no `kubernetes.io/service-name`, under a name the Service chose | refused: a chosen name proves nothing |
//! | `kubernetes.io/service-uid` is the Service's UID, or absent | claimed (an absent one is written then) |
//! | `kubernetes.io/service-uid` is another incarnation's | ensure: taken over (the same namespace and name, re-created); deletion: refused |
//!
//! Adoption comes before the table: an ensure of a Service that consents (`aws-load-balancer-adopt: "true"`)
//! adopts a load balancer tagged `kubernetes.io/hand-over/<this cluster's ID>=<namespace>/<name>` naming it,
//! whatever else its tags say (another tool's, another cluster's, none), but one this cluster owns for another
//! Service: that Service holds it, and must release it first. The hand-over tag is the proof a Service author
//! cannot give: it is set on the load balancer by someone with AWS rights on it (or left by this controller
//! when a Service's deletion released it), so no annotation alone makes this cluster touch what it does not
//! own. An adopted load balancer is tagged as the Service's (and `kubernetes.io/adopted=true`) by the plan.
//!
//! A load balancer under a Service's UID name (`a` + its UID) is normally its own: it is not when two clusters
//! share Service UIDs (one restored from the other's etcd backup) or when someone made it by hand. Untagged
//! ones are refused by default because this controller (like the Go one) tags everything it creates, in the
//! create call itself. Under a chosen name (`aws-load-balancer-name`, or one kept from before a rename), the
//! name proves nothing: a Service author could name another Service's load balancer, so its tags must name
//! the Service. The UID tells incarnations apart: a Service deleted and re-created under the same name while
//! its cleanup waited must not have its new load balancer deleted by the old incarnation's cleanup.

use ccm_aws_api::Tags;
use ccm_tagging::{CLUSTER_TAG_PREFIX, LEGACY_CLUSTER_TAG, Ownership};
use k8s_openapi::api::core::v1::Service;

use crate::{
    Error, LoadBalancerConfig,
    shared::{self, SERVICE_NAME_TAG, SERVICE_UID_TAG},
};

/// A load balancer under a Service's UID name that this cluster must not touch.
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

/// The Service incarnation that wants to write under a load balancer name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claimant {
    /// The load balancer's name.
    pub load_balancer: String,
    /// The Service, `namespace/name`.
    pub service: String,
    /// The Service's UID.
    pub uid: String,
    /// Whether the name is not the Service's UID name (chosen, or kept from before a rename).
    pub chosen: bool,
    /// Whether the Service consents to adopt a load balancer handed over to it (`aws-load-balancer-adopt`).
    pub adopt: bool,
}

/// What the claim is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Purpose {
    /// Create, update or repair the Service's load balancer: a predecessor's is taken over.
    Serve,
    /// Delete it: only the incarnation the tags name (or, without a UID tag, the Service they name).
    Delete,
}

/// The proof that a Service may write under a load balancer name: made only by [`claim`], required by every
/// apply. Claimed with nothing under the name, it lets the apply create the load balancer; everything else it
/// touches is found by this Service's names and tags.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claim {
    claimant: Claimant,
    adopted: bool,
}

// === impl Claimant ===

impl Claimant {
    /// The claimant of `load_balancer` for the Service `service` (`namespace/name`) of UID `uid`.
    pub fn new(load_balancer: &str, service: &str, uid: &str) -> Self {
        let chosen = shared::load_balancer_name(uid).map_or(true, |n| n != load_balancer);
        Self {
            load_balancer: load_balancer.to_owned(),
            service: service.to_owned(),
            uid: uid.to_owned(),
            chosen,
            adopt: false,
        }
    }

    /// The same claimant, consenting (or not) to adopt a load balancer handed over to its Service.
    #[must_use]
    pub fn with_adopt(mut self, adopt: bool) -> Self {
        self.adopt = adopt;
        self
    }

    /// The claimant of `load_balancer` for the Service object `service`.
    pub fn of_service(load_balancer: &str, service: &Service) -> Self {
        let (namespace, name) = crate::spec::namespace_and_name(service);
        let key = ccm_cloud_provider::namespaced_key(namespace, name);
        Self::new(
            load_balancer,
            &key,
            service.metadata.uid.as_deref().unwrap_or_default(),
        )
    }
}

// === impl Claim ===

impl Claim {
    /// The load balancer's name.
    pub fn name(&self) -> &str {
        &self.claimant.load_balancer
    }

    /// Who holds the claim.
    pub fn claimant(&self) -> &Claimant {
        &self.claimant
    }

    /// Whether the claim adopts the load balancer (handed over to the Service, not yet tagged as its own).
    pub fn adopted(&self) -> bool {
        self.adopted
    }

    /// A create answered that the name is taken (`DuplicateLoadBalancerName`, a create beside ours): the load
    /// balancer found is claimed afresh, its type and tags read again, before anything is written to it.
    pub(crate) fn confirm(&self, config: &LoadBalancerConfig, tags: &Tags) -> Result<Self, Error> {
        claim(config, &self.claimant, Some(tags), Purpose::Serve)
    }

    /// A claim for unit tests of the apply functions, which exercise the writes, not the gate.
    #[cfg(test)]
    pub(crate) fn assumed(name: &str) -> Self {
        Self {
            claimant: Claimant::new(name, "ns/svc", "uid-1"),
            adopted: false,
        }
    }
}

/// The one ownership check (see the module documentation): `found` is the tags of the load balancer under the
/// claimant's name (`None`: there is none). Refused claims are [`Error::NotOurs`] under a UID name and
/// [`Error::NameTaken`] (naming the holder) under a chosen one; nothing may be written to what they name.
pub fn claim(
    config: &LoadBalancerConfig,
    claimant: &Claimant,
    found: Option<&Tags>,
    purpose: Purpose,
) -> Result<Claim, Error> {
    let granted = || Claim {
        claimant: claimant.clone(),
        adopted: false,
    };
    let Some(tags) = found else {
        return Ok(granted());
    };
    let name = claimant.load_balancer.as_str();
    let taken = |held_by: String| Error::NameTaken {
        name: name.to_owned(),
        held_by,
    };
    let ownership = config.cluster.ownership(tags);
    let holder = tags
        .get(SERVICE_NAME_TAG)
        .filter(|_| ownership == Ownership::Owned);
    let handed_over = hand_over(config, tags) == Some(claimant.service.as_str());
    if handed_over && purpose == Purpose::Serve && holder.is_none() {
        if !claimant.adopt {
            return Err(taken(format!(
                "nothing of this cluster yet: it is handed over to Service {} (tag {}), which adopts it once \
                 annotated service.beta.kubernetes.io/aws-load-balancer-adopt: \"true\"",
                claimant.service,
                shared::hand_over_key(config.cluster.id())
            )));
        }
        tracing::info!(load_balancer = name, service = %claimant.service, owners = ?cluster_tags(tags),
            "adopting the load balancer handed over to the Service");
        return Ok(Claim {
            claimant: claimant.clone(),
            adopted: true,
        });
    }
    let adopted = ownership == Ownership::Untagged && config.adopt_untagged && !claimant.chosen;
    if ownership != Ownership::Owned && !adopted {
        return Err(if claimant.chosen {
            taken(outsider(config, claimant, tags))
        } else {
            not_ours(config, claimant, tags).into()
        });
    }
    match tags.get(SERVICE_NAME_TAG) {
        Some(holder) if *holder != claimant.service => return Err(taken(format!("Service {holder}"))),
        None if claimant.chosen => return Err(taken("nothing of this cluster".to_owned())),
        _ => {}
    }
    match tags.get(SERVICE_UID_TAG) {
        Some(uid) if *uid != claimant.uid && purpose == Purpose::Delete => Err(taken(format!(
            "Service {} of UID {uid}, another incarnation of the one being deleted",
            claimant.service
        ))),
        Some(uid) if *uid != claimant.uid => {
            tracing::info!(load_balancer = name, service = %claimant.service, previous = %uid, uid = %claimant.uid,
                "taking over the load balancer of a previous incarnation of the Service");
            Ok(granted())
        }
        _ => Ok(granted()),
    }
}

/// What holds a chosen name that is not owned by this cluster, for [`Error::NameTaken`].
fn outsider(config: &LoadBalancerConfig, claimant: &Claimant, tags: &Tags) -> String {
    let owners = cluster_tags(tags);
    let held = if owners.is_empty() {
        "nothing of this cluster (no cluster tag)".to_owned()
    } else {
        format!("nothing of this cluster (tagged {})", owners.join(", "))
    };
    held + &adoption_hint(config, claimant)
}

/// How a consenting Service gets a load balancer it does not own: only by a hand-over tag naming it.
fn adoption_hint(config: &LoadBalancerConfig, claimant: &Claimant) -> String {
    if !claimant.adopt {
        return String::new();
    }
    format!(
        "; it is adopted only once tagged {}={} (by someone with AWS rights on it, when no other tool manages \
         it any more)",
        shared::hand_over_key(config.cluster.id()),
        claimant.service
    )
}

/// The Service a load balancer is handed over to in this cluster (its hand-over tag), if any.
pub(crate) fn hand_over<'t>(config: &LoadBalancerConfig, tags: &'t Tags) -> Option<&'t str> {
    tags.get(&shared::hand_over_key(config.cluster.id()))
        .map(String::as_str)
}

/// A name taken by an ELBv2 load balancer of another type (an ALB, a gateway load balancer): AWS keeps ELBv2
/// names unique across types, so an NLB can never be made under it, and the other one is never touched.
pub fn other_type(name: &str, lb_type: &str) -> Error {
    Error::NameTaken {
        name: name.to_owned(),
        held_by: format!("a load balancer of type {lb_type}, not an NLB"),
    }
}

/// The refusal of a change that names a load balancer other than the claimed one (a defect: plans are made for
/// the claimed name only).
pub(crate) fn unclaimed(name: &str, claimed: &str) -> Error {
    Error::NameTaken {
        name: name.to_owned(),
        held_by: format!("nothing this run claimed (it claimed {claimed})"),
    }
}

/// The refusal of a load balancer under a UID name that the cluster does not own.
fn not_ours(config: &LoadBalancerConfig, claimant: &Claimant, tags: &Tags) -> NotOurs {
    let adoption = adoption_hint(config, claimant);
    let refuse = |found: String, hint: &str| NotOurs {
        name: claimant.load_balancer.clone(),
        found,
        hint: if adoption.is_empty() {
            hint.to_owned()
        } else {
            adoption.clone()
        },
    };
    match config.cluster.ownership(tags) {
        Ownership::Shared => refuse(
            format!("it is tagged {}", cluster_tags(tags).join(", ")),
            "; only `owned` load balancers are managed",
        ),
        Ownership::Foreign => refuse(
            format!(
                "it belongs to another cluster (tagged {})",
                cluster_tags(tags).join(", ")
            ),
            "; delete and re-create the Service to get a load balancer of its own",
        ),
        Ownership::Untagged | Ownership::Owned => refuse(
            "it carries no cluster tag, so it was not made by this cluster's controller".to_owned(),
            "; to adopt it, set AdoptUntaggedLoadBalancers = true in the cloud config's [Global] section",
        ),
    }
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

    const UID: &str = "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0";
    const UID_NAME: &str = "a0f1e2d3c4b5a69788796a5b4c3d2e1f";

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

    fn owned(service: &str, uid: Option<&str>) -> Tags {
        let mut t = tags(&[
            ("kubernetes.io/cluster/c1", "owned"),
            ("kubernetes.io/service-name", service),
        ]);
        if let Some(uid) = uid {
            t.insert(SERVICE_UID_TAG.to_owned(), uid.to_owned());
        }
        t
    }

    fn taken_by(result: Result<Claim, Error>) -> String {
        match result {
            Err(Error::NameTaken { held_by, .. }) => held_by,
            other => panic!("expected NameTaken, got {other:?}"),
        }
    }

    /// Under a chosen name, only an owned load balancer naming this Service is its own: never another
    /// Service's, never an untagged one (even with adoption configured), never another cluster's; the refusal
    /// names the holder.
    #[test]
    fn a_chosen_name_must_be_claimed_by_the_service() {
        let c = config(true);
        let me = Claimant::new("web", "ns/a", UID);
        assert!(me.chosen);
        for purpose in [Purpose::Serve, Purpose::Delete] {
            let mine = claim(&c, &me, Some(&owned("ns/a", Some(UID))), purpose).unwrap();
            assert_eq!(mine.name(), "web");
            let held_by = taken_by(claim(&c, &me, Some(&owned("ns/b", Some("u2"))), purpose));
            assert_eq!(held_by, "Service ns/b");
            let untagged = tags(&[("kubernetes.io/service-name", "ns/a")]);
            assert!(taken_by(claim(&c, &me, Some(&untagged), purpose)).contains("no cluster tag"));
            let foreign = tags(&[
                ("kubernetes.io/cluster/c2", "owned"),
                ("kubernetes.io/service-name", "ns/a"),
            ]);
            let held_by = taken_by(claim(&c, &me, Some(&foreign), purpose));
            assert!(held_by.contains("kubernetes.io/cluster/c2=owned"), "{held_by}");
            let nameless = tags(&[("kubernetes.io/cluster/c1", "owned")]);
            assert_eq!(
                taken_by(claim(&c, &me, Some(&nameless), purpose)),
                "nothing of this cluster"
            );
        }
        let e = claim(&c, &me, Some(&owned("ns/b", None)), Purpose::Serve).unwrap_err();
        assert!(e.to_string().contains("aws-load-balancer-name"), "{e}");
    }

    /// The UID tells incarnations apart: an ensure of the re-created Service takes over its predecessor's load
    /// balancer (the same namespace and name); the predecessor's deletion never touches the successor's. One
    /// without a UID tag (the Go controller's, or made before the tag) is claimed by the Service it names.
    #[test]
    fn the_uid_tells_incarnations_apart() {
        let c = config(false);
        let old = Claimant::new("web", "ns/a", "uid-old");
        let new = Claimant::new("web", "ns/a", "uid-new");
        let successors = owned("ns/a", Some("uid-new"));
        assert!(claim(&c, &new, Some(&owned("ns/a", Some("uid-old"))), Purpose::Serve).is_ok());
        let held_by = taken_by(claim(&c, &old, Some(&successors), Purpose::Delete));
        assert!(held_by.contains("UID uid-new"), "{held_by}");
        assert!(claim(&c, &old, Some(&owned("ns/a", Some("uid-old"))), Purpose::Delete).is_ok());
        for purpose in [Purpose::Serve, Purpose::Delete] {
            assert!(claim(&c, &old, Some(&owned("ns/a", None)), purpose).is_ok());
        }
    }

    /// Nothing under the name: a vacant claim, which only lets the apply create.
    #[test]
    fn nothing_under_the_name_is_a_vacant_claim() {
        let me = Claimant::new("web", "ns/a", UID);
        let vacant = claim(&config(false), &me, None, Purpose::Serve).unwrap();
        assert_eq!(vacant.claimant(), &me);
    }

    /// Adopt-on-duplicate: what a create found under the name is claimed afresh, as any load balancer found.
    #[test]
    fn a_duplicate_is_confirmed_like_any_load_balancer_found() {
        let c = config(false);
        let vacant = claim(&c, &Claimant::new("web", "ns/a", UID), None, Purpose::Serve).unwrap();
        let confirmed = vacant.confirm(&c, &owned("ns/a", Some(UID))).unwrap();
        assert_eq!(confirmed.name(), "web");
        assert_eq!(taken_by(vacant.confirm(&c, &owned("ns/b", None))), "Service ns/b");
        let e = other_type("web", "application");
        assert!(e.to_string().contains("type application, not an NLB"), "{e}");
    }

    /// Adoption needs both consents: the Service's annotation and the hand-over tag naming it in this cluster;
    /// never for a deletion, never of what this cluster holds for another Service.
    #[test]
    fn adoption_needs_the_hand_over_tag_and_the_services_consent() {
        let c = config(false);
        let key = shared::hand_over_key("c1");
        let willing = Claimant::new("web", "ns/a", UID).with_adopt(true);
        let albc = tags(&[
            ("elbv2.k8s.aws/cluster", "other"),
            ("service.k8s.aws/stack", "ns/a"),
        ]);
        // Consent alone: refused, naming the tag that would hand it over.
        let held_by = taken_by(claim(&c, &willing, Some(&albc), Purpose::Serve));
        assert!(held_by.contains(&format!("{key}=ns/a")), "{held_by}");
        let mut handed = albc.clone();
        handed.insert(key.clone(), "ns/a".to_owned());
        let adopted = claim(&c, &willing, Some(&handed), Purpose::Serve).unwrap();
        assert!(adopted.adopted());
        // Another cluster's tag, or none at all: the hand-over decides.
        let mut foreign = tags(&[("kubernetes.io/cluster/c2", "owned")]);
        foreign.insert(key.clone(), "ns/a".to_owned());
        assert!(
            claim(&c, &willing, Some(&foreign), Purpose::Serve)
                .unwrap()
                .adopted()
        );
        // The tag alone: refused, naming the annotation.
        let unwilling = Claimant::new("web", "ns/a", UID);
        let held_by = taken_by(claim(&c, &unwilling, Some(&handed), Purpose::Serve));
        assert!(held_by.contains("aws-load-balancer-adopt"), "{held_by}");
        // Handed over to another Service, or by another cluster's key: nothing.
        let mut elsewhere = albc.clone();
        elsewhere.insert(key.clone(), "ns/b".to_owned());
        assert!(claim(&c, &willing, Some(&elsewhere), Purpose::Serve).is_err());
        let mut other_key = albc;
        other_key.insert(shared::hand_over_key("c2"), "ns/a".to_owned());
        assert!(claim(&c, &willing, Some(&other_key), Purpose::Serve).is_err());
        // A deletion never adopts (it leaves what it does not own).
        assert!(claim(&c, &willing, Some(&handed), Purpose::Delete).is_err());
        // Held by another Service of this cluster: that one must release it first.
        let mut held = owned("ns/b", Some("u2"));
        held.insert(key.clone(), "ns/a".to_owned());
        assert_eq!(
            taken_by(claim(&c, &willing, Some(&held), Purpose::Serve)),
            "Service ns/b"
        );
        // Already this Service's: claimed as usual, not adopted again.
        let mut mine = owned("ns/a", Some(UID));
        mine.insert(key, "ns/a".to_owned());
        assert!(
            !claim(&c, &willing, Some(&mine), Purpose::Serve)
                .unwrap()
                .adopted()
        );
    }

    #[test]
    fn the_policy_table_under_the_uid_name() {
        let me = Claimant::new(UID_NAME, "ns/svc", UID);
        assert!(!me.chosen);
        let with_service = |mut t: Tags| {
            t.insert("kubernetes.io/service-name".to_owned(), "ns/svc".to_owned());
            t
        };
        let owned = with_service(tags(&[("kubernetes.io/cluster/c1", "owned"), ("x", "y")]));
        let legacy = tags(&[("KubernetesCluster", "c1")]);
        let foreign = with_service(tags(&[("kubernetes.io/cluster/c2", "owned")]));
        let shared = with_service(tags(&[("kubernetes.io/cluster/c1", "shared")]));
        let untagged = with_service(Tags::new());
        for adopt in [false, true] {
            let c = config(adopt);
            for purpose in [Purpose::Serve, Purpose::Delete] {
                assert!(claim(&c, &me, Some(&owned), purpose).is_ok());
                // Under the UID name, the name is the proof: no service-name tag is needed.
                assert!(claim(&c, &me, Some(&legacy), purpose).is_ok());
                let e = claim(&c, &me, Some(&foreign), purpose).unwrap_err();
                assert!(matches!(e, Error::NotOurs(_)), "{e}");
                assert!(e.to_string().contains("kubernetes.io/cluster/c2=owned"), "{e}");
                assert!(
                    e.to_string().contains(&format!("load balancer {UID_NAME}")),
                    "{e}"
                );
                let e = claim(&c, &me, Some(&shared), purpose).unwrap_err();
                assert!(e.to_string().contains("kubernetes.io/cluster/c1=shared"), "{e}");
            }
        }
        let e = claim(&config(false), &me, Some(&untagged), Purpose::Serve).unwrap_err();
        assert!(e.to_string().contains("AdoptUntaggedLoadBalancers"), "{e}");
        assert!(claim(&config(true), &me, Some(&untagged), Purpose::Serve).is_ok());
        // Another Service's tag under this Service's UID name: not its own.
        let other = tags(&[
            ("kubernetes.io/cluster/c1", "owned"),
            ("kubernetes.io/service-name", "ns/other"),
        ]);
        assert_eq!(
            taken_by(claim(&config(false), &me, Some(&other), Purpose::Delete)),
            "Service ns/other"
        );
    }
}
