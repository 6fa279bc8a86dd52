#![allow(clippy::unwrap_used, clippy::expect_used)]

use ccm_testing::fixtures::NodeBuilder;
use std::sync::{
    Arc, Mutex,
    atomic::{AtomicUsize, Ordering},
};

use ccm_aws_api::ec2::{Instance, InstanceState, MockEc2};
use ccm_cloud_provider::{LoadBalancer, Route, Routes};
use k8s_openapi::api::core::v1::{LoadBalancerStatus, Service};

use super::*;

const OWN: &str = "i-0000000000000000a";
const FOREIGN: &str = "i-0000000000000000f";
const GONE: &str = "i-00000000000000009";

/// EC2 showing OWN (tagged for cluster `prod`) and FOREIGN (another system's), counting lookups.
fn ec2(lookups: &Arc<AtomicUsize>) -> MockEc2 {
    let mut ec2 = MockEc2::new();
    let lookups = lookups.clone();
    ec2.expect_instances_by_id().returning(move |ids| {
        lookups.fetch_add(1, Ordering::SeqCst);
        let found: Vec<Instance> = ids
            .iter()
            .filter(|id| id.as_str() != GONE)
            .map(|id| {
                let mut i = Instance::new(id.clone(), InstanceState::Running);
                if id.as_str() == OWN {
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

fn membership(lookups: &Arc<AtomicUsize>) -> Arc<Membership<MockEc2>> {
    Arc::new(Membership::new(
        ec2(lookups),
        ClusterTags::new("prod", false).unwrap(),
    ))
}

fn node(name: &str, provider_id: Option<&str>) -> Node {
    let node = NodeBuilder::new(name);
    provider_id
        .map_or(node.clone(), |id| node.provider_id(id))
        .build()
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
    // What the instances provider learnt is not read again.
    m.learn(InstanceId::new("i-0000000000000000b"), true);
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
    let names: Vec<&str> = kept.iter().map(|n| n.metadata.name.as_deref().unwrap()).collect();
    assert_eq!(names, ["own", "fargate", "new"]);
}

/// A load balancer recording the node names it was given.
#[derive(Default)]
struct Recorder(Mutex<Vec<Vec<String>>>);

impl Recorder {
    fn record(&self, nodes: &[&Node]) {
        let names = nodes.iter().map(|n| n.metadata.name.clone().unwrap()).collect();
        self.0.lock().unwrap().push(names);
    }
}

impl LoadBalancer for Recorder {
    async fn get_load_balancer(&self, _: &str, _: &Service) -> CloudResult<Option<LoadBalancerStatus>> {
        Ok(None)
    }
    fn load_balancer_name(&self, _: &str, _: &Service) -> String {
        String::new()
    }
    async fn ensure_load_balancer(
        &self,
        _: &str,
        _: &Service,
        nodes: &[&Node],
    ) -> CloudResult<LoadBalancerStatus> {
        self.record(nodes);
        Ok(LoadBalancerStatus::default())
    }
    async fn update_load_balancer(&self, _: &str, _: &Service, nodes: &[&Node]) -> CloudResult<()> {
        self.record(nodes);
        Ok(())
    }
    async fn ensure_load_balancer_deleted(&self, _: &str, _: &Service) -> CloudResult<()> {
        Ok(())
    }
    async fn drifted(
        &self,
        _: &str,
        _: &[&Service],
        nodes: &[&Node],
    ) -> CloudResult<Vec<ccm_cloud_provider::Drift>> {
        self.record(nodes);
        Ok(Vec::new())
    }
}

#[tokio::test]
async fn load_balancers_are_given_member_nodes_only() {
    let lookups = Arc::new(AtomicUsize::new(0));
    let lbs = MemberLoadBalancers::new(Recorder::default(), membership(&lookups));
    let own = node("own", Some(&format!("aws:///us-east-1a/{OWN}")));
    let forged = node("forged", Some(&format!("aws:///us-east-1a/{FOREIGN}")));
    let service = Service::default();
    lbs.ensure_load_balancer("k", &service, &[&own, &forged])
        .await
        .unwrap();
    lbs.ensure_load_balancer_reporting("k", &service, &[&own, &forged])
        .await
        .unwrap();
    lbs.update_load_balancer("k", &service, &[&forged, &own])
        .await
        .unwrap();
    lbs.drifted("k", &[&service], &[&own, &forged]).await.unwrap();
    let seen = lbs.inner().0.lock().unwrap().clone();
    assert_eq!(seen, vec![vec!["own".to_owned()]; 4]);
    assert_eq!(lookups.load(Ordering::SeqCst), 1);
}

/// Routes counting the routes they were asked to create.
#[derive(Default)]
struct Created(AtomicUsize);

impl Routes for Created {
    async fn list_routes(&self, _: &str) -> CloudResult<Vec<Route>> {
        Ok(Vec::new())
    }
    async fn create_route(&self, _: &str, _: &str, _: &Route) -> CloudResult<()> {
        self.0.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
    async fn delete_route(&self, _: &str, _: &Route) -> CloudResult<()> {
        Ok(())
    }
}

fn route(node: &str) -> Route {
    Route {
        target_node: node.into(),
        destination_cidr: "10.244.1.0/24".into(),
        ..Default::default()
    }
}

#[tokio::test]
async fn routes_never_point_at_an_instance_outside_the_cluster() {
    let lookups = Arc::new(AtomicUsize::new(0));
    let routes = MemberRoutes::new(Created::default(), membership(&lookups));
    let own = node("own", Some(&format!("aws:///us-east-1a/{OWN}")));
    let forged = node("forged", Some(&format!("aws:///us-east-1a/{FOREIGN}")));
    routes.observe_nodes(&[&own, &forged]);
    routes.create_route("k", "uid-1", &route("own")).await.unwrap();
    let refused = routes
        .create_route("k", "uid-2", &route("forged"))
        .await
        .unwrap_err();
    let text = refused.to_string();
    assert!(
        text.contains(FOREIGN) && text.contains("kubernetes.io/cluster/prod"),
        "{text}"
    );
    // An `i-...` node name without a Node is checked too.
    routes
        .create_route("k", "uid-3", &route(FOREIGN))
        .await
        .unwrap_err();
    // A private DNS name is left to the routes, which look it up among the cluster's instances only.
    routes
        .create_route("k", "uid-4", &route("ip-10-0-0-1.ec2.internal"))
        .await
        .unwrap();
    assert_eq!(routes.inner().0.load(Ordering::SeqCst), 2);
}
