//! The sandbox's tour after node initialization: pod CIDR routes, a Classic ELB and an NLB, the `lb-plan` dry
//! run of a change, and the clean-up that `doctor` finds clean, each printed before and after.

use ccm_testing::{TestEnv, load_balancers::LoadBalancers};
use k8s_openapi::api::core::v1::Service;
use kube::{Api, api::DeleteParams};

use crate::sandbox::{
    cluster::Cluster,
    steps::{self, Lb, until},
};

/// Routes, load balancers, lb-plan, clean-up and doctor.
pub async fn run(
    env: &TestEnv,
    cluster: &Cluster,
    services: &Api<Service>,
    routes_before: Vec<String>,
    pause: bool,
) -> anyhow::Result<()> {
    println!(
        "\n== Pod CIDR routes: route table {} ({}=owned) ==",
        cluster.route_table, cluster.key
    );
    show_lines("before", &routes_before);
    let wanted = cluster.workers.len();
    // The routes printed are those of the read that found them all.
    let seen = std::cell::RefCell::new(Vec::new());
    let last = &seen;
    let routed = until(60, move || async move {
        let routes = cluster.routes().await.unwrap_or_default();
        let all = routes.len() == wanted;
        *last.borrow_mut() = routes;
        all
    })
    .await;
    show_lines("after", &seen.borrow());
    anyhow::ensure!(routed, "the routes of {wanted} Nodes did not appear");

    println!("\n== Services of type LoadBalancer: a Classic ELB and an NLB ==");
    let aws = LoadBalancers::connect(env).await;
    let lbs = steps::create_services(cluster, services).await?;
    let result = load_balancers(cluster, services, &aws, &lbs).await;
    if pause {
        println!(
            "\npaused before the clean-up: moto is at {}; press Enter to go on",
            env.aws_endpoint
        );
        let mut line = String::new();
        tokio::task::spawn_blocking(move || std::io::stdin().read_line(&mut line)).await??;
    }
    println!("\n== Clean-up: Services and Nodes deleted, then doctor ==\nbefore:");
    print_lbs(services, &aws, &lbs).await?;
    for lb in &lbs {
        services.delete(&lb.service, &DeleteParams::default()).await?;
    }
    cluster
        .nodes
        .delete_collection(&DeleteParams::default(), &cluster.node_selector())
        .await?;
    let gone = until(90, || async {
        let mut left = cluster.routes().await.map_or(1, |r| r.len());
        for lb in &lbs {
            left += usize::from(lb.seen(&aws).await.is_some());
        }
        left == 0
    })
    .await;
    println!("after:");
    for lb in &lbs {
        let seen = lb.seen(&aws).await.map(|s| s.dns_name);
        println!(
            "  {}: {}",
            lb.name,
            seen.map_or("no load balancer".to_owned(), |d| format!("still {d}"))
        );
    }
    show_lines("routes", &cluster.routes().await?);
    let doctor = steps::doctor(cluster)?;
    steps::show_output("doctor", &doctor);
    result?;
    anyhow::ensure!(gone, "the load balancers or routes were not removed");
    anyhow::ensure!(
        doctor.status.success(),
        "doctor found something after the clean-up"
    );
    Ok(())
}

/// The Services get their load balancers; then the `lb-plan` dry run of a change to the Classic ELB's.
async fn load_balancers(
    cluster: &Cluster,
    services: &Api<Service>,
    aws: &LoadBalancers,
    lbs: &[Lb],
) -> anyhow::Result<()> {
    println!("before:");
    print_lbs(services, aws, lbs).await?;
    let mut ids: Vec<String> = cluster.workers.iter().map(|w| w.id.clone()).collect();
    ids.sort();
    let up = until(90, || async {
        let mut all = true;
        for lb in lbs {
            let hostname = services
                .get(&lb.service)
                .await
                .ok()
                .and_then(|s| ccm_testing::services::ingress_hostname(&s));
            all &= hostname.is_some() && lb.seen(aws).await.is_some_and(|s| s.members == ids);
        }
        all
    })
    .await;
    println!("after:");
    print_lbs(services, aws, lbs).await?;
    anyhow::ensure!(up, "the load balancers did not come up with every instance");

    println!("\n== lb-plan: the Classic ELB's Service with port 8443 added, a dry run ==\nbefore:");
    print_lbs(services, aws, &lbs[..1]).await?;
    let plan = steps::lb_plan(cluster, services, &lbs[0]).await?;
    steps::show_output("lb-plan", &plan);
    println!("after (nothing changed):");
    print_lbs(services, aws, &lbs[..1]).await?;
    anyhow::ensure!(plan.status.success(), "lb-plan failed");
    Ok(())
}

async fn print_lbs(services: &Api<Service>, aws: &LoadBalancers, lbs: &[Lb]) -> anyhow::Result<()> {
    for lb in lbs {
        println!("{}", lb.describe(services, aws).await?);
    }
    Ok(())
}

pub fn show_lines(title: &str, lines: &[String]) {
    println!("{title}:{}", if lines.is_empty() { " (none)" } else { "" });
    lines.iter().for_each(|l| println!("  {l}"));
}
