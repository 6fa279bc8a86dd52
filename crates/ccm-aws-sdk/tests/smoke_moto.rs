//! Proves the AWS half of the test environment is a working moto in server mode, reached with aws-sdk-rust
//! exactly as the adapter will reach AWS: EC2 instances and a Classic ELB, asserting what moto stored.

#![allow(clippy::too_many_lines)]

use aws_sdk_ec2::types::{Filter, InstanceStateName, InstanceType, ResourceType, Tag, TagSpecification};
use aws_sdk_elasticloadbalancing::types::Listener;
use ccm_testing::{Emulator, TestEnv, unique_name};

#[tokio::test]
async fn ec2_run_and_describe_an_instance_in_moto() {
    let env = TestEnv::get();
    let ec2 = aws_sdk_ec2::Client::new(&env.aws_config().await);
    let name = unique_name("smoke-instance");

    let vpc = ec2
        .create_vpc()
        .cidr_block("10.42.0.0/16")
        .send()
        .await
        .expect("create vpc");
    let vpc_id = vpc.vpc().and_then(|v| v.vpc_id()).expect("vpc id").to_owned();
    let subnet = ec2
        .create_subnet()
        .vpc_id(&vpc_id)
        .cidr_block("10.42.1.0/24")
        .availability_zone("us-east-1a")
        .send()
        .await
        .expect("create subnet");
    let subnet_id = subnet
        .subnet()
        .and_then(|s| s.subnet_id())
        .expect("subnet id")
        .to_owned();

    let run = ec2
        .run_instances()
        .image_id("ami-12c6146b")
        .instance_type(InstanceType::M5Large)
        .min_count(1)
        .max_count(1)
        .subnet_id(&subnet_id)
        .tag_specifications(
            TagSpecification::builder()
                .resource_type(ResourceType::Instance)
                .tags(Tag::builder().key("Name").value(&name).build())
                .build(),
        )
        .send()
        .await
        .expect("run instances");
    let instance_id = run.instances()[0].instance_id().expect("instance id").to_owned();

    let described = ec2
        .describe_instances()
        .filters(Filter::builder().name("tag:Name").values(&name).build())
        .send()
        .await
        .expect("describe instances by tag");
    let instances: Vec<_> = described
        .reservations()
        .iter()
        .flat_map(|r| r.instances())
        .collect();
    assert_eq!(instances.len(), 1, "exactly our instance carries our tag");
    let instance = instances[0];
    assert_eq!(instance.instance_id(), Some(instance_id.as_str()));
    assert_eq!(instance.subnet_id(), Some(subnet_id.as_str()));
    assert_eq!(instance.instance_type(), Some(&InstanceType::M5Large));
    assert_eq!(
        instance.placement().and_then(|p| p.availability_zone()),
        Some("us-east-1a")
    );
    let private_ip = instance.private_ip_address().expect("private ip");
    // AWS gives an instance an address of its subnet's range; ministack 1.5.33 gives any address in 10.0.0.0/16.
    if env.emulator != Emulator::Ministack {
        assert!(private_ip.starts_with("10.42.1."), "{private_ip}");
    }
    let dns = instance.private_dns_name().expect("private dns");
    assert_eq!(dns, format!("ip-{}.ec2.internal", private_ip.replace('.', "-")));

    // Stopping is reflected in the described state, as the node-lifecycle logic will rely on.
    ec2.stop_instances()
        .instance_ids(&instance_id)
        .send()
        .await
        .expect("stop");
    let state = ec2
        .describe_instances()
        .instance_ids(&instance_id)
        .send()
        .await
        .expect("describe by id")
        .reservations()[0]
        .instances()[0]
        .state()
        .and_then(|s| s.name())
        .cloned();
    assert_eq!(state, Some(InstanceStateName::Stopped));

    // Unknown IDs give the error code the adapter maps to NotFound.
    let missing = ec2
        .describe_instances()
        .instance_ids("i-0123456789abcdef0")
        .send()
        .await;
    let code = missing.expect_err("unknown instance").into_service_error();
    assert_eq!(
        aws_sdk_ec2::error::ProvideErrorMetadata::code(&code),
        Some("InvalidInstanceID.NotFound")
    );

    ec2.terminate_instances()
        .instance_ids(&instance_id)
        .send()
        .await
        .expect("terminate");
}

#[tokio::test]
async fn classic_elb_create_and_describe_in_moto() {
    let env = TestEnv::get();
    let elb = aws_sdk_elasticloadbalancing::Client::new(&env.aws_config().await);
    // Classic ELB names: at most 32 characters.
    let name = unique_name("smoke");

    let created = elb
        .create_load_balancer()
        .load_balancer_name(&name)
        .availability_zones("us-east-1a")
        .listeners(
            Listener::builder()
                .protocol("TCP")
                .load_balancer_port(80)
                .instance_protocol("TCP")
                .instance_port(30080)
                .build()
                .expect("listener"),
        )
        .tags(
            aws_sdk_elasticloadbalancing::types::Tag::builder()
                .key("kubernetes.io/cluster/smoke")
                .value("owned")
                .build()
                .expect("tag"),
        )
        .send()
        .await
        .expect("create load balancer");
    let dns = created.dns_name().expect("dns name");
    assert!(dns.starts_with(&name), "{dns}");

    let described = elb
        .describe_load_balancers()
        .load_balancer_names(&name)
        .send()
        .await
        .expect("describe load balancer");
    let lbs = described.load_balancer_descriptions();
    assert_eq!(lbs.len(), 1);
    assert_eq!(lbs[0].dns_name(), Some(dns));
    let listener = lbs[0].listener_descriptions()[0].listener().expect("listener");
    assert_eq!(
        (listener.load_balancer_port(), listener.instance_port()),
        (80, 30080)
    );

    let tags = elb
        .describe_tags()
        .load_balancer_names(&name)
        .send()
        .await
        .expect("describe tags");
    let tag = &tags.tag_descriptions()[0].tags()[0];
    assert_eq!(
        (tag.key(), tag.value()),
        ("kubernetes.io/cluster/smoke", Some("owned"))
    );

    elb.delete_load_balancer()
        .load_balancer_name(&name)
        .send()
        .await
        .expect("delete");
    let gone = elb
        .describe_load_balancers()
        .load_balancer_names(&name)
        .send()
        .await;
    let code = gone.expect_err("deleted").into_service_error();
    assert_eq!(
        aws_sdk_elasticloadbalancing::error::ProvideErrorMetadata::code(&code),
        Some("LoadBalancerNotFound")
    );
}
