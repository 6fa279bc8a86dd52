//! The flags of `lb-plan` (examples/lb_plan.rs; docs/lb-plan.md).

use ccm_controller_manager::parse_go_bool;
use clap::ArgAction;

use super::configmap::ConfigMapRef;

/// `lb-plan [OPTIONS] <NAMESPACE/NAME | -f FILE>`.
#[derive(Debug, clap::Parser)]
#[command(
    name = "lb-plan",
    version,
    about = "Print the load-balancer plan for a Service against the current AWS state, changing nothing",
    long_about = None,
    group(clap::ArgGroup::new("what").required(true).args(["service", "filename"])),
    group(clap::ArgGroup::new("config").required(true).args(["cloud_config", "cloud_config_configmap"]))
)]
pub struct Cli {
    /// The Service in the cluster: NAMESPACE/NAME, or NAME in --namespace.
    #[arg(value_name = "NAMESPACE/NAME")]
    pub service: Option<String>,
    /// The Service manifest, YAML or JSON (- reads stdin), instead of the cluster's Service.
    #[arg(short = 'f', long, visible_alias = "service", value_name = "FILE")]
    pub filename: Option<String>,
    /// The cloud config file, as given to the controller (empty: none, instance metadata on EC2).
    #[arg(long, value_name = "PATH")]
    pub cloud_config: Option<String>,
    /// The cloud config from a ConfigMap of the cluster: NAMESPACE/NAME, its key cloud.conf (or its only key).
    ///
    /// The Helm chart's is kube-system/aws-cloud-controller-manager-cloud-config (namespace and nameOverride
    /// values).
    #[arg(long, value_name = "NAMESPACE/NAME", value_parser = ConfigMapRef::parse)]
    pub cloud_config_configmap: Option<ConfigMapRef>,
    /// A NodeList, YAML or JSON (kubectl get nodes -o yaml), instead of the cluster's Nodes.
    #[arg(long, value_name = "FILE")]
    pub nodes: Option<String>,
    /// The kubeconfig for the cluster (else $KUBECONFIG, else ~/.kube/config, then the in-cluster configuration).
    #[arg(long, value_name = "PATH")]
    pub kubeconfig: Option<String>,
    /// The kubeconfig context to use (else its current context).
    #[arg(long, value_name = "NAME")]
    pub context: Option<String>,
    /// The namespace of a Service given as NAME (else the context's namespace, else default).
    #[arg(short = 'n', long, value_name = "NAMESPACE")]
    pub namespace: Option<String>,
    /// The cluster name, as given to the controller (--cluster-name): it names NLBs' managed security groups.
    #[arg(long, default_value = ccm_load_balancers::DEFAULT_CLUSTER_NAME)]
    pub cluster_name: String,
    /// Print the spec, the desired model and the changes as JSON.
    #[arg(long, default_value_t = false, action = ArgAction::Set, num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = parse_go_bool)]
    pub json: bool,
}
