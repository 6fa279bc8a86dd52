//! The flags of `doctor` (examples/doctor.rs; docs/doctor.md).

use ccm_controller_manager::parse_go_bool;
use clap::ArgAction;

use super::configmap::ConfigMapRef;

/// Node labels, `key=value` pairs.
pub type Labels = Vec<(String, String)>;

/// `doctor [OPTIONS]`.
#[derive(Debug, clap::Parser)]
#[command(
    name = "doctor",
    version,
    about = "List AWS resources the cluster owns but no Kubernetes object owns any more",
    long_about = None,
    group(clap::ArgGroup::new("config").required(true).args(["cloud_config", "cloud_config_configmap"]))
)]
pub struct Cli {
    /// The cloud config file, as given to the controller (region, VPC, cluster ID, endpoint overrides; empty:
    /// none, instance metadata on EC2).
    #[arg(long, value_name = "PATH")]
    pub cloud_config: Option<String>,
    /// The cloud config from a ConfigMap of the cluster: NAMESPACE/NAME, its key cloud.conf (or its only key).
    ///
    /// The Helm chart's is kube-system/aws-cloud-controller-manager-cloud-config (namespace and nameOverride
    /// values).
    #[arg(long, value_name = "NAMESPACE/NAME", value_parser = ConfigMapRef::parse)]
    pub cloud_config_configmap: Option<ConfigMapRef>,
    /// The kubeconfig for the cluster (else $KUBECONFIG, else ~/.kube/config, then the in-cluster configuration).
    #[arg(long, value_name = "PATH")]
    pub kubeconfig: Option<String>,
    /// The kubeconfig context to use (else its current context).
    #[arg(long, value_name = "NAME")]
    pub context: Option<String>,
    /// The cluster ID, instead of the cloud config's KubernetesClusterID.
    #[arg(long, value_name = "ID")]
    pub cluster_id: Option<String>,
    /// Check only the Nodes with these labels (key=value,...) for stuck initialization.
    #[arg(long, value_parser = parse_labels, default_value = "", value_name = "LABELS")]
    pub node_selector: Labels,
    /// Check only this namespace's Services for failing load balancers.
    #[arg(long, value_name = "NAMESPACE")]
    pub namespace: Option<String>,
    /// Remove the leaked resources that a fresh listing still finds leaked.
    #[arg(long, default_value_t = false, action = ArgAction::Set, num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = parse_go_bool)]
    pub delete: bool,
    /// With --delete: go on when no Node names an EC2 instance, or when no Service is the one any owned load
    /// balancer names (its kubernetes.io/service-name tag or its name): what another cluster's kubeconfig looks
    /// like. Only when the cluster really has no Node on EC2, or no LoadBalancer Service left.
    #[arg(long, default_value_t = false, action = ArgAction::Set, num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = parse_go_bool)]
    pub allow_empty_cluster: bool,
    /// Print JSON instead of text.
    #[arg(long, default_value_t = false, action = ArgAction::Set, num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = parse_go_bool)]
    pub json: bool,
}

/// `--node-selector`: `key=value` pairs separated by commas; empty for none.
pub fn parse_labels(text: &str) -> Result<Labels, String> {
    let pairs = text.split(',').filter(|p| !p.is_empty());
    pairs
        .map(|p| match p.split_once('=') {
            Some((k, v)) if !k.is_empty() => Ok((k.to_owned(), v.to_owned())),
            _ => Err(format!("{p:?} is not key=value")),
        })
        .collect()
}
