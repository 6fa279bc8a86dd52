//! What `lb-plan` and `doctor` share: the cluster's client, found as kubectl finds it (so that each works as a
//! kubectl plugin), the cloud config from a file or from the Helm chart's ConfigMap, and manifests in YAML or
//! JSON. Every error names what it was reading (the file's path, the ConfigMap, the flag).

use std::io::Read as _;

use anyhow::{Context as _, anyhow, bail};
use ccm_aws::CloudConfig;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::config::{KubeConfigOptions, Kubeconfig};
use tokio::sync::OnceCell;

use crate::cli::ConfigMapRef;

pub mod lb_plan;

/// The key of the cloud config in the Helm chart's ConfigMap (templates/configmap.yaml).
pub const CLOUD_CONFIG_KEY: &str = "cloud.conf";

/// The cluster, connected to on first use only: a tool given files for everything never needs a kubeconfig.
pub struct Cluster {
    kubeconfig: Option<String>,
    context: Option<String>,
    client: OnceCell<kube::Client>,
}

impl Cluster {
    /// `--kubeconfig` (else `$KUBECONFIG`, else `~/.kube/config`, then in-cluster) and `--context`.
    pub fn new(kubeconfig: Option<String>, context: Option<String>) -> Self {
        Self {
            kubeconfig,
            context,
            client: OnceCell::new(),
        }
    }

    /// The client, built at the first call.
    pub async fn client(&self) -> anyhow::Result<kube::Client> {
        let client = self.client.get_or_try_init(|| self.connect()).await?;
        Ok(client.clone())
    }

    async fn connect(&self) -> anyhow::Result<kube::Client> {
        let options = KubeConfigOptions {
            context: self.context.clone(),
            ..KubeConfigOptions::default()
        };
        let config = match (&self.kubeconfig, &self.context) {
            (Some(path), _) => {
                let file = Kubeconfig::read_from(path).with_context(|| format!("reading --kubeconfig={path}"))?;
                kube::Config::from_custom_kubeconfig(file, &options)
                    .await
                    .with_context(|| format!("using --kubeconfig={path}"))?
            }
            (None, Some(context)) => kube::Config::from_kubeconfig(&options).await.with_context(|| {
                format!("using --context={context} of the default kubeconfig ($KUBECONFIG, else ~/.kube/config)")
            })?,
            (None, None) => kube::Config::infer().await.context(
                "no --kubeconfig, and neither the default kubeconfig ($KUBECONFIG, else ~/.kube/config) nor the \
                 in-cluster configuration is usable",
            )?,
        };
        kube::Client::try_from(config).context("building the Kubernetes client")
    }
}

/// The cloud config from `--cloud-config` (empty: none) or `--cloud-config-configmap`; its warnings (unknown
/// keys) go to stderr, prefixed with `tool`.
pub async fn cloud_config(
    tool: &str,
    path: Option<&str>,
    configmap: Option<&ConfigMapRef>,
    cluster: &Cluster,
) -> anyhow::Result<CloudConfig> {
    let (config, source) = match configmap {
        Some(cm) => {
            let text = configmap_text(cm, cluster).await?;
            let config = CloudConfig::parse(&text)
                .map_err(|errors| anyhow!("--cloud-config-configmap={cm}: {errors}"))?;
            (config, format!("ConfigMap {cm}"))
        }
        None => {
            let path = path.unwrap_or_default();
            (CloudConfig::load(path)?, path.to_owned())
        }
    };
    for warning in &config.warnings {
        eprintln!("{tool}: warning: cloud config {source}: {warning}");
    }
    Ok(config)
}

/// The ConfigMap's `cloud.conf`, or its only key.
async fn configmap_text(cm: &ConfigMapRef, cluster: &Cluster) -> anyhow::Result<String> {
    let api = kube::Api::<ConfigMap>::namespaced(cluster.client().await?, &cm.namespace);
    let found = api
        .get_opt(&cm.name)
        .await
        .with_context(|| format!("--cloud-config-configmap={cm}: reading the ConfigMap"))?
        .ok_or_else(|| anyhow!("--cloud-config-configmap={cm}: no such ConfigMap"))?;
    let mut data = found.data.unwrap_or_default();
    if let Some(text) = data.remove(CLOUD_CONFIG_KEY) {
        return Ok(text);
    }
    let keys: Vec<String> = data.keys().cloned().collect();
    match (data.pop_first(), keys.len()) {
        (Some((_, text)), 1) => Ok(text),
        _ => bail!(
            "--cloud-config-configmap={cm}: no key {CLOUD_CONFIG_KEY} (and not exactly one key to take instead): \
             keys {keys:?}"
        ),
    }
}

/// A manifest file, YAML or JSON (`-`: stdin), as a JSON value; errors name the path.
pub fn read_manifest(path: &str) -> anyhow::Result<serde_json::Value> {
    let text = if path == "-" {
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .context("reading the manifest from stdin")?;
        text
    } else {
        std::fs::read_to_string(path).with_context(|| format!("reading {path}"))?
    };
    let name = if path == "-" { "stdin" } else { path };
    parse_manifest(&text).with_context(|| format!("{name} is not a YAML or JSON manifest"))
}

/// JSON when it looks like JSON (so that its errors are JSON's), else YAML (a superset).
pub fn parse_manifest(text: &str) -> anyhow::Result<serde_json::Value> {
    if text.trim_start().starts_with('{') {
        Ok(serde_json::from_str(text)?)
    } else {
        Ok(serde_saphyr::from_str(text)?)
    }
}

/// The objects a manifest holds: the items of a List (`kubectl get ... -o yaml` of several), else the object.
pub fn objects(manifest: serde_json::Value) -> Vec<serde_json::Value> {
    let is_list = manifest["kind"]
        .as_str()
        .is_some_and(|kind| kind == "List" || kind.ends_with("List"));
    match (is_list, manifest) {
        (true, serde_json::Value::Object(mut list)) => match list.remove("items") {
            Some(serde_json::Value::Array(items)) => items,
            _ => Vec::new(),
        },
        (_, object) => vec![object],
    }
}
