// These tests use the port's mocks: the crate's own tests enable `mock` (its dev-dependency on itself), which a
// packaged copy of the crate drops.
#![cfg(feature = "mock")]

use std::sync::atomic::{AtomicUsize, Ordering};

use super::*;
use crate::{
    NetworkInterfaceId, SecurityGroupId,
    ec2::{InstanceNetworkInterface, InstanceState, MockEc2},
};

fn id(n: &str) -> InstanceId {
    InstanceId::new(n)
}

/// An instance with a cluster tag, another tag and a group.
fn instance(n: &str) -> Instance {
    let mut i = Instance::new(id(n), InstanceState::Running);
    i.security_groups = vec![SecurityGroupId::new("sg-1")];
    i.tags.insert("kubernetes.io/cluster/k".into(), "owned".into());
    i.tags.insert(
        "Name".into(),
        "a node with a long name tag the catalog does not keep".into(),
    );
    i
}

/// A port that shows `shown` and counts its `instances_by_id` calls and the IDs asked.
fn ec2(shown: &'static [&'static str], calls: Arc<AtomicUsize>, asked: Arc<Mutex<Vec<String>>>) -> MockEc2 {
    let mut ec2 = MockEc2::new();
    ec2.expect_instances_by_id().returning(move |ids| {
        calls.fetch_add(1, Ordering::SeqCst);
        asked.lock().unwrap().extend(ids.iter().map(ToString::to_string));
        let found: Vec<Instance> = ids
            .iter()
            .filter(|i| shown.contains(&i.as_str()))
            .map(|i| instance(i.as_str()))
            .collect();
        Box::pin(async move { Ok(found) })
    });
    ec2
}

fn ids(lookup: &Lookup) -> Vec<String> {
    let mut found: Vec<String> = lookup.found.iter().map(|i| i.id.to_string()).collect();
    found.sort();
    found
}

#[tokio::test(start_paused = true)]
async fn a_fresh_entry_answers_and_only_the_rest_is_read() {
    let (calls, asked) = (Arc::new(AtomicUsize::new(0)), Arc::new(Mutex::new(Vec::new())));
    let catalog =
        Arc::new(InstanceCatalog::new()).over(ec2(&["i-1", "i-2", "i-3"], calls.clone(), asked.clone()));
    let fresh = Freshness::within(Duration::from_secs(30));

    let first = catalog
        .lookup(&[id("i-1"), id("i-2"), id("i-1")], fresh)
        .await
        .unwrap();
    assert_eq!(ids(&first), ["i-1", "i-2"]);
    tokio::time::advance(Duration::from_secs(10)).await;
    let second = catalog.lookup(&[id("i-1"), id("i-3")], fresh).await.unwrap();

    assert_eq!(ids(&second), ["i-1", "i-3"]);
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    assert_eq!(*asked.lock().unwrap(), ["i-1", "i-2", "i-3"], "each ID read once");
}

#[tokio::test(start_paused = true)]
async fn each_reader_gets_the_freshness_it_asks_for() {
    let (calls, asked) = (Arc::new(AtomicUsize::new(0)), Arc::new(Mutex::new(Vec::new())));
    let catalog = Arc::new(InstanceCatalog::new()).over(ec2(&["i-1"], calls.clone(), asked));
    catalog
        .lookup(&[id("i-1")], Freshness::within(Duration::from_secs(3600)))
        .await
        .unwrap();
    tokio::time::advance(Duration::from_secs(60)).await;

    let patient = Freshness::within(Duration::from_secs(3600));
    catalog.lookup(&[id("i-1")], patient).await.unwrap();
    assert_eq!(
        calls.load(Ordering::SeqCst),
        1,
        "an hour's reader is answered from the catalog"
    );
    let hasty = Freshness::within(Duration::from_secs(30));
    catalog.lookup(&[id("i-1")], hasty).await.unwrap();
    assert_eq!(calls.load(Ordering::SeqCst), 2, "a 30 s reader reads again");
}

#[tokio::test(start_paused = true)]
async fn absent_instances_are_reused_only_by_readers_that_accept_it() {
    let (calls, asked) = (Arc::new(AtomicUsize::new(0)), Arc::new(Mutex::new(Vec::new())));
    let catalog = Arc::new(InstanceCatalog::new()).over(ec2(&[], calls.clone(), asked));
    let forged = [id("i-forged")];

    let first = catalog
        .lookup(&forged, Freshness::within(Duration::from_secs(30)))
        .await
        .unwrap();
    assert!(first.found.is_empty());
    assert_eq!(first.absent, BTreeSet::from([id("i-forged")]));
    catalog
        .lookup(&forged, Freshness::within(Duration::from_secs(30)))
        .await
        .unwrap();
    assert_eq!(
        calls.load(Ordering::SeqCst),
        2,
        "absent is asked again by default"
    );

    let accepting = Freshness::within(Duration::from_secs(30)).with_absent(Duration::from_secs(600));
    let third = catalog.lookup(&forged, accepting).await.unwrap();
    assert_eq!(third.absent, BTreeSet::from([id("i-forged")]));
    assert_eq!(calls.load(Ordering::SeqCst), 2, "one lookup, not one per pass");
}

#[tokio::test(start_paused = true)]
async fn entries_expire_on_a_timer_without_any_lookup() {
    let catalog =
        Arc::new(InstanceCatalog::new().with_retention(Duration::from_secs(30), Duration::from_secs(30)));
    assert!(catalog.start_expiry());
    catalog.remember(&[instance("i-1"), instance("i-2")]);
    assert_eq!(catalog.stats().instances, 2);

    tokio::time::sleep(Duration::from_secs(20)).await;
    assert_eq!(catalog.stats().instances, 2, "kept within the retention");
    tokio::time::sleep(Duration::from_secs(30)).await;
    assert_eq!(
        catalog.stats(),
        CatalogStats::default(),
        "dropped by the timer, not by a lookup"
    );
}

#[tokio::test(start_paused = true)]
async fn the_expiry_task_ends_with_the_catalog() {
    let catalog = Arc::new(InstanceCatalog::new());
    assert!(catalog.start_expiry());
    let weak = Arc::downgrade(&catalog);
    drop(catalog);
    tokio::time::sleep(Duration::from_secs(120)).await;
    assert!(
        weak.upgrade().is_none(),
        "the task does not keep the catalog alive"
    );
}

#[test]
fn without_a_runtime_no_expiry_starts() {
    let catalog = Arc::new(InstanceCatalog::new());
    assert!(!catalog.start_expiry());
}

#[test]
fn addresses_are_kept_for_in_use_interfaces_in_device_order() {
    let eni = |n: i32, status: &str, ips: &[&str]| {
        let mut eni = InstanceNetworkInterface::new(NetworkInterfaceId::new(format!("eni-{n}")), Some(n));
        eni.status = status.into();
        eni.private_ips = ips.iter().map(|s| (*s).to_owned()).collect();
        eni.ipv6_addresses = vec![format!("2001:db8::{n}"), format!("2001:db8::{n}:2")];
        eni
    };
    let mut full = instance("i-1");
    full.instance_type = "m5.large".into();
    full.availability_zone = Some("us-east-1a".into());
    full.public_dns_name = Some("ec2-1-2-3-4.compute-1.amazonaws.com".into());
    full.network_interfaces = vec![
        eni(1, "in-use", &["10.0.1.1", "10.0.1.2"]),
        eni(2, "detaching", &["10.0.2.1"]),
        eni(0, "in-use", &["10.0.0.1", "10.0.0.9"]),
    ];
    let kept = CatalogInstance::of(&full);

    assert_eq!(
        (kept.instance_type.as_str(), kept.availability_zone.as_deref()),
        ("m5.large", Some("us-east-1a"))
    );
    assert_eq!(kept.public_dns_name, full.public_dns_name);
    let primaries: Vec<_> = kept
        .interfaces
        .iter()
        .map(|a| (a.private_ip.as_deref(), a.ipv6.as_deref()))
        .collect();
    assert_eq!(
        primaries,
        [
            (Some("10.0.0.1"), Some("2001:db8::0")),
            (Some("10.0.1.1"), Some("2001:db8::1"))
        ],
        "in-use interfaces only, primary addresses only, in device order"
    );
}

#[test]
fn only_the_fields_read_and_the_cluster_tags_are_kept() {
    let mut full = instance("i-1");
    full.tags.insert("KubernetesCluster".into(), "k".into());
    full.private_dns_name = Some("ip-10-0-0-1.ec2.internal".into());
    let kept = CatalogInstance::of(&full);

    assert_eq!(kept.id, id("i-1"));
    assert_eq!(kept.security_groups, [SecurityGroupId::new("sg-1")]);
    assert_eq!(
        kept.cluster_tags().keys().collect::<Vec<_>>(),
        ["KubernetesCluster", "kubernetes.io/cluster/k"]
    );
    let stats = {
        let catalog = InstanceCatalog::new();
        let _ = catalog.remember(&[full]);
        catalog.stats()
    };
    assert_eq!((stats.instances, stats.absent), (1, 0));
    assert!(stats.bytes >= kept.bytes(), "{stats:?}");
    assert!(
        kept.bytes() < 600,
        "a few hundred bytes, not the whole record: {}",
        kept.bytes()
    );
}

#[tokio::test(start_paused = true)]
async fn every_reader_port_teaches_the_catalog_whatever_the_call() {
    let catalog = Arc::new(InstanceCatalog::new());
    let mut other = MockEc2::new();
    other
        .expect_instances()
        .returning(|_| Box::pin(async { Ok(vec![instance("i-7")]) }));
    other
        .expect_instances_page()
        .returning(|_, _| Box::pin(async { Ok((vec![instance("i-8")], None)) }));
    let another_reader = catalog.over(other);
    another_reader.instances(&[]).await.unwrap();
    another_reader.instances_page(&[], None).await.unwrap();

    // This reader's port (a mock with no expectation) would panic if asked: both answer from what was learnt.
    let lookup = catalog
        .over(MockEc2::new())
        .lookup(&[id("i-7"), id("i-8")], Freshness::within(Duration::from_secs(1)))
        .await
        .unwrap();
    assert_eq!(ids(&lookup), ["i-7", "i-8"]);
}

#[tokio::test(start_paused = true)]
async fn without_absent_retention_nothing_absent_is_kept() {
    let (calls, asked) = (Arc::new(AtomicUsize::new(0)), Arc::new(Mutex::new(Vec::new())));
    let catalog = Arc::new(InstanceCatalog::new().with_retention(Duration::from_secs(30), Duration::ZERO));
    let port = catalog.over(ec2(&[], calls, asked));
    let accepting = Freshness::within(Duration::from_secs(30)).with_absent(Duration::from_secs(600));
    let lookup = port.lookup(&[id("i-forged")], accepting).await.unwrap();
    assert_eq!(lookup.absent, BTreeSet::from([id("i-forged")]));
    assert_eq!(catalog.stats(), CatalogStats::default());
}

#[tokio::test(start_paused = true)]
async fn a_failed_read_teaches_nothing() {
    let mut failing = MockEc2::new();
    failing.expect_instances_by_id().returning(|_| {
        Box::pin(async {
            Err(crate::AwsError::new(
                crate::ErrorKind::Throttled,
                "ec2",
                "DescribeInstances",
            ))
        })
    });
    let catalog = Arc::new(InstanceCatalog::new());
    let port = catalog.over(failing);
    let fresh = Freshness::within(Duration::from_secs(30));
    assert!(port.lookup(&[id("i-1")], fresh).await.is_err());
    assert_eq!(catalog.stats(), CatalogStats::default());
}

/// A reader that keeps what a read through its port showed takes the entries the port's hook made, not new
/// projections; an instance read elsewhere (or before the read) is remembered afresh.
#[tokio::test(start_paused = true)]
async fn held_since_shares_the_entries_the_read_made() {
    let (calls, asked) = (Arc::new(AtomicUsize::new(0)), Arc::new(Mutex::new(Vec::new())));
    let catalog = Arc::new(InstanceCatalog::new());
    let stale = catalog.remember(&[instance("i-2")]);
    tokio::time::advance(Duration::from_secs(1)).await;
    let port = catalog.over(ec2(&["i-1"], calls, asked));
    let since = Instant::now();
    let read = port.instances_by_id(&[id("i-1")]).await.unwrap();
    let made = port
        .lookup(&[id("i-1")], Freshness::within(Duration::from_secs(30)))
        .await
        .unwrap();
    let mut shown = read;
    shown.push(instance("i-2"));
    let held = catalog.held_since(&shown, since);
    assert!(Arc::ptr_eq(&held[0], &made.found[0]), "the hook's entry");
    assert!(
        !Arc::ptr_eq(&held[1], &stale[0]),
        "older than the read: remembered again"
    );
    let now = port
        .lookup(&[id("i-2")], Freshness::within(Duration::from_secs(30)))
        .await
        .unwrap();
    assert!(Arc::ptr_eq(&held[1], &now.found[0]));
}
