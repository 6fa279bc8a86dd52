//! `aws-cloud-controller-manager`: the controller-manager runtime (flags, leader election, /healthz, /metrics)
//! composed with the AWS provider and the AWS `tagging` controller. A drop-in for the Go binary: same flags, same
//! cloud config. See docs/flags.md, docs/cloud-config.md and docs/getting-started.md.

use std::{process::ExitCode, sync::Arc};

use ccm_aws::tagging::{TaggingConfig, TaggingController, TaggingMetrics};
use ccm_aws::{AwsCloud, CloudConfig, ZoneLabelCheck, zone_labels};
use ccm_aws_sdk::{AdapterOptions, RateLimits};
use ccm_controller_manager::Runtime;
use ccm_examples::cli::aws_ccm::Cli;
use clap::Parser;

const TAGGING: &str = "tagging";
const ZONE_LABELS: &str = "zone-labels";

#[tokio::main]
async fn main() -> ExitCode {
    // As the Go binary: `_` in flag names reads as `-`, and `--version` prints Kubernetes' version line.
    let args = ccm_controller_manager::normalize_flag_names(std::env::args_os());
    match ccm_controller_manager::version_request(&args, env!("CARGO_PKG_VERSION")) {
        Ok(Some(text)) => {
            println!("{text}");
            return ExitCode::SUCCESS;
        }
        Ok(None) => {}
        Err(e) => {
            eprintln!("aws-cloud-controller-manager: {e}");
            return ExitCode::from(2);
        }
    }
    let cli = Cli::parse_from(args);
    if let Err(e) = ccm_controller_manager::init_logging(&cli.manager) {
        eprintln!("aws-cloud-controller-manager: {e}");
        return ExitCode::FAILURE;
    }
    match run(cli).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!(error = format!("{e:#}"), "cloud-controller-manager failed");
            ExitCode::FAILURE
        }
    }
}

async fn run(cli: Cli) -> anyhow::Result<()> {
    let config = CloudConfig::load(&cli.manager.cloud_config)?;
    for warning in &config.warnings {
        tracing::warn!(path = %cli.manager.cloud_config, "cloud config: {warning}");
    }
    let tagging = TaggingConfig::from(cli.tagging);
    let tagging_metrics = TaggingMetrics::default();

    // Flags first (all problems at once), so a bad flag never waits on AWS.
    let probe = Runtime::new(cli.manager.clone()).with_controller(TAGGING, false, |_| async { Ok(()) });
    probe.validate()?;
    if probe.enabled_controllers().iter().any(|c| c == TAGGING) {
        tagging.validate()?;
    }

    let mut options = AdapterOptions::default().with_read_only(cli.manager.dry_run);
    if cli.aws_client_rate_limits_off {
        options = options.with_rate_limits(RateLimits::unlimited());
    }
    let (cloud, adapter) = AwsCloud::connect(&config, options).await?;
    let cloud = cloud.with_load_balancer_recreation(cli.allow_load_balancer_recreation);
    let ec2 = Arc::new(cloud.ec2().clone());
    let (cluster, members) = (cloud.cluster().clone(), cloud.membership().clone());
    let registered = tagging_metrics.clone();
    // Nodes keep the zone label they were initialized with: refuse to start over Nodes labelled in the other form.
    let zone_check = ZoneLabelCheck::new(zone_labels::zone_form(&config.global));
    let runtime = Runtime::new(cli.manager).with_start_check(ZONE_LABELS, move |client| {
        let check = zone_check.clone();
        async move { check.run(client).await.map_err(Into::into) }
    });
    let mut runtime = runtime.with_controller(TAGGING, false, move |ctx| {
        let (ec2, config, metrics) = (ec2.clone(), tagging.clone(), tagging_metrics.clone());
        let (cluster, members) = (cluster.clone(), members.clone());
        async move {
            TaggingController::new(ctx.client, ec2, cluster, config)?
                .with_dry_run(ctx.dry_run)
                .with_members(members)
                .with_metrics(metrics)
                .with_controller_metrics(ctx.metrics)
                .with_informers(ctx.informers)
                .run(ctx.shutdown.cancelled_owned())
                .await;
            Ok(())
        }
    });
    adapter.metrics().register(runtime.registry());
    ccm_aws::CatalogMetrics::new(cloud.instance_catalog().clone()).register(runtime.registry());
    registered.register(runtime.registry());
    runtime.run(Arc::new(cloud)).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use ccm_examples::cli::aws_ccm::Cli;
    use clap::Parser;

    #[test]
    fn the_measurement_flag_parses_and_stays_out_of_the_help() {
        use clap::CommandFactory;
        let help = Cli::command().render_long_help().to_string();
        assert!(!help.contains("aws-client-rate-limits-off"), "{help}");
        let cli = Cli::try_parse_from(["aws-cloud-controller-manager", "--aws-client-rate-limits-off"]);
        assert!(cli.is_ok_and(|c| c.aws_client_rate_limits_off));
        // The flags that imitated the Go controller are gone with it measured for real.
        for gone in [
            "--lb-host-update-full-ensure",
            "--aws-instance-listing-off",
            "--node-lookup-batch-size=1",
        ] {
            let cli = Cli::try_parse_from(["aws-cloud-controller-manager", gone]);
            assert!(cli.is_err(), "{gone}");
        }
    }
}
