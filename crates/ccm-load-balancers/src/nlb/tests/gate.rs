//! The ownership gate on the NLB's own paths: adopt-on-duplicate claims what it finds, and an ELBv2 load
//! balancer of another type under the name is refused before anything is made.

use super::*;
use crate::flavour::Scope;
use crate::ownership::{Claimant, Purpose, claim};
use ccm_aws_api::elb::MockElb;
use ccm_aws_api::elbv2::MockElbv2;
use ccm_aws_api::{AwsError, ErrorKind, Tags, ec2::MockEc2};

const UID: &str = "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0";

fn duplicate() -> AwsError {
    AwsError::new(
        ErrorKind::AlreadyExists,
        "elasticloadbalancingv2",
        "CreateLoadBalancer",
    )
    .with_code("DuplicateLoadBalancerName")
}

/// Only the `CreateLoadBalancer` of a plan, under a vacant claim of `name` for `prod/web`.
async fn create_under(elbv2: &MockElbv2, name: &str) -> Result<Applied, Error> {
    let d = desired(&[], &[(80, 30080)]);
    let changes: Vec<Change> = plan(&d, &Observed::default())
        .into_iter()
        .filter(|c| matches!(c, Change::CreateLoadBalancer { .. }))
        .collect();
    let vacant = claim(
        &config(),
        &Claimant::new(name, "prod/web", UID),
        None,
        Purpose::Serve,
    )
    .unwrap();
    apply(
        &MockEc2::new(),
        elbv2,
        &config(),
        &vacant,
        &Observed::default(),
        &changes,
    )
    .await
}

/// A mock whose create answers `DuplicateLoadBalancerName` and whose read finds `lb` tagged `tags`; nothing
/// else is expected (a mockall mock panics on any other call: nothing is written to what is found).
fn found_on_create(lb: LoadBalancerV2, tags: Option<Tags>) -> MockElbv2 {
    let mut elbv2 = MockElbv2::new();
    elbv2
        .expect_create_load_balancer()
        .times(1)
        .returning(|_| Box::pin(async { Err(duplicate()) }));
    elbv2.expect_load_balancer().times(1).returning(move |_| {
        let lb = lb.clone();
        Box::pin(async move { Ok(Some(lb)) })
    });
    if let Some(tags) = tags {
        elbv2.expect_tags().times(1).returning(move |arns| {
            let t = BTreeMap::from([(arns[0].clone(), tags.clone())]);
            Box::pin(async move { Ok(t) })
        });
    }
    elbv2
}

fn owned_by(service: &str, uid: &str) -> Tags {
    Tags::from([
        ("kubernetes.io/cluster/c1".to_owned(), "owned".to_owned()),
        ("kubernetes.io/service-name".to_owned(), service.to_owned()),
        ("kubernetes.io/service-uid".to_owned(), uid.to_owned()),
    ])
}

/// The duplicate is an ALB (AWS keeps ELBv2 names unique across types): refused, naming it, its tags not even
/// read, nothing written.
#[tokio::test]
async fn a_duplicate_alb_is_refused_not_adopted() {
    let mut alb = LoadBalancerV2::new("arn:alb", NAME, "alb.example");
    alb.lb_type = "application".into();
    let e = create_under(&found_on_create(alb, None), NAME).await.unwrap_err();
    assert!(matches!(e, Error::NameTaken { .. }), "{e}");
    assert!(e.to_string().contains("type application, not an NLB"), "{e}");
}

/// The duplicate is another Service's NLB (or another cluster's): refused, naming the holder.
#[tokio::test]
async fn a_duplicate_nlb_of_another_service_is_refused() {
    let nlb = LoadBalancerV2::new("arn:nlb", NAME, "nlb.example");
    let elbv2 = found_on_create(nlb.clone(), Some(owned_by("prod/other", "u-2")));
    let e = create_under(&elbv2, NAME).await.unwrap_err();
    assert!(e.to_string().contains("belongs to Service prod/other"), "{e}");
    let foreign = Tags::from([("kubernetes.io/cluster/c2".to_owned(), "owned".to_owned())]);
    let e = create_under(&found_on_create(nlb, Some(foreign)), NAME)
        .await
        .unwrap_err();
    assert!(e.to_string().contains("kubernetes.io/cluster/c2=owned"), "{e}");
}

/// The duplicate is this Service's NLB (a create of a crashed run): adopted, the run goes on with it.
#[tokio::test]
async fn a_duplicate_of_this_service_is_adopted() {
    let nlb = LoadBalancerV2::new("arn:nlb", NAME, "nlb.example");
    let elbv2 = found_on_create(nlb, Some(owned_by("prod/web", UID)));
    let applied = create_under(&elbv2, NAME).await.unwrap();
    assert_eq!(applied.created.unwrap().arn, "arn:nlb");
}

/// An NLB Service whose name an ALB holds is refused by the observation, before its managed group or target
/// groups are made.
#[tokio::test]
async fn an_alb_under_the_name_is_refused_before_anything_is_made() {
    let d = desired(&[], &[(80, 30080)]);
    let mut elbv2 = MockElbv2::new();
    elbv2.expect_load_balancer().times(1).returning(|n| {
        let mut alb = LoadBalancerV2::new("arn:alb", n, "alb.example");
        alb.lb_type = "application".into();
        Box::pin(async move { Ok(Some(alb)) })
    });
    let e = observe(
        &crate::instance_reads::uncached(MockEc2::new()),
        &MockElb::new(),
        &elbv2,
        &config(),
        &d,
        Scope::Full,
    )
    .await
    .unwrap_err();
    assert!(
        e.to_string()
            .contains(&format!("load balancer name {NAME} is taken")),
        "{e}"
    );
    assert!(e.to_string().contains("type application"), "{e}");
}
