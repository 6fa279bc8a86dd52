//! The upstream cloud-controller-manager flags (same names, same syntax, same defaults unless documented in
//! `docs/flags.md`), their validation, and the flags accepted for compatibility only.

use std::{net::IpAddr, time::Duration};

use clap::ArgAction;

use crate::{controllers::Registry, duration::parse_go_duration, go_flags::parse_go_bool};

mod compat;
pub use compat::CompatOptions;

/// The smallest positive `--kube-api-qps`: below one request every 10 s a controller manager cannot work, and
/// a tiny rate makes the limiter's waits overflow.
pub const MIN_KUBE_API_QPS: f32 = 0.1;

/// A `--kube-api-qps` value: a finite number, 0 or less (no limit) or at least [`MIN_KUBE_API_QPS`].
fn parse_qps(s: &str) -> Result<f32, String> {
    let qps: f32 = s
        .trim()
        .parse()
        .map_err(|_| format!("{s:?} is not a number (examples: 20, 100, 0.5; 0 disables the limit)"))?;
    if !qps.is_finite() || (qps > 0.0 && qps < MIN_KUBE_API_QPS) {
        return Err(format!(
            "{s:?} is out of range: 0 or less (no limit), or a finite rate of at least {MIN_KUBE_API_QPS} requests per second"
        ));
    }
    Ok(qps)
}

/// The flags of a cloud controller manager. Flatten it into the binary's own `clap::Parser`:
///
/// ```
/// #[derive(clap::Parser)]
/// struct Cli {
///     #[command(flatten)]
///     manager: ccm_controller_manager::Options,
///     // the provider's own flags
/// }
/// let cli = <Cli as clap::Parser>::parse_from(["ccm", "--cloud-provider=aws", "--v=2"]);
/// assert_eq!(cli.manager.v, 2);
/// ```
#[derive(Debug, Clone, clap::Args)]
// As Go's pflag: a repeated scalar flag keeps its last value (lists append).
#[command(args_override_self = true)]
pub struct Options {
    /// The provider of cloud services; must be the name of the provider this binary is built with.
    ///
    /// Required (aws for aws-cloud-controller-manager).
    #[arg(long, default_value = "", value_name = "NAME", help_heading = "Generic")]
    pub cloud_provider: String,
    /// Path to the cloud provider configuration file; empty for none.
    ///
    /// The binary hands it to the provider (for AWS: docs/cloud-config.md).
    #[arg(long, default_value = "", value_name = "PATH", help_heading = "Generic")]
    pub cloud_config: String,
    /// Path to a kubeconfig file with authorization and master location information.
    ///
    /// Empty: the default kubeconfig ($KUBECONFIG, else ~/.kube/config), then the in-cluster configuration.
    #[arg(long, default_value = "", value_name = "PATH", help_heading = "Generic")]
    pub kubeconfig: String,
    /// The address of the Kubernetes API server (overrides any value in the kubeconfig).
    #[arg(long, default_value = "", value_name = "URL", help_heading = "Generic")]
    pub master: String,
    /// Controllers to enable: '*' enables all on-by-default controllers, 'foo' enables foo, '-foo' disables foo
    /// (the first entry naming a controller decides). Comma-separated, repeatable.
    ///
    /// Aliases: cloud-node, cloud-node-lifecycle, service, route. A provider's own controllers are named here too
    /// (AWS: tagging, off by default: --controllers=*,tagging). Unknown names are errors.
    #[arg(long, default_value = "*", value_delimiter = ',', action = ArgAction::Append, value_name = "NAMES", help_heading = "Generic")]
    pub controllers: Vec<String>,
    /// The instance prefix for the cluster, passed to every load balancer and route call.
    #[arg(long, default_value = "kubernetes", help_heading = "Generic")]
    pub cluster_name: String,
    /// Should CIDRs allocated by allocate-node-cidrs be configured on the cloud provider.
    ///
    /// false: the route controller is not started.
    #[arg(long, default_value_t = true, action = ArgAction::Set, num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = parse_go_bool, help_heading = "Generic")]
    pub configure_cloud_routes: bool,
    /// Should CIDRs for Pods be allocated and set on the cloud provider (read by kube-controller-manager; the
    /// cloud controller manager does not use it, as upstream).
    #[arg(long, default_value_t = false, action = ArgAction::Set, num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = parse_go_bool, help_heading = "Generic")]
    pub allocate_node_cidrs: bool,
    /// CIDR range for Pods in the cluster (one, or one IPv4 and one IPv6 comma-separated); needed by the route
    /// controller.
    ///
    /// Invalid values are flag errors. Empty with --configure-cloud-routes=true: the route controller is skipped
    /// with a warning (upstream exits, which makes the Helm chart's default arguments crash-loop on a provider
    /// with routes).
    #[arg(long, default_value = "", value_name = "CIDRS", help_heading = "Generic")]
    pub cluster_cidr: String,
    /// Interval between starting controllers (Go duration, e.g. 0, 500ms).
    ///
    /// Each pause is jittered by a factor in [1, 2).
    #[arg(long, default_value = "0", value_parser = parse_go_duration, value_name = "DURATION", help_heading = "Generic")]
    pub controller_start_interval: Duration,
    /// Use an individual service account credential for each controller.
    ///
    /// Each controller authenticates as kube-system/CLIENT, its client name (node-controller, service-controller,
    /// route-controller, tagging-controller) with a TokenRequest token (1 h, renewed at 80 %); the service account
    /// is created if missing.
    #[arg(long, default_value_t = false, action = ArgAction::Set, num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = parse_go_bool, help_heading = "Generic")]
    pub use_service_account_credentials: bool,
    /// Client-side rate limit (requests per second) towards the API server; 0 or less disables it.
    ///
    /// Default 100 (upstream: 20), shared by every client of the process. A positive rate below 0.1, NaN or inf
    /// is rejected when the flags are parsed. kube-rs has no rate limiter of its own: this one is a tower layer.
    #[arg(long, default_value_t = 100.0, value_parser = parse_qps, value_name = "QPS", help_heading = "Generic")]
    pub kube_api_qps: f32,
    /// Burst above the rate limit.
    ///
    /// Default 3000 (upstream: 30): a 1,000-node burst costs about 3,000 writes (Node update, status patch, Event
    /// per node), and with this burst none waits on the client; the apiserver's priority and fairness still
    /// protects it.
    #[arg(long, default_value_t = 3000, value_name = "N", help_heading = "Generic")]
    pub kube_api_burst: i32,
    /// Run every controller on live data and write nothing (no Kubernetes write, no Lease, no cloud change);
    /// what it would do is logged and served at /dry-run.
    ///
    /// Not an upstream flag. Every controller client refuses POST, PUT, PATCH and DELETE without sending them; no
    /// leader Lease is taken (so it runs beside whichever controller leads; --leader-elect is ignored); in
    /// aws-cloud-controller-manager, no AWS call that changes anything is made (the adapter refuses them). With
    /// --use-service-account-credentials, the controllers read with the manager's own identity (making their
    /// service accounts and tokens would be writes). What it would do is logged per object and change, counted in
    /// cloud_controller_dry_run_pending_changes{controller} and served at /dry-run (docs/migration-from-go.md).
    #[arg(long, default_value_t = false, action = ArgAction::Set, num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = parse_go_bool, help_heading = "Generic")]
    pub dry_run: bool,

    /// Number of Services synced concurrently (at least 1).
    #[arg(
        long,
        default_value_t = 1,
        value_name = "N",
        help_heading = "Service controller"
    )]
    pub concurrent_service_syncs: i32,
    /// Number of concurrent node writes of the cloud-node controller (at least 1).
    ///
    /// Default 10 (upstream: 1): provider lookups are batched here, so this bounds only API writes.
    #[arg(
        long,
        default_value_t = 10,
        value_name = "N",
        help_heading = "Cloud node controller"
    )]
    pub concurrent_node_syncs: i32,
    /// Number of nodes whose status the periodic address refresh updates at once; 0 means the value of
    /// --concurrent-node-syncs.
    #[arg(
        long,
        default_value_t = 0,
        value_name = "N",
        help_heading = "Cloud node controller"
    )]
    pub concurrent_node_status_updates: i32,
    /// How often initialized nodes' addresses are refreshed from the cloud.
    #[arg(long, default_value = "5m", value_parser = parse_go_duration, value_name = "DURATION", help_heading = "Cloud node controller")]
    pub node_status_update_frequency: Duration,
    /// The period between node-lifecycle passes (shut down and deleted instances).
    #[arg(long, default_value = "5s", value_parser = parse_go_duration, value_name = "DURATION", help_heading = "Node lifecycle controller")]
    pub node_monitor_period: Duration,
    /// How often load balancers are checked for drift (changed by hand in the cloud) and the drifted ones
    /// re-ensured; 0 disables it.
    ///
    /// Not an upstream flag: the Go controller repairs drift only on the next change (docs/load-balancers.md).
    #[arg(long, default_value = "10m", value_parser = parse_go_duration, value_name = "DURATION", help_heading = "Service controller")]
    pub load_balancer_resync_period: Duration,
    /// The period between route reconciliation passes.
    #[arg(long, default_value = "10s", value_parser = parse_go_duration, value_name = "DURATION", help_heading = "Route controller")]
    pub route_reconciliation_period: Duration,

    /// Acquire a leader lease before running controllers (for replicated, highly available deployments).
    ///
    /// false: controllers run at once (a warning is logged).
    #[arg(long, default_value_t = true, action = ArgAction::Set, num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = parse_go_bool, help_heading = "Leader election")]
    pub leader_elect: bool,
    /// How long a non-leader waits after the last observed renewal before it takes the lease.
    ///
    /// At least --leader-elect-renew-deadline + 1s, the time controllers get to stop once leadership is lost
    /// (upstream accepts any value above the renew deadline, which can leave two leaders for that moment).
    #[arg(long, default_value = "15s", value_parser = parse_go_duration, value_name = "DURATION", help_heading = "Leader election")]
    pub leader_elect_lease_duration: Duration,
    /// How long the leader keeps retrying renewals before it gives up leading.
    ///
    /// More than 1.2 x --leader-elect-retry-period; timed from when the last successful renewal was sent, not
    /// from its reply (a slow reply does not extend leadership).
    #[arg(long, default_value = "10s", value_parser = parse_go_duration, value_name = "DURATION", help_heading = "Leader election")]
    pub leader_elect_renew_deadline: Duration,
    /// The period between acquire and renew attempts.
    #[arg(long, default_value = "2s", value_parser = parse_go_duration, value_name = "DURATION", help_heading = "Leader election")]
    pub leader_elect_retry_period: Duration,
    /// The lock object type; only leases is supported (as upstream).
    #[arg(long, default_value = "leases", help_heading = "Leader election")]
    pub leader_elect_resource_lock: String,
    /// The name of the Lease.
    #[arg(
        long,
        default_value = "cloud-controller-manager",
        help_heading = "Leader election"
    )]
    pub leader_elect_resource_name: String,
    /// The namespace of the Lease, also of the migration lease.
    #[arg(long, default_value = "kube-system", help_heading = "Leader election")]
    pub leader_elect_resource_namespace: String,
    /// Enable leader migration (moving controllers between kube-controller-manager and this manager).
    ///
    /// Needs --leader-elect.
    #[arg(long, default_value_t = false, action = ArgAction::Set, num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = parse_go_bool, help_heading = "Leader migration")]
    pub enable_leader_migration: bool,
    /// Path to a LeaderMigrationConfiguration file (controllermanager.config.k8s.io v1alpha1, v1beta1 or v1);
    /// empty for the default configuration.
    ///
    /// YAML or JSON, decoded strictly. Set without --enable-leader-migration: an error.
    #[arg(
        long,
        default_value = "",
        value_name = "PATH",
        help_heading = "Leader migration"
    )]
    pub leader_migration_config: String,

    /// The port of the HTTPS server (/healthz, /livez, /readyz, /metrics, /configz); 0 disables it.
    #[arg(
        long,
        default_value_t = 10258,
        value_name = "PORT",
        help_heading = "Secure serving"
    )]
    pub secure_port: i32,
    /// The IP address the HTTPS server listens on.
    #[arg(
        long,
        default_value = "0.0.0.0",
        value_name = "IP",
        help_heading = "Secure serving"
    )]
    pub bind_address: String,
    /// Directory of cloud-controller-manager.crt and cloud-controller-manager.key; generated there (self-signed)
    /// if missing. Empty and no --tls-cert-file: an in-memory self-signed certificate.
    #[arg(long, default_value = "", value_name = "DIR", help_heading = "Secure serving")]
    pub cert_dir: String,
    /// PEM certificate (chain) for HTTPS.
    ///
    /// With --tls-private-key-file: both or neither. Neither and no --cert-dir: an in-memory self-signed
    /// certificate for localhost, 127.0.0.1 and ::1. Read again when the files change (a rotation needs no
    /// restart); a pair that does not load keeps the last good one.
    #[arg(
        long,
        default_value = "",
        value_name = "PATH",
        help_heading = "Secure serving"
    )]
    pub tls_cert_file: String,
    /// PEM private key matching --tls-cert-file.
    #[arg(
        long,
        default_value = "",
        value_name = "PATH",
        help_heading = "Secure serving"
    )]
    pub tls_private_key_file: String,
    /// Minimum TLS version: VersionTLS12 or VersionTLS13 (VersionTLS10/11 are accepted and raised to 1.2).
    #[arg(
        long,
        default_value = "",
        value_name = "VERSION",
        help_heading = "Secure serving"
    )]
    pub tls_min_version: String,

    /// Paths served without authentication and authorization (exact, or a prefix when ending in *).
    ///
    /// Other paths (/metrics) need a token allowed the path by a SubjectAccessReview.
    #[arg(long, default_value = "/healthz,/readyz,/livez", value_delimiter = ',', action = ArgAction::Append, value_name = "PATHS", help_heading = "Secure serving")]
    pub authorization_always_allow_paths: Vec<String>,

    /// Log verbosity, as klog's: 0-2 info (2 is the usual production level), 3-4 debug and 5 trace for this
    /// project's crates, 6-7 debug and 8 and more trace for everything. RUST_LOG, when set, overrides it.
    #[arg(
        short = 'v',
        long = "v",
        default_value_t = 0,
        value_name = "LEVEL",
        help_heading = "Logging"
    )]
    pub v: u8,
    /// Log format: text or json.
    #[arg(long, default_value = "text", value_name = "FORMAT", help_heading = "Logging")]
    pub logging_format: String,

    /// Flags the Go cloud controller manager accepts that have no effect here (a warning is logged when set).
    #[command(flatten)]
    pub compat: CompatOptions,
}

/// Everything wrong with a set of [`Options`], one line per problem, each naming the flag and what it accepts.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid flags:\n  {}", problems.join("\n  "))]
pub struct OptionsError {
    /// One message per problem.
    pub problems: Vec<String>,
}

/// The TLS versions `--tls-min-version` accepts.
pub(crate) const TLS_VERSIONS: &[&str] = &["VersionTLS10", "VersionTLS11", "VersionTLS12", "VersionTLS13"];

// === impl Options ===

impl Options {
    /// The options as if parsed from `args` (without the program name), with no other flags in the command.
    /// For tests and tools; the binary flattens [`Options`] into its own parser.
    pub fn try_parse_from<I, T>(args: I) -> Result<Self, clap::Error>
    where
        I: IntoIterator<Item = T>,
        T: Into<std::ffi::OsString> + Clone,
    {
        use clap::{Args, FromArgMatches};
        let cmd = Self::augment_args(clap::Command::new("cloud-controller-manager").no_binary_name(true));
        let matches = cmd.try_get_matches_from(args)?;
        Self::from_arg_matches(&matches)
    }

    /// Checks every flag against the built-in controllers only; see [`crate::Runtime`] for the check that also
    /// knows the provider's controllers.
    pub fn validate(&self) -> Result<(), OptionsError> {
        self.validate_with(&Registry::builtin())
    }

    pub(crate) fn validate_with(&self, registry: &Registry) -> Result<(), OptionsError> {
        let mut p = Vec::new();
        if self.cloud_provider.trim().is_empty() {
            p.push("--cloud-provider cannot be empty: name the cloud provider this binary serves".to_owned());
        }
        p.extend(registry.validate(&self.controllers));
        self.validate_controller_settings(&mut p);
        if self.leader_elect {
            self.validate_leader_election(&mut p);
        }
        if !self.leader_migration_config.is_empty() && !self.enable_leader_migration {
            p.push("--leader-migration-config is set without --enable-leader-migration=true".to_owned());
        }
        self.validate_serving(&mut p);
        if !["text", "json"].contains(&self.logging_format.as_str()) {
            p.push(format!(
                "--logging-format: {:?} is not supported (accepted: text, json)",
                self.logging_format
            ));
        }
        if p.is_empty() {
            Ok(())
        } else {
            Err(OptionsError { problems: p })
        }
    }

    /// The flags the controllers and their clients are built from, checked here rather than where each is used, so
    /// that every problem is reported at once, before anything starts.
    fn validate_controller_settings(&self, p: &mut Vec<String>) {
        if self.cluster_name.trim().is_empty() {
            p.push("--cluster-name cannot be empty (default: kubernetes)".to_owned());
        }
        if !self.cluster_cidr.trim().is_empty()
            && let Err(e) =
                ccm_controllers::route::RouteConfig::new(&self.cluster_name, self.cluster_cidr.trim())
        {
            p.push(format!(
                "--cluster-cidr: {e} (accepted: one CIDR such as 10.244.0.0/16, or one IPv4 and one IPv6 CIDR separated by a comma)"
            ));
        }
        for (flag, value) in [
            ("--concurrent-service-syncs", self.concurrent_service_syncs),
            ("--concurrent-node-syncs", self.concurrent_node_syncs),
        ] {
            if value < 1 {
                p.push(format!("{flag} must be at least 1, got {value}"));
            }
        }
        if self.concurrent_node_status_updates < 0 {
            p.push(format!(
                "--concurrent-node-status-updates must be 0 (same as --concurrent-node-syncs) or more, got {}",
                self.concurrent_node_status_updates
            ));
        }
        for (flag, value) in [
            (
                "--node-status-update-frequency",
                self.node_status_update_frequency,
            ),
            ("--node-monitor-period", self.node_monitor_period),
            ("--route-reconciliation-period", self.route_reconciliation_period),
        ] {
            if value.is_zero() {
                p.push(format!("{flag} must be a positive duration such as 10s"));
            }
        }
        if self.kube_api_qps > 0.0 && self.kube_api_burst < 1 {
            p.push(format!(
                "--kube-api-burst must be at least 1 when --kube-api-qps is positive, got {}",
                self.kube_api_burst
            ));
        }
    }

    /// The secure port's flags, checked with all the others so that one run reports every problem, rather than
    /// the server failing on the first one once the apiserver has been reached.
    fn validate_serving(&self, p: &mut Vec<String>) {
        if !(0..=65535).contains(&self.secure_port) {
            p.push(format!(
                "--secure-port must be between 0 (disabled) and 65535, got {}",
                self.secure_port
            ));
        }
        if self.bind_address.parse::<IpAddr>().is_err() {
            p.push(format!(
                "--bind-address: {:?} is not an IP address (examples: 0.0.0.0, 127.0.0.1, ::)",
                self.bind_address
            ));
        }
        if self.tls_cert_file.is_empty() != self.tls_private_key_file.is_empty() {
            p.push("--tls-cert-file and --tls-private-key-file must be given together".to_owned());
        }
        if !self.tls_min_version.is_empty() && !TLS_VERSIONS.contains(&self.tls_min_version.as_str()) {
            p.push(format!(
                "--tls-min-version: {:?} is not supported (accepted: {})",
                self.tls_min_version,
                TLS_VERSIONS.join(", ")
            ));
        }
    }

    fn validate_leader_election(&self, p: &mut Vec<String>) {
        if self.leader_elect_resource_lock != "leases" {
            p.push(format!(
                "--leader-elect-resource-lock: {:?} is not supported (accepted: leases)",
                self.leader_elect_resource_lock
            ));
        }
        for (flag, value) in [
            ("--leader-elect-resource-name", &self.leader_elect_resource_name),
            (
                "--leader-elect-resource-namespace",
                &self.leader_elect_resource_namespace,
            ),
        ] {
            if value.trim().is_empty() {
                p.push(format!("{flag} cannot be empty when --leader-elect is true"));
            }
        }
        let (lease, renew, retry) = (
            self.leader_elect_lease_duration,
            self.leader_elect_renew_deadline,
            self.leader_elect_retry_period,
        );
        if lease.is_zero() || renew.is_zero() || retry.is_zero() {
            p.push(
                "--leader-elect-lease-duration, --leader-elect-renew-deadline and --leader-elect-retry-period \
                 must be positive durations"
                    .to_owned(),
            );
        } else {
            if lease <= renew {
                p.push(format!(
                    "--leader-elect-lease-duration ({}) must be greater than --leader-elect-renew-deadline ({})",
                    crate::duration::format_duration(lease),
                    crate::duration::format_duration(renew)
                ));
            } else if lease - renew < crate::leader::LOST_STOP_TIMEOUT {
                // A leader that misses its deadline still runs controllers while they stop; another candidate
                // may take the lease once it expires, so the difference must cover the stop.
                p.push(format!(
                    "--leader-elect-lease-duration ({}) must exceed --leader-elect-renew-deadline ({}) by at least \
                     {}, the time controllers get to stop after leadership is lost",
                    crate::duration::format_duration(lease),
                    crate::duration::format_duration(renew),
                    crate::duration::format_duration(crate::leader::LOST_STOP_TIMEOUT)
                ));
            }
            if renew <= retry.mul_f64(crate::leader::JITTER) {
                p.push(format!(
                    "--leader-elect-renew-deadline ({}) must be greater than 1.2 x --leader-elect-retry-period ({})",
                    crate::duration::format_duration(renew),
                    crate::duration::format_duration(retry)
                ));
            }
        }
    }

    /// The compatibility flags that were set, for the warning the runtime logs at start.
    pub fn ignored_flags(&self) -> Vec<String> {
        self.compat.set_flags()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_bools() {
        assert_eq!(parse_go_bool("T"), Ok(true));
        assert_eq!(parse_go_bool("0"), Ok(false));
        assert!(parse_go_bool("yes").unwrap_err().contains("accepted"));
    }

    #[test]
    fn the_command_is_well_formed() {
        use clap::Args;
        Options::augment_args(clap::Command::new("t")).debug_assert();
    }
}
