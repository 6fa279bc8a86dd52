#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::{
    collections::BTreeMap,
    future::Future,
    pin::Pin,
    sync::{Arc, Mutex},
};

use ccm_aws_api::{
    AwsError, Tags,
    ec2::{Instance, InstanceState, MockEc2},
};

use super::*;

mod targets;

const CLUSTER: &str = "kubernetes";
const ID: &str = "c1";

type Fut<T> = Pin<Box<dyn Future<Output = ccm_aws_api::Result<T>> + Send>>;

fn ok<T: Send + 'static>(value: T) -> Fut<T> {
    Box::pin(async move { Ok(value) })
}

fn err<T: Send + 'static>(kind: ErrorKind, op: &'static str) -> Fut<T> {
    Box::pin(async move { Err(AwsError::new(kind, "ec2", op)) })
}

fn tags(pairs: &[(&str, &str)]) -> Tags {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

fn owned() -> Tags {
    tags(&[("kubernetes.io/cluster/c1", "owned")])
}

fn table(id: &str, tags: Tags, routes: Vec<Ec2Route>) -> RouteTable {
    RouteTable::new(RouteTableId::new(id), VpcId::new("vpc-1"), routes, tags)
}

fn to(cidr: &str, instance: &str) -> Ec2Route {
    let mut r = Ec2Route::to_instance(cidr, InstanceId::new(instance));
    if cidr.contains(':') {
        r.destination_ipv6_cidr = r.destination_cidr.take();
    }
    r
}

fn blackhole(cidr: &str, instance: &str) -> Ec2Route {
    let mut r = to(cidr, instance);
    r.state = RouteState::Blackhole;
    r
}

fn instance(id: &str, dns: &str, tags: Tags) -> Instance {
    let mut i = Instance::new(InstanceId::new(id), InstanceState::Running);
    i.private_dns_name = Some(dns.to_owned());
    i.tags = tags;
    i
}

fn route(node: &str, cidr: &str) -> Route {
    Route {
        target_node: node.to_owned(),
        destination_cidr: cidr.to_owned(),
        ..Route::default()
    }
}

/// EC2 as shared state behind a mock: the route tables (answering `route_tables` as EC2 filters would, minus the
/// client-side rules under test), instances, and every call made.
#[derive(Clone, Default)]
struct World {
    tables: Arc<Mutex<Vec<RouteTable>>>,
    instances: Arc<Mutex<Vec<Instance>>>,
    calls: Arc<Mutex<Vec<String>>>,
    /// Calls (by name) that fail once with the given kind.
    fail_once: Arc<Mutex<BTreeMap<&'static str, ErrorKind>>>,
}

impl World {
    fn new(tables: Vec<RouteTable>, instances: Vec<Instance>) -> Self {
        let w = Self::default();
        *w.tables.lock().unwrap() = tables;
        *w.instances.lock().unwrap() = instances;
        w
    }

    fn calls(&self) -> Vec<String> {
        self.calls.lock().unwrap().clone()
    }

    fn count(&self, op: &str) -> usize {
        self.calls()
            .iter()
            .filter(|c| c.split(' ').next() == Some(op))
            .count()
    }

    fn clear(&self) {
        self.calls.lock().unwrap().clear();
    }

    fn fail_once(&self, op: &'static str, kind: ErrorKind) {
        self.fail_once.lock().unwrap().insert(op, kind);
    }

    fn failing(&self, op: &'static str) -> Option<ErrorKind> {
        self.fail_once.lock().unwrap().remove(op)
    }

    fn log(&self, call: String) {
        self.calls.lock().unwrap().push(call);
    }

    fn routes_of(&self, table: &str) -> Vec<Ec2Route> {
        self.tables
            .lock()
            .unwrap()
            .iter()
            .find(|t| t.id.as_str() == table)
            .unwrap()
            .routes
            .clone()
    }

    fn mock(&self) -> MockEc2 {
        let mut ec2 = MockEc2::new();
        let w = self.clone();
        ec2.expect_route_tables().returning(move |filters| {
            w.log(format!("route_tables {filters:?}"));
            if let Some(kind) = w.failing("route_tables") {
                return err(kind, "DescribeRouteTables");
            }
            let out = w
                .tables
                .lock()
                .unwrap()
                .iter()
                .filter(|t| {
                    filters.iter().all(|f| match f.name.as_str() {
                        "route-table-id" => f.values.iter().any(|v| v == t.id.as_str()),
                        "vpc-id" => f.values.iter().any(|v| v == t.vpc_id.as_str()),
                        "tag-key" => f.values.iter().any(|v| t.tags.contains_key(v)),
                        other => panic!("unexpected filter {other}"),
                    })
                })
                .cloned()
                .collect();
            ok(out)
        });
        let w = self.clone();
        ec2.expect_instances_by_id().returning(move |ids| {
            w.log(format!("instances_by_id {ids:?}"));
            let out = w
                .instances
                .lock()
                .unwrap()
                .iter()
                .filter(|i| ids.contains(&i.id))
                .cloned()
                .collect();
            ok(out)
        });
        let w = self.clone();
        ec2.expect_instances().returning(move |filters| {
            w.log(format!("instances {filters:?}"));
            let name = &filters
                .iter()
                .find(|f| f.name == "private-dns-name")
                .unwrap()
                .values;
            assert!(
                filters
                    .iter()
                    .any(|f| f.name == "instance-state-name" && f.values.len() == 5)
            );
            let out = w
                .instances
                .lock()
                .unwrap()
                .iter()
                .filter(|i| i.private_dns_name.as_ref().is_some_and(|d| name.contains(d)))
                .cloned()
                .collect();
            ok(out)
        });
        let w = self.clone();
        ec2.expect_set_source_dest_check()
            .returning(move |instance, enabled| {
                w.log(format!("set_source_dest_check {instance} {enabled}"));
                if let Some(kind) = w.failing("set_source_dest_check") {
                    return err(kind, "ModifyInstanceAttribute");
                }
                ok(())
            });
        let w = self.clone();
        ec2.expect_create_route().returning(move |table, cidr, instance| {
            w.log(format!("create_route {table} {cidr} {instance}"));
            if let Some(kind) = w.failing("create_route") {
                return err(kind, "CreateRoute");
            }
            let mut tables = w.tables.lock().unwrap();
            let t = tables.iter_mut().find(|t| t.id == *table).unwrap();
            let c = Cidr::parse(cidr).unwrap();
            if t.routes
                .iter()
                .any(|r| destination(r).is_some_and(|(d, _)| d == c))
            {
                return err(ErrorKind::AlreadyExists, "CreateRoute");
            }
            t.routes.push(to(cidr, instance.as_str()));
            ok(())
        });
        let w = self.clone();
        ec2.expect_replace_route()
            .returning(move |table, cidr, instance| {
                w.log(format!("replace_route {table} {cidr} {instance}"));
                let mut tables = w.tables.lock().unwrap();
                let t = tables.iter_mut().find(|t| t.id == *table).unwrap();
                let c = Cidr::parse(cidr).unwrap();
                let Some(r) = t
                    .routes
                    .iter_mut()
                    .find(|r| destination(r).is_some_and(|(d, _)| d == c))
                else {
                    return err(ErrorKind::NotFound, "ReplaceRoute");
                };
                *r = to(cidr, instance.as_str());
                ok(())
            });
        let w = self.clone();
        ec2.expect_delete_route().returning(move |table, cidr| {
            w.log(format!("delete_route {table} {cidr}"));
            if let Some(kind) = w.failing("delete_route") {
                return err(kind, "DeleteRoute");
            }
            let mut tables = w.tables.lock().unwrap();
            let t = tables.iter_mut().find(|t| t.id == *table).unwrap();
            let c = Cidr::parse(cidr).unwrap();
            let before = t.routes.len();
            t.routes.retain(|r| destination(r).is_none_or(|(d, _)| d != c));
            if before == t.routes.len() {
                return err(ErrorKind::NotFound, "DeleteRoute");
            }
            ok(())
        });
        ec2
    }

    fn routes(&self) -> AwsRoutes<MockEc2> {
        AwsRoutes::new(self.mock(), config())
    }
}

fn config() -> RoutesConfig {
    RoutesConfig::new(ClusterTags::new(ID, false).unwrap())
}

/// Two tables of the cluster, one of another cluster, one untagged; two instances of the cluster, one foreign.
fn cluster_world() -> World {
    World::new(
        vec![
            table(
                "rtb-a",
                owned(),
                vec![
                    Ec2Route::to_gateway("10.0.0.0/16", "local"),
                    Ec2Route::to_gateway("0.0.0.0/0", "igw-1"),
                    to("10.244.1.0/24", "i-1"),
                    to("10.244.2.0/24", "i-2"),
                    to("fd00:10:244:1::/64", "i-1"),
                    blackhole("10.244.9.0/24", "i-dead"),
                    to("10.244.7.0/24", "i-foreign"),
                ],
            ),
            table(
                "rtb-b",
                tags(&[("kubernetes.io/cluster/c1", "shared")]),
                vec![
                    Ec2Route::to_gateway("10.0.0.0/16", "local"),
                    to("10.244.1.0/24", "i-1"),
                    // 10.244.2.0/24 missing here: reported absent so that it gets created.
                    to("fd00:10:244:1:0:0:0:0/64", "i-1"),
                    blackhole("10.244.9.0/24", "i-dead"),
                    to("10.244.7.0/24", "i-foreign"),
                ],
            ),
            table(
                "rtb-other",
                tags(&[("kubernetes.io/cluster/c2", "owned")]),
                vec![to("10.244.3.0/24", "i-1")],
            ),
            table("rtb-untagged", Tags::new(), vec![to("10.244.4.0/24", "i-1")]),
        ],
        vec![
            instance("i-1", "ip-10-0-0-1.ec2.internal", owned()),
            instance("i-2", "ip-10-0-0-2.ec2.internal", owned()),
            instance(
                "i-foreign",
                "ip-10-0-0-9.ec2.internal",
                tags(&[("kubernetes.io/cluster/c2", "owned")]),
            ),
        ],
    )
}

fn summary(routes: &[Route]) -> Vec<(String, String, bool)> {
    let mut out: Vec<_> = routes
        .iter()
        .map(|r| (r.destination_cidr.clone(), r.target_node.clone(), r.blackhole))
        .collect();
    out.sort();
    out
}

#[tokio::test(start_paused = true)]
async fn list_reports_routes_present_in_every_tagged_table_and_blackholes() {
    let world = cluster_world();
    // A table tagged only for another cluster but with our legacy key present must be filtered client-side.
    world.tables.lock().unwrap().push(table(
        "rtb-legacy-other",
        tags(&[("KubernetesCluster", "c2")]),
        vec![to("10.244.5.0/24", "i-1")],
    ));
    let routes = world.routes();
    let listed = routes.list(CLUSTER).await.unwrap();
    assert_eq!(
        summary(&listed),
        vec![
            ("10.244.1.0/24".into(), "ip-10-0-0-1.ec2.internal".into(), false),
            ("10.244.9.0/24".into(), String::new(), true),
            (
                "fd00:10:244:1::/64".into(),
                "ip-10-0-0-1.ec2.internal".into(),
                false
            ),
        ],
        "10.244.2.0/24 is only in one table, 10.244.7.0/24 targets a foreign instance, gateways are not ours"
    );
    assert!(
        listed
            .iter()
            .any(|r| r.name == "kubernetes-10.244.9.0/24" && r.blackhole)
    );
    assert_eq!(
        world.calls(),
        vec![
            r#"route_tables [Filter { name: "tag-key", values: ["kubernetes.io/cluster/c1", "KubernetesCluster"] }]"#
                .to_owned(),
            r#"instances_by_id ["i-1", "i-2", "i-foreign"]"#.to_owned(),
        ]
    );

    // Steady state: one DescribeRouteTables; names of cluster instances are remembered (by the instance
    // catalog), the foreign one is described again once its read is a minute old (it may be tagged meanwhile).
    world.clear();
    routes.list(CLUSTER).await.unwrap();
    assert_eq!(world.calls().len(), 1, "{:?}", world.calls());
    assert_eq!(world.count("route_tables"), 1);
    tokio::time::advance(Duration::from_secs(60)).await;
    world.clear();
    routes.list(CLUSTER).await.unwrap();
    assert_eq!(
        world.calls()[1..],
        [r#"instances_by_id ["i-foreign"]"#.to_owned()]
    );
}

struct Directory(BTreeMap<String, String>);

impl NodeNames for Directory {
    fn node_name(&self, instance: &InstanceId) -> Option<String> {
        self.0.get(instance.as_str()).cloned()
    }
    fn instance_id(&self, node_name: &str) -> Option<InstanceId> {
        self.0
            .iter()
            .find(|(_, n)| *n == node_name)
            .map(|(i, _)| InstanceId::new(i.as_str()))
    }
}

fn directory() -> Directory {
    Directory(
        [("i-1", "node-one"), ("i-2", "node-two"), ("i-foreign", "x")]
            .into_iter()
            .map(|(a, b)| (a.to_owned(), b.to_owned()))
            .collect(),
    )
}

#[tokio::test]
async fn node_names_name_routes_without_describing_instances() {
    let world = cluster_world();
    let routes = AwsRoutes::new(world.mock(), config()).with_node_names(directory());
    let listed = routes.list(CLUSTER).await.unwrap();
    assert!(listed.iter().any(|r| r.target_node == "node-one"));
    assert!(
        listed.iter().any(|r| r.target_node == "x"),
        "the directory is the authority for routes to its instances"
    );
    assert_eq!(world.calls().len(), 1, "{:?}", world.calls());

    // Creating by node name uses the directory too: no DescribeInstances.
    world.clear();
    routes
        .create(CLUSTER, &route("node-two", "10.244.2.0/24"))
        .await
        .unwrap();
    assert_eq!(
        world.calls(),
        vec![
            "set_source_dest_check i-2 false",
            "create_route rtb-b 10.244.2.0/24 i-2"
        ]
    );
}

#[tokio::test]
async fn create_fills_missing_tables_disables_the_check_once_and_reuses_the_listed_tables() {
    let world = cluster_world();
    let routes = world.routes();
    routes.list(CLUSTER).await.unwrap();
    world.clear();

    routes
        .create(CLUSTER, &route("ip-10-0-0-2.ec2.internal", "10.244.2.0/24"))
        .await
        .unwrap();
    routes
        .create(CLUSTER, &route("ip-10-0-0-2.ec2.internal", "fd00:10:244:2::/64"))
        .await
        .unwrap();
    let calls = world.calls();
    assert_eq!(world.count("set_source_dest_check"), 1, "{calls:?}");
    assert_eq!(
        world.count("route_tables"),
        0,
        "the listed tables are reused: {calls:?}"
    );
    assert_eq!(
        world.count("instances"),
        2,
        "one DNS lookup per create: {calls:?}"
    );
    assert_eq!(
        calls
            .iter()
            .filter(|c| c.starts_with("create_route"))
            .collect::<Vec<_>>(),
        vec![
            "create_route rtb-b 10.244.2.0/24 i-2",
            "create_route rtb-a fd00:10:244:2::/64 i-2",
            "create_route rtb-b fd00:10:244:2::/64 i-2",
        ],
        "rtb-a had 10.244.2.0/24 already"
    );
    // Now listed, in both families.
    let listed = routes.list(CLUSTER).await.unwrap();
    let two: Vec<_> = listed
        .iter()
        .filter(|r| r.target_node == "ip-10-0-0-2.ec2.internal")
        .map(|r| r.destination_cidr.as_str())
        .collect();
    assert_eq!(two, vec!["10.244.2.0/24", "fd00:10:244:2::/64"]);
    // Untouched: the other cluster's and the untagged table.
    assert_eq!(world.routes_of("rtb-other"), vec![to("10.244.3.0/24", "i-1")]);
    assert_eq!(world.routes_of("rtb-untagged"), vec![to("10.244.4.0/24", "i-1")]);

    // Its routes deleted and listed, the instance is forgotten: a later route to it checks it again (the
    // set of instances stays bounded by the routes).
    for cidr in ["10.244.2.0/24", "fd00:10:244:2::/64"] {
        routes
            .delete(CLUSTER, &route("ip-10-0-0-2.ec2.internal", cidr))
            .await
            .unwrap();
    }
    routes.list(CLUSTER).await.unwrap();
    world.clear();
    routes
        .create(CLUSTER, &route("ip-10-0-0-2.ec2.internal", "10.244.2.0/24"))
        .await
        .unwrap();
    assert_eq!(world.count("set_source_dest_check"), 1, "{:?}", world.calls());
}

#[tokio::test]
async fn create_replaces_a_blackhole_instead_of_deleting_it() {
    let world = cluster_world();
    let routes = world.routes();
    routes.list(CLUSTER).await.unwrap();
    world.clear();
    routes
        .create(CLUSTER, &route("i-2", "10.244.9.0/24"))
        .await
        .unwrap();
    assert_eq!(
        world.calls(),
        vec![
            "set_source_dest_check i-2 false",
            "replace_route rtb-a 10.244.9.0/24 i-2",
            "replace_route rtb-b 10.244.9.0/24 i-2",
        ]
    );
    assert!(world.routes_of("rtb-a").contains(&to("10.244.9.0/24", "i-2")));
}

#[tokio::test]
async fn the_blackhole_delete_and_the_replacing_create_do_not_undo_each_other() {
    let world = cluster_world();
    let routes = world.routes();
    let listed = routes.list(CLUSTER).await.unwrap();
    let hole = listed.iter().find(|r| r.blackhole).unwrap().clone();
    // The route controller deletes the blackhole and creates the new route concurrently; whichever runs
    // first, the new route survives.
    let new = route("i-2", "10.244.9.0/24");
    let (a, b) = tokio::join!(routes.create(CLUSTER, &new), routes.delete(CLUSTER, &hole));
    a.unwrap();
    b.unwrap();
    for t in ["rtb-a", "rtb-b"] {
        assert!(world.routes_of(t).contains(&to("10.244.9.0/24", "i-2")), "{t}");
    }
}

#[tokio::test]
async fn an_active_route_to_something_else_is_a_conflict_and_left_alone() {
    let world = cluster_world();
    let routes = world.routes();
    routes.list(CLUSTER).await.unwrap();
    world.clear();
    let e = routes
        .create(CLUSTER, &route("i-2", "10.244.7.0/24"))
        .await
        .unwrap_err();
    assert!(
        matches!(e, RoutesError::Conflict { ref target, .. } if target == "instance i-foreign"),
        "{e}"
    );
    let e = routes
        .create(CLUSTER, &route("i-2", "0.0.0.0/0"))
        .await
        .unwrap_err();
    assert!(
        matches!(e, RoutesError::Conflict { ref target, .. } if target == "gateway igw-1"),
        "{e}"
    );
    assert_eq!(
        world.count("create_route") + world.count("replace_route"),
        1,
        "only rtb-b lacks 0.0.0.0/0"
    );
    assert!(
        world
            .routes_of("rtb-a")
            .contains(&to("10.244.7.0/24", "i-foreign"))
    );
}

#[tokio::test]
async fn a_stale_snapshot_is_corrected_by_rereading_the_table() {
    let world = cluster_world();
    let routes = world.routes();
    routes.list(CLUSTER).await.unwrap();
    // Someone (a previous run, another replica) created the route meanwhile.
    world.tables.lock().unwrap()[1]
        .routes
        .push(to("10.244.2.0/24", "i-2"));
    world.clear();
    routes
        .create(CLUSTER, &route("i-2", "10.244.2.0/24"))
        .await
        .unwrap();
    assert_eq!(
        world.calls()[1..],
        [
            "create_route rtb-b 10.244.2.0/24 i-2".to_owned(),
            r#"route_tables [Filter { name: "route-table-id", values: ["rtb-b"] }]"#.to_owned(),
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn an_old_snapshot_is_refreshed_once_for_concurrent_changes() {
    let world = cluster_world();
    let routes = world.routes();
    routes.list(CLUSTER).await.unwrap();
    tokio::time::advance(Duration::from_secs(31)).await;
    world.clear();
    let (two, eight) = (route("i-2", "10.244.2.0/24"), route("i-1", "10.244.8.0/24"));
    let (a, b) = tokio::join!(routes.create(CLUSTER, &two), routes.create(CLUSTER, &eight));
    a.unwrap();
    b.unwrap();
    assert_eq!(world.count("route_tables"), 1, "{:?}", world.calls());
}

#[tokio::test]
async fn create_without_any_list_reads_the_tables_itself() {
    let world = cluster_world();
    let routes = world.routes();
    routes
        .create(CLUSTER, &route("i-1.us-east-1.compute.internal", "10.244.8.0/24"))
        .await
        .unwrap();
    assert_eq!(
        world.calls(),
        vec![
            "set_source_dest_check i-1 false".to_owned(),
            r#"route_tables [Filter { name: "tag-key", values: ["kubernetes.io/cluster/c1", "KubernetesCluster"] }]"#
                .to_owned(),
            "create_route rtb-a 10.244.8.0/24 i-1".to_owned(),
            "create_route rtb-b 10.244.8.0/24 i-1".to_owned(),
        ],
        "an i- name is an instance ID up to the first dot: no DescribeInstances"
    );
}

#[tokio::test]
async fn instance_lookup_by_name_errors() {
    let world = cluster_world();
    world.instances.lock().unwrap().extend([
        instance("i-3", "ip-10-0-0-3.ec2.internal", owned()),
        instance("i-4", "ip-10-0-0-3.ec2.internal", owned()),
        instance(
            "i-5",
            "ip-10-0-0-5.ec2.internal",
            tags(&[("kubernetes.io/cluster/c2", "owned")]),
        ),
    ]);
    let routes = world.routes();
    let e = routes
        .create(CLUSTER, &route("ip-10-0-0-3.ec2.internal", "10.244.8.0/24"))
        .await
        .unwrap_err();
    assert!(matches!(e, RoutesError::MultipleInstances { .. }), "{e}");
    let e = routes
        .create(CLUSTER, &route("ip-10-0-0-5.ec2.internal", "10.244.8.0/24"))
        .await
        .unwrap_err();
    assert!(
        matches!(e, RoutesError::InstanceNotFound { .. }),
        "a foreign instance is not ours: {e}"
    );
    assert!(CloudError::from(e).is_instance_not_found());
    let e = routes
        .create(CLUSTER, &route("i-1", "10.244.8.0/33"))
        .await
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        r#"invalid destination CIDR "10.244.8.0/33": expected an IPv4 or IPv6 CIDR such as 10.244.1.0/24"#
    );
    assert_eq!(world.count("create_route"), 0);
}

#[tokio::test]
async fn a_failed_source_dest_check_blocks_the_route_and_is_retried() {
    let world = cluster_world();
    let routes = world.routes();
    world.fail_once("set_source_dest_check", ErrorKind::Throttled);
    let e = routes
        .create(CLUSTER, &route("i-2", "10.244.2.0/24"))
        .await
        .unwrap_err();
    let cloud = CloudError::from(e);
    assert_eq!(cloud.retry_delay(), Some(Duration::from_secs(10)), "{cloud}");
    assert_eq!(world.count("create_route"), 0);
    routes
        .create(CLUSTER, &route("i-2", "10.244.2.0/24"))
        .await
        .unwrap();
    assert_eq!(world.count("set_source_dest_check"), 2);
}

#[tokio::test]
async fn one_failing_table_does_not_stop_the_others() {
    let world = cluster_world();
    let routes = world.routes();
    routes.list(CLUSTER).await.unwrap();
    world.fail_once("create_route", ErrorKind::Transient);
    let e = routes
        .create(CLUSTER, &route("i-1", "10.244.8.0/24"))
        .await
        .unwrap_err();
    assert!(
        e.to_string()
            .contains("error creating AWS route (10.244.8.0/24) in rtb-a"),
        "{e}"
    );
    assert!(world.routes_of("rtb-b").contains(&to("10.244.8.0/24", "i-1")));
    assert!(
        !routes
            .list(CLUSTER)
            .await
            .unwrap()
            .iter()
            .any(|r| r.destination_cidr == "10.244.8.0/24")
    );
    routes
        .create(CLUSTER, &route("i-1", "10.244.8.0/24"))
        .await
        .unwrap();
    assert!(
        routes
            .list(CLUSTER)
            .await
            .unwrap()
            .iter()
            .any(|r| r.destination_cidr == "10.244.8.0/24")
    );
}

#[tokio::test]
async fn delete_removes_only_routes_to_the_listed_instance() {
    let world = cluster_world();
    let routes = world.routes();
    let listed = routes.list(CLUSTER).await.unwrap();
    world.clear();
    let one = listed
        .iter()
        .find(|r| r.destination_cidr == "10.244.1.0/24")
        .unwrap();
    routes.delete(CLUSTER, one).await.unwrap();
    assert_eq!(
        world.calls(),
        vec![
            "delete_route rtb-a 10.244.1.0/24",
            "delete_route rtb-b 10.244.1.0/24"
        ]
    );
    // Gone already: nothing to do, no error.
    world.clear();
    routes.delete(CLUSTER, one).await.unwrap();
    assert!(world.calls().is_empty(), "{:?}", world.calls());
    // A route to a gateway is never deleted, even if asked.
    routes.delete(CLUSTER, &route("", "0.0.0.0/0")).await.unwrap();
    assert!(world.calls().is_empty());
    assert_eq!(world.routes_of("rtb-other").len(), 1);
    assert_eq!(world.routes_of("rtb-untagged").len(), 1);
}

#[tokio::test]
async fn deleting_a_blackhole_spares_an_active_route_for_the_same_cidr() {
    let world = cluster_world();
    {
        let mut tables = world.tables.lock().unwrap();
        tables[1]
            .routes
            .retain(|r| r.destination_cidr.as_deref() != Some("10.244.9.0/24"));
        tables[1].routes.push(to("10.244.9.0/24", "i-foreign"));
    }
    let routes = world.routes();
    let listed = routes.list(CLUSTER).await.unwrap();
    let hole = listed.iter().find(|r| r.blackhole).unwrap();
    world.clear();
    routes.delete(CLUSTER, hole).await.unwrap();
    assert_eq!(world.calls(), vec!["delete_route rtb-a 10.244.9.0/24"]);
    assert!(
        world
            .routes_of("rtb-b")
            .contains(&to("10.244.9.0/24", "i-foreign"))
    );
}

#[tokio::test]
async fn delete_errors_are_reported_after_trying_every_table() {
    let world = cluster_world();
    let routes = world.routes();
    let listed = routes.list(CLUSTER).await.unwrap();
    let one = listed
        .iter()
        .find(|r| r.destination_cidr == "10.244.1.0/24")
        .unwrap();
    world.fail_once("delete_route", ErrorKind::AccessDenied);
    let e = routes.delete(CLUSTER, one).await.unwrap_err();
    assert!(
        e.to_string()
            .contains("failed to delete route 10.244.1.0/24 from rtb-a"),
        "{e}"
    );
    assert!(
        !world
            .routes_of("rtb-b")
            .iter()
            .any(|r| r.destination_cidr.as_deref() == Some("10.244.1.0/24"))
    );
    assert!(CloudError::from(e).retry_delay().is_none());
}

#[tokio::test]
async fn configured_tables_are_used_whatever_their_tags() {
    let world = cluster_world();
    let routes = AwsRoutes::new(
        world.mock(),
        config().with_route_table_ids([RouteTableId::new("rtb-untagged")]),
    );
    let listed = routes.list(CLUSTER).await.unwrap();
    assert_eq!(
        summary(&listed),
        vec![("10.244.4.0/24".into(), "ip-10-0-0-1.ec2.internal".into(), false)]
    );
    assert_eq!(
        world.calls()[0],
        r#"route_tables [Filter { name: "route-table-id", values: ["rtb-untagged"] }]"#
    );
    let missing = AwsRoutes::new(
        world.mock(),
        config().with_route_table_ids([RouteTableId::new("rtb-gone")]),
    );
    let e = missing.list(CLUSTER).await.unwrap_err();
    assert_eq!(
        e.to_string(),
        "route table rtb-gone (RouteTableID in the cloud config) does not exist"
    );
}

#[tokio::test]
async fn no_tagged_table_is_an_error_naming_the_cluster_and_the_fix() {
    let world = World::new(vec![table("rtb-x", Tags::new(), vec![])], vec![]);
    let routes = AwsRoutes::new(world.mock(), config().with_vpc_id(VpcId::new("vpc-1")));
    let e = routes.list(CLUSTER).await.unwrap_err();
    assert_eq!(
        e.to_string(),
        "unable to find route table for AWS cluster: kubernetes (tag it kubernetes.io/cluster/c1=owned or shared, \
         or set RouteTableID in the cloud config)"
    );
    assert!(world.calls()[0].contains(r#"Filter { name: "vpc-id", values: ["vpc-1"] }"#));
}

#[tokio::test]
async fn throttled_describe_becomes_retry_after() {
    let world = cluster_world();
    let routes = world.routes();
    world.fail_once("route_tables", ErrorKind::Throttled);
    let e = routes.list_routes(CLUSTER).await.unwrap_err();
    assert_eq!(e.retry_delay(), Some(Duration::from_secs(10)));
    world.fail_once("route_tables", ErrorKind::AccessDenied);
    let e = routes.list_routes(CLUSTER).await.unwrap_err();
    assert!(e.retry_delay().is_none());
    assert_eq!(e.to_string(), "failed to describe route tables");
}

#[tokio::test]
async fn legacy_tag_with_our_id_counts_as_tagged() {
    let world = World::new(
        vec![table(
            "rtb-l",
            tags(&[("KubernetesCluster", ID)]),
            vec![to("10.244.1.0/24", "i-1")],
        )],
        vec![instance("i-1", "n1", tags(&[("KubernetesCluster", ID)]))],
    );
    let listed = world.routes().list(CLUSTER).await.unwrap();
    assert_eq!(
        summary(&listed),
        vec![("10.244.1.0/24".into(), "n1".into(), false)]
    );
}

#[test]
fn cidrs_compare_by_value() {
    assert_eq!(
        Cidr::parse("fd00:10:244:1::/64"),
        Cidr::parse("fd00:10:244:1:0:0:0:0/64")
    );
    assert_ne!(Cidr::parse("10.0.0.0/24"), Cidr::parse("10.0.0.0/25"));
    assert!(Cidr::parse("10.0.0.0").is_none());
    assert!(Cidr::parse("::/129").is_none());
    assert!(Cidr::parse("x/1").is_none());
}

#[tokio::test]
async fn cidrs_are_reported_in_canonical_form() {
    let world = World::new(
        vec![table(
            "rtb-a",
            owned(),
            vec![to("fd00:10:244:3:0:0:0:0/64", "i-1"), to("10.244.3.0/24", "i-1")],
        )],
        vec![instance("i-1", "n1", owned())],
    );
    let routes = world.routes();
    let listed = routes.list(CLUSTER).await.unwrap();
    assert_eq!(
        summary(&listed),
        vec![
            ("10.244.3.0/24".into(), "n1".into(), false),
            ("fd00:10:244:3::/64".into(), "n1".into(), false),
        ]
    );
    assert_eq!(listed[1].name, "kubernetes-fd00:10:244:3::/64");
    routes.delete(CLUSTER, &listed[1]).await.unwrap();
    assert_eq!(world.routes_of("rtb-a"), vec![to("10.244.3.0/24", "i-1")]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_nodes_cost_one_describe_of_each_kind() {
    let n = 1000;
    let cidr = |i: usize| format!("10.{}.{}.0/24", 100 + i / 256, i % 256);
    let instances: Vec<Instance> = (0..n)
        .map(|i| instance(&format!("i-{i}"), &format!("ip-{i}.ec2.internal"), owned()))
        .collect();
    let routes_a: Vec<Ec2Route> = (0..n).map(|i| to(&cidr(i), &format!("i-{i}"))).collect();
    // Table B lacks the last 100 routes.
    let routes_b: Vec<Ec2Route> = routes_a[..n - 100].to_vec();
    let world = World::new(
        vec![
            table("rtb-a", owned(), routes_a),
            table("rtb-b", owned(), routes_b),
        ],
        instances,
    );
    let routes = Arc::new(world.routes());
    let listed = routes.list(CLUSTER).await.unwrap();
    assert_eq!(listed.len(), n - 100);
    assert_eq!(world.count("route_tables"), 1);
    assert_eq!(
        world.count("instances_by_id"),
        1,
        "one batched lookup for 1,000 targets"
    );
    world.clear();
    routes.list(CLUSTER).await.unwrap();
    assert_eq!(world.calls().len(), 1, "steady: DescribeRouteTables only");

    // The route controller then creates the 100 missing routes concurrently: no table reads, 100 creates.
    world.clear();
    let creates = (n - 100..n).map(|i| {
        let routes = routes.clone();
        let r = route(&format!("i-{i}"), &cidr(i));
        tokio::spawn(async move { routes.create(CLUSTER, &r).await })
    });
    for c in futures_join(creates).await {
        c.unwrap().unwrap();
    }
    assert_eq!(world.count("route_tables"), 0);
    assert_eq!(world.count("create_route"), 100);
    assert_eq!(world.count("set_source_dest_check"), 100);
    assert_eq!(routes.list(CLUSTER).await.unwrap().len(), n);
}

async fn futures_join<T>(
    handles: impl Iterator<Item = tokio::task::JoinHandle<T>>,
) -> Vec<Result<T, tokio::task::JoinError>> {
    let mut out = Vec::new();
    for h in handles.collect::<Vec<_>>() {
        out.push(h.await);
    }
    out
}
