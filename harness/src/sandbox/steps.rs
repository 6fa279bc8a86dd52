//! The sandbox's steps after node initialization: two load balancers, the `lb-plan` dry run of a change, and
//! the clean-up that `doctor` then finds clean. Each prints what it shows before and after.

use std::{future::Future, time::Duration};

use ccm_testing::{
    load_balancers::{LoadBalancers, Seen, name_for_uid},
    services::{self, LB_TYPE},
};
use k8s_openapi::api::core::v1::Service;
use kube::{Api, api::PostParams};

use crate::sandbox::cluster::Cluster;

/// Polls `check` every 200 ms, up to `secs` seconds; whether it came true.
pub async fn until<F: Future<Output = bool>>(secs: u64, mut check: impl FnMut() -> F) -> bool {
    for _ in 0..secs * 5 {
        if check().await {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    false
}

/// A sandbox Service and the load balancer it gets.
pub struct Lb {
    pub service: String,
    pub name: String,
    pub nlb: bool,
}

impl Lb {
    pub async fn seen(&self, aws: &LoadBalancers) -> Option<Seen> {
        if self.nlb {
            aws.network(&self.name).await
        } else {
            aws.classic(&self.name).await
        }
    }

    fn kind(&self) -> &'static str {
        if self.nlb { "NLB" } else { "Classic ELB" }
    }

    /// `Service <name> (<kind>): hostname ...` and what AWS has under the load balancer's name.
    pub async fn describe(&self, services: &Api<Service>, aws: &LoadBalancers) -> anyhow::Result<String> {
        let hostname = services::ingress_hostname(&services.get(&self.service).await?);
        let seen = match self.seen(aws).await {
            Some(s) => format!(
                "{} {} dns={} ports={:?} instances={:?}",
                self.kind(),
                self.name,
                s.dns_name,
                s.ports,
                s.members
            ),
            None => format!("no load balancer named {}", self.name),
        };
        Ok(format!(
            "  Service default/{} ({}): hostname={}\n    AWS: {seen}",
            self.service,
            self.kind(),
            hostname.as_deref().unwrap_or("-")
        ))
    }
}

/// Creates a Classic ELB Service (port 80) and an NLB Service (port 443) for the cluster.
pub async fn create_services(cluster: &Cluster, services: &Api<Service>) -> anyhow::Result<Vec<Lb>> {
    let mut out = Vec::new();
    for (nlb, port) in [(false, 80), (true, 443)] {
        let name = format!("{}-{}", cluster.id, if nlb { "nlb" } else { "web" });
        let annotations: &[(&str, &str)] = if nlb { &[(LB_TYPE, "nlb")] } else { &[] };
        let svc = services::load_balancer(&name, "default", &[port], annotations);
        let created = services.create(&PostParams::default(), &svc).await?;
        let uid = created.metadata.uid.unwrap_or_default();
        out.push(Lb {
            service: name,
            name: name_for_uid(&uid),
            nlb,
        });
    }
    Ok(out)
}

/// Writes the Classic ELB's Service with port 8443 added (its node port given, as the apiserver would assign one), and the cluster's NodeList, and runs `lb-plan` on them.
pub async fn lb_plan(
    cluster: &Cluster,
    services: &Api<Service>,
    lb: &Lb,
) -> anyhow::Result<std::process::Output> {
    let mut svc = services.get(&lb.service).await?;
    if let Some(ports) = svc.spec.as_mut().and_then(|s| s.ports.as_mut()) {
        ports.push(serde_json::from_value(
            serde_json::json!({ "name": "p8443", "port": 8443, "protocol": "TCP", "targetPort": 8443, "nodePort": 32443 }),
        )?);
    }
    let service_file = cluster.dir.join("web-8443.json");
    std::fs::write(&service_file, serde_json::to_vec_pretty(&svc)?)?;
    let nodes = cluster.nodes.list(&cluster.node_selector()).await?.items;
    let node_file = cluster.dir.join("nodes.json");
    let list = serde_json::json!({ "apiVersion": "v1", "kind": "NodeList", "items": nodes });
    std::fs::write(&node_file, serde_json::to_vec(&list)?)?;
    cluster.tool(
        "lb-plan",
        &[
            format!("--service={}", service_file.display()),
            format!("--nodes={}", node_file.display()),
        ],
    )
}

/// Runs `doctor` scoped to the cluster's Nodes (and to a namespace of its own, as no Service is left).
pub fn doctor(cluster: &Cluster) -> anyhow::Result<std::process::Output> {
    let env = ccm_testing::TestEnv::from_env()?;
    cluster.tool(
        "doctor",
        &[
            format!("--kubeconfig={}", env.kubeconfig.display()),
            format!("--node-selector=sandbox={}", cluster.id),
            format!("--namespace={}", cluster.id),
        ],
    )
}

/// Prints a tool's output indented, with its exit status.
pub fn show_output(tool: &str, out: &std::process::Output) {
    let text = String::from_utf8_lossy(&out.stdout) + String::from_utf8_lossy(&out.stderr);
    for line in text.lines() {
        println!("    {line}");
    }
    println!("  {tool} exited with {}", out.status);
}
