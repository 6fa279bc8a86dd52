//! Throttling and faults injected between the SDK and moto, lookup coalescing and tag batching counted from
//! the adapter's metrics, and role assumption headers.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::too_many_lines)]

mod common;

use std::{sync::Arc, time::Duration};

use ccm_aws_api::{Ec2, Elb, Elbv2, ErrorKind, InstanceId, Tags};
use ccm_aws_sdk::{ActionClass, Adapter, AdapterOptions, AssumeRole, RateLimits, Service};
use ccm_testing::{Fault, FaultProxy, TestEnv};
use common::{adapter, fast_retry, fixture};

async fn proxy() -> FaultProxy {
    FaultProxy::start(&TestEnv::get().aws_endpoint).await.unwrap()
}

#[tokio::test]
async fn ec2_throttling_backs_off_then_succeeds_and_is_counted() {
    let proxy = proxy().await;
    // Default (limited) buckets, so that the slow-down is visible.
    let options = AdapterOptions::default()
        .with_retry(fast_retry())
        .with_endpoint_url(proxy.url());
    let adapter = Adapter::new(&TestEnv::get().aws_config().await, options);
    proxy.inject("DescribeAvailabilityZones", Fault::Throttle, 3);

    let zones = adapter.ec2().availability_zones().await.unwrap();
    assert!(!zones.is_empty());
    let metrics = adapter.metrics();
    assert_eq!(
        metrics.attempts_with("ec2", "DescribeAvailabilityZones", "throttled"),
        3
    );
    assert_eq!(metrics.attempts_with("ec2", "DescribeAvailabilityZones", "ok"), 1);
    assert_eq!(
        proxy.requests("DescribeAvailabilityZones"),
        4,
        "three throttled attempts, one success"
    );
    assert!(
        adapter.rate_factor(Service::Ec2, ActionClass::NonMutating) < 1.0,
        "throttling slowed the bucket down"
    );
}

#[tokio::test]
async fn elb_throttling_and_server_faults_are_retried() {
    let proxy = proxy().await;
    let adapter = adapter(Some(&proxy.url())).await;
    proxy.inject("DescribeLoadBalancers", Fault::Throttle, 2);
    proxy.inject("DescribeLoadBalancers", Fault::error(500, "InternalFailure"), 1);
    proxy.inject("DescribeLoadBalancers", Fault::Drop, 1);

    // Not found after the faults: the answer is `None`, not an error.
    let lb = adapter.elb().load_balancer("no-such-lb-faults").await.unwrap();
    assert_eq!(lb, None);
    let m = adapter.metrics();
    assert_eq!(
        m.attempts_with("elasticloadbalancing", "DescribeLoadBalancers", "throttled"),
        2
    );
    assert_eq!(
        m.attempts_with("elasticloadbalancing", "DescribeLoadBalancers", "transient"),
        2
    );
    assert_eq!(
        m.attempts_with("elasticloadbalancing", "DescribeLoadBalancers", "not_found"),
        1
    );
    assert_eq!(proxy.requests("DescribeLoadBalancers"), 5);
}

#[tokio::test]
async fn retries_stop_after_the_last_attempt_with_the_throttled_kind() {
    let proxy = proxy().await;
    let adapter = adapter(Some(&proxy.url())).await;
    proxy.inject("DescribeAvailabilityZones", Fault::Throttle, 50);
    let err = adapter.ec2().availability_zones().await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Throttled);
    assert_eq!(err.code(), Some("RequestLimitExceeded"));
    assert_eq!(
        adapter.metrics().attempts("ec2", "DescribeAvailabilityZones"),
        5,
        "max_attempts"
    );
    // Errors that retrying cannot fix are not retried.
    proxy.inject("DescribeSubnets", Fault::error(403, "UnauthorizedOperation"), 1);
    let err = adapter.ec2().subnets(&[]).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::AccessDenied);
    assert_eq!(proxy.requests("DescribeSubnets"), 1);
}

/// Runs `ids.len()` concurrent single-ID lookups and checks each answer against `exists`.
async fn concurrent_lookups(
    adapter: &Arc<Adapter>,
    ids: &[InstanceId],
    exists: impl Fn(&InstanceId) -> bool,
) {
    let tasks: Vec<_> = ids
        .iter()
        .cloned()
        .map(|id| {
            let adapter = adapter.clone();
            tokio::spawn(async move {
                let found = adapter
                    .ec2()
                    .instances_by_id(std::slice::from_ref(&id))
                    .await
                    .unwrap();
                (id, found)
            })
        })
        .collect();
    for task in tasks {
        let (id, found) = task.await.unwrap();
        if exists(&id) {
            assert_eq!(
                found.iter().map(|i| &i.id).collect::<Vec<_>>(),
                [&id],
                "{id} exists"
            );
        } else {
            assert!(found.is_empty(), "{id} does not exist");
        }
    }
}

async fn coalescing_adapter(endpoint: String) -> Arc<Adapter> {
    let options = AdapterOptions::default()
        .with_rate_limits(RateLimits::unlimited())
        .with_retry(fast_retry())
        .with_endpoint_url(endpoint)
        .with_batch_window(Duration::from_millis(100));
    Arc::new(Adapter::new(&TestEnv::get().aws_config().await, options))
}

#[tokio::test]
async fn a_thousand_concurrent_lookups_cost_one_describe_instances() {
    // 1,000 lookups of 100 instances (each node asked for by ten controllers at once).
    let fx = fixture("coalesce", 100).await;
    let adapter = coalescing_adapter(TestEnv::get().aws_endpoint.clone()).await;
    let ids: Vec<InstanceId> = (0..1000)
        .map(|n| InstanceId::new(&fx.instance_ids[n % 100]))
        .collect();
    concurrent_lookups(&adapter, &ids, |_| true).await;
    let calls = adapter.metrics().attempts("ec2", "DescribeInstances");
    println!("1000 concurrent lookups of known instances: {calls} DescribeInstances call(s)");
    assert_eq!(calls, 1);
}

/// A lookup of 240 instances (what the fixture's /24 subnet holds) is asked 200 IDs a call (memory: the SDK's
/// records of a call of 1,000 are a 10 MiB transient), in the fewest such calls, and finds every instance.
#[tokio::test]
async fn a_lookup_of_240_instances_asks_200_ids_a_call() {
    let fx = fixture("lookup-size", 240).await;
    let proxy = proxy().await;
    let adapter = coalescing_adapter(proxy.url()).await;
    let ids: Vec<InstanceId> = fx.instance_ids.iter().map(InstanceId::new).collect();
    concurrent_lookups(&adapter, &ids, |_| true).await;
    let sizes: Vec<usize> = proxy
        .bodies("DescribeInstances")
        .iter()
        .map(|body| body.matches("InstanceId.").count())
        .collect();
    assert_eq!(sizes, [200, 40], "IDs per DescribeInstances");
    assert_eq!(adapter.metrics().attempts("ec2", "DescribeInstances"), 2);
}

#[tokio::test]
async fn two_hundred_concurrent_lookups_with_unknown_ids_cost_two_describe_instances() {
    // 10 real instances and 190 IDs that do not exist (one call's worth). AWS fails a call naming unknown IDs
    // with `InvalidInstanceID.NotFound` listing all of them; moto names only one, so the proxy answers the first
    // call exactly as AWS does, and moto answers the retry.
    let fx = fixture("coalesce-unknown", 10).await;
    let proxy = proxy().await;
    let ids: Vec<InstanceId> = (0..200)
        .map(|n| match fx.instance_ids.get(n) {
            Some(id) => InstanceId::new(id),
            None => InstanceId::new(format!("i-{n:017x}")),
        })
        .collect();
    let unknown: Vec<&str> = ids[10..].iter().map(InstanceId::as_str).collect();
    let message = format!("The instance IDs '{}' do not exist", unknown.join(", "));
    proxy.inject(
        "DescribeInstances",
        Fault::Error {
            status: 400,
            code: "InvalidInstanceID.NotFound".into(),
            message,
        },
        1,
    );
    let adapter = coalescing_adapter(proxy.url()).await;
    let known: std::collections::HashSet<InstanceId> = ids[..10].iter().cloned().collect();
    concurrent_lookups(&adapter, &ids, |id| known.contains(id)).await;
    let calls = adapter.metrics().attempts("ec2", "DescribeInstances");
    println!("200 concurrent lookups, 190 unknown: {calls} DescribeInstances calls");
    assert!(calls <= 2, "{calls}");
    assert_eq!(
        adapter
            .metrics()
            .attempts_with("ec2", "DescribeInstances", "not_found"),
        1
    );
    assert_eq!(proxy.requests("DescribeInstances"), calls);
}

#[tokio::test]
async fn unknown_ids_that_aws_does_not_name_fall_back_to_filters() {
    // moto names only one unknown ID per error: the adapter removes it, fails again, then asks by filter.
    let fx = fixture("coalesce-moto", 2).await;
    let adapter = adapter(None).await;
    let mut ids: Vec<InstanceId> = fx.instance_ids.iter().map(InstanceId::new).collect();
    ids.extend((0..5).map(|n| InstanceId::new(format!("i-{n:017x}"))));
    let found = adapter.ec2().instances_by_id(&ids).await.unwrap();
    let mut found: Vec<&str> = found.iter().map(|i| i.id.as_str()).collect();
    found.sort_unstable();
    let mut expected: Vec<&str> = fx.instance_ids.iter().map(String::as_str).collect();
    expected.sort_unstable();
    assert_eq!(found, expected);
    assert_eq!(
        adapter.metrics().attempts("ec2", "DescribeInstances"),
        3,
        "two by ID, one by filter"
    );
}

#[tokio::test]
async fn tag_batches_fall_back_to_single_calls_when_one_resource_is_refused() {
    let fx = fixture("tag-fallback", 2).await;
    let proxy = proxy().await;
    let adapter = adapter(Some(&proxy.url())).await;
    let tags = Tags::from([("batch".to_owned(), "yes".to_owned())]);
    proxy.inject("CreateTags", Fault::error(400, "InvalidInstanceID.NotFound"), 1);
    let (a, b) = tokio::join!(
        adapter
            .ec2()
            .create_tags(std::slice::from_ref(&fx.instance_ids[0]), &tags),
        adapter
            .ec2()
            .create_tags(std::slice::from_ref(&fx.instance_ids[1]), &tags),
    );
    a.unwrap();
    b.unwrap();
    assert_eq!(
        proxy.requests("CreateTags"),
        3,
        "one batch, then one call per caller"
    );

    // A lone caller sees the mapped error.
    proxy.inject("CreateTags", Fault::error(400, "InvalidInstanceID.NotFound"), 1);
    let err = adapter
        .ec2()
        .create_tags(std::slice::from_ref(&fx.instance_ids[0]), &tags)
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotFound);
    assert_eq!(err.code(), Some("InvalidInstanceID.NotFound"));
}

#[tokio::test]
async fn role_assumption_sends_source_headers_and_uses_the_role() {
    let proxy = proxy().await;
    let env = TestEnv::get();
    let mut role = AssumeRole::new("arn:aws:iam::123456789012:role/ccm-test");
    role.source_arn = Some("arn:aws:eks:us-east-1:123456789012:cluster/test".into());
    let options = AdapterOptions::default()
        .with_rate_limits(RateLimits::unlimited())
        .with_retry(fast_retry())
        .with_endpoint_url(proxy.url())
        .with_assume_role(role);
    let adapter = Adapter::new(&env.aws_config().await, options);
    adapter.ec2().availability_zones().await.unwrap();
    assert_eq!(proxy.requests("AssumeRole"), 1);
    let headers = proxy.last_headers("AssumeRole").unwrap();
    assert_eq!(
        headers.get("x-amz-source-account").map(String::as_str),
        Some("123456789012")
    );
    assert_eq!(
        headers.get("x-amz-source-arn").map(String::as_str),
        Some("arn:aws:eks:us-east-1:123456789012:cluster/test")
    );
    // The EC2 call was signed with the assumed role's key, not the static test key.
    let auth = proxy.last_headers("DescribeAvailabilityZones").unwrap()["authorization"].clone();
    assert!(!auth.contains("Credential=testing/"), "{auth}");
    // Credentials are cached: a second call does not assume the role again.
    adapter.ec2().availability_zones().await.unwrap();
    assert_eq!(proxy.requests("AssumeRole"), 1);
}

#[tokio::test]
async fn service_overrides_set_url_signing_region_and_signing_name() {
    let proxy = proxy().await;
    let env = TestEnv::get();
    let over = |service, signing_name: Option<&str>| {
        ccm_aws_sdk::EndpointOverride::new(service, env.aws_region.clone(), proxy.url())
            .with_signing_region("us-east-2")
            .with_signing_name(signing_name.map(str::to_owned))
    };
    // Only the overridden services are called: the others would go to AWS.
    let options = AdapterOptions::default()
        .with_rate_limits(RateLimits::unlimited())
        .with_retry(fast_retry())
        .with_endpoint_overrides(vec![
            over(Service::Ec2, Some("custom-ec2")),
            over(Service::Elb, None),
        ]);
    let adapter = Adapter::new(&env.aws_config().await, options);
    // moto routes requests by the signing name, so the proxy answers the custom-signed one itself.
    proxy.inject(
        "DescribeAvailabilityZones",
        Fault::Respond {
            status: 200,
            content_type: "text/xml".into(),
            body: "<DescribeAvailabilityZonesResponse xmlns=\"http://ec2.amazonaws.com/doc/2016-11-15/\">\
                   <availabilityZoneInfo/></DescribeAvailabilityZonesResponse>"
                .into(),
        },
        1,
    );
    adapter.ec2().availability_zones().await.unwrap();
    let auth = proxy.last_headers("DescribeAvailabilityZones").unwrap()["authorization"].clone();
    assert!(auth.contains("/us-east-2/custom-ec2/aws4_request"), "{auth}");
    // moto answers for the signing region's (empty) state: only the signature matters here.
    let _ = adapter.elb().load_balancer("override-check").await.unwrap();
    let auth = proxy.last_headers("DescribeLoadBalancers").unwrap()["authorization"].clone();
    assert!(
        auth.contains("/us-east-2/elasticloadbalancing/aws4_request"),
        "{auth}"
    );
}

#[tokio::test]
async fn the_user_agent_carries_the_kubernetes_key_as_upstream() {
    use ccm_aws_api::Elbv2;
    let proxy = proxy().await;
    let adapter = adapter(Some(&proxy.url())).await;
    proxy.inject(
        "DescribeAvailabilityZones",
        Fault::error(500, "InternalFailure"),
        1,
    );
    adapter.ec2().availability_zones().await.unwrap();
    adapter.elb().load_balancer("no-such-lb-agent").await.unwrap();
    adapter.elbv2().load_balancer("no-such-nlb-agent").await.unwrap();
    let key = ccm_aws_sdk::kubernetes_user_agent();
    assert!(key.starts_with("kubernetes/v"), "{key}");
    for action in ["DescribeAvailabilityZones", "DescribeLoadBalancers"] {
        // (DescribeLoadBalancers: the last one is ELBv2's; both clients share the interceptor.)
        let headers = proxy.last_headers(action).unwrap();
        let agent = &headers["user-agent"];
        assert!(agent.split(' ').any(|part| part == key), "{action}: {agent}");
        assert!(
            agent.starts_with("aws-sdk-rust/"),
            "the SDK's own agent is kept: {agent}"
        );
    }
    // The Go controller's response status counter, by the SDK's service ID.
    let mut registry = prometheus_client::registry::Registry::default();
    adapter.metrics().register(&mut registry);
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
    let line = r#"cloudprovider_aws_api_response_status_total{service="EC2",operation="DescribeAvailabilityZones",status_code="500"} 1"#;
    assert!(text.lines().any(|l| l == line), "{line} missing:\n{text}");
}

#[tokio::test]
async fn a_read_only_adapter_refuses_every_write_without_sending_it() {
    let proxy = proxy().await;
    let options = AdapterOptions::default()
        .with_retry(fast_retry())
        .with_endpoint_url(proxy.url())
        .with_read_only(true);
    let adapter = Adapter::new(&TestEnv::get().aws_config().await, options);

    // Reads are sent as usual.
    assert!(!adapter.ec2().availability_zones().await.unwrap().is_empty());
    assert_eq!(
        adapter.elb().load_balancer("no-such-lb-read-only").await.unwrap(),
        None
    );

    // Writes of each service are refused as EC2 refuses a DryRun request, and never reach AWS.
    let tags = Tags::from([("k".to_owned(), "v".to_owned())]);
    let refusals = [
        adapter
            .ec2()
            .create_tags(&["i-0123456789abcdef0".to_owned()], &tags)
            .await
            .unwrap_err(),
        adapter
            .elb()
            .delete_load_balancer("no-such-lb-read-only")
            .await
            .unwrap_err(),
        adapter
            .elbv2()
            .delete_load_balancer("arn:aws:elasticloadbalancing:x")
            .await
            .unwrap_err(),
    ];
    for e in &refusals {
        assert_eq!(e.kind(), ErrorKind::AccessDenied, "{e}");
        assert_eq!(e.code(), Some("DryRunOperation"), "{e}");
        assert!(e.to_string().contains("dry run"), "{e}");
    }
    for action in ["CreateTags", "DeleteLoadBalancer"] {
        assert_eq!(proxy.requests(action), 0, "{action} was sent");
    }
    assert_eq!(proxy.requests("DescribeAvailabilityZones"), 1);
    let m = adapter.metrics();
    assert_eq!(m.attempts_with("ec2", "CreateTags", "dry_run"), 1);
    assert_eq!(m.attempts_with("ec2", "CreateTags", "ok"), 0);
}
