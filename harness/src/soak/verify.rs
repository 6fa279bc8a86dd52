//! The end of a soak: the Services left standing converged, every Service deleted without a stuck finalizer,
//! `doctor` finding nothing the cluster owns left in AWS, the foreign resources as they were, and the Node of
//! every running instance still there, with that instance's providerID.

use std::{collections::BTreeMap, time::Duration};

use k8s_openapi::api::core::v1::Service;
use kube::api::ListParams;
use tokio::time::Instant;

use crate::soak::{Soak, lifecycle::Kept, replicas::Replicas, world::Foreign};

#[derive(Default)]
pub struct Outcome {
    pub unconverged: Vec<String>,
    pub stuck_finalizers: Vec<String>,
    /// Owned AWS resources `doctor` found left.
    pub leaks: Vec<String>,
    /// Other `doctor` findings (Nodes left uninitialized, failing Services) and its failures.
    pub doctor_other: Vec<String>,
    pub foreign_mutations: Vec<String>,
    /// Nodes of running instances the harness did not delete, found missing.
    pub nodes_lost: Vec<String>,
    /// Nodes of running instances whose providerID names another instance (or none).
    pub provider_ids: Vec<String>,
}

/// Every kept Service converged (a fresh wait of the soak's timeout).
pub async fn converged(soak: &Soak, kept: &[Kept]) -> anyhow::Result<Vec<String>> {
    let mut out = Vec::new();
    for k in kept {
        if !soak.converge(&k.name, &k.spec, Instant::now()).await? {
            let why = soak.mismatch(&k.name, &k.spec).await?.unwrap_or_default();
            out.push(format!("{}: {why}", k.name));
        }
    }
    Ok(out)
}

/// Deletes every Service of the namespace; returns those still there after the timeout.
pub async fn delete_all(soak: &Soak) -> anyhow::Result<Vec<String>> {
    let lp = ListParams::default();
    for svc in soak.services.list(&lp).await? {
        if let Some(name) = svc.metadata.name {
            soak.services.delete(&name, &Default::default()).await?;
            soak.count_lifecycle();
        }
    }
    let started = Instant::now();
    let mut left: Vec<Service> = Vec::new();
    while started.elapsed() < soak.timeout * 2 {
        left = soak.services.list(&lp).await?.items;
        if left.is_empty() {
            return Ok(Vec::new());
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    Ok(left
        .iter()
        .map(|s| {
            format!(
                "{} finalizers {:?}",
                s.metadata.name.as_deref().unwrap_or("?"),
                s.metadata.finalizers
            )
        })
        .collect())
}

/// Runs `doctor --json` (straight to moto, scoped to the soak's Nodes and namespace): (leaks, other findings).
pub fn doctor(soak: &Soak) -> anyhow::Result<(Vec<String>, Vec<String>)> {
    let path = std::env::current_exe()?.with_file_name("doctor");
    let env = ccm_testing::TestEnv::from_env()?;
    let out = std::process::Command::new(&path)
        .arg(format!("--cloud-config={}", soak.world.tool_config.display()))
        .arg(format!("--kubeconfig={}", env.kubeconfig.display()))
        .arg(format!("--node-selector=soak={}", soak.world.id))
        .arg(format!("--namespace={}", soak.world.namespace))
        .arg("--json")
        .env("AWS_ACCESS_KEY_ID", "soak")
        .env("AWS_SECRET_ACCESS_KEY", "soak")
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .output()?;
    let code = out.status.code();
    if code != Some(0) && code != Some(1) {
        let err = String::from_utf8_lossy(&out.stderr);
        return Ok((Vec::new(), vec![format!("doctor failed ({code:?}): {err}")]));
    }
    let report: serde_json::Value = serde_json::from_slice(&out.stdout)?;
    let (mut leaks, mut other) = (Vec::new(), Vec::new());
    for f in report["findings"].as_array().into_iter().flatten() {
        let kind = f["kind"].as_str().unwrap_or("?");
        let line = format!(
            "{kind} {}: {}",
            f["id"].as_str().unwrap_or("?"),
            f["reason"].as_str().unwrap_or("?")
        );
        match kind {
            "node" | "service" => other.push(line),
            _ => leaks.push(line),
        }
    }
    Ok((leaks, other))
}

/// The foreign resources whose snapshot changed (or that are gone).
pub async fn foreign(
    soak: &Soak,
    foreign: &Foreign,
    before: &BTreeMap<String, String>,
) -> anyhow::Result<Vec<String>> {
    let after = foreign.snapshot(&soak.world).await?;
    Ok(before
        .iter()
        .filter(|(id, text)| after.get(*id) != Some(*text))
        .map(|(id, text)| format!("{id}: was {text}, now {:?}", after.get(id)))
        .collect())
}

/// The Nodes of running instances (that the harness did not delete) that no longer exist.
pub async fn nodes(soak: &Soak) -> anyhow::Result<Vec<String>> {
    let listed = soak.nodes.list(&soak.node_selector()).await?.items;
    let names: Vec<&str> = listed.iter().filter_map(|n| n.metadata.name.as_deref()).collect();
    let fleet = soak.fleet();
    Ok(fleet
        .nodes
        .iter()
        .filter(|(name, m)| m.running && !m.deleted && !names.contains(&name.as_str()))
        .map(|(name, m)| format!("{name} ({}, running) was deleted", m.instance))
        .collect())
}

/// The final checks; faults stay on until every Service is deleted, then the replicas stop and doctor runs.
pub async fn finish(
    soak: &Soak,
    replicas: &tokio::sync::Mutex<Replicas>,
    kept: &[Kept],
    foreign: &Foreign,
    before: &BTreeMap<String, String>,
) -> anyhow::Result<Outcome> {
    soak.stats().crashes += replicas.lock().await.restart_exited()?;
    let mut outcome = Outcome {
        unconverged: converged(soak, kept).await?,
        provider_ids: crate::soak::replace::provider_ids(soak).await?,
        ..Default::default()
    };
    outcome.stuck_finalizers = delete_all(soak).await?;
    // Every Service gone: no rule from the group Services were given may be left on the nodes' group.
    let left = soak.rules_from_given_group().await?;
    if !left.is_empty() {
        outcome.leaks.push(format!(
            "rules from the given group left on the nodes' group: {left:?}"
        ));
    }
    outcome.nodes_lost = nodes(soak).await?;
    let stuck = replicas.lock().await.stop_all().await;
    if stuck > 0 {
        soak.stats()
            .stuck
            .push(format!("{stuck} replica(s) did not stop within 30 s of SIGTERM"));
    }
    soak.world.set_chaos(None);
    outcome.foreign_mutations = self::foreign(soak, foreign, before).await?;
    let (leaks, other) = doctor(soak)?;
    outcome.leaks.extend(leaks);
    outcome.doctor_other = other;
    Ok(outcome)
}

/// Deletes the soak's Nodes and namespace (the instances stay in moto, terminated or not).
pub async fn cleanup(soak: &Soak) {
    let _ = soak
        .nodes
        .delete_collection(&Default::default(), &soak.node_selector())
        .await;
    let namespaces: kube::Api<k8s_openapi::api::core::v1::Namespace> =
        kube::Api::all(soak.nodes.clone().into_client());
    let _ = namespaces
        .delete(&soak.world.namespace, &Default::default())
        .await;
}
