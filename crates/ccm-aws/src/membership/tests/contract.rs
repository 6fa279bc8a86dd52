//! Every method of the `LoadBalancer` and `Routes` contracts, driven through the membership decorators: each
//! reaches the wrapped implementation as itself (a method the decorator forgot would run the contract's default
//! body instead, and show up here as the calls that body makes), and those that take Nodes pass member Nodes
//! only.

use super::*;

#[tokio::test]
async fn every_load_balancer_method_reaches_the_wrapped_one_with_member_nodes() {
    let lookups = Arc::new(AtomicUsize::new(0));
    let lbs = MemberLoadBalancers::new(Recording::default(), membership(&lookups));
    let own = node("own", Some(&format!("aws:///us-east-1a/{OWN}")));
    let forged = node("forged", Some(&format!("aws:///us-east-1a/{FOREIGN}")));
    let nodes = [&own, &forged];
    let (svc, old) = (Service::default(), Service::default());
    lbs.get_load_balancer("k", &svc).await.unwrap();
    lbs.load_balancer_name("k", &svc);
    lbs.ensure_load_balancer("k", &svc, &nodes).await.unwrap();
    lbs.ensure_load_balancer_reporting("k", &svc, &nodes)
        .await
        .unwrap();
    lbs.update_load_balancer("k", &svc, &nodes).await.unwrap();
    lbs.ensure_load_balancer_deleted("k", &svc).await.unwrap();
    lbs.ensure_predecessor_load_balancer_deleted("k", &old, &svc)
        .await
        .unwrap();
    lbs.drifted("k", &[&svc], &nodes).await.unwrap();
    lbs.plan_load_balancer("k", &svc, &nodes).await.unwrap();
    let own_only = || vec!["own".to_owned()];
    let expected: Vec<(&str, Vec<String>)> = vec![
        ("get_load_balancer", Vec::new()),
        ("load_balancer_name", Vec::new()),
        ("ensure_load_balancer", own_only()),
        ("ensure_load_balancer_reporting", own_only()),
        ("update_load_balancer", own_only()),
        ("ensure_load_balancer_deleted", Vec::new()),
        ("ensure_predecessor_load_balancer_deleted", Vec::new()),
        ("drifted", own_only()),
        ("plan_load_balancer", own_only()),
    ];
    assert_eq!(lbs.inner().calls(), expected);
}

#[tokio::test]
async fn every_routes_method_reaches_the_wrapped_one_and_only_member_targets_are_created() {
    let lookups = Arc::new(AtomicUsize::new(0));
    let routes = MemberRoutes::new(RecordingRoutes::default(), membership(&lookups));
    let own = node("own", Some(&format!("aws:///us-east-1a/{OWN}")));
    let forged = node("forged", Some(&format!("aws:///us-east-1a/{FOREIGN}")));
    routes.observe_nodes(&[&own, &forged]);
    routes.list_routes("k").await.unwrap();
    routes.create_route("k", "uid-1", &route("own")).await.unwrap();
    routes
        .create_route("k", "uid-2", &route("forged"))
        .await
        .unwrap_err();
    routes.delete_route("k", &route("forged")).await.unwrap();
    let expected = [
        "observe_nodes 2",
        "list_routes",
        "create_route own",
        "delete_route forged",
    ];
    assert_eq!(routes.inner().calls(), expected);
}
