//! The flags of `aws-cloud-controller-manager` (examples/aws_cloud_controller_manager.rs; docs/flags.md).

use ccm_aws::tagging::TaggingArgs;
use ccm_controller_manager::{Options, parse_go_bool};
use clap::ArgAction;

/// The runtime's flags, the tagging controller's and the AWS provider's own.
#[derive(Debug, clap::Parser)]
#[command(
    name = "aws-cloud-controller-manager",
    about = "The Kubernetes cloud controller manager for AWS",
    long_about = None
)]
pub struct Cli {
    /// The runtime's flags.
    #[command(flatten)]
    pub manager: Options,
    /// Print version information and quit: true prints aws-cloud-controller-manager v<version>, raw the details.
    ///
    /// The Go binary prints Kubernetes v<release>, which here would name a Kubernetes release this is not;
    /// false: ignored.
    #[allow(dead_code)] // answered by `version_request` before clap parses the arguments
    #[arg(long = "version", num_args = 0..=1, require_equals = true, default_missing_value = "true", value_name = "true|false|raw", help_heading = "Generic")]
    pub version: Option<String>,
    /// The tagging controller's flags.
    #[command(flatten)]
    pub tagging: TaggingArgs,
    /// Replace a load balancer when a Service asks for what only a new one can have, for every Service.
    ///
    /// What only a new one can have: a scheme change; on an NLB also pinned subnets removed or swapped, EIPs,
    /// private addresses, security groups on one made without. The annotation
    /// service.beta.kubernetes.io/aws-load-balancer-allow-recreation: "true" consents for one Service. Without
    /// either, the load balancer is kept as it is, everything else is applied in place, and a
    /// LoadBalancerRecreationRequired Warning Event names what differs (docs/load-balancers.md). Not an upstream
    /// flag.
    #[arg(long, default_value_t = false, action = ArgAction::Set, num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = parse_go_bool, help_heading = "Service controller")]
    pub allow_load_balancer_recreation: bool,
    /// No client-side AWS rate limit (by default half of AWS's documented buckets). Hidden: only for the scale
    /// harness's memory run, which creates 1,000 load balancers in minutes, not the 83 the default allows.
    #[arg(long, hide = true, default_value_t = false, action = ArgAction::Set, num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = parse_go_bool)]
    pub aws_client_rate_limits_off: bool,
}
