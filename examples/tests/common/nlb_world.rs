//! The NLB end-to-end tests' world: initialized Nodes on instances in a group of their own, the CCM running,
//! and the Service helpers they share.

use std::collections::BTreeMap;

use ccm_testing::{TestEnv, unique_name};
use k8s_openapi::api::core::v1::{Event, Node, Service};
use kube::{Api, api::PostParams};

use super::{
    Ccm, World, eventually, initialized,
    lb::{lb_name, public_subnet, security_group},
    nlb::{Nlb, key, service},
};

/// The hostname in a Service's status, if any.
pub async fn hostname(services: &Api<Service>, name: &str) -> Option<String> {
    services
        .get(name)
        .await
        .ok()?
        .status?
        .load_balancer?
        .ingress?
        .first()?
        .hostname
        .clone()
}

pub async fn create(
    services: &Api<Service>,
    name: &str,
    ports: &[(i32, &str)],
    annotations: &[(&str, &str)],
) -> String {
    let annotations: BTreeMap<String, String> = annotations
        .iter()
        .map(|(k, v)| (key(k), (*v).to_owned()))
        .collect();
    let created = services
        .create(&PostParams::default(), &service(name, ports, &annotations))
        .await
        .unwrap();
    lb_name(created.metadata.uid.as_deref().unwrap())
}

/// A world with `nodes` initialized Nodes (sorted instance IDs) and the CCM running with `config`.
pub async fn start_world(
    config: &str,
    nodes: i32,
) -> (World, Vec<String>, Api<Service>, Api<Event>, Nlb, Ccm) {
    let env = TestEnv::get();
    let world = World::new(config).await;
    public_subnet(&world).await;
    // The nodes' own group, untagged as in many clusters: the NLB's node rules go there (moto would otherwise put
    // every instance in one group shared with other tests). The instances are launched in it: ministack has no
    // ModifyInstanceAttribute to move them there afterwards.
    let node_group = security_group(&world, &unique_name("nodes"), None).await;
    let launched: Vec<String> = world
        .network
        .launch_in(nodes, &node_group, &[(&world.cluster_key(), "owned")])
        .await
        .unwrap()
        .into_iter()
        .map(|l| l.id)
        .collect();
    for id in &launched {
        world.register_node(id, None).await;
    }
    let client = env.kube_client().await.unwrap();
    let services: Api<Service> = Api::namespaced(client.clone(), "default");
    // NLB Services an earlier, failed run left would be reconciled onto this run's nodes.
    ccm_testing::services::force_delete_load_balancers(&client, Some("default"), Some("e2e-nlb"))
        .await
        .unwrap();
    let events: Api<Event> = Api::namespaced(client, "default");
    let mut ccm = Ccm::start(&world, &[]);
    wait_initialized(&mut ccm, &world.nodes, &launched).await;
    let mut launched = launched;
    launched.sort();
    (world, launched, services, events, Nlb::connect().await, ccm)
}

pub async fn wait_initialized(ccm: &mut Ccm, nodes: &Api<Node>, ids: &[String]) {
    eventually(ccm, "nodes initialized", 60, async || {
        let mut all = true;
        for id in ids {
            all &= nodes.get(id).await.is_ok_and(|n| initialized(&n));
        }
        all
    })
    .await;
}
