//! The route-target port: asked before anything is read or written, with the instance the Node names.

use super::*;

/// Refuses routes to `refused`, fails when `failing`, and records what it was asked and shown.
#[derive(Default)]
struct Targets {
    refused: &'static str,
    failing: bool,
    asked: Mutex<Vec<(String, Option<String>)>>,
    observed: Mutex<Vec<String>>,
}

impl RouteTargets for Targets {
    fn refusal<'a>(&'a self, node: &'a str, instance: Option<&'a InstanceId>) -> crate::RefusalFuture<'a> {
        let asked = (node.to_owned(), instance.map(ToString::to_string));
        self.asked.lock().unwrap().push(asked);
        let refused = (node == self.refused).then(|| "its instance is another system's".to_owned());
        let failing = self.failing;
        Box::pin(async move {
            if failing {
                return Err(AwsError::new(ErrorKind::Throttled, "ec2", "DescribeInstances"));
            }
            Ok(refused)
        })
    }

    fn observe(&self, nodes: &[&NodeView]) {
        let names = nodes.iter().map(|n| n.name.clone());
        self.observed.lock().unwrap().extend(names);
    }
}

fn refusing(node: &'static str) -> Arc<Targets> {
    Arc::new(Targets {
        refused: node,
        ..Targets::default()
    })
}

#[tokio::test]
async fn a_refused_target_gets_neither_a_route_nor_its_check_disabled() {
    let world = cluster_world();
    let targets = refusing("node-two");
    let routes = AwsRoutes::new(world.mock(), config())
        .with_node_names(directory())
        .with_route_targets(targets.clone());
    let error = routes
        .create_route(CLUSTER, "uid", &route("node-two", "10.244.2.0/24"))
        .await
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        "not routing 10.244.2.0/24 to node node-two: its instance is another system's"
    );
    assert_eq!(world.calls(), Vec::<String>::new(), "nothing read or written");
    routes
        .create_route(CLUSTER, "uid", &route("node-one", "10.244.5.0/24"))
        .await
        .unwrap();
    assert!(
        world
            .calls()
            .contains(&"create_route rtb-a 10.244.5.0/24 i-1".to_owned())
    );
    let asked = targets.asked.lock().unwrap().clone();
    let expected =
        [("node-two", "i-2"), ("node-one", "i-1")].map(|(n, i)| (n.to_owned(), Some(i.to_owned())));
    assert_eq!(asked, expected, "asked with the instance each Node names");
}

#[tokio::test]
async fn the_port_is_asked_with_the_instance_a_name_gives_and_shown_every_node() {
    let world = cluster_world();
    let targets = refusing("none");
    let routes = world.routes().with_route_targets(targets.clone());
    let nodes = [
        ("i-2.us-east-1.compute.internal", "10.244.6.0/24"),
        ("ip-10-0-0-1.ec2.internal", "10.244.8.0/24"),
    ];
    for (node, cidr) in nodes {
        routes.create(CLUSTER, &route(node, cidr)).await.unwrap();
    }
    let asked = targets.asked.lock().unwrap().clone();
    assert_eq!(
        asked,
        [
            (
                "i-2.us-east-1.compute.internal".to_owned(),
                Some("i-2".to_owned())
            ),
            // Looked up among the cluster's tagged instances by the routes: only the Node is checked.
            ("ip-10-0-0-1.ec2.internal".to_owned(), None),
        ]
    );
    let node = NodeView::named("node-one");
    routes.observe_nodes(&[&node]);
    assert_eq!(*targets.observed.lock().unwrap(), ["node-one"]);
}

#[tokio::test]
async fn a_failed_membership_read_is_retried_like_a_throttled_call() {
    let world = cluster_world();
    let targets = Arc::new(Targets {
        failing: true,
        ..Targets::default()
    });
    let routes = world.routes().with_route_targets(targets);
    let error = routes
        .create_route(CLUSTER, "uid", &route("i-1", "10.244.1.0/24"))
        .await
        .unwrap_err();
    assert!(error.retry_delay().is_some(), "{error:?}");
    assert!(
        error.to_string().contains("instance i-1 carries the cluster tag"),
        "{error}"
    );
    assert_eq!(world.calls(), Vec::<String>::new(), "nothing read or written");
}
