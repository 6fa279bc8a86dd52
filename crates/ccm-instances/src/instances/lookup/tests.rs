//! The cost of lookups by private DNS name across the batches of a burst, and what the recent listing may
//! answer.

use std::{
    sync::{Arc, Mutex},
    time::Duration,
};

use ccm_aws_api::{
    Tags,
    ec2::{Instance, MockEc2},
};

use super::super::tests::{REGION, counted, instance, node, ok};
use super::*;
use crate::InstancesConfig;
use crate::{INSTANCES_PER_PAGE, LISTING_REUSE};
use ccm_cloud_provider::NodeView;
use ccm_tagging::ClusterTags;

/// One `instances` call as the mock saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Call {
    /// The cluster-wide listing (by the cluster tag), every page at once.
    Listing,
    /// One page of the cluster-wide listing: its number (1,000 instances a page).
    Page(usize),
    /// By private DNS name: the names asked.
    ByName(Vec<String>),
    /// By instance ID: the IDs asked.
    ById(Vec<String>),
}

/// EC2 as far as name lookups go: a shared set of instances (tests launch more later) and the calls made.
struct World {
    cluster: ClusterTags,
    instances: Arc<Mutex<Vec<Instance>>>,
    calls: Arc<Mutex<Vec<Call>>>,
    /// Listing pages that fail once when asked.
    failing_pages: Arc<Mutex<Vec<usize>>>,
    /// Listing pages whose reading panics once (a bug of the reader's, not an AWS error).
    panicking_pages: Arc<Mutex<Vec<usize>>>,
}

/// Whether `page` is in `pages`; takes it out (each fails once).
fn take_once(pages: &Mutex<Vec<usize>>, page: usize) -> bool {
    let mut pages = pages.lock().unwrap();
    let found = pages.iter().position(|p| *p == page);
    found.map(|k| pages.remove(k)).is_some()
}

/// The listing's pages `range`, as calls.
fn pages(range: std::ops::Range<usize>) -> Vec<Call> {
    range.map(Call::Page).collect()
}

impl World {
    fn new() -> Self {
        Self {
            cluster: ClusterTags::new("kube", false).unwrap(),
            instances: Arc::default(),
            calls: Arc::default(),
            failing_pages: Arc::default(),
            panicking_pages: Arc::default(),
        }
    }

    /// Launches instances `from..to` of the cluster in `state`; their node names are returned.
    fn launch(&self, range: std::ops::Range<usize>, state: InstanceState) -> Vec<String> {
        let mut names = Vec::new();
        let mut all = self.instances.lock().unwrap();
        for k in range {
            let mut i = instance(&format!("i-{k:017x}"), state.clone(), "m5.large");
            i.tags = Tags::from([(self.cluster.key(), "owned".to_owned())]);
            names.push(i.private_dns_name.clone().unwrap());
            all.push(i);
        }
        names
    }

    fn aws(&self) -> AwsInstances<MockEc2> {
        let mut ec2 = MockEc2::new();
        let (instances, calls, key) = (self.instances.clone(), self.calls.clone(), self.cluster.key());
        ec2.expect_instances().returning(move |filters| {
            let all = instances.lock().unwrap().clone();
            let found: Vec<Instance> = if filters[0] == Filter::tag_key(key.clone()) {
                calls.lock().unwrap().push(Call::Listing);
                all
            } else {
                assert_eq!(filters[0].name, "private-dns-name");
                assert!(filters[0].values.len() <= VALUES_PER_FILTER);
                calls
                    .lock()
                    .unwrap()
                    .push(Call::ByName(filters[0].values.clone()));
                // The live states only, as the filter asks.
                all.into_iter()
                    .filter(|i| filters[0].values.contains(i.private_dns_name.as_ref().unwrap()))
                    .filter(|i| i.state != InstanceState::Terminated)
                    .collect()
            };
            ok(found)
        });
        let (instances, calls, key) = (self.instances.clone(), self.calls.clone(), self.cluster.key());
        let (failing, panicking) = (self.failing_pages.clone(), self.panicking_pages.clone());
        ec2.expect_instances_page().returning(move |filters, token| {
            assert_eq!(filters[0], Filter::tag_key(key.clone()));
            let page: usize = token.map_or(0, |t| t.parse().unwrap());
            calls.lock().unwrap().push(Call::Page(page));
            if take_once(&panicking, page) {
                return Box::pin(async move { panic!("reading page {page} panics") });
            }
            if take_once(&failing, page) {
                return Box::pin(async {
                    Err(ccm_aws_api::AwsError::new(
                        ccm_aws_api::ErrorKind::Transient,
                        "ec2",
                        "DescribeInstances",
                    ))
                });
            }
            let all = instances.lock().unwrap().clone();
            let end = all.len().min((page + 1) * INSTANCES_PER_PAGE);
            let found = all[page * INSTANCES_PER_PAGE..end].to_vec();
            let next = (end < all.len()).then(|| (page + 1).to_string());
            Box::pin(async move { Ok((found, next)) })
        });
        let (instances, calls) = (self.instances.clone(), self.calls.clone());
        ec2.expect_instances_by_id().returning(move |ids| {
            let asked: Vec<String> = ids.iter().map(ToString::to_string).collect();
            calls.lock().unwrap().push(Call::ById(asked));
            let all = instances.lock().unwrap().clone();
            ok(all.into_iter().filter(|i| ids.contains(&i.id)).collect())
        });
        counted(&mut ec2);
        AwsInstances::new(
            ec2,
            InstancesConfig::new(REGION).with_cluster(self.cluster.clone()),
        )
    }

    fn take_calls(&self) -> Vec<Call> {
        std::mem::take(&mut *self.calls.lock().unwrap())
    }
}

/// Waits until no task reads `aws`'s listing ahead (its calls are then all made).
async fn read_ahead_done(aws: &AwsInstances<MockEc2>) {
    while aws.lock_listing().reading_ahead() {
        tokio::task::yield_now().await;
    }
}

fn nodes(names: &[String]) -> Vec<NodeView> {
    names.iter().map(|n| node(n, None, &[])).collect()
}

/// Initializes `names`, asserting every one found its own instance.
async fn initialize(aws: &AwsInstances<MockEc2>, names: &[String]) {
    let nodes = nodes(names);
    let refs: Vec<&NodeView> = nodes.iter().collect();
    for (name, meta) in names.iter().zip(aws.metadata(&refs).await) {
        let id = name.trim_start_matches("ip-").trim_end_matches(".ec2.internal");
        assert_eq!(
            meta.unwrap().unwrap().provider_id,
            format!("aws:///us-west-2a/{id}"),
            "{name}"
        );
    }
}

/// 5,000 instances initialized in `batches` (as a burst brings them: the first few Nodes alone, then what piled
/// up during each lookup): the world, its names and the AWS side, with the calls already taken.
async fn burst(batches: &[usize]) -> (World, Vec<String>, AwsInstances<MockEc2>, Vec<Call>) {
    let world = World::new();
    let names = world.launch(0..5000, InstanceState::Running);
    let aws = world.aws();
    let mut start = 0;
    for size in batches {
        initialize(&aws, &names[start..start + size]).await;
        start += size;
    }
    assert_eq!(start, 5000);
    read_ahead_done(&aws).await;
    let calls = world.take_calls();
    (world, names, aws, calls)
}

#[tokio::test]
async fn a_burst_of_5000_nodes_lists_the_cluster_once() {
    let (_, names, _, calls) = burst(&[10, 300, 1000, 1000, 1000, 1000, 690]).await;
    let mut listed = vec![Call::ByName(names[..10].to_vec())];
    listed.extend(pages(0..5));
    assert_eq!(calls, listed);
}

/// The 5,000-Node scale run's burst began with two small batches (10, then 26 Nodes) before the big ones: asked
/// by name, the second cost a call beside the listing's pages. Only the first goes by name.
#[tokio::test]
async fn a_burst_whose_first_batches_are_small_asks_by_name_only_once() {
    let (world, names, aws, calls) = burst(&[10, 26, 964, 1000, 1000, 1000, 1000]).await;
    let mut listed = vec![Call::ByName(names[..10].to_vec())];
    listed.extend(pages(0..5));
    assert_eq!(calls, listed);
    // The size is known now: a Node joining later is asked by name again (one call, not five pages).
    let late = world.launch(5000..5001, InstanceState::Running);
    initialize(&aws, &late).await;
    assert_eq!(world.take_calls(), [Call::ByName(late)]);
}

/// The Go provider's pattern, for the scale harness's upstream column: with listing off, every batch is asked
/// by name, 200 names a call, whatever the cluster's size.
#[tokio::test]
async fn with_listing_off_names_are_always_asked_by_name() {
    let world = World::new();
    let names = world.launch(0..1000, InstanceState::Running);
    let aws = world.aws().with_cluster_listing(false);
    initialize(&aws, &names[..1]).await;
    initialize(&aws, &names[1..]).await;
    let calls = world.take_calls();
    assert_eq!(calls.len(), 6, "{calls:?}");
    assert!(calls.iter().all(|c| matches!(c, Call::ByName(_))), "{calls:?}");
}

#[tokio::test(start_paused = true)]
async fn a_burst_paced_by_the_kubernetes_writes_lists_the_cluster_once() {
    let world = World::new();
    let names = world.launch(0..5000, InstanceState::Running);
    let aws = world.aws();
    // The 5,000-Node scale run: the controller's writes (about 33 Nodes a second at --kube-api-qps=100) make
    // the burst last two and a half minutes, so the batches after the first listing come 30 s apart.
    initialize(&aws, &names[..5]).await;
    let mut start = 5;
    for wait in [20, 30, 30, 30, 30] {
        tokio::time::advance(Duration::from_secs(wait)).await;
        let end = (start + 1000).min(names.len());
        initialize(&aws, &names[start..end]).await;
        start = end;
    }
    assert_eq!(start, 5000);
    let mut listed = vec![Call::ByName(names[..5].to_vec())];
    listed.extend(pages(0..5));
    assert_eq!(world.take_calls(), listed);
}

/// A batch of Nodes named both ways (half by instance ID, half by private DNS name) whose names need a listing:
/// the listing answers the IDs too, so a 1,000-Node burst in a cluster of 1,000 instances costs the listing's
/// page, not a second call by ID (the moto test `e2e_node_burst`).
#[tokio::test]
async fn a_listing_made_for_the_names_answers_the_ids_of_the_batch() {
    let world = World::new();
    let names = world.launch(0..1000, InstanceState::Running);
    let aws = world.aws();
    // The mock answers no lookup by ID: one would fail the test.
    let batch: Vec<String> = (0..1000)
        .map(|k| {
            if k % 2 == 0 {
                format!("i-{k:017x}")
            } else {
                names[k].clone()
            }
        })
        .collect();
    initialize(&aws, &batch).await;
    assert_eq!(world.take_calls(), pages(0..1));
}

#[tokio::test]
async fn names_the_listing_lacks_are_asked_by_name_while_that_is_fewer_calls() {
    let world = World::new();
    let first = world.launch(0..5000, InstanceState::Running);
    let aws = world.aws();
    initialize(&aws, &first[..1000]).await;
    initialize(&aws, &first[4999..]).await;
    assert_eq!(world.take_calls(), pages(0..5));

    // 300 instances launched after the listing was complete: two calls by name (five pages to list again).
    let late = world.launch(5000..5300, InstanceState::Running);
    let mut batch = first[1000..1700].to_vec();
    batch.extend(late.iter().cloned());
    initialize(&aws, &batch).await;
    assert_eq!(
        world.take_calls(),
        [
            Call::ByName(late[..200].to_vec()),
            Call::ByName(late[200..].to_vec())
        ]
    );

    // 1,200 new names cost six calls by name, more than listing the cluster again (five pages last time); the
    // new listing asks its pages until it found them, the cluster's seven now.
    let later = world.launch(5300..6500, InstanceState::Running);
    initialize(&aws, &later).await;
    assert_eq!(world.take_calls(), pages(0..7));
    // ...and that listing answers the 300 late ones now.
    initialize(&aws, &late).await;
    assert_eq!(world.take_calls(), []);
}

/// The 5,000-Node burst waited for the listing's five pages (ten seconds each on moto) before initializing any
/// Node: a lookup asks pages only until its names are answered, and the rest of the listing is read ahead
/// meanwhile (the burst's next batches then find their pages in, instead of waiting a page's time for each).
#[tokio::test]
async fn a_lookup_answers_from_the_first_pages_and_the_rest_is_read_ahead() {
    let world = World::new();
    let names = world.launch(0..5000, InstanceState::Running);
    let aws = world.aws();
    initialize(&aws, &names[..10]).await;
    assert_eq!(world.take_calls(), [Call::ByName(names[..10].to_vec())]);
    initialize(&aws, &names[10..50]).await;
    assert_eq!(world.calls.lock().unwrap().first(), Some(&Call::Page(0)));
    read_ahead_done(&aws).await;
    assert_eq!(
        world.take_calls(),
        pages(0..5),
        "read ahead to the end, each page once"
    );
    initialize(&aws, &names[50..5000]).await;
    assert_eq!(world.take_calls(), [], "the later batches find their pages in");
    // Complete: a name it lacks is missing, with no further call in the same lookup.
    let gone = world.launch(5000..5001, InstanceState::Running);
    world.instances.lock().unwrap().pop();
    let missing = nodes(&gone);
    let refs: Vec<&NodeView> = missing.iter().collect();
    assert!(aws.metadata(&refs).await[0].is_err());
    assert_eq!(world.take_calls(), [Call::ByName(gone)]);
}

/// A page that fails fails the names still waiting for it, and the next lookup asks that page again (never the
/// pages already in); a failed lookup reads nothing ahead.
#[tokio::test]
async fn a_failed_page_is_asked_again_by_the_next_lookup() {
    let world = World::new();
    let names = world.launch(0..3000, InstanceState::Running);
    let aws = world.aws();
    initialize(&aws, &names[..1]).await;
    world.take_calls();
    world.failing_pages.lock().unwrap().push(1);
    let asked = nodes(&names[1..1500]);
    let refs: Vec<&NodeView> = asked.iter().collect();
    let out = aws.metadata(&refs).await;
    assert!(out[..999].iter().all(Result::is_ok), "page 0 answers its names");
    assert!(out[999..].iter().all(Result::is_err), "page 1 failed");
    read_ahead_done(&aws).await;
    assert_eq!(world.take_calls(), pages(0..2));
    initialize(&aws, &names[1000..1500]).await;
    read_ahead_done(&aws).await;
    assert_eq!(world.take_calls(), pages(1..3));
}

/// `count` instances; the first initialized by name, then 499 more while page 1 of the listing is in `marked`
/// (failing or panicking): asserts the read-ahead ended (within 10 s) at that page, with its calls taken.
async fn read_ahead_stopped_at_page_one(
    count: usize,
    marked: impl Fn(&World) -> &Arc<Mutex<Vec<usize>>>,
) -> (World, Vec<String>, AwsInstances<MockEc2>) {
    let world = World::new();
    let names = world.launch(0..count, InstanceState::Running);
    let aws = world.aws();
    initialize(&aws, &names[..1]).await;
    marked(&world).lock().unwrap().push(1);
    initialize(&aws, &names[1..500]).await;
    tokio::time::timeout(Duration::from_secs(10), read_ahead_done(&aws))
        .await
        .expect("the read-ahead is marked ended");
    let mut calls = vec![Call::ByName(names[..1].to_vec())];
    calls.extend(pages(0..2));
    assert_eq!(
        world.take_calls(),
        calls,
        "the read-ahead stopped at the marked page"
    );
    (world, names, aws)
}

/// A page the read-ahead could not get is asked by the lookup that needs it.
#[tokio::test]
async fn a_page_the_read_ahead_failed_is_asked_by_the_lookup_that_needs_it() {
    let (world, names, aws) = read_ahead_stopped_at_page_one(3000, |w| &w.failing_pages).await;
    initialize(&aws, &names[2500..3000]).await;
    read_ahead_done(&aws).await;
    assert_eq!(world.take_calls(), pages(1..3));
}

/// A read-ahead whose task panics marks itself ended all the same: later lookups read ahead again (before, the
/// mark stayed set and no lookup read ahead for the rest of the process's life).
#[tokio::test]
async fn a_read_ahead_that_panicked_does_not_stop_later_ones() {
    let (world, names, aws) = read_ahead_stopped_at_page_one(4000, |w| &w.panicking_pages).await;
    initialize(&aws, &names[1000..1500]).await;
    read_ahead_done(&aws).await;
    assert_eq!(
        world.take_calls(),
        pages(1..4),
        "the lookup asks its page, the rest is read ahead"
    );
}

/// Two live instances under one name on different pages: the first page answered it; once the second is seen,
/// the name is no longer answered from the listing but asked by name, which reports both.
#[tokio::test]
async fn a_name_shared_across_pages_is_not_answered_once_the_second_is_seen() {
    let world = World::new();
    let names = world.launch(0..1500, InstanceState::Running);
    {
        let mut all = world.instances.lock().unwrap();
        all[1200].private_dns_name = Some(names[300].clone());
    }
    let aws = world.aws();
    initialize(&aws, &names[..1]).await;
    initialize(&aws, &names[300..301]).await;
    initialize(&aws, &names[1300..1301]).await;
    world.take_calls();
    let twin = nodes(&names[300..301]);
    let refs: Vec<&NodeView> = twin.iter().collect();
    let out = aws.metadata(&refs).await;
    assert!(
        matches!(&out[0], Err(InstancesError::MultipleInstances { ids, .. }) if ids.len() == 2),
        "{out:?}"
    );
    assert_eq!(world.take_calls(), [Call::ByName(names[300..301].to_vec())]);
}

#[tokio::test(start_paused = true)]
async fn the_listing_answers_only_initialization_and_only_for_the_reuse_time() {
    let world = World::new();
    let names = world.launch(0..300, InstanceState::Running);
    let aws = world.aws();
    initialize(&aws, &names).await;
    assert_eq!(world.take_calls(), pages(0..1));

    // Existence decides whether a Node is deleted: always asked afresh (300 names: two calls by name, or a
    // one-page listing).
    let checked = nodes(&names);
    let refs: Vec<&NodeView> = checked.iter().collect();
    assert!(aws.exists(&refs).await.iter().all(|r| matches!(r, Ok(true))));
    assert!(aws.shutdown(&refs).await.iter().all(|r| matches!(r, Ok(false))));
    assert_eq!(world.take_calls(), [Call::Listing, Call::Listing]);

    tokio::time::advance(LISTING_REUSE - Duration::from_secs(1)).await;
    initialize(&aws, &names).await;
    assert_eq!(world.take_calls(), []);
    tokio::time::advance(Duration::from_secs(1)).await;
    initialize(&aws, &names).await;
    assert_eq!(world.take_calls(), pages(0..1));
}

/// A quiet cluster keeps no listing: a timer drops it once too old to answer, with no lookup to notice.
#[tokio::test(start_paused = true)]
async fn the_listing_is_dropped_on_a_timer_without_any_lookup() {
    let world = World::new();
    let names = world.launch(0..300, InstanceState::Running);
    let aws = world.aws();
    initialize(&aws, &names).await;
    assert!(aws.lock_listing().holds_listing());
    tokio::time::sleep(LISTING_REUSE - Duration::from_secs(1)).await;
    assert!(aws.lock_listing().holds_listing(), "kept while it answers");
    tokio::time::sleep(LISTING_REUSE / 5 + Duration::from_secs(1)).await;
    assert!(!aws.lock_listing().holds_listing(), "dropped by the timer");
}

#[tokio::test]
async fn only_running_instances_with_a_name_of_their_own_are_answered_from_the_listing() {
    let world = World::new();
    let running = world.launch(0..250, InstanceState::Running);
    let pending = world.launch(250..251, InstanceState::Pending);
    let shared = {
        let mut all = world.instances.lock().unwrap();
        let mut twin = all[0].clone();
        twin.id = InstanceId::new("i-0fffffffffffffff0");
        let name = twin.private_dns_name.clone().unwrap();
        // The twin takes instance 1's name: two live instances now answer to it.
        all[1].private_dns_name = Some(name.clone());
        all.push(twin);
        name
    };
    let aws = world.aws();
    let first = nodes(&running[2..]);
    let refs: Vec<&NodeView> = first.iter().collect();
    assert!(aws.metadata(&refs).await.iter().all(Result::is_ok));
    assert_eq!(world.take_calls(), pages(0..1));

    let asked = vec![running[5].clone(), pending[0].clone(), shared.clone()];
    let second = nodes(&asked);
    let refs: Vec<&NodeView> = second.iter().collect();
    let out = aws.metadata(&refs).await;
    assert!(out[0].is_ok() && out[1].is_ok(), "{out:?}");
    assert!(
        matches!(&out[2], Err(InstancesError::MultipleInstances { name, ids }) if *name == shared && ids.len() == 3),
        "{out:?}"
    );
    let mut fresh = vec![pending[0].clone(), shared];
    fresh.sort();
    assert_eq!(world.take_calls(), [Call::ByName(fresh)]);
}

/// AWS reuses private addresses: an instance launched into a terminated one's address answers to its name. A
/// listing taken before a Node was created may name the dead instance: its answer is confirmed by ID, and a
/// name whose instance is gone is asked afresh, so the Node gets the new instance (never the dead one's ID).
#[tokio::test]
async fn a_listing_older_than_the_node_is_confirmed_and_a_recycled_name_asked_afresh() {
    let world = World::new();
    let names = world.launch(0..300, InstanceState::Running);
    let aws = world.aws();
    initialize(&aws, &names).await;
    assert_eq!(world.take_calls(), pages(0..1));
    // Instance 7 is terminated and a new one takes its address, so its name.
    let (dead, new) = {
        let mut all = world.instances.lock().unwrap();
        all[7].state = InstanceState::Terminated;
        let mut new = all[7].clone();
        new.id = InstanceId::new("i-0eeeeeeeeeeeeeee1");
        new.state = InstanceState::Running;
        all.push(new.clone());
        (all[7].id.to_string(), new.id.to_string())
    };
    // Two Nodes registered after the listing: instance 8's, and the recycled name's.
    let created =
        k8s_openapi::apimachinery::pkg::apis::meta::v1::Time("2100-01-01T00:00:00Z".parse().unwrap());
    let mut later = nodes(&[names[8].clone(), names[7].clone()]);
    for n in &mut later {
        n.creation_timestamp = Some(created.clone());
    }
    let refs: Vec<&NodeView> = later.iter().collect();
    let out = aws.metadata(&refs).await;
    let ids: Vec<String> = out
        .into_iter()
        .map(|m| {
            m.unwrap()
                .unwrap()
                .provider_id
                .rsplit('/')
                .next()
                .unwrap()
                .to_owned()
        })
        .collect();
    let eight = names[8]
        .trim_start_matches("ip-")
        .trim_end_matches(".ec2.internal")
        .to_owned();
    assert_eq!(ids, [eight.clone(), new], "never the dead instance");
    assert_eq!(
        world.take_calls(),
        [
            Call::ById(vec![dead, eight]),
            Call::ByName(vec![names[7].clone()])
        ]
    );
    // A Node older than the listing is answered from it, as before.
    initialize(&aws, &names[9..10]).await;
    assert_eq!(world.take_calls(), []);
}
