#![allow(clippy::unwrap_used)]

use super::*;
use tokio::time::Instant;

#[test]
fn an_operation_that_overlaps_another_leaves_no_memory() {
    let memory = HostMemory::default();
    let entry = |n: u64| Entry {
        fingerprint: n,
        read_at: Instant::now(),
        state: Remembered::Classic(ClassicMemory::empty_for_tests()),
    };
    let alone = memory.begin("lb");
    memory.finish(alone, Some(entry(1)));
    assert!(memory.holds("lb"));
    // Two operations at once: neither result is kept.
    let first = memory.begin("lb");
    assert_eq!(first.entry.as_ref().map(|e| e.fingerprint), Some(1));
    assert!(!memory.holds("lb"), "taken out while in progress");
    let second = memory.begin("lb");
    assert!(second.entry.is_none());
    memory.finish(first, Some(entry(2)));
    memory.finish(second, Some(entry(3)));
    assert!(!memory.holds("lb"));
    // Forgotten while in progress (deleted): not put back.
    let third = memory.begin("lb");
    memory.forget("lb");
    memory.finish(third, Some(entry(4)));
    assert!(!memory.holds("lb"));
}

fn running(ids: &[&str], group: &str) -> Facts {
    ids.iter()
        .map(|i| ((*i).to_owned(), Fact::Running(Some(SecurityGroupId::new(group)))))
        .collect()
}

fn host_changes<C: crate::flavour::PlannedChange>(changes: Vec<C>) -> Vec<C> {
    changes.into_iter().filter(|c| c.is_host_change()).collect()
}

#[test]
fn a_classic_elb_is_planned_from_what_its_last_apply_left() {
    use crate::classic::{self, Change, tests::desired_for};
    let desired = desired_for(&[], &[(80, 30080)], &["i-1", "i-2"]);
    let observed = classic::tests::converged(&desired);
    let first = ClassicMemory::after(&observed, &[], &Ids::default()).unwrap();
    // A node joins in the same group: its registration alone.
    let joined = desired_for(&[], &[(80, 30080)], &["i-1", "i-2", "i-3"]);
    let facts = running(&["i-1", "i-2", "i-3"], "sg-node");
    let recalled = first.recall(&joined, &facts).unwrap();
    let changes = host_changes(classic::plan(&joined, &recalled));
    let register = Change::RegisterInstances {
        instances: vec!["i-3".into()],
    };
    assert_eq!(changes, [register]);
    // What the apply left: the next leave deregisters it, and nothing else.
    let memory = ClassicMemory::after(&recalled, &changes, &Ids::default()).unwrap();
    let recalled = memory.recall(&desired, &facts).unwrap();
    assert_eq!(
        host_changes(classic::plan(&desired, &recalled)),
        [Change::DeregisterInstances {
            instances: vec!["i-3".into()]
        }]
    );
    // A node in a group none of the targets had changes the nodes' rules: not planned from memory.
    let mut elsewhere = facts.clone();
    elsewhere.insert(
        "i-3".into(),
        Fact::Running(Some(SecurityGroupId::new("sg-other"))),
    );
    assert!(first.recall(&joined, &elsewhere).is_none());
    // A terminated instance is not registered.
    let mut gone = facts;
    gone.insert("i-3".into(), Fact::Gone);
    let recalled = first.recall(&joined, &gone).unwrap();
    assert!(host_changes(classic::plan(&joined, &recalled)).is_empty());
}

#[test]
fn an_nlb_is_planned_from_what_its_last_apply_left() {
    use crate::nlb::{self, Applied, Change};
    let ids = Ids::default();
    let mut desired = nlb::tests::desired(&[], &[(80, 30080), (443, 30443)]);
    let mut observed = nlb::tests::converged(&desired);
    // Created by the apply: the groups are known from what apply reports.
    observed.load_balancer = None;
    observed.target_groups.clear();
    let created = nlb::tests::converged(&desired);
    let applied = Applied {
        created: created.load_balancer.clone(),
        target_groups: created
            .target_groups
            .iter()
            .map(|g| (g.group.name.clone(), g.group.arn.clone()))
            .collect(),
        ..Applied::default()
    };
    let changes = host_changes(nlb::plan(&desired, &observed));
    let memory = NetworkMemory::after(&desired, &observed, &applied, &changes, &ids).unwrap();
    desired.instances.push("i-3".into());
    let recalled = memory.recall(&desired, &Facts::new()).unwrap();
    let changes = host_changes(nlb::plan(&desired, &recalled));
    assert_eq!(changes.len(), 2, "{changes:?}");
    assert!(
        changes
            .iter()
            .all(|c| matches!(c, Change::RegisterTargets { instances, .. } if instances == &["i-3"])),
        "{changes:?}"
    );
    // And after it, a leave is one deregistration per target group.
    let memory = NetworkMemory::after(&desired, &recalled, &Applied::default(), &changes, &ids);
    assert!(memory.is_none(), "no ARN reported: nothing remembered");
    let applied = Applied {
        target_groups: applied.target_groups,
        ..Applied::default()
    };
    let memory = NetworkMemory::after(&desired, &recalled, &applied, &changes, &ids).unwrap();
    desired.instances.pop();
    let recalled = memory.recall(&desired, &Facts::new()).unwrap();
    let changes = host_changes(nlb::plan(&desired, &recalled));
    assert_eq!(changes.len(), 2, "{changes:?}");
    assert!(
        changes
            .iter()
            .all(|c| matches!(c, Change::DeregisterTargets { targets, .. } if targets[0].0 == "i-3")),
        "{changes:?}"
    );
}

/// A remembered NLB keeps of its targets' health only whether they are leaving: one draining when the apply
/// ended is registered again by the next host update that wants it, as a fresh read would have it.
#[test]
fn an_nlb_target_leaving_when_remembered_is_registered_again_if_wanted() {
    use crate::nlb::{self, Applied, Change};
    let ids = Ids::default();
    let desired = nlb::tests::desired(&[], &[(80, 30080)]);
    let mut observed = nlb::tests::converged(&desired);
    let applied = Applied {
        target_groups: observed
            .target_groups
            .iter()
            .map(|g| (g.group.name.clone(), g.group.arn.clone()))
            .collect(),
        ..Applied::default()
    };
    let leaving = &mut observed.target_groups[0].targets[0];
    leaving.state = "draining".to_owned();
    let id = leaving.target.id.to_string();
    let memory = NetworkMemory::after(&desired, &observed, &applied, &[], &ids).unwrap();
    let recalled = memory.recall(&desired, &Facts::new()).unwrap();
    let changes = host_changes(nlb::plan(&desired, &recalled));
    assert!(
        matches!(&changes[..], [Change::RegisterTargets { instances, .. }] if instances == std::slice::from_ref(&id)),
        "{changes:?}"
    );
    // The others are registered as they were: nothing else planned, and every ID held once.
    assert_eq!(ids.len(), desired.instances.len());
}

/// The instance IDs the memories share are dropped with the last load balancer that held them.
#[test]
fn instance_ids_are_held_once_and_go_with_their_load_balancers() {
    use crate::classic::{self, tests::desired_for};
    let memory = HostMemory::default();
    for name in ["a", "b"] {
        let desired = desired_for(&[], &[(80, 30080)], &["i-1", "i-2"]);
        let state = ClassicMemory::after(&classic::tests::converged(&desired), &[], memory.ids()).unwrap();
        let ticket = memory.begin(name);
        memory.finish(
            ticket,
            Some(Entry {
                fingerprint: 1,
                read_at: Instant::now(),
                state: Remembered::Classic(state),
            }),
        );
    }
    assert_eq!(memory.ids().len(), 2, "two load balancers, two instances");
    let names = ["a".to_owned()].into();
    memory.retain(&names, &BTreeSet::new());
    assert_eq!(memory.ids().len(), 2, "still held by a");
    memory.retain(&BTreeSet::new(), &BTreeSet::new());
    assert_eq!(memory.ids().len(), 0);
}

/// Without drift detection nothing called `retain`: the instances, groups and load balancer slots ever seen
/// stayed for the life of the process. Learning drops what is too old, at most once per `MAX_AGE`.
#[tokio::test(start_paused = true)]
async fn learning_drops_what_is_too_old_to_use() {
    let memory = HostMemory::default();
    let ticket = memory.begin("gone");
    memory.finish(
        ticket,
        Some(Entry {
            fingerprint: 1,
            read_at: Instant::now(),
            state: Remembered::Classic(ClassicMemory::empty_for_tests()),
        }),
    );
    memory.learn([("i-old".to_owned(), None)], []);
    tokio::time::advance(MAX_AGE + Duration::from_secs(1)).await;
    memory.learn([("i-new".to_owned(), None)], []);
    let instances: Vec<String> = lock(&memory.instances).keys().cloned().collect();
    assert_eq!(instances, ["i-new"]);
    assert!(
        lock(&memory.load_balancers).is_empty(),
        "the stale load balancer's slot is gone"
    );
}

#[test]
fn a_services_targets_are_remembered_as_a_list_in_order_and_forgotten_on_failure() {
    let memory = HostMemory::default();
    let ids = |names: &[&str]| names.iter().map(|n| InstanceId::new(*n)).collect::<Vec<_>>();
    memory.settle_targets(Some("uid-1"), Some(ids(&["i-1", "i-2"])));

    assert!(memory.same_targets(Some("uid-1"), &ids(&["i-1", "i-2"])));
    assert!(!memory.same_targets(Some("uid-1"), &ids(&["i-1"])), "one fewer");
    assert!(
        !memory.same_targets(Some("uid-1"), &ids(&["i-1", "i-2", "i-3"])),
        "one more"
    );
    assert!(
        !memory.same_targets(Some("uid-1"), &ids(&["i-2", "i-1"])),
        "another order"
    );
    assert!(
        !memory.same_targets(Some("uid-2"), &ids(&["i-1", "i-2"])),
        "another Service"
    );
    assert!(!memory.same_targets(None, &ids(&["i-1", "i-2"])));
    memory.settle_targets::<()>(Some("uid-1"), None);
    assert!(
        !memory.same_targets(Some("uid-1"), &ids(&["i-1", "i-2"])),
        "forgotten"
    );
}

/// A drift pass while an operation is in flight on a load balancer it was not given (the controller judges
/// settled Services only): the operation's result is remembered when it ends, and kept by the next pass; a load
/// balancer left out of two passes in a row with nothing done to it in between goes, with its claim.
#[test]
fn a_drift_pass_keeps_what_an_operation_in_flight_will_remember() {
    use crate::ownership::{Claimant, Purpose, claim};
    let memory = HostMemory::default();
    let entry = Entry {
        fingerprint: 1,
        read_at: Instant::now(),
        state: Remembered::Classic(ClassicMemory::empty_for_tests()),
    };
    let none = BTreeSet::new();
    let ticket = memory.begin("lb");
    memory.retain(&none, &none);
    memory.finish(ticket, Some(entry));
    let me = Claimant::new("lb", "ns/a", "uid-1");
    memory.hold(claim(&crate::classic::tests::config(), &me, None, Purpose::Serve).unwrap());
    assert!(memory.holds("lb"), "the pass took the in-flight operation's slot");
    memory.retain(&none, &none);
    assert!(memory.holds("lb"), "ended since the last pass: kept");
    assert!(memory.claim_of(&me).is_some());
    // Judged (named) by a pass: kept whatever its age.
    memory.retain(&["lb".to_owned()].into(), &none);
    assert!(memory.holds("lb"));
    memory.retain(&none, &none);
    assert!(
        !memory.holds("lb"),
        "nothing done since the last pass, not judged: gone"
    );
    assert!(memory.claim_of(&me).is_none());
}
