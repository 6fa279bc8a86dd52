//! `soak [--lifecycles N] [--seed S] [--fault-rate PER_MILLE] [--smoke] [--write-docs] [--limit-secs S]`: the chaos soak. Two
//! replicas of `aws-cloud-controller-manager` (next to this binary) under leader election talk to moto through a
//! fault proxy each that fails a share of every AWS call at random (throttling, 5xx, connection resets before and
//! after the call, latency, `DependencyViolation` and `ResourceInUse` on deletes), while Service lifecycles
//! (Classic ELB and NLB, changed at random, some targeting labelled Nodes only) run in four slots and a chaos
//! task launches, terminates and deregisters instances, replaces one at its dead predecessor's address, flips
//! Nodes NotReady, SIGKILLs the leader, forces leader changes and cuts the leader off from the apiserver while
//! its `CreateTags` fail. Foreign resources are planted and snapshotted first. At the end: the Services left
//! converged, all deleted without a stuck finalizer, `doctor` clean, the foreign snapshot unchanged, no Node of
//! a running instance deleted, each with its instance's providerID. Prints the figures; the full run (or
//! `--write-docs`) writes them into docs/reliability.md. Exit status 1 on any problem.
//! Everything random comes from the seed (printed); the interleaving of the processes does not.
//! Needs the environment of `scripts/testenv.sh`, and its apiserver to itself (the CCM sees every Node).

mod chaos;
mod lifecycle;
mod members;
mod partition;
mod reach;
mod replace;
mod replicas;
mod report;
mod spec;
mod state;
mod verify;
mod world;

use std::{sync::Arc, time::Duration};

use ccm_testing::{Chaos, TestEnv};
use clap::Parser;
use kube::{Api, api::PostParams};
use state::Soak;
use tokio::{sync::Mutex, time::Instant};

#[derive(Parser)]
#[command(
    name = "soak",
    about = "Randomized Service lifecycles under AWS faults, kills and leader changes"
)]
struct Cli {
    /// Service lifecycles (create, changes, delete) to run.
    #[arg(long, default_value_t = 500)]
    lifecycles: u32,
    /// The seed (default: from the clock; printed).
    #[arg(long)]
    seed: Option<u64>,
    /// AWS calls answered with a fault, per thousand.
    #[arg(long, default_value_t = 120, value_parser = clap::value_parser!(u16).range(0..=1000))]
    fault_rate: u16,
    /// The smoke run: 25 lifecycles, seed 1 (the test command's).
    #[arg(long)]
    smoke: bool,
    /// Write the figures into docs/reliability.md (the default unless --smoke).
    #[arg(long)]
    write_docs: bool,
    /// Stop the lifecycles after this many seconds (a problem: the run failed), then run the final checks.
    #[arg(long)]
    limit_secs: Option<u64>,
}

/// Runs the chaos soak with the process's arguments (`soak --help`); the exit code says whether it found a
/// problem.
pub async fn run() -> anyhow::Result<std::process::ExitCode> {
    let cli = Cli::parse();
    let lifecycles = if cli.smoke { 25 } else { cli.lifecycles };
    #[allow(clippy::disallowed_methods)] // the default seed is the one place where the clock enters a choice
    let clock = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_secs();
    let seed = cli.seed.unwrap_or(if cli.smoke { 1 } else { clock });
    println!(
        "soak: seed {seed}, {lifecycles} lifecycles, faults on {} ‰ of AWS calls",
        cli.fault_rate
    );
    let env = TestEnv::from_env()?;
    let world = world::World::create(&env).await?;
    let client = env.kube_client().await?;
    create_namespace(&client, &world.namespace).await?;
    let first_service = format!("{}/s0-0", world.namespace);
    let foreign = world::Foreign::plant(&world, &first_service).await?;
    let before = foreign.snapshot(&world).await?;
    println!(
        "cluster {}: {} foreign resources planted and snapshotted; logs in {}",
        world.id,
        before.len(),
        world.dir.display()
    );
    let soak = Arc::new(Soak {
        seed,
        services: Api::namespaced(client.clone(), &world.namespace),
        nodes: Api::all(client),
        first_service: "s0-0".to_owned(),
        byo_group: foreign.byo_group.clone(),
        timeout: Duration::from_secs(180),
        fleet: Default::default(),
        live: Default::default(),
        stats: Default::default(),
        world,
    });
    for k in 0..3 {
        soak.add_node(k % 2 == 0, k == 1).await?;
    }
    let replicas = Arc::new(Mutex::new(replicas::Replicas::start(&soak.world, &env).await?));
    anyhow::ensure!(
        replicas.lock().await.await_leader(60).await.is_some(),
        "no replica became leader"
    );
    soak.world.set_chaos(Some(Chaos {
        seed,
        per_mille: cli.fault_rate,
        max_delay: Duration::from_secs(2),
    }));
    let started = Instant::now();
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let chaos = tokio::spawn(chaos::run(soak.clone(), replicas.clone(), stopped));
    let limit = cli.limit_secs.map(Duration::from_secs);
    let kept = lifecycle::run(&soak, lifecycles, limit).await?;
    let _ = stop.send(true);
    chaos.await??;
    println!(
        "lifecycles done after {:.1} min; final checks",
        started.elapsed().as_secs_f64() / 60.0
    );
    let outcome = verify::finish(&soak, &replicas, &kept, &foreign, &before).await?;
    let run = report::Run {
        seed,
        per_mille: cli.fault_rate,
        minutes: started.elapsed().as_secs_f64() / 60.0,
        faults: soak.world.chaos_faults(),
        calls: soak.world.requests_by_action(),
    };
    let problems = report::conclude(&soak, &run, &outcome, cli.write_docs || !cli.smoke)?;
    verify::cleanup(&soak).await;
    println!("soak: seed {seed}: {} problem(s)", problems.len());
    Ok(if problems.is_empty() {
        std::process::ExitCode::SUCCESS
    } else {
        std::process::ExitCode::FAILURE
    })
}

async fn create_namespace(client: &kube::Client, name: &str) -> anyhow::Result<()> {
    let ns: k8s_openapi::api::core::v1::Namespace =
        serde_json::from_value(serde_json::json!({ "metadata": { "name": name } }))?;
    Api::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await?;
    Ok(())
}
