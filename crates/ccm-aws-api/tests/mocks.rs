//! The `mock` feature gives usable mocks of every port, awaited through generic callers.
#![cfg(feature = "mock")]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::too_many_lines)]

use ccm_aws_api::{
    AwsError, Ec2, ErrorKind, InstanceId,
    ec2::{Instance, InstanceState, MockEc2},
    elb::MockElb,
    elbv2::MockElbv2,
    metadata::MockMetadata,
};

async fn running<E: Ec2>(ec2: &E, id: &InstanceId) -> Result<bool, AwsError> {
    let found = ec2.instances_by_id(std::slice::from_ref(id)).await?;
    Ok(found.iter().any(|i| i.state == InstanceState::Running))
}

#[tokio::test]
async fn mocked_ec2_through_a_generic_caller() {
    let mut ec2 = MockEc2::new();
    ec2.expect_instances_by_id()
        .withf(|ids| ids == [InstanceId::new("i-1")])
        .returning(|ids| {
            let found = vec![Instance::new(ids[0].clone(), InstanceState::Running)];
            Box::pin(async move { Ok(found) })
        });
    assert!(running(&ec2, &InstanceId::new("i-1")).await.unwrap());

    let mut failing = MockEc2::new();
    failing.expect_instances_by_id().returning(|_| {
        Box::pin(async { Err(AwsError::new(ErrorKind::Throttled, "ec2", "DescribeInstances")) })
    });
    let err = running(&failing, &InstanceId::new("i-1")).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Throttled);
}

#[test]
fn every_port_has_a_mock() {
    let _ = (MockElb::new(), MockElbv2::new(), MockMetadata::new());
}
