//! End to end: the Service fields newer than the test apiserver's release, which its alpha feature gates let it
//! validate and store (scripts/testenv.sh turns on `MixedProtocolLBService`, `ServiceLBNodePortControl` and
//! `IPv6DualStack` with a dual-stack service range), served by the `aws-cloud-controller-manager` binary against
//! moto: a mixed-protocol NLB Service (one TCP_UDP listener), a Service with `allocateLoadBalancerNodePorts:
//! false` (a Warning naming the field, no load balancer), and `PreferDualStack` Services (both families kept by
//! the apiserver, the load balancer made and the status written without touching them): a Classic ELB (IPv4
//! only, a `LoadBalancerIPv4Only` Warning) and an NLB in a VPC without IPv6 (IPv4, a Warning naming its
//! subnets). Without the gates the
//! apiserver refuses the first Service and drops the other two fields, and this test fails.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::too_many_lines)]

mod common;

use std::collections::BTreeMap;

use ccm_testing::TestEnv;
use common::{
    Ccm, World, eventually, has_warning, initialized,
    lb::{Elb, lb_name, public_subnet},
    nlb::{Nlb, service},
};
use k8s_openapi::api::core::v1::{Event, Service};
use kube::{
    Api,
    api::{DeleteParams, PostParams},
};

#[tokio::test]
async fn e2e_mixed_protocols_node_port_control_and_dual_stack_fields() {
    let env = TestEnv::get();
    let world = World::new("").await;
    public_subnet(&world).await;
    let launched = world.launch(1).await;
    world.register_node(&launched[0].id, None).await;
    let client = env.kube_client().await.unwrap();
    let services: Api<Service> = Api::namespaced(client.clone(), "default");
    let events: Api<Event> = Api::namespaced(client.clone(), "default");
    ccm_testing::services::force_delete_load_balancers(&client, Some("default"), Some("e2e-nlb"))
        .await
        .unwrap();
    let mut ccm = Ccm::start(&world, &[]);
    let node = launched[0].id.clone();
    eventually(&mut ccm, "the node initialized", 60, async || {
        world.nodes.get(&node).await.is_ok_and(|n| initialized(&n))
    })
    .await;
    let nlb = Nlb::connect().await;
    let name = |s: &Service| lb_name(s.metadata.uid.as_deref().unwrap());

    // Mixed protocols on one port (MixedProtocolLBService): one TCP_UDP listener.
    let mixed = service("e2e-mixed", &[(53, "TCP"), (53, "UDP")], &BTreeMap::new());
    let mixed = services.create(&PostParams::default(), &mixed).await.unwrap();
    let mixed_lb = name(&mixed);
    eventually(&mut ccm, "a TCP_UDP listener on 53", 90, async || {
        nlb.listener_summary(&mixed_lb).await == [(53, "TCP_UDP".to_owned())]
    })
    .await;

    // allocateLoadBalancerNodePorts: false (ServiceLBNodePortControl): kept by the apiserver, so no node port;
    // the controller says which field keeps it from serving, and makes nothing.
    let mut no_ports = service("e2e-no-node-ports", &[(80, "TCP")], &BTreeMap::new());
    no_ports.spec.as_mut().unwrap().allocate_load_balancer_node_ports = Some(false);
    let no_ports = services.create(&PostParams::default(), &no_ports).await.unwrap();
    let spec = no_ports.spec.as_ref().unwrap();
    assert_eq!(
        spec.allocate_load_balancer_node_ports,
        Some(false),
        "the gate keeps the field"
    );
    assert_eq!(spec.ports.as_ref().unwrap()[0].node_port, None);
    let texts = ["allocateLoadBalancerNodePorts"];
    eventually(
        &mut ccm,
        "a Warning naming allocateLoadBalancerNodePorts",
        60,
        async || has_warning(&events, "e2e-no-node-ports", "SyncLoadBalancerFailed", &texts).await,
    )
    .await;
    assert!(nlb.describe(&name(&no_ports)).await.is_none(), "no NLB");

    // PreferDualStack (IPv6DualStack with a dual-stack service range): both families, a Classic ELB made for it,
    // and the families left as the apiserver set them.
    let mut dual = service("e2e-dual", &[(80, "TCP")], &BTreeMap::new());
    let meta = &mut dual.metadata;
    meta.annotations
        .as_mut()
        .unwrap()
        .remove("service.beta.kubernetes.io/aws-load-balancer-type");
    let spec = dual.spec.as_mut().unwrap();
    spec.ip_family_policy = Some("PreferDualStack".to_owned());
    let dual = services.create(&PostParams::default(), &dual).await.unwrap();
    let families = dual.spec.as_ref().unwrap().ip_families.clone();
    assert_eq!(families, Some(vec!["IPv4".to_owned(), "IPv6".to_owned()]));
    let elb = Elb(aws_sdk_elasticloadbalancing::Client::new(&env.aws_config().await));
    let dual_lb = name(&dual);
    eventually(&mut ccm, "the dual-stack Service's Classic ELB", 90, async || {
        elb.describe(&dual_lb).await.is_some()
            && services.get("e2e-dual").await.is_ok_and(|s| {
                s.status
                    .and_then(|st| st.load_balancer)
                    .and_then(|lb| lb.ingress)
                    .is_some_and(|i| !i.is_empty())
            })
    })
    .await;
    let after = services.get("e2e-dual").await.unwrap();
    assert_eq!(after.spec.unwrap().ip_families, families, "untouched");
    // A Classic ELB is IPv4 only: said in a Warning.
    let texts = ["spec.ipFamilyPolicy", "IPv4 only"];
    eventually(&mut ccm, "a LoadBalancerIPv4Only Warning", 30, async || {
        has_warning(&events, "e2e-dual", "LoadBalancerIPv4Only", &texts).await
    })
    .await;

    // The same families on an NLB in a VPC without IPv6: an IPv4 NLB (it only prefers dual-stack), and a
    // Warning naming the subnets without IPv6.
    let mut dual_nlb = service("e2e-dual-nlb", &[(80, "TCP")], &BTreeMap::new());
    dual_nlb.spec.as_mut().unwrap().ip_family_policy = Some("PreferDualStack".to_owned());
    let dual_nlb = services.create(&PostParams::default(), &dual_nlb).await.unwrap();
    let dual_nlb_lb = name(&dual_nlb);
    eventually(&mut ccm, "the dual-stack Service's NLB, IPv4", 90, async || {
        nlb.describe(&dual_nlb_lb)
            .await
            .is_some_and(|lb| lb.ip_address_type().map(|t| t.as_str()) == Some("ipv4"))
    })
    .await;
    let texts = ["PreferDualStack", "no IPv6 CIDR block"];
    eventually(
        &mut ccm,
        "a LoadBalancerIPv4Only Warning on the NLB Service",
        30,
        async || has_warning(&events, "e2e-dual-nlb", "LoadBalancerIPv4Only", &texts).await,
    )
    .await;

    for svc in ["e2e-mixed", "e2e-no-node-ports", "e2e-dual", "e2e-dual-nlb"] {
        services.delete(svc, &DeleteParams::default()).await.unwrap();
    }
    eventually(&mut ccm, "every load balancer deleted", 90, async || {
        nlb.describe(&mixed_lb).await.is_none()
            && elb.describe(&dual_lb).await.is_none()
            && nlb.describe(&dual_nlb_lb).await.is_none()
    })
    .await;
    assert!(ccm.terminate().await.success());
}
