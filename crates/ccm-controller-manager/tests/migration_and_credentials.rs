//! Leader migration (controllers listed in the configuration wait for the migration lease; those of another
//! component never start) and `--use-service-account-credentials` (a controller's client is its own service
//! account) against the real kube-apiserver.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::too_many_lines)]

use std::{
    collections::BTreeSet,
    sync::{Arc, Mutex},
    time::Duration,
};

use ccm_controller_manager::{Options, Runtime};
use ccm_testing::{TestEnv, provider::FakeProvider, unique_name};
use k8s_openapi::{
    api::coordination::v1::{Lease, LeaseSpec},
    apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta},
};
use kube::{Api, api::PostParams};
use tokio::time::Instant;

type Seen = Arc<Mutex<BTreeSet<String>>>;

fn probe(runtime: Runtime, name: &'static str, seen: &Seen) -> Runtime {
    let seen = seen.clone();
    runtime.with_controller(name, false, move |ctx| {
        let seen = seen.clone();
        async move {
            seen.lock().unwrap().insert(name.to_owned());
            ctx.shutdown.cancelled().await;
            seen.lock().unwrap().remove(name);
            Ok(())
        }
    })
}

async fn wait_for(what: &str, limit: Duration, mut cond: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !cond() {
        assert!(t0.elapsed() < limit, "{what}: not within {limit:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn migrated_controllers_wait_for_the_migration_lease() {
    let env = TestEnv::get();
    let client = env.kube_client().await.unwrap();
    let leases: Api<Lease> = Api::namespaced(client, "kube-system");
    let main = unique_name("ccm-mig-main");
    let migration = unique_name("ccm-mig");
    // kube-controller-manager holds the migration lease.
    let now = MicroTime(k8s_openapi::jiff::Timestamp::now());
    leases
        .create(
            &PostParams::default(),
            &Lease {
                metadata: ObjectMeta {
                    name: Some(migration.clone()),
                    ..ObjectMeta::default()
                },
                spec: Some(LeaseSpec {
                    holder_identity: Some("kube-controller-manager-0".to_owned()),
                    lease_duration_seconds: Some(3600),
                    renew_time: Some(now.clone()),
                    acquire_time: Some(now),
                    ..LeaseSpec::default()
                }),
            },
        )
        .await
        .unwrap();
    let config = std::env::temp_dir().join(format!("{migration}.yaml"));
    std::fs::write(
        &config,
        format!(
            "kind: LeaderMigrationConfiguration\napiVersion: controllermanager.config.k8s.io/v1\n\
             leaderName: {migration}\ncontrollerLeaders:\n  - name: migrated\n    component: '*'\n  \
             - name: elsewhere\n    component: kube-controller-manager\n"
        ),
    )
    .unwrap();
    let options = Options::try_parse_from([
        "--cloud-provider=fake".to_owned(),
        format!("--kubeconfig={}", env.kubeconfig.display()),
        "--secure-port=0".to_owned(),
        format!("--leader-elect-resource-name={main}"),
        "--leader-elect-lease-duration=3s".to_owned(),
        "--leader-elect-renew-deadline=2s".to_owned(),
        "--leader-elect-retry-period=500ms".to_owned(),
        "--enable-leader-migration".to_owned(),
        format!("--leader-migration-config={}", config.display()),
        "--controllers=plain,migrated,elsewhere".to_owned(),
    ])
    .unwrap();
    let seen = Seen::default();
    let mut runtime = Runtime::new(options);
    for name in ["plain", "migrated", "elsewhere"] {
        runtime = probe(runtime, name, &seen);
    }
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(runtime.run_until(Arc::new(FakeProvider::new()), async {
        let _ = rx.await;
    }));

    wait_for(
        "the non-migrated controller starts",
        Duration::from_secs(10),
        || seen.lock().unwrap().contains("plain"),
    )
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        *seen.lock().unwrap(),
        BTreeSet::from(["plain".to_owned()]),
        "migrated controllers wait for the migration lease"
    );

    // kube-controller-manager steps down (releases the migration lease).
    let mut l = leases.get(&migration).await.unwrap();
    l.spec.as_mut().unwrap().holder_identity = Some(String::new());
    leases
        .replace(&migration, &PostParams::default(), &l)
        .await
        .unwrap();
    wait_for("the migrated controller starts", Duration::from_secs(5), || {
        seen.lock().unwrap().contains("migrated")
    })
    .await;
    assert!(
        !seen.lock().unwrap().contains("elsewhere"),
        "unowned controllers never start"
    );
    let holder = leases
        .get(&migration)
        .await
        .unwrap()
        .spec
        .unwrap()
        .holder_identity
        .unwrap();
    assert!(
        !holder.is_empty() && holder != "kube-controller-manager-0",
        "{holder}"
    );

    tx.send(()).unwrap();
    task.await.unwrap().unwrap();
    assert!(seen.lock().unwrap().is_empty());
    for lease in [&main, &migration] {
        let holder = leases.get(lease).await.unwrap().spec.unwrap().holder_identity;
        assert_eq!(holder.as_deref(), Some(""), "{lease} released on shutdown");
    }
    let _ = std::fs::remove_file(config);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn service_account_credentials_authenticate_as_the_controller() {
    let env = TestEnv::get();
    let options = Options::try_parse_from([
        "--cloud-provider=fake".to_owned(),
        format!("--kubeconfig={}", env.kubeconfig.display()),
        "--secure-port=0".to_owned(),
        "--leader-elect=false".to_owned(),
        "--use-service-account-credentials=true".to_owned(),
        "--controllers=whoami".to_owned(),
    ])
    .unwrap();
    let (answer_tx, answer_rx) = tokio::sync::mpsc::unbounded_channel::<String>();
    let runtime = Runtime::new(options).with_controller("whoami", false, move |ctx| {
        let answer_tx = answer_tx.clone();
        async move {
            // The service account has no RBAC grants: the apiserver's refusal names who asked.
            let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(ctx.client.clone());
            let answer = match nodes.list(&Default::default()).await {
                Ok(_) => "allowed".to_owned(),
                Err(e) => e.to_string(),
            };
            let _ = answer_tx.send(answer);
            ctx.shutdown.cancelled().await;
            Ok(())
        }
    });
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(runtime.run_until(Arc::new(FakeProvider::new()), async {
        let _ = rx.await;
    }));
    let mut answer_rx = answer_rx;
    let answer = tokio::time::timeout(Duration::from_secs(20), answer_rx.recv())
        .await
        .unwrap()
        .unwrap();
    assert!(
        answer.contains("system:serviceaccount:kube-system:whoami-controller"),
        "{answer}"
    );
    tx.send(()).unwrap();
    task.await.unwrap().unwrap();
}
