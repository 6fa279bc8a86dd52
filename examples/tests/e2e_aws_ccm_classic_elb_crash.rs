//! End to end, crash safety: the `aws-cloud-controller-manager` binary is killed (SIGKILL) in the middle of
//! creating a Classic ELB, at every mutating AWS call of the creation in turn: a fault proxy between the CCM and
//! moto swallows that call, and once the CCM has sent it (so every earlier mutation is done) the process is
//! killed. A fresh CCM talking to moto directly then converges to exactly one load balancer and one security
//! group for the Service, and deleting the Service leaves neither behind.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::too_many_lines)]

mod common;

use std::time::Duration;

use ccm_testing::{Fault, FaultProxy, TestEnv, unique_name};
use common::{
    Ccm, World, eventually, initialized,
    lb::{Elb, lb_name, managed_groups, public_subnet, service},
};
use k8s_openapi::api::core::v1::Service;
use kube::{Api, api::PostParams};

/// Every mutating call a Classic ELB's creation may make, in no particular order; those a creation does not make
/// are reported and skipped.
const MUTATIONS: [&str; 11] = [
    "CreateSecurityGroup",
    "AuthorizeSecurityGroupIngress",
    "CreateTags",
    "CreateLoadBalancer",
    "AddTags",
    "ConfigureHealthCheck",
    "ModifyLoadBalancerAttributes",
    "ApplySecurityGroupsToLoadBalancer",
    "RegisterInstancesWithLoadBalancer",
    "CreateLoadBalancerListeners",
    "AttachLoadBalancerToSubnets",
];

#[tokio::test]
async fn e2e_a_ccm_killed_mid_creation_converges_after_a_restart() {
    let env = TestEnv::get();
    let world = World::new("").await;
    public_subnet(&world).await;
    let launched = world.launch(2).await;
    for l in &launched {
        world.register_node(&l.id, None).await;
    }
    let services: Api<Service> = Api::namespaced(env.kube_client().await.unwrap(), "default");
    let elb = Elb(aws_sdk_elasticloadbalancing::Client::new(&env.aws_config().await));
    let nodes = world.nodes.clone();

    let mut crashed_at = Vec::new();
    for (k, action) in MUTATIONS.iter().enumerate() {
        let proxy = FaultProxy::start(&env.aws_endpoint).await.unwrap();
        proxy.inject(action, Fault::Drop, 10_000);
        let faulty = world.config_via(&format!("cloud-{k}.conf"), &proxy.url());
        let lease = format!("--leader-elect-resource-name=ccm-crash-{}-{k}", world.cluster_id);
        let mut ccm = Ccm::start_with_config(&world, &faulty, &[&lease]);
        eventually(&mut ccm, "the nodes initialized", 60, async || {
            let mut all = true;
            for l in &launched {
                all &= nodes.get(&l.id).await.is_ok_and(|n| initialized(&n));
            }
            all
        })
        .await;

        let name = unique_name("crash");
        let created = services
            .create(
                &PostParams::default(),
                &service(&name, &[80], &Default::default()),
            )
            .await
            .unwrap();
        let lb = lb_name(created.metadata.uid.as_deref().unwrap());
        let mut reached = false;
        for _ in 0..100 {
            if proxy.requests(action) > 0 {
                reached = true;
                break;
            }
            let svc = services.get(&name).await.unwrap();
            if svc
                .status
                .and_then(|s| s.load_balancer)
                .and_then(|l| l.ingress)
                .is_some()
            {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        ccm.kill();
        if reached {
            crashed_at.push(*action);
            // A fresh CCM, straight to moto, finishes the job.
            let lease = format!(
                "--leader-elect-resource-name=ccm-crash-{}-{k}-b",
                world.cluster_id
            );
            let mut ccm = Ccm::start(&world, &[&lease]);
            let svcs = services.clone();
            eventually(
                &mut ccm,
                &format!("convergence after a crash at {action}"),
                60,
                async || {
                    let svc = svcs.get(&name).await.unwrap();
                    svc.status
                        .and_then(|s| s.load_balancer)
                        .and_then(|l| l.ingress)
                        .is_some()
                        && elb.instances(&lb).await.len() == launched.len()
                },
            )
            .await;
            assert!(elb.describe(&lb).await.is_some());
            let groups = managed_groups(&world, &lb).await;
            assert_eq!(
                groups.len(),
                1,
                "crash at {action}: one security group, found {groups:?}"
            );
            services.delete(&name, &Default::default()).await.unwrap();
            eventually(&mut ccm, "the Service deleted", 60, async || {
                svcs.get_opt(&name).await.unwrap().is_none()
            })
            .await;
            assert!(
                elb.describe(&lb).await.is_none(),
                "crash at {action}: the CLB is gone"
            );
            assert!(
                managed_groups(&world, &lb).await.is_empty(),
                "crash at {action}: its group is gone"
            );
            assert!(ccm.terminate().await.success());
        } else {
            println!("{action}: not called while creating a Classic ELB");
            // Clean up with a healthy CCM.
            let lease = format!(
                "--leader-elect-resource-name=ccm-crash-{}-{k}-c",
                world.cluster_id
            );
            let mut ccm = Ccm::start(&world, &[&lease]);
            services.delete(&name, &Default::default()).await.unwrap();
            let svcs = services.clone();
            eventually(&mut ccm, "the Service deleted", 60, async || {
                svcs.get_opt(&name).await.unwrap().is_none()
            })
            .await;
            assert!(ccm.terminate().await.success());
        }
    }
    println!("killed mid-creation at: {crashed_at:?}");
    assert!(
        crashed_at.len() >= 5,
        "too few crash points exercised: {crashed_at:?}"
    );
    world.cleanup().await;
}
