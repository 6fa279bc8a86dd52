//! A drift pass beside an ensure: the controller judges only settled Services, so a load balancer being
//! ensured while the account is listed is not among those the pass is given. Its host memory and claim must
//! survive the pass, or its next host update reads AWS again for nothing (seen at 5,000 Nodes: one host update
//! in a join cost a `DescribeInstances`, a `DescribeLoadBalancers` and three `DescribeSecurityGroups`).

use std::sync::Arc;

use tokio::sync::Notify;

use super::*;

/// The ensure of `web` completes while the drift pass's listing (asked about another Service only) is still
/// waiting for AWS; after the pass, `web`'s memory and claim are still held. At the next pass, with nothing done
/// to it and still not judged, it is gone (a Service deleted without this process seeing it).
#[tokio::test]
async fn an_ensure_that_ends_while_the_drift_pass_lists_keeps_its_memory() {
    let svc = service(&[], &[(80, 30080)]);
    let mut other = service(&[], &[(80, 30081)]);
    other.metadata.name = Some("other".into());
    other.metadata.uid = Some("1e2d3c4b-5a69-7887-96a5-b4c3d2e1f0a1".into());
    let n = node("i-1");
    let spec = crate::parse_service(&svc).unwrap();
    let mut c = config();
    c.manage_node_security_groups = false;
    let desired = crate::classic::build(&spec, &[&n], &c, &[SubnetId::new("subnet-a")]).unwrap();
    let (ec2, mut elb) = steady_classic_ports(&desired);
    let listed = Arc::new(Notify::new());
    let gate = listed.clone();
    elb.expect_all_load_balancers().returning(move || {
        let gate = gate.clone();
        Box::pin(async move {
            gate.notified().await;
            Ok(vec![])
        })
    });
    let lbs = AwsLoadBalancers::new(ec2, elb, MockElbv2::new(), c);
    let name = desired.name.clone();
    let claimant = crate::ownership::Claimant::new(&name, "prod/web", svc.metadata.uid.as_deref().unwrap());

    let (others, nodes) = ([&other], [&n]);
    let (drifts, ()) = tokio::join!(lbs.drifted("k", &others, &nodes), async {
        lbs.ensure_load_balancer("k", &svc, &nodes).await.unwrap();
        listed.notify_one();
    });
    assert_eq!(
        drifts.unwrap().len(),
        1,
        "the other Service's load balancer is gone"
    );
    assert!(
        lbs.memory.holds(&name),
        "forgotten by the pass it was not judged in"
    );
    assert!(
        lbs.memory.claim_of(&claimant).is_some(),
        "claim dropped by the pass"
    );

    // Settled since, its Service is judged by the next pass; one that still leaves it out, with nothing done to
    // it since the pass it ended in, means its Service is gone.
    listed.notify_one();
    lbs.drifted("k", &others, &nodes).await.unwrap();
    assert!(
        !lbs.memory.holds(&name),
        "not judged, nothing done since the last pass: gone"
    );
    assert!(lbs.memory.claim_of(&claimant).is_none());
}
