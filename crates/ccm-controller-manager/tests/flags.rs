//! Flag tests: defaults, every validation error, `--controllers` semantics, the compatibility flags, and the exact
//! argument lists of the Go cloud controller manager's Helm chart and kustomize DaemonSet.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::too_many_lines)]

use std::time::Duration;

use ccm_controller_manager::{Options, Runtime};
use clap::Parser;

fn parse(args: &[&str]) -> Options {
    Options::try_parse_from(args).unwrap_or_else(|e| panic!("{args:?}: {e}"))
}

fn problems(args: &[&str]) -> Vec<String> {
    parse(args)
        .validate()
        .err()
        .map(|e| e.problems)
        .unwrap_or_default()
}

/// A binary's parser: the runtime flags flattened next to provider flags (the AWS tagging controller's).
#[derive(Parser, Debug)]
#[command(name = "aws-cloud-controller-manager", version)]
struct Cli {
    #[command(flatten)]
    manager: Options,
    /// Tags for the tagging controller.
    #[arg(long, value_delimiter = ',')]
    tags: Vec<String>,
    /// Resources to tag.
    #[arg(long)]
    resources: Vec<String>,
    /// Concurrent syncs of the tagging controller.
    #[arg(long, default_value_t = 1)]
    tagging_controller_concurrent_node_syncs: i32,
}

#[test]
fn defaults_are_upstreams() {
    let o = parse(&["--cloud-provider=aws"]);
    assert_eq!(o.cloud_provider, "aws");
    assert_eq!(o.cloud_config, "");
    assert_eq!(o.kubeconfig, "");
    assert_eq!(o.master, "");
    assert_eq!(o.controllers, ["*"]);
    assert_eq!(o.cluster_name, "kubernetes");
    assert!(o.configure_cloud_routes);
    assert!(!o.allocate_node_cidrs);
    assert_eq!(o.cluster_cidr, "");
    assert_eq!(o.controller_start_interval, Duration::ZERO);
    assert!(!o.use_service_account_credentials);
    assert_eq!(o.concurrent_service_syncs, 1);
    assert_eq!(
        o.concurrent_node_syncs, 10,
        "documented deviation: writes only, lookups are batched"
    );
    assert_eq!(o.concurrent_node_status_updates, 0);
    assert_eq!(o.node_status_update_frequency, Duration::from_secs(300));
    assert_eq!(o.node_monitor_period, Duration::from_secs(5));
    assert_eq!(o.route_reconciliation_period, Duration::from_secs(10));
    assert!(o.leader_elect);
    assert_eq!(o.leader_elect_lease_duration, Duration::from_secs(15));
    assert_eq!(o.leader_elect_renew_deadline, Duration::from_secs(10));
    assert_eq!(o.leader_elect_retry_period, Duration::from_secs(2));
    assert_eq!(o.leader_elect_resource_lock, "leases");
    assert_eq!(o.leader_elect_resource_name, "cloud-controller-manager");
    assert_eq!(o.leader_elect_resource_namespace, "kube-system");
    assert!(!o.enable_leader_migration);
    assert_eq!(o.leader_migration_config, "");
    assert_eq!(o.secure_port, 10258);
    assert_eq!(o.bind_address, "0.0.0.0");
    assert_eq!(o.cert_dir, "");
    assert_eq!(o.tls_cert_file, "");
    assert_eq!(o.v, 0);
    assert_eq!(
        o.authorization_always_allow_paths,
        ["/healthz", "/readyz", "/livez"]
    );
    assert_eq!(o.logging_format, "text");
    assert_eq!(o.kube_api_qps, 100.0);
    assert_eq!(o.kube_api_burst, 3000);
    assert!(o.ignored_flags().is_empty());
    o.validate().unwrap();
}

#[test]
fn go_flag_syntax() {
    let o = parse(&[
        "--cloud-provider",
        "aws",
        "-v",
        "4",
        "--leader-elect=false",
        "--configure-cloud-routes",
        "--allocate-node-cidrs=T",
        "--node-monitor-period=1m30s",
        "--controllers=*,-route",
        "--controllers",
        "cloud-node",
        "--kube-api-qps=50.5",
    ]);
    assert_eq!(o.v, 4);
    assert!(!o.leader_elect);
    assert!(o.configure_cloud_routes);
    assert!(o.allocate_node_cidrs);
    assert_eq!(o.node_monitor_period, Duration::from_secs(90));
    assert_eq!(o.controllers, ["*", "-route", "cloud-node"]);
    assert_eq!(o.kube_api_qps, 50.5);
    assert_eq!(parse(&["-v=3"]).v, 3);
    // As Go: the last value of a repeated flag wins; list flags append.
    let o = parse(&[
        "--v=2",
        "--v=5",
        "--leader-elect=false",
        "--leader-elect=true",
        "--cloud-provider=x",
        "--cloud-provider=aws",
    ]);
    assert_eq!((o.v, o.leader_elect, o.cloud_provider.as_str()), (5, true, "aws"));
    assert_eq!(parse(&["--v=2"]).v, 2);
    // Go's boolean flags take their value only after '='.
    assert!(Options::try_parse_from(["--leader-elect", "false"]).is_err());
    let bad = Options::try_parse_from(["--node-monitor-period=5"])
        .unwrap_err()
        .to_string();
    assert!(
        bad.contains("--node-monitor-period") && bad.contains("not a duration"),
        "{bad}"
    );
    let bad = Options::try_parse_from(["--leader-elect=yes"])
        .unwrap_err()
        .to_string();
    assert!(bad.contains("accepted: true, false"), "{bad}");
}

#[test]
fn absurd_values_are_rejected_when_parsed() {
    // A tiny rate would make the client limiter's wait overflow (a panic at the first request); a huge duration
    // overflows `Instant + Duration` wherever it is added to a clock.
    for (arg, want) in [
        ("--kube-api-qps=1e-40", "out of range"),
        ("--kube-api-qps=0.01", "at least 0.1 requests per second"),
        ("--kube-api-qps=NaN", "out of range"),
        ("--kube-api-qps=inf", "out of range"),
        ("--kube-api-qps=fast", "not a number"),
        ("--node-monitor-period=1000000h", "too long: at most 8760h"),
        (
            "--leader-elect-retry-period=1e300h",
            "--leader-elect-retry-period",
        ),
    ] {
        let bad = Options::try_parse_from([arg]).unwrap_err().to_string();
        let flag = arg.split('=').next().unwrap();
        assert!(bad.contains(flag) && bad.contains(want), "{arg}: {bad}");
    }
    for ok in [
        "--kube-api-qps=0",
        "--kube-api-qps=-1",
        "--kube-api-qps=0.1",
        "--kube-api-qps=5000",
    ] {
        Options::try_parse_from([ok]).unwrap();
    }
}

#[test]
fn every_validation_error_names_the_flag() {
    let cases: &[(&[&str], &str)] = &[
        (&[], "--cloud-provider cannot be empty"),
        (
            &["--cloud-provider=aws", "--controllers=*,bogus"],
            "--controllers: \"bogus\" is not in the list of known controllers",
        ),
        (
            &["--cloud-provider=aws", "--cluster-name="],
            "--cluster-name cannot be empty",
        ),
        (
            &["--cloud-provider=aws", "--cluster-cidr=10.0.0.0/33"],
            "--cluster-cidr",
        ),
        (
            &["--cloud-provider=aws", "--cluster-cidr=10.0.0.0/16,10.1.0.0/16"],
            "dual stack",
        ),
        (
            &["--cloud-provider=aws", "--concurrent-service-syncs=0"],
            "--concurrent-service-syncs must be at least 1",
        ),
        (
            &["--cloud-provider=aws", "--concurrent-node-syncs=0"],
            "--concurrent-node-syncs must be at least 1",
        ),
        (
            &["--cloud-provider=aws", "--concurrent-node-status-updates=-1"],
            "--concurrent-node-status-updates must be 0",
        ),
        (
            &["--cloud-provider=aws", "--node-status-update-frequency=0"],
            "--node-status-update-frequency must be a positive",
        ),
        (
            &["--cloud-provider=aws", "--node-monitor-period=0"],
            "--node-monitor-period must be a positive",
        ),
        (
            &["--cloud-provider=aws", "--route-reconciliation-period=0"],
            "--route-reconciliation-period must be a positive",
        ),
        (
            &["--cloud-provider=aws", "--kube-api-burst=0"],
            "--kube-api-burst must be at least 1",
        ),
        (
            &["--cloud-provider=aws", "--leader-elect-resource-lock=endpoints"],
            "--leader-elect-resource-lock: \"endpoints\" is not supported (accepted: leases)",
        ),
        (
            &["--cloud-provider=aws", "--leader-elect-resource-name="],
            "--leader-elect-resource-name cannot be empty",
        ),
        (
            &["--cloud-provider=aws", "--leader-elect-resource-namespace="],
            "--leader-elect-resource-namespace cannot be empty",
        ),
        (
            &["--cloud-provider=aws", "--leader-elect-retry-period=0"],
            "must be positive durations",
        ),
        (
            &["--cloud-provider=aws", "--leader-elect-lease-duration=10s"],
            "--leader-elect-lease-duration (10s) must be greater than --leader-elect-renew-deadline (10s)",
        ),
        (
            // Less than the 1 s controllers get to stop after leadership is lost: two leaders for a moment.
            &["--cloud-provider=aws", "--leader-elect-lease-duration=10500ms"],
            "--leader-elect-lease-duration (10500ms) must exceed --leader-elect-renew-deadline (10s) by at least 1s",
        ),
        (
            &["--cloud-provider=aws", "--leader-elect-retry-period=9s"],
            "must be greater than 1.2 x --leader-elect-retry-period (9s)",
        ),
        (
            &["--cloud-provider=aws", "--leader-migration-config=/m.yaml"],
            "--leader-migration-config is set without --enable-leader-migration=true",
        ),
        (
            &["--cloud-provider=aws", "--secure-port=70000"],
            "--secure-port must be between 0 (disabled) and 65535",
        ),
        (
            &["--cloud-provider=aws", "--bind-address=localhost"],
            "--bind-address: \"localhost\" is not an IP address",
        ),
        (
            &["--cloud-provider=aws", "--tls-cert-file=/c.pem"],
            "--tls-cert-file and --tls-private-key-file must be given together",
        ),
        (
            &["--cloud-provider=aws", "--tls-min-version=VersionTLS14"],
            "--tls-min-version: \"VersionTLS14\" is not supported (accepted: VersionTLS10",
        ),
        (
            &["--cloud-provider=aws", "--logging-format=xml"],
            "--logging-format: \"xml\" is not supported (accepted: text, json)",
        ),
    ];
    for (args, want) in cases {
        let p = problems(args);
        assert!(
            p.iter().any(|m| m.contains(want)),
            "{args:?}: want {want:?} in {p:#?}"
        );
    }
    // Leader-election timing is not checked when leader election is off.
    assert!(
        problems(&[
            "--cloud-provider=aws",
            "--leader-elect=false",
            "--leader-elect-lease-duration=1s"
        ])
        .is_empty()
    );
    // All problems are collected at once.
    let all = problems(&["--controllers=x", "--secure-port=-1", "--logging-format=xml"]);
    assert_eq!(all.len(), 4, "{all:#?}");
    let text = Options::try_parse_from(["--secure-port=-1"])
        .unwrap()
        .validate()
        .unwrap_err()
        .to_string();
    assert!(text.starts_with("invalid flags:\n  --cloud-provider"), "{text}");
}

fn enabled(args: &[&str]) -> Vec<String> {
    let runtime = Runtime::new(parse(args)).with_controller("tagging", false, |ctx| async move {
        ctx.shutdown.cancelled().await;
        Ok(())
    });
    runtime.validate().unwrap();
    runtime.enabled_controllers()
}

#[test]
fn controllers_selection() {
    let all = [
        "cloud-node-controller",
        "cloud-node-lifecycle-controller",
        "service-lb-controller",
        "node-route-controller",
    ];
    assert_eq!(
        enabled(&["--cloud-provider=aws"]),
        all,
        "tagging is off by default"
    );
    assert_eq!(
        enabled(&["--cloud-provider=aws", "--controllers=*,tagging"]),
        [&all[..], &["tagging"]].concat()
    );
    assert_eq!(
        enabled(&[
            "--cloud-provider=aws",
            "--controllers=*,-route,-service-lb-controller"
        ]),
        &all[..2]
    );
    assert_eq!(
        enabled(&["--cloud-provider=aws", "--controllers=cloud-node,tagging"]),
        ["cloud-node-controller", "tagging"]
    );
    assert_eq!(
        enabled(&["--cloud-provider=aws", "--controllers=-service,service,*"]),
        [all[0], all[1], all[3]]
    );
    // Unknown names are errors; the provider's names are known only to a runtime that has them.
    let o = parse(&["--cloud-provider=aws", "--controllers=*,tagging,-nope"]);
    let p = o.validate().unwrap_err().problems;
    assert_eq!(p.len(), 2, "{p:#?}");
    let with_tagging = Runtime::new(o).with_controller("tagging", false, |_| async { Ok(()) });
    let p = with_tagging.validate().unwrap_err().problems;
    assert_eq!(p.len(), 1, "{p:#?}");
    assert!(p[0].contains("\"-nope\"") && p[0].contains("tagging"), "{p:#?}");
}

#[test]
fn compatibility_flags_are_accepted_and_reported() {
    let o = parse(&[
        "--cloud-provider=aws",
        "--profiling=false",
        "--contention-profiling",
        "--authentication-kubeconfig=/etc/kubernetes/ccm.conf",
        "--authorization-kubeconfig",
        "/etc/kubernetes/ccm.conf",
        "--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics",
        "--requestheader-client-ca-file=/ca.crt",
        "--client-ca-file=/ca.crt",
        "--tls-cipher-suites=TLS_AES_128_GCM_SHA256",
        "--feature-gates=CloudControllerManagerWebhook=false",
        "--webhook-secure-port=0",
        "--min-resync-period=12h",
        "--node-sync-period=0",
        "--kube-api-content-type=application/json",
        "--vmodule=controller=4",
        "--allow-untagged-cloud=true",
        "--cidr-allocator-type=RangeAllocator",
        "--external-cloud-volume-plugin=aws",
        "--log-flush-frequency=5s",
        // Newer component-base releases have it: a manifest that sets it must start.
        "--webhook-tls-curve-preferences=X25519,CurveP256",
    ]);
    o.validate().unwrap();
    let ignored = o.ignored_flags();
    assert_eq!(ignored.len(), 18, "{ignored:#?}");
    assert!(ignored.contains(&"--webhook-tls-curve-preferences=X25519,CurveP256".to_owned()));
    assert_eq!(
        o.authorization_always_allow_paths,
        ["/healthz", "/readyz", "/livez", "/metrics"],
        "implemented"
    );
    assert!(ignored.contains(&"--profiling=false".to_owned()));
    assert!(ignored.contains(&"--contention-profiling=true".to_owned()));
    assert!(ignored.contains(&"--authorization-kubeconfig=/etc/kubernetes/ccm.conf".to_owned()));
    assert!(ccm_controller_manager::CompatOptions::names().contains(&"feature-gates"));
}

#[test]
fn helm_chart_arguments() {
    // charts/aws-cloud-controller-manager values.yaml `args`.
    let o = parse(&["--v=2", "--cloud-provider=aws"]);
    o.validate().unwrap();
    assert_eq!(o.v, 2);
    assert!(
        o.configure_cloud_routes && o.cluster_cidr.is_empty(),
        "the route controller is skipped with a warning, not fatal"
    );
}

#[test]
fn kustomize_daemonset_arguments() {
    // examples/existing-cluster/base DaemonSet args.
    let o = parse(&[
        "--v=2",
        "--cloud-provider=aws",
        "--use-service-account-credentials=true",
        "--configure-cloud-routes=false",
    ]);
    o.validate().unwrap();
    assert!(o.use_service_account_credentials);
    assert!(!o.configure_cloud_routes);
    // The superset-role overlay.
    let o = parse(&[
        "--v=2",
        "--cloud-provider=aws",
        "--use-service-account-credentials=false",
        "--configure-cloud-routes=false",
    ]);
    o.validate().unwrap();
    assert!(!o.use_service_account_credentials);
}

#[test]
fn flattens_next_to_provider_flags() {
    let cli = Cli::try_parse_from([
        "aws-cloud-controller-manager",
        "--v=2",
        "--cloud-provider=aws",
        "--controllers=*,tagging",
        "--tags=Team=infra,Env=prod",
        "--resources=instance",
        "--tagging-controller-concurrent-node-syncs=3",
    ])
    .unwrap();
    assert_eq!(cli.manager.controllers, ["*", "tagging"]);
    // The override setting reaches the binary's command through the flatten.
    let again = Cli::try_parse_from([
        "ccm",
        "--cloud-provider=a",
        "--cloud-provider=aws",
        "--v=1",
        "--v=2",
    ])
    .unwrap();
    assert_eq!(
        (again.manager.cloud_provider.as_str(), again.manager.v),
        ("aws", 2)
    );
    assert_eq!(cli.tags, ["Team=infra", "Env=prod"]);
    assert_eq!(cli.resources, ["instance"]);
    assert_eq!(cli.tagging_controller_concurrent_node_syncs, 3);
    <Cli as clap::CommandFactory>::command().debug_assert();
}

#[test]
fn verbosity_maps_to_levels() {
    use ccm_controller_manager::filter_for_verbosity as f;
    assert_eq!(f(0), "info");
    assert_eq!(f(2), "info");
    assert!(f(3).starts_with("info,ccm_controller_manager=debug"));
    assert!(f(5).contains("ccm_controllers=trace"));
    assert_eq!(f(6), "debug");
    assert_eq!(f(9), "trace");
}

/// `--help` says what each `-v` level does, as `filter_for_verbosity` does it.
#[test]
fn the_verbosity_help_matches_the_filter() {
    use clap::Args;
    let help = Options::augment_args(clap::Command::new("t"))
        .render_long_help()
        .to_string()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    for (levels, words, filter) in [
        ([0, 2], "0-2 info", "info"),
        ([3, 4], "3-4 debug", "ccm_controllers=debug"),
        ([5, 5], "5 trace", "ccm_controllers=trace"),
        ([6, 7], "6-7 debug", "debug"),
        ([8, 9], "8 and more trace", "trace"),
    ] {
        assert!(help.contains(words), "--help lacks {words:?}");
        for v in levels {
            let directives = ccm_controller_manager::filter_for_verbosity(v);
            assert!(directives.split(',').any(|d| d == filter), "-v={v}: {directives}");
        }
    }
}

/// pflag's boolean forms for every boolean flag of `Options`, found by type (a new flag is covered unnamed), and
/// `--help` in plain text: no Markdown code spans.
#[test]
fn every_boolean_flag_takes_gos_forms_and_help_is_plain_text() {
    use clap::Args;
    let cmd = Options::augment_args(clap::Command::new("t"));
    assert_eq!(
        ccm_controller_manager::bool_flag_problems(&cmd),
        Vec::<String>::new()
    );
    for arg in cmd.get_arguments() {
        let help = [arg.get_help(), arg.get_long_help()].into_iter().flatten();
        for text in help.map(ToString::to_string) {
            assert!(!text.contains('`'), "--{}: {text}", arg.get_id());
        }
    }
    let dry_run = cmd
        .get_arguments()
        .find(|a| a.get_long() == Some("dry-run"))
        .unwrap();
    assert_eq!(dry_run.get_help_heading(), Some("Generic"));
}
