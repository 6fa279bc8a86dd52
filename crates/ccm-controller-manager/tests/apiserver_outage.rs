//! An apiserver outage while the runtime runs every controller with the in-memory provider: an environment of
//! its own (etcd + kube-apiserver, started by `scripts/testenv.sh`), whose apiserver is stopped for 60 s and
//! started again. Asserted: no provider mutation while it is down (nothing acts on a stale cache), no Node
//! deleted, no load balancer or route deleted at any time, the runtime never exits (leadership lapses, the
//! controllers stop, and the same identity leads again once the apiserver answers), and a Service created after
//! the return gets its load balancer. How long that took is a figure, printed (and written into
//! docs/reliability.md with `CCM_WRITE_DOCS=1`), never asserted.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::too_many_lines)]

use std::{
    path::{Path, PathBuf},
    process::Command,
    sync::Arc,
    time::Duration,
};

use ccm_controller_manager::{Options, Runtime};
use ccm_testing::{
    TestEnv,
    provider::{Call, FakeInstance, FakeProvider, Method},
};
use k8s_openapi::api::core::v1::{Namespace, Node, Service};
use kube::{
    Api, Client,
    api::{ListParams, Patch, PostParams},
};
use serde_json::json;
use tokio::time::Instant;

const OUTAGE: Duration = Duration::from_secs(60);
const LEASE: Duration = Duration::from_secs(15);
const NODES: usize = 3;

/// An environment of this test's own, taken down when dropped.
struct OwnEnv {
    dir: PathBuf,
    scripts: PathBuf,
    /// The apiserver this test started again, reaped when the environment goes down.
    restarted: std::sync::Mutex<Option<std::process::Child>>,
}

impl OwnEnv {
    fn up() -> Self {
        let scripts = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts");
        // Never the state directory of the environment this process was given (testenv.sh would start in it,
        // fail on its busy ports, and take it down).
        let out = Command::new(scripts.join("testenv.sh"))
            .arg("up")
            .env_remove("CCM_TESTENV_DIR")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "testenv.sh up: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let dir = PathBuf::from(String::from_utf8(out.stdout).unwrap().trim());
        Self {
            dir,
            scripts,
            restarted: std::sync::Mutex::default(),
        }
    }

    fn test_env(&self) -> TestEnv {
        let env = std::fs::read_to_string(self.dir.join("env")).unwrap();
        let var = |name: &str| {
            env.lines()
                .find_map(|l| l.strip_prefix(&format!("export {name}='")))
                .map(|v| v.trim_end_matches('\'').to_owned())
                .unwrap()
        };
        TestEnv {
            kubeconfig: self.dir.join("kubeconfig"),
            kube_apiserver: var("CCM_TEST_KUBE_APISERVER"),
            aws_endpoint: var("CCM_TEST_AWS_ENDPOINT"),
            aws_region: var("CCM_TEST_AWS_REGION"),
            emulator: ccm_testing::Emulator::Moto,
        }
    }

    fn apiserver_pid(&self) -> u32 {
        std::fs::read_to_string(self.dir.join("kube-apiserver.pid"))
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    }

    /// Stops the apiserver (its whole process group) and returns its command line, to start it again.
    fn stop_apiserver(&self) -> Vec<String> {
        let pid = self.apiserver_pid();
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap();
        let argv: Vec<String> = cmdline
            .split(|b| *b == 0)
            .filter(|a| !a.is_empty())
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        let status = Command::new("kill")
            .args(["-TERM", "--", &format!("-{pid}")])
            .status()
            .unwrap();
        assert!(status.success());
        while Path::new(&format!("/proc/{pid}")).exists() && !is_zombie(pid) {
            std::thread::sleep(Duration::from_millis(50));
        }
        argv
    }

    /// Starts the apiserver again with the same command line (same port, same etcd).
    fn start_apiserver(&self, argv: &[String]) {
        let log = std::fs::OpenOptions::new()
            .append(true)
            .open(self.dir.join("kube-apiserver.log"))
            .unwrap();
        let child = Command::new("setsid")
            .args(argv)
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap();
        std::fs::write(self.dir.join("kube-apiserver.pid"), child.id().to_string()).unwrap();
        *self.restarted.lock().unwrap() = Some(child);
    }
}

impl Drop for OwnEnv {
    fn drop(&mut self) {
        let _ = Command::new(self.scripts.join("testenv.sh"))
            .arg("down")
            .arg(&self.dir)
            .output();
        if let Some(mut child) = self.restarted.lock().unwrap().take() {
            let _ = child.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn is_zombie(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| s.rsplit(')').next().unwrap_or("").trim_start().starts_with('Z'))
        .unwrap_or(true)
}

fn is_mutation(c: &Call) -> bool {
    matches!(
        c.method,
        Method::EnsureLoadBalancer
            | Method::UpdateLoadBalancer
            | Method::EnsureLoadBalancerDeleted
            | Method::CreateRoute
            | Method::DeleteRoute
    )
}

async fn eventually(what: &str, limit: Duration, mut check: impl AsyncFnMut() -> bool) -> Duration {
    let t0 = Instant::now();
    while !check().await {
        assert!(t0.elapsed() < limit, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    t0.elapsed()
}

async fn create_node(nodes: &Api<Node>, n: usize) {
    let node: Node = serde_json::from_value(json!({
        "metadata": { "name": format!("n{n}") },
        "spec": { "providerID": format!("fake://n{n}"), "podCIDR": format!("10.244.{n}.0/24") },
    }))
    .unwrap();
    nodes.create(&PostParams::default(), &node).await.unwrap();
    let status =
        json!({ "status": { "conditions": [{ "type": "Ready", "status": "True", "reason": "Test" }] } });
    nodes
        .patch_status(&format!("n{n}"), &Default::default(), &Patch::Strategic(&status))
        .await
        .unwrap();
}

async fn create_service(services: &Api<Service>, name: &str) {
    let svc: Service = serde_json::from_value(json!({
        "metadata": { "name": name },
        "spec": { "type": "LoadBalancer", "ports": [{ "port": 80, "targetPort": 8080 }] },
    }))
    .unwrap();
    services.create(&PostParams::default(), &svc).await.unwrap();
}

async fn has_ingress(services: &Api<Service>, name: &str) -> bool {
    services
        .get_opt(name)
        .await
        .ok()
        .flatten()
        .and_then(|s| s.status?.load_balancer?.ingress)
        .is_some_and(|i| !i.is_empty())
}

async fn node_uids(nodes: &Api<Node>) -> Vec<String> {
    let mut uids: Vec<String> = nodes
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|n| n.metadata.uid)
        .collect();
    uids.sort();
    uids
}

async fn answers(client: &Client) -> bool {
    Api::<Namespace>::all(client.clone())
        .get_opt("default")
        .await
        .is_ok_and(|n| n.is_some())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn controllers_survive_a_60s_apiserver_outage() {
    let own = OwnEnv::up();
    let env = own.test_env();
    let client = env.kube_client().await.unwrap();
    let nodes: Api<Node> = Api::all(client.clone());
    let services: Api<Service> = Api::namespaced(client.clone(), "default");

    let cloud = FakeProvider::new();
    for n in 0..NODES {
        cloud.add_instance(FakeInstance::new(format!("n{n}"), format!("fake://n{n}")));
        create_node(&nodes, n).await;
    }
    create_service(&services, "before").await;
    let options = Options::try_parse_from([
        "--cloud-provider=fake".to_owned(),
        format!("--kubeconfig={}", env.kubeconfig.display()),
        "--secure-port=0".to_owned(),
        "--cluster-cidr=10.244.0.0/16".to_owned(),
        "--node-monitor-period=1s".to_owned(),
        "--route-reconciliation-period=2s".to_owned(),
    ])
    .unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let runtime = tokio::spawn(Runtime::new(options).run_until(Arc::new(cloud.clone()), async {
        let _ = stopped.await;
    }));
    eventually(
        "the load balancer and the routes",
        Duration::from_secs(60),
        async || has_ingress(&services, "before").await && cloud.route_list().len() == NODES,
    )
    .await;
    let uids = node_uids(&nodes).await;
    let settled = cloud.calls().len();

    let argv = own.stop_apiserver();
    let down = Instant::now();
    tokio::time::sleep(OUTAGE).await;
    own.start_apiserver(&argv);
    let restarted = Instant::now();
    eventually(
        "the apiserver to answer again",
        Duration::from_secs(120),
        async || answers(&client).await,
    )
    .await;
    let back = Instant::now();
    let during: Vec<Call> = cloud.calls()[settled..]
        .iter()
        .filter(|c| is_mutation(c))
        .cloned()
        .collect();
    let calls_at_return = cloud.calls().len();

    create_service(&services, "after").await;
    let recovery = eventually(
        "a load balancer for a new Service",
        Duration::from_secs(120),
        async || has_ingress(&services, "after").await,
    )
    .await;
    let after: Vec<Call> = cloud.calls()[calls_at_return..]
        .iter()
        .filter(|c| is_mutation(c))
        .cloned()
        .collect();

    let figures = format!(
        "| Apiserver down | Apiserver start-up | Provider mutations while down | Runtime exits | New Service served after the return | Lease duration | Provider mutations in that time |\n\
         |---|---|---|---|---|---|---|\n\
         | {:.0} s | {:.1} s | {} | {} | {:.1} s | {} s | {} ({}) |\n",
        (restarted - down).as_secs_f64(),
        (back - restarted).as_secs_f64(),
        during.len(),
        u8::from(runtime.is_finished()),
        recovery.as_secs_f64(),
        LEASE.as_secs(),
        after.len(),
        after
            .iter()
            .map(|c| format!("{:?} {}", c.method, c.subject))
            .collect::<Vec<_>>()
            .join(", "),
    );
    println!("{figures}");
    if std::env::var_os("CCM_WRITE_DOCS").is_some() {
        write_figures(&figures);
    }

    assert!(
        during.is_empty(),
        "provider mutations while the apiserver was down: {during:?}"
    );
    assert_eq!(node_uids(&nodes).await, uids, "no Node deleted or replaced");
    let deletions: Vec<Call> = cloud
        .calls()
        .into_iter()
        .filter(|c| matches!(c.method, Method::EnsureLoadBalancerDeleted | Method::DeleteRoute))
        .collect();
    assert!(deletions.is_empty(), "nothing deleted: {deletions:?}");
    assert_eq!(cloud.route_list().len(), NODES);
    assert!(!runtime.is_finished(), "the runtime never exits");
    stop.send(()).unwrap();
    runtime.await.unwrap().unwrap();
}

/// Replaces the table between the outage markers of docs/reliability.md.
fn write_figures(table: &str) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/reliability.md");
    let text = std::fs::read_to_string(&path).unwrap();
    let (begin, end) = (
        "<!-- apiserver-outage:begin -->\n",
        "<!-- apiserver-outage:end -->",
    );
    let (head, rest) = text.split_once(begin).unwrap();
    let (_, tail) = rest.split_once(end).unwrap();
    std::fs::write(&path, format!("{head}{begin}{table}{end}{tail}")).unwrap();
}
