//! Load balancers under names the Service chose (`aws-load-balancer-name`): a deleted-and-re-created Service's
//! leftover is leaked, going by the `kubernetes.io/service-uid` tag; one a live Service wants never is.

use std::collections::BTreeMap;

use ccm_aws_api::{Tags, elbv2::LoadBalancerV2};
use ccm_testing::fixtures::ServiceBuilder;
use k8s_openapi::api::core::v1::Service;
use serde_json::json;

use super::{classic, group, ids, owned, scope};
use crate::doctor::{Kind, Snapshot, analyze, observe::Inventory};

const NAME_ANNOTATION: &str = "service.beta.kubernetes.io/aws-load-balancer-name";
/// The UID the load balancers were made for, before their Services were deleted and re-created.
const OLD_UID: &str = "99999999-8888-7777-6666-555555555555";

/// Owned, for `service` made with UID `uid`.
fn made_for(service: &str, uid: &str) -> Tags {
    let mut tags = owned(service);
    tags.insert("kubernetes.io/service-uid".to_owned(), uid.to_owned());
    tags
}

/// A LoadBalancer Service `default/<name>` with UID `uid` and the annotations `annotations`.
fn svc(name: &str, uid: &str, annotations: &[(&str, &str)]) -> Service {
    ServiceBuilder::new("default", name)
        .uid(uid)
        .annotations(annotations)
        .build()
}

#[test]
fn a_recreated_services_load_balancer_under_a_chosen_name_is_leaked() {
    let mut db = svc("db", "d0000000-0000-0000-0000-000000000000", &[]);
    db.status = serde_json::from_value(json!({
        "loadBalancer": { "ingress": [{ "hostname": "db-lb-1234.us-east-1.elb.amazonaws.com" }] }
    }))
    .unwrap();
    let snapshot = Snapshot {
        services: vec![
            // Re-created without the annotation: it wants its UID name now.
            svc("web", "a0000000-0000-0000-0000-000000000000", &[]),
            // Re-created, its status still showing the old load balancer.
            db,
            // Re-created, but the load balancer carries no UID tag (made before it existed): no evidence.
            svc("cache", "c0000000-0000-0000-0000-000000000000", &[]),
            // Renamed, not re-created (same UID): a rename in progress is the controller's.
            svc("same", OLD_UID, &[(NAME_ANNOTATION, "new-name")]),
            // Re-created with the same annotation: it takes its load balancer back.
            svc(
                "api",
                "b0000000-0000-0000-0000-000000000000",
                &[(NAME_ANNOTATION, "api-lb")],
            ),
            // Names a load balancer tagged for a Service that does not exist.
            svc(
                "other",
                "e0000000-0000-0000-0000-000000000000",
                &[(NAME_ANNOTATION, "taken-lb")],
            ),
        ],
        ..Snapshot::default()
    };
    let inventory = Inventory {
        classic: vec![
            (classic("web-lb", &["sg-web"]), made_for("default/web", OLD_UID)),
            (classic("db-lb", &[]), made_for("default/db", OLD_UID)),
            (classic("cache-lb", &[]), owned("default/cache")),
            (classic("same-lb", &[]), made_for("default/same", OLD_UID)),
            (classic("gone-lb", &[]), owned("default/gone")),
            (classic("taken-lb", &[]), owned("default/gone")),
        ],
        v2: vec![
            (
                LoadBalancerV2::new("arn:api", "api-lb", "dns"),
                made_for("default/api", OLD_UID),
            ),
            (
                LoadBalancerV2::new("arn:old-api", "old-api-lb", "dns"),
                made_for("default/api", OLD_UID),
            ),
        ],
        groups: vec![
            // The group of the leaked `web-lb`.
            group("sg-web", "k8s-elb-web-lb", made_for("default/web", OLD_UID)),
            // A leftover's group whose load balancer an earlier --delete removed (AWS held the group then).
            group("sg-prior", "k8s-elb-prior-lb", made_for("default/web", OLD_UID)),
            // The same without a UID tag: no evidence.
            group("sg-cache", "k8s-elb-cache-old", owned("default/cache")),
        ],
        ..Inventory::default()
    };
    let found = analyze::findings(&scope(), &inventory, &snapshot, &BTreeMap::new());
    assert_eq!(
        ids(&found),
        [
            (Kind::ClassicLoadBalancer, "web-lb"),
            (Kind::ClassicLoadBalancer, "gone-lb"),
            (Kind::NetworkLoadBalancer, "arn:old-api"),
            (Kind::SecurityGroup, "sg-web"),
            (Kind::SecurityGroup, "sg-prior"),
        ],
        "{found:#?}"
    );
    assert!(found.iter().all(|f| f.deletable));
    assert_eq!(
        found[0].reason,
        format!(
            "Service default/web was recreated: load balancer web-lb was made for UID {OLD_UID}, the Service has \
             UID a0000000-0000-0000-0000-000000000000 and wants load balancer aa000000000000000000000000000000"
        )
    );
    assert_eq!(found[1].reason, "Service default/gone does not exist");
    assert!(
        found[2].reason.ends_with("wants load balancer api-lb"),
        "{}",
        found[2].reason
    );
    assert!(
        found[4]
            .reason
            .contains("load balancer prior-lb was made for UID"),
        "{}",
        found[4].reason
    );
}
