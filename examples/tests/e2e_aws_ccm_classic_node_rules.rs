//! End to end: a Classic ELB Service whose security group is given by annotation, with the
//! `aws-cloud-controller-manager` binary against moto and the real kube-apiserver. The nodes' group carries the
//! Go controller's all-traffic rule from that group; once the Service is served, the group allows exactly the
//! load balancer's node port (also its health check port) and no longer all traffic; deleting the Service
//! revokes that rule too (docs/security.md, "All traffic from a named group").
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::too_many_lines)]

mod common;

use std::collections::BTreeMap;

use aws_sdk_ec2::types::{Filter, IpPermission, Tag, UserIdGroupPair};
use ccm_testing::{TestEnv, unique_name};
use common::{
    Ccm, World, eventually,
    lb::{public_subnet, security_group, service},
};
use k8s_openapi::api::core::v1::Service;
use kube::{Api, api::PostParams};

/// The rules on `group` whose source is `source`: (protocol, from port).
async fn rules_from(world: &World, group: &str, source: &str) -> Vec<(String, Option<i32>)> {
    let found = world
        .raw
        .describe_security_groups()
        .group_ids(group)
        .send()
        .await
        .unwrap();
    let mut rules: Vec<(String, Option<i32>)> = found.security_groups()[0]
        .ip_permissions()
        .iter()
        .filter(|p| {
            p.user_id_group_pairs()
                .iter()
                .any(|g| g.group_id() == Some(source))
        })
        .map(|p| (p.ip_protocol().unwrap_or_default().to_owned(), p.from_port()))
        .collect();
    rules.sort();
    rules
}

#[tokio::test]
async fn e2e_a_given_group_reaches_only_the_services_ports() {
    let env = TestEnv::get();
    let world = World::new("").await;
    public_subnet(&world).await;
    // The nodes' group (the VPC's default group, tagged for the cluster) allows all traffic from the group a
    // Service author names: the Go controller's rule.
    let nodes_group = world
        .raw
        .describe_security_groups()
        .filters(
            Filter::builder()
                .name("vpc-id")
                .values(&world.network.vpc)
                .build(),
        )
        .filters(Filter::builder().name("group-name").values("default").build())
        .send()
        .await
        .unwrap()
        .security_groups()[0]
        .group_id()
        .unwrap()
        .to_owned();
    world
        .raw
        .create_tags()
        .resources(&nodes_group)
        .tags(Tag::builder().key(world.cluster_key()).value("shared").build())
        .send()
        .await
        .unwrap();
    let given = security_group(&world, &unique_name("given"), None).await;
    world
        .raw
        .authorize_security_group_ingress()
        .group_id(&nodes_group)
        .ip_permissions(
            IpPermission::builder()
                .ip_protocol("-1")
                .user_id_group_pairs(UserIdGroupPair::builder().group_id(&given).build())
                .build(),
        )
        .send()
        .await
        .unwrap();
    for l in world.launch(2).await {
        world.register_node(&l.id, None).await;
    }
    let services: Api<Service> = Api::namespaced(env.kube_client().await.unwrap(), "default");
    let mut ccm = Ccm::start(&world, &[]);

    let name = unique_name("given");
    let annotations = BTreeMap::from([(
        "service.beta.kubernetes.io/aws-load-balancer-security-groups",
        given.as_str(),
    )]);
    services
        .create(&PostParams::default(), &service(&name, &[80], &annotations))
        .await
        .unwrap();
    let node_port = services.get(&name).await.unwrap().spec.unwrap().ports.unwrap()[0]
        .node_port
        .unwrap();
    let want = vec![("tcp".to_owned(), Some(node_port))];
    let w = &world;
    let (g, s) = (nodes_group.clone(), given.clone());
    eventually(
        &mut ccm,
        "the wide rule narrowed to the node port",
        60,
        async || rules_from(w, &g, &s).await == want,
    )
    .await;
    let svcs = services.clone();
    eventually(&mut ccm, "the status hostname", 30, async || {
        svcs.get(&name)
            .await
            .unwrap()
            .status
            .and_then(|s| s.load_balancer)
            .and_then(|l| l.ingress)
            .is_some()
    })
    .await;

    services.delete(&name, &Default::default()).await.unwrap();
    eventually(&mut ccm, "the Service gone (finalizer removed)", 60, async || {
        svcs.get_opt(&name).await.unwrap().is_none()
    })
    .await;
    assert_eq!(
        rules_from(&world, &nodes_group, &given).await,
        [],
        "the given group's rule goes with the Service"
    );
    assert!(ccm.terminate().await.success());
    world.cleanup().await;
}
