#![allow(clippy::unwrap_used, clippy::expect_used)]

use ccm_testing::fixtures::NodeBuilder;
use std::sync::{
    Arc,
    atomic::{AtomicUsize, Ordering},
};

use ccm_aws_api::{
    Catalog, CatalogLookup, Freshness, InstanceCatalog,
    ec2::{Instance, InstanceState, MockEc2},
};
use ccm_cloud_provider::Labels;
use ccm_load_balancers::NodeTargets;
use ccm_routes::RouteTargets;

use super::*;

const OWN: &str = "i-0000000000000000a";
const WORKER: &str = "i-0000000000000000c";
const FOREIGN: &str = "i-0000000000000000f";
const GONE: &str = "i-00000000000000009";
const NOWHERE: &str = "i-0000000000000000e";

/// EC2 showing OWN and WORKER (tagged for cluster `prod`) and FOREIGN (another system's), not GONE nor NOWHERE,
/// counting lookups.
fn ec2(lookups: &Arc<AtomicUsize>) -> MockEc2 {
    let mut ec2 = MockEc2::new();
    let lookups = lookups.clone();
    ec2.expect_instances_by_id().returning(move |ids| {
        lookups.fetch_add(1, Ordering::SeqCst);
        let found: Vec<Instance> = ids
            .iter()
            .filter(|id| ![GONE, NOWHERE].contains(&id.as_str()))
            .map(|id| {
                let mut i = Instance::new(id.clone(), InstanceState::Running);
                if [OWN, WORKER].contains(&id.as_str()) {
                    i.tags.insert("kubernetes.io/cluster/prod".into(), "owned".into());
                } else {
                    i.tags.insert("Name".into(), "database".into());
                }
                i
            })
            .collect();
        Box::pin(async move { Ok(found) })
    });
    ec2
}

fn membership(lookups: &Arc<AtomicUsize>) -> Arc<Membership<Catalog<MockEc2>>> {
    Arc::new(Membership::new(
        Arc::new(InstanceCatalog::new()).over(ec2(lookups)),
        ClusterTags::new("prod", false).unwrap(),
    ))
}

/// Another reader of the catalog read `id`, a member.
fn read_elsewhere(m: &Membership<Catalog<MockEc2>>, id: &str) {
    let mut i = Instance::new(InstanceId::new(id), InstanceState::Running);
    i.tags.insert("kubernetes.io/cluster/prod".into(), "owned".into());
    let _ = m.ec2.catalog().remember(&[i]);
}

fn node(name: &str, provider_id: Option<&str>) -> NodeView {
    let node = NodeBuilder::new(name);
    provider_id.map_or(node.clone(), |id| node.provider_id(id)).view()
}

fn ids(names: &[&str]) -> Vec<InstanceId> {
    names.iter().map(|n| InstanceId::new(*n)).collect()
}

#[tokio::test]
async fn members_carry_the_cluster_tag_and_answers_are_remembered() {
    let lookups = Arc::new(AtomicUsize::new(0));
    let m = membership(&lookups);
    let answers = m.answers(&ids(&[OWN, FOREIGN, GONE])).await.unwrap();
    assert_eq!(answers.get(&InstanceId::new(OWN)), Some(&true));
    assert_eq!(answers.get(&InstanceId::new(FOREIGN)), Some(&false));
    assert_eq!(answers.get(&InstanceId::new(GONE)), None, "EC2 does not show it");
    assert_eq!(lookups.load(Ordering::SeqCst), 1);
    let members = m.members(&ids(&[OWN, FOREIGN])).await.unwrap();
    assert_eq!(members, BTreeSet::from([InstanceId::new(OWN)]));
    assert_eq!(lookups.load(Ordering::SeqCst), 1, "both remembered");
    // What another reader of the catalog (the instances provider) read is not read again.
    read_elsewhere(&m, "i-0000000000000000b");
    assert_eq!(m.members(&ids(&["i-0000000000000000b"])).await.unwrap().len(), 1);
    assert_eq!(lookups.load(Ordering::SeqCst), 1);
}

#[tokio::test(start_paused = true)]
async fn an_outsider_is_read_again_after_a_minute_a_member_after_an_hour() {
    let lookups = Arc::new(AtomicUsize::new(0));
    let m = membership(&lookups);
    m.members(&ids(&[OWN, FOREIGN])).await.unwrap();
    tokio::time::advance(OUTSIDER_TTL).await;
    m.members(&ids(&[OWN])).await.unwrap();
    assert_eq!(lookups.load(Ordering::SeqCst), 1, "the member is still known");
    m.members(&ids(&[FOREIGN])).await.unwrap();
    assert_eq!(lookups.load(Ordering::SeqCst), 2, "the outsider is read again");
    tokio::time::advance(MEMBER_TTL).await;
    m.members(&ids(&[OWN])).await.unwrap();
    assert_eq!(lookups.load(Ordering::SeqCst), 3);
}

#[tokio::test]
async fn member_nodes_leave_out_other_systems_instances_only() {
    let lookups = Arc::new(AtomicUsize::new(0));
    let m = membership(&lookups);
    let own = node("own", Some(&format!("aws:///us-east-1a/{OWN}")));
    let forged = node("forged", Some(&format!("aws:///us-east-1a/{FOREIGN}")));
    let fargate = node(
        "fargate",
        Some("aws:///us-east-1a/fargate-ip-10-0-0-1.ec2.internal"),
    );
    let new = node("new", None);
    let kept = m.member_nodes(&[&own, &forged, &fargate, &new]).await.unwrap();
    let names: Vec<&str> = kept.iter().map(|n| n.name.as_str()).collect();
    assert_eq!(names, ["own", "fargate", "new"]);
}

/// The names of the Nodes that `m` keeps as load-balancer targets, and the notices of those left out.
async fn targets(m: &Membership<Catalog<MockEc2>>, nodes: &[&NodeView]) -> (Vec<String>, Vec<Notice>) {
    let (kept, notices) = NodeTargets::targets(m, nodes).await.unwrap();
    let names = kept.iter().map(|n| n.name.clone()).collect();
    (names, notices)
}

#[tokio::test]
async fn load_balancer_targets_are_member_nodes_only() {
    let lookups = Arc::new(AtomicUsize::new(0));
    let m = membership(&lookups);
    let own = node("own", Some(&format!("aws:///us-east-1a/{OWN}")));
    let forged = node("forged", Some(&format!("aws:///us-east-1a/{FOREIGN}")));
    for nodes in [[&own, &forged], [&forged, &own]] {
        let (kept, notices) = targets(&m, &nodes).await;
        assert_eq!(kept, ["own"]);
        assert_eq!(
            notices,
            [],
            "an outsider's Node is warned about by the cloud-node controller"
        );
    }
    assert_eq!(lookups.load(Ordering::SeqCst), 1);
}

/// Why `m` refuses a route to Node `node` whose instance is `instance` (when the routes know it).
async fn refusal(m: &Membership<Catalog<MockEc2>>, node: &str, instance: Option<&str>) -> Option<String> {
    let instance = instance.map(InstanceId::new);
    RouteTargets::refusal(m, node, instance.as_ref()).await.unwrap()
}

#[tokio::test]
async fn routes_never_point_at_an_instance_outside_the_cluster() {
    let lookups = Arc::new(AtomicUsize::new(0));
    let m = membership(&lookups);
    assert_eq!(refusal(&m, "own", Some(OWN)).await, None);
    let refused = refusal(&m, "forged", Some(FOREIGN)).await.unwrap();
    assert!(
        refused.contains(FOREIGN) && refused.contains("kubernetes.io/cluster/prod"),
        "{refused}"
    );
    // An `i-...` node name without a Node is checked too (the routes pass the instance it names).
    assert!(refusal(&m, FOREIGN, Some(FOREIGN)).await.is_some());
    // A private DNS name is left to the routes, which look it up among the cluster's instances only.
    assert_eq!(refusal(&m, "ip-10-0-0-1.ec2.internal", None).await, None);
    assert_eq!(count(&lookups), 2, "one lookup of each instance, remembered");
}

fn count(lookups: &Arc<AtomicUsize>) -> usize {
    lookups.load(Ordering::SeqCst)
}

/// Issue #55, item 5: a Node whose instance EC2 does not show (a made-up ID, or a zone of no Region) was looked up
/// again by every ensure, host update and drift pass.
#[tokio::test]
async fn a_node_whose_instance_is_not_found_costs_one_lookup() {
    let lookups = Arc::new(AtomicUsize::new(0));
    let m = membership(&lookups);
    let own = node("own", Some(&format!("aws:///us-east-1a/{OWN}")));
    let ghost = node("ghost", Some(&format!("aws:///us-east-1a/{GONE}")));
    let fake = node("fake", Some(&format!("aws:///zz-fake-1a/{NOWHERE}")));
    // Each ensure, host update, drift pass and plan asks once.
    for _ in 0..4 {
        assert_eq!(targets(&m, &[&own, &ghost, &fake]).await.0, ["own"]);
    }
    assert_eq!(count(&lookups), 1, "the first answer, remembered");
}

/// EC2 showing every instance (OWN and WORKER tagged for `prod`), for the instances provider.
fn instances(membership: &Arc<Membership<Catalog<MockEc2>>>) -> MemberInstances<MockEc2> {
    let reads = Arc::new(AtomicUsize::new(0));
    let config = ccm_instances::InstancesConfig::new("us-east-1");
    // Through the membership's catalog, as the AWS cloud composes them.
    let catalog = membership.ec2.hook().clone();
    let inner = AwsInstances::new(ec2(&reads), config).with_instance_catalog(&catalog);
    MemberInstances::new(inner, membership.clone())
}

const EXCLUDE: &str = "node.kubernetes.io/exclude-from-external-load-balancers";

/// The control plane's Node (created first, kept out of load balancers: the service controller never gives it to
/// them), a worker, and a Node forged later naming the control plane's instance (in another zone's form).
fn control_plane_worker_forged() -> (NodeView, NodeView, NodeView) {
    let cp = NodeBuilder::new("cp")
        .created_at(1_000)
        .label(EXCLUDE, "true")
        .provider_id(&format!("aws:///us-east-1a/{OWN}"))
        .view();
    let worker = NodeBuilder::new("worker")
        .created_at(2_000)
        .provider_id(&format!("aws:///us-east-1a/{WORKER}"))
        .view();
    let forged = NodeBuilder::new("forged")
        .created_at(3_000)
        .provider_id(&format!("aws:///us-east-1b/{OWN}"))
        .view();
    (cp, worker, forged)
}

/// Issue #55, item 6: a Node naming the instance of an older Node (the control plane's, excluded from load
/// balancers by its own Node's label) got it registered and opened.
#[tokio::test]
async fn a_node_naming_an_older_nodes_instance_is_no_target() {
    let lookups = Arc::new(AtomicUsize::new(0));
    let m = membership(&lookups);
    let (cp, worker, forged) = control_plane_worker_forged();
    // The cloud-node controller reads every Node, the excluded one included.
    let read = instances(&m).instance_metadata_batch(&[&cp]).await;
    assert_eq!(read[0].as_ref().unwrap().as_ref().unwrap().not_in_cluster, None);
    let (kept, notices) = targets(&m, &[&worker, &forged]).await;
    assert_eq!(kept, ["worker"], "the forged Node is no target");
    assert_eq!(targets(&m, &[&forged, &worker]).await.0, ["worker"]);
    // The service controller publishes the notice as a Warning Event on the forged Node.
    assert_eq!(notices.len(), 1, "{notices:?}");
    assert_eq!(notices[0].node.as_deref(), Some("forged"));
    assert!(notices[0].warning);
    assert_eq!(notices[0].reason, "InstanceNotInCluster");
    assert!(
        notices[0].message.contains(OWN) && notices[0].message.contains("Node cp"),
        "{}",
        notices[0].message
    );
}

#[tokio::test]
async fn the_cloud_node_controller_warns_about_a_node_naming_an_older_nodes_instance() {
    let lookups = Arc::new(AtomicUsize::new(0));
    let m = membership(&lookups);
    let (cp, worker, forged) = control_plane_worker_forged();
    let instances = instances(&m);
    let read = instances.instance_metadata_batch(&[&forged, &worker, &cp]).await;
    let why: Vec<Option<String>> = read
        .into_iter()
        .map(|r| r.unwrap().unwrap().not_in_cluster)
        .collect();
    assert!(why[0].as_deref().unwrap().contains("Node cp"), "{why:?}");
    assert_eq!(why[1..], [None, None]);
    // The instance stays a member (the older Node's), known without another lookup.
    assert!(
        m.members(&ids(&[OWN]))
            .await
            .unwrap()
            .contains(&InstanceId::new(OWN))
    );
    assert_eq!(count(&lookups), 0);
}

#[tokio::test]
async fn routes_never_point_at_an_older_nodes_instance_for_a_newer_node() {
    let lookups = Arc::new(AtomicUsize::new(0));
    let m = membership(&lookups);
    let (cp, worker, forged) = control_plane_worker_forged();
    RouteTargets::observe(&m, &[&forged, &worker, &cp]);
    let refused = refusal(&m, "forged", Some(OWN)).await.unwrap();
    assert!(refused.contains("Node cp"), "{refused}");
    assert_eq!(refusal(&m, "cp", Some(OWN)).await, None);
    assert_eq!(refusal(&m, "worker", Some(WORKER)).await, None);
    // Whichever way the routes found the instance.
    assert!(refusal(&m, "forged", None).await.is_some());
}

#[tokio::test(start_paused = true)]
async fn an_absent_instance_is_asked_again_after_a_while_or_learnt_at_once() {
    let lookups = Arc::new(AtomicUsize::new(0));
    let m = membership(&lookups);
    assert!(m.members(&ids(&[GONE, NOWHERE])).await.unwrap().is_empty());
    assert!(m.answers(&ids(&[GONE])).await.unwrap().is_empty(), "still absent");
    assert_eq!(count(&lookups), 1);
    tokio::time::advance(ABSENT_TTL).await;
    m.members(&ids(&[GONE])).await.unwrap();
    assert_eq!(count(&lookups), 2, "asked again once expired");
    // A brand-new instance EC2 did not show yet: the instances provider's read of it counts at once.
    read_elsewhere(&m, NOWHERE);
    assert_eq!(m.members(&ids(&[NOWHERE])).await.unwrap().len(), 1);
    assert_eq!(count(&lookups), 2);
}

#[tokio::test]
async fn of_two_nodes_naming_one_instance_the_older_is_served() {
    let lookups = Arc::new(AtomicUsize::new(0));
    let m = membership(&lookups);
    let (cp, _, forged) = control_plane_worker_forged();
    let mut cp = cp;
    cp.labels = Labels::default();
    // Both given (neither excluded), in any order: the older Node is the instance's.
    let kept = m.member_nodes(&[&forged, &cp]).await.unwrap();
    let names: Vec<&str> = kept.iter().map(|n| n.name.as_str()).collect();
    assert_eq!(names, ["cp"]);
    // Created in the same second: by name.
    let twin = |name: &str| {
        NodeBuilder::new(name)
            .created_at(5_000)
            .provider_id(&format!("aws:///us-east-1a/{WORKER}"))
            .view()
    };
    let (b, a) = (twin("b"), twin("a"));
    let kept = m.member_nodes(&[&b, &a]).await.unwrap();
    assert_eq!(kept[0].name, "a");
    assert_eq!(kept.len(), 1);
    assert_eq!(m.elder("b").map(|e| e.node), Some("a".to_owned()));
}

#[tokio::test(start_paused = true)]
async fn a_claim_not_seen_for_an_hour_is_forgotten() {
    let lookups = Arc::new(AtomicUsize::new(0));
    let m = membership(&lookups);
    let (cp, _, forged) = control_plane_worker_forged();
    m.observe(&[&cp]);
    tokio::time::advance(CLAIM_TTL / 2).await;
    assert!(
        m.member_nodes(&[&forged]).await.unwrap().is_empty(),
        "cp seen recently"
    );
    tokio::time::advance(CLAIM_TTL / 2).await;
    // The older Node was deleted (or never seen again): the instance is the remaining Node's.
    assert_eq!(m.member_nodes(&[&forged]).await.unwrap().len(), 1);
    assert_eq!(m.elder("forged"), None);
}

#[tokio::test]
async fn a_joining_nodes_instance_is_read_once_for_every_reader_of_the_catalog() {
    let catalog = Arc::new(InstanceCatalog::new());
    let (init_reads, other_reads) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let config = ccm_instances::InstancesConfig::new("us-east-1");
    let init = AwsInstances::new(ec2(&init_reads), config).with_instance_catalog(&catalog);
    let joining = node("own", Some(&format!("aws:///us-east-1a/{OWN}")));
    let read = init.instance_metadata_batch(&[&joining]).await;
    assert!(matches!(read[..], [Ok(Some(_))]), "{read:?}");
    assert_eq!(count(&init_reads), 1, "node initialization reads the instance");

    // Membership (for the load balancers' targets, the routes and tagging) and the load balancers' own reads,
    // each through its own port in front of the shared catalog: none reads the instance again.
    let membership = Membership::new(
        catalog.over(ec2(&other_reads)),
        ClusterTags::new("prod", false).unwrap(),
    );
    let members = membership.members(&ids(&[OWN])).await.unwrap();
    assert_eq!(members, BTreeSet::from([InstanceId::new(OWN)]));
    let load_balancers = Freshness::within(ccm_load_balancers::instance_reads::REUSE_FOR);
    let found = catalog
        .over(ec2(&other_reads))
        .lookup(&ids(&[OWN]), load_balancers)
        .await
        .unwrap()
        .found;
    assert_eq!(found.len(), 1);
    assert_eq!(count(&other_reads), 0, "answered from what initialization read");
}

#[tokio::test(start_paused = true)]
async fn the_address_refresh_takes_a_recent_read_of_any_reader() {
    let catalog = Arc::new(InstanceCatalog::new());
    let (init_reads, other_reads) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let config = ccm_instances::InstancesConfig::new("us-east-1");
    let instances = AwsInstances::new(ec2(&init_reads), config).with_instance_catalog(&catalog);
    let node = node("own", Some(&format!("aws:///us-east-1a/{OWN}")));
    // The load balancers read the instance (a fresh read, as for a new target).
    let fresh = Freshness::within(std::time::Duration::ZERO);
    catalog
        .over(ec2(&other_reads))
        .lookup(&ids(&[OWN]), fresh)
        .await
        .unwrap();
    assert_eq!(count(&other_reads), 1);

    tokio::time::advance(ccm_instances::RECENT_READ / 2).await;
    assert!(matches!(instances.instance_metadata(&node).await, Ok(Some(_))));
    assert_eq!(count(&init_reads), 0, "the recent read answers");
    tokio::time::advance(ccm_instances::RECENT_READ).await;
    assert!(matches!(instances.instance_metadata(&node).await, Ok(Some(_))));
    assert_eq!(count(&init_reads), 1, "an older one does not");
    // Existence checks decide whether a Node is deleted: they always read.
    assert!(instances.instance_exists(&node).await.unwrap());
    assert_eq!(count(&init_reads), 2);
}
