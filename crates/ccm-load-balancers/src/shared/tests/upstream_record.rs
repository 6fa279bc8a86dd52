//! The record of the annotation's keys under the Go controller's key (its pull request #1447): read beside ours,
//! written on NLBs, so that a takeover from, or a rollback to, such a Go controller keeps removing dropped keys.

use super::{cluster, tags};
use crate::shared::{
    ANNOTATION_TAGS_MARKER, UPSTREAM_TAGS_MARKER, dropped_tags, load_balancer_tags,
    network_load_balancer_tags, tag_additions,
};
use ccm_aws_api::Tags;

#[test]
fn keys_the_go_record_names_are_removed_once_dropped() {
    // As the Go controller with #1447 leaves an NLB: its record only.
    let go_made = tags(&[
        (UPSTREAM_TAGS_MARKER, "env,team"),
        ("env", "prod"),
        ("team", "a"),
        ("by-hand", "x"),
        ("kubernetes.io/service-name", "ns/web"),
    ]);
    let desired = tags(&[
        (ANNOTATION_TAGS_MARKER, "team"),
        (UPSTREAM_TAGS_MARKER, "team"),
        ("team", "a"),
    ]);
    assert_eq!(dropped_tags(&go_made, &desired), ["env"]);
    // The annotation gone: the keys and the Go record go; the hand tag and the Service's tag stay.
    assert_eq!(
        dropped_tags(&go_made, &tags(&[])),
        ["env", UPSTREAM_TAGS_MARKER, "team"]
    );
    // Both records: the union of what they name.
    let both = tags(&[
        (ANNOTATION_TAGS_MARKER, "team"),
        (UPSTREAM_TAGS_MARKER, "env,kubernetes.io/service-name"),
        ("env", "prod"),
        ("team", "a"),
        ("kubernetes.io/service-name", "ns/web"),
    ]);
    assert_eq!(
        dropped_tags(&both, &tags(&[])),
        ["env", ANNOTATION_TAGS_MARKER, UPSTREAM_TAGS_MARKER, "team"]
    );
}

#[test]
fn an_nlb_carries_both_records_a_classic_elb_ours_only() {
    let mut service = crate::classic::tests::service(&[], &[(80, 30080)]);
    service.metadata.annotations = Some(
        [(
            crate::annotations::Key::AdditionalResourceTags.name().to_owned(),
            "team=a,env=prod".to_owned(),
        )]
        .into(),
    );
    let spec = crate::parse_service(&service).unwrap();
    let nlb = network_load_balancer_tags(&cluster(), &spec);
    assert_eq!(nlb[ANNOTATION_TAGS_MARKER], "env team");
    // Sorted and comma separated, as the Go controller writes it, so neither rewrites the other's value.
    assert_eq!(nlb[UPSTREAM_TAGS_MARKER], "env,team");
    assert!(!load_balancer_tags(&cluster(), &spec).contains_key(UPSTREAM_TAGS_MARKER));
    // Without additional tags: no record at all.
    let plain = crate::parse_service(&crate::classic::tests::service(&[], &[(80, 30080)])).unwrap();
    assert!(!network_load_balancer_tags(&cluster(), &plain).contains_key(UPSTREAM_TAGS_MARKER));
}

#[test]
fn the_go_record_is_refused_in_the_annotation_and_written_only_with_another_change() {
    let mut service = crate::classic::tests::service(&[], &[(80, 30080)]);
    service.metadata.annotations = Some(
        [(
            crate::annotations::Key::AdditionalResourceTags.name().to_owned(),
            "kubernetes.io/cloud-controller/managed-tags=x".to_owned(),
        )]
        .into(),
    );
    let e = crate::parse_service(&service).unwrap_err().to_string();
    assert!(e.contains(&format!("{UPSTREAM_TAGS_MARKER:?} is refused")), "{e}");
    // A Go-made NLB with its tags right but without records is not written to for the records alone.
    let desired = tags(&[
        (ANNOTATION_TAGS_MARKER, "team"),
        (UPSTREAM_TAGS_MARKER, "team"),
        ("team", "a"),
    ]);
    assert_eq!(tag_additions(&tags(&[("team", "a")]), &desired), Tags::new());
}
