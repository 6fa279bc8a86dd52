//! Leader election against the real kube-apiserver: runtimes started together with distinct identities, only
//! one leads and runs controllers; a killed leader (its task aborted, the lease NOT released) is replaced within
//! 20 s with the default 15 s / 10 s / 2 s timings; a graceful shutdown releases the lease and the successor
//! takes over at once; a stolen lease stops the controllers and makes `run` fail.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::too_many_lines)]

use std::{
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use ccm_controller_manager::{Error, Options, Runtime};
use ccm_testing::{TestEnv, provider::FakeProvider, unique_name};
use k8s_openapi::api::coordination::v1::Lease;
use kube::{Api, api::PostParams};
use tokio::{sync::oneshot, task::JoinHandle, time::Instant};

const NAMESPACE: &str = "kube-system";

/// One runtime under test: its task, its graceful-shutdown trigger, and how many probe controllers it runs now.
struct Candidate {
    task: JoinHandle<Result<(), Error>>,
    shutdown: Option<oneshot::Sender<()>>,
    running: Arc<AtomicUsize>,
    starts: Arc<AtomicUsize>,
}

impl Candidate {
    fn is_running(&self) -> bool {
        self.running.load(Ordering::SeqCst) > 0
    }
}

/// Decrements the running count when the probe's future ends or is dropped (aborted).
struct Running(Arc<AtomicUsize>);

impl Drop for Running {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

fn options(lease: &str, timings: &[&str]) -> Options {
    let env = TestEnv::get();
    let mut args = vec![
        "--cloud-provider=fake".to_owned(),
        format!("--kubeconfig={}", env.kubeconfig.display()),
        "--controllers=probe".to_owned(),
        "--secure-port=0".to_owned(),
        format!("--leader-elect-resource-name={lease}"),
        format!("--leader-elect-resource-namespace={NAMESPACE}"),
    ];
    args.extend(timings.iter().map(|s| (*s).to_owned()));
    Options::try_parse_from(args).unwrap()
}

/// A runtime whose only controller is a probe that counts itself as running while it runs.
fn start(options: Options) -> Candidate {
    let running = Arc::new(AtomicUsize::new(0));
    let starts = Arc::new(AtomicUsize::new(0));
    let (tx, rx) = oneshot::channel();
    let runtime = {
        let (running, starts) = (running.clone(), starts.clone());
        Runtime::new(options).with_controller("probe", false, move |ctx| {
            let (running, starts) = (running.clone(), starts.clone());
            async move {
                starts.fetch_add(1, Ordering::SeqCst);
                running.fetch_add(1, Ordering::SeqCst);
                let _guard = Running(running);
                ctx.shutdown.cancelled().await;
                Ok(())
            }
        })
    };
    let task = tokio::spawn(runtime.run_until(Arc::new(FakeProvider::new()), async {
        let _ = rx.await;
    }));
    Candidate {
        task,
        shutdown: Some(tx),
        running,
        starts,
    }
}

async fn wait_for(what: &str, limit: Duration, mut cond: impl FnMut() -> bool) -> Duration {
    let t0 = Instant::now();
    while !cond() {
        assert!(t0.elapsed() < limit, "{what}: not within {limit:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    t0.elapsed()
}

async fn holder(lease: &str) -> Option<String> {
    let api: Api<Lease> = Api::namespaced(TestEnv::get().kube_client().await.unwrap(), NAMESPACE);
    api.get(lease).await.unwrap().spec.and_then(|s| s.holder_identity)
}

/// Starts two candidates, checks that exactly one leads (and stays the only one running controllers), and
/// returns them as (leader, follower).
async fn two_candidates(lease: &str, timings: &[&str]) -> (Candidate, Candidate) {
    let a = start(options(lease, timings));
    let b = start(options(lease, timings));
    wait_for("a leader runs the probe", Duration::from_secs(20), || {
        a.is_running() || b.is_running()
    })
    .await;
    // Watch for a while: never both.
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(3) {
        assert!(!(a.is_running() && b.is_running()), "two leaders");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (leader, follower) = if a.is_running() { (a, b) } else { (b, a) };
    assert_eq!(
        follower.starts.load(Ordering::SeqCst),
        0,
        "the follower never started a controller"
    );
    let h = holder(lease).await.unwrap();
    assert!(!h.is_empty(), "the lease names its holder");
    (leader, follower)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn killed_leader_is_replaced_within_20s_with_default_timings() {
    let lease = unique_name("ccm-le-default");
    let (mut leader, follower) = two_candidates(&lease, &[]).await;
    let before = holder(&lease).await;

    // Kill the leader: its task is aborted, nothing releases the lease.
    leader.task.abort();
    let killed = Instant::now();
    assert!((&mut leader.task).await.unwrap_err().is_cancelled());
    // Aborting the runtime aborts its controller tasks (asynchronously: each dies at its next poll).
    wait_for(
        "the killed leader's controllers are gone with it",
        Duration::from_secs(1),
        || !leader.is_running(),
    )
    .await;
    assert_eq!(holder(&lease).await, before, "the lease was not released");

    let took = wait_for("the follower takes over", Duration::from_secs(20), || {
        follower.is_running()
    })
    .await;
    let since_kill = killed.elapsed();
    println!("failover after a killed leader (15s/10s/2s): {since_kill:?} (observed after {took:?})");
    assert!(since_kill < Duration::from_secs(20), "{since_kill:?}");
    assert_ne!(holder(&lease).await, before);

    let mut follower = follower;
    follower.shutdown.take().unwrap().send(()).unwrap();
    follower.task.await.unwrap().unwrap();
    assert_eq!(
        holder(&lease).await.as_deref(),
        Some(""),
        "released on graceful shutdown"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn graceful_shutdown_hands_over_at_once_with_default_timings() {
    let lease = unique_name("ccm-le-graceful");
    let (mut leader, follower) = two_candidates(&lease, &[]).await;

    leader.shutdown.take().unwrap().send(()).unwrap();
    let t0 = Instant::now();
    (&mut leader.task).await.unwrap().unwrap();
    assert!(!leader.is_running(), "controllers stopped before returning");
    let took = wait_for("the follower takes over", Duration::from_secs(10), || {
        follower.is_running()
    })
    .await;
    let handover = t0.elapsed();
    println!("handover after a graceful shutdown (15s/10s/2s): {handover:?} (observed after {took:?})");
    // Without the release the follower would wait out the 15 s lease; with it, one retry period (2 s, jittered
    // up to 2.4 s) at most.
    assert!(handover < Duration::from_secs(5), "{handover:?}");
    follower.task.abort();
}

const SHORT: &[&str] = &[
    "--leader-elect-lease-duration=3s",
    "--leader-elect-renew-deadline=2s",
    "--leader-elect-retry-period=500ms",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn short_timings_fail_over_repeatedly() {
    let lease = unique_name("ccm-le-short");
    let (leader, follower) = two_candidates(&lease, SHORT).await;
    leader.task.abort();
    let killed = Instant::now();
    wait_for("the follower takes over", Duration::from_secs(6), || {
        follower.is_running()
    })
    .await;
    println!(
        "failover after a killed leader (3s/2s/500ms): {:?}",
        killed.elapsed()
    );
    // A third candidate stays a follower while the second leads.
    let third = start(options(&lease, SHORT));
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert!(!third.is_running() && follower.is_running());
    assert_eq!(third.starts.load(Ordering::SeqCst), 0);
    follower.task.abort();
    wait_for("the third takes over", Duration::from_secs(6), || {
        third.is_running()
    })
    .await;
    third.task.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn stolen_lease_stops_controllers_and_fails_run() {
    let lease = unique_name("ccm-le-stolen");
    let leader = start(options(&lease, SHORT));
    wait_for("leads", Duration::from_secs(10), || leader.is_running()).await;

    // Another party takes the lease (as a candidate would after an apiserver partition).
    let api: Api<Lease> = Api::namespaced(TestEnv::get().kube_client().await.unwrap(), NAMESPACE);
    let mut l = api.get(&lease).await.unwrap();
    let spec = l.spec.as_mut().unwrap();
    spec.holder_identity = Some("thief".to_owned());
    spec.lease_duration_seconds = Some(3600);
    api.replace(&lease, &PostParams::default(), &l).await.unwrap();

    let result = tokio::time::timeout(Duration::from_secs(10), leader.task)
        .await
        .unwrap()
        .unwrap();
    match result {
        Err(Error::LeaderElectionLost { lease: l, reason }) => {
            assert!(l.ends_with(&lease), "{l}");
            assert!(reason.contains("thief"), "{reason}");
        }
        other => panic!("expected LeaderElectionLost, got {other:?}"),
    }
    assert_eq!(leader.running.load(Ordering::SeqCst), 0, "controllers stopped");
    assert_eq!(
        holder(&lease).await.as_deref(),
        Some("thief"),
        "a lost lease is not touched"
    );
}

/// Probes of several runtimes counting on one gauge, and the most that ever ran at once.
#[derive(Clone, Default)]
struct Gauge {
    running: Arc<AtomicUsize>,
    most: Arc<AtomicUsize>,
}

fn start_counted(options: Options, gauge: &Gauge) -> Candidate {
    let own = Arc::new(AtomicUsize::new(0));
    let (tx, rx) = oneshot::channel();
    let runtime = {
        let (gauge, own) = (gauge.clone(), own.clone());
        Runtime::new(options).with_controller("probe", false, move |ctx| {
            let (gauge, own) = (gauge.clone(), own.clone());
            async move {
                own.fetch_add(1, Ordering::SeqCst);
                let _own = Running(own);
                let now = gauge.running.fetch_add(1, Ordering::SeqCst) + 1;
                gauge.most.fetch_max(now, Ordering::SeqCst);
                let _all = Running(gauge.running.clone());
                ctx.shutdown.cancelled().await;
                Ok(())
            }
        })
    };
    let task = tokio::spawn(runtime.run_until(Arc::new(FakeProvider::new()), async {
        let _ = rx.await;
    }));
    Candidate {
        task,
        shutdown: Some(tx),
        running: own,
        starts: Arc::default(),
    }
}

/// A leader whose renewal reply is slow (2 s, sent at `s`, written at once) and whose apiserver is then cut off
/// must stop by `s` + renew deadline, before the follower (which saw the write at about `s`) takes the lease at
/// `s` + lease duration. Timed from the reply instead, it would lead until `reply + renew deadline`, past the
/// follower's takeover: two leaders.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_slow_renewal_reply_does_not_extend_leadership() {
    const TIMINGS: &[&str] = &[
        "--leader-elect-lease-duration=4s",
        "--leader-elect-renew-deadline=3s",
        "--leader-elect-retry-period=500ms",
    ];
    let env = TestEnv::get();
    let lease = unique_name("ccm-le-slow");
    let upstream = env.kube_apiserver.trim_start_matches("https://");
    let proxy = ccm_testing::TcpDelayProxy::start(upstream).await.unwrap();
    let kubeconfig = std::env::temp_dir().join(format!("{lease}.kubeconfig"));
    let text = std::fs::read_to_string(&env.kubeconfig).unwrap();
    std::fs::write(
        &kubeconfig,
        text.replace(&env.kube_apiserver, &format!("https://{}", proxy.addr())),
    )
    .unwrap();
    let mut slow_options = options(&lease, TIMINGS);
    slow_options.kubeconfig = kubeconfig.display().to_string();

    let gauge = Gauge::default();
    let leader = start_counted(slow_options, &gauge);
    wait_for("the proxied candidate leads", Duration::from_secs(20), || {
        leader.is_running()
    })
    .await;
    let follower = start_counted(options(&lease, TIMINGS), &gauge);
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(!follower.is_running());

    // The next renewal (within one 500 ms retry period) is written at once but answered 2 s later; then the
    // apiserver is out of reach.
    proxy.set_reply_delay(Duration::from_secs(2));
    tokio::time::sleep(Duration::from_secs(1)).await;
    proxy.set_partitioned(true);
    let took = wait_for("the follower takes over", Duration::from_secs(15), || {
        follower.is_running()
    })
    .await;
    println!("follower leads {took:?} after the cut");
    // The cut-off leader stopped its controllers and stays a candidate (the follower now holds the Lease).
    assert!(!leader.is_running());
    assert_eq!(gauge.most.load(Ordering::SeqCst), 1, "two leaders at once");
    leader.task.abort();
    follower.task.abort();
    let _ = std::fs::remove_file(kubeconfig);
}

/// A leader cut off from the apiserver past its renew deadline stops its controllers but does not exit: once
/// the apiserver answers again, the same identity (still named by the Lease) leads again at once, without
/// waiting out the lease duration a restarted process with a new identity would.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_lapsed_leader_leads_again_with_its_identity() {
    let env = TestEnv::get();
    let lease = unique_name("ccm-le-lapse");
    let upstream = env.kube_apiserver.trim_start_matches("https://");
    let proxy = ccm_testing::TcpDelayProxy::start(upstream).await.unwrap();
    let kubeconfig = std::env::temp_dir().join(format!("{lease}.kubeconfig"));
    let text = std::fs::read_to_string(&env.kubeconfig).unwrap();
    std::fs::write(
        &kubeconfig,
        text.replace(&env.kube_apiserver, &format!("https://{}", proxy.addr())),
    )
    .unwrap();
    let mut o = options(&lease, SHORT);
    o.kubeconfig = kubeconfig.display().to_string();
    let leader = start(o);
    wait_for("leads", Duration::from_secs(20), || leader.is_running()).await;
    let identity = holder(&lease).await;

    proxy.set_partitioned(true);
    wait_for(
        "the controllers stop after the renew deadline",
        Duration::from_secs(10),
        || !leader.is_running(),
    )
    .await;
    proxy.set_partitioned(false);
    wait_for("leads again", Duration::from_secs(10), || leader.is_running()).await;
    assert!(!leader.task.is_finished(), "the runtime did not exit");
    assert_eq!(holder(&lease).await, identity, "the same identity");
    assert_eq!(leader.starts.load(Ordering::SeqCst), 2);
    leader.task.abort();
    let _ = std::fs::remove_file(kubeconfig);
}
