//! End to end, a Service's deletion never leaks, with the `aws-cloud-controller-manager` binary:
//! - killed (SIGKILL) in the middle of a Classic ELB's deletion, at each of its mutating calls in turn (a fault
//!   proxy swallows the call; once the CCM has sent it, every earlier mutation is done), a fresh CCM deletes what
//!   is left — the security group too, even though the load balancer is already gone (the Go controller then skips
//!   the provider and removes the finalizer: kubernetes#79994) — before the Service goes;
//! - with AWS answering `DependencyViolation` for the deleted load balancer's group (its interfaces draining), the
//!   Service stays with its finalizer and a Normal `LoadBalancerDeletionPending` Event until the group is gone;
//! - and drift: a listener deleted and an instance deregistered by hand are put back by the next
//!   `--load-balancer-resync-period` pass, with a `LoadBalancerDriftRepaired` Event naming both.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::too_many_lines)]

mod common;

use std::time::Duration;

use ccm_testing::{Fault, FaultProxy, TestEnv, unique_name};
use common::{
    Ccm, World, eventually, initialized,
    lb::{Elb, lb_name, managed_groups, public_subnet, service},
};
use k8s_openapi::api::core::v1::{Event, Service};
use kube::{
    Api,
    api::{ListParams, PostParams},
};

/// The mutating calls of a Classic ELB's deletion here (the world's instances have no group for a node rule, so
/// there is no `RevokeSecurityGroupIngress`; the library's moto test crashes before that one too).
const DELETION: [&str; 2] = ["DeleteLoadBalancer", "DeleteSecurityGroup"];

struct Setup {
    world: World,
    services: Api<Service>,
    events: Api<Event>,
    elb: Elb,
    instances: usize,
}

async fn setup() -> Setup {
    let env = TestEnv::get();
    let world = World::new("").await;
    public_subnet(&world).await;
    let launched = world.launch(2).await;
    for l in &launched {
        world.register_node(&l.id, None).await;
    }
    let client = env.kube_client().await.unwrap();
    Setup {
        world,
        services: Api::namespaced(client.clone(), "default"),
        events: Api::namespaced(client, "default"),
        elb: Elb(aws_sdk_elasticloadbalancing::Client::new(&env.aws_config().await)),
        instances: launched.len(),
    }
}

impl Setup {
    /// A CCM (through `proxy` when given) with its own lease, once it leads and every Node is initialized.
    async fn ccm(&self, lease: &str, proxy: Option<&FaultProxy>) -> Ccm {
        self.ccm_with(lease, proxy, &[]).await
    }

    /// [`Setup::ccm`] with `extra` flags.
    async fn ccm_with(&self, lease: &str, proxy: Option<&FaultProxy>, extra: &[&str]) -> Ccm {
        let lease = format!(
            "--leader-elect-resource-name=ccm-del-{}-{lease}",
            self.world.cluster_id
        );
        let mut flags = vec![lease.as_str()];
        flags.extend_from_slice(extra);
        let mut ccm = match proxy {
            Some(p) => {
                let config = self.world.config_via(&format!("cloud-{lease}.conf"), &p.url());
                Ccm::start_with_config(&self.world, &config, &flags)
            }
            None => Ccm::start(&self.world, &flags),
        };
        let log = ccm.log.clone();
        eventually(&mut ccm, "the lease acquired", 60, async || {
            std::fs::read_to_string(&log).is_ok_and(|l| l.contains("successfully acquired lease"))
        })
        .await;
        let nodes = self.world.nodes.clone();
        eventually(&mut ccm, "the nodes initialized", 60, async || {
            let list = nodes.list(&ListParams::default()).await.unwrap();
            list.items.iter().filter(|n| initialized(n)).count() >= self.instances
        })
        .await;
        ccm
    }

    /// Creates a Service and waits for its Classic ELB; returns (Service name, load balancer name, group IDs).
    async fn ensured(&self, ccm: &mut Ccm) -> (String, String, Vec<String>) {
        let name = unique_name("del");
        let created = self
            .services
            .create(
                &PostParams::default(),
                &service(&name, &[80], &Default::default()),
            )
            .await
            .unwrap();
        let lb = lb_name(created.metadata.uid.as_deref().unwrap());
        let (services, elb, n) = (self.services.clone(), &self.elb, self.instances);
        eventually(ccm, "the Classic ELB ensured", 60, async || {
            let svc = services.get(&name).await.unwrap();
            svc.status
                .and_then(|s| s.load_balancer)
                .and_then(|l| l.ingress)
                .is_some()
                && elb.instances(&lb).await.len() == n
        })
        .await;
        let groups = managed_groups(&self.world, &lb).await;
        assert_eq!(groups.len(), 1, "{groups:?}");
        (name, lb, groups)
    }

    async fn reasons(&self, name: &str) -> Vec<(String, String)> {
        let lp = ListParams::default().fields(&format!("involvedObject.name={name}"));
        let list = self.events.list(&lp).await.unwrap();
        list.items
            .into_iter()
            .map(|e| (e.reason.unwrap_or_default(), e.message.unwrap_or_default()))
            .collect()
    }

    /// Waits for the Service to go, then checks that nothing of its load balancer is left in moto.
    async fn assert_all_gone(&self, ccm: &mut Ccm, name: &str, lb: &str, what: &str) {
        let services = self.services.clone();
        eventually(ccm, &format!("{what}: the Service deleted"), 90, async || {
            services.get_opt(name).await.unwrap().is_none()
        })
        .await;
        assert!(self.elb.describe(lb).await.is_none(), "{what}: the CLB is gone");
        assert!(
            managed_groups(&self.world, lb).await.is_empty(),
            "{what}: its security group is gone"
        );
    }
}

#[tokio::test]
async fn e2e_a_ccm_killed_mid_deletion_leaves_nothing_after_a_restart() {
    let s = setup().await;
    let mut crashed_at = Vec::new();
    for (k, action) in DELETION.iter().enumerate() {
        let mut healthy = s.ccm(&format!("{k}-a"), None).await;
        let (name, lb, _) = s.ensured(&mut healthy).await;
        assert!(healthy.terminate().await.success());

        let proxy = FaultProxy::start(&TestEnv::get().aws_endpoint).await.unwrap();
        proxy.inject(action, Fault::Drop, 10_000);
        let mut faulty = s.ccm(&format!("{k}-b"), Some(&proxy)).await;
        s.services.delete(&name, &Default::default()).await.unwrap();
        for _ in 0..300 {
            if proxy.requests(action) > 0 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        faulty.kill();
        if proxy.requests(action) == 0 {
            println!("{action}: not called while deleting a Classic ELB");
        } else {
            crashed_at.push(*action);
            let svc = s.services.get_opt(&name).await.unwrap();
            assert!(
                svc.is_some(),
                "killed at {action}: the finalizer held the Service"
            );
        }
        let mut fresh = s.ccm(&format!("{k}-c"), None).await;
        s.assert_all_gone(&mut fresh, &name, &lb, &format!("killed at {action}"))
            .await;
        assert!(fresh.terminate().await.success());
    }
    println!("killed mid-deletion at: {crashed_at:?}");
    assert_eq!(crashed_at.len(), DELETION.len(), "every deletion call exercised");
    s.world.cleanup().await;
}

#[tokio::test]
async fn e2e_a_security_group_in_use_keeps_the_finalizer_until_aws_releases_it() {
    let s = setup().await;
    let proxy = FaultProxy::start(&TestEnv::get().aws_endpoint).await.unwrap();
    let mut ccm = s.ccm("wait", Some(&proxy)).await;
    let (name, lb, groups) = s.ensured(&mut ccm).await;
    proxy.inject("DeleteSecurityGroup", Fault::error(400, "DependencyViolation"), 2);
    s.services.delete(&name, &Default::default()).await.unwrap();
    eventually(
        &mut ccm,
        "the LoadBalancerDeletionPending Event",
        60,
        async || {
            s.reasons(&name)
                .await
                .iter()
                .any(|(r, m)| r == "LoadBalancerDeletionPending" && m.contains(&groups[0]))
        },
    )
    .await;
    assert!(
        s.services.get_opt(&name).await.unwrap().is_some(),
        "the finalizer holds"
    );
    assert!(
        s.elb.describe(&lb).await.is_none(),
        "the load balancer itself is gone"
    );
    assert_eq!(managed_groups(&s.world, &lb).await, groups, "its group is not");
    s.assert_all_gone(&mut ccm, &name, &lb, "after two DependencyViolations")
        .await;
    assert_eq!(proxy.requests("DeleteSecurityGroup"), 3);
    let reasons: Vec<String> = s.reasons(&name).await.into_iter().map(|(r, _)| r).collect();
    assert!(
        !reasons.iter().any(|r| r.ends_with("Failed")),
        "not a failure: {reasons:?}"
    );
    assert!(ccm.terminate().await.success());
    s.world.cleanup().await;
}

#[tokio::test]
async fn e2e_a_load_balancer_changed_by_hand_is_repaired_by_the_next_resync() {
    let s = setup().await;
    let mut ccm = s
        .ccm_with("drift", None, &["--load-balancer-resync-period=2s"])
        .await;
    let (name, lb, _) = s.ensured(&mut ccm).await;
    let instances = s.elb.instances(&lb).await;
    // By hand: the listener goes, and so does one instance.
    s.elb
        .0
        .delete_load_balancer_listeners()
        .load_balancer_name(&lb)
        .load_balancer_ports(80)
        .send()
        .await
        .unwrap();
    let gone = aws_sdk_elasticloadbalancing::types::Instance::builder()
        .instance_id(&instances[0])
        .build();
    s.elb
        .0
        .deregister_instances_from_load_balancer()
        .load_balancer_name(&lb)
        .instances(gone)
        .send()
        .await
        .unwrap();
    assert!(s.elb.listener_ports(&lb).await.is_empty());
    let elb = &s.elb;
    eventually(&mut ccm, "the listener and the instance back", 60, async || {
        elb.listener_ports(&lb).await == [80] && elb.instances(&lb).await == instances
    })
    .await;
    let mut repaired = Vec::new();
    eventually(&mut ccm, "the LoadBalancerDriftRepaired Event", 30, async || {
        repaired = s
            .reasons(&name)
            .await
            .into_iter()
            .filter(|(r, _)| r == "LoadBalancerDriftRepaired")
            .collect();
        !repaired.is_empty()
    })
    .await;
    let message = &repaired[0].1;
    assert!(
        message.contains("listener 80 missing") && message.contains(&instances[0]),
        "{message}"
    );
    s.services.delete(&name, &Default::default()).await.unwrap();
    s.assert_all_gone(&mut ccm, &name, &lb, "after the drift test")
        .await;
    assert!(ccm.terminate().await.success());
    s.world.cleanup().await;
}
