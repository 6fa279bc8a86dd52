use ccm_aws_api::{
    Tags,
    ec2::{Instance, InstanceState, MockEc2},
    elb::MockElb,
    elbv2::MockElbv2,
};
use ccm_cloud_provider::{InstancesV2, NodeView};

use super::*;

fn config(text: &str) -> CloudConfig {
    CloudConfig::parse(text).unwrap()
}

fn self_instance(id: &str, tags: &[(&str, &str)]) -> Instance {
    let mut i = Instance::new(InstanceId::from(id), InstanceState::Running);
    i.vpc_id = Some(VpcId::from("vpc-self"));
    i.availability_zone = Some("us-east-1a".to_owned());
    i.tags = tags
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect::<Tags>();
    i
}

fn ec2_returning(instance: Instance, times: usize) -> MockEc2 {
    let mut ec2 = MockEc2::new();
    ec2.expect_instances_by_id().times(times).returning(move |_| {
        let i = instance.clone();
        Box::pin(async move { Ok(vec![i]) })
    });
    ec2
}

#[tokio::test]
async fn everything_configured_costs_no_call() {
    let ec2 = MockEc2::new();
    let cfg = config("[Global]\nKubernetesClusterID = prod\nVPC = vpc-1\nSubnetID = subnet-1\n");
    let env = discover(&cfg, &ec2, "us-east-1".into(), Some(&InstanceId::from("i-1")))
        .await
        .unwrap();
    assert_eq!(env.cluster.id(), "prod");
    assert_eq!(env.vpc_id, Some(VpcId::from("vpc-1")));
    assert!(env.self_instance.is_none());
}

#[tokio::test]
async fn without_subnet_id_the_own_subnet_is_the_load_balancers_fallback() {
    let mut own = self_instance("i-1", &[]);
    own.subnet_id = Some(SubnetId::from("subnet-own"));
    let ec2 = ec2_returning(own, 1);
    let cfg = config("[Global]\nKubernetesClusterID = prod\nVPC = vpc-1\n");
    let env = discover(&cfg, &ec2, "us-east-1".into(), Some(&InstanceId::from("i-1")))
        .await
        .unwrap();
    assert_eq!(env.cluster.id(), "prod");
    assert_eq!(env.vpc_id, Some(VpcId::from("vpc-1")), "the configured VPC wins");
    let lb = load_balancer_config(&cfg, &env, VpcId::from("vpc-1"));
    assert_eq!(lb.fallback_subnet, Some(SubnetId::from("subnet-own")));
}

#[tokio::test]
async fn one_describe_finds_cluster_and_vpc() {
    let ec2 = ec2_returning(self_instance("i-1", &[("kubernetes.io/cluster/c1", "owned")]), 1);
    let env = discover(
        &config(""),
        &ec2,
        "us-east-1".into(),
        Some(&InstanceId::from("i-1")),
    )
    .await
    .unwrap();
    assert_eq!((env.cluster.id(), env.cluster.legacy()), ("c1", false));
    assert_eq!(env.vpc_id, Some(VpcId::from("vpc-self")));
}

#[tokio::test]
async fn untagged_self_instance_without_configured_id_fails_with_advice() {
    let ec2 = ec2_returning(self_instance("i-1", &[("Name", "x")]), 1);
    let err = discover(
        &config(""),
        &ec2,
        "us-east-1".into(),
        Some(&InstanceId::from("i-1")),
    )
    .await
    .unwrap_err();
    assert!(
        matches!(err, AwsCloudError::ClusterId(ClusterIdError::Tags { .. })),
        "{err}"
    );
    // No instance at all (external control plane without an ID) names the config key.
    let err = discover(
        &config("[Global]\nVPC = vpc-1\n"),
        &MockEc2::new(),
        "r".into(),
        None,
    )
    .await
    .unwrap_err();
    assert!(err.to_string().contains("KubernetesClusterID"), "{err}");
}

#[tokio::test]
async fn a_missing_self_instance_is_an_error() {
    let mut ec2 = MockEc2::new();
    ec2.expect_instances_by_id()
        .returning(|_| Box::pin(async { Ok(Vec::new()) }));
    let err = discover(&config(""), &ec2, "r".into(), Some(&InstanceId::from("i-9")))
        .await
        .unwrap_err();
    assert!(
        matches!(err, AwsCloudError::ClusterId(ClusterIdError::InstanceNotFound(_))),
        "{err}"
    );
}

#[tokio::test]
async fn the_provider_exposes_instances_v2_routes_and_load_balancers_and_uses_its_region() {
    let cfg = config(
        "[Global]\nKubernetesClusterID = c1\nVPC = vpc-1\nNodeIPFamilies = ipv6\nNodeIPFamilies = ipv4\n",
    );
    let env = discover(&cfg, &MockEc2::new(), "eu-west-1".into(), None)
        .await
        .unwrap();
    let mut ec2 = MockEc2::new();
    ec2.expect_instances_by_id().returning(|ids| {
        let mut i = self_instance(ids[0].as_str(), &[("kubernetes.io/cluster/c1", "owned")]);
        i.instance_type = "m5.large".into();
        Box::pin(async move { Ok(vec![i]) })
    });
    ec2.expect_availability_zones().returning(|| {
        Box::pin(async {
            Ok(vec![ccm_aws_api::ec2::AvailabilityZone::new(
                "us-east-1a",
                "use1-az1",
                "availability-zone",
                "eu-west-1",
            )])
        })
    });
    ec2.expect_instance_topology()
        .returning(|_| Box::pin(async { Ok(Vec::new()) }));
    let cloud = AwsCloud::new(
        &cfg,
        std::sync::Arc::new(ec2),
        MockElb::new(),
        MockElbv2::new(),
        env,
    )
    .unwrap();
    assert_eq!(cloud.provider_name(), "aws");
    assert!(cloud.instances().is_none());
    assert!(cloud.routes().is_some() && cloud.load_balancer().is_some());
    let node = NodeView::named("i-0abc");
    let md = cloud
        .instances_v2()
        .unwrap()
        .instance_metadata(&node)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(md.provider_id, "aws:///us-east-1a/i-0abc");
    assert_eq!(md.region, "eu-west-1");
    assert_eq!(md.instance_type, "m5.large");
}

#[test]
fn a_bad_topology_pattern_names_the_key() {
    let mut cfg = config("[Global]\nKubernetesClusterID = c1\n");
    cfg.global.supported_topology_instance_type_pattern = "(".into();
    let env = Environment {
        region: "r".into(),
        cluster: ClusterTags::new("c1", false).unwrap(),
        vpc_id: None,
        self_instance: None,
    };
    let err = AwsCloud::new(
        &cfg,
        std::sync::Arc::new(MockEc2::new()),
        MockElb::new(),
        MockElbv2::new(),
        env,
    )
    .unwrap_err();
    assert!(
        err.to_string().contains("SupportedTopologyInstanceTypePattern"),
        "{err}"
    );
}

#[test]
fn without_a_vpc_there_are_no_load_balancers() {
    let cfg = config("[Global]\nKubernetesClusterID = c1\n");
    let env = Environment {
        region: "r".into(),
        cluster: ClusterTags::new("c1", false).unwrap(),
        vpc_id: None,
        self_instance: None,
    };
    let cloud = AwsCloud::new(
        &cfg,
        std::sync::Arc::new(MockEc2::new()),
        MockElb::new(),
        MockElbv2::new(),
        env,
    )
    .unwrap();
    assert!(cloud.load_balancer().is_none());
    assert!(cloud.instances_v2().is_some());
}
