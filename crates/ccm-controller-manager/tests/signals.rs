//! `Runtime::run` stops gracefully on SIGTERM: controllers stopped, lease released, `Ok` returned. Alone in its
//! test binary, since the signal goes to the whole process.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::too_many_lines)]

use std::{
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use ccm_controller_manager::{Options, Runtime};
use ccm_testing::{TestEnv, provider::FakeProvider, unique_name};
use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use tokio::time::Instant;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_stops_gracefully_and_releases_the_lease() {
    let env = TestEnv::get();
    let lease = unique_name("ccm-sigterm");
    let options = Options::try_parse_from([
        "--cloud-provider=fake".to_owned(),
        format!("--kubeconfig={}", env.kubeconfig.display()),
        "--secure-port=0".to_owned(),
        format!("--leader-elect-resource-name={lease}"),
        "--controllers=probe".to_owned(),
    ])
    .unwrap();
    let running = Arc::new(AtomicBool::new(false));
    let runtime = {
        let running = running.clone();
        Runtime::new(options).with_controller("probe", false, move |ctx| {
            let running = running.clone();
            async move {
                running.store(true, Ordering::SeqCst);
                ctx.shutdown.cancelled().await;
                running.store(false, Ordering::SeqCst);
                Ok(())
            }
        })
    };
    let task = tokio::spawn(runtime.run(Arc::new(FakeProvider::new())));
    let t0 = Instant::now();
    while !running.load(Ordering::SeqCst) {
        assert!(t0.elapsed() < Duration::from_secs(10), "never led");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let status = std::process::Command::new("kill")
        .args(["-TERM", &std::process::id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    tokio::time::timeout(Duration::from_secs(10), task)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(!running.load(Ordering::SeqCst), "the controller was stopped");
    let leases: Api<Lease> = Api::namespaced(env.kube_client().await.unwrap(), "kube-system");
    let holder = leases.get(&lease).await.unwrap().spec.unwrap().holder_identity;
    assert_eq!(holder.as_deref(), Some(""), "released");
}
